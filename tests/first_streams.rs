//! Streams of bundles (issue 21, item 8): `rcpt log prove --all -o -`
//! writes JSON Lines, one compact bundle a line in index order, and
//! `rcpt verify -` reads the stream back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::process::Stdio;
use support::{deny_payload, keypair, rcpt, rcpt_bin, signed_envelope};

/// Entries in the log: more than one entry bundle (256) and a partial tile.
const ENTRIES: u64 = 300;

/// A log of `ENTRIES` receipts by `gate.example`, appended as JSON Lines on
/// standard input; returns (dir, log).
fn big_log() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (gate_key, _) = keypair(dir, "gate", "gate.example");
    keypair(dir, "logkey", "log.example/big");
    let key =
        rcpt::keys::signing_key_from_pem(&std::fs::read_to_string(&gate_key).unwrap()).unwrap();
    let mut lines = String::new();
    for n in 0..ENTRIES {
        lines.push_str(&signed_envelope(
            &deny_payload(1_795_000_000 + n, "gate.example", "ab"),
            &key,
        ));
        lines.push('\n');
    }
    let log = dir.join("log");
    rcpt()
        .args(["log", "init"])
        .arg(&log)
        .args(["--origin", "log.example/big", "--key"])
        .arg(dir.join("logkey.key"))
        .assert()
        .success();
    let mut child = std::process::Command::new(rcpt_bin())
        .args(["log", "append"])
        .arg(&log)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    support::write_stdin(&mut child, lines.as_bytes());
    assert!(child.wait().unwrap().success());
    (tmp, log)
}

#[test]
fn prove_all_to_stdout_is_json_lines_that_verify_dash_reads_back() {
    let (tmp, log) = big_log();
    let dir = tmp.path();
    let out = support::succeeded(
        rcpt()
            .args(["log", "prove"])
            .arg(&log)
            .args(["--all", "-o", "-"])
            .output()
            .unwrap(),
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() as u64, ENTRIES);
    for (i, line) in lines.iter().enumerate() {
        let bundle: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            bundle["log"]["index"],
            i as u64,
            "line {} in index order",
            i + 1
        );
        assert_eq!(bundle["log"]["tree_size"], ENTRIES);
    }
    std::fs::write(dir.join("all.jsonl"), &text).unwrap();

    // Read back on standard input: every line one bundle, every one verified.
    let verify = |stdin: std::fs::File| {
        std::process::Command::new(rcpt_bin())
            .current_dir(dir)
            .args([
                "verify",
                "--issuer-key-file",
                "gate.vkey",
                "--log-key-file",
                "logkey.vkey",
                "-",
            ])
            .stdin(stdin)
            .output()
            .unwrap()
    };
    let out = verify(std::fs::File::open(dir.join("all.jsonl")).unwrap());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("VERIFIED -:1  blake3:"), "{stdout}");
    assert!(stdout.contains("\nVERIFIED -:300  blake3:"), "{stdout}");
    assert!(
        stdout.ends_with(&format!("{ENTRIES} verified, 0 failed, 0 not evaluated\n")),
        "{stdout}"
    );

    // One line changed: that bundle alone fails, the rest still verify.
    let tampered = text.replacen("\"index\":7,", "\"index\":8,", 1);
    assert_ne!(tampered, text);
    std::fs::write(dir.join("tampered.jsonl"), tampered).unwrap();
    let out = verify(std::fs::File::open(dir.join("tampered.jsonl")).unwrap());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAILED   -:8  blake3:"), "{stdout}");
    assert!(
        stdout.ends_with(&format!(
            "{} verified, 1 failed, 0 not evaluated\n",
            ENTRIES - 1
        )),
        "{stdout}"
    );
}

#[test]
fn prove_range_to_stdout_and_the_refused_combinations() {
    let (_tmp, log) = big_log();
    let out = rcpt()
        .args(["log", "prove"])
        .arg(&log)
        .args(["--range", "250..260", "-o", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let indexes: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["log"]["index"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(indexes, (250..260).collect::<Vec<_>>());

    let refused = |args: &[&str], message: &str| {
        let out = rcpt()
            .args(["log", "prove"])
            .arg(&log)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with(&format!("rcpt: error: {message}")),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty());
    };
    refused(
        &["--all", "-o", "all.jsonl"],
        "with --all or --range, -o takes '-' (JSON Lines on standard output; redirect it to a file) or use --out-dir DIR (one file per entry)",
    );
    refused(
        &["--all", "-o", "-", "--format", "tlog-proof"],
        "--format tlog-proof is many lines per proof, so not JSON Lines: give --out-dir DIR for one file per entry",
    );
    refused(
        &["--all"],
        "the following required arguments were not provided:",
    );
    refused(
        &["--all", "-o", "-", "--out-dir", "d"],
        "the argument '--out <FILE>' cannot be used with '--out-dir <DIR>'",
    );
}
