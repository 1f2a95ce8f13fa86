//! Shared set-up for the trust-boundary tests: keys, a small log and its
//! bundles, made through the `rcpt` binary as a user would.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

pub fn rcpt() -> Command {
    Command::cargo_bin("rcpt").unwrap()
}

pub fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/frozen-receipts")
}

/// `label: value` from a command's stdout.
pub fn field(stdout: &[u8], label: &str) -> String {
    let text = std::str::from_utf8(stdout).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{label}: ")).map(str::to_owned))
        .unwrap_or_else(|| panic!("no {label:?} in {text}"))
}

/// A valid v1 payload; `n` varies the change id.
pub fn payload(n: usize) -> serde_json::Value {
    serde_json::json!({
        "version": 1, "issuer": "gate.example", "issued_at": 1_795_000_000 + n,
        "substrate": "git",
        "change_id": format!("blake3:{:064x}", n + 1),
        "inverse_delta_id": null, "reversibility": false,
        "read_set": [], "precondition": null,
        "policy_id": format!("blake3:{:064x}", 7),
        "verdict": {"escalate": {"ticket": "T-1"}},
        "applied": false,
        "replay": {"class": "unknown"}
    })
}

/// `rcpt key generate` into `dir/prefix`; returns (.key, .pub).
pub fn keypair(dir: &Path, prefix: &str, name: &str) -> (PathBuf, PathBuf) {
    rcpt()
        .args(["key", "generate", "--name", name, "--out"])
        .arg(dir.join(prefix))
        .assert()
        .success();
    (
        dir.join(format!("{prefix}.key")),
        dir.join(format!("{prefix}.pub")),
    )
}

/// What `rcpt key show FILE --name NAME` prints for `label`.
pub fn show(file: &Path, name: &str, label: &str) -> String {
    let out = rcpt()
        .args(["key", "show"])
        .arg(file)
        .args(["--name", name])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    field(&out, label)
}

/// A log with receipts, made with the CLI.
pub struct Demo {
    pub dir: PathBuf,
    pub origin: String,
    pub issuer_key: PathBuf,
    pub issuer_pub: PathBuf,
    pub log_key: PathBuf,
    pub log_pub: PathBuf,
    pub log: PathBuf,
    pub envelopes: Vec<PathBuf>,
}

impl Demo {
    /// Keys `gate`/`<prefix>log`, `n` receipts issued, a log of `origin` in
    /// `dir/<prefix>log` holding the first `appended` of them.
    pub fn new(dir: &Path, prefix: &str, origin: &str, n: usize, appended: usize) -> Demo {
        let (issuer_key, issuer_pub) = if dir.join("gate.key").exists() {
            (dir.join("gate.key"), dir.join("gate.pub"))
        } else {
            keypair(dir, "gate", "gate.example")
        };
        let (log_key, log_pub) = keypair(dir, &format!("{prefix}logkey"), origin);
        let mut envelopes = Vec::new();
        for i in 0..n {
            let p = dir.join(format!("{prefix}p{i}.json"));
            std::fs::write(&p, payload(i).to_string()).unwrap();
            let e = dir.join(format!("{prefix}e{i}.json"));
            rcpt()
                .args(["receipt", "issue", "--key"])
                .arg(&issuer_key)
                .arg("-o")
                .arg(&e)
                .arg(&p)
                .assert()
                .success();
            envelopes.push(e);
        }
        let log = dir.join(format!("{prefix}log"));
        rcpt()
            .args(["log", "init"])
            .arg(&log)
            .args(["--origin", origin, "--key"])
            .arg(&log_key)
            .assert()
            .success();
        let demo = Demo {
            dir: dir.to_path_buf(),
            origin: origin.to_string(),
            issuer_key,
            issuer_pub,
            log_key,
            log_pub,
            log,
            envelopes,
        };
        demo.append(0..appended);
        demo
    }

    /// Append envelopes `range`, each in its own batch (one checkpoint each).
    pub fn append(&self, range: std::ops::Range<usize>) {
        for i in range {
            rcpt()
                .args(["log", "append"])
                .arg(&self.log)
                .arg(&self.envelopes[i])
                .assert()
                .success();
        }
    }

    /// The log's verifier key.
    pub fn vkey(&self) -> String {
        show(&self.log_pub, &self.origin, "verifier key")
    }

    /// The issuer's verifier key: a key form that carries its name
    /// (`gate.example`, the payloads' issuer), so it binds that name.
    pub fn issuer_vkey(&self) -> String {
        show(&self.issuer_pub, "gate.example", "verifier key")
    }

    /// The issuer's raw base64 public key.
    pub fn issuer_b64(&self) -> String {
        show(&self.issuer_pub, "gate.example", "public key")
    }

    /// `rcpt log prove --index I --size N -o FILE`.
    pub fn prove(&self, index: u64, size: u64) -> PathBuf {
        let out = self.dir.join(format!(
            "bundle-{}-{index}-{size}.json",
            self.origin.replace('/', "_")
        ));
        rcpt()
            .args(["log", "prove"])
            .arg(&self.log)
            .args([
                "--index",
                &index.to_string(),
                "--size",
                &size.to_string(),
                "-o",
            ])
            .arg(&out)
            .assert()
            .success();
        out
    }

    /// The latest checkpoint, written to a file.
    pub fn checkpoint_file(&self, name: &str) -> PathBuf {
        let out = rcpt()
            .args(["log", "checkpoint"])
            .arg(&self.log)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let path = self.dir.join(name);
        std::fs::write(&path, out).unwrap();
        path
    }

    /// `rcpt log consistency --from M --to N --json`, as bytes.
    pub fn consistency(&self, from: u64, to: u64) -> Vec<u8> {
        rcpt()
            .args(["log", "consistency"])
            .arg(&self.log)
            .args([
                "--from",
                &from.to_string(),
                "--to",
                &to.to_string(),
                "--json",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    }

    /// A trust file trusting the issuer and this log.
    pub fn trust_file(&self) -> PathBuf {
        let trust = serde_json::json!({
            "issuers": [{"name": "gate.example", "public_key": self.issuer_b64()}],
            "logs": [{"verifier_key": self.vkey()}],
        });
        let path = self
            .dir
            .join(format!("{}trust.json", self.origin.replace('/', "_")));
        std::fs::write(&path, trust.to_string()).unwrap();
        path
    }
}
