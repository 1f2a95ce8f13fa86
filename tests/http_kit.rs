//! The HTTP kit both services stand on (spec/service.md "The HTTP kit"):
//! `rcpt log serve` and `rcpt witness serve`, the real binaries on
//! 127.0.0.1:0, keep one contract: every answer carries the common
//! headers, a HEAD sends the GET's `Content-Length` and no body, another
//! method gets 405 with `Allow`, a body declared over the cap gets 413
//! unread, SIGTERM stops either with exit 0, and both write the same
//! request log line (its `error` the reason code, its `detail` the text of
//! a refusal).
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::serve as serve_support;
use support::witness as witness_support;

use serde_json::Value;
use serve_support::{Raw, Served, init_log, log_key, raw, write_trust};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;
use witness_support::{WitnessProc, body, init_witness, logs_policy, tree};

/// The headers every answer of either service carries.
fn assert_common_headers(what: &str, r: &Raw) {
    assert_eq!(
        r.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert!(r.header("content-type").is_some(), "{what}");
    assert!(r.header("cache-control").is_some(), "{what}");
    let len: usize = r.header("content-length").unwrap().parse().unwrap();
    assert_eq!(len, r.body.len(), "{what}");
}

/// Send a request head declaring a body of `declared` bytes, send none,
/// and read the answer (a server that waited for the body would time out).
fn declared_only(addr: SocketAddr, path: &str, declared: usize) -> u16 {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {declared}\r\n\r\n"
    )
    .unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
    head.split(' ').nth(1).unwrap().parse().unwrap()
}

/// The contract of the kit on one service: `write` is its write route,
/// `cap` its body limit.
fn check_service(name: &str, addr: SocketAddr, write: &str, cap: usize) {
    let none = raw(addr, "GET", "/no/such/thing", &[], b"");
    assert_eq!(none.status, 404, "{name}");
    assert_common_headers(name, &none);
    assert_eq!(none.header("cache-control"), Some("no-store"), "{name}");
    let put = raw(addr, "PUT", write, &[], b"");
    assert_eq!(put.status, 405, "{name}");
    assert_eq!(put.header("allow"), Some("POST"), "{name}");
    assert_common_headers(name, &put);
    let post = raw(addr, "POST", "/metrics", &[], b"");
    assert_eq!(post.status, 405, "{name}");
    assert_eq!(post.header("allow"), Some("GET, HEAD"), "{name}");
    assert_eq!(declared_only(addr, write, cap + 1), 413, "{name}");
    let page = raw(addr, "GET", "/", &[], b"");
    let head = raw(addr, "HEAD", "/", &[], b"");
    assert_eq!((page.status, head.status), (200, 200), "{name}");
    assert_common_headers(name, &page);
    assert!(head.body.is_empty(), "{name}");
    // The page's length may move with its age line: same order of size.
    let got: usize = head.header("content-length").unwrap().parse().unwrap();
    assert!(got.abs_diff(page.body.len()) < 16, "{name}");
    assert!(
        page.header("content-security-policy")
            .unwrap()
            .contains("script-src 'none'"),
        "{name}"
    );
    let metrics = raw(addr, "GET", "/metrics", &[], b"");
    assert_common_headers(name, &metrics);
    let text = String::from_utf8(metrics.body).unwrap();
    for series in [
        "rcpt_http_requests_total{route=\"other\",status=\"404\"} 1",
        "rcpt_http_requests_total{route=\"status\",status=\"200\"} 2",
    ] {
        assert!(text.contains(series), "{name}: {series} in\n{text}");
    }
    assert!(text.ends_with("# EOF\n"), "{name}");
}

/// The request lines (those with a status) of a service's stderr.
fn request_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l.get("status").is_some())
        .collect()
}

/// Every request line has the kit's members; a refusal's `error` is its
/// reason code and its `detail` the text; an answer that is not a refusal
/// has `error` null and no `detail`.
fn check_lines(name: &str, lines: &[Value]) {
    let members: BTreeSet<&str> = [
        "time_ms", "remote", "method", "path", "status", "bytes", "ms", "error",
    ]
    .into();
    assert!(lines.len() >= 7, "{name}: {lines:?}");
    for line in lines {
        let obj = line.as_object().unwrap();
        let keys: BTreeSet<&str> = obj.keys().map(String::as_str).collect();
        let refused = !line["error"].is_null();
        let mut want = members.clone();
        if refused {
            want.insert("detail");
            assert!(
                line["detail"].as_str().is_some_and(|d| !d.is_empty()),
                "{name}: {line}"
            );
        }
        assert_eq!(keys, want, "{name}: {line}");
        assert_eq!(refused, line["status"] != 200, "{name}: {line}");
    }
    let put = lines.iter().find(|l| l["method"] == "PUT").unwrap();
    assert_eq!(put["error"], "method_not_allowed", "{name}");
    let none = lines
        .iter()
        .find(|l| l["path"] == "/no/such/thing")
        .unwrap();
    assert_eq!(none["error"], "not_found", "{name}");
    let head = lines.iter().find(|l| l["method"] == "HEAD").unwrap();
    let get = lines
        .iter()
        .find(|l| l["method"] == "GET" && l["path"] == "/")
        .unwrap();
    assert!(
        head["bytes"]
            .as_u64()
            .unwrap()
            .abs_diff(get["bytes"].as_u64().unwrap())
            < 16
    );
}

fn sigterm(child: &mut std::process::Child) -> std::process::ExitStatus {
    let st = std::process::Command::new("kill")
        .args(["-s", "TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    serve_support::wait_bounded(child, Duration::from_secs(60))
}

#[test]
fn both_services_keep_the_kit_contract() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let served = Served::start(&dir, &write_trust(tmp.path()), &["--batch-wait", "0ms"]);
    check_service(
        "log serve",
        served.addr,
        "/add",
        rcpt::net::server::log::MAX_BODY_BYTES,
    );
    let log_stderr = served.stderr.clone();
    assert!(served.stop().success());
    check_lines(
        "log serve",
        &request_lines(&std::fs::read_to_string(log_stderr).unwrap()),
    );

    let origin = serve_support::ORIGIN;
    let (wdir, _) = init_witness(tmp.path(), "w1", 41, &logs_policy(origin, &log_key()));
    let mut witness = WitnessProc::start(&wdir, "127.0.0.1:0");
    check_service(
        "witness serve",
        witness.addr,
        "/add-checkpoint",
        rcpt::net::server::witness::MAX_WITNESS_BODY_BYTES,
    );
    // A cosignature, then a conflict: the 409's line names it.
    let t = tree(5, "");
    let cosign = body(origin, &log_key(), &t, 0, 5);
    let first = raw(
        witness.addr,
        "POST",
        "/add-checkpoint",
        &[],
        cosign.as_bytes(),
    );
    let again = raw(
        witness.addr,
        "POST",
        "/add-checkpoint",
        &[],
        cosign.as_bytes(),
    );
    assert_eq!((first.status, again.status), (200, 409));
    assert_common_headers("witness 409", &again);
    assert!(sigterm(&mut witness.child).success());
    let lines = request_lines(&witness.log());
    check_lines("witness serve", &lines);
    let conflict = lines.iter().find(|l| l["status"] == 409).unwrap();
    assert_eq!(conflict["error"], "conflict");
    assert!(
        conflict["detail"].as_str().unwrap().contains('5'),
        "{conflict}"
    );
    let cosigned = lines
        .iter()
        .find(|l| l["status"] == 200 && l["method"] == "POST");
    assert_eq!(cosigned.unwrap()["error"], Value::Null);
}
