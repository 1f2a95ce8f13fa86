//! The test vectors printed in spec/identity.md and spec/receipt.md, read
//! from the spec files themselves so that the text cannot drift from the
//! code. Each vector is marked `<!-- vector: NAME -->` and followed by a
//! ```json block (the value) and a plain block of `cbor:`, `id:` and
//! `interop:` lines. Every vector is checked by our code AND independently:
//! serde_ipld_dagcbor decodes the bytes to the value and re-encodes them
//! unchanged, the id is the blake3 crate over the bytes, and the interop
//! digest is SHA-256 over an RFC 8785 rendering written from the RFC alone.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod support;
use support::canonical as canonical_support;

use canonical_support::*;
use ipld_core::ipld::Ipld;
use rcpt::receipt::canonical::{dagcbor, identity, jcs, json};
use std::collections::BTreeMap;

/// One vector: name, JSON text, and its `key: value` lines.
struct Vector {
    name: String,
    json: String,
    fields: BTreeMap<String, String>,
}

/// The fenced block starting after `from`: (its body, the index after it).
fn next_block(lines: &[&str], from: usize) -> (String, usize) {
    let start = from
        + lines[from..]
            .iter()
            .position(|l| l.starts_with("```"))
            .unwrap()
        + 1;
    let len = lines[start..]
        .iter()
        .position(|l| l.starts_with("```"))
        .unwrap();
    (lines[start..start + len].join("\n"), start + len + 1)
}

/// `key: value` lines; indented lines continue the previous value.
fn parse_fields(block: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut last = String::new();
    for line in block.lines() {
        if line.starts_with(' ') {
            out.get_mut(&last)
                .map(|v: &mut String| v.push_str(line.trim()))
                .unwrap();
        } else if let Some((k, v)) = line.split_once(':') {
            last = k.trim().to_owned();
            out.insert(last.clone(), v.trim().to_owned());
        }
    }
    out
}

fn vectors_in(spec: &str) -> Vec<Vector> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("spec")
        .join(spec);
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = line.strip_prefix("<!-- vector: ") else {
            continue;
        };
        let (json, after) = next_block(&lines, i);
        let (fields, _) = next_block(&lines, after);
        out.push(Vector {
            name: name.trim_end_matches(" -->").to_owned(),
            json,
            fields: parse_fields(&fields),
        });
    }
    out
}

fn check(v: &Vector) {
    let value = json::from_json(v.json.as_bytes()).unwrap();
    let bytes = dagcbor::encode(&value);
    let (name, f) = (&v.name, &v.fields);
    // Ours.
    assert_eq!(hex(&bytes), f["cbor"], "{name}: cbor");
    assert_eq!(identity(&bytes).to_string(), f["id"], "{name}: id");
    assert_eq!(
        jcs::interop_digest(&value).unwrap().to_string(),
        f["interop"],
        "{name}"
    );
    // Independent.
    let cbor = unhex(&f["cbor"]);
    let theirs: Ipld = serde_ipld_dagcbor::from_slice(&cbor).unwrap();
    assert_eq!(
        from_ipld(&theirs),
        Ok(value.clone()),
        "{name}: independent decode"
    );
    assert_eq!(
        serde_ipld_dagcbor::to_vec(&theirs).unwrap(),
        cbor,
        "{name}: re-encode"
    );
    assert_eq!(
        format!("blake3:{}", blake3::hash(&cbor).to_hex()),
        f["id"],
        "{name}"
    );
    let rendering = independent_jcs(&value).unwrap();
    let sha = hex(&rcpt::digest::Digest::sha256(rendering.as_bytes()).bytes);
    assert_eq!(format!("sha256:{sha}"), f["interop"], "{name}: interop");
}

#[test]
fn identity_spec_vectors() {
    let vs = vectors_in("identity.md");
    vs.iter().for_each(check);
    assert_eq!(vs.len(), 2);
}

#[test]
fn receipt_spec_vectors() {
    let vs = vectors_in("receipt.md");
    vs.iter().for_each(check);
    assert_eq!(vs.len(), 1);
    // The receipt example is a valid receipt, issued to the same bytes.
    let p = rcpt::receipt::payload_from_json(vs[0].json.as_bytes()).unwrap();
    assert_eq!(hex(&p.bytes), vs[0].fields["cbor"]);
}
