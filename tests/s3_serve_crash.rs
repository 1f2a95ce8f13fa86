//! Crash trials of the service on S3 (radosgw): clients submit over HTTP
//! to `rcpt log serve s3://…` while it is SIGKILLed at a seeded random
//! instant, mid-batch; the next trial's server (`--wait`) waits out the
//! dead one's lease and repairs what it left past the checkpoint. After
//! every trial each submission answered 200 is in the log at the index it
//! was given (re-sent ones keep their first index), and `rcpt log check`
//! passes. 20 trials in the suite; 200 with
//! `cargo test --release --test s3_serve_crash -- --ignored`. Skipped,
//! with the reason on stderr, when `RCPT_S3_ENDPOINT` is not set.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use support::s3 as s3_support;
mod support;
use support::serve as serve_support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcpt::storage::s3::BlockingClient;
use serve_support::{assert_all_at, check_trial_acks, report_trials};

/// Concurrent submitters per trial.
const CLIENTS: u64 = 16;
/// Most submissions one submitter makes in a trial (bounds the loop).
const PER_CLIENT: u64 = 400;
/// Latest kill instant after the server listens.
const MAX_KILL_MS: u64 = 600;
/// The lease TTL of every server (seconds; the next trial waits it out).
const LEASE_TTL: &str = "1";

use support::Rng;

/// What one trial's clients saw answered 200: receipt number -> index.
type Acks = Arc<Mutex<HashMap<u64, u64>>>;

use support::s3::S3Log as Ctx;

/// `rcpt log serve --wait` on the log; the child and its URL once it
/// listens (after the previous server's lease has expired).
fn serve(c: &Ctx) -> (std::process::Child, String) {
    let (child, addr) = c.serve(&[
        "--wait",
        "--lease-ttl",
        LEASE_TTL,
        "--listen",
        "127.0.0.1:0",
        "--batch-wait",
        "20ms",
        "--batch-max",
        "64",
    ]);
    (child, format!("http://{addr}"))
}

/// The crash trials' load (`support::serve::crash_load`) with this file's
/// client counts.
async fn load(url: String, base: u64, earlier: Arc<Vec<(u64, u64)>>, acks: Acks) -> u64 {
    serve_support::crash_load(url, base, (CLIENTS, PER_CLIENT), earlier, acks).await
}

/// `count` trials; `check_every`: run `log check` after every that many
/// trials (and after the last).
fn trials(count: u64, seed: u64, check_every: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let Some((c, settings, location)) = s3_support::new_log("serve-crash", tmp.path()) else {
        return;
    };
    let s3 = Arc::new(BlockingClient::new(settings, &location).unwrap());
    let open = || c.open(&s3, Duration::from_secs(1));

    let mut rng = Rng(seed);
    let mut all: HashMap<u64, u64> = HashMap::new();
    let rt = serve_support::runtime();
    let (mut mid_load, started) = (0u64, Instant::now());
    for trial in 0..count {
        let (mut child, url) = serve(&c);
        let earlier: Arc<Vec<(u64, u64)>> = Arc::new(all.iter().map(|(&n, &i)| (n, i)).collect());
        let acks: Acks = Arc::new(Mutex::new(HashMap::new()));
        let base = 1_000_000 * (trial + 1);
        let load = rt.spawn(load(url, base, earlier, Arc::clone(&acks)));
        std::thread::sleep(Duration::from_millis(20 + rng.next() % MAX_KILL_MS));
        child.kill().unwrap(); // SIGKILL: no release; the lease must expire
        child.wait().unwrap();
        let mismatches = rt.block_on(load).unwrap();
        assert_eq!(mismatches, 0, "trial {trial}: a re-sent receipt moved");
        let acks = std::mem::take(&mut *acks.lock().unwrap());
        if !acks.is_empty() {
            mid_load += 1;
        }
        let log = open();
        check_trial_acks(&log, trial, acks, &mut all);
        if trial % check_every == check_every - 1 {
            c.check();
        }
    }
    // A last server repairs what the last kill left; then everything is checked.
    let (mut child, _) = serve(&c);
    child.kill().unwrap();
    child.wait().unwrap();
    let log = open();
    assert_all_at(&log, &all);
    c.check();
    report_trials(count, mid_load, &all, &log, started);
}

#[test]
fn sigkilled_serve_on_s3_never_loses_an_answered_submission() {
    trials(20, 0x5eed_5301, 1);
}

#[test]
#[ignore = "200 trials, several minutes: run with --ignored"]
fn sigkilled_serve_on_s3_never_loses_an_answered_submission_200() {
    trials(200, 0x5eed_5302, 10);
}
