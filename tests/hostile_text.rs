//! Hostile text from peers (issue 34 defect 4): a logged receipt whose
//! issuer holds a newline, a carriage return, escape codes, a NUL, C1
//! controls or bidirectional overrides reaches `rcpt log monitor --format
//! human` escaped (one line per event, no control character, no override),
//! reaches the JSON output and the hook's event file exactly, and a NUL
//! does not stop a monitor with `--hook`: the hook runs and the state moves
//! (spec/security.md "Text from peers", spec/monitor.md).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::monitor::*;

use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::receipt::dsse::Envelope;
use rcpt::text::escape;
use serde_json::json;

/// Issuer names of every class the escaping covers.
const HOSTILE: [&str; 10] = [
    "gate-x\nreceipt.matched log.example/receipts #0: forged line",
    "gate-x\r\u{1b}[2Kreceipt.matched overwritten",
    "gate-x\u{1b}]0;pwned\u{7}",
    "gate-x\0after-nul",
    "gate-x\u{202e}gnp.exe",
    "gate-x\u{2066}isolate\u{2069}",
    "gate-x\u{9b}31m c1 csi",
    "gate-x\u{7f}del\ttab",
    "gate-x\u{2028}line separator",
    "gate-x\\nnot a newline",
];

/// A receipt envelope claiming `issuer` (any text), signed by `signer`.
fn envelope_by(n: u64, issuer: &str, signer: &rcpt::keys::SigningKey) -> Envelope {
    let json = json!({
        "version": 1, "issuer": issuer, "issued_at": n, "substrate": "git",
        "change_id": change(n), "inverse_delta_id": null, "reversibility": null,
        "read_set": [], "precondition": null, "policy_id": format!("sha256:{}", "ab".repeat(32)),
        "verdict": {"deny": {"reasons": ["r"]}}, "applied": false, "replay": {"class": "unknown"}
    });
    let payload = rcpt::receipt::payload_from_json(json.to_string().as_bytes())
        .unwrap_or_else(|e| panic!("{issuer:?}: {e}"));
    Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload.bytes, signer)
}

/// Its log entry.
fn entry_by(n: u64, issuer: &str, signer: &rcpt::keys::SigningKey) -> Vec<u8> {
    envelope_by(n, issuer, signer).to_entry()
}

/// A log of one receipt per hostile issuer, each signed by the watched
/// key of `gate-a`: every entry is a `receipt.key_misuse` whose summary
/// quotes the claimed issuer.
fn hostile_log(tmp: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let entries: Vec<Vec<u8>> = (0u64..)
        .zip(HOSTILE)
        .map(|(n, issuer)| entry_by(n, issuer, &key(1)))
        .collect();
    let log = log_with(tmp, "log", &entries);
    let watch = write_watch(
        tmp,
        "w.json",
        &json!({"issuers": [{"name": "gate-a", "keys": [b64(&key(1))]}]}),
    );
    (log, watch)
}

/// True for a character that must never reach a terminal raw.
fn forbidden(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

#[test]
fn human_lines_escape_every_hostile_issuer_one_line_per_event() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, watch) = hostile_log(tmp.path());
    let w = watch.to_str().unwrap();
    let state = tmp.path().join("state");
    let vk = vkey();
    let args = ["--log-key", &vk, "--watch", w, "--format", "human"];
    let out = monitor_cmd(log.to_str().unwrap(), &state, &args)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), HOSTILE.len(), "{stdout}");
    for (line, issuer) in lines.iter().zip(HOSTILE) {
        assert!(
            line.starts_with("receipt.key_misuse "),
            "a forged line: {line:?}"
        );
        assert!(!line.contains(forbidden), "raw control in {line:?}");
        assert!(
            line.contains(&format!("claims the issuer {}", escape(issuer))),
            "{line:?} does not show {issuer:?} escaped"
        );
    }
    // The summary on stderr holds no raw control either.
    assert!(!stderr.contains(forbidden), "{stderr:?}");
}

#[test]
fn json_lines_keep_the_exact_issuer() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, watch) = hostile_log(tmp.path());
    let run = monitor_dir(
        &log,
        &tmp.path().join("state"),
        &["--watch", watch.to_str().unwrap()],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let issuers: Vec<&str> = run
        .events
        .iter()
        .map(|e| e["issuer"].as_str().unwrap())
        .collect();
    assert_eq!(issuers, HOSTILE);
}

#[test]
fn the_hook_runs_for_a_nul_issuer_and_its_event_file_holds_the_exact_text() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, watch) = hostile_log(tmp.path());
    let state = tmp.path().join("state");
    let seen = tmp.path().join("seen");
    std::fs::create_dir(&seen).unwrap();
    // One directory per event: the issuer as the environment gave it, the
    // names of the variables passed escaped, and the event file.
    let hook = format!(
        "d={s}/$RCPT_INDEX; mkdir $d; printf %s \"$RCPT_ISSUER\" > $d/issuer; \
         printf %s \"$RCPT_ESCAPED\" > $d/escaped; printf %s \"$RCPT_EVENT_ID\" > $d/id; \
         cp \"$RCPT_EVENT_JSON\" $d/event.json",
        s = seen.display()
    );
    let args = ["--watch", watch.to_str().unwrap(), "--hook", hook.as_str()];
    let run = monitor_dir(&log, &state, &args);
    assert_eq!(
        run.code, 1,
        "a hook that cannot run stops the round: {run:?}"
    );
    assert_eq!(run.events.len(), HOSTILE.len(), "{run:?}");
    assert_eq!(saved_next(&state), HOSTILE.len() as u64, "the state moved");
    for ((i, issuer), event) in HOSTILE.iter().enumerate().zip(&run.events) {
        let d = seen.join(i.to_string());
        let file: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join("event.json")).unwrap()).unwrap();
        assert_eq!(
            file["issuer"], *issuer,
            "the event file holds the exact text"
        );
        assert_eq!(file["id"], event["id"]);
        assert_eq!(
            std::fs::read_to_string(d.join("id")).unwrap(),
            event["id"].as_str().unwrap()
        );
        let env = std::fs::read(d.join("issuer")).unwrap();
        let escaped = std::fs::read_to_string(d.join("escaped")).unwrap();
        if issuer.contains('\0') {
            assert_eq!(env, escape(issuer).as_bytes());
            assert!(escaped.contains("RCPT_ISSUER"), "{escaped:?}");
            assert!(escaped.contains("RCPT_SUMMARY"), "{escaped:?}");
        } else {
            assert_eq!(env, issuer.as_bytes(), "passed as it is when it can be");
            assert_eq!(escaped, "");
        }
    }
    // Nothing repeats: the next round has no new event.
    let again = monitor_dir(&log, &state, &args);
    assert_eq!(again.indexes(), Vec::<u64>::new(), "{again:?}");
}

#[test]
fn receipt_inspect_shows_every_hostile_issuer_escaped_on_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    for (n, issuer) in (0u64..).zip(HOSTILE) {
        let file = tmp.path().join(format!("{n}.json"));
        std::fs::write(&file, envelope_by(n, issuer, &key(1)).to_json()).unwrap();
        let out = std::process::Command::new(support::bin())
            .args(["receipt", "inspect"])
            .arg(&file)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{text}");
        assert!(!text.contains(forbidden), "{issuer:?}: {text:?}");
        let line = text
            .lines()
            .find(|l| l.starts_with("  issuer: "))
            .unwrap_or_else(|| panic!("{text}"));
        // One line, the payload's fields after it as they were.
        assert!(text.contains(&format!("{line}\n  policy_id: ")), "{text}");
    }
}
