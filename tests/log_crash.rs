//! Crash safety: run `rcpt log append` on batches, SIGKILL it at a seeded
//! random moment, then assert the log passes `rcpt log check` and holds
//! every receipt acknowledged before the kill, at its acknowledged index.
//! 20 trials in the normal suite; 1,000 in an ignored test
//! (`cargo test --test log_crash -- --ignored`). Also: two concurrent
//! writer processes never corrupt the log.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use rcpt::keys::SigningKey;
use rcpt::log::Log;
use rcpt::receipt::dsse::Envelope;
mod support;
use support::bin;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A valid signed receipt envelope (one JSON line), distinct for each `n`.
fn envelope(n: u64) -> String {
    let mut payload = support::deny_payload(n, "crash", "cd");
    payload["substrate"] = "filesystem".into();
    payload["verdict"] = serde_json::json!({"escalate": {"ticket": "t"}});
    support::signed_envelope(&payload, &SigningKey::from_bytes(&[4u8; 32]))
}

fn entry_of(envelope_json: &str) -> Vec<u8> {
    Envelope::from_json(envelope_json.as_bytes())
        .unwrap()
        .to_entry()
}

use support::Rng;

fn init_log(tmp: &Path) -> PathBuf {
    let dir = tmp.join("log");
    init_log_at(&dir, tmp);
    dir
}

/// Start `rcpt log append --json --batch B DIR -` on `lines`; return the
/// child and a thread collecting the complete acknowledgement lines.
fn spawn_append(
    dir: &Path,
    lines: Vec<String>,
    batch: u32,
    wait: bool,
) -> (
    std::process::Child,
    std::thread::JoinHandle<Vec<serde_json::Value>>,
) {
    let mut cmd = Command::new(bin());
    cmd.args(["log", "append", "--json", "--batch", &batch.to_string()]);
    if wait {
        cmd.arg("--wait");
    }
    let mut child = cmd
        .arg(dir)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        for l in lines {
            if writeln!(stdin, "{l}").is_err() {
                return; // killed
            }
        }
    });
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // Only whole lines count: a torn last line fails to parse.
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                acks.push(v);
            }
        }
        acks
    });
    (child, reader)
}

/// Check the log with the binary, then that every acknowledged receipt is
/// at its index. `inputs[k]` is the envelope of stdin line `k + 1`.
fn assert_intact(dir: &Path, inputs: &[String], acks: &[serde_json::Value]) {
    support::serve::log_check(dir);
    let log = Log::open(dir).unwrap();
    for ack in acks {
        let line: usize = ack["file"].as_str().unwrap()[2..].parse().unwrap();
        let index = ack["index"].as_u64().unwrap();
        let want = entry_of(&inputs[line - 1]);
        assert_eq!(log.entry(index).unwrap(), want, "acknowledged {ack} lost");
    }
}

fn crash_trials(trials: u64, seed: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path());
    let mut rng = Rng(seed | 1);
    let mut acked_before: Vec<(String, u64)> = Vec::new();
    let per_trial = 150u64;
    let mut interrupted = 0;
    // Calibrate: how long an uninterrupted append of one trial's input takes.
    let started = std::time::Instant::now();
    let warm: Vec<String> = (0..per_trial).map(|k| envelope(1 << 40 | k)).collect();
    let (mut child, reader) = spawn_append(&dir, warm.clone(), 25, false);
    assert!(child.wait().unwrap().success());
    let full_run = started.elapsed().as_micros() as u64;
    assert_intact(&dir, &warm, &reader.join().unwrap());
    for trial in 0..trials {
        // Fresh receipts, plus some acknowledged earlier (must keep their index).
        let mut inputs: Vec<String> = (0..per_trial)
            .map(|k| envelope(trial * per_trial + k))
            .collect();
        inputs.extend(acked_before.iter().rev().take(10).map(|(e, _)| e.clone()));
        let (mut child, reader) = spawn_append(&dir, inputs.clone(), 25, false);
        std::thread::sleep(Duration::from_micros(rng.next() % full_run));
        let _ = child.kill(); // SIGKILL on Unix
        let _ = child.wait();
        let acks = reader.join().unwrap();
        if !acks.is_empty() && acks.len() < inputs.len() {
            interrupted += 1;
        }
        assert_intact(&dir, &inputs, &acks);
        for ack in &acks {
            let line: usize = ack["file"].as_str().unwrap()[2..].parse().unwrap();
            let index = ack["index"].as_u64().unwrap();
            let e = &inputs[line - 1];
            if let Some((_, first)) = acked_before.iter().find(|(x, _)| x == e) {
                assert_eq!(index, *first, "a duplicate moved: trial {trial}");
            } else {
                acked_before.push((e.clone(), index));
            }
        }
        // Everything acknowledged in any trial is still there (every 25
        // trials and at the end: reading them all each trial is quadratic).
        if trial % 25 == 24 || trial + 1 == trials {
            let log = Log::open(&dir).unwrap();
            for (e, index) in &acked_before {
                assert_eq!(log.entry(*index).unwrap(), entry_of(e), "trial {trial}");
            }
        }
    }
    // The harness is only a test if kills land between acknowledged batches.
    eprintln!("{interrupted} of {trials} trials killed mid-append");
    assert!(
        interrupted >= (trials / 10).max(2),
        "only {interrupted} of {trials} kills landed mid-append"
    );
}

#[test]
fn sigkill_during_append_never_breaks_the_log() {
    crash_trials(20, 0x5eed_0001);
}

#[test]
#[ignore = "1,000 trials: run with --ignored"]
fn sigkill_during_append_never_breaks_the_log_1000() {
    crash_trials(1000, 0x5eed_1000);
}

#[test]
fn two_writer_processes_never_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path());
    let a: Vec<String> = (0..200).map(|n| envelope(1_000_000 + n)).collect();
    let b: Vec<String> = (0..200).map(|n| envelope(2_000_000 + n)).collect();
    let (mut ca, ra) = spawn_append(&dir, a.clone(), 20, true);
    let (mut cb, rb) = spawn_append(&dir, b.clone(), 20, true);
    assert!(ca.wait().unwrap().success());
    assert!(cb.wait().unwrap().success());
    let (acks_a, acks_b) = (ra.join().unwrap(), rb.join().unwrap());
    assert_eq!((acks_a.len(), acks_b.len()), (200, 200));
    assert_intact(&dir, &a, &acks_a);
    assert_intact(&dir, &b, &acks_b);
    assert_eq!(Log::open(&dir).unwrap().size(), 400);
    // Without --wait, a second writer fails with the lock message instead.
    let (mut c1, _r1) = spawn_append(
        &dir,
        (0..2000).map(|n| envelope(3_000_000 + n)).collect(),
        10,
        false,
    );
    std::thread::sleep(Duration::from_millis(100));
    let out = Command::new(bin())
        .args(["log", "append"])
        .arg(&dir)
        .arg("-")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = c1.wait();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("another rcpt process is writing"), "{err}");
    }
}

/// A small tmpfs mounted at `at`, unmounted on drop; `None` (with the
/// reason) where mounting is not permitted.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(at: &Path, size: &str) -> Result<SmallFs, String> {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(SmallFs(at.to_path_buf()))
    }

    fn remount_read_only(&self) -> bool {
        Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// `rcpt log init` of a log in `dir` with its key in `key_dir`.
fn init_log_at(dir: &Path, key_dir: &Path) {
    support::serve::init_log_as(
        key_dir,
        dir,
        &SigningKey::from_bytes(&[6u8; 32]),
        "example.com/crash",
    );
}

/// `rcpt log append --json --batch B DIR -` on `lines`, to completion:
/// (success, acknowledgements, stderr).
fn append_all(dir: &Path, lines: &[String], batch: u32) -> (bool, Vec<serde_json::Value>, String) {
    let mut child = Command::new(bin())
        .args(["log", "append", "--json", "--batch", &batch.to_string()])
        .arg(dir)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let acks = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("index").is_some())
        .collect();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.success(), acks, err)
}

#[test]
fn full_disk_fails_cleanly_and_keeps_every_acknowledged_receipt() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = match SmallFs::mount(&tmp.path().join("small"), "1m") {
        Ok(fs) => fs,
        Err(why) => {
            support::skip(&format!(
                "cannot mount a 1 MiB tmpfs to fill ({why}); needs root"
            ));
            return;
        }
    };
    let dir = fs.0.join("log");
    init_log_at(&dir, tmp.path());
    let first: Vec<String> = (0..50).map(|n| envelope(7_000_000 + n)).collect();
    let (ok, acks, err) = append_all(&dir, &first, 25);
    assert!(ok, "{err}");
    assert_intact(&dir, &first, &acks);
    // Far more than 1 MiB of receipts: some batch must hit the full disk.
    let more: Vec<String> = (0..6000).map(|n| envelope(8_000_000 + n)).collect();
    let (ok, more_acks, err) = append_all(&dir, &more, 200);
    assert!(
        !ok,
        "appending 6,000 receipts to a 1 MiB file system succeeded"
    );
    assert!(err.contains("no space left on the device holding"), "{err}");
    assert!(more_acks.len() < more.len());
    // The log checks, and every receipt acknowledged before or during it is there.
    assert_intact(&dir, &first, &acks);
    assert_intact(&dir, &more, &more_acks);
}

#[test]
fn read_only_log_directory_fails_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = match SmallFs::mount(&tmp.path().join("ro"), "4m") {
        Ok(fs) => fs,
        Err(why) => {
            support::skip(&format!(
                "cannot mount a tmpfs to make read-only ({why}); needs root"
            ));
            return;
        }
    };
    let dir = fs.0.join("log");
    init_log_at(&dir, tmp.path());
    let first: Vec<String> = (0..10).map(|n| envelope(9_000_000 + n)).collect();
    let (ok, acks, err) = append_all(&dir, &first, 5);
    assert!(ok, "{err}");
    if !fs.remount_read_only() {
        support::skip("cannot remount the tmpfs read-only");
        return;
    }
    let (ok, _, err) = append_all(&dir, &[envelope(9_100_000)], 5);
    assert!(!ok);
    assert!(err.contains("read-only file system"), "{err}");
    assert!(err.contains(&dir.display().to_string()), "{err}");
    // Readers still work on the read-only log.
    assert_intact(&dir, &first, &acks);
}
