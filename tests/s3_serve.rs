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

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Instant;

use serve_support::{ORIGIN, envelope, raw};

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

    let (mut primary, primary_addr) = c.serve_leased(false, Stdio::null());
    let primary_addr = primary_addr.recv().unwrap();
    let (mut standby, standby_addr) = c.serve_leased(true, Stdio::null());
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

    c.check();
    let cp = c.rcpt("checkpoint").output().unwrap();
    assert!(String::from_utf8_lossy(&cp.stdout).starts_with(&format!("{ORIGIN}\n10\n")));
}
