//! External DSSE vectors (tests/vectors/dsse, origins in its README): the
//! DSSE spec example (ECDSA P-256: PAE and parsing only) and Ed25519 DSSE
//! envelopes made by securesystemslib, an independent DSSE implementation.
//! Ed25519 is deterministic, so our signer must reproduce its signatures.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod support;

use rcpt::keys::{self, SigningKey, VerifyingKey};
use rcpt::receipt::dsse::{Envelope, EnvelopeError, SignatureCheck, check_signatures, pae};
use serde_json::Value;
use support::hex_bytes as hex;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/dsse");

fn load(file: &str) -> Value {
    support::vector_json(DIR, file)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("missing {key}"))
}

/// The envelope with every keyid cleared: securesystemslib's keyids are its
/// own (SHA-256 of a JSON key), which name no rcpt key, so the trust rule
/// would skip them; an empty keyid is tried against every trusted key.
fn parse_anonymous(envelope: &Value) -> Result<Envelope, EnvelopeError> {
    let mut env = Envelope::from_json(envelope.to_string().as_bytes())?;
    for s in &mut env.signatures {
        s.keyid.clear();
    }
    Ok(env)
}

/// One generated case: PAE bytes, parsing, byte-exact signing, verification.
fn run_case(case: &Value, key: &SigningKey, public: &VerifyingKey, sslib_keyid: &str) {
    let name = text(case, "name");
    let payload_type = text(case, "payloadType");
    let payload = hex(text(case, "payload_hex"));
    assert_eq!(
        pae(payload_type, &payload),
        hex(text(case, "pae_hex")),
        "{name}: PAE"
    );
    let parsed = Envelope::from_json(case["envelope"].to_string().as_bytes()).unwrap();
    assert_eq!(parsed.payload, payload, "{name}");
    assert_eq!(
        parsed.signatures[0].sig,
        hex(text(case, "sig_hex")),
        "{name}"
    );
    // Their keyid names no rcpt key: skipped, so nothing is evaluated.
    assert_eq!(
        check_signatures(&parsed, &[*public]),
        SignatureCheck::NotEvaluated
    );
    let ours = Envelope::sign(payload_type, payload.clone(), key);
    assert_eq!(
        ours.signatures[0].sig, parsed.signatures[0].sig,
        "{name}: signing"
    );
    let mut relabelled = ours.clone();
    relabelled.signatures[0].keyid = sslib_keyid.to_owned();
    let ours_json: Value = serde_json::from_str(&relabelled.to_json()).unwrap();
    assert_eq!(ours_json, case["envelope"], "{name}: JSON");
    let want = SignatureCheck::Verified {
        keyids: vec![keys::keyid(public)],
    };
    assert_eq!(check_signatures(&ours, &[*public]), want, "{name}");
    assert_eq!(
        check_signatures(&parse_anonymous(&case["envelope"]).unwrap(), &[*public]),
        want
    );
}

/// Negatives: refused at parse, or not verified under the trusted key.
fn run_negative(case: &Value, public: &VerifyingKey) {
    let name = text(case, "name");
    assert_eq!(text(case, "expect"), "reject");
    match parse_anonymous(&case["envelope"]) {
        Err(e) => assert_eq!(e, EnvelopeError::NoSignatures, "{name}"),
        Ok(env) => {
            let mut keyed = env.clone();
            for s in &mut keyed.signatures {
                s.keyid = keys::keyid(public);
            }
            // Anonymous: skipped; attributed to the key by keyid: Failed.
            assert_eq!(
                check_signatures(&env, &[*public]),
                SignatureCheck::NotEvaluated
            );
            assert!(matches!(
                check_signatures(&keyed, &[*public]),
                SignatureCheck::Failed { index: 0, .. }
            ));
        }
    }
}

fn run_generated() -> usize {
    let v = load("ed25519_generated.json");
    let seed: [u8; 32] = hex(text(&v, "ed25519_seed_hex")).try_into().unwrap();
    let key = SigningKey::from_bytes(&seed);
    let public = key.verifying_key();
    assert_eq!(
        public.as_bytes().to_vec(),
        hex(text(&v, "ed25519_public_hex"))
    );
    // Their PEM files read as the same key; ours print identically.
    let from_pem = keys::signing_key_from_pem(text(&v, "private_pkcs8_pem")).unwrap();
    assert_eq!(from_pem.to_bytes(), seed);
    assert_eq!(
        keys::signing_key_to_pem(&key),
        text(&v, "private_pkcs8_pem")
    );
    assert_eq!(
        keys::verifying_key_to_pem(&public),
        text(&v, "public_spki_pem")
    );
    let sslib_keyid = text(&v, "sslib_keyid");
    let mut ran = 0;
    for case in v["cases"].as_array().unwrap() {
        run_case(case, &key, &public, sslib_keyid);
        ran += 1;
    }
    for case in v["negative"].as_array().unwrap() {
        run_negative(case, &public);
        ran += 1;
    }
    for field in ["positive_urlsafe_base64", "positive_unknown_field"] {
        assert_eq!(text(&v[field], "expect"), "accept");
        let env = parse_anonymous(&v[field]["envelope"]).unwrap();
        let want = SignatureCheck::Verified {
            keyids: vec![keys::keyid(&public)],
        };
        assert_eq!(check_signatures(&env, &[public]), want, "{field}");
        ran += 1;
    }
    ran
}

/// The spec's example is ECDSA P-256, which rcpt does not implement: its PAE
/// bytes and its envelope shape still have to match.
fn run_spec_example() -> usize {
    let v = load("spec_example_ecdsa_p256.json");
    let got = pae(text(&v, "payloadType"), text(&v, "payload_utf8").as_bytes());
    assert_eq!(got, text(&v, "pae_utf8").as_bytes());
    assert_eq!(got, hex(text(&v, "pae_hex")));
    let plain = Envelope::from_json(v["envelope"].to_string().as_bytes()).unwrap();
    assert_eq!(
        plain.signatures[0].keyid, "",
        "a missing keyid reads as empty"
    );
    assert_eq!(plain.signatures[0].sig.len(), 64);
    let keyed = Envelope::from_json(
        v["envelope_with_keyid_from_signing_spec_py"]
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(keyed.signatures[0].keyid, "66301bbf");
    assert_eq!(keyed.payload, plain.payload);
    // No Ed25519 key verifies an ECDSA signature: skipped, not failed.
    let ed = SigningKey::from_bytes(&[9; 32]).verifying_key();
    assert_eq!(
        check_signatures(&plain, &[ed]),
        SignatureCheck::NotEvaluated
    );
    assert_eq!(
        check_signatures(&keyed, &[ed]),
        SignatureCheck::NotEvaluated
    );
    3
}

#[test]
fn every_dsse_vector_runs() {
    let files = support::file_names(DIR);
    let mut ran = 0;
    for file in &files {
        ran += match file.as_str() {
            "ed25519_generated.json" => run_generated(),
            "spec_example_ecdsa_p256.json" => run_spec_example(),
            "README.md" | "LICENSE.dsse" => 0,
            other => panic!("unexpected vector file {other}"),
        };
    }
    // 5 cases + 4 negatives + 2 positives; 3 checks of the spec example.
    assert_eq!(ran, 14);
}

#[test]
fn log_entry_round_trips_the_vectors() {
    let v = load("ed25519_generated.json");
    for case in v["cases"].as_array().unwrap() {
        let env = Envelope::from_json(case["envelope"].to_string().as_bytes()).unwrap();
        let entry = env.to_entry();
        assert_eq!(Envelope::from_entry(&entry).unwrap(), env);
        // An independent CBOR decoder sees the DAG-CBOR shape: keys sorted
        // length-first, payload and sig as byte strings.
        let value: ciborium::Value = ciborium::from_reader(entry.as_slice()).unwrap();
        let map = value.as_map().unwrap();
        let keys: Vec<&str> = map.iter().map(|(k, _)| k.as_text().unwrap()).collect();
        assert_eq!(keys, ["payload", "signatures", "payload_type"]);
        assert_eq!(map[0].1.as_bytes().unwrap(), &env.payload);
        let sig = &map[1].1.as_array().unwrap()[0];
        let sig = sig.as_map().unwrap();
        assert_eq!(
            sig[0].0.as_text(),
            Some("sig"),
            "\"sig\" sorts before \"keyid\""
        );
        assert_eq!(sig[0].1.as_bytes().unwrap(), &env.signatures[0].sig);
    }
}
