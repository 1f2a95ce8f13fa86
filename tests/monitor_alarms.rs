//! Alarms stay open until acknowledged (issue 34 defect 5, spec/monitor.md
//! "Alarms"): a round that delivered an alarm exits 1, and so does every
//! later round while it is open, listing it again with its id (JSON and
//! human); `rcpt log monitor ack` closes alarms by id or `--all`, keeping
//! when, who and the note; an unknown id is a bad invocation (exit 2).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::bin;
use support::monitor::*;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The alarm events of the scene's log, in order.
const SCENE_ALARMS: [&str; 4] = [
    "receipt.unauthorized",
    "receipt.impersonation",
    "receipt.key_misuse",
    "entry.malformed",
];

/// `rcpt log monitor ack --state STATE ARGS...`: exit code, stdout, stderr.
fn ack(state: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(["log", "monitor", "ack", "--state"])
        .arg(state)
        .args(args)
        .env("USER", "alice")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The files of `state/acks/`, parsed.
fn acks(state: &Path) -> Vec<Value> {
    let Ok(dir) = std::fs::read_dir(state.join("acks")) else {
        return Vec::new();
    };
    let mut files: Vec<_> = dir.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .iter()
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

#[test]
fn an_alarm_stays_open_over_rounds_until_acknowledged() {
    let s = scene();
    let state = s.tmp.path().join("state");
    let w = s.watch.to_str().unwrap();
    let first = monitor_dir(&s.log, &state, &["--watch", w]);
    assert_eq!(first.code, 1, "{first:?}");
    let alarms: Vec<&Value> = first
        .events
        .iter()
        .filter(|e| SCENE_ALARMS.contains(&e["event"].as_str().unwrap()))
        .collect();
    assert_eq!(alarms.len(), 4, "{first:?}");
    let ids: Vec<String> = alarms
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert!(ids.iter().all(|i| i.len() == 16), "{ids:?}");
    assert_eq!(
        first.open_ids(),
        Vec::<String>::new(),
        "new alarms are not listed twice"
    );

    // Nothing new, and the round still fails: the four are listed again.
    for _ in 0..2 {
        let again = monitor_dir(&s.log, &state, &["--watch", w]);
        assert_eq!(again.code, 1, "a re-run stays red: {again:?}");
        assert_eq!(again.open_ids(), ids, "{again:?}");
        assert_eq!(again.events[1]["alarm"]["event"], "receipt.impersonation");
        assert_eq!(again.events[1]["alarm"]["index"], 2);
        assert!(again.stderr.contains("4 alarms open"), "{}", again.stderr);
    }
    // The human lines name each alarm's id.
    let vk = vkey();
    let out = monitor_cmd(
        s.log.to_str().unwrap(),
        &state,
        &["--log-key", &vk, "--watch", w, "--format", "human"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let human = String::from_utf8(out.stdout).unwrap();
    assert_eq!(human.lines().count(), 4, "{human}");
    for (line, id) in human.lines().zip(&ids) {
        assert!(line.starts_with("alarm.open since "), "{line}");
        assert!(line.contains(&format!(" alarm {id}: ")), "{line}");
    }

    // Ack one: three stay open.
    let (code, stdout, stderr) = ack(&state, &[&ids[1], "--note", "rogue key revoked, INC-42"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("acknowledged {}", ids[1])),
        "{stdout}"
    );
    let run = monitor_dir(&s.log, &state, &["--watch", w]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.open_ids(),
        [ids[0].clone(), ids[2].clone(), ids[3].clone()]
    );

    // An unknown id, or one already closed: exit 2, nothing written.
    let (code, _, stderr) = ack(&state, &["0123456789abcdef", "--note", "x"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no alarm 0123456789abcdef"), "{stderr}");
    let (code, _, stderr) = ack(&state, &[&ids[0], "nope", "--note", "x"]);
    assert_eq!(code, 2, "one unknown id refuses the whole ack: {stderr}");
    let (code, _, stderr) = ack(&state, &[&ids[1], "--note", "again"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("already acknowledged"), "{stderr}");
    assert!(stderr.contains("rogue key revoked, INC-42"), "{stderr}");
    let (code, _, stderr) = ack(&state, &["--all", "--note", " "]);
    assert_eq!(code, 2, "an empty note: {stderr}");
    assert_eq!(acks(&state).len(), 1);

    // Ack the rest: the next round is green, and so is the one after.
    let (code, stdout, _) = ack(&state, &["--all", "--note", "reviewed"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("3 alarms acknowledged"), "{stdout}");
    for _ in 0..2 {
        let run = monitor_dir(&s.log, &state, &["--watch", w]);
        assert_eq!((run.code, run.events.len()), (0, 0), "{run:?}");
    }
    let (code, stdout, _) = ack(&state, &["--all", "--note", "nothing"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("no open alarm"), "{stdout}");

    // The acks are kept: when, who, the note, the ids.
    let kept = acks(&state);
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept[0]["ids"], serde_json::json!([ids[1]]));
    assert_eq!(kept[0]["note"], "rogue key revoked, INC-42");
    assert!(
        kept[0]["by"].as_str().unwrap().starts_with("alice (uid "),
        "{kept:?}"
    );
    assert!(kept[0]["at"].as_u64().unwrap() > 1_700_000_000);
    assert_eq!(kept[1]["ids"], serde_json::json!([ids[0], ids[2], ids[3]]));

    // A new alarm opens again: exit 1, only it.
    append(&s.log, &[entry(50, "gate-a", &change(50), &key(9))]);
    let run = monitor_dir(&s.log, &state, &["--watch", w]);
    assert_eq!(
        (run.code, run.names()),
        (1, vec!["receipt.impersonation".to_string()])
    );
    let again = monitor_dir(&s.log, &state, &["--watch", w]);
    assert_eq!(again.open_ids(), [run.events[0]["id"].as_str().unwrap()]);
}

#[test]
fn event_ids_are_stable_across_state_directories_and_ack_needs_no_lock() {
    let s = scene();
    let w = s.watch.to_str().unwrap();
    let (a, b) = (s.tmp.path().join("a"), s.tmp.path().join("b"));
    let ra = monitor_dir(&s.log, &a, &["--watch", w]);
    let rb = monitor_dir(&s.log, &b, &["--watch", w]);
    let ids = |r: &Run| -> Vec<Value> { r.events.iter().map(|e| e["id"].clone()).collect() };
    assert_eq!(ids(&ra), ids(&rb));
    assert_eq!(ra.events.len(), SCENE_EVENTS.len());
    // Every event has an id; matched ones too.
    assert!(ra.events.iter().all(|e| e["id"].is_string()), "{ra:?}");

    // A monitor holding the state (a --follow one): ack still works, and
    // the monitor's next round sees it.
    let held = rcpt::monitor::StateDir::open(&a).unwrap();
    let (code, stdout, stderr) = ack(&a, &["--all", "--note", "while following"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(held.open_alarms().unwrap().is_empty());
    drop(held);
    let run = monitor_dir(&s.log, &a, &["--watch", w]);
    assert_eq!(run.code, 0, "{run:?}");

    // No state directory: exit 2.
    let (code, _, stderr) = ack(&s.tmp.path().join("none"), &["--all", "--note", "x"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not a monitor state directory"), "{stderr}");
}

#[test]
fn a_log_alarm_repeated_every_round_is_one_alarm() {
    // A rollback: the state saw 8 entries, the source now shows 4.
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let small = log_with(tmp.path(), "small", &entries(0, 4, "gate-c", &key(4)));
    let big = log_with(tmp.path(), "big", &entries(0, 8, "gate-c", &key(4)));
    let first = monitor_dir(&big, &state, &[]);
    assert_eq!(first.code, 0, "nothing watched: {first:?}");
    let r1 = monitor_dir(&small, &state, &[]);
    let r2 = monitor_dir(&small, &state, &[]);
    for r in [&r1, &r2] {
        assert_eq!(r.code, 1, "{r:?}");
        assert_eq!(r.names()[0], "log.rollback", "{r:?}");
    }
    assert_eq!(r1.events[0]["id"], r2.events[0]["id"]);
    assert_eq!(
        r2.open_ids(),
        Vec::<String>::new(),
        "delivered again, not listed twice"
    );
    let files = std::fs::read_dir(state.join("alarms")).unwrap().count();
    assert_eq!(files, 1);
    // Acknowledged, it is still delivered while the log shows it (exit 1),
    // and the monitor back on the real log is green.
    let id = r1.events[0]["id"].as_str().unwrap();
    assert_eq!(ack(&state, &[id, "--note", "known"]).0, 0);
    assert_eq!(monitor_dir(&small, &state, &[]).code, 1);
    assert_eq!(monitor_dir(&big, &state, &[]).code, 0);
}

#[test]
fn alarms_and_acks_are_never_read_or_written_through_a_planted_link() {
    let s = scene();
    let state = s.tmp.path().join("state");
    let w = s.watch.to_str().unwrap();
    assert_eq!(monitor_dir(&s.log, &state, &["--watch", w]).code, 1);
    let (code, _, _) = ack(&state, &["--all", "--note", "first"]);
    assert_eq!(code, 0);
    let outside = s.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep.json"), b"{}").unwrap();
    let listing = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    for planted in ["alarms", "acks"] {
        let at = state.join(planted);
        let kept = s.tmp.path().join(format!("kept-{planted}"));
        std::fs::rename(&at, &kept).unwrap();
        std::os::unix::fs::symlink(&outside, &at).unwrap();
        // A new alarm to record, then an ack: both refuse the link.
        append(&s.log, &[entry(60, "gate-a", &change(60), &key(9))]);
        let run = monitor_dir(&s.log, &state, &["--watch", w]);
        assert_ne!(run.code, 0, "{planted}: {run:?}");
        assert!(
            run.stderr.contains("symbolic link"),
            "{planted}: {}",
            run.stderr
        );
        let (code, _, stderr) = ack(&state, &["--all", "--note", "through a link"]);
        assert_ne!(code, 0, "{planted}: {stderr}");
        assert!(stderr.contains("symbolic link"), "{planted}: {stderr}");
        assert_eq!(
            listing(&outside),
            ["keep.json"],
            "{planted}: outside untouched"
        );
        std::fs::remove_file(&at).unwrap();
        std::fs::rename(&kept, &at).unwrap();
    }
}
