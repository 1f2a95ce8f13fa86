//! External vectors for the canonical encodings, and differential tests
//! against independent codecs.
//!
//! - tests/vectors/dagcbor: ipld/codec-fixtures (positive fixtures, the
//!   upstream negative set) and self-authored strictness negatives.
//! - tests/vectors/jcs: cyberphone/json-canonicalization testdata and the
//!   first 10,000 lines of the ES6 number file.
//!
//! Each harness walks its directory and asserts how many cases it ran, so
//! no file is skipped silently. Origins are in each set's README.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;
use support::canonical as canonical_support;

use canonical_support::*;
use ipld_core::ipld::Ipld;
use proptest::prelude::*;
use rcpt::reason::Reason;
use rcpt::receipt::canonical::dagcbor::{self, DecodeError};
use rcpt::receipt::canonical::{jcs, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn vectors(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(set)
}

/// Every file under `dir` whose name ends with `ext`, sorted.
fn walk(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path, ext));
        } else if path.to_string_lossy().ends_with(ext) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The data-model kind a refusal names, to compare with the independent codec.
fn refusal_kind(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Float { .. } => "float",
        DecodeError::Tag { .. } => "tag",
        DecodeError::IntegerOutOfRange { .. } => "integer",
        _ => "other",
    }
}

/// Every kind of thing outside the data model that `v` holds.
fn outside_kinds(v: &Ipld) -> std::collections::BTreeSet<&'static str> {
    let mut out = std::collections::BTreeSet::new();
    match v {
        Ipld::List(items) => items.iter().for_each(|i| out.extend(outside_kinds(i))),
        Ipld::Map(m) => m.values().for_each(|i| out.extend(outside_kinds(i))),
        other => out.extend(from_ipld(other).err()),
    }
    out
}

/// ipld/codec-fixtures: every positive fixture is either accepted by our
/// decoder, re-encoding to the same bytes and to the same value the
/// independent codec reads, or refused as outside the data model
/// (`payload.malformed`) for exactly the reason the independent codec's
/// value shows (a float, a CID tag, an integer beyond 2^53-1).
#[test]
fn codec_fixtures_round_trip_or_are_outside_the_model() {
    let files = walk(&vectors("dagcbor/fixtures"), ".dag-cbor");
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let name = path.display();
        // The file name is the CIDv1 of the bytes: dag-cbor, sha2-256, base32.
        let mut cid = vec![0x01, 0x71, 0x12, 0x20];
        cid.extend(rcpt::digest::Digest::sha256(&bytes).bytes);
        let stem = path.file_stem().unwrap().to_str().unwrap();
        assert_eq!(stem, format!("b{}", base32_lower(&cid)), "{name}: CID");

        let reference: Ipld = serde_ipld_dagcbor::from_slice(&bytes).unwrap();
        match (dagcbor::decode(&bytes), from_ipld(&reference)) {
            (Ok(ours), Ok(theirs)) => {
                assert_eq!(ours, theirs, "{name}: value");
                assert_eq!(dagcbor::encode(&ours), bytes, "{name}: re-encoding");
                *tally.entry("accepted").or_default() += 1;
            }
            (Err(e), Err(_)) => {
                // A fixture may hold several things outside the model; we
                // report the first in byte order, which must be one of them.
                let kind = refusal_kind(&e);
                assert_eq!(e.reason_code(), "payload.malformed", "{name}: {e}");
                assert!(outside_kinds(&reference).contains(kind), "{name}: {e}");
                *tally.entry(kind).or_default() += 1;
            }
            (ours, theirs) => panic!("{name}: ours {ours:?}, independent {theirs:?}"),
        }
    }
    assert_eq!(files.len(), 128, "fixture count");
    // What the set holds, as found when the vectors were first run: the 7
    // integers are those beyond ±(2^53-1); tags are CIDs (dagpb_* and cid-*).
    let expected = [("accepted", 60), ("float", 21), ("integer", 7), ("tag", 40)];
    assert_eq!(tally, expected.into_iter().collect(), "tally");
}

/// Reason code each negative vector must get, by name prefix.
fn expected_code(name: &str) -> &'static str {
    let non_canonical = [
        "unsorted",
        "bytewise-but-not-length-first",
        "duplicate",
        "non-shortest",
        "indefinite",
    ];
    if non_canonical.iter().any(|p| name.starts_with(p)) {
        "payload.non_canonical"
    } else {
        "payload.malformed"
    }
}

/// Upstream and self-authored negatives: every one refused by us with the
/// expected class of reason, and by the independent codec too.
#[test]
fn negative_vectors_are_refused() {
    let files = [
        vectors("dagcbor/negative-fixtures/dag-cbor/decode/duplicate-keys.json"),
        vectors("dagcbor/negative-extra-selfauthored.json"),
    ];
    let mut count = 0;
    for file in files {
        let cases: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let bytes = unhex(case["hex"].as_str().unwrap());
            let err = dagcbor::decode(&bytes).expect_err(name);
            assert_eq!(err.reason_code(), expected_code(name), "{name}: {err}");
            assert!(
                serde_ipld_dagcbor::from_slice::<Ipld>(&bytes).is_err(),
                "{name}"
            );
            count += 1;
        }
    }
    assert_eq!(count, 26);
}

/// The lead's finding, checked here: ciborium 0.2 accepts non-canonical
/// forms that our decoder refuses (so it cannot be the strict decoder).
#[test]
fn ciborium_is_lenient_where_we_are_strict() {
    for h in ["a2616202616101", "1801", "9f0102ff", "a2616101616102"] {
        let bytes = unhex(h);
        assert!(
            ciborium::de::from_reader::<ciborium::Value, _>(&bytes[..]).is_ok(),
            "{h}"
        );
        let err = dagcbor::decode(&bytes).expect_err(h);
        assert_eq!(err.reason_code(), Reason::PayloadNonCanonical, "{h}: {err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Our encoding decodes under the independent codec to the same value,
    /// which it re-encodes to the same bytes; and we decode it back.
    #[test]
    fn encode_agrees_with_serde_ipld_dagcbor(v in arb_value(true)) {
        let bytes = dagcbor::encode(&v);
        let theirs: Ipld = serde_ipld_dagcbor::from_slice(&bytes).unwrap();
        prop_assert_eq!(from_ipld(&theirs), Ok(v.clone()));
        prop_assert_eq!(serde_ipld_dagcbor::to_vec(&to_ipld(&v)).unwrap(), bytes.clone());
        prop_assert_eq!(dagcbor::decode(&bytes), Ok(v));
    }

    /// Differential fuzz on mutated encodings: never a panic; whatever we
    /// accept, the independent codec accepts as the same value, and it is
    /// exactly our canonical encoding of that value.
    #[test]
    fn mutated_bytes_accepted_only_when_canonical(
        v in arb_value(true),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = dagcbor::encode(&v);
        for (i, b) in edits {
            let at = i.index(bytes.len());
            bytes[at] = b;
        }
        if let Ok(ours) = dagcbor::decode(&bytes) {
            prop_assert_eq!(dagcbor::encode(&ours), bytes.clone());
            let theirs: Ipld = serde_ipld_dagcbor::from_slice(&bytes).unwrap();
            prop_assert_eq!(from_ipld(&theirs), Ok(ours));
        }
    }

    /// Our RFC 8785 rendering equals one written from the RFC text alone,
    /// and JSON text of any key order and spacing reads back to the value.
    #[test]
    fn jcs_agrees_with_independent_rendering(v in arb_value(false)) {
        let ours = String::from_utf8(jcs::canonical_json(&v).unwrap()).unwrap();
        prop_assert_eq!(Some(ours.clone()), independent_jcs(&v));
        prop_assert_eq!(json::from_json(ours.as_bytes()), Ok(v.clone()));
        let pretty = serde_json::to_vec_pretty(&json::to_json(&v)).unwrap();
        prop_assert_eq!(json::from_json(&pretty), Ok(v));
    }
}

/// cyberphone/json-canonicalization testdata: serde_jcs (the renderer
/// `jcs::canonical_json` uses) gives `output/X.json` and `outhex/X.txt`
/// for every `input/X.json`; inputs inside the data model (no fractions)
/// give the same bytes through our own reader and renderer.
#[test]
fn rfc8785_testdata() {
    let dir = vectors("jcs/testdata");
    let inputs = walk(&dir.join("input"), ".json");
    let mut in_model = Vec::new();
    for input in &inputs {
        let name = input.file_stem().unwrap().to_str().unwrap();
        let text = std::fs::read(input).unwrap();
        let expected = std::fs::read(dir.join("output").join(format!("{name}.json"))).unwrap();
        let outhex = std::fs::read_to_string(dir.join("outhex").join(format!("{name}.txt")));
        assert_eq!(unhex(&outhex.unwrap()), expected, "{name}: outhex");
        let parsed: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(
            serde_jcs::to_vec(&parsed).unwrap(),
            expected,
            "{name}: serde_jcs"
        );
        if let Ok(v) = json::from_json(&text) {
            assert_eq!(jcs::canonical_json(&v).unwrap(), expected, "{name}: ours");
            in_model.push(name.to_owned());
        }
    }
    assert_eq!(inputs.len(), 6);
    assert_eq!(in_model, ["arrays", "french", "unicode", "weird"]);
}

/// ES6 number serialisation (RFC 8785 section 3.2.2.3) of serde_jcs, the
/// number formatter behind `jcs::canonical_json`, over the first 10,000
/// lines of the upstream test file: `<ieee754 bits in hex>,<expected>`.
#[test]
fn es6_number_file() {
    let text = std::fs::read_to_string(vectors("jcs/es6testfile_10000.txt")).unwrap();
    let mut count = 0;
    for line in text.lines() {
        let (bits, expected) = line.split_once(',').unwrap();
        let f = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
        assert_eq!(serde_jcs::to_string(&f).unwrap(), expected, "bits {bits}");
        count += 1;
    }
    assert_eq!(count, 10_000);
}
