//! What a new user hit (issue 8, rough edges): a closed pipe, missing
//! files, `-`, the forms of a key, the wrong kind of file, help.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod boundary;

use boundary::{Demo, corpus, rcpt};
use predicates::prelude::*;
use std::process::Stdio;

fn corpus_bundle(name: &str) -> std::path::PathBuf {
    corpus().join("bundles").join(format!("{name}.json"))
}

#[test]
fn a_closed_stdout_stops_quietly() {
    // The read end is closed before rcpt writes a byte: every write is EPIPE.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("rcpt"))
        .args(["verify", "--trust"])
        .arg(corpus().join("trust.json"))
        .arg(corpus_bundle("verdict-admit"))
        .arg(corpus_bundle("inclusion-wrong-index"))
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    // Every command that prints goes the same way.
    for args in [
        vec!["key", "show", "-"],
        vec!["man"],
        vec!["completions", "bash"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("rcpt"))
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        let pem = std::fs::read(corpus().join("keys/issuer.pub")).unwrap();
        let _ = child.stdin.take().unwrap().write_all(&pem);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
    }
}

#[test]
fn a_missing_input_file_is_a_bad_invocation_in_every_command() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = Demo::new(tmp.path(), "", "log.example", 1, 1);
    let missing = tmp.path().join("missing.json");
    let m = missing.to_str().unwrap();
    let log = demo.log.to_str().unwrap();
    let key = demo.issuer_key.to_str().unwrap();
    let trust = corpus().join("trust.json");
    let trust = trust.to_str().unwrap();
    let env = demo.envelopes[0].to_str().unwrap();
    let runs: Vec<Vec<&str>> = vec![
        vec!["verify", "--trust", trust, m],
        vec!["verify", "--trust", m, env],
        vec!["verify", "--trust", trust, "--issuer-key-file", m, env],
        vec!["verify", "--trust", trust, "--log-key-file", m, env],
        vec!["receipt", "issue", "--key", key, m],
        vec!["receipt", "issue", "--key", m, "p0.json"],
        vec!["receipt", "inspect", m],
        vec!["key", "show", m],
        vec!["log", "append", log, m],
        vec!["log", "append", log, env, m],
        vec!["log", "prove", log, "--receipt", m],
        vec!["log", "init", "newlog", "--origin", "x", "--key", m],
    ];
    for args in runs {
        rcpt()
            .current_dir(tmp.path())
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("missing.json"));
    }
    // Nothing was appended by the append that named a missing file.
    let cp = rcpt().args(["log", "checkpoint", log]).assert().success();
    let text = String::from_utf8(cp.get_output().stdout.clone()).unwrap();
    assert_eq!(text.lines().nth(1), Some("1"));
}

#[test]
fn verify_reads_one_bundle_or_json_lines_from_stdin() {
    let trust = corpus().join("trust.json");
    let pretty = std::fs::read(corpus_bundle("verdict-admit")).unwrap();
    rcpt()
        .args(["verify", "--trust"])
        .arg(&trust)
        .arg("-")
        .write_stdin(pretty.clone())
        .assert()
        .code(0)
        .stdout(predicate::str::starts_with("VERIFIED -  blake3:"));
    let mut lines = Vec::new();
    for name in ["verdict-admit", "verdict-deny", "inclusion-wrong-index"] {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(corpus_bundle(name)).unwrap()).unwrap();
        lines.extend(v.to_string().into_bytes());
        lines.push(b'\n');
    }
    rcpt()
        .args(["verify", "--trust"])
        .arg(&trust)
        .arg("-")
        .write_stdin(lines)
        .assert()
        .code(1)
        .stdout(
            predicate::str::contains("VERIFIED -:1")
                .and(predicate::str::contains("VERIFIED -:2"))
                .and(predicate::str::contains("FAILED   -:3"))
                .and(predicate::str::contains("2 verified, 1 failed")),
        );
    // Capped like a file.
    let big = vec![b' '; rcpt::limits::MAX_BUNDLE_BYTES + 10];
    rcpt()
        .args(["verify", "--trust"])
        .arg(&trust)
        .arg("-")
        .write_stdin(big)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("bundle.too_large"));
}

#[test]
fn standard_input_is_read_once_per_command() {
    let trust = corpus().join("trust.json");
    rcpt()
        .args(["verify", "--trust", "-", "-"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("read once"));
    rcpt()
        .args(["verify", "--trust"])
        .arg(&trust)
        .args(["-", "-"])
        .assert()
        .code(2);
    rcpt()
        .args(["receipt", "issue", "--key", "-", "-"])
        .assert()
        .code(2);
    let tmp = tempfile::tempdir().unwrap();
    let demo = Demo::new(tmp.path(), "", "log.example", 1, 0);
    rcpt()
        .args(["log", "append"])
        .arg(&demo.log)
        .args(["-", "-"])
        .assert()
        .code(2);
    // '-' as --trust reads the trust file from standard input.
    rcpt()
        .args(["verify", "--trust", "-"])
        .arg(corpus_bundle("verdict-admit"))
        .write_stdin(std::fs::read(&trust).unwrap())
        .assert()
        .code(0);
}

#[test]
fn key_show_prints_every_form_of_the_key() {
    let out = rcpt()
        .args(["key", "show"])
        .arg(corpus().join("keys/issuer.pub"))
        .args(["--name", "gate.example"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let labels: Vec<&str> = std::str::from_utf8(&out)
        .unwrap()
        .lines()
        .map(|l| l.split_once(": ").unwrap().0)
        .collect();
    assert_eq!(
        labels,
        [
            "keyid",
            "public key",
            "trust issuer entry",
            "verifier key",
            "trust log entry"
        ]
    );
}

#[test]
fn the_wrong_kind_of_file_is_named_with_the_command_that_makes_the_other() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = Demo::new(tmp.path(), "", "log.example", 1, 1);
    // An envelope given to verify.
    rcpt()
        .args(["verify", "--trust"])
        .arg(demo.trust_file())
        .arg(&demo.envelopes[0])
        .assert()
        .code(1)
        .stdout(
            predicate::str::contains("DSSE envelope")
                .and(predicate::str::contains("rcpt log prove")),
        );
    // A bundle given to inspect: named, and its envelope shown.
    let bundle = demo.prove(0, 1);
    rcpt()
        .args(["receipt", "inspect"])
        .arg(&bundle)
        .assert()
        .code(0)
        .stderr(
            predicate::str::contains("proof bundle").and(predicate::str::contains("rcpt verify")),
        )
        .stdout(predicate::str::contains("receipt id:"));
}

#[test]
fn completions_and_man_pages_exist() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        rcpt()
            .args(["completions", shell])
            .assert()
            .success()
            .stdout(predicate::str::contains("verify"));
    }
    rcpt()
        .arg("man")
        .assert()
        .success()
        .stdout(predicate::str::contains(".TH rcpt 1"));
    rcpt().args(["man", "verify"]).assert().success().stdout(
        predicate::str::contains(".TH rcpt-verify 1")
            .and(predicate::str::contains("issuer\\-key\\-file")),
    );
    rcpt().args(["man", "nope"]).assert().code(2);
}

#[test]
fn every_subcommand_help_ends_with_an_example() {
    for cmd in [
        vec!["verify"],
        vec!["key", "generate"],
        vec!["key", "show"],
        vec!["receipt", "issue"],
        vec!["receipt", "inspect"],
        vec!["log", "init"],
        vec!["log", "append"],
        vec!["log", "checkpoint"],
        vec!["log", "prove"],
        vec!["log", "consistency"],
        vec!["log", "check"],
        vec!["completions"],
        vec!["man"],
    ] {
        let out = rcpt().args(&cmd).arg("--help").assert().success();
        let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        let tail = text.trim_end().rsplit_once("Example").map(|(_, t)| t);
        let tail = tail.unwrap_or_else(|| panic!("{cmd:?}: no example\n{text}"));
        assert!(
            tail.lines()
                .skip(1)
                .all(|l| l.trim_start().starts_with("rcpt ")),
            "{cmd:?}: the help does not end with examples\n{text}"
        );
    }
}
