//! Test support for the HTTP service: logs, keys, receipts, a started
//! `rcpt log serve` process, a raw HTTP/1.1 exchange (so paths reach the
//! server byte for byte) and the crate's own pooled client for load.

use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::receipt::dsse::Envelope;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const ORIGIN: &str = "example.com/served";
pub const ISSUER: &str = "gate-a";

pub use super::bin;

pub fn issuer_key() -> SigningKey {
    SigningKey::from_bytes(&[21u8; 32])
}

pub fn log_key() -> SigningKey {
    SigningKey::from_bytes(&[22u8; 32])
}

pub fn log_verifier() -> NoteVerifier {
    NoteVerifier::new(ORIGIN, log_key().verifying_key()).unwrap()
}

/// A valid receipt envelope signed by `key` for issuer `issuer`, distinct per `n`.
pub fn envelope_by(n: u64, issuer: &str, key: &SigningKey) -> String {
    let payload = super::deny_payload(n, issuer, "ab");
    super::signed_envelope(&payload, key)
}

/// A valid receipt envelope of the accepted issuer, distinct per `n`.
pub fn envelope(n: u64) -> String {
    envelope_by(n, ISSUER, &issuer_key())
}

pub fn entry_of(envelope_json: &str) -> Vec<u8> {
    Envelope::from_json(envelope_json.as_bytes())
        .unwrap()
        .to_entry()
}

/// The trust file accepting `ISSUER` (and naming the log key, for `verify`).
pub fn write_trust(tmp: &Path) -> PathBuf {
    use base64::Engine;
    let pubkey =
        base64::engine::general_purpose::STANDARD.encode(issuer_key().verifying_key().as_bytes());
    let trust = serde_json::json!({
        "issuers": [{"name": ISSUER, "public_key": pubkey}],
        "logs": [{"verifier_key": log_verifier().to_string()}],
    });
    let path = tmp.join("trust.json");
    std::fs::write(&path, trust.to_string()).unwrap();
    path
}

/// `rcpt log init` of a fresh log `tmp/NAME` (key file beside it).
pub fn init_log(tmp: &Path, name: &str) -> PathBuf {
    init_log_as(tmp, &tmp.join(name), &log_key(), ORIGIN)
}

/// `rcpt log init` of a fresh log `dir` of `origin`, signed by `log_key`
/// (its key file written as `key_dir/log.key`); `dir`.
pub fn init_log_as(key_dir: &Path, dir: &Path, log_key: &SigningKey, origin: &str) -> PathBuf {
    let key = key_dir.join("log.key");
    std::fs::write(&key, rcpt::keys::signing_key_to_pem(log_key)).unwrap();
    let dir = dir.to_path_buf();
    let st = Command::new(bin())
        .args(["log", "init"])
        .arg(&dir)
        .args(["--origin", origin, "--key"])
        .arg(&key)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    dir
}

/// A running `rcpt log serve`.
pub struct Served {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: PathBuf,
}

impl Served {
    /// Start `rcpt log serve DIR --listen 127.0.0.1:0 --trust TRUST EXTRA...`
    /// and wait for the bound address on stdout.
    pub fn start(dir: &Path, trust: &Path, extra: &[&str]) -> Served {
        let stderr = dir.with_extension(format!("stderr-{}", rand_suffix()));
        let (child, addr) = super::spawn_listening(
            Command::new(bin())
                .args(["log", "serve"])
                .arg(dir)
                .args(["--listen", "127.0.0.1:0", "--trust"])
                .arg(trust)
                .args(extra),
            &stderr,
        );
        Served {
            child,
            addr,
            stderr,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args(["-s", sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// SIGTERM, then the exit status (bounded wait).
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        wait_bounded(&mut self.child, Duration::from_secs(60))
    }

    pub fn kill(mut self) {
        self.signal("KILL");
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Wait for `child` at most `limit`, else kill it and fail.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One raw HTTP/1.1 exchange (`Connection: close`): status, headers
/// (lower-case names), body.
pub struct Raw {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Raw {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Send `method target` with optional body and extra header lines.
pub fn raw(addr: SocketAddr, method: &str, target: &str, headers: &[&str], body: &[u8]) -> Raw {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    parse_response(&all, method == "HEAD")
}

fn parse_response(all: &[u8], head: bool) -> Raw {
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(all)));
    let head_text = String::from_utf8_lossy(&all[..split]).into_owned();
    let mut lines = head_text.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = if head {
        Vec::new()
    } else {
        all[split + 4..].to_vec()
    };
    Raw {
        status,
        headers,
        body,
    }
}

/// A tokio runtime for client-side load.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `POST /add` of `envelope(n)` through `client` (an answer of at most 64 KiB).
pub async fn post_envelope(
    client: &rcpt::net::client::Client,
    n: u64,
) -> Result<rcpt::net::client::Answer, rcpt::net::client::ClientError> {
    client
        .send(
            hyper::Method::POST,
            "add",
            bytes::Bytes::from(envelope(n)),
            None,
            1 << 16,
        )
        .await
}

/// Submit `envelope(n)` for every `n` of `range` to `url`, at most
/// `concurrency` at a time, asserting that each is answered 200.
pub fn submit_all(url: &str, range: std::ops::Range<u64>, concurrency: usize) {
    let rt = runtime();
    let client = rcpt::net::client::Client::new(url).unwrap();
    rt.block_on(async {
        let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(concurrency));
        let mut tasks = tokio::task::JoinSet::new();
        for n in range {
            let (client, sem) = (client.clone(), std::sync::Arc::clone(&sem));
            tasks.spawn(async move {
                let _p = sem.acquire().await.unwrap();
                post_envelope(&client, n).await.unwrap().status.as_u16()
            });
        }
        while let Some(status) = tasks.join_next().await {
            assert_eq!(status.unwrap(), 200);
        }
    });
}

/// Recursively list the regular files under `dir/tile`, as paths relative to `dir`.
pub fn tile_files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = super::files_under(&dir.join("tile"))
        .iter()
        .map(|p| p.strip_prefix(dir).unwrap().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// `rcpt log check DIR` passes; its output.
pub fn log_check(dir: &Path) -> std::process::Output {
    let out = Command::new(bin())
        .args(["log", "check"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "log check {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A crash trial's acknowledgements `acks` (receipt number -> index) are
/// each at their index of `log`, and a receipt `all` holds from an earlier
/// trial kept its index; then `all` takes them in.
pub fn check_trial_acks(
    log: &rcpt::log::Log,
    trial: u64,
    acks: std::collections::HashMap<u64, u64>,
    all: &mut std::collections::HashMap<u64, u64>,
) {
    for (&n, &index) in &acks {
        assert_eq!(
            log.entry(index).unwrap(),
            entry_of(&envelope(n)),
            "trial {trial}: receipt {n}"
        );
        if let Some(&first) = all.get(&n) {
            assert_eq!(first, index, "trial {trial}: receipt {n} moved");
        }
    }
    all.extend(acks);
}

/// Every receipt of `all` (receipt number -> index) is at its index of `log`.
pub fn assert_all_at(log: &rcpt::log::Log, all: &std::collections::HashMap<u64, u64>) {
    for (&n, &index) in all {
        assert_eq!(log.entry(index).unwrap(), entry_of(&envelope(n)));
    }
}

/// The crash trials' summary line, and that some trial was killed after
/// answering (`mid_load` of the `count` trials).
pub fn report_trials(
    count: u64,
    mid_load: u64,
    all: &std::collections::HashMap<u64, u64>,
    log: &rcpt::log::Log,
    started: std::time::Instant,
) {
    eprintln!(
        "{count} trials: {mid_load} killed with answers given, {} receipts acknowledged, log size {}, {:.1} s",
        all.len(),
        log.size(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        mid_load > 0,
        "no trial acknowledged anything before its kill"
    );
}

/// Submit fresh receipts `base + c * per_client + i` from `clients` tasks, and every fifth time
/// one acknowledged in an earlier trial, until the server goes away.
pub async fn crash_load(
    url: String,
    base: u64,
    (clients, per_client): (u64, u64),
    earlier: std::sync::Arc<Vec<(u64, u64)>>,
    acks: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u64, u64>>>,
) -> u64 {
    let client = rcpt::net::client::Client::new(&url).unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..clients {
        let (client, earlier, acks) = (
            client.clone(),
            std::sync::Arc::clone(&earlier),
            std::sync::Arc::clone(&acks),
        );
        tasks.spawn(async move {
            let mut mismatches = 0u64;
            for i in 0..per_client {
                let (n, expect) =
                    match earlier.get(((c * 7919 + i * 104_729) as usize) % earlier.len().max(1)) {
                        Some(&(n, index)) if i % 5 == 4 => (n, Some(index)),
                        _ => (base + c * per_client + i, None),
                    };
                let sent = post_envelope(&client, n).await;
                let Ok(a) = sent else { break };
                if a.status.as_u16() != 200 {
                    break;
                }
                let j: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
                let index = j["index"].as_u64().unwrap();
                if expect.is_some_and(|e| e != index) {
                    mismatches += 1;
                }
                acks.lock().unwrap().insert(n, index);
            }
            mismatches
        });
    }
    let mut mismatches = 0;
    while let Some(m) = tasks.join_next().await {
        mismatches += m.unwrap();
    }
    mismatches
}
