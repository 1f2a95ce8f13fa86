//! The witness at library level: every tlog-witness v1 `add-checkpoint`
//! outcome of the pure decision, the durable state and its
//! compare-and-swap under concurrent threads, and forks: a witness that
//! cosigned one fork refuses the other, so a 2-of-3 quorum cannot be had
//! for both.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::tlog::cosig::{CosigStatus, WitnessVerifier};
use rcpt::tlog::merkle::{self, Hash, MemoryTree};
use rcpt::tlog::note::{self, Checkpoint, Note};
use rcpt::tlog::policy::{QuorumVerdict, TlogPolicy};
use rcpt::witness::{
    AddCheckpointError, AddCheckpointRequest, BadRequest, CasError, Forbidden, Refusal,
    RequestError, StateStore, TreeHead, Unprocessable, Witness, WitnessError, decide,
};
use std::path::Path;
use support::witness::tree;

const ORIGIN: &str = "example.com/fork-log";

fn log_key() -> SigningKey {
    SigningKey::from_bytes(&[11; 32])
}

fn log_verifier() -> NoteVerifier {
    NoteVerifier::new(ORIGIN, log_key().verifying_key()).unwrap()
}

fn root(t: &MemoryTree, size: u64) -> Hash {
    merkle::tree_root(size, t).unwrap()
}

/// The checkpoint of `t` at `size`, signed by the log key.
fn checkpoint(t: &MemoryTree, size: u64) -> String {
    signed(size, root(t, size))
}

fn signed(size: u64, root_hash: Hash) -> String {
    let body = Checkpoint {
        origin: ORIGIN.into(),
        size,
        root_hash,
        extensions: vec![],
    };
    note::sign(&body.to_text(), ORIGIN, &log_key()).unwrap()
}

fn body(old: u64, proof: &[Hash], note: &str) -> String {
    AddCheckpointRequest::to_body(old, proof, note)
}

fn request(old: u64, t: &MemoryTree, size: u64) -> AddCheckpointRequest {
    let proof = merkle::prove_consistency(old, size, t).unwrap();
    AddCheckpointRequest::parse(body(old, &proof, &checkpoint(t, size)).as_bytes()).unwrap()
}

fn head(t: &MemoryTree, size: u64) -> TreeHead {
    TreeHead {
        size,
        root: root(t, size),
    }
}

/// The decision over a raw body (parse errors are 400 as well).
fn status(state: Option<&TreeHead>, raw: &str) -> Result<(), Refusal> {
    let req = AddCheckpointRequest::parse(raw.as_bytes())
        .map_err(|e| Refusal::BadRequest(BadRequest::Malformed(e)))?;
    decide(&[log_verifier()], state, &req).map(|_| ())
}

#[test]
fn decision_cosigns_first_extension_and_equal_checkpoint() {
    let t = tree(9, "a");
    // Never cosigned: old 0, empty proof.
    let ok = decide(&[log_verifier()], None, &request(0, &t, 5)).unwrap();
    assert_eq!(ok.checkpoint.size, 5);
    assert_eq!(ok.log_signatures.len(), 1);
    // From 5 to 9 with the RFC 6962 proof.
    decide(&[log_verifier()], Some(&head(&t, 5)), &request(5, &t, 9)).unwrap();
    // The same checkpoint again (old = size, same root): cosigned again.
    decide(&[log_verifier()], Some(&head(&t, 9)), &request(9, &t, 9)).unwrap();
    // The empty tree, from nothing.
    decide(&[log_verifier()], None, &request(0, &t, 0)).unwrap();
}

#[test]
fn decision_ignores_unknown_signature_lines() {
    let t = tree(3, "a");
    let mut note = checkpoint(&t, 3);
    // Grease: an unknown key, the log's name with another key, another
    // witness's cosignature-shaped line.
    let other = SigningKey::from_bytes(&[99; 32]);
    let grease = note::sign(
        &Checkpoint::parse(&note[..note.find("\n\n").unwrap() + 1])
            .unwrap()
            .to_text(),
        ORIGIN,
        &other,
    )
    .unwrap();
    note.push_str(grease.lines().last().unwrap());
    note.push('\n');
    note.push_str(
        "\u{2014} grease.example/x AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
    );
    assert_eq!(status(None, &body(0, &[], &note)), Ok(()));
}

#[test]
fn decision_400_bad_request() {
    let t = tree(8, "a");
    let cp = checkpoint(&t, 8);
    let proof = merkle::prove_consistency(4, 8, &t).unwrap();
    let malformed = |raw: &str| match status(Some(&head(&t, 4)), raw) {
        Err(Refusal::BadRequest(BadRequest::Malformed(e))) => e,
        other => panic!("{raw:?}: {other:?}"),
    };
    assert_eq!(malformed(""), RequestError::OldLine);
    assert_eq!(malformed(&format!("old 04\n\n{cp}")), RequestError::OldLine);
    assert_eq!(malformed(&format!("old -4\n\n{cp}")), RequestError::OldLine);
    assert_eq!(malformed(&format!("old  4\n\n{cp}")), RequestError::OldLine);
    assert_eq!(malformed(&format!("Old 4\n\n{cp}")), RequestError::OldLine);
    assert_eq!(malformed("old 4"), RequestError::OldLine);
    assert_eq!(
        malformed(&format!("old 4\r\n\n{cp}")),
        RequestError::OldLine
    );
    assert_eq!(malformed("old 4\n"), RequestError::NoBlankLine);
    assert_eq!(malformed("old 4\nAAAA\n"), RequestError::ProofLine(1));
    let short = base64_of(&[1u8; 31]);
    assert_eq!(
        malformed(&format!("old 4\n{short}\n\n{cp}")),
        RequestError::ProofLine(1)
    );
    let unpadded = base64_of(&proof[0]).trim_end_matches('=').to_owned();
    assert_eq!(
        malformed(&format!("old 4\n{unpadded}\n\n{cp}")),
        RequestError::ProofLine(1)
    );
    let many = format!("{}\n", base64_of(&[7; 32])).repeat(64);
    assert_eq!(
        malformed(&format!("old 4\n{many}\n{cp}")),
        RequestError::TooManyProofLines(63)
    );
    assert!(matches!(
        malformed("old 4\n\nnot a note\n"),
        RequestError::Checkpoint(_)
    ));
    assert!(matches!(
        malformed(&format!("old 4\n\n{cp}\n")),
        RequestError::Checkpoint(_)
    ));
    let huge = format!(
        "old 4\n\n{}",
        "x".repeat(rcpt::limits::MAX_ADD_CHECKPOINT_BYTES)
    );
    assert!(matches!(malformed(&huge), RequestError::TooLarge { .. }));
    // 63 proof lines is the most a client may send: parsed (then 422 here).
    let most = format!("{}\n", base64_of(&[7; 32])).repeat(63);
    assert!(matches!(
        status(Some(&head(&t, 4)), &format!("old 4\n{most}\n{cp}")),
        Err(Refusal::Unprocessable(_))
    ));
    // Old size above the checkpoint's size.
    assert_eq!(
        status(Some(&head(&t, 4)), &body(9, &[], &cp)),
        Err(Refusal::BadRequest(BadRequest::OldSizeAboveCheckpoint {
            old: 9,
            size: 8
        }))
    );
}

fn base64_of(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[test]
fn decision_403_404() {
    let t = tree(8, "a");
    let cp = checkpoint(&t, 8);
    // Unknown origin.
    let other_origin = note::sign(
        &Checkpoint {
            origin: "example.com/other".into(),
            size: 8,
            root_hash: root(&t, 8),
            extensions: vec![],
        }
        .to_text(),
        "example.com/other",
        &log_key(),
    )
    .unwrap();
    assert_eq!(
        status(None, &body(0, &[], &other_origin)),
        Err(Refusal::UnknownOrigin {
            origin: "example.com/other".into()
        })
    );
    // Signed by another key under the origin's name: no known signature.
    let body_text = Checkpoint::parse(&cp[..cp.find("\n\n").unwrap() + 1])
        .unwrap()
        .to_text();
    let stranger = note::sign(&body_text, ORIGIN, &SigningKey::from_bytes(&[12; 32])).unwrap();
    assert_eq!(
        status(None, &body(0, &[], &stranger)),
        Err(Refusal::Forbidden(Forbidden::NotSigned {
            origin: ORIGIN.into()
        }))
    );
    // The known key's line does not verify (one signature byte changed).
    let mut note = Note::parse(cp.as_bytes()).unwrap();
    note.signatures[0].sig[0] ^= 1;
    let mut bad = format!("{}\n", note.text);
    let mut raw = note.signatures[0].key_hash.to_vec();
    raw.extend_from_slice(&note.signatures[0].sig);
    bad.push_str(&format!("\u{2014} {ORIGIN} {}\n", base64_of(&raw)));
    // ... even beside a valid line of the same key.
    let both = format!("{}{}", cp, bad.lines().last().unwrap()) + "\n";
    for b in [bad, both] {
        assert!(matches!(
            status(None, &body(0, &[], &b)),
            Err(Refusal::Forbidden(Forbidden::BadSignature { .. }))
        ));
    }
    // 404 and 403 come before 409: an unknown log learns nothing of the state.
    assert!(matches!(
        status(Some(&head(&t, 4)), &body(0, &[], &stranger)),
        Err(Refusal::Forbidden(_))
    ));
}

#[test]
fn decision_409_conflict() {
    let t = tree(8, "a");
    let proof = merkle::prove_consistency(4, 8, &t).unwrap();
    // The witness has 6; the client believes 4.
    let r = status(Some(&head(&t, 6)), &body(4, &proof, &checkpoint(&t, 8))).unwrap_err();
    assert_eq!(rcpt::witness::parse_size_body(r.body().as_bytes()), Some(6));
    assert_eq!(r, Refusal::Conflict { size: 6 });
    assert_eq!(
        (r.status(), r.content_type(), r.body()),
        (409, "text/x.tlog.size", "6\n".to_owned())
    );
    // Never cosigned: the conflict names 0 (a client may start with old 0 to learn the size).
    let r = status(None, &body(4, &proof, &checkpoint(&t, 8))).unwrap_err();
    assert_eq!(r.body(), "0\n");
    let r = status(Some(&head(&t, 6)), &body(0, &[], &checkpoint(&t, 8))).unwrap_err();
    assert_eq!(r, Refusal::Conflict { size: 6 });
}

#[test]
fn decision_422_unprocessable() {
    let t = tree(8, "a");
    let unprocessable = |state: Option<&TreeHead>, raw: &str| match status(state, raw) {
        Err(Refusal::Unprocessable(u)) => u,
        other => panic!("{other:?}"),
    };
    // Size 0 with a root other than SHA-256("").
    assert_eq!(
        unprocessable(None, &body(0, &[], &signed(0, [1; 32]))),
        Unprocessable::EmptyTreeRoot
    );
    // Old size 0 with a proof.
    let proof = merkle::prove_consistency(4, 8, &t).unwrap();
    assert_eq!(
        unprocessable(None, &body(0, &proof, &checkpoint(&t, 8))),
        Unprocessable::ProofNotEmpty(proof.len())
    );
    // A proof that does not verify: one hash changed, one missing, one extra.
    let mut flipped = proof.clone();
    flipped[0][0] ^= 1;
    let s4 = head(&t, 4);
    for p in [
        flipped,
        proof[1..].to_vec(),
        [proof.clone(), vec![[0; 32]]].concat(),
    ] {
        assert!(matches!(
            unprocessable(Some(&s4), &body(4, &p, &checkpoint(&t, 8))),
            Unprocessable::Inconsistent { old: 4, .. }
        ));
    }
    // Equal sizes, other root.
    assert!(matches!(
        unprocessable(Some(&head(&t, 8)), &body(8, &[], &signed(8, [2; 32]))),
        Unprocessable::Inconsistent { old: 8, .. }
    ));
    // Equal sizes and roots but a proof: not the (empty) proof of equal sizes.
    assert!(matches!(
        unprocessable(Some(&head(&t, 8)), &body(8, &[[3; 32]], &checkpoint(&t, 8))),
        Unprocessable::Inconsistent { .. }
    ));
}

/// A witness over a temp dir whose policy lists the test log.
fn witness(dir: &Path, seed: u8) -> Witness {
    let policy = format!("log {}\nquorum none\n", log_verifier());
    let key = SigningKey::from_bytes(&[seed; 32]);
    Witness::init(
        dir,
        &format!("w{seed}.example"),
        &key,
        None,
        policy.as_bytes(),
    )
    .unwrap()
}

#[test]
fn witness_cosigns_records_and_then_answers_409() {
    let tmp = tempfile::tempdir().unwrap();
    let w = witness(&tmp.path().join("w"), 21);
    let t = tree(10, "a");
    let first = w
        .add_checkpoint(body(0, &[], &checkpoint(&t, 6)).as_bytes(), 1_700_000_000)
        .unwrap();
    // The answer is one cosignature line that verifies under the witness key.
    let cosigned = format!("{}{}", checkpoint(&t, 6), first.lines);
    let note = Note::parse(cosigned.as_bytes()).unwrap();
    assert_eq!(
        rcpt::tlog::cosig::check(&note, std::slice::from_ref(w.verifier())),
        vec![CosigStatus::Verified {
            timestamp: 1_700_000_000
        }]
    );
    // The record holds size 6, its root, the log line and the cosignature.
    let rec = w.store().load(ORIGIN).unwrap().unwrap();
    assert_eq!(rec.head, head(&t, 6));
    assert_eq!(rec.note, first.note);
    assert_eq!(
        Note::parse(rec.note.as_bytes()).unwrap().signatures.len(),
        2
    );
    let by_hash = rcpt::witness::origin_hash(ORIGIN);
    assert_eq!(
        w.checkpoint_by_origin_hash(&by_hash).unwrap(),
        Some(rec.note.clone())
    );
    assert_eq!(w.checkpoint_by_origin_hash(&"0".repeat(64)).unwrap(), None);
    // The same request again: the witness has 6 now.
    let again = w.add_checkpoint(body(0, &[], &checkpoint(&t, 6)).as_bytes(), 1_700_000_001);
    let Err(AddCheckpointError::Refused(r)) = again else {
        panic!("{again:?}")
    };
    assert_eq!((r.status(), r.body()), (409, "6\n".into()));
    // Extending from 6 with a proof works, and reopening sees the new state.
    let p = merkle::prove_consistency(6, 10, &t).unwrap();
    w.add_checkpoint(body(6, &p, &checkpoint(&t, 10)).as_bytes(), 1_700_000_002)
        .unwrap();
    let reopened = Witness::open_with_key(w.dir(), SigningKey::from_bytes(&[21; 32])).unwrap();
    assert_eq!(
        reopened.store().load(ORIGIN).unwrap().unwrap().head,
        head(&t, 10)
    );
    // Opening with another key is refused.
    assert!(matches!(
        Witness::open_with_key(w.dir(), SigningKey::from_bytes(&[22; 32])),
        Err(WitnessError::WrongKey { .. })
    ));
    // A zero clock is a server error (500), and nothing is recorded.
    let zero = w
        .add_checkpoint(body(10, &[], &checkpoint(&t, 10)).as_bytes(), 0)
        .unwrap_err();
    assert_eq!(zero.status(), 500);
}

#[test]
fn a_witness_that_cosigned_one_fork_refuses_the_other() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tree(12, "a"), tree(12, "b"));
    assert_eq!(root(&a, 4), root(&b, 4));
    assert_ne!(root(&a, 8), root(&b, 8));
    let w = witness(&tmp.path().join("w"), 31);
    w.add_checkpoint(body(0, &[], &checkpoint(&a, 4)).as_bytes(), 10)
        .unwrap();
    let pa = merkle::prove_consistency(4, 8, &a).unwrap();
    w.add_checkpoint(body(4, &pa, &checkpoint(&a, 8)).as_bytes(), 11)
        .unwrap();
    // Fork b at the same size: roots differ.
    let r = w.add_checkpoint(body(8, &[], &checkpoint(&b, 8)).as_bytes(), 12);
    assert_eq!(r.unwrap_err().status(), 422);
    // Fork b grown past a: b's own proof from 8 does not start at a's root.
    let pb = merkle::prove_consistency(8, 12, &b).unwrap();
    let r = w.add_checkpoint(body(8, &pb, &checkpoint(&b, 12)).as_bytes(), 13);
    assert_eq!(r.unwrap_err().status(), 422);
    // b's proof from the common size 4: the witness is at 8, so 409.
    let pb4 = merkle::prove_consistency(4, 12, &b).unwrap();
    let r = w.add_checkpoint(body(4, &pb4, &checkpoint(&b, 12)).as_bytes(), 14);
    assert_eq!(r.unwrap_err().status(), 409);
    // Fork a still extends.
    let pa12 = merkle::prove_consistency(8, 12, &a).unwrap();
    w.add_checkpoint(body(8, &pa12, &checkpoint(&a, 12)).as_bytes(), 15)
        .unwrap();
    assert_eq!(w.store().load(ORIGIN).unwrap().unwrap().head, head(&a, 12));
}

#[test]
fn a_forked_log_cannot_get_a_two_of_three_quorum_for_both_forks() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tree(8, "a"), tree(8, "b"));
    let ws: Vec<Witness> = (0..3)
        .map(|i| witness(&tmp.path().join(format!("w{i}")), 40 + i))
        .collect();
    let policy_text = format!(
        "log {}\nwitness A {}\nwitness B {}\nwitness C {}\ngroup two 2 A B C\nquorum two\n",
        log_verifier(),
        ws[0].verifier(),
        ws[1].verifier(),
        ws[2].verifier()
    );
    let policy = TlogPolicy::parse(policy_text.as_bytes()).unwrap();
    // The log shows fork a to every witness (all start at 4, consistent).
    let mut lines = [String::new(), String::new()];
    for w in &ws {
        w.add_checkpoint(body(0, &[], &checkpoint(&a, 4)).as_bytes(), 100)
            .unwrap();
    }
    // Fork a reaches witnesses 0 and 1; fork b goes to all three.
    for w in &ws[..2] {
        let p = merkle::prove_consistency(4, 8, &a).unwrap();
        lines[0].push_str(
            &w.add_checkpoint(body(4, &p, &checkpoint(&a, 8)).as_bytes(), 101)
                .unwrap()
                .lines,
        );
    }
    for w in &ws {
        let p = merkle::prove_consistency(4, 8, &b).unwrap();
        let tries = [
            body(4, &p, &checkpoint(&b, 8)),
            body(8, &[], &checkpoint(&b, 8)),
        ];
        for t in tries {
            if let Ok(c) = w.add_checkpoint(t.as_bytes(), 102) {
                lines[1].push_str(&c.lines);
                break;
            }
        }
    }
    let verdict = |t: &MemoryTree, l: &str| {
        let note = Note::parse(format!("{}{l}", checkpoint(t, 8)).as_bytes()).unwrap();
        policy.evaluate(&note).unwrap().verdict()
    };
    assert_eq!(verdict(&a, &lines[0]), QuorumVerdict::Verified);
    // Only the third witness, which never saw fork a at 8, cosigned b.
    assert_eq!(lines[1].lines().count(), 1);
    assert_eq!(verdict(&b, &lines[1]), QuorumVerdict::QuorumNotMet);
    // Fork a's cosignatures pasted onto fork b fail as cosignatures.
    assert!(matches!(
        verdict(&b, &lines[0]),
        QuorumVerdict::CosignatureFailed(_)
    ));
}

#[test]
fn concurrent_requests_from_one_old_size_cosign_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    witness(&dir, 51);
    let t = tree(200, "a");
    let mut old = 0u64;
    for round in 0..10u64 {
        // Eight requests from `old`, to eight different sizes, each through
        // its own Witness (as separate processes would open the directory).
        let targets: Vec<u64> = (1..=8).map(|k| old + k + round).collect();
        let results: Vec<(u64, Result<_, _>)> = std::thread::scope(|s| {
            let handles: Vec<_> = targets
                .iter()
                .map(|&size| {
                    let dir = dir.clone();
                    let t = &t;
                    s.spawn(move || {
                        let w = Witness::open_with_key(&dir, SigningKey::from_bytes(&[51; 32]))
                            .unwrap();
                        let p = merkle::prove_consistency(old, size, t).unwrap();
                        (
                            size,
                            w.add_checkpoint(
                                body(old, &p, &checkpoint(t, size)).as_bytes(),
                                500 + round,
                            ),
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<u64> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(s, _)| *s)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        for (_, r) in &results {
            if let Err(e) = r {
                assert_eq!(e.status(), 409, "round {round}: {e}");
            }
        }
        let w = Witness::open_with_key(&dir, SigningKey::from_bytes(&[51; 32])).unwrap();
        assert_eq!(
            w.store().load(ORIGIN).unwrap().unwrap().head,
            head(&t, winners[0])
        );
        old = winners[0];
    }
}

#[test]
fn compare_and_swap_admits_one_writer_per_old_record() {
    let tmp = tempfile::tempdir().unwrap();
    let store = StateStore::open(&tmp.path().join("state"), &tmp.path().join("tmp")).unwrap();
    let t = tree(64, "a");
    let start = checkpoint(&t, 1);
    store.compare_and_swap(ORIGIN, None, &start).unwrap();
    let expected = head(&t, 1);
    let ok: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (2..34u64)
            .map(|size| {
                let (store, t) = (&store, &t);
                s.spawn(move || {
                    store.compare_and_swap(ORIGIN, Some(&expected), &checkpoint(t, size))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join().unwrap() {
                Ok(()) => 1,
                Err(CasError::Conflict { current }) => {
                    assert_ne!(current, Some(expected));
                    0
                }
                Err(e) => panic!("{e}"),
            })
            .sum()
    });
    assert_eq!(ok, 1);
    // A rollback is refused even when the caller expects the current record.
    let now = store.load(ORIGIN).unwrap().unwrap().head;
    assert!(matches!(
        store.compare_and_swap(ORIGIN, Some(&now), &checkpoint(&t, 1)),
        Err(CasError::State(rcpt::witness::StateError::Rollback { .. }))
    ));
    // A record for another origin is refused, what is wrong kept as the
    // typed cause (#33 item 6) and said once by the chain.
    let refused = store.compare_and_swap("example.com/x", None, &checkpoint(&t, 2));
    assert!(
        matches!(
            &refused,
            Err(CasError::State(rcpt::witness::StateError::BadRecord {
                source: rcpt::witness::RecordError::Origin { .. },
                ..
            }))
        ),
        "{refused:?}"
    );
    let e = refused.unwrap_err();
    assert_eq!(
        rcpt::witness::error_chain(&e),
        format!(
            "new record for \"example.com/x\" refused: origin {ORIGIN:?}, expected \"example.com/x\""
        )
    );
}

#[test]
fn corrupt_state_is_an_error_not_a_cosignature() {
    let tmp = tempfile::tempdir().unwrap();
    let w = witness(&tmp.path().join("w"), 61);
    let t = tree(4, "a");
    w.add_checkpoint(body(0, &[], &checkpoint(&t, 2)).as_bytes(), 5)
        .unwrap();
    std::fs::write(w.store().record_path(ORIGIN), "garbage").unwrap();
    let r = w
        .add_checkpoint(body(2, &[], &checkpoint(&t, 2)).as_bytes(), 6)
        .unwrap_err();
    assert!(matches!(r, AddCheckpointError::State(_)), "{r}");
    assert_eq!(r.status(), 500);
}

#[test]
fn a_witness_is_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Witness>();
}

#[test]
fn init_refusals() {
    let tmp = tempfile::tempdir().unwrap();
    let key = SigningKey::from_bytes(&[71; 32]);
    let good = format!("log {}\nquorum none\n", log_verifier());
    // No log line.
    assert!(matches!(
        Witness::init(
            &tmp.path().join("a"),
            "w.example",
            &key,
            None,
            b"quorum none\n"
        ),
        Err(WitnessError::NoLogs(_))
    ));
    // Not a policy.
    assert!(matches!(
        Witness::init(&tmp.path().join("b"), "w.example", &key, None, b"log x\n"),
        Err(WitnessError::Policy { .. })
    ));
    // Bad name.
    assert!(matches!(
        Witness::init(
            &tmp.path().join("c"),
            "w example",
            &key,
            None,
            good.as_bytes()
        ),
        Err(WitnessError::Key(rcpt::tlog::cosig::CosigError::BadName(_)))
    ));
    // A non-empty directory.
    std::fs::create_dir_all(tmp.path().join("d")).unwrap();
    std::fs::write(tmp.path().join("d/x"), "x").unwrap();
    assert!(matches!(
        Witness::init(
            &tmp.path().join("d"),
            "w.example",
            &key,
            None,
            good.as_bytes()
        ),
        Err(WitnessError::NotEmpty(_))
    ));
    let w = Witness::init(
        &tmp.path().join("e"),
        "w.example",
        &key,
        None,
        good.as_bytes(),
    )
    .unwrap();
    assert_eq!(
        w.verifier(),
        &WitnessVerifier::new("w.example", key.verifying_key()).unwrap()
    );
    // Without a recorded key file, open() needs the key.
    assert!(matches!(Witness::open(w.dir()), Err(WitnessError::NoKey)));
}

/// Issue #20 item 4: a valid checkpoint whose log signature line is
/// repeated (up to the 100-line limit) is cosigned and recorded with the
/// line once, never a 500 from a record that would be over the limit.
#[test]
fn a_repeated_log_signature_line_is_recorded_once() {
    let tmp = tempfile::tempdir().unwrap();
    let w = witness(&tmp.path().join("w"), 23);
    let t = tree(8, "a");
    for n in [2usize, 100] {
        let size = if n == 2 { 5 } else { 8 };
        let note = checkpoint(&t, size);
        let (text, sig) = note.split_at(note.rfind("\n\n").unwrap() + 2);
        let repeated = format!("{text}{}", sig.repeat(n));
        let old = if n == 2 { 0 } else { 5 };
        let proof = if old == 0 {
            vec![]
        } else {
            merkle::prove_consistency(5, 8, &t).unwrap()
        };
        let done = w
            .add_checkpoint(body(old, &proof, &repeated).as_bytes(), 1_700_000_000)
            .unwrap_or_else(|e| panic!("{n} lines: {e} ({})", e.status()));
        let rec = Note::parse(done.note.as_bytes()).unwrap();
        assert_eq!(
            rec.signatures.len(),
            2,
            "{n} lines: log line once + cosignature"
        );
    }
}
