//! The overhead of `rcpt gate check` over running the same check directly
//! (issue #23 "Speed": at most 10% + 500 ms for a repository of 10,000
//! files and a change of 100, linear in the change where git allows).
//!
//! `cargo bench --bench gate` builds a repository of RCPT_BENCH_GATE_FILES
//! files (default 10,000, in directories of 100) with the system `git`,
//! changes RCPT_BENCH_GATE_CHANGE of them (default 100), and times,
//! RCPT_BENCH_GATE_RUNS times each (default 5, median reported), three
//! rows: that change; a change four times as large (linearity in the
//! change; a receipt carries every changed file in its read set, so about
//! 500 short paths is the most one payload holds); the same change in a
//! repository a tenth the size (dependence on the repository):
//!
//! - direct: the check (`cat` of every tracked file, a stand-in for a test
//!   suite that reads the project) run in the work tree;
//! - gate: `rcpt gate check` with the same check: status and hashing,
//!   bringing the repository's parked clean copy to the base (a new `git
//!   init` with the saved index, `reset --hard`, `clean -ffdx`, `status`),
//!   copying the change, the check, storing the evidence, signing;
//! - first: the first `gate check` of the repository, which has no parked
//!   copy yet and checks the whole base out (not in the median).
//!
//! The clean copies' home (XDG_CACHE_HOME) is a directory beside the
//! repository, on the same file system, so the user's cache is not used.
//!
//! Figures are only meaningful on an idle machine: the load average is
//! printed first.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn env_size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["-c", "user.name=b", "-c", "user.email=b@example.com"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

/// A committed repository of `files` files under `dir/repo`, `change` of
/// them then modified in the work tree.
fn repository(dir: &Path, files: usize, change: usize) -> std::path::PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    for i in 0..files {
        let d = repo.join(format!("d{:03}", i / 100));
        std::fs::create_dir_all(&d).unwrap();
        let line = format!("file {i} of the benchmark repository\n");
        std::fs::write(d.join(format!("f{i}.txt")), line.repeat(20)).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    for i in 0..change {
        let p = repo.join(format!("d{:03}/f{i}.txt", i / 100));
        std::fs::write(p, format!("changed {i}\n")).unwrap();
    }
    repo
}

const CHECK: &str = "git ls-files -z | xargs -0 cat > /dev/null";

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// (direct, gate) medians for one repository, and the first gate run.
fn measure(files: usize, change: usize, runs: usize) -> (Duration, Duration, Duration) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path(), files, change);
    let bin = env!("CARGO_BIN_EXE_rcpt");
    let keys = tmp.path().join("gate");
    let st = Command::new(bin)
        .args(["key", "generate", "--name", "bench.example/gate", "--out"])
        .arg(&keys)
        .output()
        .unwrap();
    assert!(st.status.success());
    let policy = tmp.path().join("policy.json");
    let doc = serde_json::json!({"name": "bench", "reads": [],
        "checks": [{"name": "read", "run": ["sh", "-c", CHECK], "timeout_s": 600}]});
    std::fs::write(&policy, doc.to_string()).unwrap();
    let mut direct = Vec::new();
    let mut gate = Vec::new();
    for _ in 0..=runs {
        let t = Instant::now();
        let st = Command::new("sh")
            .args(["-c", CHECK])
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(st.success());
        direct.push(t.elapsed());
        let t = Instant::now();
        let out = Command::new(bin)
            .current_dir(&repo)
            .env("XDG_CACHE_HOME", tmp.path().join("cache"))
            .args([
                "gate",
                "check",
                "--issuer",
                "bench.example/gate",
                "--policy",
            ])
            .arg(&policy)
            .arg("--key")
            .arg(keys.with_extension("key"))
            .args(["-o", "/dev/null"])
            .output()
            .unwrap();
        gate.push(t.elapsed());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let first = gate.remove(0);
    direct.remove(0);
    (median(direct), median(gate), first)
}

fn main() {
    let files = env_size("RCPT_BENCH_GATE_FILES", 10_000);
    let change = env_size("RCPT_BENCH_GATE_CHANGE", 100);
    let runs = env_size("RCPT_BENCH_GATE_RUNS", 5).max(1);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
    println!(
        "{:>10} {:>8} {:>10} {:>10} {:>11} {:>11}  ok {:>10}",
        "repo", "change", "direct ms", "gate ms", "overhead ms", "limit ms", "first ms"
    );
    let rows = [
        (files, change),
        (files, change * 4),
        ((files / 10).max(change), change),
    ];
    for (files, change) in rows {
        let (direct, gate, first) = measure(files, change, runs);
        let overhead = gate.saturating_sub(direct);
        let limit = direct / 10 + Duration::from_millis(500);
        println!(
            "{:>10} {:>8} {:>10.1} {:>10.1} {:>11.1} {:>11.1}  {} {:>10.1}",
            files,
            change,
            direct.as_secs_f64() * 1e3,
            gate.as_secs_f64() * 1e3,
            overhead.as_secs_f64() * 1e3,
            limit.as_secs_f64() * 1e3,
            if overhead <= limit { "yes" } else { "NO" },
            first.as_secs_f64() * 1e3
        );
    }
}
