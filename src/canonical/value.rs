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
