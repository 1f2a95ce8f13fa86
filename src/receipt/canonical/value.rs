//! The value of the receipt data model: maps with text keys, arrays, text,
//! integers in [-(2^53-1), 2^53-1], booleans, null. Byte strings exist only
//! for the log-entry encoding of an envelope; receipts never hold them.

use std::collections::BTreeMap;

/// 2^53 - 1: the largest integer the data model holds (and that JSON
/// consumers read exactly).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// One value of the data model.
///
/// Maps are keyed by text and hold each key once; a `BTreeMap` keeps them
/// in bytewise order, and each encoder applies its own canonical order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer; encoders and decoders keep it within ±[`MAX_SAFE_INTEGER`].
    Integer(i64),
    /// A UTF-8 text string.
    Text(String),
    /// A byte string: only in the log-entry encoding of an envelope.
    Bytes(Vec<u8>),
    /// An array.
    Array(Vec<Value>),
    /// A map with text keys.
    Map(BTreeMap<String, Value>),
}

impl Value {
    /// The map, if this is one.
    pub fn as_map(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The text, if this is one.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// Short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Integer(_) => "integer",
            Value::Text(_) => "text",
            Value::Bytes(_) => "bytes",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
        }
    }
}

/// A [`Value`] borrowed from the bytes it was read from: texts, byte
/// strings and map keys are slices of the input, so reading a payload
/// allocates only its arrays and maps. A map keeps its entries in the
/// order read; the decoder has checked that its keys are unique.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer within ±[`MAX_SAFE_INTEGER`].
    Integer(i64),
    /// A UTF-8 text string.
    Text(&'a str),
    /// A byte string.
    Bytes(&'a [u8]),
    /// An array.
    Array(Vec<ValueRef<'a>>),
    /// A map with unique text keys.
    Map(Vec<(&'a str, ValueRef<'a>)>),
}

impl<'a> ValueRef<'a> {
    /// The owned value.
    pub fn to_value(&self) -> Value {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Bool(b) => Value::Bool(*b),
            ValueRef::Integer(n) => Value::Integer(*n),
            ValueRef::Text(s) => Value::Text((*s).to_owned()),
            ValueRef::Bytes(b) => Value::Bytes(b.to_vec()),
            ValueRef::Array(items) => Value::Array(items.iter().map(ValueRef::to_value).collect()),
            ValueRef::Map(entries) => Value::Map(
                entries
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.to_value()))
                    .collect(),
            ),
        }
    }

    /// The entries, if this is a map.
    pub fn as_map(&self) -> Option<&[(&'a str, ValueRef<'a>)]> {
        match self {
            ValueRef::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The value under `key`, if this is a map holding it.
    pub fn get(&self, key: &str) -> Option<&ValueRef<'a>> {
        self.as_map()?
            .iter()
            .find_map(|(k, v)| (*k == key).then_some(v))
    }

    /// Short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            ValueRef::Null => "null",
            ValueRef::Bool(_) => "boolean",
            ValueRef::Integer(_) => "integer",
            ValueRef::Text(_) => "text",
            ValueRef::Bytes(_) => "bytes",
            ValueRef::Array(_) => "array",
            ValueRef::Map(_) => "map",
        }
    }
}

impl Value {
    /// The value as a [`ValueRef`] borrowing its texts (maps in key order).
    pub fn borrow(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Bool(b) => ValueRef::Bool(*b),
            Value::Integer(n) => ValueRef::Integer(*n),
            Value::Text(s) => ValueRef::Text(s),
            Value::Bytes(b) => ValueRef::Bytes(b),
            Value::Array(items) => ValueRef::Array(items.iter().map(Value::borrow).collect()),
            Value::Map(m) => {
                ValueRef::Map(m.iter().map(|(k, v)| (k.as_str(), v.borrow())).collect())
            }
        }
    }
}
