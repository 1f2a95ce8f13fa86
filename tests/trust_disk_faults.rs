//! Disk full and read-only, on small tmpfs mounts (issue 20, faults):
//! `log append` refuses with the reason and loses no acknowledged entry,
//! and works again once space returns; `log mirror` into a full disk fails
//! cleanly and completes on the next run. Needs root for `mount`: where it
//! is not permitted each test prints `skipped:` with the reason.
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::serve as serve_support;

use serve_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop.
struct Tmpfs {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("fs");
        std::fs::create_dir(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs {
                dir,
                _parent: parent,
            }),
            Ok(o) => {
                support::skip(&format!(
                    "mount -t tmpfs is not permitted here ({}): the disk-full and read-only tests need root",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                None
            }
            Err(e) => {
                support::skip(&format!(
                    "no mount command ({e}): the disk-full tests need it"
                ));
                None
            }
        }
    }

    fn remount(&self, opts: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.dir)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

/// Fill the file system at `dir` with a file; returns it.
fn fill(dir: &Path) -> PathBuf {
    let filler = dir.join("filler");
    let _ = Command::new("dd")
        .args(["if=/dev/zero", "bs=64k"])
        .arg(format!("of={}", filler.display()))
        .stderr(std::process::Stdio::null())
        .status();
    filler
}

fn append(dir: &Path, envs: &[PathBuf]) -> std::process::Output {
    Command::new(bin())
        .args(["log", "append"])
        .arg(dir)
        .args(envs)
        .output()
        .unwrap()
}

/// `log check` passes; the number of entries it recomputed.
fn check(dir: &Path) -> u64 {
    let out = log_check(dir);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.strip_prefix("ok: ")
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("log check said {text:?}"))
}

fn envelopes(tmp: &Path, range: std::ops::Range<u64>) -> Vec<PathBuf> {
    range
        .map(|n| {
            let p = tmp.join(format!("e{n}.json"));
            std::fs::write(&p, envelope(n)).unwrap();
            p
        })
        .collect()
}

#[test]
fn log_append_on_a_full_or_read_only_disk_refuses_and_loses_nothing() {
    let Some(fs) = Tmpfs::mount("4m") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log_as(tmp.path(), &fs.dir.join("log"), &log_key(), ORIGIN);
    let first = envelopes(tmp.path(), 0..5);
    assert!(append(&dir, &first).status.success());
    let filler = fill(&fs.dir);
    let more = envelopes(tmp.path(), 5..10);
    let out = append(&dir, &more);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.to_lowercase().contains("no space"),
        "the reason is given: {err}"
    );
    // Every acknowledged entry survives, and the log checks.
    assert_eq!(check(&dir), 5);
    // Space returns: the same append works without any repair.
    std::fs::remove_file(&filler).unwrap();
    let out = append(&dir, &more);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(check(&dir), 10);
    // Read-only: refused with the reason, nothing lost.
    fs.remount("ro");
    let out = append(&dir, &envelopes(tmp.path(), 10..12));
    let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("read-only"), "{err}");
    fs.remount("rw");
    assert_eq!(check(&dir), 10);
}

#[test]
fn log_mirror_into_a_full_disk_fails_cleanly_and_completes_later() {
    let Some(fs) = Tmpfs::mount("4m") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    assert!(
        append(&dir, &envelopes(tmp.path(), 0..300))
            .status
            .success()
    );
    let served = Served::start(&dir, &write_trust(tmp.path()), &[]);
    let mirror = fs.dir.join("m");
    let run = || {
        Command::new(bin())
            .args(["log", "mirror", &served.url()])
            .arg(&mirror)
            .args(["--log-key", &log_verifier().to_string()])
            .output()
            .unwrap()
    };
    let filler = fill(&fs.dir);
    let out = run();
    let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no space"), "{err}");
    // No checkpoint naming a missing file was published.
    assert!(!mirror.join("checkpoint").exists());
    std::fs::remove_file(&filler).unwrap();
    let out = run();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(check(&mirror), 300);
    served.stop();
}

/// `log mirror` into object storage stages what it fetches in a local
/// temporary directory: with that disk full it fails with the reason and
/// publishes no checkpoint on the store; with space the next run completes.
#[cfg(feature = "s3")]
#[test]
fn log_mirror_into_s3_with_a_full_staging_disk_fails_cleanly_and_completes_later() {
    let Some((settings, bucket)) = support::s3::server() else {
        return;
    };
    let Some(fs) = Tmpfs::mount("4m") else { return };
    let location = support::s3::fresh_location(&bucket, "stagefull");
    let dest = format!("s3://{}/{}", location.bucket, location.prefix);
    let endpoint = settings.endpoint.url();
    let s3 = rcpt::storage::s3::BlockingClient::new(settings, &location).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    assert!(
        append(&dir, &envelopes(tmp.path(), 0..300))
            .status
            .success()
    );
    let served = Served::start(&dir, &write_trust(tmp.path()), &[]);
    let run = |args: &[&str]| {
        Command::new(bin())
            .arg("log")
            .args(args)
            .args(["--endpoint", &endpoint])
            .env("TMPDIR", &fs.dir)
            .output()
            .unwrap()
    };
    let vkey = log_verifier().to_string();
    let filler = fill(&fs.dir);
    let out = run(&["mirror", &served.url(), &dest, "--log-key", &vkey]);
    let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no space"), "{err}");
    assert!(
        s3.get(&location.key("checkpoint"), 1 << 16)
            .unwrap()
            .is_none(),
        "a checkpoint was published from a failed staging"
    );
    std::fs::remove_file(&filler).unwrap();
    // Nothing of the failed run is left in the staging disk.
    let left: Vec<_> = std::fs::read_dir(&fs.dir).unwrap().collect();
    assert!(left.is_empty(), "left in the staging directory: {left:?}");
    let out = run(&["mirror", &served.url(), &dest, "--log-key", &vkey]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["check", &dest]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("ok: 300 "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    served.stop();
}

#[test]
fn log_serve_on_a_full_disk_answers_5xx_and_recovers_without_a_restart() {
    let Some(fs) = Tmpfs::mount("4m") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log_as(tmp.path(), &fs.dir.join("log"), &log_key(), ORIGIN);
    let served = Served::start(&dir, &write_trust(tmp.path()), &["--batch-wait", "0s"]);
    let add = |n: u64| {
        raw(
            served.addr,
            "POST",
            "/add",
            &["Content-Type: application/json"],
            envelope(n).as_bytes(),
        )
    };
    for n in 0..3 {
        assert_eq!(add(n).status, 200);
    }
    let filler = fill(&fs.dir);
    let full = add(3);
    assert!(
        (500..600).contains(&full.status),
        "a full disk answers 5xx, got {}",
        full.status
    );
    assert_eq!(full.header("x-content-type-options"), Some("nosniff"));
    std::fs::remove_file(&filler).unwrap();
    // Space is back: the same service takes the entry (a bounded wait for
    // its writer to recover).
    let start = std::time::Instant::now();
    let mut status = add(3).status;
    while status != 200 && start.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        status = add(3).status;
    }
    assert_eq!(status, 200, "recovered without a restart");
    println!(
        "log serve recovered {:?} after space returned",
        start.elapsed()
    );
    served.stop();
    assert_eq!(check(&dir), 4, "every acknowledged entry survives");
}
