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

use bytes::Bytes;
use hyper::Method;
use rcpt::net::client::Client;
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

/// xorshift64*: a seeded, reproducible source of kill instants.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// What one trial's clients saw answered 200: receipt number -> index.
type Acks = Arc<Mutex<HashMap<u64, u64>>>;

/// Submit fresh receipts `base + c * PER_CLIENT + i`, and every fifth time
/// one acknowledged in an earlier trial, until the server goes away.
async fn load(url: String, base: u64, earlier: Arc<Vec<(u64, u64)>>, acks: Acks) -> u64 {
    let client = Client::new(&url).unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let (client, earlier, acks) = (client.clone(), Arc::clone(&earlier), Arc::clone(&acks));
        tasks.spawn(async move {
            let mut mismatches = 0u64;
            for i in 0..PER_CLIENT {
                let (n, expect) =
                    match earlier.get(((c * 7919 + i * 104_729) as usize) % earlier.len().max(1)) {
                        Some(&(n, index)) if i % 5 == 4 => (n, Some(index)),
                        _ => (base + c * PER_CLIENT + i, None),
                    };
                let sent = client
                    .send(Method::POST, "add", Bytes::from(envelope(n)), None, 1 << 16)
                    .await;
                let Ok(a) = sent else { break };
                if a.status.as_u16() != 200 {
                    break;
                }
                let j: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
                let index = j["index"].as_u64().unwrap();
                if expect.is_some_and(|e| e != index) {
                    mismatches += 1;
                }
                acks.lock().unwrap().insert(n, index);
            }
            mismatches
        });
    }
    let mut mismatches = 0;
    while let Some(m) = tasks.join_next().await {
        mismatches += m.unwrap();
    }
    mismatches
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
        if trial % 25 == 24 {
            for (&n, &index) in &all {
                assert_eq!(log.entry(index).unwrap(), entry_of(&envelope(n)));
            }
        }
    }
    let log = rcpt::log::Log::open(&dir).unwrap();
    for (&n, &index) in &all {
        assert_eq!(log.entry(index).unwrap(), entry_of(&envelope(n)));
    }
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
fn sigkill_under_load_never_loses_an_answered_submission() {
    trials(20, 0x5eed_0001);
}

#[test]
#[ignore = "200 trials, a few minutes: run with --ignored"]
fn sigkill_under_load_never_loses_an_answered_submission_200() {
    trials(200, 0x5eed_0200);
}
