//! A size a peer claims never drives the work (issue 20, class 1): a log
//! whose validly signed checkpoint claims 2^40 entries makes `log mirror`
//! fetch a batch, find the first file missing and stop, exit 1 with the
//! reason; before, it built the whole tile list and aborted at 580 MiB.
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
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// A one-thread HTTP server: `/checkpoint` answers `note`, anything else 404.
fn hostile_log(note: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let note = note.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                let n = s.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]);
                let (status, body) = if head.starts_with("GET /checkpoint ") {
                    ("200 OK", note)
                } else {
                    ("404 Not Found", String::new())
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    format!("http://{addr}/")
}

#[test]
fn a_signed_checkpoint_claiming_2_pow_40_entries_is_not_allocated_by() {
    let key = log_key();
    let text = format!("{ORIGIN}\n{}\n{}\n", 1u64 << 40, "A".repeat(43) + "=");
    let note = rcpt::tlog::note::sign(&text, ORIGIN, &key).unwrap();
    let url = hostile_log(note);
    let tmp = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let mut child = std::process::Command::new(bin())
        .args(["log", "mirror", &url])
        .arg(tmp.path().join("m"))
        .args(["--log-key", &log_verifier().to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(60));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    // Exit 1 with the reason, not a signal (SIGABRT on allocation failure).
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("not found"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(60));
}
