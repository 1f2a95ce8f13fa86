//! The status pages (`GET /`) of `rcpt log serve` and `rcpt witness
//! serve` in a real headless Chromium (issue 25): the page loads, its
//! numbers are those of the checkpoint (parsed here from `/checkpoint`),
//! the last 20 entries are listed newest first, and an issuer named
//! `<script>alert(1)</script>"'` with a right-to-left override is shown as
//! text: no element is injected, the override is shown as `[U+202E]`.
//! The witness's page gives the size and time of its last cosignature,
//! and its `/metrics` the same (read by Python's `prometheus_client`).
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

use base64::Engine;
use rcpt::keys::SigningKey;
use rcpt::tlog::note::{Checkpoint, Note};
use serve_support::{
    ISSUER, ORIGIN, Served, envelope, envelope_by, init_log, issuer_key, log_key, raw,
};
use witness_support::{WitnessProc, init_witness, logs_policy};

const HOSTILE: &str = "<script>alert(1)</script>\"'\u{202E}evil";

fn hostile_key() -> SigningKey {
    SigningKey::from_bytes(&[23u8; 32])
}

/// A trust file accepting the usual issuer and the hostile one.
fn write_trust(tmp: &std::path::Path) -> std::path::PathBuf {
    let b64 = |k: &SigningKey| {
        base64::engine::general_purpose::STANDARD.encode(k.verifying_key().as_bytes())
    };
    let trust = serde_json::json!({
        "issuers": [
            {"name": ISSUER, "public_key": b64(&issuer_key())},
            {"name": HOSTILE, "public_key": b64(&hostile_key())},
        ],
        "logs": [{"verifier_key": serve_support::log_verifier().to_string()}],
    });
    let path = tmp.join("trust.json");
    std::fs::write(&path, trust.to_string()).unwrap();
    path
}

/// Submit; the index and receipt id of the 200 answer.
fn add(served: &Served, body: &str) -> (u64, String) {
    let r = raw(served.addr, "POST", "/add", &[], body.as_bytes());
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    (
        v["index"].as_u64().unwrap(),
        v["receipt_id"].as_str().unwrap().to_string(),
    )
}

#[test]
fn the_log_page_in_chromium_matches_the_checkpoint_and_shows_a_hostile_issuer_as_text() {
    let Some(browser) = ops::chromium() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let served = Served::start(&dir, &trust, &["--batch-wait", "0ms"]);
    let mut ids = Vec::new();
    for n in 0..25u64 {
        let env = if n % 8 == 3 {
            envelope_by(n, HOSTILE, &hostile_key())
        } else {
            envelope(n)
        };
        let (index, id) = add(&served, &env);
        assert_eq!(index, n);
        ids.push((id, if n % 8 == 3 { HOSTILE } else { ISSUER }));
    }

    // The page's headers: HTML, and no script allowed.
    let head = raw(served.addr, "GET", "/", &[], b"");
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = head.header("content-security-policy").unwrap();
    assert!(
        csp.contains("script-src 'none'") && csp.contains("default-src 'none'"),
        "{csp}"
    );

    let url = format!("{}/", served.url());
    let dom = ops::dump_dom(&browser, &url, None);
    // The checkpoint, parsed here.
    let r = raw(served.addr, "GET", "/checkpoint", &[], b"");
    let note = Note::parse(&r.body).unwrap();
    let cp = Checkpoint::parse(&note.text).unwrap();
    assert_eq!(cp.size, 25);
    assert_eq!(
        ops::text_of(&dom, "origin").as_deref(),
        Some(ORIGIN),
        "{dom}"
    );
    assert_eq!(ops::text_of(&dom, "tree-size"), Some(cp.size.to_string()));
    let root = base64::engine::general_purpose::STANDARD.encode(cp.root_hash);
    assert_eq!(ops::text_of(&dom, "root-hash"), Some(root));
    assert!(
        ops::text_of(&dom, "checkpoint-age")
            .unwrap()
            .ends_with(" s")
    );
    assert_eq!(
        ops::text_of(&dom, "log-key"),
        Some(serve_support::log_verifier().to_string())
    );

    // The last 20 entries, newest first, each with its id and issuer.
    let rows: Vec<&str> = dom.split("<tr data-index=\"").skip(1).collect();
    assert_eq!(rows.len(), 20, "{dom}");
    for (k, row) in rows.iter().enumerate() {
        let index = 24 - k;
        assert!(row.starts_with(&format!("{index}\">")), "{row}");
        let (id, issuer) = &ids[index];
        assert!(row.contains(id.as_str()), "{row}");
        let shown = if *issuer == HOSTILE {
            "&lt;script&gt;alert(1)&lt;/script&gt;\"'[U+202E]evil"
        } else {
            ISSUER
        };
        assert!(
            row.contains(&format!("<bdi>{shown}</bdi>")),
            "{index}: {row}"
        );
        assert!(row.contains("<td>deny</td>"), "{row}");
    }
    // Nothing was injected: no script element, no raw override character.
    assert!(!dom.to_lowercase().contains("<script"), "{dom}");
    assert!(!dom.contains('\u{202E}'));
    assert_eq!(
        dom.matches("[U+202E]").count(),
        2,
        "entries 11 and 19 are hostile"
    );
    // The reader's commands name this server and the log key.
    let commands = dom.split("id=\"commands\">").nth(1).unwrap();
    assert!(commands.starts_with(&format!(
        "rcpt log mirror {} ./mirror --log-key",
        served.url()
    )));
    assert!(commands.contains("rcpt verify receipt.bundle.json"));

    // At a phone's width it renders (a PNG is written).
    let png = tmp.path().join("page.png");
    ops::dump_dom(&browser, &url, Some(&png));
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 1000);
    assert!(served.stop().success());
}

#[test]
fn the_witness_page_in_chromium_and_its_metrics_give_the_last_cosignature() {
    let Some(browser) = ops::chromium() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (wdir, vkey) = init_witness(tmp.path(), "w1", 71, &logs_policy(ORIGIN, &log_key()));
    let witness = WitnessProc::start(&wdir, "127.0.0.1:0");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();

    // Before any cosignature.
    let dom = ops::dump_dom(&browser, &format!("{}/", witness.url()), None);
    assert!(dom.contains(&format!("<bdi>{ORIGIN}</bdi>")), "{dom}");
    assert!(
        dom.contains("<td class=\"cosigned-size\">never</td>"),
        "{dom}"
    );

    let policy = tmp.path().join("log.policy");
    std::fs::write(
        &policy,
        format!("witness w1 {vkey} {}\nquorum w1\n", witness.url()),
    )
    .unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = serve_support::write_trust(tmp.path());
    let served = Served::start(
        &dir,
        &trust,
        &[
            "--witness-policy",
            policy.to_str().unwrap(),
            "--batch-wait",
            "0ms",
        ],
    );
    for n in 0..3 {
        add(&served, &envelope(n));
    }
    let r = raw(served.addr, "GET", "/checkpoint", &[], b"");
    let cp = Checkpoint::parse(&Note::parse(&r.body).unwrap().text).unwrap();
    assert_eq!(cp.size, 3);

    let head = raw(witness.addr, "GET", "/", &[], b"");
    assert!(
        head.header("content-security-policy")
            .unwrap()
            .contains("script-src 'none'")
    );
    let dom = ops::dump_dom(&browser, &format!("{}/", witness.url()), None);
    assert_eq!(
        ops::text_of(&dom, "witness-name").as_deref(),
        Some("witness.example/w1")
    );
    assert!(dom.contains("<td class=\"cosigned-size\">3</td>"), "{dom}");
    let at = dom
        .split("<td class=\"cosigned-at\"><time>")
        .nth(1)
        .unwrap();
    assert!(at.starts_with("20") && at[..20].ends_with('Z'), "{at}");
    assert!(!dom.to_lowercase().contains("<script"));

    if ops::parser_available() {
        let s = ops::scrape(witness.addr);
        let origin = [("origin", ORIGIN)];
        assert_eq!(
            s.get("rcpt_witness_cosigned_size", &origin),
            Some(3.0),
            "{}",
            s.text
        );
        let ts = s
            .get("rcpt_witness_cosigned_timestamp_seconds", &origin)
            .unwrap();
        assert!(ts >= before as f64 && ts < before as f64 + 600.0, "{ts}");
        let ok = [("status", "200"), ("reason", "ok")];
        // The startup checkpoint (size 0) and one per submission.
        assert!(
            s.count("rcpt_witness_add_checkpoint_answers_total", &ok) >= 3.0,
            "{}",
            s.text
        );
        let status_route = [("route", "status"), ("status", "200")];
        assert_eq!(
            s.count("rcpt_http_requests_total", &status_route),
            3.0,
            "{}",
            s.text
        );
    }
    assert!(served.stop().success());
}
