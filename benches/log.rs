//! Log benchmark: raw SHA-256 of 65-byte inputs (the hashing limit), append
//! throughput with durability on, and inclusion-proof generation, each as a
//! ratio to the hashing limit. One run prints one table.
//!
//! `cargo bench --bench log` (full: 1,000,000 receipts). Quick run:
//! `RCPT_BENCH_N=100000 RCPT_BENCH_PROOFS=2000 cargo bench --bench log`.
//! `RCPT_BENCH_DIR` picks the file system (default: the system temp dir);
//! `RCPT_BENCH_BATCHES=100000` runs only the listed batch sizes;
//! `RCPT_BENCH_KEEP=1` keeps the logs (to measure their disk use).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use rcpt::keys::SigningKey;
use rcpt::log::{Log, LogWriter};
use sha2::{Digest, Sha256};
use std::time::Instant;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// SHA-256 over 65-byte inputs on one core: the cost of one node hash
/// (0x01 || left || right), and of one leaf hash of a 64-byte entry.
fn hashes_per_second() -> f64 {
    let n = 2_000_000u64;
    let mut input = [0u8; 65];
    let start = Instant::now();
    for i in 0..n {
        input[1..9].copy_from_slice(&i.to_le_bytes());
        let out = Sha256::digest(input);
        input[9] ^= out[0];
    }
    std::hint::black_box(input);
    n as f64 / start.elapsed().as_secs_f64()
}

/// Entry `i` of the benchmark: 64 bytes, so its leaf hash is over 65 bytes.
fn entry(i: u64) -> Vec<u8> {
    let mut e = vec![0u8; 64];
    e[..8].copy_from_slice(&i.to_le_bytes());
    e[8..16].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    e
}

/// Append `n` entries in batches of `batch` to a fresh log; receipts/s.
fn append_rate(root: &std::path::Path, n: u64, batch: u64) -> (f64, std::path::PathBuf) {
    let dir = root.join(format!("log-{n}-{batch}"));
    let key = SigningKey::from_bytes(&[1u8; 32]);
    Log::init(&dir, "bench.example/log", &key).unwrap();
    let mut w = LogWriter::open(&dir, &key, false).unwrap();
    let start = Instant::now();
    let mut next = 0;
    while next < n {
        let end = (next + batch).min(n);
        let entries: Vec<Vec<u8>> = (next..end).map(entry).collect();
        w.append(&entries).unwrap();
        next = end;
    }
    (n as f64 / start.elapsed().as_secs_f64(), dir)
}

/// Inclusion proofs per second at the latest size, spread over the log:
/// one at a time on one thread, and as one parallel batch on every core.
/// Each run opens the log afresh (cold tile cache).
fn proof_rates(dir: &std::path::Path, proofs: u64) -> (f64, f64) {
    let log = Log::open(dir).unwrap();
    let size = log.size();
    let indexes: Vec<u64> = (0..proofs)
        .map(|k| k.wrapping_mul(0x9E37_79B9_7F4A_7C15) % size)
        .collect();
    let start = Instant::now();
    for &i in &indexes {
        std::hint::black_box(log.inclusion_proof(i, size).unwrap());
    }
    let one = proofs as f64 / start.elapsed().as_secs_f64();
    let log = Log::open(dir).unwrap();
    let start = Instant::now();
    for p in log.inclusion_proofs(&indexes, size) {
        std::hint::black_box(p.unwrap());
    }
    (one, proofs as f64 / start.elapsed().as_secs_f64())
}

fn main() {
    let n = env_u64("RCPT_BENCH_N", 1_000_000);
    let proofs = env_u64("RCPT_BENCH_PROOFS", 20_000);
    let root = std::env::var_os("RCPT_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let tmp = tempfile::tempdir_in(root).unwrap();
    let h = hashes_per_second();
    // Appending costs one leaf hash and, amortised, one node hash per
    // receipt: the hashing limit is h / 2 receipts/s on one core.
    let limit = h / 2.0;
    println!("rcpt log benchmark: {n} receipts of 64 bytes, durability on");
    println!("{:<44} {:>14} {:>10}", "measure", "per second", "/ limit");
    println!(
        "{:<44} {:>14.0} {:>10}",
        "SHA-256 of 65-byte inputs (1 core)", h, ""
    );
    println!(
        "{:<44} {:>14.0} {:>10}",
        "hashing limit for appends (h/2)", limit, "1.000"
    );
    let batches: Vec<u64> = std::env::var("RCPT_BENCH_BATCHES")
        .ok()
        .map(|v| v.split(',').filter_map(|b| b.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 100_000]);
    let mut last_dir = None;
    for batch in batches {
        let (rate, dir) = append_rate(tmp.path(), n, batch);
        let label = format!("append, batches of {batch}");
        println!("{label:<44} {rate:>14.0} {:>10.3}", rate / limit);
        last_dir = Some(dir);
    }
    if let Some(dir) = last_dir {
        let (one, all) = proof_rates(&dir, proofs);
        let label = format!("inclusion proofs, {n}-entry log, 1 thread");
        println!("{label:<44} {one:>14.0} {:>10.5}", one / h);
        let label = format!("inclusion proofs, {n}-entry log, all cores");
        println!("{label:<44} {all:>14.0} {:>10.5}", all / h);
    }
    if std::env::var_os("RCPT_BENCH_KEEP").is_some() {
        println!("logs kept in {}", tmp.keep().display());
    }
}
