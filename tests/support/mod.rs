//! Shared test support: the `rcpt` binary, the frozen corpus, and a small
//! world (keys, a log, receipts, bundles) made through the command line.
//!
//! Each test file that uses it says `mod support;`; helpers a file does not
//! use are allowed to be dead there.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use assert_cmd::Command;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The `rcpt` binary under test.
pub fn rcpt() -> Command {
    Command::cargo_bin("rcpt").expect("the rcpt binary is built")
}

/// The frozen corpus directory.
pub fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/frozen-receipts")
}

/// Run `rcpt ARGS` and return its stdout as text (asserting success).
pub fn rcpt_out(args: &[&str]) -> String {
    let out = rcpt()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

/// The value of a `label: value` line of `rcpt key show` / `key generate`.
pub fn line_value(text: &str, label: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{label}: ")))
        .unwrap_or_else(|| panic!("no {label:?} line in {text}"))
        .trim()
        .to_string()
}

/// A digest of `label` for test payloads.
pub fn d(label: &str) -> String {
    rcpt::digest::Digest::blake3(label.as_bytes()).to_string()
}

/// A valid v1 payload by `issuer`: admit, applied, git, empty read set.
pub fn payload(issuer: &str, issued_at: i64) -> Value {
    json!({
        "version": 1, "issuer": issuer, "issued_at": issued_at, "substrate": "git",
        "change_id": d("change"), "inverse_delta_id": null, "reversibility": null,
        "read_set": [], "precondition": null, "policy_id": d("policy v1"),
        "verdict": {"admit": {"proof": d("proof")}}, "applied": true,
        "replay": {"class": "deterministic_replay"}
    })
}

/// Keys, a log and a trust file in a temporary directory, all made by the CLI.
pub struct World {
    /// The temporary directory holding everything.
    pub tmp: tempfile::TempDir,
    /// The issuer's name (its trust-file name).
    pub issuer: String,
    /// The issuer's raw base64 public key.
    pub issuer_public: String,
    /// The log directory.
    pub log: PathBuf,
    /// The log's verifier key.
    pub log_vkey: String,
    /// The trust file (issuer and log).
    pub trust: PathBuf,
    count: usize,
}

impl World {
    /// Generate an issuer key named `issuer` and a log, and write the trust file.
    pub fn new(issuer: &str) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let gen_issuer = rcpt()
            .args(["key", "generate", "--name", issuer, "--out"])
            .arg(dir.join("issuer"))
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let issuer_public = line_value(&String::from_utf8(gen_issuer).unwrap(), "public key");
        let origin = "log.example/test";
        let gen_log = rcpt()
            .args(["key", "generate", "--name", origin, "--out"])
            .arg(dir.join("logkey"))
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let log_vkey = line_value(&String::from_utf8(gen_log).unwrap(), "verifier key");
        let log = dir.join("log");
        rcpt()
            .args(["log", "init"])
            .arg(&log)
            .args(["--origin", origin, "--key"])
            .arg(dir.join("logkey.key"))
            .assert()
            .success();
        let trust = dir.join("trust.json");
        let world = World {
            tmp,
            issuer: issuer.to_string(),
            issuer_public,
            log,
            log_vkey,
            trust,
            count: 0,
        };
        world.write_trust(None);
        world
    }

    /// The temporary directory.
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// Rewrite the trust file, with a `"require"` object when given.
    pub fn write_trust(&self, require: Option<Value>) {
        let mut trust = json!({
            "issuers": [{"name": self.issuer, "public_key": self.issuer_public}],
            "logs": [{"verifier_key": self.log_vkey}],
        });
        if let Some(r) = require {
            trust["require"] = r;
        }
        std::fs::write(&self.trust, trust.to_string()).unwrap();
    }

    /// Issue `payload` with the issuer key, append it, and write its bundle;
    /// returns the bundle path.
    pub fn receipt(&mut self, payload: &Value) -> PathBuf {
        self.count += 1;
        let n = self.count;
        let dir = self.tmp.path().to_path_buf();
        let p = dir.join(format!("payload-{n}.json"));
        std::fs::write(&p, payload.to_string()).unwrap();
        let env = dir.join(format!("envelope-{n}.json"));
        rcpt()
            .args(["receipt", "issue", "--key"])
            .arg(dir.join("issuer.key"))
            .arg("-o")
            .arg(&env)
            .arg(&p)
            .assert()
            .success();
        rcpt()
            .args(["log", "append"])
            .arg(&self.log)
            .arg(&env)
            .assert()
            .success();
        let bundle = dir.join(format!("bundle-{n}.json"));
        rcpt()
            .args(["log", "prove"])
            .arg(&self.log)
            .arg("--receipt")
            .arg(&env)
            .arg("-o")
            .arg(&bundle)
            .assert()
            .success();
        bundle
    }
}
