//! Shared test support, the one module every test file uses for what more
//! than one of them needs: the `rcpt` binary, the frozen corpus and its
//! verifier, key files and `key show` fields, and two small worlds made
//! through the command line as a user would: [`World`] (an issuer, a log
//! and a trust file, for gate tests) and [`Demo`] (keys, receipts and a log
//! holding some of them, for trust-boundary tests).
//!
//! Each test file that uses it says `mod support;`; helpers a file does not
//! use are allowed to be dead there.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use assert_cmd::Command;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub mod canonical;
pub mod failstop;
pub mod faultproxy;
pub mod gate;
pub mod mcp;
pub mod monitor;
pub mod readme;
pub mod s3;
pub mod serve;
pub mod witness;

/// The binary under test: `RCPT_TEST_BIN` when set (a long run pointed at
/// a frozen copy), else the one Cargo built for these tests. Every test
/// finds the binary here.
pub fn bin() -> PathBuf {
    match std::env::var_os("RCPT_TEST_BIN") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_BIN_EXE_rcpt")),
    }
}

/// The `rcpt` binary under test, as an `assert_cmd` command.
pub fn rcpt() -> Command {
    Command::new(bin())
}

/// The path of the `rcpt` binary, for `std::process::Command` (pipes,
/// children killed mid-run, a shell wrapper).
pub fn rcpt_bin() -> PathBuf {
    bin()
}

/// Where [`skip`] leaves one record per skipped test, for the summary
/// `.ci/test` prints after `cargo test` (a skip is never a silent pass).
pub fn skip_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped")
}

/// Say that the running test could not run here and why: a `skipped:`
/// line on stderr (seen with `--nocapture`) and a record under
/// [`skip_dir`] that `.ci/test` lists at the end of the run. The caller
/// then returns early. Where CI requires the missing part (the
/// `RCPT_REQUIRE_*` variables), tests fail instead of calling this.
pub fn skip(why: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed)")
        .to_string();
    // One line per skip, whatever the reason holds (a traceback, say).
    let why: String = why
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(300)
        .collect();
    let line = format!("{}::{test}: {why}", env!("CARGO_CRATE_NAME"));
    eprintln!("skipped: {line}");
    let dir = skip_dir();
    let name = format!(
        "{}-{}-{}",
        env!("CARGO_CRATE_NAME"),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    // The record is best effort: a read-only target dir still has the stderr line.
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join(name), format!("{line}\n"));
    }
}

/// xorshift64*: a seeded, reproducible source of kill instants and delays
/// for the crash trials.
pub struct Rng(pub u64);

impl Rng {
    /// The next number of the sequence.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// The address a server child (`log serve`, `witness serve`) prints on
/// its first stdout line, `listening on ADDR`; its stderr file, when it
/// has one, is shown if the line is not there.
pub fn listening(child: &mut std::process::Child, stderr: Option<&Path>) -> std::net::SocketAddr {
    use std::io::BufRead as _;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| {
            let err = stderr.map(|p| std::fs::read_to_string(p).unwrap_or_default());
            panic!("no address line: {line:?}; stderr: {err:?}")
        })
        .parse()
        .unwrap()
}

/// Spawn the server `cmd` (stdin closed, stdout piped, stderr to the file
/// `stderr`) and wait for the address it prints ([`listening`]).
pub fn spawn_listening(
    cmd: &mut std::process::Command,
    stderr: &Path,
) -> (std::process::Child, std::net::SocketAddr) {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap();
    let addr = listening(&mut child, Some(stderr));
    (child, addr)
}

/// `out`, a finished command's output, after asserting that it succeeded
/// (its stderr shown if not).
pub fn succeeded(out: std::process::Output) -> std::process::Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Write `bytes` to `child`'s piped stdin, then close it.
pub fn write_stdin(child: &mut std::process::Child, bytes: &[u8]) {
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(bytes).unwrap();
}

/// The test payload most tests need: a valid v1 deny ("r"), not applied,
/// replay unknown, by `issuer`, `issued_at` = `n` (so each `n` is another
/// receipt); change and policy ids are `fill` repeated 32 times as hex.
/// Change fields with `payload["field"] = ...` before signing.
pub fn deny_payload(n: u64, issuer: &str, fill: &str) -> Value {
    let h = fill.repeat(32);
    json!({
        "version": 1, "issuer": issuer, "issued_at": n, "substrate": "git",
        "change_id": format!("blake3:{h}"), "inverse_delta_id": null,
        "reversibility": null, "read_set": [], "precondition": null,
        "policy_id": format!("sha256:{h}"),
        "verdict": {"deny": {"reasons": ["r"]}},
        "applied": false, "replay": {"class": "unknown"}
    })
}

/// `payload` checked as a receipt payload, encoded canonically and signed
/// by `key` in a DSSE envelope (JSON text).
pub fn signed_envelope(payload: &Value, key: &rcpt::keys::SigningKey) -> String {
    let payload = rcpt::receipt::payload_from_json(payload.to_string().as_bytes()).unwrap();
    rcpt::receipt::dsse::Envelope::sign(rcpt::constants::RECEIPT_PAYLOAD_TYPE, payload.bytes, key)
        .to_json()
}

/// `payload` encoded canonically WITHOUT the issuing checks (to build a
/// receipt that breaks an invariant) and signed by `key`.
pub fn signed_unchecked(payload: &Value, key: &rcpt::keys::SigningKey) -> String {
    let value = rcpt::receipt::canonical::json::from_json(payload.to_string().as_bytes()).unwrap();
    let bytes = rcpt::receipt::canonical::dagcbor::encode(&value);
    rcpt::receipt::dsse::Envelope::sign(rcpt::constants::RECEIPT_PAYLOAD_TYPE, bytes, key).to_json()
}

/// The frozen corpus directory.
pub fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/frozen-receipts")
}

/// The path of the corpus bundle `name` (`bundles/NAME.json`).
pub fn bundle_path(name: &str) -> PathBuf {
    corpus().join("bundles").join(format!("{name}.json"))
}

/// The corpus bundle `name`, parsed as JSON.
pub fn bundle_json(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(bundle_path(name)).unwrap()).unwrap()
}

/// A verifier holding the corpus trust file (`trust.json`), no gate.
pub fn verifier() -> rcpt::verify::Verifier {
    let trust = std::fs::read(corpus().join("trust.json")).unwrap();
    rcpt::verify::Verifier::new(rcpt::trust::Trust::from_json(&trust).unwrap(), None).unwrap()
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

/// `label: value` from a command's stdout (bytes).
pub fn field(stdout: &[u8], label: &str) -> String {
    line_value(std::str::from_utf8(stdout).unwrap(), label)
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

// ---- Keys and a demo log (trust-boundary and CLI edge tests) ---------------

/// A valid v1 payload by `gate.example` for [`Demo`]: escalate, not
/// applied; `n` varies the change id and the time.
pub fn demo_payload(n: usize) -> serde_json::Value {
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
            std::fs::write(&p, demo_payload(i).to_string()).unwrap();
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
        prove_at(&self.log, index, size, &out);
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
        consistency_json(&self.log, from, to)
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

/// `rcpt log prove LOG --index I --size N -o OUT` succeeds.
pub fn prove_at(log: &Path, index: u64, size: u64, out: &Path) {
    rcpt()
        .args(["log", "prove"])
        .arg(log)
        .args([
            "--index",
            &index.to_string(),
            "--size",
            &size.to_string(),
            "-o",
        ])
        .arg(out)
        .assert()
        .success();
}

/// `rcpt log consistency LOG --from M --to N --json`, as bytes.
pub fn consistency_json(log: &Path, from: u64, to: u64) -> Vec<u8> {
    rcpt()
        .args(["log", "consistency"])
        .arg(log)
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

// ---- External test vectors (tests/vectors/…) -----------------------------

/// Hex digits (an even number of them) to bytes.
pub fn hex_bytes(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The JSON file `file` of the vector directory `dir`, parsed.
pub fn vector_json(dir: &str, file: &str) -> Value {
    serde_json::from_slice(&std::fs::read(format!("{dir}/{file}")).unwrap()).unwrap()
}

/// The names of the files in `dir`, sorted.
pub fn file_names(dir: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    files
}

// ---- The log library driven directly (log_roundtrip, s3_store) -----------

/// The log key of the library-level log tests.
pub fn lib_log_key() -> rcpt::keys::SigningKey {
    rcpt::keys::SigningKey::from_bytes(&[7u8; 32])
}

/// Entry `i`: distinct, of varying length (1..=300 bytes).
pub fn entry(i: u64) -> Vec<u8> {
    let len = 1 + (i * 37 % 300) as usize;
    let mut e = format!("entry-{i}:").into_bytes();
    e.resize(len.max(e.len()), (i % 251) as u8);
    e
}

/// Entries `range` ([`entry`]).
pub fn entries(range: std::ops::Range<u64>) -> Vec<Vec<u8>> {
    range.map(entry).collect()
}

/// Every file under `dir` with its bytes, sorted by path (to compare a
/// directory before and after).
pub fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = files_under(dir)
        .iter()
        .map(|p| (p.display().to_string(), std::fs::read(p).unwrap()))
        .collect();
    out.sort();
    out
}

/// Every file (not directory) under `dir`, at any depth, in walk order.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The signing key of seed `seed` (32 bytes of it), written to `path` as PEM.
pub fn write_key(path: &Path, seed: u8) -> rcpt::keys::SigningKey {
    let k = rcpt::keys::SigningKey::from_bytes(&[seed; 32]);
    std::fs::write(path, rcpt::keys::signing_key_to_pem(&k)).unwrap();
    k
}
