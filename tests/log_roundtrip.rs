//! The log library end to end with arbitrary entry bytes: appends at many
//! sizes and batch shapes, proofs that verify against the signed root,
//! dedup, reopen, repair of work past the checkpoint, tamper detection by
//! `check`, and concurrent writers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use rcpt::keys::SigningKey;
use rcpt::log::{Appended, Log, LogError, LogWriter, check};
use rcpt::tlog::merkle::{self, leaf_hash, verify_consistency, verify_inclusion};
use rcpt::tlog::note::{Checkpoint, Note};
use std::path::Path;
use support::{entries, entry, lib_log_key as key};

fn new_log(dir: &Path) -> LogWriter {
    Log::init(dir, "example.com/test-log", &key()).unwrap();
    LogWriter::open(dir, &key(), false).unwrap()
}

/// Verify every proof the log can give at its current size, sparsely.
fn assert_proofs(log: &Log) {
    let n = log.size();
    let cp = Checkpoint::parse(&Note::parse(log.checkpoint().as_bytes()).unwrap().text).unwrap();
    assert_eq!(cp.size, n);
    assert_eq!(cp.root_hash, log.root());
    let step = (n / 40).max(1);
    for i in (0..n).step_by(step as usize).chain(n.checked_sub(1)) {
        let proof = log.inclusion_proof(i, n).unwrap();
        verify_inclusion(&leaf_hash(&entry(i)), i, n, &proof, &log.root()).unwrap();
        assert_eq!(log.entry(i).unwrap(), entry(i), "entry {i}");
    }
}

#[test]
fn appends_at_many_sizes_prove_and_check() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = new_log(tmp.path());
    let mut sizes = vec![0u64];
    // Batch shapes straddling tile edges: 1, 255, 256, 257, 65536 + ...
    for batch in [
        1u64,
        1,
        253,
        1,
        255,
        256,
        257,
        511,
        3,
        65_536 - 1534,
        1,
        700,
    ] {
        let old = w.log().size();
        let got = w.append(&entries(old..old + batch)).unwrap();
        let want: Vec<Appended> = (old..old + batch)
            .map(|index| Appended { index, new: true })
            .collect();
        assert_eq!(got, want);
        assert_eq!(w.log().size(), old + batch);
        let memory_root = merkle::root(
            &(0..old + batch)
                .map(|i| leaf_hash(&entry(i)))
                .collect::<Vec<_>>(),
        );
        assert_eq!(w.log().root(), memory_root, "root at size {}", old + batch);
        assert_proofs(w.log());
        sizes.push(old + batch);
    }
    let log = Log::open(tmp.path()).unwrap();
    assert_eq!(log.size(), *sizes.last().unwrap());
    // Every published size keeps its checkpoint; consistency proofs verify.
    for (k, &m) in sizes.iter().enumerate() {
        let text = log.checkpoint_at(m).unwrap();
        let cp_m = Checkpoint::parse(&Note::parse(text.as_bytes()).unwrap().text).unwrap();
        assert_eq!(cp_m.size, m);
        for &n in &sizes[k..] {
            let cp_n = log.checkpoint_at(n).unwrap();
            let cp_n = Checkpoint::parse(&Note::parse(cp_n.as_bytes()).unwrap().text).unwrap();
            let proof = log.consistency_proof(m, n).unwrap();
            verify_consistency(m, n, &proof, &cp_m.root_hash, &cp_n.root_hash).unwrap();
            // An old size's inclusion proofs come from the tiles as they were.
            if m > 0 {
                let p = log.inclusion_proof(m - 1, m).unwrap();
                verify_inclusion(&leaf_hash(&entry(m - 1)), m - 1, m, &p, &cp_m.root_hash).unwrap();
            }
        }
    }
    assert!(matches!(
        log.checkpoint_at(3),
        Err(LogError::NoCheckpoint { size: 3, .. })
    ));
    let report = check(tmp.path(), |_, _| {}).unwrap();
    assert_eq!(report.size, log.size());
    assert_eq!(report.checkpoints, sizes.len() as u64);
}

#[test]
fn same_entry_keeps_its_first_index() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = new_log(tmp.path());
    w.append(&entries(0..10)).unwrap();
    // Within one batch and across batches.
    let batch = vec![entry(3), entry(10), entry(10), entry(11), entry(0)];
    let got = w.append(&batch).unwrap();
    let want = [(3, false), (10, true), (10, false), (11, true), (0, false)];
    let want: Vec<Appended> = want
        .iter()
        .map(|&(index, new)| Appended { index, new })
        .collect();
    assert_eq!(got, want);
    assert_eq!(w.log().size(), 12);
    // A batch of duplicates only publishes nothing.
    let before = w.log().checkpoint().to_string();
    assert_eq!(
        w.append(&[entry(5)]).unwrap(),
        vec![Appended {
            index: 5,
            new: false
        }]
    );
    assert_eq!(w.log().checkpoint(), before);
    drop(w);
    // After reopen, and with the index deleted (rebuilt from the entries).
    let mut w = LogWriter::open(tmp.path(), &key(), false).unwrap();
    assert_eq!(
        w.append(&[entry(11)]).unwrap(),
        vec![Appended {
            index: 11,
            new: false
        }]
    );
    drop(w);
    std::fs::remove_dir_all(tmp.path().join(".rcpt/dedup")).unwrap();
    let mut w = LogWriter::open(tmp.path(), &key(), false).unwrap();
    assert_eq!(
        w.append(&[entry(7)]).unwrap(),
        vec![Appended {
            index: 7,
            new: false
        }]
    );
    let log = Log::open(tmp.path()).unwrap();
    assert_eq!(log.find(&leaf_hash(&entry(9))).unwrap(), Some(9));
    assert_eq!(log.find(&leaf_hash(b"never logged")).unwrap(), None);
    check(tmp.path(), |_, _| {}).unwrap();
}

#[test]
fn stale_index_hint_past_checkpoint_is_not_a_duplicate() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = new_log(tmp.path());
    w.append(&entries(0..5)).unwrap();
    drop(w);
    // Simulate a crash after the index commit but before the checkpoint:
    // append to a copy, then restore the old checkpoint (the truth).
    let cp = std::fs::read(tmp.path().join("checkpoint")).unwrap();
    let mut w = LogWriter::open(tmp.path(), &key(), false).unwrap();
    w.append(&entries(5..300)).unwrap();
    drop(w);
    std::fs::write(tmp.path().join("checkpoint"), &cp).unwrap();
    let report = check(tmp.path(), |_, _| {}).unwrap();
    assert_eq!((report.size, report.unpublished), (5, 1));
    // Entry 7 is in the index (hint 7) and in tiles past the checkpoint,
    // but not in the log: it must be appended anew.
    let mut w = LogWriter::open(tmp.path(), &key(), false).unwrap();
    assert_eq!(w.log().size(), 5);
    let got = w.append(&[entry(7), entry(2)]).unwrap();
    assert_eq!(
        got,
        vec![
            Appended {
                index: 5,
                new: true
            },
            Appended {
                index: 2,
                new: false
            }
        ]
    );
    drop(w);
    check(tmp.path(), |_, _| {}).unwrap();
}

#[test]
fn leftovers_past_the_checkpoint_are_repaired() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = new_log(tmp.path());
    w.append(&entries(0..300)).unwrap();
    drop(w);
    // Garbage where the next append will write, and a stray temp file.
    let p = tmp.path();
    std::fs::create_dir_all(p.join("tile/entries/001.p")).unwrap();
    std::fs::write(p.join("tile/entries/001.p/50"), b"garbage").unwrap();
    std::fs::create_dir_all(p.join("tile/0/001.p")).unwrap();
    std::fs::write(p.join("tile/0/001.p/50"), [0u8; 32 * 50]).unwrap();
    std::fs::write(p.join(".rcpt/tmp/123-4"), b"half a tile").unwrap();
    check(p, |_, _| {}).unwrap();
    let mut w = LogWriter::open(p, &key(), false).unwrap();
    assert_eq!(std::fs::read_dir(p.join(".rcpt/tmp")).unwrap().count(), 0);
    w.append(&entries(300..306)).unwrap();
    drop(w);
    let report = check(p, |_, _| {}).unwrap();
    assert_eq!(report.size, 306);
    assert_proofs(&Log::open(p).unwrap());
}

#[test]
fn check_names_the_first_broken_tile() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = new_log(tmp.path());
    w.append(&entries(0..600)).unwrap();
    drop(w);
    let tile = tmp.path().join("tile/0/001");
    let mut bytes = std::fs::read(&tile).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&tile, &bytes).unwrap();
    match check(tmp.path(), |_, _| {}) {
        Err(LogError::TileMismatch { path }) => assert_eq!(path, "tile/0/001"),
        other => panic!("expected a tile mismatch, got {other:?}"),
    }
    bytes[100] ^= 1;
    std::fs::write(&tile, &bytes).unwrap();
    check(tmp.path(), |_, _| {}).unwrap();
    // A changed entry changes its leaf: the level-0 tile no longer matches.
    let bundle = tmp.path().join("tile/entries/000");
    let mut b = std::fs::read(&bundle).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(&bundle, &b).unwrap();
    match check(tmp.path(), |_, _| {}) {
        Err(LogError::TileMismatch { path }) => assert_eq!(path, "tile/0/000"),
        other => panic!("expected a tile mismatch, got {other:?}"),
    }
}

#[test]
fn second_writer_fails_or_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let w = new_log(tmp.path());
    let err = LogWriter::open(tmp.path(), &key(), false).unwrap_err();
    assert!(matches!(err, LogError::Locked { .. }));
    assert!(err.to_string().contains("--wait"), "{err}");
    drop(w);
    LogWriter::open(tmp.path(), &key(), false).unwrap();
}

#[test]
fn wrong_key_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    Log::init(tmp.path(), "example.com/log", &key()).unwrap();
    let other = SigningKey::from_bytes(&[9u8; 32]);
    let err = LogWriter::open(tmp.path(), &other, false).unwrap_err();
    assert!(matches!(err, LogError::WrongKey { .. }), "{err}");
}

#[test]
fn init_refuses_a_non_empty_dir_and_a_key_inside() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("x"), b"x").unwrap();
    let err = Log::init(tmp.path(), "o", &key()).unwrap_err();
    assert!(matches!(err, LogError::NotEmpty(_)), "{err}");
    let tmp2 = tempfile::tempdir().unwrap();
    let dir = tmp2.path().join("log");
    std::fs::create_dir(&dir).unwrap();
    let inside = tmp2.path().join("log.key");
    std::fs::write(&inside, b"k").unwrap();
    // The key beside the log is fine; a key inside is refused.
    Log::create(&dir, "o", &key(), Some(&inside)).unwrap();
    let dir2 = tmp2.path().join("log2");
    std::fs::create_dir(&dir2).unwrap();
    let err = Log::create(&dir2, "o", &key(), Some(&dir2)).unwrap_err();
    assert!(matches!(err, LogError::KeyInsideLog { .. }), "{err}");
}

#[test]
fn concurrent_writers_with_wait_never_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    drop(new_log(tmp.path()));
    let dir = tmp.path().to_path_buf();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for b in 0..5u64 {
                    let start = 1000 * t + 100 * b;
                    let mut w = LogWriter::open(&dir, &key(), true).unwrap();
                    let batch = entries(start..start + 37);
                    got.extend(batch.iter().cloned().zip(w.append(&batch).unwrap()));
                }
                got
            })
        })
        .collect();
    let results: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let log = Log::open(&dir).unwrap();
    assert_eq!(log.size(), 4 * 5 * 37);
    for (e, a) in results {
        assert!(a.new);
        assert_eq!(log.entry(a.index).unwrap(), e);
    }
    check(&dir, |_, _| {}).unwrap();
}

#[test]
fn batch_limits_are_enforced_before_work() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = new_log(tmp.path());
    let err = w.append(&[b"ok".to_vec(), Vec::new()]).unwrap_err();
    assert!(
        matches!(err, LogError::EntrySize { position: 1, .. }),
        "{err}"
    );
    let big = vec![0u8; rcpt::limits::MAX_ENTRY_BYTES + 1];
    assert!(matches!(w.append(&[big]), Err(LogError::EntrySize { .. })));
    let max = vec![1u8; rcpt::limits::MAX_ENTRY_BYTES];
    w.append(std::slice::from_ref(&max)).unwrap();
    assert_eq!(w.log().entry(0).unwrap(), max);
    assert_eq!(w.log().size(), 1);
}

/// The crash table of `spec/log.md`, at every boundary between two storage
/// calls: an append whose store stops dead after its k-th changing call
/// (k = 0, 1, 2, ... until one runs whole; tests/support/failstop.rs)
/// leaves a log that checks, holds exactly the published entries (the old
/// or the new size, nothing between), at most one kept checkpoint past the
/// published one, and takes an append of *other* entries at the same
/// indexes (the repair removed every object the stopped append left past
/// the checkpoint; tiles are create-only, so a leftover would conflict).
#[test]
fn an_append_stopped_between_any_two_storage_calls_is_repaired() {
    use rcpt::storage::posix::PosixStore;
    use std::sync::Arc;
    use support::failstop::FailStop;
    let mut published_at = None;
    for budget in 0.. {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        new_log(p).append(&entries(0..300)).unwrap();
        let store = FailStop::new(Arc::new(PosixStore::new(p)), budget);
        let stopped = match LogWriter::open_store(store.clone(), &key(), false) {
            Ok(mut w) => w.append(&entries(300..900)).is_err(),
            Err(_) => true,
        };
        assert_eq!(stopped, store.stopped(), "budget {budget}");
        let report = check(p, |_, _| {}).unwrap();
        assert!(
            report.size == 300 || report.size == 900,
            "budget {budget}: size {}",
            report.size
        );
        // A kept checkpoint past the published one is only ever the
        // stopped batch's, named in step 6 and not yet published.
        assert!(report.unpublished <= 1, "budget {budget}");
        assert!(
            report.unpublished == 0 || report.size == 300,
            "budget {budget}"
        );
        let published = report.size == 900;
        if published {
            published_at.get_or_insert(budget);
        } else {
            assert!(published_at.is_none(), "budget {budget}: unpublished again");
        }
        let size = report.size;
        let mut w = LogWriter::open(p, &key(), false).unwrap();
        assert_eq!(std::fs::read_dir(p.join(".rcpt/tmp")).unwrap().count(), 0);
        assert!(!p.join(".rcpt/checkpoints/900").exists() || published);
        // Other entries where the stopped append wrote: no conflict.
        let got = w.append(&entries(5000..5600)).unwrap();
        assert_eq!(
            got[0],
            Appended {
                index: size,
                new: true
            },
            "budget {budget}"
        );
        // The stopped batch: already logged if published, else new.
        let again = w.append(&entries(300..301)).unwrap();
        let want = if published { 300 } else { size + 600 };
        assert_eq!(again[0].index, want, "budget {budget}");
        drop(w);
        let report = check(p, |_, _| {}).unwrap();
        assert_eq!(report.unpublished, 0);
        assert_proofs_of(&Log::open(p).unwrap(), size);
        if !stopped {
            assert!(published, "an append that ran whole published");
            break;
        }
    }
    assert!(published_at.is_some());
}

/// `assert_proofs` for a log whose entries are `0..first` then `5000..`.
fn assert_proofs_of(log: &Log, first: u64) {
    let n = log.size();
    for i in (0..n).step_by(97) {
        let e = if i < first {
            entry(i)
        } else {
            entry(5000 + i - first)
        };
        if i >= first + 600 {
            continue; // the re-sent entry 300, checked by index above
        }
        assert_eq!(log.entry(i).unwrap(), e, "entry {i}");
        let proof = log.inclusion_proof(i, n).unwrap();
        verify_inclusion(&leaf_hash(&e), i, n, &proof, &log.root()).unwrap();
    }
}

/// Regression (issue 8, defect 9): a flipped byte in a file kept for an
/// earlier published size went unnoticed by `check` (and `prove --size`
/// then wrote a bundle that fails). Every kind of kept file is checked
/// against the tree it belongs to, and the failure names it.
#[test]
fn check_verifies_every_kept_file() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    let mut w = new_log(p);
    for range in [0..100, 100..300, 300..600] {
        w.append(&entries(range)).unwrap();
    }
    drop(w);
    let report = check(p, |_, _| {}).unwrap();
    // Size 100: two kept partials; size 300: three (level 0, level 1, bundle).
    assert_eq!(report.kept_tiles, 5);
    for kept in [
        "tile/entries/000.p/100",
        "tile/0/000.p/100",
        "tile/entries/001.p/44",
        "tile/0/001.p/44",
        "tile/1/000.p/1",
        ".rcpt/checkpoints/300",
        ".rcpt/checkpoints/100",
    ] {
        let path = p.join(kept);
        let good = std::fs::read(&path).unwrap();
        let mut bad = good.clone();
        let at = bad.len() / 2;
        bad[at] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        let err = check(p, |_, _| {}).unwrap_err();
        assert!(err.to_string().contains(kept), "{kept}: {err}");
        std::fs::remove_file(&path).unwrap();
        if !kept.starts_with(".rcpt") {
            let err = check(p, |_, _| {}).unwrap_err();
            assert!(err.to_string().contains(kept), "{kept} missing: {err}");
            assert!(err.to_string().contains("missing"), "{kept} missing: {err}");
        }
        std::fs::write(&path, &good).unwrap();
        check(p, |_, _| {}).unwrap();
    }
}

/// The checkpoint changes only by compare-and-swap: a writer whose
/// checkpoint was replaced behind its back (another writer, a restore)
/// stops, and writes nothing more.
#[test]
fn a_writer_stops_when_the_checkpoint_moves_under_it() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    let mut w = new_log(p);
    w.append(&entries(0..10)).unwrap();
    let at_10 = std::fs::read(p.join("checkpoint")).unwrap();
    w.append(&entries(10..20)).unwrap();
    // Someone puts back the checkpoint of size 10.
    std::fs::write(p.join("checkpoint"), &at_10).unwrap();
    let err = w.append(&entries(20..30)).unwrap_err();
    assert!(err.to_string().contains("checkpoint changed"), "{err}");
    let err = w.append(&entries(30..40)).unwrap_err();
    assert!(matches!(err, LogError::Stopped { .. }), "{err}");
    assert_eq!(std::fs::read(p.join("checkpoint")).unwrap(), at_10);
}

/// A copy of the public files (no `.rcpt/`) is read with the log key and
/// takes no writer; a directory without a checkpoint is not a log, and
/// one that does not exist is said to be missing.
#[test]
fn a_copy_of_the_public_files_reads_but_takes_no_writer() {
    use rcpt::storage::posix::PosixStore;
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("log");
    let mut w = new_log(&p);
    w.append(&entries(0..300)).unwrap();
    let root = w.log().root();
    drop(w);
    std::fs::remove_dir_all(p.join(".rcpt")).unwrap();
    assert!(matches!(Log::open(&p), Err(LogError::NoLogKey { .. })));
    let vkey =
        rcpt::keys::NoteVerifier::new("example.com/test-log", key().verifying_key()).unwrap();
    let log = Log::open_store(Arc::new(PosixStore::new(&p)), Some(&vkey)).unwrap();
    assert_eq!((log.size(), log.root()), (300, root));
    assert_eq!(rcpt::log::check_log(&log, |_, _| {}).unwrap().size, 300);
    assert_eq!(log.find(&leaf_hash(&entry(123))).unwrap(), Some(123));
    let err = LogWriter::open(&p, &key(), false).unwrap_err();
    assert!(matches!(err, LogError::NotWritable { .. }), "{err}");
    assert!(!p.join(".rcpt").exists());
    let absent = tmp.path().join("absent");
    let err = LogWriter::open(&absent, &key(), false).unwrap_err();
    assert!(matches!(err, LogError::NoSuchDirectory { .. }), "{err}");
    assert!(err.is_bad_path(), "{err}");
    assert!(!absent.exists());
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = LogWriter::open(&empty, &key(), false).unwrap_err();
    assert!(matches!(err, LogError::NotALog { .. }), "{err}");
    assert!(!err.is_bad_path(), "{err}");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

/// `prove_range` (every proof of a range, tile by tile) gives exactly the
/// proofs `inclusion_proof` gives one by one, at every published size,
/// for ranges that start and end inside tiles.
#[test]
fn proofs_of_a_range_equal_proofs_one_by_one() {
    let tmp = tempfile::tempdir().unwrap();
    let mut w = new_log(tmp.path());
    let mut sizes = Vec::new();
    for range in [0..1, 1..256, 256..700, 700..66_000] {
        w.append(&entries(range.clone())).unwrap();
        sizes.push(range.end);
    }
    let log = Log::open(tmp.path()).unwrap();
    for &size in &sizes {
        for range in [0..size, size / 3..size.saturating_sub(size / 5)] {
            let got = std::sync::Mutex::new(Vec::new());
            log.prove_range(range.clone(), size, |i, e, proof| {
                assert_eq!(e, entry(i).as_slice());
                got.lock().unwrap().push((i, proof));
                Ok::<_, LogError>(())
            })
            .unwrap();
            let mut got = got.into_inner().unwrap();
            got.sort();
            assert_eq!(
                got.len() as u64,
                range.end - range.start,
                "{size} {range:?}"
            );
            for (i, proof) in got.iter().step_by(if size > 1000 { 61 } else { 1 }) {
                assert_eq!(
                    *proof,
                    log.inclusion_proof(*i, size).unwrap(),
                    "{i} at {size}"
                );
            }
        }
    }
    // Only published sizes, and only indexes below the size.
    assert!(matches!(
        log.prove_range(0..3, 5, |_, _, _| Ok::<_, LogError>(())),
        Err(LogError::NoCheckpoint { size: 5, .. })
    ));
    assert!(
        log.prove_range(0..257, 256, |_, _, _| Ok::<_, LogError>(()))
            .is_err()
    );
}
