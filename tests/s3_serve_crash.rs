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
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcpt::storage::s3::{BlockingClient, LeaseConfig, Location, S3Store};
use serve_support::{ORIGIN, entry_of, envelope, log_key, write_trust};

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
    let mut child = c
        .rcpt("serve")
        .args(["--wait", "--lease-ttl", LEASE_TTL])
        .args(["--listen", "127.0.0.1:0", "--batch-wait", "20ms"])
        .args(["--batch-max", "64", "--trust"])
        .arg(&c.trust)
        .arg("--key")
        .arg(&c.key)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = support::listening(&mut child, None);
    (child, format!("http://{addr}"))
}

/// The crash trials' load (`support::serve::crash_load`) with this file's
/// client counts.
async fn load(url: String, base: u64, earlier: Arc<Vec<(u64, u64)>>, acks: Acks) -> u64 {
    serve_support::crash_load(url, base, (CLIENTS, PER_CLIENT), earlier, acks).await
}

fn log_check(c: &Ctx) {
    let out = c.rcpt("check").output().unwrap();
    assert!(
        out.status.success(),
        "log check: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `count` trials; `check_every`: run `log check` after every that many
/// trials (and after the last).
fn trials(count: u64, seed: u64, check_every: u64) {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let location = s3_support::fresh_location(&bucket, "serve-crash");
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("log.key");
    std::fs::write(&key, rcpt::keys::signing_key_to_pem(&log_key())).unwrap();
    let c = Ctx {
        log: format!("s3://{}/{}", location.bucket, location.prefix),
        endpoint: settings.endpoint.url(),
        trust: write_trust(tmp.path()),
        key,
    };
    let init = c
        .rcpt("init")
        .args(["--origin", ORIGIN, "--key"])
        .arg(&c.key)
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let s3 = Arc::new(BlockingClient::new(settings, &location).unwrap());
    let open = || {
        let store = Arc::new(S3Store::new(
            Arc::clone(&s3),
            Location::parse(&c.log).unwrap(),
            LeaseConfig::new(Duration::from_secs(1)).unwrap(),
        ));
        rcpt::log::Log::open_store(store, None).unwrap()
    };

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
        for (&n, &index) in &acks {
            assert_eq!(
                log.entry(index).unwrap(),
                entry_of(&envelope(n)),
                "trial {trial}: receipt {n}"
            );
            if let Some(&first) = all.get(&n) {
                assert_eq!(first, index, "trial {trial}: receipt {n} moved");
            }
        }
        all.extend(acks);
        if trial % check_every == check_every - 1 {
            log_check(&c);
        }
    }
    // A last server repairs what the last kill left; then everything is checked.
    let (mut child, _) = serve(&c);
    child.kill().unwrap();
    child.wait().unwrap();
    let log = open();
    for (&n, &index) in &all {
        assert_eq!(log.entry(index).unwrap(), entry_of(&envelope(n)));
    }
    log_check(&c);
    eprintln!(
        "{count} trials: {mid_load} killed with answers given, {} receipts acknowledged, log size {}, {:.1} s",
        all.len(),
        log.size(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        mid_load > 0,
        "no trial acknowledged anything before its kill"
    );
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
