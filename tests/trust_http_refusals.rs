//! hyper's own refusals (431, 414, 400: before any handler runs) carry the
//! headers every answer carries (spec/service.md), checked with a raw TCP
//! client against a real `rcpt log serve` (issue 20, class 6).
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::serve as serve_support;

use serve_support::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Send `request` raw, read the answer until the server closes.
fn raw_answer(url: &str, request: &[u8]) -> String {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn assert_headed(answer: &str, status: &str) {
    let head = answer
        .split("\r\n\r\n")
        .next()
        .unwrap()
        .to_ascii_lowercase();
    assert!(
        head.starts_with(&format!("http/1.1 {status}")),
        "{answer:?}"
    );
    assert!(
        head.contains("\r\nx-content-type-options: nosniff"),
        "{answer:?}"
    );
    assert!(head.contains("\r\ncache-control: no-store"), "{answer:?}");
    assert!(head.contains("\r\ncontent-length: "), "{answer:?}");
}

#[test]
fn hyper_refusals_carry_the_headers_of_every_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let served = Served::start(&dir, &write_trust(tmp.path()), &[]);
    let url = served.url();
    // Too many header fields: 431.
    let mut many = String::from("GET /checkpoint HTTP/1.1\r\nhost: x\r\n");
    for i in 0..200 {
        many.push_str(&format!("x-h{i}: v\r\n"));
    }
    many.push_str("\r\n");
    assert_headed(&raw_answer(&url, many.as_bytes()), "431");
    // A URI over hyper's limit: 414.
    let long = format!("GET /{} HTTP/1.1\r\nhost: x\r\n\r\n", "a".repeat(70_000));
    assert_headed(&raw_answer(&url, long.as_bytes()), "414");
    // Garbage: 400.
    assert_headed(&raw_answer(&url, b"\x01\x02 nonsense\r\n\r\n"), "400");
    // A normal answer is unchanged: the headers once, not twice.
    let ok = raw_answer(
        &url,
        b"GET /checkpoint HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    let head = ok.split("\r\n\r\n").next().unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{ok:?}");
    assert_eq!(head.matches("x-content-type-options").count(), 1, "{ok:?}");
    served.stop();
}
