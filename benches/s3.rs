//! The log on object storage next to the log in a directory: appends/s
//! (library `LogWriter`, batches of several sizes) with the S3 requests
//! each batch costs (counted in our client), and submissions/s through
//! `rcpt log serve` (the real binary, concurrent keep-alive clients on
//! loopback). One table; spec/storage.md "Throughput" holds a run and what
//! bounds it.
//!
//! `cargo bench --bench s3` with an S3 server's settings in the
//! environment (`. /tmp/rcpt-radosgw/env` after `.ci/radosgw/start.sh`):
//! `RCPT_S3_ENDPOINT`, `RCPT_S3_BUCKET`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`. Without `RCPT_S3_ENDPOINT` it prints why and
//! measures nothing. Settings: `RCPT_BENCH_BATCHES` (`1,16,256,4096`),
//! `RCPT_BENCH_ENTRIES` (entries appended per batch size, at most; 20000),
//! `RCPT_BENCH_MAX_BATCHES` (batches per size, at most; 200),
//! `RCPT_BENCH_CLIENTS` (256), `RCPT_BENCH_SECONDS` (8),
//! `RCPT_BENCH_WAIT` (`--batch-wait`, 50ms), `RCPT_BENCH_DIR` (the
//! directory log's file system; default the system temp dir).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use bytes::Bytes;
use hyper::Method;
use rayon::prelude::*;
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::keys::SigningKey;
use rcpt::log::{Log, LogWriter};
use rcpt::net::client::Client;
use rcpt::receipt::dsse::Envelope;
use rcpt::storage::Store;
use rcpt::storage::posix::PosixStore;
use rcpt::storage::s3::{BlockingClient, LeaseConfig, Location, S3Store, Settings};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const ISSUER: &str = "bench-gate";
const ORIGIN: &str = "bench.example/s3";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Entry `i`: 64 bytes, distinct per `i`.
fn entry(i: u64) -> Vec<u8> {
    let mut e = vec![0u8; 64];
    e[..8].copy_from_slice(&i.to_le_bytes());
    e[8..16].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    e
}

/// Distinct signed receipt envelopes `0..n` (made before timing starts).
fn envelopes(n: u64) -> Vec<Bytes> {
    let key = SigningKey::from_bytes(&[31u8; 32]);
    (0..n)
        .into_par_iter()
        .map(|n| {
            let json = format!(
                r#"{{"version":1,"issuer":"{ISSUER}","issued_at":{n},"substrate":"git",
                "change_id":"blake3:{h}","inverse_delta_id":null,"reversibility":null,"read_set":[],
                "precondition":null,"policy_id":"sha256:{h}","verdict":{{"deny":{{"reasons":["r"]}}}},
                "applied":false,"replay":{{"class":"unknown"}}}}"#,
                h = "ab".repeat(32)
            );
            let payload = rcpt::receipt::payload_from_json(json.as_bytes()).unwrap();
            Bytes::from(Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload.bytes, &key).to_json())
        })
        .collect()
}

/// Where the two logs live.
struct Places {
    settings: Settings,
    bucket: String,
    run: String,
    dir: tempfile::TempDir,
}

impl Places {
    fn location(&self, name: &str) -> Location {
        Location::parse(&format!("s3://{}/bench/{}/{name}", self.bucket, self.run)).unwrap()
    }
}

/// Appends of `batch` entries to a fresh log in `store`: (appends/s,
/// batches, S3 requests per batch when `s3` counts them).
fn appends(store: Arc<dyn Store>, s3: Option<&BlockingClient>, batch: u64) -> (f64, u64, f64) {
    let key = SigningKey::from_bytes(&[1u8; 32]);
    if s3.is_some() {
        Log::init_store(Arc::clone(&store), ORIGIN, &key, None, None).unwrap();
    }
    let mut w = LogWriter::open_store(store, &key, false).unwrap();
    let batches = (env_u64("RCPT_BENCH_ENTRIES", 20_000) / batch)
        .clamp(1, env_u64("RCPT_BENCH_MAX_BATCHES", 200));
    let sent0 = s3.map_or(0, |c| c.client().requests_sent());
    let start = Instant::now();
    for b in 0..batches {
        let entries: Vec<Vec<u8>> = (b * batch..(b + 1) * batch).map(entry).collect();
        w.append(&entries).unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let sent = s3.map_or(0, |c| c.client().requests_sent()) - sent0;
    (
        (batches * batch) as f64 / secs,
        batches,
        sent as f64 / batches as f64,
    )
}

/// `rcpt log serve LOG` under `clients` concurrent submitters for
/// `seconds`: (submissions/s after a one-second warm-up, batches, entries
/// per batch).
fn submissions(
    p: &Places,
    log: &str,
    endpoint: &[&str],
    receipts: &Arc<Vec<Bytes>>,
) -> (f64, usize, f64) {
    let bin = env!("CARGO_BIN_EXE_rcpt");
    let root = p.dir.path();
    let key_file = root.join("log.key");
    std::fs::write(
        &key_file,
        rcpt::keys::signing_key_to_pem(&SigningKey::from_bytes(&[32u8; 32])),
    )
    .unwrap();
    let init = Command::new(bin)
        .args(["log", "init", log])
        .args(endpoint)
        .args(["--origin", ORIGIN, "--key"])
        .arg(&key_file)
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    use base64::Engine;
    let pubkey = base64::engine::general_purpose::STANDARD.encode(
        SigningKey::from_bytes(&[31u8; 32])
            .verifying_key()
            .as_bytes(),
    );
    let trust = root.join("trust.json");
    std::fs::write(
        &trust,
        format!(r#"{{"issuers":[{{"name":"{ISSUER}","public_key":"{pubkey}"}}]}}"#),
    )
    .unwrap();
    let service_log = root.join(format!("service-{}.log", log.len()));
    let wait = std::env::var("RCPT_BENCH_WAIT").unwrap_or_else(|_| "50ms".into());
    let mut server = Command::new(bin)
        .args(["log", "serve", log])
        .args(endpoint)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--batch-wait",
            &wait,
            "--batch-max",
            "1024",
        ])
        .args(["--key"])
        .arg(&key_file)
        .arg("--trust")
        .arg(&trust)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&service_log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = format!(
        "http://{}",
        line.trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("serve did not start: {line:?}"))
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let warmup = Duration::from_secs(1);
    let deadline = start + Duration::from_secs(env_u64("RCPT_BENCH_SECONDS", 8));
    let counted = rt.block_on(async {
        let client = Client::new(&url).unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..env_u64("RCPT_BENCH_CLIENTS", 256) {
            let (client, next, receipts) =
                (client.clone(), Arc::clone(&next), Arc::clone(receipts));
            tasks.spawn(async move {
                let mut counted = 0usize;
                while Instant::now() < deadline {
                    let Some(body) = receipts.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    let t = Instant::now();
                    let a = client
                        .send(Method::POST, "add", body.clone(), None, 4096)
                        .await;
                    assert_eq!(a.unwrap().status.as_u16(), 200);
                    if t >= start + warmup {
                        counted += 1;
                    }
                }
                counted
            });
        }
        let mut counted = 0;
        while let Some(c) = tasks.join_next().await {
            counted += c.unwrap();
        }
        counted
    });
    let secs = (start.elapsed() - warmup).as_secs_f64();
    let _ = Command::new("kill")
        .args(["-s", "TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
    let text = std::fs::read_to_string(&service_log).unwrap_or_default();
    let (mut batches, mut entries) = (0usize, 0u64);
    for l in text.lines().filter(|l| l.contains(r#""event":"batch""#)) {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        batches += 1;
        entries += v["entries"].as_u64().unwrap_or(0);
    }
    (
        counted as f64 / secs,
        batches,
        entries as f64 / batches.max(1) as f64,
    )
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs nothing here.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let Some(endpoint) = var("RCPT_S3_ENDPOINT") else {
        println!(
            "rcpt S3 benchmark skipped: RCPT_S3_ENDPOINT is not set (start radosgw with \
             .ci/radosgw/start.sh, then `. /tmp/rcpt-radosgw/env`)"
        );
        return;
    };
    let bucket = var("RCPT_S3_BUCKET").expect("RCPT_S3_BUCKET");
    let settings = Settings::from_env(Some(&endpoint)).unwrap();
    let root = std::env::var_os("RCPT_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let p = Places {
        settings,
        bucket,
        run: format!("{}-{nanos}", std::process::id()),
        dir: tempfile::tempdir_in(root).unwrap(),
    };
    let batches: Vec<u64> = var("RCPT_BENCH_BATCHES")
        .map(|v| v.split(',').filter_map(|b| b.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 16, 256, 4096]);
    println!(
        "rcpt S3 benchmark: {endpoint} next to a directory ({})",
        p.dir.path().display()
    );
    println!(
        "{:<40} {:>12} {:>12} {:>14}",
        "measure", "directory/s", "S3/s", "S3 requests"
    );
    for batch in batches {
        let path = p.dir.path().join(format!("log-{batch}"));
        Log::init(&path, ORIGIN, &SigningKey::from_bytes(&[1u8; 32])).unwrap();
        let dir: Arc<dyn Store> = Arc::new(PosixStore::new(&path));
        let (posix, _, _) = appends(dir, None, batch);
        let location = p.location(&format!("append-{batch}"));
        let client = Arc::new(BlockingClient::new(p.settings.clone(), &location).unwrap());
        let store: Arc<dyn Store> = Arc::new(S3Store::new(
            Arc::clone(&client),
            location,
            LeaseConfig::new(Duration::from_secs(10)).unwrap(),
        ));
        let (s3, count, per_batch) = appends(Arc::clone(&store), Some(&client), batch);
        drop(store);
        println!(
            "{:<40} {posix:>12.0} {s3:>12.0} {:>14}",
            format!("append, batches of {batch} ({count} batches)"),
            format!("{per_batch:.1}/batch")
        );
    }
    let seconds = env_u64("RCPT_BENCH_SECONDS", 8);
    let receipts = Arc::new(envelopes(env_u64(
        "RCPT_BENCH_RECEIPTS",
        40_000 * seconds.max(1),
    )));
    let dir_log = p.dir.path().join("served");
    let (posix, pb, pe) = submissions(&p, dir_log.to_str().unwrap(), &[], &receipts);
    let s3_log = p.location("served").to_string();
    let (s3, sb, se) = submissions(&p, &s3_log, &["--endpoint", &endpoint], &receipts);
    println!(
        "{:<40} {posix:>12.0} {s3:>12.0} {:>14}",
        format!("serve, {} clients", env_u64("RCPT_BENCH_CLIENTS", 256)),
        "see appends"
    );
    println!("  serve batches: directory {pb} of {pe:.0} entries on average, S3 {sb} of {se:.0}");
}
