//! Test support for the canonical and receipt tests: an independent RFC 8785
//! renderer for the data model, conversions to and from the independent
//! codec's value (ipld-core's `Ipld`, decoded by serde_ipld_dagcbor),
//! generators of arbitrary values, and a sample payload.

use ipld_core::ipld::Ipld;
use proptest::prelude::*;
use rcpt::receipt::canonical::{MAX_SAFE_INTEGER, Value};
use std::collections::BTreeMap;

/// Hex string to bytes.
pub fn unhex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Bytes to lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 8785 written from the RFC text alone, for the integer-only data
/// model: keys sorted by UTF-16 code units (section 3.2.3), strings escaped
/// as section 3.2.2.2 says, integers in plain decimal (what ES6
/// Number.prototype.toString gives for |n| < 2^53), no whitespace.
pub fn independent_jcs(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Integer(n) if n.abs() <= MAX_SAFE_INTEGER => n.to_string(),
        Value::Integer(_) | Value::Bytes(_) => return None,
        Value::Text(s) => jcs_string(s),
        Value::Array(items) => {
            let parts: Option<Vec<String>> = items.iter().map(independent_jcs).collect();
            format!("[{}]", parts?.join(","))
        }
        Value::Map(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            let mut parts = Vec::new();
            for k in keys {
                parts.push(format!("{}:{}", jcs_string(k), independent_jcs(&m[k])?));
            }
            format!("{{{}}}", parts.join(","))
        }
    })
}

/// RFC 8785 section 3.2.2.2 string serialisation.
fn jcs_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The independent codec's value as ours; `Err` names what lies outside
/// the data model.
pub fn from_ipld(v: &Ipld) -> Result<Value, &'static str> {
    Ok(match v {
        Ipld::Null => Value::Null,
        Ipld::Bool(b) => Value::Bool(*b),
        Ipld::Integer(n) if n.abs() <= i128::from(MAX_SAFE_INTEGER) => {
            Value::Integer(i64::try_from(*n).unwrap())
        }
        Ipld::Integer(_) => return Err("integer"),
        Ipld::Float(_) => return Err("float"),
        Ipld::Link(_) => return Err("tag"),
        Ipld::String(s) => Value::Text(s.clone()),
        Ipld::Bytes(b) => Value::Bytes(b.clone()),
        Ipld::List(items) => {
            Value::Array(items.iter().map(from_ipld).collect::<Result<_, &str>>()?)
        }
        Ipld::Map(m) => Value::Map(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), from_ipld(v)?)))
                .collect::<Result<_, &str>>()?,
        ),
    })
}

/// Our value as the independent codec's.
pub fn to_ipld(v: &Value) -> Ipld {
    match v {
        Value::Null => Ipld::Null,
        Value::Bool(b) => Ipld::Bool(*b),
        Value::Integer(n) => Ipld::Integer(i128::from(*n)),
        Value::Text(s) => Ipld::String(s.clone()),
        Value::Bytes(b) => Ipld::Bytes(b.clone()),
        Value::Array(items) => Ipld::List(items.iter().map(to_ipld).collect()),
        Value::Map(m) => Ipld::Map(m.iter().map(|(k, v)| (k.clone(), to_ipld(v))).collect()),
    }
}

/// Arbitrary values of the data model (bytes included when `bytes`),
/// integers biased to the edges of the range, nesting at most 4.
pub fn arb_value(bytes: bool) -> impl Strategy<Value = Value> {
    let int = prop_oneof![
        -30i64..30,
        Just(MAX_SAFE_INTEGER),
        Just(-MAX_SAFE_INTEGER),
        -MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER,
        prop::sample::select(vec![23i64, 24, 255, 256, 65535, 65536, 1 << 32, -25, -257]),
    ];
    let text = prop_oneof!["[a-z]{0,3}", "\\PC{0,12}", "[\\x00-\\x1f\"\\\\]{0,4}"];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        int.prop_map(Value::Integer),
        text.prop_map(Value::Text),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(move |b| if bytes {
            Value::Bytes(b)
        } else {
            Value::Null
        }),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("\\PC{0,6}", inner, 0..6).prop_map(Value::Map),
        ]
    })
}

/// RFC 4648 base32, lowercase, no padding (the multibase `b` alphabet).
pub fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in bytes {
        acc = (acc << 8) | u32::from(*b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((acc >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// A valid version-1 payload (the example of spec/receipt.md).
pub const SAMPLE_PAYLOAD: &str = r#"{
  "version": 1,
  "issuer": "gate.example",
  "issued_at": 1767225600,
  "substrate": "git",
  "change_id": "blake3:1111111111111111111111111111111111111111111111111111111111111111",
  "inverse_delta_id": "blake3:2222222222222222222222222222222222222222222222222222222222222222",
  "reversibility": true,
  "read_set": [
    {"resource": "refs/heads/main", "digest": "sha256:3333333333333333333333333333333333333333333333333333333333333333"},
    {"resource": "src/lib.rs", "digest": "blake3:4444444444444444444444444444444444444444444444444444444444444444"}
  ],
  "precondition": null,
  "policy_id": "sha256:5555555555555555555555555555555555555555555555555555555555555555",
  "verdict": {"admit": {"proof": "blake3:6666666666666666666666666666666666666666666666666666666666666666"}},
  "applied": true,
  "replay": {"class": "mixed", "proposal": "llm", "execution": "deterministic"}
}"#;

/// The sample payload as a mutable JSON value.
pub fn sample_json() -> serde_json::Value {
    serde_json::from_str(SAMPLE_PAYLOAD).unwrap()
}

/// Convenience: a BTreeMap from pairs.
pub fn map(entries: &[(&str, Value)]) -> Value {
    Value::Map(
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    )
}
