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
//! Then the rules (issue #35 "Bounds": rules add at most 5 ms to a `gate
//! check` with a policy of 20 rules over a change of 1,000 files), two
//! tables:
//!
//! - evaluation: a module of 20 rules (10 `deny`, 10 `escalate`, each a
//!   pass over `input.files`, none matching) evaluated by
//!   `gate::rules::Rules::evaluate` over an input of 1,000 files, as the
//!   gate does it (the confined child process started, the module compiled,
//!   both sets evaluated, the answer checked), beside the start of the
//!   evaluator alone (an empty module, an empty input), the evaluation by
//!   an evaluator started 20 ms before with its module (as the gate starts
//!   it before it reads the change: what is left once the input is made),
//!   and regorus alone in this process (compile and evaluate, no child);
//! - gate check: `rcpt gate check` of the same change with and without
//!   those rules (the policy otherwise equal), in a repository of
//!   RCPT_BENCH_RULES_FILES files (default 2,000) with a change of
//!   RCPT_BENCH_RULES_CHANGE (default 400: a receipt's read set holds about
//!   500 short paths, so a change of 1,000 files is refused before any rule
//!   or check runs; the evaluation table covers 1,000). The gate starts the
//!   evaluator with its module before it reads the change and evaluates
//!   the input while it brings the clean copy to the base, so what the
//!   rules add to the command is what is left of them once that is done.
//!
//! `RCPT_BENCH_GATE_PART=rules` runs only the rules' tables, `speed` only
//! the first. Figures are only meaningful on an idle machine: the load
//! average is printed first.

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

/// A gate key named `bench.example/gate` under `dir` (its prefix).
fn gate_keys(dir: &Path) -> std::path::PathBuf {
    let keys = dir.join("gate");
    let st = Command::new(env!("CARGO_BIN_EXE_rcpt"))
        .args(["key", "generate", "--name", "bench.example/gate", "--out"])
        .arg(&keys)
        .output()
        .unwrap();
    assert!(st.status.success());
    keys
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
    let keys = gate_keys(tmp.path());
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

/// A module of `n` rules, half `deny`, half `escalate`, each a pass over
/// the files that matches none of the bench's.
fn twenty_rules(n: usize) -> String {
    let mut m = String::from("package rcpt\n");
    for i in 0..n / 2 {
        m.push_str(&format!(
            "deny contains \"big{i}\" if {{ some f in input.files; f.size > {} }}\n",
            1_048_576 + i
        ));
        m.push_str(&format!(
            "escalate contains \"wf{i}\" if {{ some f in input.files; \
             startswith(f.path, \".github/workflows{i}/\") }}\n"
        ));
    }
    m
}

/// The git input of `n` modified files.
fn input_of(n: usize) -> rcpt::receipt::canonical::Value {
    use rcpt::gate::rules::input::{InputFile, git_input};
    let digest = rcpt::digest::Digest::blake3(b"x").to_string();
    let paths: Vec<String> = (0..n)
        .map(|i| format!("d{:03}/f{i}.txt", i / 100))
        .collect();
    let files: Vec<InputFile<'_>> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| InputFile {
            path: p,
            status: "modified",
            digest: Some(digest.clone()),
            mode: Some("100644"),
            size: Some(100 + i as u64),
        })
        .collect();
    git_input(
        "bench.example/gate",
        1_700_000_000,
        &"0".repeat(40),
        false,
        &files,
    )
}

/// Median time of `Rules::evaluate` of `module` over `input`.
fn time_rules(module: &str, input: &rcpt::receipt::canonical::Value, runs: usize) -> Duration {
    use rcpt::gate::rules::{Evaluator, Module, Rules};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("gate.rego");
    std::fs::write(&path, module).unwrap();
    let evaluator = Evaluator::new(
        env!("CARGO_BIN_EXE_rcpt").into(),
        vec!["gate".into(), "rules".into(), "--evaluator".into()],
    );
    let rules = Rules::new(Module::read(&path).unwrap(), evaluator);
    let mut times = Vec::new();
    for _ in 0..=runs {
        let t = Instant::now();
        rules.evaluate(input).unwrap();
        times.push(t.elapsed());
    }
    times.remove(0);
    median(times)
}

/// Median time of the evaluation of `module` over `input` by an evaluator
/// started 20 ms before (as the gate starts it before it reads the change).
fn time_started_rules(
    module: &str,
    input: &rcpt::receipt::canonical::Value,
    runs: usize,
) -> Duration {
    use rcpt::gate::rules::{Evaluator, Module, Rules};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("gate.rego");
    std::fs::write(&path, module).unwrap();
    let evaluator = Evaluator::new(
        env!("CARGO_BIN_EXE_rcpt").into(),
        vec!["gate".into(), "rules".into(), "--evaluator".into()],
    );
    let rules = Rules::new(Module::read(&path).unwrap(), evaluator);
    let mut times = Vec::new();
    for _ in 0..=runs {
        let started = rules.start().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let t = Instant::now();
        started.evaluate(input).unwrap();
        times.push(t.elapsed());
    }
    times.remove(0);
    median(times)
}

/// Median `gate check` time of a change with and without `module` as rules.
fn time_gate_with_rules(
    files: usize,
    change: usize,
    module: &str,
    runs: usize,
) -> (Duration, Duration) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path(), files, change);
    let bin = env!("CARGO_BIN_EXE_rcpt");
    let keys = gate_keys(tmp.path());
    std::fs::write(tmp.path().join("gate.rego"), module).unwrap();
    let checks = serde_json::json!([{"name": "true", "run": ["true"], "timeout_s": 60}]);
    let plain = tmp.path().join("plain.json");
    let ruled = tmp.path().join("ruled.json");
    let doc = serde_json::json!({"name": "bench", "reads": [], "checks": checks});
    std::fs::write(&plain, doc.to_string()).unwrap();
    let doc =
        serde_json::json!({"name": "bench", "reads": [], "checks": checks, "rules": "gate.rego"});
    std::fs::write(&ruled, doc.to_string()).unwrap();
    let run = |policy: &Path| {
        let t = Instant::now();
        let out = Command::new(bin)
            .current_dir(&repo)
            .args(["gate", "check", "--policy"])
            .arg(policy)
            .arg("--key")
            .arg(keys.with_extension("key"))
            .args(["-o", "/dev/null"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        t.elapsed()
    };
    run(&plain); // the first run checks the base out in full
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        without.push(run(&plain));
        with.push(run(&ruled));
    }
    (median(without), median(with))
}

fn rules_tables(runs: usize) {
    let module = twenty_rules(20);
    let input = input_of(1000);
    let empty = rcpt::receipt::canonical::Value::Map(Default::default());
    let start = time_rules(
        "package rcpt\ndeny contains \"x\" if { false }\n",
        &empty,
        runs * 4,
    );
    let eval = time_rules(&module, &input, runs * 4);
    let ahead = time_started_rules(&module, &input, runs * 4);
    let json = rcpt::receipt::canonical::json::to_json(&input).to_string();
    let mut here = Vec::new();
    for _ in 0..=runs * 4 {
        let t = Instant::now();
        rcpt::gate::rules::vm::evaluate_here(&module, &json);
        here.push(t.elapsed());
    }
    here.remove(0);
    let here = median(here);
    println!(
        "rules: 20 rules over 1,000 files, Rules::evaluate (median of {})",
        runs * 4
    );
    println!(
        "{:>12} {:>12} {:>15} {:>14} {:>10}",
        "start ms", "evaluate ms", "after start ms", "regorus ms", "bound ms"
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{:>12.2} {:>12.2} {:>15.2} {:>14.2} {:>10.1}",
        ms(start),
        ms(eval),
        ms(ahead),
        ms(here),
        5.0
    );
    let files = env_size("RCPT_BENCH_RULES_FILES", 2_000);
    let change = env_size("RCPT_BENCH_RULES_CHANGE", 400);
    let (without, with) = time_gate_with_rules(files, change, &module, runs);
    let added = with.saturating_sub(without);
    println!("rules: gate check with and without the 20 rules (median of {runs})");
    println!(
        "{:>10} {:>8} {:>14} {:>11} {:>9} {:>5}",
        "repo", "change", "without ms", "with ms", "added ms", "ok"
    );
    println!(
        "{:>10} {:>8} {:>14.1} {:>11.1} {:>9.1} {:>5}",
        files,
        change,
        without.as_secs_f64() * 1e3,
        with.as_secs_f64() * 1e3,
        added.as_secs_f64() * 1e3,
        if added <= Duration::from_millis(5) {
            "yes"
        } else {
            "NO"
        }
    );
}

fn main() {
    let part = std::env::var("RCPT_BENCH_GATE_PART").unwrap_or_default();
    let runs = env_size("RCPT_BENCH_GATE_RUNS", 5).max(1);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
    if part != "speed" {
        rules_tables(runs);
    }
    if part != "rules" {
        speed_table(runs);
    }
}

fn speed_table(runs: usize) {
    let files = env_size("RCPT_BENCH_GATE_FILES", 10_000);
    let change = env_size("RCPT_BENCH_GATE_CHANGE", 100);
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
