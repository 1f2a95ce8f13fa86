//! `rcpt log serve` driven over real HTTP on 127.0.0.1: concurrent
//! submissions with duplicates (every bundle verifies), the read API against
//! the files with its cache headers, path tricks, every refusal code, the
//! writer lock, drain on SIGTERM, and `log submit` / `log mirror`.
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::serve as serve_support;

use bytes::Bytes;
use hyper::Method;
use rcpt::constants::BUNDLE_MEDIA_TYPE;
use rcpt::net::client::Client;
use rcpt::verify::{Outcome, Verifier};
use serve_support::*;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

fn verifier(tmp: &Path) -> Verifier {
    let trust = rcpt::trust::Trust::from_json(&std::fs::read(write_trust(tmp)).unwrap()).unwrap();
    Verifier::new(trust, None).unwrap()
}

#[test]
fn concurrent_submissions_with_duplicates_all_land_and_every_bundle_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let served = Served::start(&dir, &trust, &["--batch-wait", "30ms", "--batch-max", "64"]);
    // 300 distinct receipts, then every third again: 400 submissions, 128 at once.
    let mut work: Vec<(u64, bool)> = (0..300).map(|n| (n, n % 2 == 0)).collect();
    work.extend((0..300).step_by(3).map(|n| (n, n % 4 == 1)));
    let client = Client::new(&served.url()).unwrap();
    let rt = runtime();
    let results: Vec<(u64, bool, u16, Bytes)> = rt.block_on(async {
        let sem = Arc::new(tokio::sync::Semaphore::new(128));
        let mut tasks = tokio::task::JoinSet::new();
        for (n, bundle) in work {
            let (client, sem) = (client.clone(), Arc::clone(&sem));
            tasks.spawn(async move {
                let _p = sem.acquire().await.unwrap();
                let accept = bundle.then_some(BUNDLE_MEDIA_TYPE);
                let a = client
                    .send(
                        Method::POST,
                        "add",
                        Bytes::from(envelope(n)),
                        accept,
                        1 << 20,
                    )
                    .await
                    .unwrap();
                (n, bundle, a.status.as_u16(), a.body)
            });
        }
        let mut out = Vec::new();
        while let Some(r) = tasks.join_next().await {
            out.push(r.unwrap());
        }
        out
    });
    let v = verifier(tmp.path());
    let mut index_of: HashMap<u64, u64> = HashMap::new();
    for (n, bundle, status, body) in &results {
        assert_eq!(*status, 200, "{}", String::from_utf8_lossy(body));
        let index = if *bundle {
            let report = v.verify_bytes(body);
            assert_eq!(report.outcome(), Outcome::Verified, "{report:?}");
            let b = rcpt::bundle::Bundle::from_json(body).unwrap();
            assert_eq!(b.envelope.to_entry(), entry_of(&envelope(*n)));
            b.log.index
        } else {
            let j: serde_json::Value = serde_json::from_slice(body).unwrap();
            assert!(j["tree_size"].as_u64().unwrap() > j["index"].as_u64().unwrap());
            j["index"].as_u64().unwrap()
        };
        // A duplicate gets the first index.
        assert_eq!(*index_of.entry(*n).or_insert(index), index, "receipt {n}");
    }
    let mut indexes: Vec<u64> = index_of.values().copied().collect();
    indexes.sort_unstable();
    assert_eq!(indexes, (0..300).collect::<Vec<_>>());
    let status = served.stop();
    assert!(status.success(), "{status:?}");
    log_check(&dir);
    let log = rcpt::log::Log::open(&dir).unwrap();
    for (n, i) in &index_of {
        assert_eq!(log.entry(*i).unwrap(), entry_of(&envelope(*n)));
    }
}

#[test]
fn the_read_api_serves_the_files_with_tlog_tiles_headers_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    // 600 entries through `log append`: full and partial tiles at two levels.
    let lines: String = (0..600).map(|n| envelope(n) + "\n").collect();
    let mut child = Command::new(bin())
        .args(["log", "append"])
        .arg(&dir)
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), lines.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    let served = Served::start(&dir, &trust, &[]);
    let cp = raw(served.addr, "GET", "/checkpoint", &[], b"");
    assert_eq!(cp.status, 200);
    assert_eq!(cp.body, std::fs::read(dir.join("checkpoint")).unwrap());
    assert_eq!(cp.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(cp.header("cache-control"), Some("no-cache"));
    let files = tile_files(&dir);
    assert!(files.contains(&"tile/1/000.p/2".to_string()), "{files:?}");
    for f in &files {
        let r = raw(served.addr, "GET", &format!("/{f}"), &[], b"");
        assert_eq!(r.status, 200, "{f}");
        assert_eq!(r.body, std::fs::read(dir.join(f)).unwrap(), "{f}");
        assert_eq!(r.header("content-type"), Some("application/octet-stream"));
        let want = if f.contains(".p/") {
            "public, max-age=60"
        } else {
            "public, max-age=604800, immutable"
        };
        assert_eq!(r.header("cache-control"), Some(want), "{f}");
        let h = raw(served.addr, "HEAD", &format!("/{f}"), &[], b"");
        assert_eq!(h.status, 200);
        assert_eq!(
            h.header("content-length"),
            Some(r.body.len().to_string().as_str())
        );
    }
    // A tile file past the checkpoint (as a crashed append leaves) is not served.
    std::fs::create_dir_all(dir.join("tile/0")).unwrap();
    std::fs::write(dir.join("tile/0/005"), vec![0u8; 8192]).unwrap();
    std::fs::write(dir.join("tile/entries/002.p/89"), b"x").unwrap();
    // A symbolic link in place of a published tile is not followed.
    let real = dir.join("tile/0/000");
    let copy = dir.join("tile-0-000.copy");
    std::fs::rename(&real, &copy).unwrap();
    std::os::unix::fs::symlink(&copy, &real).unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("tile/entries/x001")).unwrap();
    for target in [
        "/tile/0/005",
        "/tile/entries/002.p/89",
        "/tile/0/000",
        "/tile/entries/x001/000",
        "/.rcpt/settings.json",
        "/.rcpt/lock",
        "/.rcpt/checkpoints/600",
        "/.rcpt/",
        "/tile/",
        "/tile/0/",
        "/tile/entries",
        "/tile/0/../../checkpoint",
        "/tile/0/./000",
        "/tile/0/001/",
        "/tile//0/001",
        "/%2e%2e/checkpoint",
        "/tile/%30/001",
        "/tile/0/00%31",
        "/checkpoint%00",
        "/CHECKPOINT",
        "/tile/0/0001",
        "/tile/00/001",
        "/tile/0/x000/001",
        "/tile/0/001.p/00",
        "/tile/1/000.p/02",
        "/log.key",
        "/../log.key",
        "/tile-0-000.copy",
        "http://evil/../checkpoint",
        "/healthz/",
        "/add/",
    ] {
        let r = raw(served.addr, "GET", target, &[], b"");
        assert_eq!(
            r.status,
            404,
            "{target}: {}",
            String::from_utf8_lossy(&r.body)
        );
        assert_eq!(r.header("cache-control"), Some("no-store"), "{target}");
        assert!(!r.body.windows(6).any(|w| w == b"origin"), "{target}");
    }
    // `/` is the status page (spec/service.md "Status page"), not a listing of DIR.
    let page = raw(served.addr, "GET", "/", &[], b"");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(!page.body.windows(5).any(|w| w == b".rcpt"));
    // Absolute-form targets name the same paths (RFC 9112), no more.
    let abs = raw(served.addr, "GET", "http://test/checkpoint", &[], b"");
    assert_eq!(abs.status, 200);
    // Methods.
    for (m, t, allow) in [
        ("POST", "/checkpoint", "GET, HEAD"),
        ("PUT", "/tile/0/001", "GET, HEAD"),
        ("DELETE", "/checkpoint", "GET, HEAD"),
        ("GET", "/add", "POST"),
        ("PUT", "/add", "POST"),
    ] {
        let r = raw(served.addr, m, t, &[], b"");
        assert_eq!(r.status, 405, "{m} {t}");
        assert_eq!(r.header("allow"), Some(allow));
    }
    let h = raw(served.addr, "GET", "/healthz", &[], b"");
    assert_eq!(h.status, 200);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&h.body).unwrap()["tree_size"],
        600
    );
    assert!(served.stop().success());
}

/// POST /add with `body`; the status and the `error` code.
fn add(addr: std::net::SocketAddr, body: &[u8]) -> (u16, String) {
    let r = raw(
        addr,
        "POST",
        "/add",
        &["Content-Type: application/json"],
        body,
    );
    let code = serde_json::from_slice::<serde_json::Value>(&r.body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_default();
    (r.status, code)
}

#[test]
fn every_refusal_has_its_status_and_the_codes_of_log_append() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let served = Served::start(&dir, &trust, &["--batch-wait", "5ms"]);
    let good = envelope(1);
    let env: serde_json::Value = serde_json::from_str(&good).unwrap();
    let with = |k: &str, v: serde_json::Value| {
        let mut e = env.clone();
        e[k] = v;
        e.to_string()
    };
    // An invariant broken (applied with deny), correctly signed.
    let bad_payload = {
        let mut payload = support::deny_payload(1, ISSUER, "ab");
        payload["applied"] = true.into();
        support::signed_unchecked(&payload, &issuer_key())
    };
    let refused_400 = [
        "not json".to_string(),
        "{}".to_string(),
        with("payloadType", "text/plain".into()),
        with("payload", "AAAA".into()),
        with("signatures", serde_json::json!([])),
        bad_payload,
        format!("{} x", good),
    ];
    // The same inputs through `log append --json`: the same reason codes.
    let lines: String = refused_400
        .iter()
        .map(|l| l.replace('\n', " ") + "\n")
        .collect();
    let other = tmp.path().join("other");
    let st = Command::new(bin())
        .args(["log", "init"])
        .arg(&other)
        .args(["--origin", ORIGIN, "--key"])
        .arg(tmp.path().join("log.key"))
        .arg("--trust")
        .arg(&trust)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let mut child = Command::new(bin())
        .args(["log", "append", "--json"])
        .arg(&other)
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), lines.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let append_codes: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["error"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(append_codes.len(), refused_400.len());
    for (body, code) in refused_400.iter().zip(&append_codes) {
        // The same code; 403 for a signature refusal, 400 for the rest.
        let status = if code.starts_with("signature.") {
            403
        } else {
            400
        };
        assert_eq!(
            add(served.addr, body.as_bytes()),
            (status, code.clone()),
            "{body}"
        );
    }
    assert!(
        append_codes.contains(&"signature.invalid".to_string()),
        "{append_codes:?}"
    );
    assert!(
        append_codes.contains(&"invariant.applied".to_string()),
        "{append_codes:?}"
    );
    // A signature that names the accepted key but does not verify: 403.
    let mut forged = env.clone();
    let sig = forged["signatures"][0]["sig"].as_str().unwrap().to_string();
    let mut raw_sig = rcpt::keys::decode_base64_any(&sig).unwrap();
    raw_sig[0] ^= 1;
    use base64::Engine;
    forged["signatures"][0]["sig"] = base64::engine::general_purpose::STANDARD
        .encode(raw_sig)
        .into();
    forged["signatures"][0]["keyid"] = rcpt::keys::keyid(&issuer_key().verifying_key()).into();
    assert_eq!(
        add(served.addr, forged.to_string().as_bytes()),
        (403, "signature.invalid".into())
    );
    // Not signed by an accepted issuer: 403; signed by one, under another name: 403.
    let stranger = rcpt::keys::SigningKey::from_bytes(&[99u8; 32]);
    assert_eq!(
        add(served.addr, envelope_by(2, ISSUER, &stranger).as_bytes()),
        (403, "signature.untrusted".into())
    );
    assert_eq!(
        add(
            served.addr,
            envelope_by(3, "gate-b", &issuer_key()).as_bytes()
        ),
        (403, "signature.issuer_mismatch".into())
    );
    // Too large: 413, by Content-Length and by a chunked body.
    let big = vec![b' '; rcpt::net::server::log::MAX_BODY_BYTES + 1];
    assert_eq!(add(served.addr, &big), (413, "envelope.too_large".into()));
    let mut chunked = format!("{:x}\r\n", big.len()).into_bytes();
    chunked.extend_from_slice(&big);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let mut s = std::net::TcpStream::connect(served.addr).unwrap();
    std::io::Write::write_all(
        &mut s,
        b"POST /add HTTP/1.1\r\nHost: t\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .unwrap();
    let _ = std::io::Write::write_all(&mut s, &chunked);
    let mut resp = Vec::new();
    let _ = std::io::Read::read_to_end(&mut s, &mut resp);
    assert!(
        resp.starts_with(b"HTTP/1.1 413"),
        "{}",
        String::from_utf8_lossy(&resp[..40.min(resp.len())])
    );
    // The good one is still accepted; nothing refused entered the log.
    assert_eq!(add(served.addr, good.as_bytes()).0, 200);
    assert!(served.stop().success());
    assert_eq!(rcpt::log::Log::open(&dir).unwrap().size(), 1);
}

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    // One permit, held by a submission waiting 3 s for its batch to close.
    let served = Served::start(&dir, &trust, &["--queue-max", "1", "--batch-wait", "3s"]);
    let addr = served.addr;
    let first = std::thread::spawn(move || add(addr, envelope(1).as_bytes()));
    // The first submission takes the permit at once; its batch closes in 3 s.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let busy = raw(addr, "POST", "/add", &[], envelope(2).as_bytes());
    assert_eq!(busy.status, 503);
    assert_eq!(busy.header("retry-after"), Some("1"));
    let j: serde_json::Value = serde_json::from_slice(&busy.body).unwrap();
    assert_eq!(j["error"], "queue_full");
    assert_eq!(first.join().unwrap().0, 200);
    assert!(served.stop().success());
}

#[test]
fn serve_needs_accepted_issuers_and_holds_the_writer_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let empty = tmp.path().join("empty.json");
    std::fs::write(&empty, "{}").unwrap();
    let out = Command::new(bin())
        .args(["log", "serve"])
        .arg(&dir)
        .args(["--listen", "127.0.0.1:0", "--trust"])
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("lists no issuers"));
    // Without --trust, a log initialised without accepted issuers cannot be served.
    let out = Command::new(bin())
        .args(["log", "serve"])
        .arg(&dir)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no accepted issuers"));
    let served = Served::start(&dir, &write_trust(tmp.path()), &[]);
    let file = tmp.path().join("e.json");
    std::fs::write(&file, envelope(7)).unwrap();
    let out = Command::new(bin())
        .args(["log", "append"])
        .arg(&dir)
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another rcpt process is writing to"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = Command::new(bin())
        .args(["log", "serve"])
        .arg(&dir)
        .args(["--listen", "127.0.0.1:0", "--trust"])
        .arg(write_trust(tmp.path()))
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    assert!(served.stop().success());
}

#[test]
fn sigterm_drains_the_queue_answers_everyone_and_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let served = Served::start(&dir, &trust, &["--batch-wait", "2s", "--batch-max", "1000"]);
    let addr = served.addr;
    let senders: Vec<_> = (0..20u64)
        .map(|n| std::thread::spawn(move || (n, add(addr, envelope(n).as_bytes()))))
        .collect();
    // Wait until all 20 are queued (the request log has no line yet: none is answered).
    std::thread::sleep(std::time::Duration::from_millis(500));
    let status = served.stop();
    assert!(status.success(), "{status:?}");
    for s in senders {
        let (n, (code, err)) = s.join().unwrap();
        assert_eq!(code, 200, "receipt {n}: {err}");
    }
    assert_eq!(rcpt::log::Log::open(&dir).unwrap().size(), 20);
    // A new connection after the drain is refused.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[test]
fn sigint_stops_the_service_like_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let mut served = Served::start(&dir, &write_trust(tmp.path()), &["--batch-wait", "1s"]);
    let addr = served.addr;
    let sender = std::thread::spawn(move || add(addr, envelope(1).as_bytes()));
    std::thread::sleep(std::time::Duration::from_millis(300));
    served.signal("INT");
    let status = wait_bounded(&mut served.child, std::time::Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    assert_eq!(sender.join().unwrap().0, 200);
    assert_eq!(rcpt::log::Log::open(&dir).unwrap().size(), 1);
}

#[test]
fn request_log_lines_are_json_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let served = Served::start(&dir, &write_trust(tmp.path()), &["--batch-wait", "0ms"]);
    raw(served.addr, "GET", "/checkpoint", &[], b"");
    add(served.addr, b"nope");
    add(served.addr, envelope(1).as_bytes());
    let stderr = served.stderr.clone();
    assert!(served.stop().success());
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(stderr)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let requests: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l.get("status").is_some()).collect();
    assert_eq!(requests.len(), 3, "{lines:?}");
    assert_eq!(requests[0]["path"], "/checkpoint");
    assert_eq!(requests[1]["status"], 400);
    assert_eq!(requests[1]["error"], "envelope.malformed");
    assert_eq!(requests[2]["status"], 200);
    assert!(requests[2]["ms"].as_f64().is_some());
    assert_eq!(lines.last().unwrap()["event"], "drained");
}

#[test]
fn submit_prints_indexes_stores_verified_bundles_and_refuses_a_wrong_log_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let served = Served::start(&dir, &write_trust(tmp.path()), &["--batch-wait", "10ms"]);
    let files: Vec<String> = (0..5u64)
        .map(|n| {
            let p = tmp.path().join(format!("r{n}.json"));
            std::fs::write(&p, envelope(n)).unwrap();
            p.to_string_lossy().into_owned()
        })
        .collect();
    let bundles = tmp.path().join("bundles");
    let stdin_lines: String = (3..8u64).map(|n| envelope(n) + "\n").collect();
    let mut child = Command::new(bin())
        .args(["log", "submit", &served.url()])
        .args(&files)
        .args([
            "-",
            "--log-key",
            &log_verifier().to_string(),
            "--bundle-dir",
        ])
        .arg(&bundles)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin_lines.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let indexes: Vec<u64> = text
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(indexes.len(), 10);
    // Input order; 3 and 4 sent twice keep their first index.
    assert_eq!(indexes[5], indexes[3]);
    assert_eq!(indexes[6], indexes[4]);
    let stored: Vec<_> = std::fs::read_dir(&bundles).unwrap().collect();
    assert_eq!(stored.len(), 8);
    let verify = Command::new(bin())
        .arg("verify")
        .args(stored.iter().map(|e| e.as_ref().unwrap().path()))
        .arg("--trust")
        .arg(write_trust(tmp.path()))
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    // Another log key: the answers do not verify, nothing is reported logged.
    let wrong = rcpt::keys::NoteVerifier::new(ORIGIN, issuer_key().verifying_key()).unwrap();
    let out = Command::new(bin())
        .args([
            "log",
            "submit",
            &served.url(),
            &files[0],
            "--log-key",
            &wrong.to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not verify"));
    // A refused envelope is reported with its code; exit status 1.
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{}").unwrap();
    let out = Command::new(bin())
        .args([
            "log",
            "submit",
            &served.url(),
            "--json",
            "--log-key",
            &log_verifier().to_string(),
        ])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("envelope.malformed"));
    assert!(served.stop().success());
}

fn mirror(url: &str, dir: &Path) -> std::process::Output {
    Command::new(bin())
        .args(["log", "mirror", url])
        .arg(dir)
        .args(["--log-key", &log_verifier().to_string()])
        .output()
        .unwrap()
}

#[test]
fn mirror_copies_checks_follows_appends_and_refuses_a_rewritten_history() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let served = Served::start(&dir, &trust, &["--batch-wait", "5ms", "--batch-max", "40"]);
    let url = served.url();
    submit_all(&url, 0..300, 64);
    let copy = tmp.path().join("mirror");
    let out = mirror(&url, &copy);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("mirrored 300 entries (was 0)"));
    log_check(&copy);
    for f in tile_files(&copy) {
        assert_eq!(
            std::fs::read(copy.join(&f)).unwrap(),
            std::fs::read(dir.join(&f)).unwrap(),
            "{f}"
        );
    }
    // Proofs from the mirror alone verify.
    let bundle = tmp.path().join("b.json");
    let st = Command::new(bin())
        .args(["log", "prove"])
        .arg(&copy)
        .args(["--index", "123", "-o"])
        .arg(&bundle)
        .status()
        .unwrap();
    assert!(st.success());
    let v = verifier(tmp.path()).verify_file(&bundle);
    assert_eq!(v.outcome(), Outcome::Verified);
    // The public files alone (no .rcpt/) check under the log key.
    let bare = tmp.path().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::copy(copy.join("checkpoint"), bare.join("checkpoint")).unwrap();
    for f in tile_files(&copy) {
        std::fs::create_dir_all(bare.join(&f).parent().unwrap()).unwrap();
        std::fs::copy(copy.join(&f), bare.join(&f)).unwrap();
    }
    support::succeeded(
        Command::new(bin())
            .args(["log", "check"])
            .arg(&bare)
            .args(["--log-key", &log_verifier().to_string()])
            .output()
            .unwrap(),
    );
    // Again, nothing new.
    let out = mirror(&url, &copy);
    assert!(String::from_utf8_lossy(&out.stdout).contains("up to date: 300"));
    // More appends: incremental.
    submit_all(&url, 300..700, 64);
    // A damaged staged file (as a bad earlier fetch would leave) fails the
    // check; the mirror is kept and the staging area emptied.
    let stage = rcpt::net::client::mirror::staging(&copy);
    std::fs::create_dir_all(stage.join("tile/entries")).unwrap();
    std::fs::write(stage.join("tile/entries/001"), b"\x00\x01x").unwrap();
    let before = std::fs::read(copy.join("checkpoint")).unwrap();
    let out = mirror(&url, &copy);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("do not match"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(copy.join("checkpoint")).unwrap(), before);
    assert!(!stage.exists());
    // Resume: files staged by an interrupted run are not fetched again.
    for f in tile_files(&dir) {
        if !copy.join(&f).exists() {
            std::fs::create_dir_all(stage.join(&f).parent().unwrap()).unwrap();
            std::fs::copy(dir.join(&f), stage.join(&f)).unwrap();
        }
    }
    let out = mirror(&url, &copy);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("mirrored 700 entries (was 300), fetched 0 files"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    log_check(&copy);
    support::succeeded(
        Command::new(bin())
            .args(["log", "consistency"])
            .arg(&copy)
            .args(["--from", "300"])
            .output()
            .unwrap(),
    );
    assert!(served.stop().success());
    // A log with the same key and origin but another history, longer.
    let forged = init_log(tmp.path(), "forged");
    let served = Served::start(
        &forged,
        &trust,
        &["--batch-wait", "0ms", "--batch-max", "100"],
    );
    submit_all(&served.url(), 10_000..10_900, 64);
    let before = std::fs::read(copy.join("checkpoint")).unwrap();
    let out = mirror(&served.url(), &copy);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("rewrote its history"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(copy.join("checkpoint")).unwrap(), before);
    assert!(!rcpt::net::client::mirror::staging(&copy).exists());
    log_check(&copy);
    // Shorter than the mirror: a rollback, refused.
    let short = init_log(tmp.path(), "short");
    drop(served);
    let served = Served::start(&short, &trust, &["--batch-wait", "0ms"]);
    submit_all(&served.url(), 0..5, 64);
    let out = mirror(&served.url(), &copy);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rolled back"));
    assert!(served.stop().success());
}
