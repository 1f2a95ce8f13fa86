//! `rcpt receipt issue` and `rcpt receipt inspect`, run as a user would.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use support::canonical as canonical_support;
mod support;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use canonical_support::*;
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use ipld_core::ipld::Ipld;
use rcpt::receipt::canonical::json;
use serde_json::json;
use std::path::{Path, PathBuf};
use support::rcpt;

/// A fixed test key, written as PKCS#8 PEM into `dir`.
fn write_key(dir: &Path) -> (PathBuf, SigningKey) {
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let pem = key.to_pkcs8_pem(Default::default()).unwrap();
    let path = dir.join("issuer.key");
    std::fs::write(&path, pem.as_bytes()).unwrap();
    (path, key)
}

/// Issue `payload` (JSON text) from stdin; the assert for further checks.
fn issue_stdin(key: &Path, payload: &str) -> assert_cmd::assert::Assert {
    rcpt()
        .args(["receipt", "issue", "--key"])
        .arg(key)
        .arg("-")
        .write_stdin(payload)
        .assert()
}

fn payload_bytes(envelope: &[u8]) -> Vec<u8> {
    let env: serde_json::Value = serde_json::from_slice(envelope).unwrap();
    STANDARD.decode(env["payload"].as_str().unwrap()).unwrap()
}

#[test]
fn issued_payload_is_canonical_under_an_independent_codec() {
    let dir = tempfile::tempdir().unwrap();
    let (key, _) = write_key(dir.path());
    let out = issue_stdin(&key, SAMPLE_PAYLOAD)
        .success()
        .get_output()
        .stdout
        .clone();
    let env: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(env["payloadType"], "application/vnd.rcpt.receipt.v1+cbor");
    let bytes = payload_bytes(&out);
    let theirs: Ipld = serde_ipld_dagcbor::from_slice(&bytes).unwrap();
    assert_eq!(
        serde_ipld_dagcbor::to_vec(&theirs).unwrap(),
        bytes,
        "canonical"
    );
    let input = json::from_json(SAMPLE_PAYLOAD.as_bytes()).unwrap();
    assert_eq!(from_ipld(&theirs), Ok(input));

    // Another key order and spacing: the very same payload bytes.
    let v = sample_json();
    let mut parts: Vec<String> = v
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, x)| {
            format!(
                "{}:\n{}",
                json!(k),
                serde_json::to_string_pretty(x).unwrap()
            )
        })
        .collect();
    parts.rotate_left(5);
    let shuffled = format!("\r\n{{ {} }}\t", parts.join(" ,\n"));
    let out2 = issue_stdin(&key, &shuffled)
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(payload_bytes(&out2), bytes);
}

#[test]
fn inspect_shows_the_identifiers_of_exactly_the_payload() {
    let dir = tempfile::tempdir().unwrap();
    let (key, signing) = write_key(dir.path());
    let env_path = dir.path().join("r.json");
    let payload = dir.path().join("p.json");
    std::fs::write(&payload, SAMPLE_PAYLOAD).unwrap();
    rcpt()
        .args(["receipt", "issue", "--key"])
        .arg(&key)
        .arg("-o")
        .arg(&env_path)
        .arg(&payload)
        .assert()
        .success()
        .stdout("");
    let bytes = payload_bytes(&std::fs::read(&env_path).unwrap());
    let out = rcpt()
        .args(["receipt", "inspect", "--json"])
        .arg(&env_path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let report: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let id = format!("blake3:{}", blake3::hash(&bytes).to_hex());
    assert_eq!(report["receipt_id"], id.as_str());
    let value = json::from_json(SAMPLE_PAYLOAD.as_bytes()).unwrap();
    let jcs = independent_jcs(&value).unwrap();
    let interop = format!(
        "sha256:{}",
        hex(&rcpt::digest::Digest::sha256(jcs.as_bytes()).bytes)
    );
    assert_eq!(report["interop_digest"], interop.as_str());
    use sha2::Digest as _;
    let keyid = hex(&sha2::Sha256::digest(signing.verifying_key().as_bytes()));
    assert_eq!(report["signatures"], json!([{"keyid": keyid}]));
    assert_eq!(report["payload"], sample_json());
    assert_eq!(report["valid"], true);
    assert_eq!(report["problems"], json!([]));

    // Human form shows the same identifiers.
    rcpt()
        .args(["receipt", "inspect"])
        .arg(&env_path)
        .assert()
        .success()
        .stdout(predicates::str::contains(id.as_str()))
        .stdout(predicates::str::contains(interop.as_str()))
        .stdout(predicates::str::contains(keyid.as_str()));
}

/// Each refused payload as data: (what it breaks, reason code, mutation).
fn refused_cases() -> Vec<(&'static str, &'static str, serde_json::Value)> {
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = sample_json();
        f(&mut v);
        v
    };
    vec![
        (
            "rev",
            "invariant.reversibility",
            with(&|v| v["inverse_delta_id"] = json!(null)),
        ),
        (
            "deny",
            "invariant.verdict",
            with(&|v| {
                v["verdict"] = json!({"deny": {"reasons": ["z", "a"]}});
                v["applied"] = json!(false);
            }),
        ),
        (
            "applied",
            "invariant.applied",
            with(&|v| v["verdict"] = json!({"escalate": {"ticket": "T"}})),
        ),
        (
            "reads",
            "invariant.read_set",
            with(&|v| v["read_set"].as_array_mut().unwrap().reverse()),
        ),
        (
            "replay",
            "invariant.replay",
            with(&|v| {
                v["replay"] = json!({"class": "mixed", "proposal": "llm", "execution": "llm"})
            }),
        ),
        (
            "unknown",
            "payload.schema",
            with(&|v| v["note"] = json!("hi")),
        ),
        (
            "missing",
            "payload.schema",
            with(&|v| {
                v.as_object_mut().unwrap().remove("applied");
            }),
        ),
        (
            "type",
            "payload.schema",
            with(&|v| v["issued_at"] = json!("now")),
        ),
        (
            "digest",
            "payload.schema",
            with(&|v| v["change_id"] = json!("blake3:XYZ")),
        ),
        (
            "version",
            "payload.version_unsupported",
            with(&|v| v["version"] = json!(2)),
        ),
        (
            "float",
            "payload.malformed",
            with(&|v| v["issued_at"] = json!(1.5)),
        ),
        (
            "bigint",
            "payload.malformed",
            with(&|v| v["issued_at"] = json!(9007199254740992u64)),
        ),
    ]
}

#[test]
fn every_refusal_names_its_code_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (key, _) = write_key(dir.path());
    let cases = refused_cases();
    for (name, code, payload) in &cases {
        let input = dir.path().join(format!("{name}.json"));
        std::fs::write(&input, serde_json::to_vec_pretty(payload).unwrap()).unwrap();
        let out = dir.path().join(format!("{name}.env"));
        let assert = rcpt()
            .args(["receipt", "issue", "--key"])
            .arg(&key)
            .arg("-o")
            .arg(&out)
            .arg(&input)
            .assert()
            .code(1)
            .stdout("");
        let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
        assert!(
            stderr.contains(&format!("payload refused [{code}]")),
            "{name}: {stderr}"
        );
        assert!(!out.exists(), "{name}: output written");
    }
    // Only the key and the inputs remain: no output, no temporary file.
    let left = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(left, 1 + cases.len());
    assert_eq!(cases.len(), 12);
}

#[test]
fn duplicate_keys_are_refused_and_an_old_output_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (key, _) = write_key(dir.path());
    let out = dir.path().join("r.env");
    std::fs::write(&out, "old").unwrap();
    let dup = SAMPLE_PAYLOAD.replacen(
        "\"applied\": true,",
        "\"applied\": true, \"applied\": false,",
        1,
    );
    rcpt()
        .args(["receipt", "issue", "--key"])
        .arg(&key)
        .arg("-o")
        .arg(&out)
        .arg("-")
        .write_stdin(dup)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("[payload.malformed]"))
        .stderr(predicates::str::contains("duplicate key \"applied\""));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old");
}

/// Write an envelope around arbitrary payload bytes, signed by the test key.
fn envelope_file(dir: &Path, name: &str, payload: Vec<u8>) -> PathBuf {
    let key = SigningKey::from_bytes(&[7u8; 32]);
    let env =
        rcpt::receipt::dsse::Envelope::sign("application/vnd.rcpt.receipt.v1+cbor", payload, &key);
    let path = dir.join(name);
    std::fs::write(&path, env.to_json()).unwrap();
    path
}

#[test]
fn inspect_names_the_problem_of_a_bad_payload() {
    let dir = tempfile::tempdir().unwrap();
    // A signed receipt whose reversibility is true with a null inverse.
    let mut v = sample_json();
    v["inverse_delta_id"] = json!(null);
    let value = json::from_json(&serde_json::to_vec(&v).unwrap()).unwrap();
    let bytes = rcpt::receipt::canonical::dagcbor::encode(&value);
    let path = envelope_file(dir.path(), "broken.json", bytes.clone());
    let out = rcpt()
        .args(["receipt", "inspect", "--json"])
        .arg(&path)
        .assert()
        .code(1);
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert_eq!(report["problems"][0]["reason"], "invariant.reversibility");
    assert_eq!(
        report["receipt_id"],
        format!("blake3:{}", blake3::hash(&bytes).to_hex()).as_str()
    );
    assert_eq!(report["payload"]["inverse_delta_id"], json!(null));

    // Non-canonical bytes (integer 1 as 0x18 0x01): id still shown, problem named.
    let path = envelope_file(dir.path(), "noncanon.json", vec![0x18, 0x01]);
    let out = rcpt()
        .args(["receipt", "inspect", "--json"])
        .arg(&path)
        .assert()
        .code(1);
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["problems"][0]["reason"], "payload.non_canonical");
    assert_eq!(report["payload"], json!(null));
    let id = format!("blake3:{}", blake3::hash(&[0x18, 0x01]).to_hex());
    assert_eq!(report["receipt_id"], id.as_str());
    rcpt()
        .args(["receipt", "inspect"])
        .arg(&path)
        .assert()
        .code(1)
        .stdout(predicates::str::contains("problem [payload.non_canonical]"));
}
