//! jcs: RFC 8785 JSON canonicalisation of a receipt value, and the
//! `sha256:` interop digest over it.
//!
//! Boundary: [`Value`] → RFC 8785 bytes → SHA-256. The rendering is
//! serde_jcs over a `serde_json::Value` built from ours. serde_jcs renders
//! numbers through an f64 (RFC 8785 section 3.2.2.3), which rounds integers
//! above 2^53 silently; the data model keeps integers within ±(2^53-1), and
//! this module checks that again before rendering, so every integer it
//! renders is exact. The digest is printed for JSON ecosystems and is never
//! a receipt's identity. No I/O.

use super::{MAX_SAFE_INTEGER, Value};
use crate::digest::Digest;

/// RFC 8785 bytes of `value`.
///
/// `None` when the value has no exact RFC 8785 form: it holds a byte string
/// (JSON has none) or an integer outside ±(2^53-1) (RFC 8785 section
/// 3.2.2.3 and RFC 7493 section 2.2: such an integer would be rounded).
pub fn canonical_json(value: &Value) -> Option<Vec<u8>> {
    let json = to_exact_json(value)?;
    serde_jcs::to_vec(&json).ok()
}

/// `sha256:` over the RFC 8785 bytes: printed for JSON ecosystems, never identity.
pub fn interop_digest(value: &Value) -> Option<Digest> {
    canonical_json(value).map(|b| Digest::sha256(&b))
}

/// The value as JSON if every part of it has an exact JSON form.
fn to_exact_json(value: &Value) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    Some(match value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Integer(n) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(n) => J::from(*n),
        Value::Integer(_) | Value::Bytes(_) => return None,
        Value::Text(s) => J::String(s.clone()),
        Value::Array(items) => J::Array(items.iter().map(to_exact_json).collect::<Option<_>>()?),
        Value::Map(m) => J::Object(
            m.iter()
                .map(|(k, v)| Some((k.clone(), to_exact_json(v)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn sorts_keys_by_utf16_and_renders_integers_exactly() {
        let mut m = BTreeMap::new();
        // U+FB33 sorts before U+1F602 bytewise in UTF-8 but after it in UTF-16.
        m.insert("\u{1F602}".to_string(), Value::Integer(MAX_SAFE_INTEGER));
        m.insert("\u{FB33}".to_string(), Value::Integer(-MAX_SAFE_INTEGER));
        m.insert(
            "a".to_string(),
            Value::Array(vec![Value::Null, Value::Bool(true)]),
        );
        let out = String::from_utf8(canonical_json(&Value::Map(m)).unwrap()).unwrap();
        assert_eq!(
            out,
            "{\"a\":[null,true],\"\u{1F602}\":9007199254740991,\"\u{FB33}\":-9007199254740991}"
        );
    }

    #[test]
    fn values_without_exact_json_have_no_digest() {
        assert_eq!(canonical_json(&Value::Bytes(vec![1])), None);
        assert_eq!(interop_digest(&Value::Integer(MAX_SAFE_INTEGER + 1)), None);
        let nested = Value::Array(vec![Value::Integer(i64::MIN)]);
        assert_eq!(canonical_json(&nested), None);
    }
}
