//! `GET /metrics` of `rcpt log serve` (issue 25), read by an independent
//! parser (Python's `prometheus_client`, OpenMetrics and Prometheus text)
//! while a scripted load runs against the real binary on 127.0.0.1:
//! submissions, duplicates, refusals by reason code, a queue that fills
//! and drains, and a witness that stops. Label sets are bounded: no
//! receipt id, no address, no path among the label values.
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "support/ops.rs"]
mod ops;
mod support;
use support::serve as serve_support;
use support::witness as witness_support;

use serve_support::{
    ISSUER, ORIGIN, Served, envelope, envelope_by, init_log, log_key, raw, write_trust,
};
use std::time::Duration;
use witness_support::{WitnessProc, init_witness, logs_policy};

/// Label names any family may use.
const LABELS: &[&str] = &["route", "status", "reason", "witness", "outcome", "le"];

fn add(served: &Served, body: &[u8]) -> (u16, String) {
    let r = raw(served.addr, "POST", "/add", &[], body);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
    (r.status, v["error"].as_str().unwrap_or("").to_string())
}

fn assert_bounded_labels(s: &ops::Scrape) {
    for (k, v) in s.labels() {
        assert!(LABELS.contains(&k.as_str()), "label {k}={v}");
        assert!(
            !v.contains("blake3:") && !v.contains("127.0.0.1") && !v.contains('/'),
            "label {k}={v}"
        );
    }
}

#[test]
fn the_metrics_move_with_submissions_refusals_and_the_queue() {
    if !ops::parser_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let served = Served::start(&dir, &trust, &["--batch-wait", "300ms"]);

    let s0 = ops::scrape(served.addr);
    for (family, kind) in [
        ("rcpt_http_requests", "counter"),
        ("rcpt_add_answers", "counter"),
        ("rcpt_batch_entries", "histogram"),
        ("rcpt_batch_integration_seconds", "histogram"),
        ("rcpt_checkpoint_publication_seconds", "histogram"),
        ("rcpt_append_failures", "counter"),
        ("rcpt_queue_depth", "gauge"),
        ("rcpt_queue_capacity", "gauge"),
        ("rcpt_tree_size", "gauge"),
        ("rcpt_checkpoint_age_seconds", "gauge"),
        ("rcpt_writer_up", "gauge"),
    ] {
        // Families without a sample yet (a labelled counter never
        // incremented) do not appear; the others have their type.
        if let Some(k) = s0.kind(family) {
            assert_eq!(k, kind, "{family}");
        }
    }
    assert_eq!(s0.get("rcpt_tree_size", &[]), Some(0.0));
    assert_eq!(s0.get("rcpt_writer_up", &[]), Some(1.0));
    assert_eq!(s0.get("rcpt_queue_depth", &[]), Some(0.0));
    assert_eq!(s0.get("rcpt_queue_capacity", &[]), Some(4096.0));
    assert_eq!(s0.get("rcpt_batch_entries_count", &[]), Some(0.0));
    // No lease on a directory: the lease families are absent.
    assert!(s0.kind("rcpt_lease_held").is_none());

    // Five new receipts and one duplicate, one at a time.
    for n in 0..5 {
        assert_eq!(add(&served, envelope(n).as_bytes()).0, 200);
    }
    assert_eq!(add(&served, envelope(0).as_bytes()).0, 200);
    // Refusals, each with its reason code.
    assert_eq!(add(&served, b"{}"), (400, "envelope.malformed".into()));
    let stranger = rcpt::keys::SigningKey::from_bytes(&[99u8; 32]);
    let untrusted = envelope_by(9, ISSUER, &stranger);
    assert_eq!(
        add(&served, untrusted.as_bytes()),
        (403, "signature.untrusted".into())
    );
    let big = vec![b' '; rcpt::net::server::log::MAX_BODY_BYTES + 1];
    assert_eq!(add(&served, &big), (413, "envelope.too_large".into()));
    assert_eq!(
        raw(served.addr, "GET", "/no/such/thing", &[], b"").status,
        404
    );

    let s1 = ops::scrape(served.addr);
    assert_bounded_labels(&s1);
    let answers = "rcpt_add_answers_total";
    assert_eq!(
        s1.count(answers, &[("status", "200"), ("reason", "ok")]),
        6.0
    );
    for (status, reason) in [
        ("400", "envelope.malformed"),
        ("403", "signature.untrusted"),
        ("413", "envelope.too_large"),
    ] {
        assert_eq!(
            s1.count(answers, &[("status", status), ("reason", reason)]),
            1.0,
            "{status} {reason}\n{}",
            s1.text
        );
    }
    let requests = "rcpt_http_requests_total";
    assert_eq!(
        s1.count(requests, &[("route", "add"), ("status", "200")]),
        6.0
    );
    assert_eq!(
        s1.count(requests, &[("route", "metrics"), ("status", "200")]),
        1.0
    );
    assert_eq!(
        s1.count(requests, &[("route", "other"), ("status", "404")]),
        1.0
    );
    assert_eq!(s1.get("rcpt_tree_size", &[]), Some(5.0));
    // Sequential submissions: one batch each; every entry counted once.
    let batches = s1.get("rcpt_batch_entries_count", &[]).unwrap();
    assert_eq!(batches, 6.0, "{}", s1.text);
    assert_eq!(s1.get("rcpt_batch_entries_sum", &[]), Some(6.0));
    assert_eq!(
        s1.get("rcpt_batch_integration_seconds_count", &[]),
        Some(batches)
    );
    assert_eq!(
        s1.get("rcpt_checkpoint_publication_seconds_count", &[]),
        Some(batches)
    );
    let le_inf = [("le", "+Inf")];
    assert_eq!(
        s1.get("rcpt_batch_integration_seconds_bucket", &le_inf),
        Some(batches)
    );
    assert!(s1.get("rcpt_batch_integration_seconds_sum", &[]).unwrap() > 0.0);
    assert!(s1.get("rcpt_checkpoint_age_seconds", &[]).unwrap() < 60.0);
    assert_eq!(s1.get("rcpt_append_failures_total", &[]), Some(0.0));

    // 24 submissions at once wait for their 200 ms batch: the queue holds them.
    let addr = served.addr;
    let pending: Vec<_> = (100..124)
        .map(|n| {
            std::thread::spawn(move || {
                raw(addr, "POST", "/add", &[], envelope(n).as_bytes()).status
            })
        })
        .collect();
    let mut peak = 0.0f64;
    // Polled as plain text: a Python run per poll could outlast the batch.
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(400) && peak < 24.0 {
        peak = peak.max(ops::quick_value(served.addr, "rcpt_queue_depth").unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
    for p in pending {
        assert_eq!(p.join().unwrap(), 200);
    }
    assert!(peak >= 1.0, "the queue depth never moved: {peak}");
    let s2 = ops::scrape(served.addr);
    assert_eq!(s2.get("rcpt_queue_depth", &[]), Some(0.0));
    assert_eq!(s2.get("rcpt_tree_size", &[]), Some(29.0));
    assert_eq!(
        s2.count(answers, &[("status", "200"), ("reason", "ok")]),
        30.0
    );
    assert_eq!(s2.get("rcpt_batch_entries_sum", &[]), Some(30.0));
    // The 24 came in fewer batches than submissions (they were batched).
    let more = s2.get("rcpt_batch_entries_count", &[]).unwrap() - batches;
    assert!((1.0..24.0).contains(&more), "{more} batches for 24");
    eprintln!("measured: queue depth peak {peak} of 24 concurrent submissions, {more} batches");
    assert!(served.stop().success());
}

#[test]
fn a_witness_that_stops_shows_as_unreachable_and_falls_behind() {
    if !ops::parser_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut witnesses = Vec::new();
    let mut policy = String::new();
    for (i, name) in ["w1", "w2", "w3"].into_iter().enumerate() {
        let (wdir, vkey) = init_witness(
            tmp.path(),
            name,
            61 + i as u8,
            &logs_policy(ORIGIN, &log_key()),
        );
        let w = WitnessProc::start(&wdir, "127.0.0.1:0");
        policy.push_str(&format!("witness {name} {vkey} {}\n", w.url()));
        witnesses.push(w);
    }
    policy.push_str("group g 2 w1 w2 w3\nquorum g\n");
    let policy_file = tmp.path().join("log.policy");
    std::fs::write(&policy_file, &policy).unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let served = Served::start(
        &dir,
        &trust,
        &[
            "--witness-policy",
            policy_file.to_str().unwrap(),
            "--batch-wait",
            "0ms",
            "--witness-grace",
            "3s",
        ],
    );
    assert_eq!(add(&served, envelope(1).as_bytes()).0, 200);
    let s1 = ops::scrape(served.addr);
    assert_bounded_labels(&s1);
    let req = "rcpt_witnessing_requests_total";
    let size = "rcpt_witnessing_cosigned_size";
    for w in ["w1", "w2", "w3"] {
        assert!(
            s1.count(req, &[("witness", w), ("outcome", "cosigned")]) >= 1.0,
            "{w}\n{}",
            s1.text
        );
        assert_eq!(
            s1.count(req, &[("witness", w), ("outcome", "unreachable")]),
            0.0
        );
        assert_eq!(
            s1.get(size, &[("witness", w)]),
            Some(1.0),
            "{w}\n{}",
            s1.text
        );
    }

    // w3 stops: the next checkpoint is cosigned by w1 and w2; w3 is
    // unreachable (its attempts end within the grace) and stays at size 1.
    witnesses[2].kill();
    assert_eq!(add(&served, envelope(2).as_bytes()).0, 200);
    let s2 = ops::scrape(served.addr);
    let cosigned =
        |s: &ops::Scrape, w: &str| s.count(req, &[("witness", w), ("outcome", "cosigned")]);
    for w in ["w1", "w2"] {
        assert_eq!(cosigned(&s2, w), cosigned(&s1, w) + 1.0, "{w}");
        assert_eq!(s2.get(size, &[("witness", w)]), Some(2.0));
    }
    assert_eq!(cosigned(&s2, "w3"), cosigned(&s1, "w3"));
    assert_eq!(
        s2.count(req, &[("witness", "w3"), ("outcome", "unreachable")]),
        1.0,
        "{}",
        s2.text
    );
    assert_eq!(s2.get(size, &[("witness", "w3")]), Some(1.0));
    assert_eq!(s2.get("rcpt_tree_size", &[]), Some(2.0));
    // Publication waited for the witnesses: its histogram saw it.
    assert!(
        s2.get("rcpt_checkpoint_publication_seconds_sum", &[])
            .unwrap()
            > 0.0
    );

    // The status page says the same, as text.
    let page = raw(served.addr, "GET", "/", &[], b"");
    assert_eq!(page.status, 200);
    let html = String::from_utf8(page.body).unwrap();
    assert!(
        html.contains("<bdi>w3</bdi></td><td class=\"cosigned-size\">1</td>"),
        "{html}"
    );
    assert!(
        html.contains("<bdi>w1</bdi></td><td class=\"cosigned-size\">2</td>"),
        "{html}"
    );
    assert!(served.stop().success());
}

#[test]
fn a_full_queue_is_counted_as_503_queue_full() {
    if !ops::parser_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let served = Served::start(&dir, &trust, &["--queue-max", "1", "--batch-wait", "2s"]);
    let addr = served.addr;
    // The first submission holds the one permit until its batch closes.
    let first =
        std::thread::spawn(move || raw(addr, "POST", "/add", &[], envelope(1).as_bytes()).status);
    // Polled as plain text (a Python run per poll would be too slow here).
    let start = std::time::Instant::now();
    while ops::quick_value(served.addr, "rcpt_queue_depth") != Some(1.0) {
        assert!(
            start.elapsed() < Duration::from_millis(1500),
            "the first submission never showed in the queue"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = raw(served.addr, "POST", "/add", &[], envelope(2).as_bytes());
    assert_eq!(r.status, 503);
    assert_eq!(first.join().unwrap(), 200);
    let s = ops::scrape(served.addr);
    let busy = [("status", "503"), ("reason", "queue_full")];
    assert_eq!(s.count("rcpt_add_answers_total", &busy), 1.0, "{}", s.text);
    assert_eq!(s.get("rcpt_queue_depth", &[]), Some(0.0));
    assert!(served.stop().success());
}
