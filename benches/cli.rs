//! Throughput of the `rcpt` command itself, next to the limit of the
//! primitive it is bound by, measured in the same run (spec/performance.md).
//!
//! `cargo bench --bench cli` prints one table:
//! - `rcpt log append -` of RCPT_BENCH_APPEND envelopes (default 100,000) as
//!   JSON Lines, against RFC 6962 hashing of the same entries in memory;
//! - `rcpt verify` of RCPT_BENCH_VERIFY bundle files (default 20,000) with
//!   `--format human` and `--format json`, against strict Ed25519
//!   verifications per second on one core times the cores.
//!
//! - `rcpt log prove LOG --all --out-dir D` over a log of
//!   RCPT_BENCH_PROVE_LOG entries (default 1,000,000; 0 skips it), against
//!   creating and writing as many files of the same size in one directory
//!   on every core (the file system's rate, measured in the same run on the
//!   same file system). D is RCPT_BENCH_PROVE_OUT (default under the bench
//!   directory); the log is kept between runs in RCPT_BENCH_DIR.
//! - then the CPU cost of each `rcpt verify` requirement
//!   (RCPT_BENCH_GATES=0 skips it).
//!
//! Submissions/s of `rcpt log serve` are measured by `cargo bench --bench
//! serve` (benches/serve.rs), reported next to these in spec/performance.md.
//!
//! Each command runs under GNU time for its peak resident set (column
//! "peak RSS"; "n/a" where /usr/bin/time is absent). RCPT_BENCH_DIR keeps
//! the inputs between runs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use rayon::prelude::*;
use rcpt::bundle::{Bundle, LogProof};
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::receipt::canonical::{self, json};
use rcpt::receipt::dsse::{Envelope, pae};
use rcpt::tlog::merkle::{Hash, leaf_hash};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ORIGIN: &str = "bench.example/log";

fn env_size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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

/// Strict Ed25519 verifies per second on one core, over 3 s.
fn ed25519_rate(key: &SigningKey) -> f64 {
    use ed25519_dalek::Signer;
    let signed: Vec<_> = (0..4000u32)
        .map(|i| pae(RECEIPT_PAYLOAD_TYPE, &i.to_be_bytes().repeat(150)))
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

/// Strict Ed25519 verifies per second with every core verifying at once,
/// over 3 s: what the cores gave during the run, on a shared machine
/// often less than one core's rate times the cores.
fn ed25519_rate_all(key: &SigningKey) -> f64 {
    use ed25519_dalek::Signer;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let signed: Vec<_> = (0..1000u32)
        .map(|i| pae(RECEIPT_PAYLOAD_TYPE, &i.to_be_bytes().repeat(150)))
        .map(|m| {
            let s = key.sign(&m);
            (m, s)
        })
        .collect();
    let vk = key.verifying_key();
    let start = Instant::now();
    let n: usize = (0..cores)
        .into_par_iter()
        .map(|_| {
            let mut n = 0usize;
            while start.elapsed() < Duration::from_secs(3) {
                n += signed
                    .iter()
                    .filter(|(m, s)| vk.verify_strict(m, s).is_ok())
                    .count();
            }
            n
        })
        .sum();
    n as f64 / start.elapsed().as_secs_f64()
}

/// What bounds `rcpt verify`, each measured on every core in this
/// process over the same bundle files: strict Ed25519 alone; reading the
/// files as the command reads them (a stat of every path first, then open,
/// fstat, read, close); the library's checks of the bytes already in
/// memory (`Verifier::verify_bytes`, signature included); and the two
/// together. A bundle costs at least its signature plus its read, so the
/// last ratio is the most the command could reach with checks free.
fn verify_bounds(dir: &Path, bundle_dir: &Path, names: &[String], issuer: &SigningKey) {
    let paths: Vec<PathBuf> = names.iter().map(|n| bundle_dir.join(n)).collect();
    let read_all = || -> Vec<Vec<u8>> {
        let checked: Vec<rcpt::io::RegularPath> = paths
            .par_iter()
            .map(|p| rcpt::io::RegularPath::new(p.clone(), &std::fs::metadata(p).unwrap()).unwrap())
            .collect();
        checked
            .par_iter()
            .map(|p| rcpt::io::read_regular_path(p, 1 << 20).unwrap())
            .collect()
    };
    let timed = |f: &dyn Fn() -> usize| {
        // Best of three: the machine is shared.
        (0..3)
            .map(|_| {
                let start = Instant::now();
                let n = f();
                n as f64 / start.elapsed().as_secs_f64()
            })
            .fold(0.0, f64::max)
    };
    let n = paths.len();
    let read_rate = timed(&|| read_all().len());
    let bytes = read_all();
    let trust =
        rcpt::trust::Trust::from_json(&std::fs::read(dir.join("trust.json")).unwrap()).unwrap();
    let verifier = rcpt::verify::Verifier::new(trust, None).unwrap();
    let check_rate = timed(&|| {
        bytes
            .par_iter()
            .filter(|b| verifier.verify_bytes(b).outcome() == rcpt::verify::Outcome::Verified)
            .count()
    });
    let both_rate = timed(&|| {
        read_all()
            .par_iter()
            .filter(|b| verifier.verify_bytes(b).outcome() == rcpt::verify::Outcome::Verified)
            .count()
    });
    let ed = ed25519_rate_all(issuer);
    let ceiling = 1.0 / (1.0 / ed + 1.0 / read_rate);
    println!();
    println!("| what bounds `rcpt verify`, {n} files, all cores | rate | vs Ed25519 |");
    println!("|---|---|---|");
    println!("| strict Ed25519 alone | {ed:.0}/s | 1.000 |");
    println!(
        "| reading the files alone (stat, open, fstat, read, close) | {read_rate:.0}/s | {:.3} |",
        read_rate / ed
    );
    println!(
        "| Ed25519 plus reading: the ceiling with checks free | {ceiling:.0}/s | {:.3} |",
        ceiling / ed
    );
    println!(
        "| library checks of bytes in memory (`verify_bytes`) | {check_rate:.0}/s | {:.3} |",
        check_rate / ed
    );
    println!(
        "| library checks plus reading, in process | {both_rate:.0}/s | {:.3} |",
        both_rate / ed
    );
}

/// RFC 6962 leaf and interior hashing of `entries` in memory: entries/s.
fn hashing_rate(entries: &[Vec<u8>]) -> f64 {
    let start = Instant::now();
    let mut level: Vec<Hash> = entries.iter().map(|e| leaf_hash(e)).collect();
    // Interior nodes of the complete subtrees, level by level (the work a
    // tiled log does for its hash tiles).
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| match pair {
                [l, r] => rcpt::tlog::merkle::node_hash(l, r),
                [l] => *l,
                _ => unreachable!(),
            })
            .collect();
    }
    std::hint::black_box(&level);
    entries.len() as f64 / start.elapsed().as_secs_f64()
}

/// What one run of the binary cost.
struct Run {
    secs: f64,
    peak_rss_kib: Option<u64>,
    /// User + system CPU seconds (GNU time), when available.
    cpu_secs: Option<f64>,
}

/// Run `rcpt ARGS` in `cwd` (stdin from `input`), under GNU time when present.
fn run_rcpt(cwd: &Path, args: &[&str], input: Option<&Path>) -> Run {
    run_rcpt_status(cwd, args, input, &[0])
}

/// [`run_rcpt`], accepting any of the exit statuses `ok`.
fn run_rcpt_status(cwd: &Path, args: &[&str], input: Option<&Path>, ok: &[i32]) -> Run {
    let bin = env!("CARGO_BIN_EXE_rcpt");
    let time = Path::new("/usr/bin/time");
    let mut cmd = if time.exists() {
        let mut c = Command::new(time);
        c.args(["-f", "RCPT_BENCH_MAXRSS_KIB=%M RCPT_BENCH_CPU=%U+%S", bin]);
        c
    } else {
        Command::new(bin)
    };
    cmd.args(args).current_dir(cwd).stdout(Stdio::null());
    cmd.stderr(Stdio::piped());
    cmd.stdin(match input {
        Some(p) => Stdio::from(std::fs::File::open(p).unwrap()),
        None => Stdio::null(),
    });
    let start = Instant::now();
    let out = cmd.output().unwrap();
    let secs = start.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    assert!(
        ok.contains(&code),
        "rcpt {:?} exited {code}: {stderr}",
        args.get(..3)
    );
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("RCPT_BENCH_MAXRSS_KIB="));
    let peak_rss_kib = line
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok());
    let cpu_secs = line
        .and_then(|l| l.split_once("RCPT_BENCH_CPU="))
        .and_then(|(_, cpu)| {
            let (u, s) = cpu.trim().split_once('+')?;
            Some(u.parse::<f64>().ok()? + s.parse::<f64>().ok()?)
        });
    Run {
        secs,
        peak_rss_kib,
        cpu_secs,
    }
}

fn rss(run: &Run) -> String {
    run.peak_rss_kib
        .map_or_else(|| "n/a".into(), |k| format!("{} MiB", k / 1024))
}

fn row(what: &str, rate: f64, limit: f64, run: &Run) {
    println!(
        "| {what} | {rate:.0}/s | {limit:.0}/s | {:.3} | {} |",
        rate / limit,
        rss(run)
    );
}

fn main() {
    let n_append = env_size("RCPT_BENCH_APPEND", 100_000);
    let n_verify = env_size("RCPT_BENCH_VERIFY", 20_000).min(n_append);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let issuer = SigningKey::from_bytes(&[1u8; 32]);
    let log_key = SigningKey::from_bytes(&[2u8; 32]);

    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = std::env::var_os("RCPT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).unwrap();

    // Inputs: N envelopes as JSON Lines, their entries for the hashing limit.
    let envelopes: Vec<Envelope> = (0..n_append as u64)
        .into_par_iter()
        .map(|i| Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload(i), &issuer))
        .collect();
    let jsonl = dir.join("envelopes.jsonl");
    let mut text = String::new();
    for e in &envelopes {
        text.push_str(&e.to_json());
        text.push('\n');
    }
    std::fs::write(&jsonl, text).unwrap();
    let entries: Vec<Vec<u8>> = envelopes.iter().map(Envelope::to_entry).collect();
    let key_file = dir.join("log.key");
    std::fs::write(&key_file, rcpt::keys::signing_key_to_pem(&log_key)).unwrap();

    println!(
        "rcpt through the binary, {cores} cores ({})",
        env!("CARGO_BIN_EXE_rcpt")
    );
    println!();
    println!("| path | rate | limit (same run) | ratio | peak RSS |");
    println!("|---|---|---|---|---|");

    // Append: a fresh log each run. Every directory a run measures in is
    // new, and what a run deletes it deletes at its end: ext4 does not
    // reuse an inode for a while after its file is deleted, and creating
    // files just after thousands were deleted costs CPU in the kernel's
    // inode search (`recently_deleted` in a profile), which would be
    // charged to the command measured (spec/performance.md).
    let run_id = std::process::id();
    let log_dir = dir.join(format!("log-{run_id}"));
    let log = log_dir.to_str().unwrap();
    run_rcpt(
        &dir,
        &[
            "log",
            "init",
            log,
            "--origin",
            ORIGIN,
            "--key",
            key_file.to_str().unwrap(),
        ],
        None,
    );
    let hash_limit = hashing_rate(&entries);
    let append = run_rcpt(
        &dir,
        &[
            "log",
            "append",
            log,
            "--key",
            key_file.to_str().unwrap(),
            "-",
        ],
        Some(&jsonl),
    );
    row(
        &format!("`rcpt log append -` {n_append} envelopes vs RFC 6962 hashing in memory"),
        n_append as f64 / append.secs,
        hash_limit,
        &append,
    );

    // Verify: one bundle file per entry, for the first n_verify entries.
    // Inputs, kept between runs like the prove log: the envelopes, the log
    // and so the bundles are the same every run (deterministic keys,
    // payloads and Ed25519 signatures).
    let bundle_dir = dir.join(format!("bundles-{n_verify}"));
    let kept = std::fs::read_dir(&bundle_dir).map_or(0, |d| d.count());
    if kept != n_verify {
        let _ = std::fs::remove_dir_all(&bundle_dir);
        std::fs::create_dir_all(&bundle_dir).unwrap();
        write_bundles(&log_dir, &bundle_dir, &envelopes[..n_verify]);
    }
    let trust = serde_json::json!({
        "issuers": [{"name": "bench", "public_key": base64_key(&issuer)}],
        "logs": [{"verifier_key": NoteVerifier::new(ORIGIN, log_key.verifying_key()).unwrap().to_string()}],
    });
    std::fs::write(dir.join("trust.json"), trust.to_string()).unwrap();
    let mut names: Vec<String> = (0..n_verify).map(|i| format!("{i}.json")).collect();
    names.sort();
    let one_core = ed25519_rate(&issuer);
    let limit = one_core * cores as f64;
    // The same bundles as one JSON Lines stream (one bundle per line, in
    // the order of the files), for `rcpt verify -` on standard input.
    let stream = dir.join(format!("bundles-{n_verify}.jsonl"));
    if !stream.exists() || kept != n_verify {
        write_bundle_stream(&bundle_dir, &stream, n_verify);
    }
    let mut cpu_rows = Vec::new();
    for format in ["human", "json"] {
        let trust_path = dir.join("trust.json");
        let mut args = vec![
            "verify",
            "--trust",
            trust_path.to_str().unwrap(),
            "--format",
            format,
        ];
        args.extend(names.iter().map(String::as_str));
        let all_cores = ed25519_rate_all(&issuer);
        let run = run_rcpt(&bundle_dir, &args, None);
        cpu_rows.push((
            format!("--format {format}"),
            n_verify as f64,
            all_cores,
            run.secs,
            run.cpu_secs,
        ));
        row(
            &format!(
                "`rcpt verify --format {format}` {n_verify} files vs {cores} x strict Ed25519/s/core"
            ),
            n_verify as f64 / run.secs,
            limit,
            &run,
        );
    }
    // The stream: files against stdin in the same minutes (files first,
    // above; the stream right after, against the same limit).
    for format in ["human", "json"] {
        let trust_path = dir.join("trust.json");
        let args = [
            "verify",
            "--trust",
            trust_path.to_str().unwrap(),
            "--format",
            format,
            "-",
        ];
        let all_cores = ed25519_rate_all(&issuer);
        let run = run_rcpt(&bundle_dir, &args, Some(&stream));
        cpu_rows.push((
            format!("--format {format} -"),
            n_verify as f64,
            all_cores,
            run.secs,
            run.cpu_secs,
        ));
        row(
            &format!(
                "`rcpt verify --format {format} -` {n_verify} bundles as JSON Lines on stdin vs {cores} x strict Ed25519/s/core"
            ),
            n_verify as f64 / run.secs,
            limit,
            &run,
        );
    }
    prove_all(&dir, &issuer, &key_file);
    // The same verify runs against what the cores gave: strict verifies/s
    // with every core at once just before the run (on a shared machine
    // the second core is often busy), and per CPU-second (independent of
    // the load: the ratio both cores would reach if they were free).
    println!();
    println!(
        "| `rcpt verify` {n_verify} files | bundles/s vs all cores verifying at once | ratio | bundles per CPU-s vs strict verifies per CPU-s | ratio |"
    );
    println!("|---|---|---|---|---|");
    for (format, n, all_cores, secs, cpu) in cpu_rows {
        let per_cpu = cpu.map(|c| n / c);
        println!(
            "| `{format}` | {:.0}/s vs {all_cores:.0}/s | {:.3} | {} vs {one_core:.0} | {} |",
            n / secs,
            n / secs / all_cores,
            per_cpu.map_or_else(|| "n/a".into(), |r| format!("{r:.0}")),
            per_cpu.map_or_else(|| "n/a".into(), |r| format!("{:.3}", r / one_core)),
        );
    }
    verify_bounds(&dir, &bundle_dir, &names, &issuer);
    if env_size("RCPT_BENCH_GATES", 1) != 0 {
        gate_costs(&dir, &bundle_dir, &names, n_verify);
    }
    let _ = std::fs::remove_dir_all(&log_dir);
}

/// A log of RCPT_BENCH_PROVE_LOG entries (made once: envelopes signed in
/// chunks and piped to `rcpt log append -`), then `rcpt log prove --all`
/// against the file system's create-and-write rate.
fn prove_all(dir: &Path, issuer: &SigningKey, key_file: &Path) {
    let n = env_size("RCPT_BENCH_PROVE_LOG", 1_000_000);
    if n == 0 {
        return;
    }
    let log_dir = dir.join(format!("log-prove-{n}"));
    let ready = rcpt::log::Log::open(&log_dir).is_ok_and(|l| l.size() == n as u64);
    if !ready {
        let _ = std::fs::remove_dir_all(&log_dir);
        let log = log_dir.to_str().unwrap();
        let key = key_file.to_str().unwrap();
        run_rcpt(
            dir,
            &["log", "init", log, "--origin", ORIGIN, "--key", key],
            None,
        );
        let bin = env!("CARGO_BIN_EXE_rcpt");
        let mut child = Command::new(bin)
            .args(["log", "append", log, "--key", key, "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        const CHUNK: usize = 50_000;
        for start in (0..n).step_by(CHUNK) {
            let end = (start + CHUNK).min(n);
            let lines: Vec<String> = (start as u64..end as u64)
                .into_par_iter()
                .map(|i| {
                    let mut line =
                        Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload(i), issuer).to_json();
                    line.push('\n');
                    line
                })
                .collect();
            use std::io::Write as _;
            for line in &lines {
                stdin.write_all(line.as_bytes()).unwrap();
            }
        }
        drop(stdin);
        assert!(
            child.wait().unwrap().success(),
            "making the prove log failed"
        );
    }
    let base: PathBuf = std::env::var_os("RCPT_BENCH_PROVE_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("prove-out"));
    // Two new directories on the same file system, deleted only at the end
    // (see main): the limit first, then the command.
    let run_id = std::process::id();
    let (limit_dir, out) = (
        base.join(format!("limit-{run_id}")),
        base.join(format!("prove-{run_id}")),
    );
    let sample_len = {
        let log = rcpt::log::Log::open(&log_dir).unwrap();
        let envelope = Envelope::from_entry(&log.entry(0).unwrap()).unwrap();
        let bundle = Bundle {
            receipt_id: canonical::identity(&envelope.payload).to_string(),
            envelope,
            log: LogProof {
                origin: ORIGIN.to_string(),
                index: 0,
                tree_size: log.size(),
                inclusion: log.inclusion_proof(0, log.size()).unwrap(),
                checkpoint: log.checkpoint_at(log.size()).unwrap(),
            },
        };
        bundle.to_json().len()
    };
    let limit = file_rate(&limit_dir, sample_len, n.min(200_000));
    let run = run_rcpt(
        dir,
        &[
            "log",
            "prove",
            log_dir.to_str().unwrap(),
            "--all",
            "--out-dir",
            out.to_str().unwrap(),
        ],
        None,
    );
    let written = std::fs::read(out.join("0.bundle.json")).unwrap().len();
    row(
        &format!(
            "`rcpt log prove --all` {n}-entry log vs create+write of {written}-byte files on {} cores",
            std::thread::available_parallelism().map_or(1, |c| c.get())
        ),
        n as f64 / run.secs,
        limit,
        &run,
    );
    for done in [&limit_dir, &out] {
        let _ = std::fs::remove_dir_all(done);
    }
}

/// Files of `len` bytes created (create-new) and written in one new
/// directory `dir`, on every core: files/s.
fn file_rate(dir: &Path, len: usize, count: usize) -> f64 {
    use std::io::Write as _;
    std::fs::create_dir_all(dir).unwrap();
    let bytes = vec![b'x'; len];
    let start = Instant::now();
    (0..count).into_par_iter().for_each(|i| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(format!("{i}.bundle.json")))
            .unwrap();
        f.write_all(&bytes).unwrap();
    });
    count as f64 / start.elapsed().as_secs_f64()
}

/// What each gating requirement costs: CPU seconds of `rcpt verify` over
/// the same bundles with one requirement at a time (CPU time, not wall
/// time, so the figure holds on a busy machine); best of three. A
/// requirement the bundles do not meet still runs every check.
fn gate_costs(dir: &Path, bundle_dir: &Path, names: &[String], n: usize) {
    let root = dir.join("fresh-root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a"), b"a").unwrap();
    let root = root.to_str().unwrap().to_string();
    let zero = format!("blake3:{}", "0".repeat(64));
    let variants: Vec<Vec<&str>> = vec![
        vec![],
        vec!["--require-verdict", "admit"],
        vec!["--issuer", "bench"],
        vec!["--change-id", &zero],
        vec!["--policy-id", &zero],
        vec!["--applied", "true"],
        vec!["--max-age", "7d", "--now", "1790000000"],
        vec!["--fresh", &root],
    ];
    println!();
    println!(
        "| `rcpt verify` {n} files, requirement | CPU s (best of 3) | bundles per CPU-s | cost vs none |"
    );
    println!("|---|---|---|---|");
    let trust = dir.join("trust.json");
    let mut base = None;
    for v in &variants {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let mut args = vec!["verify", "--trust", trust.to_str().unwrap()];
            args.extend(v.iter().copied());
            args.extend(names.iter().map(String::as_str));
            // --fresh of receipts whose read set is not under the root
            // cannot be evaluated (exit 3); the checks still all run.
            let run = run_rcpt_status(bundle_dir, &args, None, &[0, 1, 3]);
            best = best.min(run.cpu_secs.unwrap_or(run.secs));
        }
        let base_cpu = *base.get_or_insert(best);
        let label = if v.is_empty() {
            "(none)".to_string()
        } else {
            v.join(" ")
        };
        println!(
            "| {label} | {best:.3} | {:.0} | {:+.1}% |",
            n as f64 / best,
            (best / base_cpu - 1.0) * 100.0
        );
    }
}

fn base64_key(key: &SigningKey) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(key.verifying_key().as_bytes())
}

/// The bundle files `0.json ..` of `bundle_dir` as one JSON Lines file,
/// each bundle re-serialised on one line.
fn write_bundle_stream(bundle_dir: &Path, out: &Path, n: usize) {
    let lines: Vec<String> = (0..n)
        .into_par_iter()
        .map(|i| {
            let bytes = std::fs::read(bundle_dir.join(format!("{i}.json"))).unwrap();
            let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            let mut line = value.to_string();
            line.push('\n');
            line
        })
        .collect();
    std::fs::write(out, lines.concat()).unwrap();
}

/// One bundle per envelope, proven against the log's latest checkpoint.
fn write_bundles(log_dir: &Path, out: &Path, envelopes: &[Envelope]) {
    let log = rcpt::log::Log::open(log_dir).unwrap();
    let size = log.size();
    let checkpoint = log.checkpoint_at(size).unwrap();
    envelopes.par_iter().enumerate().for_each(|(i, envelope)| {
        let index = i as u64;
        let bundle = Bundle {
            receipt_id: canonical::identity(&envelope.payload).to_string(),
            envelope: envelope.clone(),
            log: LogProof {
                origin: ORIGIN.to_string(),
                index,
                tree_size: size,
                inclusion: log.inclusion_proof(index, size).unwrap(),
                checkpoint: checkpoint.clone(),
            },
        };
        std::fs::write(out.join(format!("{i}.json")), bundle.to_json()).unwrap();
    });
}
