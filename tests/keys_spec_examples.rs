//! The examples at the top of spec/envelope.md and spec/checkpoint.md, made
//! with pyca/cryptography (an independent Ed25519), reproduced by rcpt.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcpt::keys::{self, NoteVerifier, SigningKey};
use rcpt::receipt::dsse::{Envelope, SignatureCheck, check_signatures};
use rcpt::tlog::note::{self, Checkpoint, Note, NoteCheck};

/// RFC 8032 section 7.1 TEST 1.
const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

fn key() -> SigningKey {
    let seed: Vec<u8> = (0..64)
        .step_by(2)
        .map(|i| u8::from_str_radix(&SEED[i..i + 2], 16).unwrap())
        .collect();
    SigningKey::from_bytes(&seed.try_into().unwrap())
}

#[test]
fn envelope_example() {
    let json = r#"{"payload": "oWF2AQ==",
 "payloadType": "application/vnd.rcpt.receipt.v1+cbor",
 "signatures": [{"keyid": "21fe31dfa154a261626bf854046fd2271b7bed4b6abe45aa58877ef47f9721b9",
                 "sig": "7XCJ1+n06qZe1WBI/lQ/E/f0p5R2NgQiLnAycBkSsjal+Q4Ug3PhlumEsMPbO5CY7YEWTGlD42GPEiKnpXZABw=="}]}"#;
    let theirs = Envelope::from_json(json.as_bytes()).unwrap();
    let k = key();
    let ours = Envelope::sign(
        rcpt::constants::RECEIPT_PAYLOAD_TYPE,
        vec![0xa1, 0x61, 0x76, 0x01],
        &k,
    );
    assert_eq!(ours, theirs);
    let public = k.verifying_key();
    assert_eq!(
        check_signatures(&theirs, &[public]),
        SignatureCheck::Verified {
            keyids: vec![keys::keyid(&public)]
        }
    );
}

#[test]
fn checkpoint_example() {
    let signed = "example.com/log\n3\nLXEWQrcmsEQBYnyp+6wy9chTD7GQPMTbAiWHF5IaSIE=\n\n\u{2014} example.com/log zHFGcGGOUiwwQqQ74413r62rdLHZxjeBhYBe8pcBO79yNMIb15uIRf40VzF/rCtx009gzeYLr7TrtjkwzVmJOc4ZqQI=\n";
    let vkey = "example.com/log+cc714670+AddamAGCsQq31Uv+08lkBzoO4XLz2qYjJa8CGmj3B1Ea";
    let k = key();
    let v = NoteVerifier::new("example.com/log", k.verifying_key()).unwrap();
    assert_eq!(v.to_string(), vkey);
    assert_eq!(NoteVerifier::parse(vkey).unwrap(), v);
    let cp = Checkpoint {
        origin: "example.com/log".into(),
        size: 3,
        root_hash: sha256_x(),
        extensions: vec![],
    };
    assert_eq!(
        note::sign(&cp.to_text(), "example.com/log", &k).unwrap(),
        signed
    );
    let parsed = Note::parse(signed.as_bytes()).unwrap();
    assert_eq!(Checkpoint::parse(&parsed.text).unwrap(), cp);
    assert_eq!(
        note::check(&parsed, &[v]),
        NoteCheck::Verified {
            names: vec!["example.com/log".into()]
        }
    );
}

fn sha256_x() -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(b"x").into()
}
