//! CLI cases as data: what a user types, the exit status, and the whole
//! message. Each `tests/cli_cases/*.case` file runs in a fresh copy of the
//! world `tests/cli_cases/world.sh` makes (keys with their `.vkey`, a trust
//! file, receipts, a log, bundles, a git work tree), with `rcpt` on PATH.
//!
//! A case file is a sequence of commands, each:
//!
//! ```text
//! # a comment
//! $ rcpt verify bundle.json --log-key-file logkey.pub   (run by bash, in the case's directory)
//! ? 2                                                   (the exit status)
//! 2> rcpt: error: --log-key-file logkey.pub: [..]       (stderr, every line)
//! 1> VERIFIED bundle.json  blake3:[..]                  (stdout, when any `1>` is given)
//! ```
//!
//! Stderr is always compared whole: no `2>` line means it must be empty.
//! In an expected line `[..]` matches any text. The commands of one file
//! share the directory, so a case can make a file and use it.
//!
//! The examples at the end of `rcpt verify --help` run here too, each with
//! exit status 0, in the same world.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::rcpt_bin;

/// One command of a case file and what it must do.
#[derive(Debug)]
struct Step {
    line: usize,
    command: String,
    status: i32,
    stderr: Vec<String>,
    stdout: Option<Vec<String>>,
}

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli_cases")
}

/// Parse a case file.
fn parse(text: &str, file: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if raw.trim().is_empty() || raw.starts_with('#') {
            continue;
        }
        if let Some(cmd) = raw.strip_prefix("$ ") {
            steps.push(Step {
                line: n,
                command: cmd.to_string(),
                status: 0,
                stderr: Vec::new(),
                stdout: None,
            });
            continue;
        }
        let step = steps
            .last_mut()
            .unwrap_or_else(|| panic!("{file}:{n}: expectation before any `$ ` command"));
        if let Some(code) = raw.strip_prefix("? ") {
            step.status = code.trim().parse().expect("exit status");
        } else if let Some(line) = raw.strip_prefix("2>") {
            step.stderr
                .push(line.strip_prefix(' ').unwrap_or(line).to_string());
        } else if let Some(line) = raw.strip_prefix("1>") {
            let line = line.strip_prefix(' ').unwrap_or(line).to_string();
            step.stdout.get_or_insert_with(Vec::new).push(line);
        } else {
            panic!("{file}:{n}: a line must start with '$ ', '? ', '1>', '2>' or '#': {raw}");
        }
    }
    steps
}

/// Does `actual` match `pattern`, where `[..]` matches any text?
fn line_matches(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

fn lines_match(expected: &[String], actual: &str) -> bool {
    let actual: Vec<&str> = actual.lines().collect();
    actual.len() == expected.len()
        && expected
            .iter()
            .zip(&actual)
            .all(|(e, a)| line_matches(e, a))
}

/// The directory of the binary under test: cargo's, or
/// `$RCPT_CASES_BIN_DIR` (a copy, for a target directory shared by
/// builds of other trees).
fn bin_dir() -> PathBuf {
    match std::env::var_os("RCPT_CASES_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => rcpt_bin().parent().unwrap().to_path_buf(),
    }
}

/// PATH with the binary under test first.
fn path_env() -> String {
    format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The world, made once per test process.
fn world() -> &'static Path {
    static WORLD: OnceLock<tempfile::TempDir> = OnceLock::new();
    WORLD
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let out = Command::new("bash")
                .arg(cases_dir().join("world.sh"))
                .current_dir(dir.path())
                .env("PATH", path_env())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "world.sh failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            dir
        })
        .path()
}

/// A fresh copy of the world, with `fixtures` linked to the repository's.
fn fresh_world() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", world().display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    std::os::unix::fs::symlink(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
        dir.path().join("fixtures"),
    )
    .unwrap();
    dir
}

/// Run a shell command line in `dir`.
fn run(dir: &Path, command: &str) -> std::process::Output {
    Command::new("bash")
        .args(["-o", "pipefail", "-c", command])
        .current_dir(dir)
        .env("PATH", path_env())
        .env(
            "CHANGE",
            "blake3:1111111111111111111111111111111111111111111111111111111111111111",
        )
        .env("TMPDIR", dir)
        .env_remove("RCPT_LOG")
        .output()
        .unwrap()
}

/// Run every step of one case file; the mismatches, described.
fn run_file(path: &Path) -> Vec<String> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let steps = parse(&std::fs::read_to_string(path).unwrap(), &name);
    assert!(!steps.is_empty(), "{name}: no commands");
    let dir = fresh_world();
    let mut failures = Vec::new();
    for step in &steps {
        let out = run(dir.path(), &step.command);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let status_ok = out.status.code() == Some(step.status);
        let stderr_ok = lines_match(&step.stderr, &stderr);
        let stdout_ok = step.stdout.as_ref().is_none_or(|e| lines_match(e, &stdout));
        if !(status_ok && stderr_ok && stdout_ok) {
            failures.push(format!(
                "{name}:{}: $ {}\n  expected exit {}, got {:?}\n  expected stderr:\n{}\n  got stderr:\n{}\n  expected stdout:\n{}\n  got stdout:\n{}",
                step.line,
                step.command,
                step.status,
                out.status.code(),
                indent(&step.stderr.join("\n")),
                indent(&stderr),
                indent(&step.stdout.as_ref().map(|s| s.join("\n")).unwrap_or("(not checked)".into())),
                indent(&stdout),
            ));
        }
    }
    failures
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_cli_case_gives_its_exit_status_and_whole_message() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "case files: {files:?}");
    let failures: Vec<String> = files.iter().flat_map(|f| run_file(f)).collect();
    assert!(
        failures.is_empty(),
        "{} mismatches:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// The `Examples:` lines at the end of `rcpt CMD --help`.
fn help_examples(args: &[&str]) -> Vec<String> {
    let out = Command::new(bin_dir().join("rcpt"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let (_, examples) = help
        .split_once("Examples:\n")
        .expect("an Examples: section");
    examples
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("rcpt "))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_verify_help_example_runs_and_passes() {
    let examples = help_examples(&["verify"]);
    assert!(examples.len() >= 5, "{examples:?}");
    let dir = fresh_world();
    for example in &examples {
        let out = run(dir.path(), example);
        assert!(
            out.status.success(),
            "$ {example}\nexit {:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_pattern_matcher_is_strict_outside_its_wildcards() {
    assert!(line_matches("a [..] c", "a b c"));
    assert!(line_matches("a [..] c [..]", "a b c d"));
    assert!(!line_matches("a [..] c", "a b d"));
    assert!(!line_matches("abc", "abcd"));
    assert!(line_matches("[..]", ""));
    assert!(!lines_match(&["x".into()], "x\ny\n"));
}
