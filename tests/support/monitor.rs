//! Test support for `rcpt log monitor`: receipts by several issuers, logs
//! written by rcpt's own writer, runs of the monitor binary with their
//! events parsed, and checkpoints signed by the log key for hostile logs.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use super::serve::{self as serve_support, ORIGIN, bin, init_log, log_key};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::keys::SigningKey;
use rcpt::receipt::dsse::Envelope;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A key from a seed.
pub fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// Raw base64 of a key's public half (a watch file's key text).
pub fn b64(k: &SigningKey) -> String {
    STANDARD.encode(k.verifying_key().as_bytes())
}

/// A change id from a number.
pub fn change(n: u64) -> String {
    format!("blake3:{n:064x}")
}

/// A receipt by `issuer` about change `change`, signed by `signer`
/// (distinct per `n`): its envelope and its receipt id.
pub fn receipt(n: u64, issuer: &str, change: &str, signer: &SigningKey) -> (Envelope, String) {
    let json = format!(
        r#"{{"version":1,"issuer":"{issuer}","issued_at":{n},"substrate":"git",
        "change_id":"{change}","inverse_delta_id":null,"reversibility":null,"read_set":[],
        "precondition":null,"policy_id":"sha256:{h}","verdict":{{"deny":{{"reasons":["r"]}}}},
        "applied":false,"replay":{{"class":"unknown"}}}}"#,
        h = "ab".repeat(32)
    );
    let payload = rcpt::receipt::payload_from_json(json.as_bytes()).unwrap();
    let id = payload.id.to_string();
    (
        Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload.bytes, signer),
        id,
    )
}

/// The log entry of a receipt.
pub fn entry(n: u64, issuer: &str, change: &str, signer: &SigningKey) -> Vec<u8> {
    receipt(n, issuer, change, signer).0.to_entry()
}

/// `n` entries of `issuer` signed by `signer`, numbered from `from`.
pub fn entries(from: u64, n: u64, issuer: &str, signer: &SigningKey) -> Vec<Vec<u8>> {
    (from..from + n)
        .map(|i| entry(i, issuer, &change(i), signer))
        .collect()
}

/// A new log `tmp/name` (origin [`ORIGIN`], the shared log key) holding `entries`.
pub fn log_with(tmp: &Path, name: &str, entries: &[Vec<u8>]) -> PathBuf {
    let dir = init_log(tmp, name);
    append(&dir, entries);
    dir
}

/// Append raw entries with rcpt's log writer (no admission: malformed
/// entries land too), one batch.
pub fn append(dir: &Path, entries: &[Vec<u8>]) {
    if entries.is_empty() {
        return;
    }
    // `wait`: another test thread's fork (before its exec closes the
    // inherited descriptors) can hold the last writer's flock an instant.
    let mut w = rcpt::log::LogWriter::open(dir, &log_key(), true)
        .unwrap_or_else(|e| panic!("opening {}: {e:?}", dir.display()));
    w.append(entries)
        .unwrap_or_else(|e| panic!("appending to {}: {e:?}", dir.display()));
}

/// The log's verifier key text.
pub fn vkey() -> String {
    serve_support::log_verifier().to_string()
}

/// A checkpoint note of [`ORIGIN`] signed by the log key.
pub fn signed_checkpoint(size: u64, root: [u8; 32]) -> String {
    let body = rcpt::tlog::note::Checkpoint {
        origin: ORIGIN.to_string(),
        size,
        root_hash: root,
        extensions: Vec::new(),
    };
    rcpt::tlog::note::sign(&body.to_text(), ORIGIN, &log_key()).unwrap()
}

/// Copy a log directory's public files (checkpoint, tile/) into `to`.
pub fn copy_log(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
    let _ = std::fs::remove_dir_all(to.join(".rcpt"));
}

/// One run of the monitor.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub events: Vec<Value>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The names of the events the round delivered, in order (the
    /// `alarm.open` lines listing earlier alarms after a round are not
    /// events of the round: [`Run::open_ids`]).
    pub fn names(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| e["event"].as_str().unwrap().to_string())
            .filter(|n| n != "alarm.open")
            .collect()
    }

    /// The ids of the open alarms listed after the round (`alarm.open`).
    pub fn open_ids(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["event"] == "alarm.open")
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// The entry indexes of the events, in order.
    pub fn indexes(&self) -> Vec<u64> {
        self.events
            .iter()
            .filter_map(|e| e["index"].as_u64())
            .collect()
    }
}

/// Parse the JSON Lines of a run's stdout (a last line cut by a kill is dropped).
pub fn parse_events(stdout: &str) -> Vec<Value> {
    stdout
        .split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// The monitor's command: `rcpt log monitor SOURCE --state STATE ARGS...`.
pub fn monitor_cmd(source: &str, state: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["log", "monitor", source, "--state"])
        .arg(state)
        .args(args)
        .stdin(Stdio::null());
    c
}

/// Run the monitor to its end.
pub fn monitor(source: &str, state: &Path, args: &[&str]) -> Run {
    let out = monitor_cmd(source, state, args).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        events: parse_events(&stdout),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run the monitor with the log key on a directory.
pub fn monitor_dir(dir: &Path, state: &Path, args: &[&str]) -> Run {
    let vk = vkey();
    let mut all = vec!["--log-key", vk.as_str()];
    all.extend_from_slice(args);
    monitor(dir.to_str().unwrap(), state, &all)
}

/// The saved next index of [`ORIGIN`] in a state directory (0 when none).
pub fn saved_next(state: &Path) -> u64 {
    let Ok(dir) = std::fs::read_dir(state.join("origins")) else {
        return 0;
    };
    for e in dir.flatten() {
        if e.path().extension().is_some_and(|x| x == "json") {
            let v: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
            return v["next_index"].as_u64().unwrap();
        }
    }
    0
}

/// `rcpt log monitor ack --state STATE --all --note NOTE`: close every
/// open alarm (spec/monitor.md "Alarms"); panics unless it exits 0.
pub fn ack_all(state: &Path, note: &str) {
    let out = Command::new(bin())
        .args(["log", "monitor", "ack", "--state"])
        .arg(state)
        .args(["--all", "--note", note])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Write a watch file.
pub fn write_watch(tmp: &Path, name: &str, watch: &Value) -> PathBuf {
    let p = tmp.join(name);
    std::fs::write(&p, watch.to_string()).unwrap();
    p
}

/// The events scene (tests/monitor.rs, tests/s3_monitor.rs): one log, every entry event.
/// Issuers `gate-a` (two keys) and `gate-b` watched, `gate-c` not; change
/// 99 watched; an authorized list (file) holding some receipt ids.
pub struct Scene {
    pub tmp: tempfile::TempDir,
    pub log: std::path::PathBuf,
    pub watch: std::path::PathBuf,
}

/// The events a watched run over [`scene`]'s log reports, in order (entry 6
/// reports nothing).
pub const SCENE_EVENTS: [&str; 7] = [
    "receipt.matched",
    "receipt.unauthorized",
    "receipt.impersonation",
    "receipt.key_misuse",
    "receipt.change",
    "entry.malformed",
    "receipt.matched",
];

pub fn scene() -> Scene {
    let tmp = tempfile::tempdir().unwrap();
    let (a1, a2, b, c) = (key(1), key(2), key(3), key(4));
    let (e0, id0) = receipt(0, "gate-a", &change(0), &a1);
    let (e1, _) = receipt(1, "gate-a", &change(1), &a2);
    let (e2, _) = receipt(2, "gate-a", &change(2), &c);
    let (e3, _) = receipt(3, "gate-c", &change(3), &b);
    let (e4, _) = receipt(4, "gate-c", &change(99), &c);
    let (e6, _) = receipt(6, "gate-c", &change(6), &c);
    let (e7, id7) = receipt(7, "gate-b", &change(99), &b);
    let entries = vec![
        e0.to_entry(),
        e1.to_entry(),
        e2.to_entry(),
        e3.to_entry(),
        e4.to_entry(),
        b"not an envelope".to_vec(),
        e6.to_entry(),
        e7.to_entry(),
    ];
    let log = log_with(tmp.path(), "log", &entries);
    std::fs::write(
        tmp.path().join("issued.txt"),
        format!("# ours\n{id0}\n\n{id7}\n"),
    )
    .unwrap();
    let watch = write_watch(
        tmp.path(),
        "watch.json",
        &serde_json::json!({
            "issuers": [
                {"name": "gate-a", "keys": [b64(&a1), b64(&a2)]},
                {"name": "gate-b", "keys": [b64(&b)]}
            ],
            "change_ids": [change(99)],
            "authorized_file": "issued.txt"
        }),
    );
    Scene { tmp, log, watch }
}
