//! `rcpt log monitor` on real logs written by rcpt: every event and exit
//! status, the hook, HTTP from `rcpt log serve`, hostile logs, and resume
//! after SIGKILL and SIGTERM (spec/monitor.md).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::monitor as support_monitor;
use support::serve as serve_support;

use serde_json::json;
use serve_support::{ORIGIN, Served, init_log, write_trust};
use std::path::Path;
use std::time::{Duration, Instant};
use support_monitor::*;

#[test]
fn every_entry_event_once_in_order_and_the_exit_statuses() {
    let s = scene();
    let state = s.tmp.path().join("state");
    let w = s.watch.to_str().unwrap();
    let run = monitor_dir(&s.log, &state, &["--watch", w]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.names(), SCENE_EVENTS, "{run:?}");
    assert_eq!(run.indexes(), [0, 1, 2, 3, 4, 5, 7]);
    let first = &run.events[0];
    assert_eq!(first["origin"], ORIGIN);
    assert_eq!(first["issuer"], "gate-a");
    assert_eq!(first["verdict"], "deny");
    assert!(first["receipt_id"].as_str().unwrap().starts_with("blake3:"));
    assert!(run.events[5]["receipt_id"].is_null());
    // The matched receipt 7 of gate-b also concerns change 99: one event,
    // the first of the table.
    assert_eq!(run.events[6]["issuer"], "gate-b");
    assert!(
        run.stderr
            .contains("8 entries checked (1 concern nothing watched)"),
        "{}",
        run.stderr
    );
    assert_eq!(saved_next(&state), 8);

    // Nothing new: no event, but the four alarms are still open: exit 1
    // (tests/monitor_alarms.rs); acknowledged, exit 0.
    let again = monitor_dir(&s.log, &state, &["--watch", w]);
    assert_eq!((again.code, again.names().len()), (1, 0), "{again:?}");
    assert_eq!(again.open_ids().len(), 4, "{again:?}");
    ack_all(&state, "seen");
    let again = monitor_dir(&s.log, &state, &["--watch", w]);
    assert_eq!((again.code, again.events.len()), (0, 0), "{again:?}");
    // The log key from its file (--log-key-file) reads the same.
    let vkey_file = s.tmp.path().join("log.vkey");
    std::fs::write(&vkey_file, format!("{}\n", vkey())).unwrap();
    let src = s.log.to_str().unwrap();
    let from_file = monitor(
        src,
        &state,
        &["--log-key-file", vkey_file.to_str().unwrap(), "--watch", w],
    );
    assert_eq!(
        (from_file.code, from_file.events.len()),
        (0, 0),
        "{from_file:?}"
    );
    // New entries of a watched, authorized-list-free run: exit 0.
    append(&s.log, &entries(100, 2, "gate-c", &key(4)));
    let quiet = monitor_dir(&s.log, &state, &["--watch", w, "--format", "human"]);
    assert_eq!((quiet.code, quiet.stdout.as_str()), (0, ""), "{quiet:?}");
    assert_eq!(saved_next(&state), 10);
}

#[test]
fn bad_invocations_exit_2_and_unreadable_sources_exit_3() {
    let s = scene();
    let state = s.tmp.path().join("state");
    let src = s.log.to_str().unwrap();
    // No key at all; a bad key; a bad watch file; a missing directory.
    assert_eq!(monitor(src, &state, &[]).code, 2);
    assert_eq!(monitor(src, &state, &["--log-key", "nope"]).code, 2);
    let bad = write_watch(s.tmp.path(), "bad.json", &json!({"issuers": 1}));
    assert_eq!(
        monitor_dir(&s.log, &state, &["--watch", bad.to_str().unwrap()]).code,
        2
    );
    let missing = s.tmp.path().join("missing");
    assert_eq!(monitor_dir(&missing, &state, &[]).code, 2);
    assert_eq!(monitor_dir(&s.log, &state, &["--interval", "5s"]).code, 2);
    // A directory with no checkpoint: monitor.error, exit 3, state untouched.
    let empty = s.tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let run = monitor_dir(&empty, &state, &[]);
    assert_eq!(
        (run.code, run.names()),
        (3, vec!["monitor.error".to_string()]),
        "{run:?}"
    );
    // A second monitor on a locked state directory: exit 3, nothing read.
    let held = rcpt::monitor::StateDir::open(&state).unwrap();
    let locked = monitor_dir(&s.log, &state, &[]);
    assert_eq!(locked.code, 3, "{locked:?}");
    assert!(
        locked.stderr.contains("another monitor"),
        "{}",
        locked.stderr
    );
    drop(held);
    // A trust file's issuers are watched and its log key used.
    let trust = s.tmp.path().join("trust.json");
    std::fs::write(
        &trust,
        json!({"issuers": [{"name": "gate-c", "public_key": b64(&key(4))}],
               "logs": [{"verifier_key": vkey()}]})
        .to_string(),
    )
    .unwrap();
    let run = monitor(src, &state, &["--trust", trust.to_str().unwrap()]);
    // gate-c: 3 is key misuse? No: gate-c is now watched (key 4), 3 is
    // signed by key 3 (not watched) claiming gate-c: impersonation.
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.names().contains(&"receipt.impersonation".to_string()));
    assert_eq!(
        run.names()
            .iter()
            .filter(|n| *n == "receipt.matched")
            .count(),
        2, // entries 4 and 6
        "{run:?}"
    );
}

#[test]
fn the_hook_gets_the_event_and_a_failing_hook_does_not_advance_the_state() {
    let tmp = tempfile::tempdir().unwrap();
    let log = log_with(tmp.path(), "log", &entries(0, 5, "gate-a", &key(1)));
    let watch = write_watch(
        tmp.path(),
        "w.json",
        &json!({"issuers": [{"name": "gate-a", "keys": [b64(&key(1))]}]}),
    );
    let state = tmp.path().join("state");
    let seen = tmp.path().join("seen");
    let hook = format!(
        "echo \"$RCPT_EVENT|$RCPT_ORIGIN|$RCPT_INDEX|$RCPT_ISSUER|$RCPT_VERDICT|$RCPT_RECEIPT_ID\" >> {s}; \
         cat \"$RCPT_EVENT_JSON\" >> {s}.json; echo >> {s}.json; \
         [ \"$RCPT_INDEX\" != 2 ] || [ -e {s}.ok ]",
        s = seen.display()
    );
    let args = ["--watch", watch.to_str().unwrap(), "--hook", hook.as_str()];
    let run = monitor_dir(&log, &state, &args);
    // Events 0, 1 delivered; event 2 printed, its hook failed: round incomplete.
    assert_eq!(run.code, 3, "{run:?}");
    assert_eq!(run.indexes(), [0, 1, 2]);
    assert_eq!(saved_next(&state), 2);
    let lines = std::fs::read_to_string(&seen).unwrap();
    let first: Vec<&str> = lines.lines().next().unwrap().split('|').collect();
    assert_eq!(
        &first[..5],
        ["receipt.matched", ORIGIN, "0", "gate-a", "deny"]
    );
    assert!(first[5].starts_with("blake3:"));
    let json_lines = std::fs::read_to_string(seen.with_extension("json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(json_lines.lines().next().unwrap()).unwrap();
    assert_eq!(v["index"], 0);
    // The hook works again: the round resumes at entry 2 (delivered again).
    std::fs::write(seen.with_extension("ok"), b"").unwrap();
    let run = monitor_dir(&log, &state, &args);
    assert_eq!((run.code, run.indexes()), (0, vec![2, 3, 4]), "{run:?}");
    assert_eq!(saved_next(&state), 5);
}

#[test]
fn over_http_from_log_serve_and_start_at_end() {
    let tmp = tempfile::tempdir().unwrap();
    let log = init_log(tmp.path(), "log");
    append(&log, &entries(0, 300, "gate-a", &key(1)));
    let trust = write_trust(tmp.path());
    let watch = write_watch(
        tmp.path(),
        "w.json",
        &json!({"issuers": [{"name": "gate-a", "keys": [b64(&key(1))]}]}),
    );
    let w = watch.to_str().unwrap();
    let vk = vkey();
    let served = Served::start(&log, &trust, &[]);
    let url = served.url();
    let state = tmp.path().join("state");
    let run = monitor(&url, &state, &["--log-key", &vk, "--watch", w]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.indexes(), (0..300).collect::<Vec<_>>());
    // A new monitor started at the end reports nothing of the past.
    let fresh = tmp.path().join("fresh");
    let run = monitor(
        &url,
        &fresh,
        &["--log-key", &vk, "--watch", w, "--start-at-end"],
    );
    assert_eq!((run.code, run.events.len()), (0, 0), "{run:?}");
    assert_eq!(saved_next(&fresh), 300);
    served.stop();
    // The log grows (an impersonation among them); served again elsewhere.
    let mut more = entries(300, 2, "gate-a", &key(1));
    more.push(entry(302, "gate-a", &change(302), &key(9)));
    append(&log, &more);
    let served = Served::start(&log, &trust, &[]);
    for st in [&state, &fresh] {
        let run = monitor(&served.url(), st, &["--log-key", &vk, "--watch", w]);
        assert_eq!(run.code, 1, "{run:?}");
        assert_eq!(run.indexes(), [300, 301, 302]);
        assert_eq!(run.names()[2], "receipt.impersonation");
    }
    // The server gone: monitor.error, exit 3 (the alarms acknowledged:
    // an open alarm outranks it), state kept.
    let url = served.url();
    served.stop();
    ack_all(&state, "seen");
    let run = monitor(&url, &state, &["--log-key", &vk]);
    assert_eq!(
        (run.code, run.names()),
        (3, vec!["monitor.error".to_string()]),
        "{run:?}"
    );
    assert_eq!(saved_next(&state), 303);
}

/// Two histories of one log key: `a` (entries 0..5) and `b` (another
/// entry 3), plus `b7` extending `b`, and `short` (entries 0..3).
#[test]
fn forks_rewrites_and_rollbacks_are_named_with_evidence_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let base = entries(0, 5, "gate-a", &key(1));
    let a = log_with(t, "a", &base);
    let mut other = base.clone();
    other[3] = entry(33, "gate-a", &change(33), &key(1));
    let b = log_with(t, "b", &other);
    let b7 = log_with(t, "b7", &other);
    append(&b7, &entries(5, 2, "gate-a", &key(1)));
    let short = log_with(t, "short", &base[..3]);
    let state = t.join("state");
    assert_eq!(monitor_dir(&a, &state, &[]).code, 0);
    assert_eq!(saved_next(&state), 5);
    let saved = std::fs::read(state.join("origins")).is_err();
    assert!(saved);

    let fork = monitor_dir(&b, &state, &[]);
    assert_eq!(
        (fork.code, fork.names()),
        (1, vec!["log.inconsistent".to_string()]),
        "{fork:?}"
    );
    let ev = state.join("evidence");
    let dirs: Vec<_> = walk(&ev);
    assert!(
        dirs.iter()
            .any(|p| p.ends_with("inconsistent-5-5/new.checkpoint")),
        "{dirs:?}"
    );
    let rewrite = monitor_dir(&b7, &state, &[]);
    assert_eq!(rewrite.names(), ["log.inconsistent"], "{rewrite:?}");
    let proof = walk(&ev)
        .into_iter()
        .find(|p| p.ends_with("inconsistent-5-7/proof.json"))
        .unwrap();
    let proof: serde_json::Value = serde_json::from_slice(&std::fs::read(proof).unwrap()).unwrap();
    assert_eq!(
        (proof["from"].as_u64(), proof["to"].as_u64()),
        (Some(5), Some(7))
    );
    assert!(!proof["proof"].as_array().unwrap().is_empty());
    let old = std::fs::read_to_string(
        ev.join(walk_dir(&ev))
            .join("inconsistent-5-7/old.checkpoint"),
    );
    assert!(old.unwrap().contains("\n5\n"));
    let back = monitor_dir(&short, &state, &[]);
    assert_eq!(
        (back.code, back.names()),
        (1, vec!["log.rollback".to_string()]),
        "{back:?}"
    );
    assert!(
        walk(&ev)
            .iter()
            .any(|p| p.ends_with("rollback-5-3/new.checkpoint"))
    );
    // None of them moved the state: the real log still checks out, and
    // the three alarms stay open until acknowledged.
    assert_eq!(saved_next(&state), 5);
    append(&a, &entries(5, 1, "gate-a", &key(1)));
    let real = monitor_dir(&a, &state, &[]);
    assert_eq!((real.code, real.open_ids().len()), (1, 3), "{real:?}");
    ack_all(&state, "forks seen");
    assert_eq!(monitor_dir(&a, &state, &[]).code, 0);
    assert_eq!(saved_next(&state), 6);
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                out.extend(walk(&e.path()));
            } else {
                out.push(e.path());
            }
        }
    }
    out
}

/// The one origin directory under `evidence/`.
fn walk_dir(ev: &Path) -> std::path::PathBuf {
    std::fs::read_dir(ev)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name()
        .into()
}

#[test]
fn tiles_or_entries_that_do_not_give_the_signed_tree_are_never_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let a = log_with(t, "a", &entries(0, 5, "gate-a", &key(1)));
    let b = log_with(t, "b", &entries(10, 5, "gate-a", &key(1)));
    let watch = write_watch(
        t,
        "w.json",
        &json!({"issuers": [{"name": "gate-a", "keys": [b64(&key(1))]}]}),
    );
    let w = watch.to_str().unwrap();
    // a's tiles under b's signed checkpoint.
    let swapped = t.join("swapped");
    copy_log(&a, &swapped);
    std::fs::copy(b.join("checkpoint"), swapped.join("checkpoint")).unwrap();
    let run = monitor_dir(&swapped, &t.join("s1"), &["--watch", w]);
    assert_eq!(
        (run.code, run.names()),
        (3, vec!["monitor.error".to_string()]),
        "{run:?}"
    );
    assert!(
        run.events[0]["summary"]
            .as_str()
            .unwrap()
            .contains("do not give the signed tree")
    );
    assert_eq!(saved_next(&t.join("s1")), 0);
    // a's checkpoint and hash tiles, b's entry bundle.
    let bundle = "tile/entries/000.p/5";
    let mixed = t.join("mixed");
    copy_log(&a, &mixed);
    std::fs::copy(b.join(bundle), mixed.join(bundle)).unwrap();
    let run = monitor_dir(&mixed, &t.join("s2"), &["--watch", w]);
    assert_eq!(
        (run.code, run.names()),
        (3, vec!["monitor.error".to_string()]),
        "{run:?}"
    );
    // After a checked prefix: a at 3, then a bundle of b's at 5.
    let a3 = log_with(t, "a3", &entries(0, 3, "gate-a", &key(1)));
    let s3 = t.join("s3");
    assert_eq!(monitor_dir(&a3, &s3, &["--watch", w]).indexes(), [0, 1, 2]);
    let run = monitor_dir(&mixed, &s3, &["--watch", w]);
    assert_eq!(
        (run.code, run.names()),
        (3, vec!["monitor.error".to_string()]),
        "{run:?}"
    );
    assert_eq!(saved_next(&s3), 3);
    // The real a goes on from 3.
    assert_eq!(monitor_dir(&a, &s3, &["--watch", w]).indexes(), [3, 4]);
}

#[test]
fn an_absurd_signed_size_is_an_error_in_bounded_time() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let a = log_with(t, "a", &entries(0, 5, "gate-a", &key(1)));
    let huge = t.join("huge");
    copy_log(&a, &huge);
    std::fs::write(huge.join("checkpoint"), signed_checkpoint(1 << 40, [7; 32])).unwrap();
    for fresh in [true, false] {
        let state = t.join(format!("state-{fresh}"));
        if !fresh {
            assert_eq!(monitor_dir(&a, &state, &[]).code, 0);
        }
        let started = Instant::now();
        let run = monitor_dir(&huge, &state, &[]);
        assert!(started.elapsed() < Duration::from_secs(20));
        assert_eq!(
            (run.code, run.names()),
            (3, vec!["monitor.error".to_string()]),
            "{run:?}"
        );
        assert_eq!(saved_next(&state), if fresh { 0 } else { 5 });
    }
    // Memory follows what was verified, not the claimed size (GNU time,
    // where it is installed).
    let time = Path::new("/usr/bin/time");
    if time.exists() {
        let report = t.join("time.txt");
        let st = std::process::Command::new(time)
            .arg("-v")
            .arg("-o")
            .arg(&report)
            .arg(serve_support::bin())
            .args(["log", "monitor", huge.to_str().unwrap(), "--state"])
            .arg(t.join("state-rss"))
            .args(["--log-key", &vkey()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(3));
        let text = std::fs::read_to_string(&report).unwrap();
        let kib: u64 = text
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Maximum resident set size (kbytes): ")
            })
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            kib < 64 * 1024,
            "peak RSS {kib} KiB for a claimed size of 2^40"
        );
    }
    // A checkpoint not signed by the log key: checkpoint.invalid, exit 1.
    let forged = t.join("forged");
    copy_log(&a, &forged);
    let note = rcpt::tlog::note::sign(
        &format!("{ORIGIN}\n5\n{}\n", base64_root(&a)),
        ORIGIN,
        &key(77),
    )
    .unwrap();
    std::fs::write(forged.join("checkpoint"), note).unwrap();
    let run = monitor_dir(&forged, &t.join("s"), &[]);
    assert_eq!(
        (run.code, run.names()),
        (1, vec!["checkpoint.invalid".to_string()]),
        "{run:?}"
    );
}

fn base64_root(log: &Path) -> String {
    let text = std::fs::read_to_string(log.join("checkpoint")).unwrap();
    text.lines().nth(2).unwrap().to_string()
}

#[test]
fn a_policy_without_its_quorum_gives_checkpoint_unwitnessed() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let a = log_with(t, "a", &entries(0, 2, "gate-a", &key(1)));
    let w = rcpt::tlog::cosig::WitnessVerifier::new("witness.example/w1", key(50).verifying_key())
        .unwrap();
    let policy = t.join("p.policy");
    std::fs::write(
        &policy,
        format!("log {}\nwitness w1 {w}\nquorum w1\n", vkey()),
    )
    .unwrap();
    let state = t.join("state");
    let run = monitor_dir(&a, &state, &["--policy", policy.to_str().unwrap()]);
    assert_eq!(
        (run.code, run.names()),
        (1, vec!["checkpoint.unwitnessed".to_string()]),
        "{run:?}"
    );
    assert_eq!(saved_next(&state), 0);
    // A policy whose quorum is none: the round runs (exit 1 while the
    // alarm is open, 0 once acknowledged).
    std::fs::write(&policy, format!("log {}\nquorum none\n", vkey())).unwrap();
    let run = monitor_dir(&a, &state, &["--policy", policy.to_str().unwrap()]);
    assert_eq!((run.code, run.open_ids().len()), (1, 1), "{run:?}");
    assert_eq!(saved_next(&state), 2);
    ack_all(&state, "quorum fixed");
    let run = monitor_dir(&a, &state, &["--policy", policy.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
}

/// A monitor killed at random instants never skips an entry, and repeats
/// only the events since its last saved state. With a hook the state is
/// saved after every entry bundle, so at most one bundle is repeated.
#[test]
fn resume_after_sigkill_skips_nothing_and_repeats_only_since_the_last_save() {
    sigkill_trials(520, true);
}

/// Without a hook the events are written once per bundle and the state
/// saved every `STATE_SAVE_INTERVAL`: a kill loses no event the state
/// covers, and the next run delivers exactly the rest.
#[test]
fn resume_after_sigkill_without_a_hook_skips_nothing() {
    sigkill_trials(20_000, false);
}

fn sigkill_trials(n: u64, hook: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let log = log_with(t, "log", &entries(0, n, "gate-a", &key(1)));
    let watch = write_watch(
        t,
        "w.json",
        &json!({"issuers": [{"name": "gate-a", "keys": [b64(&key(1))]}]}),
    );
    let w = watch.to_str().unwrap();
    let vk = vkey();
    let mut args = vec!["--log-key", vk.as_str(), "--watch", w];
    if hook {
        args.extend(["--hook", "true"]);
    }
    let src = log.to_str().unwrap();
    // How long a whole scan takes here.
    let started = Instant::now();
    let full = monitor(src, &t.join("probe"), &args);
    assert_eq!(full.indexes().len() as u64, n, "{full:?}");
    let span = started.elapsed().as_millis() as u64;
    let mut seed = std::process::id() as u64 ^ span;
    let mut killed_mid_scan = 0;
    for trial in 0..8 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Past the start-up, anywhere in the scan.
        let delay = span / 4 + (seed >> 33) % (span - span / 4).max(1);
        let state = t.join(format!("state-{trial}"));
        let out_path = t.join(format!("out-{trial}"));
        let mut child = monitor_cmd(src, &state, &args)
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        let first = parse_events(&std::fs::read_to_string(&out_path).unwrap());
        let got: Vec<u64> = first.iter().map(|e| e["index"].as_u64().unwrap()).collect();
        assert_eq!(
            got,
            (0..got.len() as u64).collect::<Vec<_>>(),
            "trial {trial}"
        );
        let saved = saved_next(&state);
        assert!(
            saved <= got.len() as u64,
            "trial {trial}: saved {saved} past the events"
        );
        if saved > 0 && saved < n {
            killed_mid_scan += 1;
        }
        let rest = monitor(src, &state, &args);
        assert_eq!(rest.code, 0, "{rest:?}");
        assert_eq!(
            rest.indexes(),
            (saved..n).collect::<Vec<_>>(),
            "trial {trial}"
        );
        if hook {
            // Repeats are the events since the last save: at most one bundle.
            assert!(got.len() as u64 - saved <= 256, "trial {trial}");
        }
    }
    eprintln!("{killed_mid_scan} of 8 kills landed mid-scan (span {span} ms)");
}

#[test]
fn sigterm_ends_a_follow_between_entries_with_the_state_saved() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let n = 400u64;
    let log = log_with(t, "log", &entries(0, n, "gate-a", &key(1)));
    let watch = write_watch(
        t,
        "w.json",
        &json!({"issuers": [{"name": "gate-a", "keys": [b64(&key(1))]}]}),
    );
    let vk = vkey();
    let args = [
        "--log-key",
        vk.as_str(),
        "--watch",
        watch.to_str().unwrap(),
        "--hook",
        "sleep 0.01",
        "--follow",
        "--interval",
        "200ms",
    ];
    let state = t.join("state");
    let out_path = t.join("out");
    let mut child = monitor_cmd(log.to_str().unwrap(), &state, &args)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for some events, then SIGTERM.
    let start = Instant::now();
    while std::fs::read_to_string(&out_path).unwrap().lines().count() < 20 {
        assert!(start.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = std::process::Command::new("kill")
        .args(["-s", "TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = serve_support::wait_bounded(&mut child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(0));
    let got = parse_events(&std::fs::read_to_string(&out_path).unwrap()).len() as u64;
    assert!(got < n, "the follow ended before the scan did ({got})");
    // Stopped between entries: the state is exactly the events delivered.
    assert_eq!(saved_next(&state), got);
    let rest = monitor_dir(&log, &state, &["--watch", watch.to_str().unwrap()]);
    assert_eq!(rest.indexes(), (got..n).collect::<Vec<_>>());
}

/// `rcpt verify --mirror DIR` against a mirror kept by `rcpt log mirror`
/// from a served log: the same history verifies, a fork fails
/// `consistency.fork`, a tree past the mirror is `consistency.mirror_behind`.
#[test]
fn verify_against_a_mirror_names_forks_and_a_mirror_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let base = entries(0, 5, "gate-a", &key(1));
    // Two batches: a checkpoint of size 3 is kept, for a bundle at that size.
    let a = log_with(t, "a", &base[..3]);
    append(&a, &base[3..]);
    let mut other = base.clone();
    other[3] = entry(33, "gate-a", &change(33), &key(1));
    let b = log_with(t, "b", &other);
    let served = Served::start(&a, &write_trust(t), &[]);
    let mirror = t.join("mirror");
    let st = std::process::Command::new(serve_support::bin())
        .args(["log", "mirror", &served.url()])
        .arg(&mirror)
        .args(["--log-key", &vkey()])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    served.stop();
    let trust = t.join("verify-trust.json");
    std::fs::write(
        &trust,
        json!({"issuers": [{"name": "gate-a", "public_key": b64(&key(1))}],
               "logs": [{"verifier_key": vkey()}]})
        .to_string(),
    )
    .unwrap();
    let prove = |log: &Path, index: u64, size: u64, name: &str| {
        let out = t.join(name);
        support::prove_at(log, index, size, &out);
        out
    };
    let verify = |bundle: &Path| {
        let out = std::process::Command::new(serve_support::bin())
            .arg("verify")
            .arg(bundle)
            .arg("--trust")
            .arg(&trust)
            .arg("--mirror")
            .arg(&mirror)
            .args(["--format", "json"])
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8(out.stdout).unwrap(),
        )
    };
    let same = prove(&a, 2, 5, "same.json");
    let prefix = prove(&a, 1, 3, "prefix.json");
    let fork = prove(&b, 3, 5, "fork.json");
    append(&a, &entries(5, 2, "gate-a", &key(1)));
    let ahead = prove(&a, 6, 7, "ahead.json");
    for (bundle, code, word) in [
        (&same, 0, "\"verified\""),
        (&prefix, 0, "\"verified\""),
        (&fork, 1, "consistency.fork"),
        (&ahead, 3, "consistency.mirror_behind"),
    ] {
        let (got, out) = verify(bundle);
        assert_eq!(got, code, "{}: {out}", bundle.display());
        assert!(out.contains(word), "{}: {out}", bundle.display());
        assert!(out.contains("consistency.mirror"), "{out}");
    }
    // Without --mirror, the forked bundle verifies: the mirror is the memory.
    let plain = std::process::Command::new(serve_support::bin())
        .arg("verify")
        .arg(&fork)
        .arg("--trust")
        .arg(&trust)
        .status()
        .unwrap();
    assert_eq!(plain.code(), Some(0));
    // A mirror of a log the trust file does not know: bad invocation.
    let unknown = t.join("unknown-trust.json");
    std::fs::write(
        &unknown,
        json!({"issuers": [{"name": "gate-a", "public_key": b64(&key(1))}],
               "logs": [{"verifier_key": rcpt::keys::NoteVerifier::new("other.example/log", key(5).verifying_key()).unwrap().to_string()}]})
        .to_string(),
    )
    .unwrap();
    let st = std::process::Command::new(serve_support::bin())
        .arg("verify")
        .arg(&same)
        .arg("--trust")
        .arg(&unknown)
        .arg("--mirror")
        .arg(&mirror)
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(2));
}
