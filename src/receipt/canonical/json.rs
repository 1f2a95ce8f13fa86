//! json: read a receipt value from JSON text, strictly, and write it back.
//!
//! Boundary: JSON text (RFC 8259) → [`Value`], and [`Value`] → a
//! `serde_json::Value` for display. The reader refuses what the data model
//! cannot hold or what would make one text mean two values: duplicate keys
//! (serde_json alone keeps the last one silently), numbers that are not
//! integers within ±(2^53-1) (RFC 7493 I-JSON section 2.2), nesting beyond
//! `MAX_VALUE_DEPTH`, trailing data and input over `MAX_PAYLOAD_JSON_BYTES`.
//! No I/O.

use super::{MAX_SAFE_INTEGER, Value};
use crate::limits::{MAX_PAYLOAD_JSON_BYTES, MAX_VALUE_DEPTH};
use base64::Engine as _;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;

/// Why JSON text was refused. Positions are 1-based line and column as
/// serde_json reports them (the point where the reader stopped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// Over `MAX_PAYLOAD_JSON_BYTES`; nothing was parsed.
    #[error("JSON is {0} bytes, over the limit of {max} bytes", max = MAX_PAYLOAD_JSON_BYTES)]
    TooLarge(usize),
    /// Not JSON text (syntax, invalid UTF-8, lone surrogate escape, ...).
    #[error("JSON syntax error at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// The same key twice in one object.
    #[error(
        "duplicate key {key:?} at line {line}, column {column}: each key may appear once; \
         remove one of them"
    )]
    DuplicateKey {
        key: String,
        line: usize,
        column: usize,
    },
    /// A number with a fraction or exponent, or an integer too large for
    /// 64 bits (serde_json reads both as floats).
    #[error(
        "number at line {line}, column {column} is not an integer (found {found}): \
         the data model holds integers in ±(2^53-1) only, written without fraction or exponent"
    )]
    NotAnInteger {
        found: String,
        line: usize,
        column: usize,
    },
    /// An integer outside ±(2^53-1).
    #[error(
        "integer {found} at line {line}, column {column} is outside ±(2^53-1) \
         (9007199254740991)"
    )]
    IntegerOutOfRange {
        found: String,
        line: usize,
        column: usize,
    },
    /// Arrays and objects nested deeper than `MAX_VALUE_DEPTH`.
    #[error("nesting deeper than {max} at line {line}, column {column}", max = MAX_VALUE_DEPTH)]
    TooDeep { line: usize, column: usize },
    /// Non-whitespace after the top-level value.
    #[error("trailing data after the JSON value at line {line}, column {column}")]
    TrailingData { line: usize, column: usize },
}

/// A refusal found inside the visitor, before serde_json adds the position.
#[derive(Debug)]
enum Found {
    Duplicate(String),
    NotAnInteger(String),
    OutOfRange(String),
    TooDeep,
}

/// Parse JSON text into a value: duplicate keys, floats, integers beyond
/// ±(2^53-1), nesting deeper than `MAX_VALUE_DEPTH` and trailing data are refused.
pub fn from_json(text: &[u8]) -> Result<Value, JsonError> {
    if text.len() > MAX_PAYLOAD_JSON_BYTES {
        return Err(JsonError::TooLarge(text.len()));
    }
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(text);
    let seed = Seed {
        depth: 0,
        found: &found,
    };
    let value = seed
        .deserialize(&mut de)
        .map_err(|e| classify(e, found.take()))?;
    de.end().map_err(|e| JsonError::TrailingData {
        line: e.line(),
        column: e.column(),
    })?;
    Ok(value)
}

/// Turn serde_json's error into ours, using the refusal the visitor recorded.
fn classify(e: serde_json::Error, found: Option<Found>) -> JsonError {
    let (line, column) = (e.line(), e.column());
    match found {
        Some(Found::Duplicate(key)) => JsonError::DuplicateKey { key, line, column },
        Some(Found::NotAnInteger(found)) => JsonError::NotAnInteger {
            found,
            line,
            column,
        },
        Some(Found::OutOfRange(found)) => JsonError::IntegerOutOfRange {
            found,
            line,
            column,
        },
        Some(Found::TooDeep) => JsonError::TooDeep { line, column },
        None => JsonError::Syntax {
            line,
            column,
            message: e.to_string(),
        },
    }
}

/// Deserialize one value at `depth`, recording why it refused in `found`.
#[derive(Clone, Copy)]
struct Seed<'r> {
    depth: usize,
    found: &'r RefCell<Option<Found>>,
}

impl Seed<'_> {
    /// Record a refusal and return the error that stops serde_json.
    fn refuse<E: de::Error>(self, found: Found) -> E {
        let msg = format!("{found:?}");
        *self.found.borrow_mut() = Some(found);
        E::custom(msg)
    }

    /// The seed for the items of a container, or a refusal past the limit.
    fn nested<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_VALUE_DEPTH {
            return Err(self.refuse(Found::TooDeep));
        }
        Ok(Seed {
            depth: self.depth + 1,
            found: self.found,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value of the receipt data model")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&v) {
            Ok(Value::Integer(v))
        } else {
            Err(self.refuse(Found::OutOfRange(v.to_string())))
        }
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        match i64::try_from(v) {
            Ok(n) => self.visit_i64(n),
            Err(_) => Err(self.refuse(Found::OutOfRange(v.to_string()))),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Err(self.refuse(Found::NotAnInteger(v.to_string())))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Text(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::Text(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(self.refuse(Found::Duplicate(key)));
            }
            let item = map.next_value_seed(inner)?;
            out.insert(key, item);
        }
        Ok(Value::Map(out))
    }
}

/// The value as a serde_json value (for display); byte strings as base64 text.
pub fn to_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Integer(n) => J::from(*n),
        Value::Text(s) => J::String(s.clone()),
        Value::Bytes(b) => J::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Value::Array(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Map(m) => J::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_data_model() {
        let v = from_json(br#" {"b": [1, -2, true, null], "a": "x\u00e9"} "#).unwrap();
        let mut m = BTreeMap::new();
        m.insert("a".to_string(), Value::Text("xé".into()));
        let arr = vec![
            Value::Integer(1),
            Value::Integer(-2),
            Value::Bool(true),
            Value::Null,
        ];
        m.insert("b".to_string(), Value::Array(arr));
        assert_eq!(v, Value::Map(m));
    }

    #[test]
    fn refuses_duplicates_at_any_depth() {
        let e = from_json(br#"{"a": {"k": 1, "k": 2}}"#).unwrap_err();
        assert!(
            matches!(e, JsonError::DuplicateKey { ref key, .. } if key == "k"),
            "{e}"
        );
        // Escapes are resolved before comparing: "\u0061" is "a".
        let e = from_json(br#"{"a": 1, "\u0061": 2}"#).unwrap_err();
        assert!(
            matches!(e, JsonError::DuplicateKey { ref key, .. } if key == "a"),
            "{e}"
        );
    }

    #[test]
    fn refuses_numbers_outside_the_model() {
        assert_eq!(
            from_json(b"9007199254740991"),
            Ok(Value::Integer(MAX_SAFE_INTEGER))
        );
        assert_eq!(
            from_json(b"-9007199254740991"),
            Ok(Value::Integer(-MAX_SAFE_INTEGER))
        );
        for t in [
            "9007199254740992",
            "-9007199254740992",
            "18446744073709551615",
        ] {
            let e = from_json(t.as_bytes()).unwrap_err();
            assert!(matches!(e, JsonError::IntegerOutOfRange { .. }), "{t}: {e}");
        }
        for t in [
            "1.0",
            "1e2",
            "0.5",
            "-1E0",
            "123456789012345678901234567890",
        ] {
            let e = from_json(t.as_bytes()).unwrap_err();
            assert!(matches!(e, JsonError::NotAnInteger { .. }), "{t}: {e}");
        }
    }

    #[test]
    fn refuses_depth_trailing_size_and_syntax() {
        let ok = format!(
            "{}{}",
            "[".repeat(MAX_VALUE_DEPTH),
            "]".repeat(MAX_VALUE_DEPTH)
        );
        assert!(from_json(ok.as_bytes()).is_ok());
        let n = MAX_VALUE_DEPTH + 1;
        let deep = format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(matches!(
            from_json(deep.as_bytes()),
            Err(JsonError::TooDeep { .. })
        ));
        assert!(matches!(
            from_json(b"{} {}"),
            Err(JsonError::TrailingData { .. })
        ));
        assert!(matches!(from_json(b"{"), Err(JsonError::Syntax { .. })));
        assert!(matches!(
            from_json(br#""\ud800""#),
            Err(JsonError::Syntax { .. })
        ));
        let big = vec![b' '; MAX_PAYLOAD_JSON_BYTES + 1];
        assert_eq!(
            from_json(&big),
            Err(JsonError::TooLarge(MAX_PAYLOAD_JSON_BYTES + 1))
        );
    }

    #[test]
    fn to_json_round_trips_and_shows_bytes_as_base64() {
        let v = from_json(br#"{"a":[1,"x",null,false]}"#).unwrap();
        let text = serde_json::to_vec(&to_json(&v)).unwrap();
        assert_eq!(from_json(&text), Ok(v));
        assert_eq!(
            to_json(&Value::Bytes(vec![0xff])),
            serde_json::json!("/w==")
        );
    }
}
