//! `rcpt log monitor` through the binary (issue #22, spec/monitor.md):
//!
//! - the first scan of a local log of RCPT_BENCH_N receipts (default
//!   1,000,000), every entry by the watched issuer (so every entry costs one
//!   strict Ed25519 verification and gives one `receipt.matched` event),
//!   against strict Ed25519 verifies/s on one core times the cores, measured
//!   in the same run; its peak RSS (GNU time);
//! - the same scan over HTTP from `rcpt log serve` on 127.0.0.1;
//! - a round with nothing new on that log;
//! - `rcpt verify` of RCPT_BENCH_BUNDLES bundles (default 2,000) with and
//!   without `--mirror` (the log directory as the mirror).
//!
//! `cargo bench --bench monitor`; quick: `RCPT_BENCH_N=100000 cargo bench
//! --bench monitor`. RCPT_BENCH_DIR keeps the log between runs (default: a
//! directory under the system temp dir, kept). Run it on an idle machine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use base64::Engine;
use rayon::prelude::*;
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::receipt::dsse::{Envelope, pae};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ORIGIN: &str = "bench.example/monitor";
const ISSUER: &str = "gate-bench";
/// First scans of the directory, each with its own measured limit.
const SCAN_RUNS: usize = 3;
/// Runs of each `verify`, alternating plain and `--mirror`.
const VERIFY_RUNS: usize = 7;

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn issuer() -> SigningKey {
    SigningKey::from_bytes(&[31u8; 32])
}

fn log_key() -> SigningKey {
    SigningKey::from_bytes(&[32u8; 32])
}

/// Strict Ed25519 verifies per second on one core, over 3 s.
fn ed25519_rate() -> f64 {
    use ed25519_dalek::Signer;
    let key = issuer();
    let signed: Vec<_> = (0..2000u32)
        .map(|i| pae(RECEIPT_PAYLOAD_TYPE, &i.to_be_bytes().repeat(100)))
        .map(|m| {
            let s = key.sign(&m);
            (m, s)
        })
        .collect();
    let vk = key.verifying_key();
    let start = Instant::now();
    let mut n = 0usize;
    while start.elapsed() < Duration::from_secs(3) {
        n += signed
            .iter()
            .filter(|(m, s)| vk.verify_strict(m, s).is_ok())
            .count();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// Entry `i`: a valid receipt of the watched issuer.
fn entry(i: u64) -> Vec<u8> {
    let json = format!(
        r#"{{"version":1,"issuer":"{ISSUER}","issued_at":{i},"substrate":"git",
        "change_id":"blake3:{i:064x}","inverse_delta_id":null,"reversibility":null,
        "read_set":[],"precondition":null,"policy_id":"sha256:{h}",
        "verdict":{{"deny":{{"reasons":["r"]}}}},"applied":false,"replay":{{"class":"unknown"}}}}"#,
        h = "ab".repeat(32)
    );
    let payload = rcpt::receipt::payload_from_json(json.as_bytes()).unwrap();
    Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload.bytes, &issuer()).to_entry()
}

/// The log of `n` receipts under `root` (made once, kept).
fn log_of(root: &Path, n: u64) -> PathBuf {
    let dir = root.join(format!("log-{n}"));
    if dir.join("checkpoint").exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    rcpt::log::Log::init(&dir, ORIGIN, &log_key()).unwrap();
    let mut w = rcpt::log::LogWriter::open(&dir, &log_key(), false).unwrap();
    let batch = 100_000u64;
    let mut next = 0;
    while next < n {
        let end = (next + batch).min(n);
        let entries: Vec<Vec<u8>> = (next..end).into_par_iter().map(entry).collect();
        w.append(&entries).unwrap();
        next = end;
    }
    dir
}

/// Run `args` under GNU time: (seconds, peak RSS in KiB if known).
fn timed(args: &[&str]) -> (f64, Option<u64>) {
    let bin = env!("CARGO_BIN_EXE_rcpt");
    let time = Path::new("/usr/bin/time");
    let report = std::env::temp_dir().join(format!("rcpt-bench-time-{}", std::process::id()));
    let mut cmd = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-v").arg("-o").arg(&report).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    let start = Instant::now();
    let st = cmd
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert!(st.code().is_some_and(|c| c <= 1), "{args:?}: {st:?}");
    let rss = std::fs::read_to_string(&report).ok().and_then(|t| {
        t.lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Maximum resident set size (kbytes): ")
            })
            .and_then(|v| v.trim().parse().ok())
    });
    (secs, rss)
}

fn rss_text(kib: Option<u64>) -> String {
    kib.map_or("n/a".into(), |k| format!("{:.0} MiB", k as f64 / 1024.0))
}

fn main() {
    let n = env_u64("RCPT_BENCH_N", 1_000_000);
    let bundles = env_u64("RCPT_BENCH_BUNDLES", 2_000).min(n);
    let root = std::env::var_os("RCPT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("rcpt-bench-monitor"));
    std::fs::create_dir_all(&root).unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let log = log_of(&root, n);
    let vkey = NoteVerifier::new(ORIGIN, log_key().verifying_key())
        .unwrap()
        .to_string();
    let pubkey =
        base64::engine::general_purpose::STANDARD.encode(issuer().verifying_key().as_bytes());
    let watch = root.join("watch.json");
    std::fs::write(
        &watch,
        format!(r#"{{"issuers":[{{"name":"{ISSUER}","keys":["{pubkey}"]}}]}}"#),
    )
    .unwrap();
    let trust = root.join("trust.json");
    std::fs::write(
        &trust,
        format!(
            r#"{{"issuers":[{{"name":"{ISSUER}","public_key":"{pubkey}"}}],"logs":[{{"verifier_key":"{vkey}"}}]}}"#
        ),
    )
    .unwrap();
    let state = |name: &str| {
        let p = root.join(name);
        let _ = std::fs::remove_dir_all(&p);
        p.to_str().unwrap().to_string()
    };
    let (w, l) = (watch.to_str().unwrap(), log.to_str().unwrap());
    let local_state = state("state-local");
    let scan = [
        "log",
        "monitor",
        l,
        "--state",
        &local_state,
        "--log-key",
        &vkey,
        "--watch",
        w,
    ];
    // SCAN_RUNS first scans, each after its own measurement of the limit
    // (the machine's rate moves between minutes): the run of median ratio.
    let mut runs: Vec<(f64, f64, Option<u64>)> = (0..SCAN_RUNS)
        .map(|_| {
            let limit = ed25519_rate() * cores as f64;
            let _ = std::fs::remove_dir_all(&local_state);
            let (secs, rss) = timed(&scan);
            (limit, secs, rss)
        })
        .collect();
    runs.sort_by(|a, b| (n as f64 / a.1 / a.0).total_cmp(&(n as f64 / b.1 / b.0)));
    let (limit, local, local_rss) = runs[runs.len() / 2];
    let (idle, _) = timed(&scan);

    let key_file = root.join("log.key");
    std::fs::write(&key_file, rcpt::keys::signing_key_to_pem(&log_key())).unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_rcpt"))
        .args(["log", "serve", l, "--listen", "127.0.0.1:0", "--trust"])
        .arg(&trust)
        .arg("--key")
        .arg(&key_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = format!(
        "http://{}",
        line.trim().strip_prefix("listening on ").unwrap()
    );
    let http_state = state("state-http");
    let (http, http_rss) = timed(&[
        "log",
        "monitor",
        &url,
        "--state",
        &http_state,
        "--log-key",
        &vkey,
        "--watch",
        w,
    ]);
    let _ = serve.kill();
    let _ = serve.wait();

    let out = root.join("bundles");
    let _ = std::fs::remove_dir_all(&out);
    let range = format!("0..{bundles}");
    timed(&[
        "log",
        "prove",
        l,
        "--range",
        &range,
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    let files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path().to_str().unwrap().to_string())
        .collect();
    let mut verify: Vec<&str> = vec!["verify", "--trust", trust.to_str().unwrap()];
    verify.extend(files.iter().map(String::as_str));
    let plain_args = verify.clone();
    verify.extend(["--mirror", l]);
    // A run takes well under a second: alternate the two, keep each one's
    // median of VERIFY_RUNS.
    let (mut plain, mut mirror) = (Vec::new(), Vec::new());
    for _ in 0..VERIFY_RUNS {
        plain.push(timed(&plain_args).0);
        mirror.push(timed(&verify).0);
    }
    let (plain, mirror) = (median(&mut plain), median(&mut mirror));

    println!("| measure | value | limit or reference | ratio |");
    println!("|---|---|---|---|");
    println!(
        "| first scan, directory, {n} entries (median of {SCAN_RUNS}) | {:.0} entries/s, peak RSS {} | {:.0} verifies/s (Ed25519 strict, {cores} cores) | {:.2} |",
        n as f64 / local,
        rss_text(local_rss),
        limit,
        n as f64 / local / limit
    );
    println!(
        "| first scan, HTTP from log serve | {:.0} entries/s, peak RSS {} | the directory scan | {:.2}x slower |",
        n as f64 / http,
        rss_text(http_rss),
        http / local
    );
    println!(
        "| round with nothing new (process included) | {:.0} ms | 50 ms + a checkpoint read | |",
        idle * 1000.0
    );
    println!(
        "| verify {bundles} bundles (median of {VERIFY_RUNS}) | {:.0} bundles/s plain, {:.0} with --mirror | plain | {:.2}x |",
        bundles as f64 / plain,
        bundles as f64 / mirror,
        mirror / plain
    );
}
