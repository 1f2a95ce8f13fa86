//! `rcpt log serve s3://…` on radosgw, with a standby: the serving
//! sequencer is SIGKILLed; a second `serve --wait` on the same bucket,
//! standing by, takes over when the dead one's lease expires and goes on
//! appending; every acknowledged entry is kept and `log check` passes.
//! The measured failover time is printed (no timed assertion). Skipped,
//! with the reason on stderr, when `RCPT_S3_ENDPOINT` is not set.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use support::s3 as s3_support;
mod support;
use support::serve as serve_support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::time::Instant;

use serve_support::{ORIGIN, envelope, raw};

use support::s3::S3Log as Ctx;

/// Starts `serve` (with `--wait` for a standby); the address once it listens
/// (a standby listens only once it holds the lease).
fn serve(c: &Ctx, standby: bool) -> (Child, std::sync::mpsc::Receiver<SocketAddr>) {
    let mut cmd = c.rcpt("serve");
    cmd.args([
        "--lease-ttl",
        "2",
        "--listen",
        "127.0.0.1:0",
        "--batch-wait",
        "10ms",
        "--trust",
    ])
    .arg(&c.trust)
    .arg("--key")
    .arg(&c.key);
    if standby {
        cmd.arg("--wait");
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
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

fn submit(addr: SocketAddr, n: u64) -> u64 {
    let r = raw(
        addr,
        "POST",
        "/add",
        &["Content-Type: application/json"],
        envelope(n).as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["index"].as_u64().unwrap()
}

#[test]
fn a_standby_serve_takes_over_when_the_serving_one_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((c, _, _)) = s3_support::new_log("serve", tmp.path()) else {
        return;
    };

    let (mut primary, primary_addr) = serve(&c, false);
    let primary_addr = primary_addr.recv().unwrap();
    let (mut standby, standby_addr) = serve(&c, true);
    for n in 0..5 {
        assert_eq!(submit(primary_addr, n), n);
    }
    // The standby does not listen while the primary holds the lease.
    assert!(standby_addr.try_recv().is_err());

    let killed = Instant::now();
    primary.kill().unwrap(); // SIGKILL: no release, the lease must expire
    primary.wait().unwrap();
    let standby_addr = standby_addr.recv().unwrap();
    eprintln!(
        "measured: SIGKILL of the serving sequencer to the standby listening: {:?} (lease TTL 2 s)",
        killed.elapsed()
    );
    for n in 5..10 {
        assert_eq!(submit(standby_addr, n), n);
    }
    // The same envelope again keeps its first index.
    assert_eq!(submit(standby_addr, 2), 2);
    standby.kill().unwrap();
    standby.wait().unwrap();

    let check = c.rcpt("check").output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let cp = c.rcpt("checkpoint").output().unwrap();
    assert!(String::from_utf8_lossy(&cp.stdout).starts_with(&format!("{ORIGIN}\n10\n")));
}
