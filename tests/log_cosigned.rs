//! A log whose checkpoint carries signature lines besides the log's (a
//! witness quorum's cosignatures, stored by `LogWriter::add_signatures`;
//! spec/witness.md "Witnessed log"): every reader accepts it, `check`
//! passes, the next append replaces it, and a note that is not the latest
//! checkpoint, or that readers would refuse, is never stored.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use rcpt::keys::SigningKey;
use rcpt::log::{CheckpointError, Log, LogError, LogWriter, check};
use rcpt::tlog::note::{Note, NoteCheck};
use std::path::Path;

const ORIGIN: &str = "example.com/cosigned-log";

fn key() -> SigningKey {
    SigningKey::from_bytes(&[9u8; 32])
}

fn new_log(dir: &Path) -> LogWriter {
    Log::init(dir, ORIGIN, &key()).unwrap();
    LogWriter::open(dir, &key(), false).unwrap()
}

fn entries(range: std::ops::Range<u64>) -> Vec<Vec<u8>> {
    range.map(|i| format!("entry {i}").into_bytes()).collect()
}

/// `note` with a cosignature line by witness `seed` appended.
fn cosign(note: &str, seed: u8) -> String {
    let body = Note::parse(note.as_bytes()).unwrap().text;
    let witness = SigningKey::from_bytes(&[seed; 32]);
    let line = rcpt::tlog::cosig::sign(
        &body,
        &format!("witness.example/{seed}"),
        &witness,
        1_700_000_000,
    )
    .unwrap();
    format!("{note}{line}")
}

fn stored(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("checkpoint")).unwrap()
}

#[test]
fn a_cosigned_checkpoint_is_stored_read_checked_and_replaced_by_the_next_append() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut w = new_log(dir);
    w.append(&entries(0..300)).unwrap();
    let plain = w.log().checkpoint().to_string();
    let cosigned = cosign(&cosign(&plain, 1), 2);
    w.add_signatures(&cosigned).unwrap();
    assert_eq!(w.log().checkpoint(), cosigned);
    assert_eq!(stored(dir), cosigned);
    assert_eq!(
        std::fs::read_to_string(dir.join(".rcpt/checkpoints/300")).unwrap(),
        cosigned
    );

    // Readers: open, proofs, the kept copy, check.
    let log = Log::open(dir).unwrap();
    assert_eq!((log.size(), log.checkpoint()), (300, cosigned.as_str()));
    assert_eq!(log.checkpoint_at(300).unwrap(), cosigned);
    let report = check(dir, |_, _| {}).unwrap();
    assert_eq!(report.size, 300);

    // The writer still holds the checkpoint's version: it appends (and the
    // new checkpoint is the log's alone until witnessed).
    w.append(&entries(300..310)).unwrap();
    let next = stored(dir);
    assert_eq!(Note::parse(next.as_bytes()).unwrap().signatures.len(), 1);
    assert!(next.contains("310\n"));
    // The older size keeps its cosigned copy, which `prove --size` reads.
    assert_eq!(
        Log::open(dir).unwrap().checkpoint_at(300).unwrap(),
        cosigned
    );
    check(dir, |_, _| {}).unwrap();
    drop(w);

    // A new writer opens on a cosigned checkpoint too.
    let mut w = LogWriter::open(dir, &key(), false).unwrap();
    let cosigned = cosign(&next, 3);
    w.add_signatures(&cosigned).unwrap();
    drop(w);
    let mut w = LogWriter::open(dir, &key(), false).unwrap();
    assert_eq!(w.log().checkpoint(), cosigned);
    w.append(&entries(310..311)).unwrap();
    check(dir, |_, _| {}).unwrap();
}

#[test]
fn a_note_that_is_not_the_latest_checkpoint_or_unreadable_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut w = new_log(dir);
    w.append(&entries(0..5)).unwrap();
    let old = w.log().checkpoint().to_string();
    w.append(&entries(5..8)).unwrap();
    let latest = w.log().checkpoint().to_string();

    let refused = |w: &mut LogWriter, note: &str| {
        let e = w.add_signatures(note).unwrap_err();
        assert_eq!(stored(dir), latest, "{e}");
        e
    };
    // An older checkpoint of this log, cosigned.
    let e = refused(&mut w, &cosign(&old, 1));
    assert!(
        matches!(
            e,
            LogError::Checkpoint {
                source: CheckpointError::NotLatest,
                ..
            }
        ),
        "{e:?}"
    );
    // The latest body without the log's signature (cosignatures only).
    let body = Note::parse(latest.as_bytes()).unwrap().text;
    let witness = SigningKey::from_bytes(&[1; 32]);
    let line =
        rcpt::tlog::cosig::sign(&body, "witness.example/1", &witness, 1_700_000_000).unwrap();
    let only_witness = format!("{body}\n{line}");
    assert!(matches!(
        refused(&mut w, &only_witness),
        LogError::Checkpoint {
            source: CheckpointError::Unsigned { .. } | CheckpointError::Malformed(_),
            ..
        }
    ));
    // A log signature line that does not verify.
    let mut tampered = cosign(&latest, 1);
    let prefix = format!("\n\u{2014} {ORIGIN} ");
    let at = tampered.find(&prefix).unwrap() + prefix.len() + 10;
    tampered.replace_range(at..=at, if &tampered[at..=at] == "A" { "B" } else { "A" });
    assert!(matches!(
        refused(&mut w, &tampered),
        LogError::Checkpoint {
            source: CheckpointError::BadSignature { .. },
            ..
        }
    ));
    // More signature lines than any reader accepts.
    let mut many = latest.clone();
    for seed in 1..=100u8 {
        many = cosign(&many, seed);
    }
    let e = refused(&mut w, &many);
    assert!(
        matches!(
            e,
            LogError::Checkpoint {
                source: CheckpointError::Malformed(_),
                ..
            }
        ),
        "{e:?}"
    );
    // 99 cosignature lines and the log's (100 in all) are accepted.
    let mut most = latest.clone();
    for seed in 1..=99u8 {
        most = cosign(&most, seed);
    }
    w.add_signatures(&most).unwrap();
    let log = Log::open(dir).unwrap();
    let parsed = Note::parse(log.checkpoint().as_bytes()).unwrap();
    assert_eq!(parsed.signatures.len(), 100);
    assert!(matches!(
        rcpt::tlog::note::check(&parsed, std::slice::from_ref(log.verifier())),
        NoteCheck::Verified { .. }
    ));
    // The writer goes on.
    w.append(&entries(8..9)).unwrap();
    check(dir, |_, _| {}).unwrap();
}
