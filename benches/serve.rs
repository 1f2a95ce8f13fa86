//! Load benchmark of `rcpt log serve`: N concurrent keep-alive clients on
//! loopback submit distinct, pre-signed receipts for a fixed time; prints
//! submissions/s, latency p50/p99/max, and the server's peak RSS, for each
//! `--batch-wait` asked for. The server is the real `rcpt` binary in its
//! own process (request logs written to a file), the clients one tokio
//! runtime in this process: both share the machine's cores.
//!
//! The load client is hyper's (the crate's own pooled keep-alive client,
//! `rcpt::net::client::Client`): each of N tasks sends one `POST /add` at a
//! time and waits for its answer, so N is the number of connections.
//!
//! `cargo bench --bench serve`. Settings (environment):
//! `RCPT_BENCH_CLIENTS` (connections, a list: default `64,256,2048`),
//! `RCPT_BENCH_SECONDS` (10), `RCPT_BENCH_WAITS` (`50ms`),
//! `RCPT_BENCH_BATCH_MAX` (default: the server's own default),
//! `RCPT_BENCH_QUEUE_MAX` (65536), `RCPT_BENCH_RCPT` (the server binary:
//! default this build's), `RCPT_BENCH_DIR` (the file system of the
//! log; default the system temp dir), `RCPT_BENCH_WARMUP_MS` (1000: requests
//! started in the first second, while connections open and the first
//! batches close, are not counted). It also prints the CPU time the server
//! and the clients spent per submission, which does not depend on how busy
//! the machine is: 2 cores / (server + client CPU per submission) is the
//! rate two idle cores would reach. Next to it, the CPU of one strict
//! Ed25519 verification measured in this process (admission's signature
//! check: one per submission) and its share of the server's CPU per
//! submission; the rest is HTTP, JSON and DSSE parsing, the receipt's
//! checks, the batch's durable append and the answer.
//!
//! `RCPT_BENCH_SCRAPE` (default `0,100`): for each batch-wait and
//! connection count, one run per value, in milliseconds between two `GET
//! /metrics` of a scraper running beside the clients (`0`: no scraper).
//! Comparing the rows shows what scraping costs under load (submissions/s,
//! server CPU per submission); the scrape column gives the scrapes made and
//! their latency p50/max.
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
use rcpt::net::client::Client;
use rcpt::receipt::dsse::Envelope;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const ISSUER: &str = "bench-gate";

/// Distinct signed receipt envelopes `from..to` (made before timing starts).
fn envelopes(from: u64, to: u64) -> Vec<Bytes> {
    let key = SigningKey::from_bytes(&[31u8; 32]);
    (from..to)
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

struct Run {
    wait: String,
    sent: usize,
    secs: f64,
    p50: Duration,
    p99: Duration,
    max: Duration,
    rss_kb: u64,
    refused: usize,
    server_cpu: f64,
    client_cpu: f64,
    /// Every submission answered 200, warm-up included (for CPU per submission).
    answered: usize,
    batches: usize,
    append_p50: f64,
    append_p99: f64,
    /// The server's context switches over the run.
    switches: u64,
    /// Milliseconds between scrapes (0: none), scrapes made, their latencies.
    scrape_ms: u64,
    scrapes: Vec<Duration>,
}

/// `GET /metrics` every `every` until `deadline`; each answer's latency.
async fn scraper(client: Client, every: Duration, deadline: Instant) -> Vec<Duration> {
    let mut out = Vec::new();
    while Instant::now() + every < deadline {
        tokio::time::sleep(every).await;
        let t = Instant::now();
        let a = client
            .send(Method::GET, "metrics", Bytes::new(), None, 1 << 20)
            .await
            .unwrap();
        assert_eq!(a.status.as_u16(), 200);
        assert!(a.body.ends_with(b"# EOF\n"));
        out.push(t.elapsed());
    }
    out
}

/// The service log's batch lines: (count, entries per batch, append ms p50, p99).
fn batch_stats(log: &Path) -> (usize, f64, f64, f64) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut ms = Vec::new();
    let mut entries = 0u64;
    for line in text.lines().filter(|l| l.contains(r#""event":"batch""#)) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        ms.push(v["append_ms"].as_f64().unwrap());
        entries += v["entries"].as_u64().unwrap();
    }
    ms.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        ms.get(((ms.len() as f64 * p) as usize).min(ms.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    (
        ms.len(),
        entries as f64 / ms.len().max(1) as f64,
        pct(0.5),
        pct(0.99),
    )
}

/// CPU time (user + system) a process has used so far, from
/// `/proc/PID/stat` (clock ticks of 1/100 s: Linux's USER_HZ on x86).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // utime and stime are fields 14 and 15 of the line: 11 and 12 after ')'.
    (f.get(10).copied().unwrap_or(0.0) + f.get(11).copied().unwrap_or(0.0)) / 100.0
}

/// Context switches of a process so far (voluntary + involuntary, summed
/// over its threads: `/proc/PID/task/*/status`).
fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .map(|t| std::fs::read_to_string(t.path().join("status")).unwrap_or_default())
        .flat_map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Peak resident set of a process (`VmHWM`), KiB.
fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU seconds of one strict Ed25519 verification of a receipt-sized
/// message, on one core of this process (the admission check's cost).
fn strict_verify_cpu() -> f64 {
    use ed25519_dalek::Signer;
    let key = SigningKey::from_bytes(&[31u8; 32]);
    let signed: Vec<_> = (0..2000u32)
        .map(|i| {
            let m = rcpt::receipt::dsse::pae(RECEIPT_PAYLOAD_TYPE, &i.to_be_bytes().repeat(90));
            let s = key.sign(&m);
            (m, s)
        })
        .collect();
    let vk = key.verifying_key();
    let cpu0 = thread_cpu_seconds();
    let mut n = 0usize;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        n += signed
            .iter()
            .filter(|(m, s)| vk.verify_strict(m, s).is_ok())
            .count();
    }
    (thread_cpu_seconds() - cpu0) / n.max(1) as f64
}

/// CPU time of the calling thread (`/proc/thread-self/stat`).
fn thread_cpu_seconds() -> f64 {
    cpu_seconds("thread-self")
}

fn run(
    root: &Path,
    (wait, clients, scrape_ms): (&str, u64, u64),
    receipts: Arc<Vec<Bytes>>,
    seconds: u64,
) -> Run {
    let tag = format!("{wait}-{clients}-{scrape_ms}");
    let dir = root.join(format!("log-{tag}"));
    let log_key = SigningKey::from_bytes(&[32u8; 32]);
    let key_file = root.join("log.key");
    std::fs::write(&key_file, rcpt::keys::signing_key_to_pem(&log_key)).unwrap();
    // RCPT_BENCH_RCPT: another binary for the server (an older build, to
    // compare on the same inputs); default this build's.
    let bin =
        std::env::var("RCPT_BENCH_RCPT").unwrap_or_else(|_| env!("CARGO_BIN_EXE_rcpt").into());
    let bin = bin.as_str();
    assert!(
        Command::new(bin)
            .args(["log", "init"])
            .arg(&dir)
            .args(["--origin", "bench.example/served", "--key"])
            .arg(&key_file)
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success()
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
    let service_log = root.join(format!("service-{tag}.log"));
    let mut server = Command::new(bin);
    server
        .args(["log", "serve"])
        .arg(&dir)
        .args(["--listen", "127.0.0.1:0", "--trust"])
        .arg(&trust)
        .args(["--batch-wait", wait])
        .args([
            "--queue-max",
            &env_u64("RCPT_BENCH_QUEUE_MAX", 65_536).to_string(),
        ]);
    if let Ok(max) = std::env::var("RCPT_BENCH_BATCH_MAX") {
        server.args(["--batch-max", &max]);
    }
    let mut server = server
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&service_log).unwrap())
        .spawn()
        .unwrap();
    // For a profiler to attach to (`perf record -p PID`).
    eprintln!("server pid {} ({bin})", server.id());
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = format!(
        "http://{}",
        line.trim().strip_prefix("listening on ").unwrap()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let server_pid = server.id().to_string();
    let (server_cpu0, client_cpu0) = (cpu_seconds(&server_pid), cpu_seconds("self"));
    let switches0 = context_switches(server.id());
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let start = Instant::now();
    let warmup = Duration::from_millis(env_u64("RCPT_BENCH_WARMUP_MS", 1000));
    let counted_from = start + warmup;
    let (mut lat, refused, answered, mut scrapes) = rt.block_on(async {
        let client = Client::new(&url).unwrap();
        let scraping = (scrape_ms > 0).then(|| {
            let every = Duration::from_millis(scrape_ms);
            tokio::spawn(scraper(Client::new(&url).unwrap(), every, deadline))
        });
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..clients {
            let (client, next, receipts) =
                (client.clone(), Arc::clone(&next), Arc::clone(&receipts));
            tasks.spawn(async move {
                let (mut lat, mut refused, mut answered) = (Vec::new(), 0usize, 0usize);
                while Instant::now() < deadline {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(body) = receipts.get(i) else { break };
                    let t = Instant::now();
                    let a = client
                        .send(Method::POST, "add", body.clone(), None, 4096)
                        .await;
                    match a {
                        // Only requests started after the warm-up count.
                        Ok(a) if a.status.as_u16() == 200 => {
                            answered += 1;
                            if t >= counted_from {
                                lat.push(t.elapsed());
                            }
                        }
                        _ => refused += 1,
                    }
                }
                (lat, refused, answered)
            });
        }
        let (mut all, mut refused, mut answered) = (Vec::new(), 0, 0);
        while let Some(r) = tasks.join_next().await {
            let (l, f, a) = r.unwrap();
            all.extend(l);
            refused += f;
            answered += a;
        }
        let scrapes = match scraping {
            Some(s) => s.await.unwrap(),
            None => Vec::new(),
        };
        (all, refused, answered, scrapes)
    });
    scrapes.sort_unstable();
    // The rate counts the requests started after the warm-up (connections
    // opened, first batches closed) over the time after it.
    let secs = (start.elapsed() - warmup).as_secs_f64();
    let server_cpu = cpu_seconds(&server_pid) - server_cpu0;
    let switches = context_switches(server.id()).saturating_sub(switches0);
    let client_cpu = cpu_seconds("self") - client_cpu0;
    let rss_kb = peak_rss_kb(server.id());
    assert!(
        Command::new("kill")
            .args(["-s", "TERM", &server.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let _ = server.wait();
    let (batches, per_batch, append_p50, append_p99) = batch_stats(&service_log);
    eprintln!("{wait}, {clients}: {batches} batches, {per_batch:.0} entries each on average");
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Run {
        wait: wait.to_string(),
        sent: lat.len(),
        secs,
        p50: pct(0.50),
        p99: pct(0.99),
        max: lat.last().copied().unwrap_or_default(),
        rss_kb,
        refused,
        server_cpu,
        client_cpu,
        answered,
        batches,
        append_p50,
        append_p99,
        switches,
        scrape_ms,
        scrapes,
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs nothing here.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let clients = std::env::var("RCPT_BENCH_CLIENTS").unwrap_or_else(|_| "64,256,2048".into());
    let seconds = env_u64("RCPT_BENCH_SECONDS", 10);
    let waits = std::env::var("RCPT_BENCH_WAITS").unwrap_or_else(|_| "50ms".to_string());
    let scrapes = std::env::var("RCPT_BENCH_SCRAPE").unwrap_or_else(|_| "0,100".to_string());
    let root = match std::env::var("RCPT_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    };
    // Enough distinct receipts for 40,000/s over the whole run.
    let count = 40_000 * seconds;
    let t = Instant::now();
    let receipts = Arc::new(envelopes(0, count));
    eprintln!(
        "signed {count} receipts in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let verify_cpu = strict_verify_cpu();
    eprintln!(
        "one strict Ed25519 verification: {:.1} µs of CPU",
        verify_cpu * 1e6
    );
    println!(
        "| batch-wait | connections | submissions/s | p50 | p99 | max | refused | server peak RSS \
         | server CPU/submission | of it, one strict verify | server context switches/submission | client CPU/submission | batches | append p50/p99 | scrape every | scrapes, p50/max |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut runs = Vec::new();
    for w in waits.split(',') {
        for c in clients.split(',') {
            for m in scrapes.split(',') {
                runs.push((
                    w,
                    c.trim().parse::<u64>().unwrap(),
                    m.trim().parse::<u64>().unwrap(),
                ));
            }
        }
    }
    for (wait, clients, scrape_ms) in runs {
        let r = run(
            root.path(),
            (wait, clients, scrape_ms),
            Arc::clone(&receipts),
            seconds,
        );
        let server_per = r.server_cpu / r.answered.max(1) as f64;
        let scraped = match (r.scrapes.get(r.scrapes.len() / 2), r.scrapes.last()) {
            (Some(p50), Some(max)) => format!(
                "{}, {:.2}/{:.2} ms",
                r.scrapes.len(),
                p50.as_secs_f64() * 1e3,
                max.as_secs_f64() * 1e3
            ),
            _ => "none".to_string(),
        };
        let every = match r.scrape_ms {
            0 => "off".to_string(),
            ms => format!("{ms} ms"),
        };
        println!(
            "| {} | {clients} | {:.0} | {:.1} ms | {:.1} ms | {:.1} ms | {} | {} MB | {:.0} µs | {:.0} µs ({:.0}%) | {:.2} | {:.0} µs | {} | {:.1}/{:.1} ms | {every} | {scraped} |",
            r.wait,
            r.sent as f64 / r.secs,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
            r.max.as_secs_f64() * 1e3,
            r.refused,
            r.rss_kb / 1024,
            server_per * 1e6,
            verify_cpu * 1e6,
            verify_cpu / server_per.max(f64::MIN_POSITIVE) * 100.0,
            r.switches as f64 / r.answered.max(1) as f64,
            r.client_cpu * 1e6 / r.answered.max(1) as f64,
            r.batches,
            r.append_p50,
            r.append_p99,
        );
    }
}
