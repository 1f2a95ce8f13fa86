//! strictjson: the checks serde_json does not make on untrusted JSON.
//!
//! serde_json keeps the last of two equal keys and allows 128 levels of
//! nesting. Before a document is deserialized into a typed struct, [`check`]
//! walks it once and refuses duplicate keys, nesting deeper than a limit and
//! trailing data, so that two readers of one file cannot see two values.

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// Why a JSON document was refused before typed parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictJsonError {
    /// An object names `key` twice (`at` is serde_json's line and column).
    #[error("duplicate key \"{key}\" {at}")]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// Where, as "at line L column C".
        at: String,
    },
    /// Not JSON, too deep, or trailing data (serde_json's message carries
    /// the line and column).
    #[error("{0}")]
    Invalid(String),
}

/// Marks the serde error raised for a repeated key, so it can be told apart.
const DUPLICATE_MARKER: &str = "\u{0}duplicate key\u{0}";

/// Refuse duplicate object keys, nesting deeper than `max_depth`, and
/// anything after the document.
pub fn check(bytes: &[u8], max_depth: usize) -> Result<(), StrictJsonError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Walk {
        depth_left: max_depth,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end())
    .map_err(|e| classify(&e.to_string()))
}

/// Turn serde_json's message back into a typed error.
fn classify(message: &str) -> StrictJsonError {
    match message.strip_prefix(DUPLICATE_MARKER) {
        Some(rest) => {
            let (key, at) = rest.split_once(DUPLICATE_MARKER).unwrap_or((rest, ""));
            StrictJsonError::DuplicateKey {
                key: key.to_string(),
                at: at.trim().to_string(),
            }
        }
        None => StrictJsonError::Invalid(message.to_string()),
    }
}

/// One level of the walk: how many more levels of nesting are allowed.
struct Walk {
    depth_left: usize,
}

impl Walk {
    /// The walker for a nested container, or an error past the limit.
    fn nested<E: serde::de::Error>(&self) -> Result<Walk, E> {
        match self.depth_left.checked_sub(1) {
            Some(depth_left) => Ok(Walk { depth_left }),
            None => Err(E::custom("JSON nesting is deeper than the limit")),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        while seq.next_element_seed(Walk { ..inner })?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        // Objects here have a handful of keys: a linear scan over borrowed
        // keys costs less than hashing owned ones.
        let mut seen: Vec<Cow<'de, str>> = Vec::new();
        while let Some(key) = map.next_key_seed(Key)? {
            if seen.contains(&key) {
                return Err(A::Error::custom(format!(
                    "{DUPLICATE_MARKER}{key}{DUPLICATE_MARKER}"
                )));
            }
            seen.push(key);
            map.next_value_seed(Walk { ..inner })?;
        }
        Ok(())
    }
}

/// Reads an object key, borrowing it from the input when it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_duplicates_depth_and_trailing_data() {
        assert!(check(br#"{"a": [1, {"b": null}], "c": "x"}"#, 3).is_ok());
        let dup = check(br#"{"a": 1, "b": {"a": 1, "a": 2}}"#, 8).unwrap_err();
        assert!(
            matches!(&dup, StrictJsonError::DuplicateKey { key, .. } if key == "a"),
            "{dup}"
        );
        assert!(
            dup.to_string().starts_with("duplicate key \"a\" at line 1"),
            "{dup}"
        );
        assert!(check(b"[[[1]]]", 3).is_ok());
        assert!(check(b"[[[[1]]]]", 3).is_err());
        assert!(check(b"{} {}", 3).is_err());
        assert!(check(b"{\"a\":1", 3).is_err());
        // 100,000 nested arrays: refused at the limit, no stack overflow.
        let deep = "[".repeat(100_000);
        assert!(check(deep.as_bytes(), 32).is_err());
    }
}
