//! The log on S3 (radosgw): the storage contract that every backend keeps,
//! run through the trait on `S3Store`; the log's writer and reader on it
//! (append at tile edges, proofs, check, reopen); the lease fencing a
//! writer's store; and a crashed writer's objects past the checkpoint,
//! repaired by the next writer. Skipped, with the reason on stderr, when
//! `RCPT_S3_ENDPOINT` is not set.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use rcpt::storage::CheckpointStore as _;
use rcpt::storage::PrivateStore as _;
use rcpt::storage::TileStore as _;
use support::s3 as s3_support;
use support::{entries, entry, lib_log_key as key};

use std::sync::Arc;
use std::time::Duration;

use rcpt::log::{Log, LogError, LogWriter, check_log};
use rcpt::storage::s3::{BlockingClient, LeaseConfig, S3Store};
use rcpt::storage::{PublicKey, PublicRead, StoreError};
use rcpt::tlog::merkle::{leaf_hash, verify_inclusion};

const ORIGIN: &str = "example.com/s3-log";

/// A store at a fresh prefix, leases of 2 s.
fn store(name: &str) -> Option<Arc<S3Store>> {
    let (s3, loc) = s3_support::setup(name)?;
    let ttl = LeaseConfig::new(Duration::from_secs(2)).unwrap();
    Some(Arc::new(S3Store::new(Arc::new(s3), loc, ttl)))
}

/// Another process's view of the same log: its own client and store.
fn same_log(store: &S3Store) -> Arc<S3Store> {
    let (settings, _) = s3_support::server().unwrap();
    let s3 = BlockingClient::new(settings, store.location()).unwrap();
    let ttl = LeaseConfig::new(Duration::from_secs(2)).unwrap();
    Arc::new(S3Store::new(Arc::new(s3), store.location().clone(), ttl))
}

/// Each trait's group of the contract on its own new prefix, then all.
#[test]
fn the_storage_contract_holds_on_s3() {
    use rcpt::storage::contract;
    let all: (&str, contract::Group) = ("all", contract::run);
    for (name, group) in contract::GROUPS.into_iter().chain([all]) {
        let Some(store) = store(&format!("contract-{name}")) else {
            return;
        };
        group(&*store).unwrap();
    }
}

#[test]
fn a_log_on_s3_appends_proves_checks_and_reopens() {
    let Some(store) = store("log") else { return };
    Log::init_store(store.clone(), ORIGIN, &key(), None, None).unwrap();
    let mut w = LogWriter::open_store(store.clone(), &key(), false).unwrap();
    let mut size = 0u64;
    // Batches straddling tile edges: 1, 254 (to 255), 2 (to 257), 300.
    for batch in [1u64, 254, 2, 300] {
        let got = w.append(&entries(size..size + batch)).unwrap();
        assert_eq!(got.len() as u64, batch);
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, a)| a.new && a.index == size + i as u64)
        );
        size += batch;
    }
    // The same entries again keep their first index and add nothing.
    let again = w.append(&entries(250..260)).unwrap();
    assert!(
        again
            .iter()
            .enumerate()
            .all(|(i, a)| !a.new && a.index == 250 + i as u64)
    );
    drop(w);

    // A reader in another process sees exactly what was published.
    let reader = Log::open_store(same_log(&store), None).unwrap();
    assert_eq!(reader.size(), size);
    for i in [0, 254, 255, 256, 300, size - 1] {
        let proof = reader.inclusion_proof(i, size).unwrap();
        verify_inclusion(&leaf_hash(&entry(i)), i, size, &proof, &reader.root()).unwrap();
        assert_eq!(reader.entry(i).unwrap(), entry(i));
    }
    let report = check_log(&reader, |_, _| {}).unwrap();
    assert_eq!(report.size, size);
    // The public objects are exactly tlog-tiles.
    for path in [
        "checkpoint",
        "tile/0/001",
        "tile/0/002.p/45",
        "tile/entries/002.p/45",
        "tile/1/000.p/2",
    ] {
        let key = PublicKey::from_path(path).unwrap();
        assert!(store.read(&key, 1 << 20).unwrap().is_some(), "{path}");
    }
    // A second writer, after the first released its lease, continues the log.
    let mut w2 = LogWriter::open_store(same_log(&store), &key(), false).unwrap();
    let got = w2.append(&entries(size..size + 3)).unwrap();
    assert_eq!(got[0].index, size);
}

#[test]
fn a_second_writer_is_refused_while_the_first_holds_the_lease() {
    let Some(store) = store("two-writers") else {
        return;
    };
    Log::init_store(store.clone(), ORIGIN, &key(), None, None).unwrap();
    let _first = LogWriter::open_store(store.clone(), &key(), false).unwrap();
    match LogWriter::open_store(same_log(&store), &key(), false) {
        Err(LogError::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
}

#[test]
fn a_store_whose_lease_is_lost_refuses_every_write() {
    let Some(store) = store("fence") else { return };
    let lock = store.lock(false).unwrap();
    lock.check().unwrap();
    // Another party overwrites the lease object outside the protocol: the
    // holder's next renewal is refused and it is out.
    let other = same_log(&store);
    let (settings, _) = s3_support::server().unwrap();
    let raw = BlockingClient::new(settings, other.location()).unwrap();
    raw.put_overwrite(&store.lease_key(), bytes::Bytes::from_static(b"{}"))
        .unwrap();
    let mut lost = false;
    for _ in 0..200 {
        if lock.check().is_err() {
            lost = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(lost, "the holder noticed within 5 s (its TTL is 2 s)");
    assert!(matches!(lock.check(), Err(StoreError::LockLost { .. })));
    // Every write is refused before a request is sent; reads still work.
    let tile = rcpt::storage::TileKey::entries(0, rcpt::storage::Width::partial(1).unwrap());
    assert!(matches!(
        store.create_tiles(&[(tile, vec![1])]),
        Err(StoreError::LockLost { .. })
    ));
    assert!(matches!(
        store.replace_checkpoint(None, b"cp"),
        Err(StoreError::LockLost { .. })
    ));
    assert!(matches!(
        store.write_private(&rcpt::storage::PrivateKey::Settings, b"{}"),
        Err(StoreError::LockLost { .. })
    ));
    assert!(store.read(&PublicKey::Tile(tile), 16).unwrap().is_none());
    assert!(store.read_checkpoint(16).unwrap().is_none());
}

/// A writer that crashed between any two of its storage calls (its store
/// stops dead after the k-th changing call, k = 0, 1, 2, ... until an append
/// runs whole: tests/support/failstop.rs) leaves objects past the
/// checkpoint; the next writer repairs them and appends other entries at
/// those indexes.
#[test]
fn a_crashed_writers_uploads_never_block_the_next_publish() {
    use support::failstop::FailStop;
    let Some(store) = store("crash") else { return };
    Log::init_store(store.clone(), ORIGIN, &key(), None, None).unwrap();
    let mut size = 0u64;
    let mut next_entry = 0u64;
    for budget in 0.. {
        let stopping = FailStop::new(same_log(&store), budget);
        // The crashed batch: entries that will never be acknowledged.
        let doomed: Vec<Vec<u8>> = (0..5)
            .map(|i| format!("doomed-{budget}-{i}").into_bytes())
            .collect();
        let stopped = match LogWriter::open_store(stopping.clone(), &key(), true) {
            Ok(mut w) => w.append(&doomed).is_err(),
            Err(_) => true,
        };
        assert_eq!(stopped, stopping.stopped(), "budget {budget}");
        // The next writer. (The stopped writer's lease was released as it
        // was dropped; a killed writer's lease expires instead, which
        // tests/s3_lease.rs covers.)
        let mut w = LogWriter::open_store(same_log(&store), &key(), true).unwrap();
        let reopened = Log::open_store(same_log(&store), None).unwrap().size();
        // A crash after publishing keeps the batch; before, it is gone.
        assert!(
            reopened == size || reopened == size + 5,
            "budget {budget}: {reopened}"
        );
        size = reopened;
        let batch = entries(next_entry..next_entry + 3);
        next_entry += 3;
        let got = w.append(&batch).unwrap();
        assert_eq!(got[0].index, size, "budget {budget}");
        size += 3;
        if !stopped {
            break;
        }
    }
    let log = Log::open_store(same_log(&store), None).unwrap();
    assert_eq!(log.size(), size);
    check_log(&log, |_, _| {}).unwrap();
}

/// Appends per second and requests per batch on S3 (run by hand, with
/// radosgw on the same machine): `cargo test --release --test s3_store --
/// --ignored --nocapture measure`.
#[test]
#[ignore = "a measurement, not a test: run by hand on an idle machine with radosgw (--release -- --ignored --nocapture measure)"]
fn measure_append_throughput() {
    let Some((s3, loc)) = s3_support::setup("measure") else {
        return;
    };
    let s3 = Arc::new(s3);
    let ttl = LeaseConfig::new(Duration::from_secs(10)).unwrap();
    let store = Arc::new(S3Store::new(s3.clone(), loc, ttl));
    Log::init_store(store.clone(), ORIGIN, &key(), None, None).unwrap();
    let mut w = LogWriter::open_store(store.clone(), &key(), false).unwrap();
    let mut next = 0u64;
    for (batch, rounds) in [(1u64, 50u64), (16, 30), (256, 10), (4096, 3)] {
        let before = s3.client().requests_sent();
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            w.append(&entries(next..next + batch)).unwrap();
            next += batch;
        }
        let secs = start.elapsed().as_secs_f64();
        let requests = s3.client().requests_sent() - before;
        eprintln!(
            "measured: batch {batch:>5}: {:>8.1} appends/s, {:>6.1} batches/s, {:>5.1} requests per batch",
            (batch * rounds) as f64 / secs,
            rounds as f64 / secs,
            requests as f64 / rounds as f64
        );
    }
}

/// Latency of single requests (run by hand, as above).
#[test]
#[ignore = "a measurement, not a test: run by hand on an idle machine with radosgw (--release -- --ignored --nocapture measure)"]
fn measure_request_latency() {
    let Some((s3, loc)) = s3_support::setup("latency") else {
        return;
    };
    let body = bytes::Bytes::from(vec![1u8; 8192]);
    for (what, n) in [
        ("create 8 KiB", 50),
        ("get 8 KiB", 50),
        ("head", 50),
        ("replace 8 KiB", 50),
    ] {
        let start = std::time::Instant::now();
        let mut etag = None;
        for i in 0..n {
            let k = loc.key(&format!("o{i}"));
            match what {
                "create 8 KiB" => {
                    s3.create(&k, body.clone()).unwrap();
                }
                "get 8 KiB" => {
                    s3.get(&k, 8192).unwrap().unwrap();
                }
                "head" => {
                    s3.head(&k).unwrap().unwrap();
                }
                _ => {
                    let k = loc.key("o0");
                    let e = etag
                        .take()
                        .unwrap_or_else(|| s3.head(&k).unwrap().unwrap().etag);
                    let mut b = body.to_vec();
                    b[0] = i as u8 + 2;
                    etag = Some(s3.replace(&k, bytes::Bytes::from(b), &e).unwrap());
                }
            }
        }
        eprintln!(
            "measured: {what}: {:.2} ms each",
            start.elapsed().as_secs_f64() * 1000.0 / n as f64
        );
    }
}

/// Two writers in two "processes" (own clients and stores) take turns on
/// one log under load, each waiting for the lease, while a reader watches
/// the checkpoint. Every checkpoint the log ever published (all are kept)
/// extends the one before it, checked by consistency proofs; a size seen
/// twice has one root; every acknowledged entry is at its index.
#[test]
fn two_writers_taking_turns_never_fork_the_tree() {
    use rcpt::tlog::merkle::verify_consistency;
    use rcpt::tlog::note::{Checkpoint, Note};
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, Ordering};

    let Some(store) = store("no-fork") else {
        return;
    };
    Log::init_store(store.clone(), ORIGIN, &key(), None, None).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let root_of =
        |text: &str| Checkpoint::parse(&Note::parse(text.as_bytes()).unwrap().text).unwrap();
    let (acked, seen) = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..2u64)
            .map(|w| {
                let mine = same_log(&store);
                scope.spawn(move || {
                    let mut acked = Vec::new();
                    for round in 0..4u64 {
                        let mut writer = LogWriter::open_store(mine.clone(), &key(), true).unwrap();
                        for batch in 0..3u64 {
                            let first = 1_000_000 * (w + 1) + 100 * round + 10 * batch;
                            let got = writer.append(&entries(first..first + 7)).unwrap();
                            acked.extend((first..first + 7).zip(got.iter().map(|a| a.index)));
                        }
                    }
                    acked
                })
            })
            .collect();
        let watcher = {
            let (reader_store, done) = (same_log(&store), done.clone());
            scope.spawn(move || {
                let mut seen: Vec<(u64, String)> = Vec::new();
                while !done.load(Ordering::SeqCst) {
                    let log = Log::open_store(reader_store.clone(), None).unwrap();
                    seen.push((log.size(), log.checkpoint().to_string()));
                    std::thread::sleep(Duration::from_millis(10));
                }
                seen
            })
        };
        let acked: Vec<(u64, u64)> = writers
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        done.store(true, Ordering::SeqCst);
        (acked, watcher.join().unwrap())
    });
    let log = Log::open_store(same_log(&store), None).unwrap();
    assert_eq!(log.size(), 2 * 4 * 3 * 7);
    // One root per size among everything the reader saw, sizes never shrink.
    let mut by_size: HashMap<u64, [u8; 32]> = HashMap::new();
    let mut last = 0;
    for (size, text) in &seen {
        let cp = root_of(text);
        assert_eq!(cp.size, *size);
        assert!(
            *size >= last,
            "the published size went back from {last} to {size}"
        );
        last = *size;
        let root = *by_size.entry(*size).or_insert(cp.root_hash);
        assert_eq!(root, cp.root_hash, "two roots for size {size}: a fork");
    }
    // Every published checkpoint (all are kept) extends the previous one.
    let sizes = log.kept_sizes().unwrap();
    assert_eq!(
        sizes.len(),
        1 + 2 * 4 * 3,
        "one checkpoint per batch, and size 0"
    );
    for pair in sizes.windows(2) {
        let (m, n) = (pair[0], pair[1]);
        let (cm, cn) = (
            root_of(&log.checkpoint_at(m).unwrap()),
            root_of(&log.checkpoint_at(n).unwrap()),
        );
        let proof = log.consistency_proof(m, n).unwrap();
        verify_consistency(m, n, &proof, &cm.root_hash, &cn.root_hash).unwrap();
        if let Some(root) = by_size.get(&n) {
            assert_eq!(*root, cn.root_hash);
        }
    }
    for (e, index) in &acked {
        assert_eq!(
            log.entry(*index).unwrap(),
            entry(*e),
            "entry {e} at {index}"
        );
    }
    eprintln!(
        "reader saw {} checkpoints, {} sizes",
        seen.len(),
        by_size.len()
    );
}
