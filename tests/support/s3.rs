//! Shared by the tests that need a real S3 server (radosgw, started by
//! `.ci/radosgw/start.sh`): the settings from its env file's variables, a
//! fresh prefix per test, and the skip rule.

use std::sync::atomic::{AtomicU32, Ordering};

use rcpt::storage::s3::config::{Location, Settings};
use rcpt::storage::s3::sigv4::Credentials;
use rcpt::storage::s3::{BlockingClient, Endpoint};

/// The S3 server to test against, or `None` (the test then returns early,
/// after saying why on stderr). With `RCPT_REQUIRE_S3=1` (CI) a missing
/// server fails the test instead.
pub fn server() -> Option<(Settings, String)> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let Some(endpoint) = var("RCPT_S3_ENDPOINT") else {
        if var("RCPT_REQUIRE_S3").as_deref() == Some("1") {
            panic!(
                "RCPT_REQUIRE_S3=1 but RCPT_S3_ENDPOINT is not set: start radosgw with .ci/radosgw/start.sh and source its env file"
            );
        }
        super::skip(
            "no S3 server: RCPT_S3_ENDPOINT is not set (start radosgw with .ci/radosgw/start.sh, then source /tmp/rcpt-radosgw/env)",
        );
        return None;
    };
    let settings = Settings {
        endpoint: Endpoint::parse(&endpoint).expect("RCPT_S3_ENDPOINT"),
        region: var("AWS_REGION").unwrap_or_else(|| "us-east-1".into()),
        credentials: Credentials {
            access_key_id: var("AWS_ACCESS_KEY_ID").expect("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY").expect("AWS_SECRET_ACCESS_KEY"),
            session_token: var("AWS_SESSION_TOKEN"),
        },
    };
    let bucket = var("RCPT_S3_BUCKET").expect("RCPT_S3_BUCKET");
    Some((settings, bucket))
}

/// A location no other test (or earlier run) uses: `s3://BUCKET/t/NAME-PID-NANOS-N`.
pub fn fresh_location(bucket: &str, name: &str) -> Location {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Location::parse(&format!(
        "s3://{bucket}/t/{name}-{}-{nanos}-{n}",
        std::process::id()
    ))
    .unwrap()
}

/// A blocking client and a fresh location, or `None` when there is no server.
pub fn setup(name: &str) -> Option<(BlockingClient, Location)> {
    let (settings, bucket) = server()?;
    let location = fresh_location(&bucket, name);
    Some((BlockingClient::new(settings, &location).unwrap(), location))
}

/// A log on the test S3 server as the S3 tests drive it through the
/// binary: its `s3://` location, the endpoint, its trust file and log key.
pub struct S3Log {
    /// `s3://BUCKET/PREFIX`.
    pub log: String,
    /// The S3 endpoint URL.
    pub endpoint: String,
    /// The trust file of accepted issuers.
    pub trust: std::path::PathBuf,
    /// The log's private key file.
    pub key: std::path::PathBuf,
}

impl S3Log {
    /// `rcpt log SUB LOG --endpoint URL` (more arguments follow).
    pub fn rcpt(&self, sub: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(super::bin());
        cmd.args([
            "log",
            sub,
            self.log.as_str(),
            "--endpoint",
            self.endpoint.as_str(),
        ]);
        cmd
    }

    /// `rcpt log check` on this log passes.
    pub fn check(&self) {
        let out = self.rcpt("check").output().unwrap();
        assert!(
            out.status.success(),
            "log check: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// This log opened directly through `s3`, with leases of `ttl`.
    pub fn open(
        &self,
        s3: &std::sync::Arc<BlockingClient>,
        ttl: std::time::Duration,
    ) -> rcpt::log::Log {
        let store = std::sync::Arc::new(rcpt::storage::s3::S3Store::new(
            std::sync::Arc::clone(s3),
            Location::parse(&self.log).unwrap(),
            rcpt::storage::s3::LeaseConfig::new(ttl).unwrap(),
        ));
        rcpt::log::Log::open_store(store, None).unwrap()
    }

    /// `rcpt log serve` on this log: `ARGS`, then its trust file and key.
    pub fn serve_cmd(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = self.rcpt("serve");
        cmd.args(args)
            .arg("--trust")
            .arg(&self.trust)
            .arg("--key")
            .arg(&self.key);
        cmd
    }

    /// Starts [`serve_cmd`](Self::serve_cmd) with `args` (stderr discarded);
    /// the child and its address once it listens.
    pub fn serve(&self, args: &[&str]) -> (std::process::Child, std::net::SocketAddr) {
        use std::process::Stdio;
        let mut child = self
            .serve_cmd(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let addr = super::listening(&mut child, None);
        (child, addr)
    }

    /// Starts `rcpt log serve` on this log (lease TTL 2 s, `--wait` for a
    /// standby), its stderr to `stderr`; the address is sent once it
    /// listens (a standby listens only once it holds the lease).
    pub fn serve_leased(
        &self,
        standby: bool,
        stderr: std::process::Stdio,
    ) -> (
        std::process::Child,
        std::sync::mpsc::Receiver<std::net::SocketAddr>,
    ) {
        use std::io::{BufRead, BufReader};
        let mut cmd = self.serve_cmd(&[
            "--lease-ttl",
            "2",
            "--listen",
            "127.0.0.1:0",
            "--batch-wait",
            "10ms",
        ]);
        if standby {
            cmd.arg("--wait");
        }
        let mut child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if BufReader::new(stdout).read_line(&mut line).is_ok()
                && let Some(addr) = line.trim().strip_prefix("listening on ")
            {
                let _ = tx.send(addr.parse().unwrap());
            }
        });
        (child, rx)
    }
}

/// What a run of SIGKILLed appends did ([`killed_appends`]).
pub struct Trials {
    /// Appends started and killed.
    pub trials: u64,
    /// Of those, killed before their last batch.
    pub mid_stream: u64,
    /// Entries acknowledged (a line printed before the kill), all found again.
    pub acknowledged: usize,
}

/// Envelopes offered to each killed append.
const PER_TRIAL: u64 = 600;

fn trial_envelope(n: u64) -> String {
    let payload = super::deny_payload(n, "test", "cd");
    super::signed_envelope(&payload, &rcpt::keys::SigningKey::from_bytes(&[3u8; 32]))
}

/// `rcpt log SUB LOG --endpoint E --lease-ttl TTL ARGS…`
fn crash_cmd(
    log: &str,
    endpoint: &str,
    ttl: u64,
    sub: &str,
    args: &[&str],
) -> std::process::Command {
    let mut c = std::process::Command::new(super::bin());
    c.args(["log", sub, log, "--endpoint", endpoint])
        .args(["--lease-ttl", &ttl.to_string()])
        .args(args);
    c
}

/// Appends `first..first + PER_TRIAL` in batches of 10 through `endpoint`
/// and kills the process after `delay`; the (envelope number, index) of
/// every line it printed. An append that fails on its own (a store that
/// stayed down past the retries) simply acknowledges less.
fn killed_append(
    log: &str,
    endpoint: &str,
    ttl: u64,
    key: &std::path::Path,
    first: u64,
    delay: std::time::Duration,
) -> Vec<(u64, u64)> {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::sync::{Arc, Mutex};
    let mut child = crash_cmd(
        log,
        endpoint,
        ttl,
        "append",
        &["--wait", "--json", "--batch", "10", "--key"],
    )
    .arg(key)
    .arg("-")
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(match std::env::var_os("RCPT_TRIAL_STDERR") {
        Some(p) => Stdio::from(
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(p)
                .unwrap(),
        ),
        None => Stdio::null(),
    })
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines: String = (first..first + PER_TRIAL)
        .map(|n| trial_envelope(n) + "\n")
        .collect();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(lines.as_bytes());
    });
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stdout = child.stdout.take().unwrap();
    let acked2 = acked.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            // "file": "-:N" is the 1-based line of stdin.
            let n: u64 = v["file"]
                .as_str()
                .unwrap()
                .trim_start_matches("-:")
                .parse()
                .unwrap();
            acked2
                .lock()
                .unwrap()
                .push((first + n - 1, v["index"].as_u64().unwrap()));
        }
    });
    std::thread::sleep(delay);
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    let _ = writer.join();
    reader.join().unwrap();
    Arc::try_unwrap(acked).unwrap().into_inner().unwrap()
}

/// Crash trials on S3: `count` appends (`--wait`, batches of 10) SIGKILLed
/// mid-stream at spread instants, each with new envelopes, talking to the
/// store through `through` (a fault proxy's URL) or directly. Then,
/// directly: every acknowledged entry is at its index (appending it again
/// says `new: false` there) and `rcpt log check` passes. `None` when there
/// is no S3 server (skipped visibly). `ttl`: the lease TTL in seconds (a
/// faulty store needs a longer one: a holder that cannot renew in time
/// stops, as it must).
pub fn killed_appends(count: u64, through: Option<&str>, ttl: u64) -> Option<Trials> {
    use std::io::Write;
    use std::process::Stdio;
    let (settings, bucket) = server()?;
    let location = fresh_location(&bucket, "crash");
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("log.key");
    super::write_key(&key, 5);
    let log = format!("s3://{}/{}", location.bucket, location.prefix);
    let direct = settings.endpoint.url();
    let endpoint = through.unwrap_or(&direct).to_string();
    super::succeeded(
        crash_cmd(
            &log,
            &direct,
            ttl,
            "init",
            &["--origin", "example.com/s3-crash", "--key"],
        )
        .arg(&key)
        .output()
        .unwrap(),
    );

    let mut acked: Vec<(u64, u64)> = Vec::new();
    let mut mid_stream = 0;
    for trial in 0..count {
        // Kill times spread over 0.3 s to 3.3 s (a deterministic walk)
        // past the wait for the killed one's lease (TTL + a tenth; at a
        // TTL of 1 s the walk itself covers it; 2 s more for a writer opening
        // through faults): some before the lease is
        // taken, most mid-stream.
        let wait_out = if trial == 0 || ttl <= 1 {
            0
        } else {
            ttl * 1100 + 2000
        };
        let delay = std::time::Duration::from_millis(wait_out + 300 + (trial * 397) % 3000);
        let got = killed_append(&log, &endpoint, ttl, &key, trial * PER_TRIAL, delay);
        if (got.len() as u64) < PER_TRIAL {
            mid_stream += 1;
        }
        acked.extend(got);
    }

    // Every acknowledged entry is at its index: appending it again says so.
    let mut again = crash_cmd(&log, &direct, ttl, "append", &["--wait", "--json", "--key"])
        .arg(&key)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines: String = acked
        .iter()
        .map(|(n, _)| trial_envelope(*n) + "\n")
        .collect();
    let mut stdin = again.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || stdin.write_all(lines.as_bytes()).unwrap());
    let out = again.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let replies: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), acked.len());
    for ((n, index), reply) in acked.iter().zip(&replies) {
        assert_eq!(
            reply["index"].as_u64(),
            Some(*index),
            "envelope {n}: {reply}"
        );
        assert_eq!(
            reply["new"].as_bool(),
            Some(false),
            "envelope {n} was lost: {reply}"
        );
    }
    super::succeeded(
        crash_cmd(&log, &direct, ttl, "check", &[])
            .output()
            .unwrap(),
    );
    Some(Trials {
        trials: count,
        mid_stream,
        acknowledged: acked.len(),
    })
}

/// A checkpoint as observed: where (a server URL, "object"), the text.
#[derive(Clone, Debug)]
pub struct Seen {
    pub source: String,
    pub text: String,
}

/// One poll of the checkpoint object `key` through `s3`: what it holds, if
/// anything, is pushed to `seen` as observed at `object`.
pub async fn poll_object(
    s3: &std::sync::Arc<BlockingClient>,
    key: &str,
    seen: &std::sync::Mutex<Vec<Seen>>,
) {
    let (s3, key) = (std::sync::Arc::clone(s3), key.to_string());
    let got = tokio::task::spawn_blocking(move || s3.get(&key, 1 << 16))
        .await
        .unwrap();
    if let Ok(Some(o)) = got {
        seen.lock().unwrap().push(Seen {
            source: "object".into(),
            text: String::from_utf8(o.body.to_vec()).unwrap(),
        });
    }
}

/// Every acknowledged submission (`envelope(n)` -> index) is at its own
/// index of `log`: no two share one, and each index holds its entry.
pub fn assert_acks_at_own_index(log: &rcpt::log::Log, acks: &std::collections::BTreeMap<u64, u64>) {
    use super::serve::{entry_of, envelope};
    let mut indexes: Vec<u64> = acks.values().copied().collect();
    indexes.sort_unstable();
    indexes.dedup();
    assert_eq!(indexes.len(), acks.len(), "two submissions share an index");
    for (&n, &index) in acks {
        assert_eq!(
            log.entry(index).unwrap(),
            entry_of(&envelope(n)),
            "entry {n}"
        );
    }
}

/// Verifies `text` under `verifier` as a checkpoint of `origin`; its size and root.
pub fn verified(text: &str, origin: &str, verifier: &rcpt::keys::NoteVerifier) -> (u64, [u8; 32]) {
    use rcpt::tlog::note::{Checkpoint, Note, NoteCheck};
    let note = Note::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    assert!(
        matches!(
            rcpt::tlog::note::check(&note, std::slice::from_ref(verifier)),
            NoteCheck::Verified { .. }
        ),
        "a checkpoint that does not verify under the log key: {text:?}"
    );
    let cp = Checkpoint::parse(&note.text).unwrap();
    assert_eq!(cp.origin, origin);
    (cp.size, cp.root_hash)
}

/// The tree never forked: every observed checkpoint verifies, one size
/// never shows two roots, no source goes back in size, and the sizes
/// observed form one chain of consistent trees ending at `log`'s (each
/// consecutive pair checked with a consistency proof from the final tiles
/// against the two signed roots). The number of distinct sizes.
pub fn assert_no_fork(
    seen: &[Seen],
    log: &rcpt::log::Log,
    origin: &str,
    verifier: &rcpt::keys::NoteVerifier,
) -> usize {
    use std::collections::{BTreeMap, HashMap};
    let mut roots: BTreeMap<u64, [u8; 32]> = BTreeMap::new();
    let mut last_size: HashMap<&str, u64> = HashMap::new();
    for s in seen {
        let (size, root) = verified(&s.text, origin, verifier);
        let first = *roots.entry(size).or_insert(root);
        assert_eq!(first, root, "size {size} observed with two roots: a fork");
        let last = last_size.entry(s.source.as_str()).or_insert(0);
        assert!(
            *last <= size,
            "{} went back from {last} to {size}",
            s.source
        );
        *last = size;
    }
    roots.entry(log.size()).or_insert(log.root());
    assert_eq!(roots[&log.size()], log.root());
    let chain: Vec<(u64, [u8; 32])> = roots.into_iter().collect();
    for pair in chain.windows(2) {
        let ((m, root_m), (n, root_n)) = (pair[0], pair[1]);
        if m == 0 {
            continue; // the empty tree: every tree extends it
        }
        let proof = log.consistency_proof(m, n).unwrap();
        rcpt::tlog::merkle::verify_consistency(m, n, &proof, &root_m, &root_n)
            .unwrap_or_else(|e| panic!("the checkpoint of size {n} does not extend {m}: {e}"));
    }
    chain.len()
}

/// A new log on the test server, under a fresh prefix named after
/// `name`: the log key (`serve::log_key`) and a trust file
/// (`serve::write_trust`) written in `tmp`, and `rcpt log init` run
/// through the binary with origin `serve::ORIGIN`. Also the settings and
/// the location, for reading it directly. `None` when there is no server
/// (skipped visibly).
pub fn new_log(name: &str, tmp: &std::path::Path) -> Option<(S3Log, Settings, Location)> {
    let (settings, bucket) = server()?;
    let location = fresh_location(&bucket, name);
    let key = tmp.join("log.key");
    std::fs::write(
        &key,
        rcpt::keys::signing_key_to_pem(&super::serve::log_key()),
    )
    .unwrap();
    let log = S3Log {
        log: format!("s3://{}/{}", location.bucket, location.prefix),
        endpoint: settings.endpoint.url(),
        trust: super::serve::write_trust(tmp),
        key,
    };
    super::succeeded(
        log.rcpt("init")
            .args(["--origin", super::serve::ORIGIN, "--key"])
            .arg(&log.key)
            .output()
            .unwrap(),
    );
    Some((log, settings, location))
}
