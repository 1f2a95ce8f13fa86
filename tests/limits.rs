//! Every named limit of `src/limits.rs` that guards input (issue 5 item 3):
//! at the limit it is accepted where that makes sense, just over it it is
//! refused with an error naming the limit, and the check comes before the
//! work. Through the CLI where the CLI reads files: 1 GiB (sparse) inputs
//! are refused under a virtual-memory cap, so an attempt to read them whole
//! would fail loudly; 100,000-deep JSON is refused without a stack overflow.
//!
//! No assertion is on wall time: "quickly" is shown by the cap (the process
//! cannot hold the file) and by the refusal naming the size limit.

// A wrong index here fails a test, never the library.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod support;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcpt::bundle::{BundleError, RawBundle, decode_hashes};
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::keys::SigningKey;
use rcpt::limits::*;
use rcpt::reason::Reason;
use rcpt::receipt::canonical::{Value, dagcbor};
use rcpt::receipt::dsse::{EntryError, Envelope, EnvelopeError, Signature};
use rcpt::receipt::{PayloadError, Receipt, SchemaError, payload_from_cbor, payload_from_json};
use rcpt::tlog::note::{Note, NoteError};
use rcpt::trust::{Trust, TrustError};
use rcpt::verify::{CheckVerdict, Outcome, Report};
use std::path::{Path, PathBuf};
use support::{bundle_json, bundle_path, corpus, rcpt, rcpt_bin, verifier};

/// A gibibyte: the size of the sparse files the CLI must refuse.
const GIB: u64 = 1 << 30;
/// Virtual-memory cap (KiB) for CLI runs on huge inputs. The binary runs a
/// normal verify, issue and append under it with room to spare (checked by
/// `the_memory_cap_admits_normal_runs`), and it cannot hold 1 GiB.
const VMEM_CAP_KIB: u64 = 400_000;
/// Depth of the deeply nested JSON documents.
const DEEP: usize = 100_000;

/// The failure reason of the check named `name`, if it failed.
fn failed_reason(report: &Report, name: &str) -> Option<&'static str> {
    report
        .checks
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| match &c.result {
            Ok(CheckVerdict::Fail(f)) => Some(f.reason.as_str()),
            _ => None,
        })
}

/// `[[[...]]]`, `depth` deep.
fn deep_array(depth: usize) -> Vec<u8> {
    [vec![b'['; depth], vec![b']'; depth]].concat()
}

/// A sparse file of `len` bytes (no disk blocks written).
fn sparse(dir: &Path, name: &str, len: u64) -> PathBuf {
    let path = dir.join(name);
    std::fs::File::create(&path).unwrap().set_len(len).unwrap();
    path
}

/// `rcpt ARGS...` under `ulimit -v VMEM_CAP_KIB`.
fn rcpt_capped(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let bin = rcpt_bin();
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {VMEM_CAP_KIB}; exec \"$0\" \"$@\""))
        .arg(bin)
        .args(args)
        .output()
        .unwrap()
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

/// A deterministic signing key.
fn signing_key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// A key file pair and an initialised log under `dir`; returns (log dir, key).
fn new_log(dir: &Path) -> (PathBuf, PathBuf) {
    let prefix = dir.join("log");
    rcpt()
        .args(["key", "generate", "--name", "limits.example/log", "--out"])
        .arg(&prefix)
        .assert()
        .success();
    let key = dir.join("log.key");
    let log = dir.join("tlog");
    rcpt()
        .args(["log", "init"])
        .arg(&log)
        .args(["--origin", "limits.example/log", "--key"])
        .arg(&key)
        .assert()
        .success();
    (log, key)
}

/// The deny-verdict payload of the corpus as a canonical value.
fn deny_payload() -> Value {
    let b = bundle_json("verdict-deny");
    let env = Envelope::from_json(b["envelope"].to_string().as_bytes()).unwrap();
    dagcbor::decode(&env.payload).unwrap()
}

/// `value` with `edit` applied to its top-level map.
fn edited(
    value: &Value,
    edit: impl FnOnce(&mut std::collections::BTreeMap<String, Value>),
) -> Value {
    let Value::Map(mut m) = value.clone() else {
        panic!("payload is a map")
    };
    edit(&mut m);
    Value::Map(m)
}

/// A deny verdict with these reasons.
fn deny(reasons: Vec<String>) -> Value {
    let reasons = Value::Array(reasons.into_iter().map(Value::Text).collect());
    let inner = Value::Map([("reasons".to_string(), reasons)].into());
    Value::Map([("deny".to_string(), inner)].into())
}

fn schema_field(err: Result<Receipt, SchemaError>) -> String {
    match err {
        Err(SchemaError::Field { field, detail }) => format!("{field}: {detail}"),
        other => panic!("expected a field error, got {other:?}"),
    }
}

// ---- MAX_BUNDLE_BYTES -------------------------------------------------

#[test]
fn bundle_at_the_limit_verifies_and_one_byte_over_fails() {
    let bytes = std::fs::read(bundle_path("size-7-index-3")).unwrap();
    let mut at = bytes.clone();
    // JSON whitespace after the document keeps it the same bundle.
    at.resize(MAX_BUNDLE_BYTES, b' ');
    let v = verifier();
    assert_eq!(v.verify_bytes(&at).outcome(), Outcome::Verified);
    let mut over = at;
    over.push(b' ');
    let report = v.verify_bytes(&over);
    assert_eq!(report.outcome(), Outcome::Failed);
    assert_eq!(report.primary_reason(), Some(Reason::BundleTooLarge));
    assert_eq!(
        RawBundle::parse(&over).unwrap_err(),
        BundleError::TooLarge(MAX_BUNDLE_BYTES + 1)
    );
}

#[test]
fn verify_refuses_a_1_gib_bundle_under_a_memory_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let big = sparse(tmp.path(), "big.json", GIB);
    let trust = corpus().join("trust.json");
    let out = rcpt_capped(&[
        os("verify"),
        os("--trust"),
        trust.as_os_str(),
        big.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("bundle.too_large"), "{stdout}");
}

// ---- MAX_ENVELOPE_BYTES / MAX_STDIN_LINE_BYTES -------------------------

#[test]
fn envelope_at_the_limit_parses_and_one_byte_over_is_refused() {
    let b = bundle_json("verdict-admit");
    let mut at = b["envelope"].to_string().into_bytes();
    at.resize(MAX_ENVELOPE_BYTES, b' ');
    assert!(Envelope::from_json(&at).is_ok());
    at.push(b' ');
    assert_eq!(
        Envelope::from_json(&at).unwrap_err(),
        EnvelopeError::TooLarge {
            size: MAX_ENVELOPE_BYTES + 1,
            limit: MAX_ENVELOPE_BYTES
        }
    );
}

#[test]
fn log_append_refuses_a_1_gib_envelope_under_a_memory_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, key) = new_log(tmp.path());
    let big = sparse(tmp.path(), "big.json", GIB);
    let out = rcpt_capped(&[
        os("log"),
        os("append"),
        log.as_os_str(),
        os("--key"),
        key.as_os_str(),
        big.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains(&format!("{MAX_ENVELOPE_BYTES}")), "{all}");
}

#[test]
fn receipt_inspect_refuses_a_1_gib_envelope_under_a_memory_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let big = sparse(tmp.path(), "big.json", GIB);
    let out = rcpt_capped(&[os("receipt"), os("inspect"), big.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // inspect reads up to the bundle limit (it shows the envelope inside a
    // bundle too).
    assert!(
        stderr.contains(&format!("limit of {MAX_BUNDLE_BYTES}")),
        "{stderr}"
    );
}

#[test]
fn log_append_from_stdin_refuses_an_over_long_line_and_keeps_going() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, key) = new_log(tmp.path());
    let good = bundle_json("verdict-admit")["envelope"].to_string();
    let long = " ".repeat(MAX_STDIN_LINE_BYTES + 1);
    let input = format!("{long}\n{good}\n");
    let out = rcpt()
        .args(["log", "append"])
        .arg(&log)
        .arg("--key")
        .arg(&key)
        .arg("-")
        .write_stdin(input)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains(&format!("{MAX_STDIN_LINE_BYTES}-byte limit")),
        "{all}"
    );
    // The valid envelope after the refused line was appended at index 0.
    let cp = rcpt()
        .args(["log", "checkpoint"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&cp.stdout).contains("\n1\n"),
        "{cp:?}"
    );
}

// ---- MAX_PAYLOAD_BYTES / MAX_PAYLOAD_JSON_BYTES -------------------------

#[test]
fn payload_over_the_limit_is_refused_before_decoding() {
    let over = vec![0u8; MAX_PAYLOAD_BYTES + 1];
    assert_eq!(
        payload_from_cbor(&over).unwrap_err(),
        PayloadError::TooLarge(MAX_PAYLOAD_BYTES + 1)
    );
    // In a bundle: the payload check fails as too large (not as non-canonical).
    let mut b = bundle_json("verdict-admit");
    b["envelope"]["payload"] = STANDARD.encode(&over).into();
    let report = verifier().verify_bytes(&serde_json::to_vec(&b).unwrap());
    assert_eq!(report.outcome(), Outcome::Failed);
    assert_eq!(
        failed_reason(&report, "payload.canonical"),
        Some("payload.too_large")
    );
}

#[test]
fn payload_at_the_limit_is_accepted() {
    // A deny verdict whose reasons fill the payload to exactly the limit.
    let base = deny_payload();
    let fill = |n: usize| {
        edited(&base, |m| {
            let reasons = (0..7).map(|i| format!("{i}{}", "r".repeat(n))).collect();
            m.insert("verdict".into(), deny(reasons));
        })
    };
    let issuer_text = |v: &Value, n: usize| {
        edited(v, |m| {
            m.insert("issuer".into(), Value::Text("i".repeat(n)));
        })
    };
    // Top up with the issuer text to land on the limit exactly (its CBOR
    // length header grows once, hence a second step).
    let mut value = fill(8000);
    let mut issuer = 1;
    for _ in 0..3 {
        value = issuer_text(&value, issuer);
        let len = dagcbor::encode(&value).len();
        if len == MAX_PAYLOAD_BYTES {
            break;
        }
        issuer = issuer + MAX_PAYLOAD_BYTES - len;
    }
    let bytes = dagcbor::encode(&value);
    assert_eq!(bytes.len(), MAX_PAYLOAD_BYTES);
    assert!(payload_from_cbor(&bytes).is_ok());
}

#[test]
fn receipt_issue_refuses_a_1_gib_payload_under_a_memory_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, key) = new_log(tmp.path());
    let big = sparse(tmp.path(), "payload.json", GIB);
    let out = rcpt_capped(&[
        os("receipt"),
        os("issue"),
        os("--key"),
        key.as_os_str(),
        big.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("limit of {MAX_PAYLOAD_JSON_BYTES}")),
        "{stderr}"
    );
}

#[test]
fn payload_json_over_its_limit_is_refused_unread() {
    let over = vec![b' '; MAX_PAYLOAD_JSON_BYTES + 1];
    let err = payload_from_json(&over).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("{MAX_PAYLOAD_JSON_BYTES}")),
        "{err}"
    );
}

// ---- MAX_KEY_FILE_BYTES -------------------------------------------------

#[test]
fn verify_with_a_1_gib_trust_file_is_a_usage_error_under_a_memory_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let big = sparse(tmp.path(), "trust.json", GIB);
    let bundle = bundle_path("verdict-admit");
    let out = rcpt_capped(&[
        os("verify"),
        os("--trust"),
        big.as_os_str(),
        bundle.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{MAX_KEY_FILE_BYTES}")),
        "{stderr}"
    );
}

#[test]
fn trust_file_over_the_limit_is_refused() {
    let mut at = std::fs::read(corpus().join("trust.json")).unwrap();
    at.resize(MAX_KEY_FILE_BYTES, b' ');
    assert!(Trust::from_json(&at).is_ok());
    at.push(b' ');
    assert!(matches!(
        Trust::from_json(&at),
        Err(TrustError::TooLarge(n)) if n == MAX_KEY_FILE_BYTES + 1
    ));
}

#[test]
fn key_file_of_1_gib_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let big = sparse(tmp.path(), "big.key", GIB);
    let err = rcpt::keys::read_key_file(&big).unwrap_err();
    let chain = rcpt::io::error_chain(&err);
    assert!(chain.contains(&format!("{MAX_KEY_FILE_BYTES}")), "{chain}");
}

// ---- MAX_JSON_DEPTH and deep JSON everywhere ---------------------------

#[test]
fn json_depth_at_the_limit_passes_and_one_deeper_is_refused() {
    assert!(rcpt::strictjson::check(&deep_array(MAX_JSON_DEPTH), MAX_JSON_DEPTH).is_ok());
    let err = rcpt::strictjson::check(&deep_array(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH);
    assert!(
        err.unwrap_err()
            .to_string()
            .contains("deeper than the limit")
    );
}

#[test]
fn a_100_000_deep_bundle_fails_without_overflowing() {
    let report = verifier().verify_bytes(&deep_array(DEEP));
    assert_eq!(report.outcome(), Outcome::Failed);
    assert_eq!(report.primary_reason(), Some(Reason::BundleMalformed));
    // Also inside an otherwise valid bundle, as the envelope.
    let mut v = bundle_json("size-1-index-0");
    v["envelope"] = serde_json::Value::Null;
    let deep = String::from_utf8(deep_array(DEEP)).unwrap();
    let with_deep = serde_json::to_string(&v)
        .unwrap()
        .replace("\"envelope\":null", &format!("\"envelope\":{deep}"));
    assert!(with_deep.len() < MAX_BUNDLE_BYTES);
    // The bundle's happy path leaves the envelope undecoded (a raw value,
    // skipped without recursion); the envelope parser then refuses it, by
    // size first (100,000 levels are over the envelope limit).
    let report = verifier().verify_bytes(with_deep.as_bytes());
    assert_eq!(report.outcome(), Outcome::Failed);
    assert_eq!(
        failed_reason(&report, "envelope"),
        Some("envelope.too_large")
    );
}

#[test]
fn a_deep_envelope_is_refused_by_size_or_depth() {
    // 100,000 deep is over the envelope size limit: refused before parsing.
    assert!(matches!(
        Envelope::from_json(&deep_array(DEEP)),
        Err(EnvelopeError::TooLarge { .. })
    ));
    // Within the size limit, the depth limit refuses it.
    let deep = deep_array(MAX_ENVELOPE_BYTES / 2);
    assert!(deep.len() <= MAX_ENVELOPE_BYTES);
    assert!(matches!(
        Envelope::from_json(&deep),
        Err(EnvelopeError::Json(_))
    ));
}

#[test]
fn a_deep_payload_json_is_refused() {
    let err = payload_from_json(&deep_array(DEEP)).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("deeper than {MAX_VALUE_DEPTH}")),
        "{err}"
    );
}

#[test]
fn a_deep_trust_file_is_refused() {
    assert!(matches!(
        Trust::from_json(&deep_array(DEEP)),
        Err(TrustError::TooLarge(_))
    ));
    let deep = deep_array(MAX_KEY_FILE_BYTES / 2);
    assert!(matches!(Trust::from_json(&deep), Err(TrustError::Json(_))));
}

#[test]
fn the_cli_refuses_100_000_deep_json_without_crashing() {
    let tmp = tempfile::tempdir().unwrap();
    let deep = tmp.path().join("deep.json");
    std::fs::write(&deep, deep_array(DEEP)).unwrap();
    let trust = corpus().join("trust.json");
    // As a bundle: failed (exit 1), not a crash.
    let out = rcpt_capped(&[
        os("verify"),
        os("--trust"),
        trust.as_os_str(),
        deep.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // As a trust file: a usage error (exit 2).
    let bundle = bundle_path("verdict-admit");
    let out = rcpt_capped(&[
        os("verify"),
        os("--trust"),
        deep.as_os_str(),
        bundle.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // As a payload to issue, and as an envelope to append: refused (exit 1).
    let (log, key) = new_log(tmp.path());
    let out = rcpt_capped(&[
        os("receipt"),
        os("issue"),
        os("--key"),
        key.as_os_str(),
        deep.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let out = rcpt_capped(&[
        os("log"),
        os("append"),
        log.as_os_str(),
        os("--key"),
        key.as_os_str(),
        deep.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

// ---- MAX_VALUE_DEPTH (CBOR) -------------------------------------------

#[test]
fn cbor_nesting_over_the_value_depth_is_refused() {
    let at = [vec![0x81u8; MAX_VALUE_DEPTH], vec![0xf6]].concat();
    assert!(dagcbor::decode(&at).is_ok());
    let over = [vec![0x81u8; MAX_VALUE_DEPTH + 1], vec![0xf6]].concat();
    assert!(matches!(
        dagcbor::decode(&over),
        Err(dagcbor::DecodeError::TooDeep { .. })
    ));
    // 100,000 levels of CBOR (100 KB) are refused the same way, no overflow.
    let deep = [vec![0x81u8; DEEP], vec![0xf6]].concat();
    assert!(matches!(
        payload_from_cbor(&deep),
        Err(PayloadError::Cbor(dagcbor::DecodeError::TooDeep { .. }))
            | Err(PayloadError::TooLarge(_))
    ));
    let deep = [vec![0x81u8; MAX_PAYLOAD_BYTES - 1], vec![0xf6]].concat();
    assert!(matches!(
        payload_from_cbor(&deep),
        Err(PayloadError::Cbor(dagcbor::DecodeError::TooDeep { .. }))
    ));
}

// ---- MAX_PROOF_HASHES / MAX_TREE_SIZE / MAX_PROOF_FILE_BYTES ------------

#[test]
fn inclusion_proof_of_63_hashes_is_read_and_64_refused() {
    let h = STANDARD.encode([7u8; 32]);
    assert_eq!(
        decode_hashes(&vec![h.clone(); MAX_PROOF_HASHES])
            .unwrap()
            .len(),
        63
    );
    assert_eq!(
        decode_hashes(&vec![h.clone(); MAX_PROOF_HASHES + 1]).unwrap_err(),
        BundleError::ProofTooLong(MAX_PROOF_HASHES + 1)
    );
    // In a bundle: the inclusion check fails as malformed, naming the limit.
    let mut b = bundle_json("size-7-index-3");
    b["log"]["inclusion"] = vec![h; MAX_PROOF_HASHES + 1].into();
    let report = verifier().verify_bytes(&serde_json::to_vec(&b).unwrap());
    assert_eq!(report.outcome(), Outcome::Failed);
    assert_eq!(
        failed_reason(&report, "inclusion"),
        Some("inclusion.malformed")
    );
    // And the Merkle layer refuses it on its own.
    let proof = vec![[7u8; 32]; MAX_PROOF_HASHES + 1];
    assert_eq!(
        rcpt::tlog::merkle::verify_inclusion(&[0; 32], 0, u64::MAX, &proof, &[0; 32]),
        Err(rcpt::tlog::merkle::ProofError::TooLong {
            len: MAX_PROOF_HASHES + 1,
            max: MAX_PROOF_HASHES
        })
    );
}

/// A hash store that answers zeros and counts the hashes asked for.
struct ZeroStore(std::cell::Cell<usize>);

impl rcpt::tlog::merkle::HashReader for ZeroStore {
    type Error = std::convert::Infallible;
    fn read_hashes(
        &self,
        ids: &[rcpt::tlog::merkle::NodeId],
    ) -> Result<Vec<rcpt::tlog::merkle::Hash>, Self::Error> {
        self.0.set(self.0.get() + ids.len());
        Ok(vec![[0; 32]; ids.len()])
    }
}

#[test]
fn tree_sizes_over_the_limit_are_refused_before_any_read() {
    use rcpt::tlog::merkle::{ProveError, prove_inclusion};
    let store = ZeroStore(std::cell::Cell::new(0));
    // At the limit: a proof of 62 hashes, within MAX_PROOF_HASHES.
    let proof = prove_inclusion(0, MAX_TREE_SIZE, &store).unwrap();
    assert_eq!(proof.len(), 62);
    assert!(proof.len() <= MAX_PROOF_HASHES);
    let read = store.0.get();
    let err = prove_inclusion(0, MAX_TREE_SIZE + 1, &store).unwrap_err();
    assert!(
        matches!(err, ProveError::TreeTooLarge { size, max } if size == MAX_TREE_SIZE + 1 && max == MAX_TREE_SIZE),
        "{err:?}"
    );
    assert_eq!(store.0.get(), read, "nothing read for a refused size");
}

#[test]
fn consistency_proof_file_over_the_limit_is_refused() {
    let mut json = br#"{"from": 1, "to": 2, "proof": []}"#.to_vec();
    json.resize(MAX_PROOF_FILE_BYTES, b' ');
    let cp = b"x\n";
    assert!(rcpt::verify::ConsistencyInput::parse(cp, &json).is_ok());
    json.push(b' ');
    let err = rcpt::verify::ConsistencyInput::parse(cp, &json).unwrap_err();
    assert!(
        err.to_string().contains(&format!("{MAX_PROOF_FILE_BYTES}")),
        "{err}"
    );
}

// ---- MAX_ENVELOPE_SIGNATURES / MAX_NOTE_SIGNATURES / MAX_NOTE_BYTES ------

fn envelope_with_signatures(n: usize) -> Vec<u8> {
    let sig = r#"{"keyid":"","sig":"AAAA"}"#;
    format!(
        r#"{{"payloadType":"x","payload":"AAAA","signatures":[{}]}}"#,
        vec![sig; n].join(",")
    )
    .into_bytes()
}

#[test]
fn envelope_with_16_signatures_parses_and_17_is_refused() {
    let env = Envelope::from_json(&envelope_with_signatures(MAX_ENVELOPE_SIGNATURES)).unwrap();
    assert_eq!(env.signatures.len(), 16);
    assert_eq!(
        Envelope::from_json(&envelope_with_signatures(MAX_ENVELOPE_SIGNATURES + 1)).unwrap_err(),
        EnvelopeError::TooManySignatures {
            count: MAX_ENVELOPE_SIGNATURES + 1,
            limit: MAX_ENVELOPE_SIGNATURES
        }
    );
}

/// The corpus checkpoint of `size-1-index-0` with `extra` grease lines
/// (unknown keys) before its real signature line.
fn checkpoint_with_grease(extra: usize) -> String {
    let cp = bundle_json("size-1-index-0")["log"]["checkpoint"]
        .as_str()
        .unwrap()
        .to_string();
    let (text, sig) = cp.split_once("\n\n").unwrap();
    let grease: String = (0..extra)
        .map(|i| {
            format!(
                "\u{2014} grease.example/{i} {}\n",
                STANDARD.encode([i as u8; 68])
            )
        })
        .collect();
    format!("{text}\n\n{grease}{sig}")
}

#[test]
fn note_with_100_signatures_verifies_and_101_is_malformed() {
    let v = verifier();
    let mut b = bundle_json("size-1-index-0");
    b["log"]["checkpoint"] = checkpoint_with_grease(MAX_NOTE_SIGNATURES - 1).into();
    assert_eq!(
        v.verify_bytes(&serde_json::to_vec(&b).unwrap()).outcome(),
        Outcome::Verified
    );
    let over = checkpoint_with_grease(MAX_NOTE_SIGNATURES);
    assert_eq!(
        Note::parse(over.as_bytes()).unwrap_err(),
        NoteError::TooManySignatures {
            count: MAX_NOTE_SIGNATURES + 1,
            limit: MAX_NOTE_SIGNATURES
        }
    );
    b["log"]["checkpoint"] = over.into();
    let report = v.verify_bytes(&serde_json::to_vec(&b).unwrap());
    assert_eq!(report.outcome(), Outcome::Failed);
    assert_eq!(report.primary_reason(), Some(Reason::CheckpointMalformed));
}

#[test]
fn note_over_its_byte_limit_is_refused() {
    let mut note = checkpoint_with_grease(1).into_bytes();
    let at = MAX_NOTE_BYTES;
    // Pad the origin line so the note is exactly at, then over, the limit.
    let pad = at - note.len();
    note.splice(0..0, std::iter::repeat_n(b'o', pad));
    assert_eq!(note.len(), MAX_NOTE_BYTES);
    assert!(Note::parse(&note).is_ok());
    note.insert(0, b'o');
    assert_eq!(
        Note::parse(&note).unwrap_err(),
        NoteError::TooLarge {
            size: MAX_NOTE_BYTES + 1,
            limit: MAX_NOTE_BYTES
        }
    );
}

// ---- MAX_READ_SET_ITEMS / MAX_DENY_REASONS / MAX_TEXT_BYTES --------------

fn read_set(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                Value::Map(
                    [
                        ("resource".to_string(), Value::Text(format!("r{i:06}"))),
                        (
                            "digest".to_string(),
                            Value::Text(format!("blake3:{}", "0".repeat(64))),
                        ),
                    ]
                    .into(),
                )
            })
            .collect(),
    )
}

#[test]
fn read_set_of_4096_items_is_read_and_4097_refused() {
    let base = deny_payload();
    let at = edited(&base, |m| {
        m.insert("read_set".into(), read_set(MAX_READ_SET_ITEMS));
    });
    assert!(Receipt::from_value(&at).is_ok());
    let over = edited(&base, |m| {
        m.insert("read_set".into(), read_set(MAX_READ_SET_ITEMS + 1));
    });
    let err = schema_field(Receipt::from_value(&over));
    assert!(err.starts_with("read_set"), "{err}");
    assert!(
        err.contains(&format!("limit of {MAX_READ_SET_ITEMS}")),
        "{err}"
    );
    // Finding: at ~90 bytes an item, 4096 items do not fit in a payload;
    // the byte limit refuses such a receipt first when it is encoded.
    assert!(dagcbor::encode(&at).len() > MAX_PAYLOAD_BYTES);
}

#[test]
fn deny_with_256_reasons_is_read_and_257_refused() {
    let reasons = |n: usize| (0..n).map(|i| format!("reason {i:04}")).collect();
    let base = deny_payload();
    let at = edited(&base, |m| {
        m.insert("verdict".into(), deny(reasons(MAX_DENY_REASONS)));
    });
    let bytes = dagcbor::encode(&at);
    assert!(
        payload_from_cbor(&bytes).is_ok(),
        "256 reasons fit a payload"
    );
    let over = edited(&base, |m| {
        m.insert("verdict".into(), deny(reasons(MAX_DENY_REASONS + 1)));
    });
    let err = schema_field(Receipt::from_value(&over));
    assert!(
        err.contains(&format!("limit of {MAX_DENY_REASONS}")),
        "{err}"
    );
}

#[test]
fn text_of_8_kib_is_read_and_one_byte_more_refused() {
    let base = deny_payload();
    let with_issuer = |n: usize| {
        edited(&base, |m| {
            m.insert("issuer".into(), Value::Text("i".repeat(n)));
        })
    };
    assert!(Receipt::from_value(&with_issuer(MAX_TEXT_BYTES)).is_ok());
    let err = schema_field(Receipt::from_value(&with_issuer(MAX_TEXT_BYTES + 1)));
    assert!(err.starts_with("issuer"), "{err}");
    assert!(err.contains(&format!("limit of {MAX_TEXT_BYTES}")), "{err}");
}

// ---- MAX_ENTRY_BYTES / MAX_ENTRY_BUNDLE_BYTES ----------------------------

/// A signed envelope with a valid receipt payload whose log entry is
/// exactly `entry_len` bytes (padded through a long keyid).
fn envelope_with_entry_len(entry_len: usize) -> Envelope {
    let base = deny_payload();
    let value = edited(&base, |m| {
        let reasons = (0..7).map(|i| format!("{i}{}", "r".repeat(8000))).collect();
        m.insert("verdict".into(), deny(reasons));
    });
    let payload = payload_from_cbor(&dagcbor::encode(&value)).unwrap().bytes;
    let mut env = Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload, &signing_key(9));
    env.signatures.push(Signature {
        keyid: "k".repeat(1000),
        sig: vec![0; 64],
    });
    let now = env.to_entry().len();
    env.signatures[1].keyid = "k".repeat(1000 + entry_len - now);
    assert_eq!(env.to_entry().len(), entry_len);
    env
}

#[test]
fn log_append_takes_an_entry_of_65535_bytes_and_refuses_65536() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, key) = new_log(tmp.path());
    let at = tmp.path().join("at.json");
    std::fs::write(&at, envelope_with_entry_len(MAX_ENTRY_BYTES).to_json()).unwrap();
    let over = tmp.path().join("over.json");
    std::fs::write(
        &over,
        envelope_with_entry_len(MAX_ENTRY_BYTES + 1).to_json(),
    )
    .unwrap();
    let append = |file: &Path| {
        rcpt()
            .args(["log", "append"])
            .arg(&log)
            .arg("--key")
            .arg(&key)
            .arg(file)
            .output()
            .unwrap()
    };
    let out = append(&at);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = append(&over);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("entry.too_large"), "{all}");
    // The log holds the one entry at the limit and is sound.
    rcpt().args(["log", "check"]).arg(&log).assert().success();
    // The library refuses an entry over the limit before decoding it.
    let entry = envelope_with_entry_len(MAX_ENTRY_BYTES + 1).to_entry();
    assert_eq!(
        Envelope::from_entry(&entry).unwrap_err(),
        EntryError::TooLarge {
            size: MAX_ENTRY_BYTES + 1,
            limit: MAX_ENTRY_BYTES
        }
    );
    assert!(matches!(
        rcpt::tlog::tiles::encode_entry_bundle([entry.as_slice()]),
        Err(rcpt::tlog::tiles::TileError::EntryTooLarge { len, max, .. })
            if len == MAX_ENTRY_BYTES + 1 && max == MAX_ENTRY_BYTES
    ));
}

#[test]
fn an_entry_bundle_of_1_gib_is_refused_unread() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("tile/entries")).unwrap();
    sparse(&tmp.path().join("tile/entries"), "000", GIB);
    let reader = rcpt::storage::tiles::TileReader::new(tmp.path(), 256);
    let err = reader.entry(0).unwrap_err();
    assert!(
        matches!(err, rcpt::tlog::tiles::TileError::BundleTooLarge { max, .. } if max == MAX_ENTRY_BUNDLE_BYTES),
        "{err:?}"
    );
}

// ---- MAX_MANIFEST_BYTES --------------------------------------------------

#[test]
fn a_corpus_manifest_over_the_limit_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    sparse(tmp.path(), "manifest.json", MAX_MANIFEST_BYTES as u64 + 1);
    std::fs::copy(corpus().join("trust.json"), tmp.path().join("trust.json")).unwrap();
    let err = rcpt::verify::corpus::load(tmp.path()).unwrap_err();
    assert!(
        err.to_string().contains(&format!("{MAX_MANIFEST_BYTES}")),
        "{err}"
    );
}

// ---- the cap itself ------------------------------------------------------

/// The memory cap is not what refuses the big inputs: the same binary
/// verifies, issues and appends normally under it.
#[test]
fn the_memory_cap_admits_normal_runs() {
    let trust = corpus().join("trust.json");
    let bundle = bundle_path("size-1107-index-511");
    let out = rcpt_capped(&[
        os("verify"),
        os("--trust"),
        trust.as_os_str(),
        bundle.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let tmp = tempfile::tempdir().unwrap();
    let (log, key) = new_log(tmp.path());
    let env = tmp.path().join("env.json");
    std::fs::write(&env, bundle_json("verdict-admit")["envelope"].to_string()).unwrap();
    let out = rcpt_capped(&[
        os("log"),
        os("append"),
        log.as_os_str(),
        os("--key"),
        key.as_os_str(),
        env.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// The cap does bite: a program that asks for a 1 GiB buffer fails under it.
#[test]
fn the_memory_cap_refuses_a_1_gib_buffer() {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {VMEM_CAP_KIB}; exec dd if=/dev/zero of=/dev/null bs=1G count=1"
        ))
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
}

#[test]
fn consistency_proof_of_63_hashes_is_read_and_64_refused() {
    let proof = |n: usize| {
        let h = format!("\"{}\"", STANDARD.encode([7u8; 32]));
        format!(
            r#"{{"from": 1, "to": 2, "proof": [{}]}}"#,
            vec![h; n].join(",")
        )
    };
    let cp = b"x\n";
    let ok = rcpt::verify::ConsistencyInput::parse(cp, proof(MAX_PROOF_HASHES).as_bytes());
    assert_eq!(ok.unwrap().proofs[0].proof.len(), MAX_PROOF_HASHES);
    let err = rcpt::verify::ConsistencyInput::parse(cp, proof(MAX_PROOF_HASHES + 1).as_bytes())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("limit of {MAX_PROOF_HASHES}")),
        "{err}"
    );
}

/// A 1 GiB line on `rcpt log append -` is refused, read in bounded pieces.
#[test]
fn log_append_from_stdin_refuses_a_1_gib_line_under_a_memory_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, key) = new_log(tmp.path());
    let big = sparse(tmp.path(), "big.jsonl", GIB);
    let bin = rcpt_bin();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {VMEM_CAP_KIB}; exec \"$0\" \"$@\""))
        .arg(bin)
        .args([
            os("log"),
            os("append"),
            log.as_os_str(),
            os("--key"),
            key.as_os_str(),
            os("-"),
        ])
        .stdin(std::fs::File::open(&big).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains(&format!("{MAX_STDIN_LINE_BYTES}-byte limit")),
        "{all}"
    );
}
