//! `rcpt witness serve`: the real binary on 127.0.0.1:0, spoken to over
//! HTTP. Every tlog-witness v1 `add-checkpoint` status (200, 400, 403,
//! 404, 409 with `text/x.tlog.size`, 422), 405 and 404 for other methods
//! and paths, the body cap, concurrent requests for one origin, and a
//! SIGKILL under load followed by a restart.
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

use bytes::Bytes;
use rcpt::keys::SigningKey;
use rcpt::net::client::Client;
use rcpt::tlog::cosig::{CosigStatus, WitnessVerifier};
use rcpt::tlog::note::Note;
use serve_support::raw;
use std::path::Path;
use witness_support::{WitnessProc, body, checkpoint, init_witness, logs_policy, tree};

const ORIGIN: &str = "example.com/witnessed-over-http";

fn log_key() -> SigningKey {
    SigningKey::from_bytes(&[31; 32])
}

/// One `POST /add-checkpoint` with the crate's HTTP client: status,
/// content type, body.
fn post(rt: &tokio::runtime::Runtime, url: &str, body: String) -> (u16, String, String) {
    let client = Client::new(url).unwrap();
    let a = rt
        .block_on(client.send(
            hyper::Method::POST,
            "add-checkpoint",
            Bytes::from(body),
            None,
            1 << 20,
        ))
        .unwrap();
    let ct = a
        .headers
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (
        a.status.as_u16(),
        ct,
        String::from_utf8(a.body.to_vec()).unwrap(),
    )
}

/// The answer's lines verify as this witness's cosignature over `note`.
fn assert_cosigned(note: &str, lines: &str, vkey: &str) {
    assert!(lines.starts_with("\u{2014} witness.example/"), "{lines}");
    assert!(lines.ends_with('\n'), "{lines:?}");
    let w = WitnessVerifier::parse(vkey).unwrap();
    let n = Note::parse(format!("{note}{lines}").as_bytes()).unwrap();
    assert!(
        matches!(
            rcpt::tlog::cosig::check(&n, &[w])[0],
            CosigStatus::Verified { .. }
        ),
        "{lines}"
    );
}

fn setup(tmp: &Path) -> (WitnessProc, String) {
    let (dir, vkey) = init_witness(tmp, "w1", 41, &logs_policy(ORIGIN, &log_key()));
    (WitnessProc::start(&dir, "127.0.0.1:0"), vkey)
}

#[test]
fn every_add_checkpoint_status_over_http() {
    let tmp = tempfile::tempdir().unwrap();
    let (w, vkey) = setup(tmp.path());
    let rt = serve_support::runtime();
    let url = w.url();
    let t = tree(12, "a");
    let key = log_key();

    // 200: first checkpoint, old 0, no proof.
    let (st, ct, lines) = post(&rt, &url, body(ORIGIN, &key, &t, 0, 5));
    assert_eq!(st, 200, "{lines}");
    assert!(ct.starts_with("text/plain"), "{ct}");
    assert_cosigned(&checkpoint(ORIGIN, &key, &t, 5), &lines, &vkey);

    // 409: the old size is stale; the body is the size, text/x.tlog.size.
    let (st, ct, text) = post(&rt, &url, body(ORIGIN, &key, &t, 0, 9));
    assert_eq!(
        (st, ct.as_str(), text.as_str()),
        (409, "text/x.tlog.size", "5\n")
    );

    // 200: from 5 to 9 with a consistency proof.
    let (st, _, lines) = post(&rt, &url, body(ORIGIN, &key, &t, 5, 9));
    assert_eq!(st, 200, "{lines}");
    assert_cosigned(&checkpoint(ORIGIN, &key, &t, 9), &lines, &vkey);

    // 400: malformed, and old size above the checkpoint size.
    let (st, _, text) = post(&rt, &url, "old 01\n\n".to_string());
    assert_eq!(st, 400, "{text}");
    let (st, _, text) = post(
        &rt,
        &url,
        rcpt::witness::AddCheckpointRequest::to_body(10, &[], &checkpoint(ORIGIN, &key, &t, 9)),
    );
    assert_eq!(st, 400, "{text}");
    assert!(text.contains("old size 10"), "{text}");

    // 404: an origin the witness does not witness.
    let (st, _, text) = post(&rt, &url, body("example.com/other", &key, &t, 0, 3));
    assert_eq!(st, 404, "{text}");

    // 403: the origin's name, signed by another key.
    let other = SigningKey::from_bytes(&[32; 32]);
    let (st, _, text) = post(&rt, &url, body(ORIGIN, &other, &t, 9, 12));
    assert_eq!(st, 403, "{text}");

    // 422: a fork of the cosigned history (the proof is the fork's own).
    let fork = tree(12, "b");
    let (st, _, text) = post(&rt, &url, body(ORIGIN, &key, &fork, 9, 12));
    assert_eq!(st, 422, "{text}");
    // 422: same size, other root.
    let (st, _, text) = post(&rt, &url, body(ORIGIN, &key, &fork, 9, 9));
    assert_eq!(st, 422, "{text}");
    // After all the refusals the witness still stands at 9.
    let (st, _, text) = post(&rt, &url, body(ORIGIN, &key, &t, 0, 12));
    assert_eq!((st, text.as_str()), (409, "9\n"));

    // 405 for other methods on the path (Allow: POST), 404 elsewhere.
    let r = raw(w.addr, "GET", "/add-checkpoint", &[], b"");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST"));
    let r = raw(w.addr, "PUT", "/add-checkpoint", &[], b"x");
    assert_eq!(r.status, 405);
    let r = raw(w.addr, "POST", "/add-checkpointx", &[], b"");
    assert_eq!(r.status, 404);
    let r = raw(w.addr, "GET", "/nothing-here", &[], b"");
    assert_eq!(r.status, 404);
    // `/` is the witness's status page (spec/witness.md "Status page and metrics").
    let r = raw(w.addr, "GET", "/", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));

    // The body cap: refused by its declared length, unread.
    let big = vec![b'a'; rcpt::net::server::witness::MAX_WITNESS_BODY_BYTES + 1];
    let r = raw(w.addr, "POST", "/add-checkpoint", &[], &big);
    assert_eq!(r.status, 413);

    // Monitoring: the latest cosigned checkpoint by origin hash.
    let hash = rcpt::witness::origin_hash(ORIGIN);
    let r = raw(w.addr, "GET", &format!("/{hash}/checkpoint"), &[], b"");
    assert_eq!(r.status, 200);
    let note = String::from_utf8(r.body).unwrap();
    assert!(note.starts_with(&format!("{ORIGIN}\n9\n")), "{note}");
    let unknown = rcpt::witness::origin_hash("example.com/other");
    let r = raw(w.addr, "GET", &format!("/{unknown}/checkpoint"), &[], b"");
    assert_eq!(r.status, 404);
    let r = raw(w.addr, "POST", &format!("/{hash}/checkpoint"), &[], b"");
    assert_eq!(r.status, 405);
}

#[test]
fn concurrent_requests_from_one_old_size_are_cosigned_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (w, vkey) = setup(tmp.path());
    let t = tree(40, "a");
    let key = log_key();
    let rt = serve_support::runtime();
    assert_eq!(post(&rt, &w.url(), body(ORIGIN, &key, &t, 0, 4)).0, 200);
    for round in 0..3u64 {
        let old = 4 + round * 12;
        // Twelve requests from the same old size to twelve new sizes, at once.
        let answers: Vec<(u64, u16, String)> = std::thread::scope(|s| {
            let handles: Vec<_> = (1..=12u64)
                .map(|k| {
                    let (url, t, key) = (w.url(), &t, &key);
                    s.spawn(move || {
                        let rt = serve_support::runtime();
                        let (st, _, text) = post(&rt, &url, body(ORIGIN, key, t, old, old + k));
                        (old + k, st, text)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<&(u64, u16, String)> = answers.iter().filter(|a| a.1 == 200).collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        let size = won[0].0;
        assert_cosigned(&checkpoint(ORIGIN, &key, &t, size), &won[0].2, &vkey);
        for (_, st, text) in answers.iter().filter(|a| a.1 != 200) {
            assert_eq!((*st, text.clone()), (409, format!("{size}\n")));
        }
        // Move the witness to the next round's old size.
        let next = 4 + (round + 1) * 12;
        if size != next {
            let (st, _, text) = post(&rt, &w.url(), body(ORIGIN, &key, &t, size, next));
            assert_eq!(st, 200, "{text}");
        }
    }
}

#[test]
fn sigkill_under_load_then_restart_keeps_every_answered_cosignature() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, vkey) = init_witness(tmp.path(), "w1", 41, &logs_policy(ORIGIN, &log_key()));
    let mut w = WitnessProc::start(&dir, "127.0.0.1:0");
    let t = tree(2000, "a");
    let key = log_key();
    let url = w.url();
    // Four clients race the witness forward, each following the 409s;
    // the witness is killed while they run.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (answered, attempted) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u64)
            .map(|c| {
                let (url, t, key, stop) = (url.clone(), &t, &key, &stop);
                s.spawn(move || {
                    let rt = serve_support::runtime();
                    let client = Client::new(&url).unwrap();
                    let (mut old, mut best, mut tried) = (0u64, 0u64, Vec::new());
                    let mut size = 1 + c;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) && size < 2000 {
                        let b = Bytes::from(body(ORIGIN, key, t, old.min(size), size));
                        tried.push(size);
                        let sent = rt.block_on(client.send(
                            hyper::Method::POST,
                            "add-checkpoint",
                            b,
                            None,
                            1 << 16,
                        ));
                        let Ok(a) = sent else { break };
                        match a.status.as_u16() {
                            200 => {
                                best = best.max(size);
                                old = size;
                                size += 1 + c;
                            }
                            409 => {
                                old = String::from_utf8_lossy(&a.body).trim().parse().unwrap();
                                if old >= size {
                                    size = old + 1 + c;
                                }
                            }
                            other => panic!("{other}: {:?}", a.body),
                        }
                    }
                    (best, tried)
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(700));
        w.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let results: Vec<(u64, Vec<u64>)> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        let answered = results.iter().map(|r| r.0).max().unwrap();
        let attempted: Vec<u64> = results.into_iter().flat_map(|r| r.1).collect();
        (answered, attempted)
    });
    assert!(answered > 0, "no request was cosigned before the kill");
    // Restart on the same directory: the record is whole, at least as far
    // as every answered 200, and one of the sizes asked for.
    let w = WitnessProc::start(&dir, "127.0.0.1:0");
    let rt = serve_support::runtime();
    let (st, ct, text) = post(&rt, &w.url(), body(ORIGIN, &key, &t, 0, 1999));
    assert_eq!((st, ct.as_str()), (409, "text/x.tlog.size"), "{text}");
    let recorded: u64 = text.trim().parse().unwrap();
    assert!(
        recorded >= answered,
        "recorded {recorded} < answered {answered}"
    );
    assert!(
        attempted.contains(&recorded),
        "{recorded} was never asked for"
    );
    // The stored note is the cosigned checkpoint of that size.
    let hash = rcpt::witness::origin_hash(ORIGIN);
    let r = raw(w.addr, "GET", &format!("/{hash}/checkpoint"), &[], b"");
    assert_eq!(r.status, 200);
    let stored = String::from_utf8(r.body).unwrap();
    let cp = checkpoint(ORIGIN, &key, &t, recorded);
    let (body_text, _) = cp.split_once("\n\n").unwrap();
    assert!(stored.starts_with(&format!("{body_text}\n\n")), "{stored}");
    let n = Note::parse(stored.as_bytes()).unwrap();
    let wv = WitnessVerifier::parse(&vkey).unwrap();
    assert!(matches!(
        rcpt::tlog::cosig::check(&n, &[wv])[0],
        CosigStatus::Verified { .. }
    ));
    // And it goes on from there.
    let (st, _, text) = post(&rt, &w.url(), body(ORIGIN, &key, &t, recorded, 1999));
    assert_eq!(st, 200, "{text}");
    // No stray temporary file counts as state.
    assert!(dir.join("state").read_dir().unwrap().count() >= 1);
}

/// `witness serve` and offline `witness cosign` on one directory share the
/// record and its compare-and-swap: each sees what the other cosigned.
#[test]
fn served_and_offline_cosigning_share_one_record() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = init_witness(tmp.path(), "w1", 41, &logs_policy(ORIGIN, &log_key()));
    let w = WitnessProc::start(&dir, "127.0.0.1:0");
    let rt = serve_support::runtime();
    let t = tree(20, "a");
    let key = log_key();
    assert_eq!(post(&rt, &w.url(), body(ORIGIN, &key, &t, 0, 5)).0, 200);
    // Offline, from the size the server cosigned.
    let cp = tmp.path().join("cp9");
    std::fs::write(&cp, checkpoint(ORIGIN, &key, &t, 9)).unwrap();
    let proof = tmp.path().join("proof");
    let lines: Vec<String> = rcpt::tlog::merkle::prove_consistency(5, 9, &t)
        .unwrap()
        .iter()
        .map(|h| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(h)
        })
        .collect();
    std::fs::write(&proof, lines.join("\n") + "\n").unwrap();
    let cosign = |old: &str| {
        std::process::Command::new(witness_support::bin())
            .args(["witness", "cosign"])
            .arg(&dir)
            .args(["--old-size", old, "--proof"])
            .arg(&proof)
            .arg(&cp)
            .output()
            .unwrap()
    };
    // From 0 the offline command is told the server's size.
    let out = cosign("0");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--old-size 5"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(cosign("5").status.success());
    // The server now answers from the offline cosignature.
    let (st, _, text) = post(&rt, &w.url(), body(ORIGIN, &key, &t, 5, 12));
    assert_eq!((st, text.as_str()), (409, "9\n"));
    assert_eq!(post(&rt, &w.url(), body(ORIGIN, &key, &t, 9, 12)).0, 200);
}

/// A client that never finishes its body gets 408 after the body timeout,
/// and one that never finishes its headers is disconnected: neither holds
/// the witness, which answers others meanwhile.
#[test]
fn slow_clients_time_out() {
    use std::io::{Read, Write};
    let tmp = tempfile::tempdir().unwrap();
    let (w, _) = setup(tmp.path());
    let mut body_stalled = std::net::TcpStream::connect(w.addr).unwrap();
    body_stalled
        .write_all(
            b"POST /add-checkpoint HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nold 0\n",
        )
        .unwrap();
    let mut head_stalled = std::net::TcpStream::connect(w.addr).unwrap();
    head_stalled
        .write_all(b"POST /add-checkpoint HTTP/1.1\r\nHost: t\r\n")
        .unwrap();
    // Meanwhile the witness answers.
    let rt = serve_support::runtime();
    let t = tree(3, "a");
    assert_eq!(
        post(&rt, &w.url(), body(ORIGIN, &log_key(), &t, 0, 3)).0,
        200
    );
    let limit = rcpt::net::server::witness::WITNESS_BODY_TIMEOUT * 6;
    for s in [&body_stalled, &head_stalled] {
        s.set_read_timeout(Some(limit)).unwrap();
    }
    let mut answer = Vec::new();
    body_stalled.read_to_end(&mut answer).unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    let mut rest = Vec::new();
    // Closed by the server (EOF, possibly after a 408 head), not left open.
    head_stalled.read_to_end(&mut rest).unwrap();
}

/// Two `witness serve` processes on one directory: concurrent requests
/// from one old size, spread over both, are still cosigned once (the
/// compare-and-swap lock is the file system's, across processes).
#[test]
fn two_processes_on_one_directory_cosign_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, _) = init_witness(tmp.path(), "w1", 41, &logs_policy(ORIGIN, &log_key()));
    let procs = [
        WitnessProc::start(&dir, "127.0.0.1:0"),
        WitnessProc::start(&dir, "127.0.0.1:0"),
    ];
    let t = tree(60, "a");
    let key = log_key();
    let rt = serve_support::runtime();
    assert_eq!(
        post(&rt, &procs[0].url(), body(ORIGIN, &key, &t, 0, 4)).0,
        200
    );
    let mut old = 4;
    for round in 0..4u64 {
        let answers: Vec<(u64, u16, String)> = std::thread::scope(|s| {
            let handles: Vec<_> = (1..=10u64)
                .map(|k| {
                    let (url, t, key) = (procs[(k % 2) as usize].url(), &t, &key);
                    s.spawn(move || {
                        let rt = serve_support::runtime();
                        let (st, _, text) = post(&rt, &url, body(ORIGIN, key, t, old, old + k));
                        (old + k, st, text)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<u64> = answers.iter().filter(|a| a.1 == 200).map(|a| a.0).collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        for (_, st, text) in answers.iter().filter(|a| a.1 != 200) {
            assert_eq!((*st, text.clone()), (409, format!("{}\n", won[0])));
        }
        old = won[0];
    }
}
