//! No directory is followed through a link (issue 34, defect 3): a link
//! planted in place of any directory rcpt opens, makes, writes in or
//! cleans (the gate store's tmp/, objects/ and its fan-out, receipts/, the
//! store itself and the journal in it; the clean copy's home, its
//! repository directory, the parked copy; the log's .rcpt/, .rcpt/tmp/,
//! tile/ and a nested tile directory, .rcpt/checkpoints/, the log
//! directory itself; the monitor's state directory, its tmp/ and
//! origins/; the witness's state/ and tmp/) is refused with an error
//! naming it, and nothing in the directory it points to is touched or
//! removed: not even files older than any grace period a cleanup uses.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Output;
use support::gate::{Gate, shown};

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// A directory outside everything rcpt was named, whose files must survive:
/// two files (one nested) two hours old, older than any cleanup's grace,
/// and what a journal or a tmp/ would hold.
struct Outside {
    dir: PathBuf,
}

impl Outside {
    fn new(parent: &Path, name: &str) -> Outside {
        let dir = parent.join(name);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        for (path, text) in [
            ("a", "keep a\n"),
            ("sub/b", "keep b\n"),
            ("journal", "not a journal\n"),
            (".x.rcpt-tmp", "a stray name\n"),
            ("lock", ""),
        ] {
            let p = dir.join(path);
            std::fs::write(&p, text).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        Outside { dir }
    }

    /// Every file under it with its bytes, sorted.
    fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
        support::snapshot(&self.dir)
    }

    /// Replace `at` (whatever is there) by a link to this directory.
    fn plant(&self, at: &Path) {
        match std::fs::symlink_metadata(at) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(at).unwrap(),
            Ok(_) => std::fs::remove_file(at).unwrap(),
            Err(_) => std::fs::create_dir_all(at.parent().unwrap()).unwrap(),
        }
        symlink(&self.dir, at).unwrap();
    }
}

/// The run refused, saying a symbolic link is in the way and naming `at`
/// (its last components at least), exit `want`.
fn refused(out: &Output, want: i32, at: &Path, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(out), want, "{what}: {}", shown(out));
    let tail: PathBuf = at
        .components()
        .rev()
        .take(2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(
        err.contains("symbolic link") && err.contains(&*tail.to_string_lossy()),
        "{what}: the message names the link {}: {err}",
        at.display()
    );
}

/// The run's message says a symbolic link is in the way.
fn says_link(out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("symbolic link"), "{}", shown(out));
}

fn project() -> Gate {
    Gate::new(&[("README", "a project\n"), ("value.txt", "bad\n")])
}

/// `gate check` with one passing check, its output.
fn gate_check(g: &Gate, name: &str, extra: &[&str]) -> Output {
    g.write("value.txt", &format!("edit {name}\n"));
    let policy = g.policy(&[("ok", &["true"], 30)], &[]);
    g.check(&policy, &g.world.dir().join(format!("{name}.json")), extra)
}

#[test]
fn the_gate_store_and_its_journal_never_follow_a_planted_link() {
    let g = project();
    let store = g.repo.join(".git/rcpt/store");
    assert_eq!(code(&gate_check(&g, "first", &[])), 0);
    let outside = Outside::new(g.world.dir(), "outside-store");
    let before = outside.snapshot();
    for planted in ["tmp", "objects", "receipts"] {
        let at = store.join(planted);
        let kept = g.world.dir().join(format!("kept-{planted}"));
        std::fs::rename(&at, &kept).unwrap();
        outside.plant(&at);
        refused(&gate_check(&g, planted, &[]), 3, &at, planted);
        assert_eq!(outside.snapshot(), before, "{planted}: outside untouched");
        std::fs::remove_file(&at).unwrap();
        std::fs::rename(&kept, &at).unwrap();
        assert_eq!(code(&gate_check(&g, &format!("{planted}-back"), &[])), 0);
    }
    // Nested: every fan-out directory of objects/ a link.
    let objects = store.join("objects");
    let kept = g.world.dir().join("kept-objects");
    std::fs::rename(&objects, &kept).unwrap();
    std::fs::create_dir(&objects).unwrap();
    for n in 0..=255u8 {
        symlink(&outside.dir, objects.join(format!("{n:02x}"))).unwrap();
    }
    let out = gate_check(&g, "fan-out", &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    says_link(&out);
    assert_eq!(outside.snapshot(), before, "fan-out: outside untouched");
    std::fs::remove_dir_all(&objects).unwrap();
    std::fs::rename(&kept, &objects).unwrap();
    // The store itself, with a journal in the directory it points to: no
    // command recovers through it (every gate command looks for a journal).
    let kept = g.world.dir().join("kept-store");
    std::fs::rename(&store, &kept).unwrap();
    outside.plant(&store);
    let id = g.rcpt().args(["gate", "id"]).output().unwrap();
    refused(&id, 3, &store, "gate id, store a link");
    refused(
        &gate_check(&g, "store", &[]),
        3,
        &store,
        "gate check, store a link",
    );
    let named = g.world.dir().join("named-store");
    symlink(&outside.dir, &named).unwrap();
    let out = gate_check(&g, "named", &["--store", named.to_str().unwrap()]);
    refused(&out, 3, &named, "--store a link");
    assert_eq!(outside.snapshot(), before, "store: outside untouched");
}

#[test]
fn the_clean_copys_directories_never_follow_a_planted_link() {
    let g = project();
    assert_eq!(code(&gate_check(&g, "first", &[])), 0);
    let outside = Outside::new(g.world.dir(), "outside-clean");
    let before = outside.snapshot();
    let home = g.homes().pop().unwrap();
    let parked = g.parked();
    for at in [
        g.cache.join("rcpt"),
        g.cache.join("rcpt/clean"),
        home.clone(),
        home.join("tree"),
        parked.clone(),
    ] {
        let kept = g.world.dir().join("kept");
        std::fs::rename(&at, &kept).unwrap();
        outside.plant(&at);
        refused(
            &gate_check(&g, "planted", &[]),
            3,
            &at,
            &at.display().to_string(),
        );
        assert_eq!(
            outside.snapshot(),
            before,
            "{}: outside untouched",
            at.display()
        );
        std::fs::remove_file(&at).unwrap();
        std::fs::rename(&kept, &at).unwrap();
        let out = gate_check(&g, "back", &[]);
        assert_eq!(code(&out), 0, "{}", shown(&out));
    }
    // Inside the copy everything is the checks' scratch: its `.git` made a
    // link to the user's repository is removed, never followed.
    let user_git: Vec<(String, Vec<u8>)> = support::snapshot(&g.repo.join(".git/refs"));
    let head = std::fs::read(g.repo.join(".git/HEAD")).unwrap();
    let dot_git = g.parked().join(".git");
    std::fs::remove_dir_all(&dot_git).unwrap();
    symlink(g.repo.join(".git"), &dot_git).unwrap();
    let out = gate_check(&g, "dot-git", &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert_eq!(support::snapshot(&g.repo.join(".git/refs")), user_git);
    assert_eq!(std::fs::read(g.repo.join(".git/HEAD")).unwrap(), head);
    assert!(g.repo.join(".git/objects").is_dir() && g.repo.join(".git/config").is_file());
}

/// `rcpt log append LOG ENVELOPE-i` of the demo log.
fn log_append(demo: &support::Demo, i: usize) -> Output {
    support::rcpt()
        .args(["log", "append"])
        .arg(&demo.log)
        .arg(&demo.envelopes[i])
        .output()
        .unwrap()
}

#[test]
fn the_log_directory_never_follows_a_planted_link() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = support::Demo::new(tmp.path(), "", "log.example/dirs", 3, 1);
    let outside = Outside::new(tmp.path(), "outside-log");
    let before = outside.snapshot();
    let append = |i: usize| log_append(&demo, i);
    for planted in [
        ".rcpt/tmp",
        ".rcpt",
        "tile",
        "tile/entries",
        ".rcpt/checkpoints",
    ] {
        let at = demo.log.join(planted);
        let kept = tmp.path().join("kept");
        std::fs::rename(&at, &kept).unwrap();
        outside.plant(&at);
        let out = append(1);
        assert_ne!(code(&out), 0, "{planted}: {}", shown(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("symbolic link"), "{planted}: {err}");
        assert_eq!(outside.snapshot(), before, "{planted}: outside untouched");
        std::fs::remove_file(&at).unwrap();
        std::fs::rename(&kept, &at).unwrap();
    }
    // Back in place: the log is whole and takes the entry.
    let out = append(1);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    let out = support::rcpt()
        .args(["log", "check"])
        .arg(&demo.log)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", shown(&out));
    // A new log at a link: `log init` refuses it.
    let at = tmp.path().join("linked-log");
    symlink(&outside.dir, &at).unwrap();
    let out = support::rcpt()
        .args(["log", "init"])
        .arg(&at)
        .args(["--origin", "log.example/linked", "--key"])
        .arg(&demo.log_key)
        .output()
        .unwrap();
    assert_ne!(code(&out), 0, "{}", shown(&out));
    says_link(&out);
    assert_eq!(outside.snapshot(), before, "log init: outside untouched");
}

#[test]
fn a_log_directory_named_through_a_link_is_read_never_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = support::Demo::new(tmp.path(), "", "log.example/named", 2, 1);
    let append = |i: usize| log_append(&demo, i);
    // The log directory named through a link to the real log: read as an
    // input, never written through (the writer names the link).
    let real = tmp.path().join("real-log");
    std::fs::rename(&demo.log, &real).unwrap();
    symlink(&real, &demo.log).unwrap();
    let log_before = support::snapshot(&real);
    let out = append(1);
    assert_ne!(code(&out), 0, "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(
        support::snapshot(&real),
        log_before,
        "the real log untouched"
    );
    let out = support::rcpt()
        .args(["log", "check"])
        .arg(&demo.log)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "reading through the link: {}", shown(&out));
}

#[test]
fn the_monitor_state_never_follows_a_planted_link() {
    use support::monitor::{entries, key, log_with, monitor_dir};
    let tmp = tempfile::tempdir().unwrap();
    let log = log_with(tmp.path(), "log", &entries(0, 3, "gate.example", &key(1)));
    let state = tmp.path().join("state");
    let first = monitor_dir(&log, &state, &[]);
    assert_eq!(first.code, 0, "{first:?}");
    let outside = Outside::new(tmp.path(), "outside-state");
    let before = outside.snapshot();
    for planted in ["tmp", "origins", ""] {
        let at = if planted.is_empty() {
            state.clone()
        } else {
            state.join(planted)
        };
        let kept = tmp.path().join("kept");
        std::fs::rename(&at, &kept).unwrap();
        outside.plant(&at);
        let run = monitor_dir(&log, &state, &[]);
        assert_ne!(run.code, 0, "{planted}: {run:?}");
        assert!(
            run.stderr.contains("symbolic link"),
            "{planted}: {}",
            run.stderr
        );
        assert_eq!(outside.snapshot(), before, "{planted}: outside untouched");
        std::fs::remove_file(&at).unwrap();
        std::fs::rename(&kept, &at).unwrap();
        let again = monitor_dir(&log, &state, &[]);
        assert_eq!(again.code, 0, "{planted}, back: {again:?}");
    }
}

#[cfg(feature = "net")]
#[test]
fn the_witness_state_never_follows_a_planted_link() {
    let tmp = tempfile::tempdir().unwrap();
    let policy = support::witness::logs_policy(support::serve::ORIGIN, &support::serve::log_key());
    let outside = Outside::new(tmp.path(), "outside-witness");
    let before = outside.snapshot();
    for planted in ["state", "tmp"] {
        let (dir, _) =
            support::witness::init_witness(tmp.path(), &format!("w-{planted}"), 1, &policy);
        let at = dir.join(planted);
        outside.plant(&at);
        let mut child = std::process::Command::new(support::rcpt_bin())
            .args(["witness", "serve"])
            .arg(&dir)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{planted}: witness serve started on a planted link");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        refused(&out, code(&out).max(1), &at, planted);
        assert_eq!(outside.snapshot(), before, "{planted}: outside untouched");
    }
}
