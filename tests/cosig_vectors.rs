//! cosignature/v1 (C2SP tlog-cosignature): external vectors from Sunlight
//! (tests/vectors/cosignature/, origins in its README), known answers made
//! by the independent reference (tests/independent/witness_ref.py, Ed25519
//! from pyca/cryptography) and the spec's signed-message example.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcpt::keys::SigningKey;
use rcpt::tlog::cosig::{self, CosigError, CosigStatus, WitnessVerifier};
use rcpt::tlog::note::{Checkpoint, Note};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/cosignature")
}

fn key(hex: &str) -> SigningKey {
    let seed: Vec<u8> = (0..64)
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    SigningKey::from_bytes(&seed.try_into().unwrap())
}

/// RFC 8032 section 7.1 TEST 1 and TEST 2 secret keys.
const TEST1: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const TEST2: &str = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";

/// The checkpoint body of the tlog-cosignature example.
const BODY: &str =
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";

#[test]
fn signed_message_is_the_spec_example() {
    // tlog-cosignature "Ed25519 signed message", the example block.
    let want = "cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n\
                CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n";
    assert_eq!(cosig::signed_message(BODY, 1_679_315_147), want.as_bytes());
    // No leading zeros, and 0 is "0".
    assert!(cosig::signed_message(BODY, 0).starts_with(b"cosignature/v1\ntime 0\n"));
}

/// (seed, name, timestamp, vkey, line): computed by
/// `tests/independent/witness_ref.py cosign SEED NAME TS BODY` with pyca/cryptography.
const KATS: &[(&str, &str, u64, &str, &str)] = &[
    (
        TEST1,
        "witness.example.com/w1",
        1_679_315_147,
        "witness.example.com/w1+7e6f4aaa+BNdamAGCsQq31Uv+08lkBzoO4XLz2qYjJa8CGmj3B1Ea",
        "\u{2014} witness.example.com/w1 fm9KqgAAAABkGFDL+TPmh4BYuAjsYRoqMJCWb/gWJaeRF/kmm5tlCr9sJ57DLErur7K0yDXc2ArN+TIuotuB/HbuL3AJsp3bv/aNCQ==\n",
    ),
    (
        TEST2,
        "witness.example.com/w2",
        1,
        "witness.example.com/w2+0fa94dae+BD1AF8PoQ4lakrcKp00bfrycmCzPLsSWjMDNVfEq9GYM",
        "\u{2014} witness.example.com/w2 D6lNrgAAAAAAAAAB/kGOySn6YD2J9VdEaWM/c/MNIH4LvjQOqR2kUya4BH3exPxdTmE9YySW+YoByYw5Ofz55N1DqP55oFH1OGvuDw==\n",
    ),
    (
        TEST1,
        "witness.example.com/w1",
        (1 << 63) - 1,
        "witness.example.com/w1+7e6f4aaa+BNdamAGCsQq31Uv+08lkBzoO4XLz2qYjJa8CGmj3B1Ea",
        "\u{2014} witness.example.com/w1 fm9Kqn//////////0eK5YpiZVAr8EyCe/jzWkEgOMn79qBVLu0KCpAqvSq+5qwKzvFPxKzMT8gqUhNkLRpNplaqDz47pCvm5yWXUAw==\n",
    ),
];

#[test]
fn known_answers_from_the_independent_reference() {
    for (seed, name, ts, vkey, line) in KATS {
        let k = key(seed);
        let w = WitnessVerifier::new(name, k.verifying_key()).unwrap();
        assert_eq!(w.to_string(), *vkey);
        assert_eq!(WitnessVerifier::parse(vkey).unwrap(), w);
        assert_eq!(
            format!(
                "{:08x}",
                u32::from_be_bytes(cosig::key_id(name, &k.verifying_key()))
            ),
            vkey.split('+').nth(1).unwrap()
        );
        assert_eq!(
            cosig::sign(BODY, name, &k, *ts).unwrap(),
            *line,
            "{name} at {ts}"
        );
        let note = Note::parse(format!("{BODY}\n{line}").as_bytes()).unwrap();
        assert_eq!(
            cosig::check(&note, &[w]),
            vec![CosigStatus::Verified { timestamp: *ts }]
        );
    }
}

#[test]
fn sunlight_cosignatures_verify_and_mutants_fail() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "checkpoint"))
        .collect();
    files.sort();
    let mut verified = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let note = Note::parse(text.as_bytes()).unwrap();
        Checkpoint::parse(&note.text).unwrap();
        let Ok(vkey) = std::fs::read_to_string(path.with_extension("vkey")) else {
            continue; // parse only
        };
        let w = WitnessVerifier::parse(&vkey).unwrap();
        assert_eq!(
            cosig::check(&note, std::slice::from_ref(&w)),
            vec![CosigStatus::Verified {
                timestamp: 1_767_139_200
            }],
            "{}",
            path.display()
        );
        // One changed byte in the body or in the signature: Failed.
        let mut body = note.clone();
        body.text = body.text.replacen('3', "4", 1);
        assert!(matches!(
            cosig::check(&body, std::slice::from_ref(&w))[..],
            [CosigStatus::Failed(CosigError::Invalid { .. })]
        ));
        let mut sig = note.clone();
        let line = sig.signatures.iter_mut().find(|l| w.matches(l)).unwrap();
        *line.sig.last_mut().unwrap() ^= 0x01;
        assert!(matches!(
            cosig::check(&sig, std::slice::from_ref(&w))[..],
            [CosigStatus::Failed(_)]
        ));
        // The timestamp is signed: changing it breaks the signature.
        let mut ts = note.clone();
        let line = ts.signatures.iter_mut().find(|l| w.matches(l)).unwrap();
        line.sig[7] ^= 0x01;
        assert!(matches!(
            cosig::check(&ts, std::slice::from_ref(&w))[..],
            [CosigStatus::Failed(CosigError::Invalid { .. })]
        ));
        verified += 1;
    }
    assert_eq!(
        (files.len(), verified),
        (4, 3),
        "files walked, files verified"
    );
}

#[test]
fn c2sp_example_line_has_the_cosignature_shape() {
    let text =
        std::fs::read_to_string(dir().join("c2sp-tlog-cosignature-example.checkpoint")).unwrap();
    let note = Note::parse(text.as_bytes()).unwrap();
    let line = note
        .signatures
        .iter()
        .find(|l| l.name == "witness.example.com/w1")
        .unwrap();
    let c = cosig::Cosignature::decode(line).unwrap();
    // 0x0000000064184fcb... the timestamp of the spec's example, 2023-03-20.
    assert_eq!(c.timestamp, 1_679_315_147);
}

#[test]
fn witness_and_log_keys_are_kept_apart() {
    let k = key(TEST1);
    // The same key under the same name: type 0x01 and type 0x04 give other key IDs.
    let log = rcpt::keys::NoteVerifier::new("n.example", k.verifying_key()).unwrap();
    let w = WitnessVerifier::new("n.example", k.verifying_key()).unwrap();
    assert_ne!(log.key_hash, w.key_id);
    // A log signature line is not read as a cosignature, nor the reverse.
    let logged = rcpt::tlog::note::sign(BODY, "n.example", &k).unwrap();
    let note = Note::parse(logged.as_bytes()).unwrap();
    assert_eq!(
        cosig::check(&note, std::slice::from_ref(&w)),
        vec![CosigStatus::Absent]
    );
    let cosigned = format!("{BODY}\n{}", cosig::sign(BODY, "n.example", &k, 5).unwrap());
    let note = Note::parse(cosigned.as_bytes()).unwrap();
    assert_eq!(
        rcpt::tlog::note::check(&note, &[log]),
        rcpt::tlog::note::NoteCheck::NotEvaluated
    );
}
