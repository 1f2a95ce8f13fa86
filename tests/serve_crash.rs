//! Crash safety of the service: clients submit over HTTP while the server
//! is SIGKILLed at a seeded random instant; then `rcpt log check` must
//! pass and every submission answered 200 must be in the log at the index
//! it was given. The server is restarted on the same log for the next
//! trial, and re-sent acknowledged receipts must keep their index.
//! 20 trials in the normal suite; 200 with
//! `cargo test --release --test serve_crash -- --ignored`.
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::serve as serve_support;

use serve_support::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Concurrent submitters per trial.
const CLIENTS: u64 = 32;
/// Most submissions one submitter makes in a trial (bounds the loop).
const PER_CLIENT: u64 = 400;
/// Latest kill instant after the server is up.
const MAX_KILL_MS: u64 = 600;

use support::Rng;

/// What one trial's clients saw answered 200: receipt number -> index.
type Acks = Arc<Mutex<HashMap<u64, u64>>>;

/// The crash trials' load (`support::serve::crash_load`) with this file's
/// client counts.
async fn load(url: String, base: u64, earlier: Arc<Vec<(u64, u64)>>, acks: Acks) -> u64 {
    serve_support::crash_load(url, base, (CLIENTS, PER_CLIENT), earlier, acks).await
}

fn trials(count: u64, seed: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let mut rng = Rng(seed);
    let mut all: HashMap<u64, u64> = HashMap::new();
    let rt = runtime();
    let (mut mid_load, started) = (0u64, Instant::now());
    for trial in 0..count {
        let served = Served::start(&dir, &trust, &["--batch-wait", "20ms", "--batch-max", "64"]);
        let earlier: Arc<Vec<(u64, u64)>> = Arc::new(all.iter().map(|(&n, &i)| (n, i)).collect());
        let acks: Acks = Arc::new(Mutex::new(HashMap::new()));
        let base = 1_000_000 * (trial + 1);
        let load = rt.spawn(load(served.url(), base, earlier, Arc::clone(&acks)));
        let kill_at = Duration::from_millis(20 + rng.next() % MAX_KILL_MS);
        std::thread::sleep(kill_at);
        served.kill();
        let mismatches = rt.block_on(load).unwrap();
        assert_eq!(mismatches, 0, "trial {trial}: a re-sent receipt moved");
        let acks = std::mem::take(&mut *acks.lock().unwrap());
        if !acks.is_empty() {
            mid_load += 1;
        }
        log_check(&dir);
        let log = rcpt::log::Log::open(&dir).unwrap();
        check_trial_acks(&log, trial, acks, &mut all);
        if trial % 25 == 24 {
            assert_all_at(&log, &all);
        }
    }
    let log = rcpt::log::Log::open(&dir).unwrap();
    assert_all_at(&log, &all);
    report_trials(count, mid_load, &all, &log, started);
}

#[test]
fn sigkill_under_load_never_loses_an_answered_submission() {
    trials(20, 0x5eed_0001);
}

#[test]
#[ignore = "200 trials, a few minutes: run with --ignored"]
fn sigkill_under_load_never_loses_an_answered_submission_200() {
    trials(200, 0x5eed_0200);
}
