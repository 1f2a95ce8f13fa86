//! tlog-proof@v1: round trips, every refusal, the limits; and that the
//! three witness-side parsers (tlog-proof, add-checkpoint body, tlog-policy)
//! never panic on arbitrary bytes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcpt::keys::SigningKey;
use rcpt::limits::{MAX_TLOG_PROOF_BYTES, MAX_TLOG_PROOF_EXTRA_BYTES};
use rcpt::tlog::merkle::{self, Hash, MemoryTree};
use rcpt::tlog::note::{self, Checkpoint};
use rcpt::tlog::proof::{TlogProof, TlogProofError};

const ORIGIN: &str = "example.com/fancylog";

fn tree() -> MemoryTree {
    let leaves: Vec<Hash> = (0..11u8).map(|i| merkle::leaf_hash(&[i; 3])).collect();
    MemoryTree::new(&leaves)
}

fn checkpoint(t: &MemoryTree) -> String {
    let body = Checkpoint {
        origin: ORIGIN.into(),
        size: 11,
        root_hash: merkle::tree_root(11, t).unwrap(),
        extensions: vec![],
    };
    note::sign(&body.to_text(), ORIGIN, &SigningKey::from_bytes(&[1; 32])).unwrap()
}

fn proof_text(extra: Option<&str>, index: &str, hashes: &[String], cp: &str) -> String {
    let mut t = "c2sp.org/tlog-proof@v1\n".to_owned();
    if let Some(e) = extra {
        t.push_str(&format!("extra {e}\n"));
    }
    t.push_str(&format!("index {index}\n"));
    for h in hashes {
        t.push_str(h);
        t.push('\n');
    }
    t.push('\n');
    t.push_str(cp);
    t
}

fn hashes(t: &MemoryTree, i: u64) -> Vec<String> {
    merkle::prove_inclusion(i, 11, t)
        .unwrap()
        .iter()
        .map(|h| STANDARD.encode(h))
        .collect()
}

#[test]
fn round_trip_with_and_without_extra() {
    let t = tree();
    let cp = checkpoint(&t);
    let text = proof_text(Some(&STANDARD.encode([7u8; 3])), "7", &hashes(&t, 7), &cp);
    let p = TlogProof::parse(text.as_bytes()).unwrap();
    assert_eq!(p.to_text(), text);
    assert_eq!(p.extra.as_deref(), Some(&[7u8; 3][..]));
    assert_eq!(p.checkpoint, cp);
    merkle::verify_inclusion(
        &p.extra_leaf_hash().unwrap(),
        7,
        11,
        &p.inclusion,
        &p.body.root_hash,
    )
    .unwrap();
    // Without extra; index 0; and built through TlogProof::new.
    let text = proof_text(None, "0", &hashes(&t, 0), &cp);
    let p = TlogProof::parse(text.as_bytes()).unwrap();
    assert_eq!((p.extra.clone(), p.index, p.to_text()), (None, 0, text));
    let built = TlogProof::new(None, 0, p.inclusion.clone(), &cp).unwrap();
    assert_eq!(built, p);
    // A proof with no inclusion lines (a one-leaf tree) parses.
    let one = MemoryTree::new(&[merkle::leaf_hash(b"x")]);
    let body = Checkpoint {
        origin: ORIGIN.into(),
        size: 1,
        root_hash: merkle::tree_root(1, &one).unwrap(),
        extensions: vec![],
    };
    let cp1 = note::sign(&body.to_text(), ORIGIN, &SigningKey::from_bytes(&[1; 32])).unwrap();
    assert!(
        TlogProof::parse(proof_text(Some("eA=="), "0", &[], &cp1).as_bytes())
            .unwrap()
            .inclusion
            .is_empty()
    );
}

#[test]
fn every_refusal() {
    let t = tree();
    let cp = checkpoint(&t);
    let h = hashes(&t, 3);
    let refuse = |text: &str| TlogProof::parse(text.as_bytes()).unwrap_err();
    let good = proof_text(None, "3", &h, &cp);
    assert_eq!(
        refuse(&good.replacen("@v1", "@v2", 1)),
        TlogProofError::Header
    );
    assert_eq!(
        refuse(&good.replacen("c2sp.org", "C2SP.org", 1)),
        TlogProofError::Header
    );
    assert_eq!(refuse(""), TlogProofError::Header);
    assert_eq!(refuse("c2sp.org/tlog-proof@v1"), TlogProofError::Header);
    // extra: empty (omit the line instead), not base64, unpadded, too large.
    for e in ["", "!!!!", "eA", "eA==="] {
        assert_eq!(
            refuse(&proof_text(Some(e), "3", &h, &cp)),
            TlogProofError::Extra,
            "{e:?}"
        );
    }
    let big = STANDARD.encode(vec![0u8; MAX_TLOG_PROOF_EXTRA_BYTES + 1]);
    assert_eq!(
        refuse(&proof_text(Some(&big), "3", &h, &cp)),
        TlogProofError::Extra
    );
    let most = STANDARD.encode(vec![0u8; MAX_TLOG_PROOF_EXTRA_BYTES]);
    assert!(TlogProof::parse(proof_text(Some(&most), "3", &h, &cp).as_bytes()).is_ok());
    // index: leading zero, sign, missing, out of u64, after the proof lines.
    for i in ["03", "+3", "-3", "", "18446744073709551616", "3 "] {
        assert_eq!(
            refuse(&proof_text(None, i, &h, &cp)),
            TlogProofError::Index,
            "{i:?}"
        );
    }
    assert_eq!(
        refuse("c2sp.org/tlog-proof@v1\nextra eA==\n"),
        TlogProofError::Index
    );
    assert_eq!(
        refuse(&good.replacen("index 3\n", "", 1)),
        TlogProofError::Index
    );
    // extra after index is not an extra line: it is read as a hash line.
    let late = good.replacen("index 3\n", "index 3\nextra eA==\n", 1);
    assert_eq!(refuse(&late), TlogProofError::ProofLine(1));
    // Hash lines: 31 bytes, not base64; 64 lines.
    let short = [STANDARD.encode([1u8; 31])];
    assert_eq!(
        refuse(&proof_text(None, "3", &short, &cp)),
        TlogProofError::ProofLine(1)
    );
    let many = vec![STANDARD.encode([1u8; 32]); 64];
    assert_eq!(
        refuse(&proof_text(None, "3", &many, &cp)),
        TlogProofError::TooManyProofLines
    );
    // No blank line, or a checkpoint that is not a signed checkpoint note.
    assert_eq!(
        refuse("c2sp.org/tlog-proof@v1\nindex 3\nAAAA\n"),
        TlogProofError::ProofLine(1)
    );
    assert_eq!(
        refuse("c2sp.org/tlog-proof@v1\nindex 3\n"),
        TlogProofError::NoBlankLine
    );
    assert!(matches!(
        refuse(&proof_text(None, "3", &h, "x\n")),
        TlogProofError::Checkpoint(_)
    ));
    assert!(matches!(
        refuse(&proof_text(None, "3", &h, &cp.replace("\n\n", "\n"))),
        TlogProofError::Checkpoint(_)
    ));
    let unsigned_text = &cp[..cp.find("\n\n").unwrap() + 1];
    assert!(matches!(
        refuse(&proof_text(None, "3", &h, unsigned_text)),
        TlogProofError::Checkpoint(_)
    ));
    // Bytes: not UTF-8, over the limit.
    assert_eq!(
        TlogProof::parse(&[0xff, b'\n']).unwrap_err(),
        TlogProofError::NotUtf8
    );
    let huge = vec![b'a'; MAX_TLOG_PROOF_BYTES + 1];
    assert!(matches!(
        TlogProof::parse(&huge).unwrap_err(),
        TlogProofError::TooLarge { .. }
    ));
    // CRLF line ends are not newlines.
    assert_eq!(
        TlogProof::parse(good.replace('\n', "\r\n").as_bytes()).unwrap_err(),
        TlogProofError::Header
    );
}

proptest::proptest! {
    #[test]
    fn witness_parsers_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
        let _ = TlogProof::parse(&bytes);
        let _ = rcpt::witness::AddCheckpointRequest::parse(&bytes);
        let _ = rcpt::tlog::policy::TlogPolicy::parse(&bytes);
    }

    #[test]
    fn mutated_proofs_never_panic(at in 0usize..2000, byte in proptest::num::u8::ANY) {
        let t = tree();
        let mut text = proof_text(Some("eA=="), "3", &hashes(&t, 3), &checkpoint(&t)).into_bytes();
        let i = at % text.len();
        text[i] = byte;
        let _ = TlogProof::parse(&text);
    }
}
