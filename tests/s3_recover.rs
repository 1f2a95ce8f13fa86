//! A served log on a failing object store comes back by itself. `rcpt log
//! serve s3://…` talks to radosgw through `support::faultproxy`, which
//! loses the answers of conditional writes the store applied (the
//! checkpoint's compare-and-swap, the lease's take, renewal and release)
//! and then takes the store down for a while, so that the client's retries
//! and its read-back fail too: the writer is left not knowing, or loses
//! its lease. Scripted sequences, one per lost answer, and a seeded random
//! run (`RCPT_FAULT_SEED` replays one).
//!
//! Each run requires, once the faults stop: a submission is acknowledged
//! within [`recovery_bound`] (the service's reopen schedule, the client's
//! retries, the lease's margins: no restart, no sleep tuned to pass);
//! every acknowledged entry is at its own index; every checkpoint observed
//! (from the service and from the object) is one chain of consistent
//! trees; `/healthz` is 200 and the lease object names one holder, held;
//! `rcpt log check` passes. Skipped, visibly, without `RCPT_S3_ENDPOINT`.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::faultproxy::{Fault, FaultProxy, Kind, Plan, Script};
use support::s3 as s3_support;
use support::serve as serve_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rcpt::log::intake::REOPEN_MAX_DELAY;
use rcpt::storage::s3::client::{MAX_ATTEMPTS, RETRY_BASE_DELAY};
use rcpt::storage::s3::{BlockingClient, Location};
use s3_support::{S3Log, Seen};
use serve_support::{ORIGIN, log_verifier};

/// Longest a run waits for anything (bounds a broken service).
const GIVE_UP: Duration = Duration::from_secs(120);
/// Pause between a submitter's attempts.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// How soon after the store answers again a submission must succeed:
/// the service's longest wait between two attempts to open its writer
/// ([`REOPEN_MAX_DELAY`]), plus the client's retries of one request begun
/// while the store was away (its waits: 200 + 400 + 800 ms), plus the
/// wait for a lost lease's last writes (two margins, TTL/5), plus one
/// lease TTL for the open and the append themselves (a writer that cannot
/// open and append within its TTL could not hold a lease at all).
fn recovery_bound(ttl: Duration) -> Duration {
    let retries: Duration = (0..MAX_ATTEMPTS - 1)
        .map(|n| RETRY_BASE_DELAY * 2u32.pow(n))
        .sum();
    REOPEN_MAX_DELAY + retries + ttl / 5 + ttl
}

/// A served log behind a fault proxy, with what its clients saw.
struct Run {
    log: S3Log,
    location: Location,
    direct: Arc<BlockingClient>,
    proxy: FaultProxy,
    serve: std::process::Child,
    addr: SocketAddr,
    stderr: PathBuf,
    ttl: Duration,
    _tmp: tempfile::TempDir,
    /// Acknowledged: envelope number -> index.
    acks: Arc<Mutex<BTreeMap<u64, u64>>>,
    /// Answers other than 200, by status.
    refused: Arc<Mutex<BTreeMap<u16, u64>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    next: AtomicU64,
    stop: Arc<AtomicBool>,
}

impl Run {
    /// `rcpt log serve` of a new log, through a proxy with `plan`.
    fn start(name: &str, plan: Plan, ttl_secs: u64) -> Option<Run> {
        let tmp = tempfile::tempdir().unwrap();
        let (direct_log, settings, location) = s3_support::new_log(name, tmp.path())?;
        let proxy = FaultProxy::start(&settings.endpoint.url(), plan);
        let log = S3Log {
            endpoint: proxy.url(),
            ..direct_log
        };
        let stderr = tmp.path().join("serve.log");
        let ttl = ttl_secs.to_string();
        let (serve, addr) = support::spawn_listening(
            &mut log.serve_cmd(&["--lease-ttl", &ttl, "--listen", "127.0.0.1:0"]),
            &stderr,
        );
        let direct = Arc::new(BlockingClient::new(settings, &location).unwrap());
        let run = Run {
            log,
            location,
            direct,
            proxy,
            serve,
            addr,
            stderr,
            ttl: Duration::from_secs(ttl_secs),
            _tmp: tmp,
            acks: Arc::default(),
            refused: Arc::default(),
            seen: Arc::default(),
            next: AtomicU64::new(0),
            stop: Arc::new(AtomicBool::new(false)),
        };
        run.watch_checkpoints();
        Some(run)
    }

    /// Reads `/checkpoint` and the object every 20 ms until the run stops.
    fn watch_checkpoints(&self) {
        let (stop, seen, s3, addr) = (
            Arc::clone(&self.stop),
            Arc::clone(&self.seen),
            Arc::clone(&self.direct),
            self.addr,
        );
        let object = self.location.key("checkpoint");
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let r = serve_support::raw(addr, "GET", "/checkpoint", &[], b"");
                if r.status == 200 {
                    let text = String::from_utf8(r.body).unwrap();
                    let source = format!("http://{addr}");
                    seen.lock().unwrap().push(Seen { source, text });
                }
                if let Ok(Some(o)) = s3.get(&object, 1 << 16) {
                    let text = String::from_utf8(o.body.to_vec()).unwrap();
                    seen.lock().unwrap().push(Seen {
                        source: "object".into(),
                        text,
                    });
                }
                thread::sleep(Duration::from_millis(20));
            }
        });
    }

    /// One attempt to submit `envelope(n)`: its status, and its index on 200.
    fn submit_once(&self, n: u64) -> (u16, Option<u64>) {
        let r = serve_support::raw(
            self.addr,
            "POST",
            "/add",
            &["Content-Type: application/json"],
            serve_support::envelope(n).as_bytes(),
        );
        if r.status != 200 {
            *self.refused.lock().unwrap().entry(r.status).or_default() += 1;
            return (r.status, None);
        }
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let index = v["index"].as_u64().unwrap();
        self.acks.lock().unwrap().insert(n, index);
        (200, Some(index))
    }

    /// Submits a new envelope until it is acknowledged; when it was.
    fn submit(&self) -> Instant {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        loop {
            if self.submit_once(n).0 == 200 {
                return Instant::now();
            }
            assert!(
                started.elapsed() < GIVE_UP,
                "envelope {n} not acknowledged for {GIVE_UP:?}: {}",
                self.service_log()
            );
            thread::sleep(RETRY_EVERY);
        }
    }

    /// Submits new envelopes while the store is away (answers are 5xx,
    /// never a hang), then until one is acknowledged; how long after the
    /// store answered again that took.
    fn recovery(&self) -> Duration {
        let started = Instant::now();
        // Until the faults have happened and the outage they started ends.
        while self.proxy.is_down() || self.faults_pending() {
            assert!(
                started.elapsed() < GIVE_UP,
                "after {GIVE_UP:?} the store is still down or a scripted fault never came \
                 (a lease take that never happens: the service never took its lease again): {:?}\n{}",
                self.proxy.events(),
                self.service_log()
            );
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            self.submit_once(n);
            thread::sleep(RETRY_EVERY);
        }
        let back = Instant::now();
        self.submit().saturating_duration_since(back)
    }

    fn faults_pending(&self) -> bool {
        [
            Kind::CheckpointCas,
            Kind::LeaseTake,
            Kind::LeaseRenew,
            Kind::LeaseRelease,
        ]
        .into_iter()
        .any(|k| self.proxy.scripted_left(k) > 0)
    }

    fn service_log(&self) -> String {
        std::fs::read_to_string(&self.stderr)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.contains("\"method\""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Times the service opened its writer again (its log says so).
    fn reopens(&self) -> usize {
        self.service_log()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == "writer" && v["state"] == "reopened")
            .count()
    }

    /// One writer: the lease names one holder, held, and it renews.
    fn assert_one_holder(&self) {
        let key = self.location.key(".rcpt/lease");
        let lease = || {
            let o = self.direct.get(&key, 4096).unwrap().unwrap();
            let v: serde_json::Value = serde_json::from_slice(&o.body).unwrap();
            let field = |f: &str| v[f].as_str().unwrap().to_string();
            (field("state"), field("holder"), o.etag)
        };
        let (state, holder, etag) = lease();
        assert_eq!(state, "held");
        thread::sleep(self.ttl / 2);
        let (state2, holder2, etag2) = lease();
        assert_eq!(
            (state2, holder2),
            ("held".to_string(), holder),
            "the lease changed hands"
        );
        assert_ne!(etag2, etag, "the holder does not renew");
    }

    /// Everything a recovered log must show; the figures for the output.
    fn assert_recovered(mut self, recovery: Duration) -> String {
        let bound = recovery_bound(self.ttl);
        assert!(
            recovery <= bound,
            "the first acknowledgement came {recovery:?} after the store was back (bound {bound:?}): {}",
            self.service_log()
        );
        for _ in 0..5 {
            self.submit();
        }
        let health = serve_support::raw(self.addr, "GET", "/healthz", &[], b"");
        assert_eq!(
            health.status,
            200,
            "{}",
            String::from_utf8_lossy(&health.body)
        );
        assert!(self.serve.try_wait().unwrap().is_none(), "serve exited");
        self.assert_one_holder();
        let reopens = self.reopens();
        thread::sleep(Duration::from_millis(100));
        self.stop.store(true, Ordering::Relaxed);
        self.serve.kill().unwrap();
        self.serve.wait().unwrap();
        let direct_log = S3Log {
            endpoint: self.direct_endpoint(),
            log: self.log.log.clone(),
            trust: self.log.trust.clone(),
            key: self.log.key.clone(),
        };
        let log = direct_log.open(&self.direct, Duration::from_secs(10));
        let acks = self.acks.lock().unwrap().clone();
        s3_support::assert_acks_at_own_index(&log, &acks);
        let seen = self.seen.lock().unwrap().clone();
        let sizes = s3_support::assert_no_fork(&seen, &log, ORIGIN, &log_verifier());
        direct_log.check();
        format!(
            "recovered {recovery:?} after the store was back (bound {bound:?}), the writer opened again {reopens} times; {} acknowledged, final size {}, {} observations over {sizes} sizes; refused meanwhile: {:?}; proxy: {}; lost answers: {:?}",
            acks.len(),
            log.size(),
            seen.len(),
            self.refused.lock().unwrap(),
            self.proxy.counts().summary(),
            self.proxy.events()
        )
    }

    fn direct_endpoint(&self) -> String {
        std::env::var("RCPT_S3_ENDPOINT").unwrap()
    }
}

/// A script: the next `kind` request loses its answer (`fault`), then the
/// store is down for `down`.
fn lost(kind: Kind, fault: Fault, down: Duration) -> Script {
    Script {
        kind,
        faults: vec![fault],
        then_down: down,
    }
}

/// A served log meets `scripts` (after three acknowledged submissions):
/// it must stop its writer, open it again and recover within the bound.
fn scripted(name: &str, ttl_secs: u64, scripts: &[Script]) {
    let Some(run) = Run::start(name, Plan::clean(), ttl_secs) else {
        return;
    };
    for _ in 0..3 {
        run.submit();
    }
    for script in scripts {
        run.proxy.script(script.clone());
    }
    let recovery = run.recovery();
    assert!(
        run.reopens() >= 1,
        "the writer never stopped: {}",
        run.service_log()
    );
    eprintln!("measured: {}", run.assert_recovered(recovery));
}

/// The checkpoint's compare-and-swap is applied and its answer lost; the
/// store stays down past the client's read-back and past the 2 s lease, so
/// the writer neither knows its checkpoint landed nor holds its lease. The
/// service's next attempt to take the lease loses its answer too. Once the
/// store is back, the service opens its writer again (taking back its own
/// lease without waiting out the TTL) and serves.
#[test]
fn a_lost_checkpoint_answer_past_the_lease_and_a_lost_take() {
    scripted(
        "recover-cas",
        2,
        &[
            lost(
                Kind::CheckpointCas,
                Fault::DropAnswer,
                Duration::from_secs(5),
            ),
            lost(Kind::LeaseTake, Fault::LostAs(500), Duration::from_secs(3)),
        ],
    );
}

/// The compare-and-swap's answer is lost (a 500 after the store applied
/// it) and the read-back fails, but the lease (10 s) holds: the writer
/// finds a checkpoint it does not know and stops; dropping it releases the
/// lease, and that release's answer is lost too. The service opens its
/// writer again on the checkpoint that landed.
#[test]
fn a_lost_checkpoint_answer_within_the_lease_and_a_lost_release() {
    scripted(
        "recover-release",
        10,
        &[
            lost(
                Kind::CheckpointCas,
                Fault::LostAs(500),
                Duration::from_secs(3),
            ),
            lost(
                Kind::LeaseRelease,
                Fault::DropAnswer,
                Duration::from_secs(3),
            ),
        ],
    );
}

/// A renewal is applied and its answer lost, and the store stays down
/// past the 2 s lease: the idle writer's lease expires. The service drops
/// it, and once the store is back takes its lease back and serves.
#[test]
fn a_lost_renewal_answer_and_an_expired_lease() {
    scripted(
        "recover-renewal",
        2,
        &[lost(
            Kind::LeaseRenew,
            Fault::DropAnswer,
            Duration::from_secs(4),
        )],
    );
}

/// Submitters under a seeded random mix of lost answers (each followed by
/// an outage of 0.2 to 4 s) and ordinary faults, then no faults at all:
/// the service comes back within the bound, nothing acknowledged is lost,
/// the tree never forks. The seed is printed; `RCPT_FAULT_SEED` replays it.
#[test]
fn random_lost_answers_then_none() {
    let seed = support::faultproxy::seed();
    eprintln!("fault seed: {seed:#x} (replay with RCPT_FAULT_SEED={seed:#x})");
    // The faults start once the service listens: a store failing at start
    // is a failed start (exit 1), for whoever started it to see.
    let Some(run) = Run::start("recover-random", Plan::clean(), 2) else {
        return;
    };
    run.proxy.set_plan(Plan::lost_answers(seed));
    let run = Arc::new(run);
    let faulty_for = Duration::from_secs(25);
    let started = Instant::now();
    let submitters: Vec<_> = (0..4)
        .map(|_| {
            let run = Arc::clone(&run);
            thread::spawn(move || {
                while started.elapsed() < faulty_for {
                    let n = run.next.fetch_add(1, Ordering::Relaxed);
                    run.submit_once(n);
                    thread::sleep(RETRY_EVERY);
                }
            })
        })
        .collect();
    for s in submitters {
        s.join().unwrap();
    }
    run.proxy.set_plan(Plan::clean());
    run.proxy.set_down(false);
    let back = Instant::now();
    let recovery = run.submit().saturating_duration_since(back);
    let run = Arc::into_inner(run).unwrap();
    let lost = run.proxy.events().len();
    eprintln!(
        "measured: seed {seed:#x}: {}",
        run.assert_recovered(recovery)
    );
    assert!(lost > 0, "no answer was lost: the faults did not happen");
}
