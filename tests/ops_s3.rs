//! The lease in `/metrics` of `rcpt log serve s3://…` on radosgw (issue
//! 25): while held, `rcpt_lease_held` is 1 and successful renewals count
//! up; once another writer overwrites the lease object (a take-over), the
//! next renewal is refused, the lease is lost, `rcpt_lease_held` is 0 and
//! the failed renewal is counted; the service drops its writer
//! (`rcpt_writer_up` 0, `/add` 503) and, once the other holder's lease
//! runs out unrenewed, takes it and serves again, its renewal counters
//! going on. Read by Python's `prometheus_client`.
//! Skipped, with the reason, without `RCPT_S3_ENDPOINT`.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "support/ops.rs"]
mod ops;
mod support;
use support::s3 as s3_support;
use support::serve as serve_support;

use serve_support::{envelope, raw};
use std::time::{Duration, Instant};

#[test]
fn a_lost_lease_shows_in_the_metrics() {
    if !ops::parser_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some((c, settings, location)) = s3_support::new_log("ops-lease", tmp.path()) else {
        return;
    };
    let client = rcpt::storage::s3::BlockingClient::new(settings.clone(), &location).unwrap();
    let (mut child, addr) = c.serve(&[
        "--lease-ttl",
        "2",
        "--listen",
        "127.0.0.1:0",
        "--batch-wait",
        "0ms",
    ]);
    let r = raw(addr, "POST", "/add", &[], envelope(1).as_bytes());
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    // Held, and renewed every 500 ms (TTL 2 s).
    let s1 = ops::scrape(addr);
    assert_eq!(s1.get("rcpt_lease_held", &[]), Some(1.0), "{}", s1.text);
    assert!(s1.get("rcpt_lease_remaining_seconds", &[]).unwrap() > 0.0);
    std::thread::sleep(Duration::from_millis(1300));
    let s2 = ops::scrape(addr);
    let renewed =
        |s: &ops::Scrape, o: &str| s.count("rcpt_lease_renewals_total", &[("outcome", o)]);
    assert!(
        renewed(&s2, "ok") >= renewed(&s1, "ok") + 1.0,
        "{}",
        s2.text
    );
    assert_eq!(renewed(&s2, "failed"), 0.0);

    // Another writer overwrites the lease object: the next renewal's
    // If-Match fails and the lease is lost.
    let lease_key = location.key(".rcpt/lease");
    let foreign =
        r#"{"rcpt_lease":1,"holder":"someone-else","seq":999,"ttl_ms":2000,"state":"held"}"#;
    client
        .put_overwrite(&lease_key, bytes::Bytes::from(foreign))
        .unwrap();
    let start = Instant::now();
    let lost = loop {
        let s = ops::scrape(addr);
        if s.get("rcpt_lease_held", &[]) == Some(0.0) {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never lost:\n{}",
            s.text
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(renewed(&lost, "failed") >= 1.0, "{}", lost.text);
    assert_eq!(lost.get("rcpt_lease_remaining_seconds", &[]), Some(0.0));
    eprintln!(
        "measured: lease loss seen in /metrics {:?} after the overwrite",
        start.elapsed()
    );
    // The lost writer refuses to append: 500 log_write_failed, counted.
    // The service drops the writer that lost its lease (`/healthz` and
    // `/add` 503 `log_unavailable`, `rcpt_writer_up` 0) and opens it again:
    // the overwriting holder never renews, so its lease is taken after its
    // TTL (spec/storage.md "Recovery of a served log").
    let away = Instant::now();
    while raw(addr, "GET", "/healthz", &[], b"").status != 503 {
        assert!(
            away.elapsed() < Duration::from_secs(10),
            "the writer was never dropped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = raw(addr, "POST", "/add", &[], envelope(2).as_bytes());
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    assert!(String::from_utf8_lossy(&r.body).contains("log_unavailable"));
    let down = ops::scrape(addr);
    assert_eq!(down.get("rcpt_writer_up", &[]), Some(0.0), "{}", down.text);
    assert_eq!(down.get("rcpt_lease_held", &[]), Some(0.0), "{}", down.text);
    let unavailable = [("status", "503"), ("reason", "log_unavailable")];
    assert_eq!(down.count("rcpt_add_answers_total", &unavailable), 1.0);
    let back = loop {
        let r = raw(addr, "POST", "/add", &[], envelope(2).as_bytes());
        if r.status == 200 {
            break away.elapsed();
        }
        assert!(
            away.elapsed() < Duration::from_secs(30),
            "the writer never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let after = ops::scrape(addr);
    eprintln!(
        "measured: lease taken over to the writer dropped and back {back:?} (the other holder's TTL 2 s)"
    );
    assert_eq!(
        after.get("rcpt_writer_up", &[]),
        Some(1.0),
        "{}",
        after.text
    );
    assert_eq!(
        after.get("rcpt_lease_held", &[]),
        Some(1.0),
        "{}",
        after.text
    );
    // No append failed: the writer was dropped before any was tried.
    assert_eq!(after.count("rcpt_append_failures_total", &[]), 0.0);
    // The renewal counters go on across the two leases, never back.
    assert!(
        renewed(&after, "ok") >= renewed(&lost, "ok"),
        "{}",
        after.text
    );
    assert!(
        renewed(&after, "failed") >= renewed(&lost, "failed"),
        "{}",
        after.text
    );
    let _ = child.kill();
    let _ = child.wait();
}
