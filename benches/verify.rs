//! Verification throughput against the physical limit of this machine.
//!
//! `cargo bench --bench verify` prints, in one run:
//! - strict Ed25519 verifications per second on one core (the limit), and
//!   times the cores rayon uses;
//! - `rcpt verify` bundles per second over RCPT_BENCH_BUNDLES bundles
//!   (default 100,000) proven from a log of RCPT_BENCH_LOG entries (default
//!   1,000,000), through the same code path as the CLI (read file, parse,
//!   every check, in parallel), and the ratio of the two.
//!
//! Smaller runs: `RCPT_BENCH_LOG=100000 RCPT_BENCH_BUNDLES=10000 cargo bench --bench verify`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rayon::prelude::*;
use rcpt::bundle::{Bundle, LogProof};
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::log::{Log, LogWriter};
use rcpt::receipt::canonical::{self, json};
use rcpt::receipt::dsse::{Envelope, pae};
use rcpt::trust::Trust;
use rcpt::verify::{Outcome, Verifier};
use std::time::{Duration, Instant};

/// Read a size from the environment.
fn env_size(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Distinct PAE messages the size of a receipt's, each signed by `key`.
fn signed_messages(key: &SigningKey, n: u32) -> Vec<(Vec<u8>, ed25519_dalek::Signature)> {
    use ed25519_dalek::Signer;
    (0..n)
        .map(|i| pae(RECEIPT_PAYLOAD_TYPE, &i.to_be_bytes().repeat(150)))
        .map(|m| {
            let sig = key.sign(&m);
            (m, sig)
        })
        .collect()
}

/// Strict Ed25519 verifies per second for 3 s, `parallel` on every rayon
/// thread or on one.
fn ed25519_rate(key: &SigningKey, parallel: bool) -> f64 {
    let signed = signed_messages(key, 4000);
    let vk = key.verifying_key();
    let ok = |(m, s): &(Vec<u8>, ed25519_dalek::Signature)| vk.verify_strict(m, s).is_ok();
    let start = Instant::now();
    let mut n = 0usize;
    while start.elapsed() < Duration::from_secs(3) {
        let verified = if parallel {
            signed.par_iter().filter(|x| ok(x)).count()
        } else {
            signed.iter().filter(|x| ok(x)).count()
        };
        assert_eq!(verified, signed.len(), "every signature verifies");
        n += verified;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// A valid receipt payload, distinct per `i`.
fn payload(i: u64) -> Vec<u8> {
    let d = |s: String| rcpt::digest::Digest::blake3(s.as_bytes()).to_string();
    let j = serde_json::json!({
        "version": 1, "issuer": "bench", "issued_at": 1_790_000_000u64 + i, "substrate": "git",
        "change_id": d(format!("c{i}")), "inverse_delta_id": d(format!("i{i}")), "reversibility": true,
        "read_set": [{"resource": "a", "digest": d(format!("r{i}"))}], "precondition": null,
        "policy_id": d("p".into()), "verdict": {"admit": {"proof": d(format!("p{i}"))}},
        "applied": true, "replay": {"class": "deterministic_replay"}
    });
    let value = json::from_json(&serde_json::to_vec(&j).unwrap()).unwrap();
    canonical::dagcbor::encode(&value)
}

fn main() {
    let log_size = env_size("RCPT_BENCH_LOG", 1_000_000);
    let bundles = env_size("RCPT_BENCH_BUNDLES", 100_000).min(log_size);
    let threads = rayon::current_num_threads();
    let issuer = SigningKey::from_bytes(&[1u8; 32]);
    let log_key = SigningKey::from_bytes(&[2u8; 32]);

    let limit = ed25519_rate(&issuer, false);
    println!("ed25519 verify_strict, 1 core:        {limit:>12.0} /s");
    println!(
        "  x {threads} cores (the limit):            {:>12.0} /s",
        limit * threads as f64
    );
    let parallel = ed25519_rate(&issuer, true);
    println!(
        "ed25519 verify_strict, {threads} threads at once: {parallel:>8.0} /s (how the cores scale)"
    );

    // Bundles are built once per directory: RCPT_BENCH_DIR keeps them between runs.
    let kept = std::env::var_os("RCPT_BENCH_DIR").map(std::path::PathBuf::from);
    let tmp = tempfile::tempdir().unwrap();
    let dir = kept.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let marker = dir.join(format!("built-{log_size}-{bundles}"));
    if !marker.exists() {
        build(&dir, log_size, bundles, &issuer, &log_key);
        std::fs::write(&marker, b"").unwrap();
    }
    let bundle_dir = dir.join("bundles");
    let mut paths: Vec<_> = std::fs::read_dir(&bundle_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let origin = "bench.example/log";
    let mut trust = Trust::default();
    trust.add_issuer("bench", issuer.verifying_key());
    trust.add_log(NoteVerifier::new(origin, log_key.verifying_key()).unwrap());
    let verifier = Verifier::new(trust, None).unwrap();
    let start = Instant::now();
    let verified = paths
        .par_iter()
        .filter(|p| verifier.verify_file(p).outcome() == Outcome::Verified)
        .count();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(verified, paths.len(), "every bundle must verify");
    let rate = paths.len() as f64 / secs;
    println!(
        "rcpt verify, {} bundles from a log of {log_size}: {rate:>12.0} /s ({secs:.2} s)",
        paths.len()
    );
    println!(
        "ratio to the limit (ed25519/s/core x {threads}):  {:>12.3}",
        rate / (limit * threads as f64)
    );
}

/// Build a log of `log_size` entries in `dir/log`, every (log_size / bundles)-th
/// a real envelope, and write one bundle per real envelope to `dir/bundles`.
fn build(
    dir: &std::path::Path,
    log_size: u64,
    bundles: u64,
    issuer: &SigningKey,
    log_key: &SigningKey,
) {
    let log_dir = dir.join("log");
    // A directory built for other sizes is rebuilt from scratch.
    let _ = std::fs::remove_dir_all(&log_dir);
    let _ = std::fs::remove_dir_all(dir.join("bundles"));
    Log::init(&log_dir, "bench.example/log", log_key).unwrap();
    let mut writer = LogWriter::open(&log_dir, log_key, false).unwrap();
    let stride = log_size / bundles.max(1);
    let start = Instant::now();
    let mut real = Vec::new();
    let batch = 100_000u64;
    for first in (0..log_size).step_by(batch as usize) {
        let entries: Vec<Vec<u8>> = (first..(first + batch).min(log_size))
            .into_par_iter()
            .map(|i| {
                if i % stride == 0 && i / stride < bundles {
                    Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload(i), issuer).to_entry()
                } else {
                    format!("filler entry {i}").into_bytes()
                }
            })
            .collect();
        let appended = writer.append(&entries).unwrap();
        for (a, e) in appended.iter().zip(&entries) {
            if !e.starts_with(b"filler") {
                real.push((a.index, e.clone()));
            }
        }
    }
    println!(
        "built a log of {log_size} entries in {:.1} s",
        start.elapsed().as_secs_f64()
    );

    let log = writer.log();
    let checkpoint = log.checkpoint_at(log.size()).unwrap();
    let bundle_dir = dir.join("bundles");
    std::fs::create_dir_all(&bundle_dir).unwrap();
    real.par_iter().for_each(|(index, entry)| {
        let envelope = Envelope::from_entry(entry).unwrap();
        let bundle = Bundle {
            receipt_id: canonical::identity(&envelope.payload).to_string(),
            envelope,
            log: LogProof {
                origin: log.origin().to_string(),
                index: *index,
                tree_size: log.size(),
                inclusion: log.inclusion_proof(*index, log.size()).unwrap(),
                checkpoint: checkpoint.clone(),
            },
        };
        std::fs::write(bundle_dir.join(format!("{index}.json")), bundle.to_json()).unwrap();
    });
}
