//! The deterministic generator of `fixtures/frozen-receipts/`.
//!
//! Run once: `cargo run --example gen_frozen -- fixtures/frozen-receipts`.
//! It refuses to write into a directory that already holds a manifest:
//! frozen files are written once and never regenerated. Every key comes
//! from a fixed seed and every signature is deterministic (Ed25519), so a
//! second run into an empty directory writes the same bytes; no clock and
//! no randomness are read.
//!
//! Each case is a bundle plus its expected outcome and reason code in
//! `manifest.json`. Receipts that break an invariant or the canonical form
//! are still correctly signed and logged: the log library takes opaque
//! entries, and the generator bypasses the issuing checks on purpose.

// A development tool: a wrong index aborts the generator, never the library.
#![allow(clippy::indexing_slicing)]

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rcpt::bundle::{Bundle, LogProof};
use rcpt::canonical::{Value, dagcbor, json};
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::digest::{Digest, to_hex};
use rcpt::dsse::Envelope;
use rcpt::keys::{self, NoteVerifier, SigningKey};
use rcpt::log::{Log, LogWriter};
use serde_json::{Value as J, json};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The corpus's own README, written with it.
const CORPUS_README: &str = "# Frozen receipt corpus\n\n\
Written once by `cargo run --example gen_frozen -- fixtures/frozen-receipts` \
(examples/gen_frozen.rs: fixed keys, no clock, no randomness) and never \
regenerated. `rcpt verify --corpus fixtures/frozen-receipts` checks every \
case of `manifest.json` (expected outcome and primary reason code) and every \
line of `SHA256SUMS`; tests/frozen.rs does the same and fails if any file \
changed.\n\n\
- `manifest.json`: the cases; `trust.json`: the trust (one issuer, one log).\n\
- `keys/`: public keys only (`issuer.pub`, `untrusted-issuer.pub`, \
`log.vkey`). Private keys are derived from fixed labels in the generator.\n\
- `log/`: the public files (checkpoint, tiles) of the main log the bundles \
were proven from.\n\
- `bundles/`: one bundle per case; receipts that break an invariant or the \
canonical form are still correctly signed and logged.\n";

/// Origin of the main (trusted) log.
const ORIGIN: &str = "rcpt.example/frozen-log";
/// Origin of a log no trust file names.
const UNKNOWN_ORIGIN: &str = "unknown.example/other-log";
/// Tree sizes at which the main log publishes checkpoints used by cases.
const SMALL_SIZES: [u64; 6] = [1, 2, 3, 7, 8, 9];
/// Entries in the main log after the last append (over 1,000).
const FINAL_FILLER: usize = 1030;

/// A fixed key from a label: seed = SHA-256("rcpt frozen corpus v1: " || label).
fn key(label: &str) -> SigningKey {
    let seed = Digest::sha256(format!("rcpt frozen corpus v1: {label}").as_bytes()).bytes;
    SigningKey::from_bytes(&seed)
}

/// A `blake3:` digest of a label (stand-in for real change/policy ids).
fn d(label: &str) -> String {
    Digest::blake3(label.as_bytes()).to_string()
}

/// The valid base receipt, with `issued_at` varied by `n`.
fn base(n: i64) -> J {
    json!({
        "version": 1,
        "issuer": "gate.example/frozen",
        "issued_at": 1_790_000_000 + n,
        "substrate": "git",
        "change_id": d(&format!("change {n}")),
        "inverse_delta_id": d(&format!("inverse {n}")),
        "reversibility": true,
        "read_set": [
            {"resource": "refs/heads/main", "digest": d("main")},
            {"resource": "src/lib.rs", "digest": d("lib.rs")}
        ],
        "precondition": d(&format!("precondition {n}")),
        "policy_id": d("policy v1"),
        "verdict": {"admit": {"proof": d(&format!("proof {n}"))}},
        "applied": true,
        "replay": {"class": "deterministic_replay"}
    })
}

/// `base(n)` with fields replaced.
fn with(n: i64, changes: J) -> J {
    let mut v = base(n);
    if let (Some(obj), Some(ch)) = (v.as_object_mut(), changes.as_object()) {
        for (k, val) in ch {
            obj.insert(k.clone(), val.clone());
        }
    }
    v
}

/// Canonical DAG-CBOR of a JSON receipt (data model only; schema and invariants unchecked).
fn cbor(j: &J) -> Result<Vec<u8>> {
    let value = json::from_json(&serde_json::to_vec(j)?).context("generator JSON")?;
    Ok(dagcbor::encode(&value))
}

/// A CBOR head (major type, argument), shortest form unless `width` forces one.
fn head(out: &mut Vec<u8>, major: u8, n: u64, width: Option<u8>) {
    let m = major << 5;
    match width {
        Some(8) => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
        _ if n < 24 => out.push(m | n as u8),
        _ if n <= 0xff => out.extend_from_slice(&[m | 24, n as u8]),
        _ if n <= 0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        _ if n <= 0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// How the hand-written encoder departs from canonical form.
#[derive(Clone, Copy, PartialEq)]
enum Quirk {
    /// Map keys in plain bytewise order (DAG-CBOR wants length first).
    BytewiseKeys,
    /// `issued_at` as an 8-byte integer.
    LongInteger,
    /// Arrays with indefinite length.
    IndefiniteArrays,
}

/// Encode a value with one deliberate departure from canonical DAG-CBOR.
fn quirky(v: &Value, quirk: Quirk, key: &str, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(0xf6),
        Value::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
        Value::Integer(i) if *i >= 0 => {
            let width = (quirk == Quirk::LongInteger && key == "issued_at").then_some(8);
            head(out, 0, *i as u64, width)
        }
        Value::Integer(i) => head(out, 1, (-1 - *i) as u64, None),
        Value::Text(s) => {
            head(out, 3, s.len() as u64, None);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Bytes(b) => {
            head(out, 2, b.len() as u64, None);
            out.extend_from_slice(b);
        }
        Value::Array(items) => {
            if quirk == Quirk::IndefiniteArrays {
                out.push(0x9f);
            } else {
                head(out, 4, items.len() as u64, None);
            }
            for item in items {
                quirky(item, quirk, key, out);
            }
            if quirk == Quirk::IndefiniteArrays {
                out.push(0xff);
            }
        }
        Value::Map(m) => {
            head(out, 5, m.len() as u64, None);
            let mut keys: Vec<&String> = m.keys().collect();
            if quirk != Quirk::BytewiseKeys {
                keys.sort_by(|a, b| a.len().cmp(&b.len()).then(a.cmp(b)));
            }
            for k in keys {
                head(out, 3, k.len() as u64, None);
                out.extend_from_slice(k.as_bytes());
                if let Some(val) = m.get(k) {
                    quirky(val, quirk, k, out);
                }
            }
        }
    }
}

/// Non-canonical bytes of the base receipt.
fn non_canonical(n: i64, quirk: Quirk) -> Result<Vec<u8>> {
    let value = json::from_json(&serde_json::to_vec(&base(n))?).context("generator JSON")?;
    let mut out = Vec::new();
    quirky(&value, quirk, "", &mut out);
    if out == dagcbor::encode(&value) {
        bail!("quirk {} produced canonical bytes", quirk as u8);
    }
    Ok(out)
}

/// Replace the first occurrence of `from` in `bytes` (must exist).
fn patch(mut bytes: Vec<u8>, from: &[u8], to: &[u8]) -> Result<Vec<u8>> {
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .context("patch target missing")?;
    bytes.splice(at..at + from.len(), to.iter().copied());
    Ok(bytes)
}

/// What a case expects.
struct Expect {
    outcome: &'static str,
    reason: Option<&'static str>,
}

const VERIFIED: Expect = Expect {
    outcome: "verified",
    reason: None,
};
const fn failed(reason: &'static str) -> Expect {
    Expect {
        outcome: "failed",
        reason: Some(reason),
    }
}
const fn error(reason: &'static str) -> Expect {
    Expect {
        outcome: "error",
        reason: Some(reason),
    }
}

/// How to turn a correct bundle into the case's bundle.
enum Edit {
    None,
    /// Change the bundle JSON (as a serde_json value).
    Json(Box<dyn Fn(&mut J)>),
    /// Replace the bundle file's bytes entirely.
    Bytes(BytesEdit),
}

/// A function from the correct bundle's bytes to the case's bytes.
type BytesEdit = Box<dyn Fn(&[u8]) -> Vec<u8>>;

/// One envelope to log and a bundle to write from it.
struct Case {
    file: String,
    comment: String,
    envelope: Envelope,
    /// Which log: the main one or the unknown one.
    unknown_log: bool,
    /// Prove at this size (None: the final size).
    size: Option<u64>,
    edit: Edit,
    expect: Expect,
}

/// Sign `payload` by the issuer key `signer`.
fn sign(payload: Vec<u8>, signer: &SigningKey) -> Envelope {
    Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload, signer)
}

/// Build every case (envelopes not yet logged).
fn cases(issuer: &SigningKey, stranger: &SigningKey) -> Result<Vec<Case>> {
    let mut out = Vec::new();
    let mut n = 100;
    let mut add = |file: &str, comment: &str, payload: Vec<u8>, edit: Edit, expect: Expect| {
        out.push(Case {
            file: format!("bundles/{file}.json"),
            comment: comment.to_string(),
            envelope: sign(payload, issuer),
            unknown_log: false,
            size: None,
            edit,
            expect,
        });
    };
    let mut next = || {
        n += 1;
        n
    };
    // Every verdict arm and replay shape, verified.
    let deny = json!({"deny": {"reasons": ["policy: deploy window closed", "reads stale"]}});
    let escalate = json!({"escalate": {"ticket": "OPS-1234"}});
    let k = next();
    add(
        "verdict-admit",
        "admit verdict, applied",
        cbor(&base(k))?,
        Edit::None,
        VERIFIED,
    );
    let k = next();
    add(
        "verdict-deny",
        "deny verdict with two sorted reasons",
        cbor(&with(k, json!({"verdict": deny, "applied": false})))?,
        Edit::None,
        VERIFIED,
    );
    let k = next();
    add(
        "verdict-escalate",
        "escalate verdict, not applied",
        cbor(&with(k, json!({"verdict": escalate, "applied": false})))?,
        Edit::None,
        VERIFIED,
    );
    for class in ["llm_originated", "unknown"] {
        let k = next();
        add(
            &format!("replay-{class}"),
            &format!("replay class {class}"),
            cbor(&with(k, json!({"replay": {"class": class}})))?,
            Edit::None,
            VERIFIED,
        );
    }
    let stages = ["deterministic", "llm", "unknown"];
    for p in stages {
        for e in stages.iter().filter(|e| **e != p) {
            let k = next();
            let replay = json!({"replay": {"class": "mixed", "proposal": p, "execution": e}});
            add(
                &format!("replay-mixed-{p}-{e}"),
                &format!("replay mixed({p}, {e})"),
                cbor(&with(k, replay))?,
                Edit::None,
                VERIFIED,
            );
        }
    }
    let k = next();
    add(
        "reversibility-null",
        "reversibility not established, no inverse",
        cbor(&with(
            k,
            json!({"reversibility": null, "inverse_delta_id": null}),
        ))?,
        Edit::None,
        VERIFIED,
    );
    let k = next();
    add(
        "reversibility-false",
        "irreversible change, no inverse",
        cbor(&with(
            k,
            json!({"reversibility": false, "inverse_delta_id": null}),
        ))?,
        Edit::None,
        VERIFIED,
    );
    let k = next();
    add(
        "read-set-empty-no-precondition",
        "empty read set, null precondition, postgresql",
        cbor(&with(
            k,
            json!({"read_set": [], "precondition": null, "substrate": "postgresql"}),
        ))?,
        Edit::None,
        VERIFIED,
    );
    for substrate in ["filesystem", "tool-proxy", "mysql"] {
        let k = next();
        add(
            &format!("substrate-{substrate}"),
            &format!("substrate {substrate}"),
            cbor(&with(k, json!({"substrate": substrate})))?,
            Edit::None,
            VERIFIED,
        );
    }
    // Invariants broken in correctly signed and logged receipts.
    let inv: Vec<(&str, &str, J, &'static str)> = vec![
        (
            "invariant-reversibility-true-null-inverse",
            "reversibility true with a null inverse_delta_id",
            json!({"reversibility": true, "inverse_delta_id": null}),
            "invariant.reversibility",
        ),
        (
            "invariant-reversibility-false-with-inverse",
            "reversibility false with an inverse_delta_id",
            json!({"reversibility": false}),
            "invariant.reversibility",
        ),
        (
            "invariant-reversibility-null-with-inverse",
            "reversibility null with an inverse_delta_id",
            json!({"reversibility": null}),
            "invariant.reversibility",
        ),
        (
            "invariant-verdict-deny-empty",
            "deny with no reasons",
            json!({"verdict": {"deny": {"reasons": []}}, "applied": false}),
            "invariant.verdict",
        ),
        (
            "invariant-verdict-deny-unsorted",
            "deny reasons not sorted",
            json!({"verdict": {"deny": {"reasons": ["b", "a"]}}, "applied": false}),
            "invariant.verdict",
        ),
        (
            "invariant-verdict-deny-duplicate",
            "deny reasons repeated",
            json!({"verdict": {"deny": {"reasons": ["a", "a"]}}, "applied": false}),
            "invariant.verdict",
        ),
        (
            "invariant-verdict-escalate-empty-ticket",
            "escalate with an empty ticket",
            json!({"verdict": {"escalate": {"ticket": ""}}, "applied": false}),
            "invariant.verdict",
        ),
        (
            "invariant-applied-deny",
            "applied true with a deny verdict",
            json!({"verdict": {"deny": {"reasons": ["no"]}}, "applied": true}),
            "invariant.applied",
        ),
        (
            "invariant-applied-escalate",
            "applied true with an escalate verdict",
            json!({"verdict": {"escalate": {"ticket": "T-1"}}, "applied": true}),
            "invariant.applied",
        ),
        (
            "invariant-read-set-unsorted",
            "read_set not sorted by resource",
            json!({"read_set": [{"resource": "b", "digest": d("b")}, {"resource": "a", "digest": d("a")}]}),
            "invariant.read_set",
        ),
        (
            "invariant-read-set-duplicate",
            "read_set names a resource twice",
            json!({"read_set": [{"resource": "a", "digest": d("a")}, {"resource": "a", "digest": d("a2")}]}),
            "invariant.read_set",
        ),
        (
            "invariant-replay-mixed-deterministic",
            "mixed with equal deterministic stages",
            json!({"replay": {"class": "mixed", "proposal": "deterministic", "execution": "deterministic"}}),
            "invariant.replay",
        ),
        (
            "invariant-replay-mixed-llm",
            "mixed with equal llm stages",
            json!({"replay": {"class": "mixed", "proposal": "llm", "execution": "llm"}}),
            "invariant.replay",
        ),
        (
            "invariant-replay-mixed-unknown",
            "mixed with equal unknown stages (laundering)",
            json!({"replay": {"class": "mixed", "proposal": "unknown", "execution": "unknown"}}),
            "invariant.replay",
        ),
    ];
    for (file, comment, change, reason) in inv {
        let k = next();
        add(
            file,
            comment,
            cbor(&with(k, change))?,
            Edit::None,
            failed(reason),
        );
    }
    // Schema errors.
    let k = next();
    let mut unknown_field = base(k);
    if let Some(o) = unknown_field.as_object_mut() {
        o.insert("note".into(), json!("extra"));
    }
    add(
        "schema-unknown-field",
        "an unknown field",
        cbor(&unknown_field)?,
        Edit::None,
        failed("payload.schema"),
    );
    let k = next();
    let mut missing = base(k);
    if let Some(o) = missing.as_object_mut() {
        o.remove("policy_id");
    }
    add(
        "schema-missing-field",
        "policy_id missing",
        cbor(&missing)?,
        Edit::None,
        failed("payload.schema"),
    );
    let k = next();
    add(
        "schema-wrong-type",
        "issued_at as text",
        cbor(&with(k, json!({"issued_at": "2026-11-29"})))?,
        Edit::None,
        failed("payload.schema"),
    );
    let k = next();
    add(
        "schema-uppercase-digest",
        "a digest in uppercase hex",
        cbor(&with(
            k,
            json!({"policy_id": d("policy v1").to_uppercase().replacen("BLAKE3", "blake3", 1)}),
        ))?,
        Edit::None,
        failed("payload.schema"),
    );
    let k = next();
    add(
        "schema-bad-substrate",
        "substrate not in the list",
        cbor(&with(k, json!({"substrate": "svn"})))?,
        Edit::None,
        failed("payload.schema"),
    );
    let k = next();
    add(
        "schema-two-verdicts",
        "verdict with two arms",
        cbor(&with(
            k,
            json!({"verdict": {"admit": {"proof": d("p")}, "escalate": {"ticket": "x"}}}),
        ))?,
        Edit::None,
        failed("payload.schema"),
    );
    let k = next();
    add(
        "payload-version-2",
        "version 2: not evaluated",
        cbor(&with(k, json!({"version": 2})))?,
        Edit::None,
        error("payload.version_unsupported"),
    );
    // Non-canonical and malformed payloads, correctly signed and logged.
    add(
        "noncanonical-bytewise-keys",
        "map keys in bytewise, not length-first, order",
        non_canonical(next(), Quirk::BytewiseKeys)?,
        Edit::None,
        failed("payload.non_canonical"),
    );
    add(
        "noncanonical-long-integer",
        "issued_at in an 8-byte integer",
        non_canonical(next(), Quirk::LongInteger)?,
        Edit::None,
        failed("payload.non_canonical"),
    );
    add(
        "noncanonical-indefinite-array",
        "arrays of indefinite length",
        non_canonical(next(), Quirk::IndefiniteArrays)?,
        Edit::None,
        failed("payload.non_canonical"),
    );
    let mut trailing = cbor(&base(next()))?;
    trailing.push(0x00);
    add(
        "malformed-trailing-byte",
        "a byte after the payload value",
        trailing,
        Edit::None,
        failed("payload.malformed"),
    );
    // issued_at as a float64 (0xfb): outside the data model.
    let k = next();
    let mut float = Vec::new();
    head(&mut float, 0, (1_790_000_000 + k) as u64, None);
    let float = patch(
        cbor(&base(k))?,
        &float,
        &[&[0xfbu8][..], &((1_790_000_000 + k) as f64).to_be_bytes()].concat(),
    )?;
    add(
        "malformed-float",
        "issued_at as a float",
        float,
        Edit::None,
        failed("payload.malformed"),
    );
    let k = next();
    let mut big = Vec::new();
    head(&mut big, 0, (1_790_000_000 + k) as u64, None);
    let too_big = patch(
        cbor(&base(k))?,
        &big,
        &[&[0x1bu8][..], &(1u64 << 53).to_be_bytes()].concat(),
    )?;
    add(
        "malformed-integer-over-2-53",
        "issued_at = 2^53, outside the data model",
        too_big,
        Edit::None,
        failed("payload.malformed"),
    );
    add(
        "malformed-not-cbor",
        "payload is JSON text, not CBOR",
        serde_json::to_vec(&base(next()))?,
        Edit::None,
        failed("payload.malformed"),
    );
    // Identity.
    add(
        "receipt-id-mismatch",
        "claimed id is another receipt's",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| b["receipt_id"] = json!(d("someone else")))),
        failed("receipt_id.mismatch"),
    );
    add(
        "receipt-id-sha256",
        "claimed id uses the interop prefix",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            let id = b["receipt_id"]
                .as_str()
                .unwrap_or_default()
                .replace("blake3:", "sha256:");
            b["receipt_id"] = json!(id);
        })),
        failed("receipt_id.mismatch"),
    );
    // Inclusion proofs.
    add(
        "inclusion-wrong-sibling",
        "one bit of the first proof hash flipped",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| flip_proof(b, 0))),
        failed("inclusion.invalid"),
    );
    add(
        "inclusion-wrong-last-sibling",
        "one bit of the last proof hash flipped",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            let last = b["log"]["inclusion"]
                .as_array()
                .map_or(0, |a| a.len().saturating_sub(1));
            flip_proof(b, last)
        })),
        failed("inclusion.invalid"),
    );
    add(
        "inclusion-wrong-index",
        "index + 1",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| add_u64(&mut b["log"]["index"], 1))),
        failed("inclusion.invalid"),
    );
    add(
        "inclusion-index-beyond-size",
        "index = tree size",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            b["log"]["index"] = b["log"]["tree_size"].clone()
        })),
        failed("inclusion.invalid"),
    );
    add(
        "inclusion-wrong-size",
        "tree_size + 1 (checkpoint says otherwise)",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| add_u64(&mut b["log"]["tree_size"], 1))),
        failed("checkpoint.size_mismatch"),
    );
    add(
        "inclusion-truncated",
        "last proof hash dropped",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            if let Some(a) = b["log"]["inclusion"].as_array_mut() {
                a.pop();
            }
        })),
        failed("inclusion.invalid"),
    );
    add(
        "inclusion-extended",
        "a proof hash appended",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            if let Some(a) = b["log"]["inclusion"].as_array_mut() {
                a.push(json!(STANDARD.encode([7u8; 32])));
            }
        })),
        failed("inclusion.invalid"),
    );
    add(
        "inclusion-short-hash",
        "a proof hash of 31 bytes",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            b["log"]["inclusion"][0] = json!(STANDARD.encode([7u8; 31]))
        })),
        failed("inclusion.malformed"),
    );
    // Checkpoints.
    add(
        "checkpoint-signature-flipped",
        "one bit of the checkpoint signature flipped",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| edit_checkpoint(b, flip_signature))),
        failed("checkpoint.signature_invalid"),
    );
    add(
        "checkpoint-root-altered",
        "checkpoint root replaced, old signature kept",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            edit_checkpoint(b, |t| replace_line(t, 2, &STANDARD.encode([9u8; 32])))
        })),
        failed("checkpoint.signature_invalid"),
    );
    add(
        "checkpoint-size-altered",
        "checkpoint size line changed, old signature kept",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            edit_checkpoint(b, |t| replace_line(t, 1, "5"))
        })),
        failed("checkpoint.signature_invalid"),
    );
    add(
        "checkpoint-grease",
        "checkpoint with three unknown-key signature lines (grease): still verifies",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| edit_checkpoint(b, grease))),
        VERIFIED,
    );
    add(
        "checkpoint-origin-other",
        "bundle origin names the unknown log; checkpoint is the main log's",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| b["log"]["origin"] = json!(UNKNOWN_ORIGIN))),
        failed("checkpoint.origin_mismatch"),
    );
    add(
        "checkpoint-not-a-note",
        "checkpoint text without signature lines",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            edit_checkpoint(b, |t| {
                t.split("\n\n").next().unwrap_or_default().to_string() + "\n"
            })
        })),
        failed("checkpoint.malformed"),
    );
    // Bundle and envelope shape.
    add(
        "bundle-not-json",
        "bundle file is not JSON",
        cbor(&base(next()))?,
        Edit::Bytes(Box::new(|b| b[..b.len() / 2].to_vec())),
        failed("bundle.malformed"),
    );
    add(
        "bundle-duplicate-key",
        "receipt_id given twice (JSON readers disagree on which wins)",
        cbor(&base(next()))?,
        Edit::Bytes(Box::new(|b| {
            let text = String::from_utf8_lossy(b);
            text.replacen(
                "\"receipt_id\"",
                &format!("\"receipt_id\": \"{}\", \"receipt_id\"", d("other")),
                1,
            )
            .into_bytes()
        })),
        failed("bundle.malformed"),
    );
    add(
        "bundle-missing-log",
        "no log object",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            if let Some(o) = b.as_object_mut() {
                o.remove("log");
            }
        })),
        failed("bundle.malformed"),
    );
    add(
        "bundle-media-type-v2",
        "a future bundle version: not evaluated",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            b["media_type"] = json!("application/vnd.rcpt.bundle.v2+json")
        })),
        error("bundle.unsupported"),
    );
    add(
        "bundle-too-large",
        "bundle padded past 256 KiB",
        cbor(&base(next()))?,
        Edit::Bytes(Box::new(|b| {
            let mut v = b.to_vec();
            v.extend(std::iter::repeat_n(b' ', 256 * 1024));
            v
        })),
        failed("bundle.too_large"),
    );
    add(
        "envelope-bad-base64",
        "envelope payload is not base64",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            b["envelope"]["payload"] = json!("%%%not base64%%%")
        })),
        failed("envelope.malformed"),
    );
    add(
        "envelope-url-safe-base64",
        "envelope payload and sig in URL-safe base64 without padding",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            recode_url_safe(&mut b["envelope"]["payload"]);
            recode_url_safe(&mut b["envelope"]["signatures"][0]["sig"]);
        })),
        VERIFIED,
    );
    add(
        "envelope-empty-keyid",
        "signature without keyid: tried against every trusted key",
        cbor(&base(next()))?,
        Edit::None,
        VERIFIED,
    );
    let k = next();
    // Signatures.
    add(
        "signature-flipped",
        "one bit of the trusted signature flipped (the flipped envelope is what was logged)",
        cbor(&base(k))?,
        Edit::None,
        failed("signature.invalid"),
    );
    let k2 = next();
    add(
        "signature-two-one-untrusted",
        "signed by an untrusted key and the trusted key",
        cbor(&base(k2))?,
        Edit::None,
        VERIFIED,
    );
    let k3 = next();
    add(
        "signature-untrusted-only",
        "signed only by a key the trust file does not name",
        cbor(&base(k3))?,
        Edit::None,
        error("signature.untrusted"),
    );
    let k4 = next();
    add(
        "payload-type-other",
        "payload type of another format: not evaluated",
        cbor(&base(k4))?,
        Edit::None,
        error("envelope.payload_type_unsupported"),
    );
    add(
        "log-unknown-origin",
        "logged in a log the trust file does not name",
        cbor(&base(next()))?,
        Edit::None,
        error("log.untrusted"),
    );
    add(
        "envelope-no-signatures",
        "an envelope with an empty signatures list: malformed DSSE",
        cbor(&base(next()))?,
        Edit::None,
        failed("envelope.malformed"),
    );
    add(
        "envelope-empty-keyid-bad-signature",
        "a signature without keyid that verifies under no trusted key: skipped",
        cbor(&base(next()))?,
        Edit::None,
        error("signature.untrusted"),
    );
    let impostor = key("impostor log");
    add(
        "checkpoint-other-key-same-name",
        "checkpoint signed under the log's name by another key (key hash differs): no trusted key signed",
        cbor(&base(next()))?,
        Edit::Json(Box::new(move |b| {
            edit_checkpoint(b, |t| {
                let body = format!("{}\n", t.split("\n\n").next().unwrap_or_default());
                rcpt::note::sign(&body, ORIGIN, &impostor).unwrap_or_default()
            })
        })),
        error("log.untrusted"),
    );
    add(
        "checkpoint-101-signatures",
        "checkpoint with 101 signature lines (limit 100): malformed",
        cbor(&base(next()))?,
        Edit::Json(Box::new(|b| {
            edit_checkpoint(b, |t| {
                let extra: String = (0..100)
                    .map(|i| grease_line(&format!("g{i}")) + "\n")
                    .collect();
                format!("{t}{extra}")
            })
        })),
        failed("checkpoint.malformed"),
    );
    // Envelope-level adjustments for the last cases (all before logging).
    for case in out.iter_mut() {
        let file = case.file.clone();
        let env = &mut case.envelope;
        match file.as_str() {
            "bundles/envelope-empty-keyid.json" => env.signatures[0].keyid = String::new(),
            "bundles/signature-flipped.json" => env.signatures[0].sig[10] ^= 0x04,
            "bundles/signature-two-one-untrusted.json" => {
                let other = sign(env.payload.clone(), stranger);
                env.signatures.insert(0, other.signatures[0].clone());
            }
            "bundles/signature-untrusted-only.json" => *env = sign(env.payload.clone(), stranger),
            "bundles/payload-type-other.json" => {
                *env = Envelope::sign("application/vnd.in-toto+json", env.payload.clone(), issuer)
            }
            "bundles/log-unknown-origin.json" => case.unknown_log = true,
            "bundles/envelope-no-signatures.json" => env.signatures.clear(),
            "bundles/envelope-empty-keyid-bad-signature.json" => {
                env.signatures[0].keyid = String::new();
                env.signatures[0].sig[3] ^= 0x10;
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Add `by` to a JSON integer in place.
fn add_u64(v: &mut J, by: u64) {
    *v = json!(v.as_u64().unwrap_or(0) + by);
}

/// Flip one bit of proof hash `i`.
fn flip_proof(b: &mut J, i: usize) {
    let h = &mut b["log"]["inclusion"][i];
    let mut bytes = STANDARD
        .decode(h.as_str().unwrap_or_default())
        .unwrap_or_default();
    if let Some(x) = bytes.get_mut(5) {
        *x ^= 0x01;
    }
    *h = json!(STANDARD.encode(bytes));
}

/// Re-encode a standard base64 JSON string as URL-safe without padding.
fn recode_url_safe(v: &mut J) {
    let bytes = STANDARD
        .decode(v.as_str().unwrap_or_default())
        .unwrap_or_default();
    *v = json!(URL_SAFE_NO_PAD.encode(bytes));
}

/// Apply `f` to the checkpoint note text of a bundle.
fn edit_checkpoint(b: &mut J, f: impl Fn(&str) -> String) {
    let text = b["log"]["checkpoint"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    b["log"]["checkpoint"] = json!(f(&text));
}

/// Replace line `i` (0-based) of a note's text.
fn replace_line(note: &str, i: usize, with: &str) -> String {
    let mut lines: Vec<String> = note.split('\n').map(str::to_string).collect();
    if let Some(l) = lines.get_mut(i) {
        *l = with.to_string();
    }
    lines.join("\n")
}

/// Flip one bit in the last signature line's signature bytes.
fn flip_signature(note: &str) -> String {
    let (body, sigs) = note.split_once("\n\n").unwrap_or((note, ""));
    let mut lines: Vec<String> = sigs.lines().map(str::to_string).collect();
    if let Some(last) = lines.last_mut()
        && let Some((prefix, b64)) = last.rsplit_once(' ')
    {
        let mut bytes = STANDARD.decode(b64).unwrap_or_default();
        if let Some(x) = bytes.get_mut(20) {
            *x ^= 0x80;
        }
        *last = format!("{prefix} {}", STANDARD.encode(bytes));
    }
    format!("{body}\n\n{}\n", lines.join("\n"))
}

/// A signature line of an unknown key (deterministic bytes).
fn grease_line(label: &str) -> String {
    let bytes: Vec<u8> = [
        Digest::sha256(label.as_bytes()).bytes,
        Digest::sha256(&[1]).bytes,
        Digest::sha256(&[2]).bytes,
    ]
    .concat()
    .into_iter()
    .take(68)
    .collect();
    format!("— grease.example/{label} {}", STANDARD.encode(bytes))
}

/// Add three signature lines of unknown keys (one before, two after the real one).
fn grease(note: &str) -> String {
    let (body, sigs) = note.split_once("\n\n").unwrap_or((note, ""));
    format!(
        "{body}\n\n{}\n{}{}\n{}\n",
        grease_line("a"),
        sigs,
        grease_line("b"),
        grease_line("c")
    )
}

/// A filler receipt for growing the log.
fn filler(i: usize, issuer: &SigningKey) -> Result<Envelope> {
    let payload = cbor(&with(
        10_000 + i as i64,
        json!({"change_id": d(&format!("filler {i}"))}),
    ))?;
    Ok(sign(payload, issuer))
}

/// Write a file, refusing to overwrite.
fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    std::io::Write::write_all(&mut f, bytes)?;
    Ok(())
}

/// Copy the public part of a log (checkpoint and tiles) into the corpus.
fn copy_public(from: &Path, to: &Path) -> Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ".rcpt" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            fs::create_dir_all(&dst)?;
            copy_public(&src, &dst)?;
        } else {
            write_new(&dst, &fs::read(&src)?)?;
        }
    }
    Ok(())
}

/// Files under `dir`, sorted, relative paths with '/'.
fn list_files(dir: &Path, prefix: &str, out: &mut Vec<String>) -> Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.file_type()?.is_dir() {
            list_files(&e.path(), &format!("{name}/"), out)?;
        } else {
            out.push(name);
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let out: PathBuf = std::env::args()
        .nth(1)
        .context("usage: gen_frozen OUT_DIR")?
        .into();
    if out.join("manifest.json").exists() {
        bail!(
            "{} already holds a frozen corpus: frozen files are never regenerated",
            out.display()
        );
    }
    let issuer = key("issuer");
    let stranger = key("untrusted issuer");
    let log_key = key("log");
    let other_log_key = key("unknown log");
    let work = std::env::temp_dir().join(format!("rcpt-gen-frozen-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    let (main_dir, other_dir) = (work.join("main"), work.join("other"));
    Log::init(&main_dir, ORIGIN, &log_key)?;
    Log::init(&other_dir, UNKNOWN_ORIGIN, &other_log_key)?;
    let mut writer = LogWriter::open(&main_dir, &log_key, false)?;
    let mut other = LogWriter::open(&other_dir, &other_log_key, false)?;

    // Grow the main log so checkpoints exist at 1, 2, 3, 7, 8, 9.
    let mut fillers = 0;
    let mut size_cases = std::collections::BTreeSet::new();
    for size in SMALL_SIZES {
        let mut batch = Vec::new();
        while (fillers as u64) < size {
            batch.push(filler(fillers, &issuer)?.to_entry());
            fillers += 1;
        }
        writer.append(&batch)?;
        size_cases.insert((size, 0));
        size_cases.insert((size, size - 1));
        if size > 2 {
            size_cases.insert((size, size / 2));
        }
    }
    // The cases, then fillers past 1,000 entries.
    let mut cases = cases(&issuer, &stranger)?;
    // One batch per log, so the log holds few partial tiles.
    let mut main_idx = Vec::new().into_iter();
    let mut other_idx = Vec::new().into_iter();
    for unknown in [false, true] {
        let w = if unknown { &mut other } else { &mut writer };
        let entries: Vec<Vec<u8>> = cases
            .iter()
            .filter(|c| c.unknown_log == unknown)
            .map(|c| c.envelope.to_entry())
            .collect();
        let appended = w.append(&entries)?;
        if appended.len() != entries.len() || appended.iter().any(|a| !a.new) {
            bail!("every case must be a new entry");
        }
        let indices: Vec<u64> = appended.iter().map(|a| a.index).collect();
        if unknown {
            other_idx = indices.into_iter();
        } else {
            main_idx = indices.into_iter();
        }
    }
    let mut index_of = Vec::new();
    for case in &cases {
        let next = if case.unknown_log {
            other_idx.next()
        } else {
            main_idx.next()
        };
        index_of.push(next.context("index for case")?);
    }
    let mut batch = Vec::new();
    while fillers < FINAL_FILLER {
        batch.push(filler(fillers, &issuer)?.to_entry());
        fillers += 1;
    }
    writer.append(&batch)?;
    let final_size = writer.log().size();
    for index in [0, 1, 511, 512, 1023, final_size - 1] {
        size_cases.insert((final_size, index));
    }
    // Bundles of log entries at various sizes: all verified.
    for (size, index) in size_cases {
        let entry = writer.log().entry(index)?;
        cases.push(Case {
            file: format!("bundles/size-{size}-index-{index}.json"),
            comment: format!("entry {index} of a log of {size}"),
            envelope: Envelope::from_entry(&entry)?,
            unknown_log: false,
            size: Some(size),
            edit: Edit::None,
            expect: VERIFIED,
        });
        index_of.push(index);
    }

    let mut manifest_cases = Vec::new();
    let mut seen = BTreeMap::new();
    for (case, index) in cases.iter().zip(index_of) {
        if seen.insert(case.file.clone(), ()).is_some() {
            bail!("two cases write {}", case.file);
        }
        let log = if case.unknown_log {
            other.log()
        } else {
            writer.log()
        };
        let size = case.size.unwrap_or(log.size());
        let bundle = Bundle {
            receipt_id: rcpt::canonical::identity(&case.envelope.payload).to_string(),
            envelope: case.envelope.clone(),
            log: LogProof {
                origin: log.origin().to_string(),
                index,
                tree_size: size,
                inclusion: log.inclusion_proof(index, size)?,
                checkpoint: log.checkpoint_at(size)?,
            },
        };
        let text = bundle.to_json();
        let bytes = match &case.edit {
            Edit::None => text.into_bytes(),
            Edit::Json(f) => {
                let mut j: J = serde_json::from_str(&text)?;
                f(&mut j);
                serde_json::to_vec_pretty(&j)?
            }
            Edit::Bytes(f) => f(text.as_bytes()),
        };
        write_new(&out.join(&case.file), &bytes)?;
        manifest_cases.push(json!({
            "file": case.file, "expect": case.expect.outcome, "reason": case.expect.reason, "comment": case.comment,
        }));
    }

    // Keys (public only), trust, the main log's public files, manifest, checksums.
    let issuer_pub = issuer.verifying_key();
    write_new(
        &out.join("keys/issuer.pub"),
        keys::verifying_key_to_pem(&issuer_pub).as_bytes(),
    )?;
    write_new(
        &out.join("keys/untrusted-issuer.pub"),
        keys::verifying_key_to_pem(&stranger.verifying_key()).as_bytes(),
    )?;
    let log_vkey = NoteVerifier::new(ORIGIN, log_key.verifying_key())?.to_string();
    write_new(
        &out.join("keys/log.vkey"),
        format!("{log_vkey}\n").as_bytes(),
    )?;
    let trust = json!({
        "issuers": [{"name": "gate.example/frozen", "public_key": STANDARD.encode(issuer_pub.as_bytes())}],
        "logs": [{"verifier_key": log_vkey}],
    });
    write_new(
        &out.join("trust.json"),
        serde_json::to_string_pretty(&trust)?.as_bytes(),
    )?;
    fs::create_dir_all(out.join("log"))?;
    copy_public(&main_dir, &out.join("log"))?;
    let manifest = json!({"trust": "trust.json", "cases": manifest_cases});
    write_new(
        &out.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)?.as_bytes(),
    )?;
    write_new(&out.join("README.md"), CORPUS_README.as_bytes())?;
    let mut files = Vec::new();
    list_files(&out, "", &mut files)?;
    let mut sums = String::new();
    for f in files.iter().filter(|f| *f != "SHA256SUMS") {
        sums.push_str(&format!(
            "{}  {f}\n",
            to_hex(&Digest::sha256(&fs::read(out.join(f))?).bytes)
        ));
    }
    write_new(&out.join("SHA256SUMS"), sums.as_bytes())?;
    let _ = fs::remove_dir_all(&work);
    println!(
        "wrote {} cases to {} (issuer keyid {})",
        manifest_cases_len(&out)?,
        out.display(),
        keys::keyid(&issuer_pub)
    );
    Ok(())
}

/// Number of cases in the written manifest.
fn manifest_cases_len(out: &Path) -> Result<usize> {
    let m: J = serde_json::from_slice(&fs::read(out.join("manifest.json"))?)?;
    Ok(m["cases"].as_array().map_or(0, |a| a.len()))
}
