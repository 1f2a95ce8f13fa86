//! Freshness on hostile git layouts, against the real `git` (issue 20,
//! class 5): rcpt's ref reader either gives the object id git gives, or
//! refuses (not evaluated); it never says fresh where git resolves the
//! ref to another object or to nothing. And no repository file planted as
//! a FIFO makes it wait (class 2).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod support;

use rcpt::digest::{Algorithm, Digest};
use rcpt::fresh::{ItemState, ReadSetError, check_read_set, read_set};
use rcpt::receipt::Substrate;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::gate::{git_out, git_trimmed as git};

/// What git resolves `name` to: `rev-parse --verify`, which must agree
/// with `show-ref --verify` (None when git refuses or finds nothing).
fn git_resolves(dir: &Path, name: &str) -> Option<String> {
    let rev = git_out(dir, &["rev-parse", "--verify", "-q", name]);
    let show = git_out(dir, &["show-ref", "--verify", "--hash", name]);
    let text = |o: &std::process::Output| {
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let (r, s) = (text(&rev), text(&show));
    if r.is_some() && s.is_some() {
        assert_eq!(r, s, "git rev-parse and show-ref disagree on {name}");
    }
    r.or(s)
}

/// A repository with commits A (tagged `a`) and B on main, and branches
/// `evil` and `other` at A, everything packed.
fn repo() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    git(p, &["init", "-q"]);
    std::fs::write(p.join("f"), b"1\n").unwrap();
    git(p, &["add", "."]);
    git(p, &["commit", "-q", "-m", "a"]);
    let a = git(p, &["rev-parse", "HEAD"]);
    git(p, &["branch", "evil"]);
    git(p, &["branch", "other"]);
    std::fs::write(p.join("f"), b"2\n").unwrap();
    git(p, &["commit", "-q", "-am", "b"]);
    let b = git(p, &["rev-parse", "HEAD"]);
    git(p, &["pack-refs", "--all", "--prune"]);
    (dir, a, b)
}

/// Run `f` on another thread: a hang is a failure, not a stuck test.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("returned without waiting")
}

/// rcpt's answer for `name`: the digest of the object id, or a refusal.
fn rcpt_resolves(dir: &Path, name: &str) -> Result<Digest, ReadSetError> {
    let (root, name) = (dir.to_path_buf(), name.to_string());
    within(move || read_set(&root, Substrate::Git, Algorithm::Sha256, &[name]).map(|s| s[0].digest))
}

/// The rule: rcpt gives git's object id, or refuses; `refuses` says which
/// this layout must give.
fn agree(dir: &Path, name: &str, refuses: bool) {
    let git_says = git_resolves(dir, name);
    match rcpt_resolves(dir, name) {
        Ok(d) => {
            assert!(!refuses, "{name}: rcpt resolved a layout it must refuse");
            let oid = git_says.unwrap_or_else(|| panic!("{name}: rcpt resolved, git did not"));
            assert_eq!(
                d,
                Digest::sha256(oid.as_bytes()),
                "{name}: another object than git's"
            );
        }
        Err(e) => assert!(refuses, "{name}: refused ({e}), git says {git_says:?}"),
    }
}

fn packed(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(".git/packed-refs")).unwrap()
}

fn write_packed(dir: &Path, text: &str) {
    std::fs::write(dir.join(".git/packed-refs"), text).unwrap();
}

#[test]
fn the_normal_layouts_agree_with_git() {
    let (dir, a, b) = repo();
    agree(dir.path(), "refs/heads/main", false);
    agree(dir.path(), "refs/heads/evil", false);
    assert_eq!(git_resolves(dir.path(), "refs/heads/main"), Some(b));
    assert_eq!(git_resolves(dir.path(), "refs/heads/evil"), Some(a));
}

#[cfg(unix)]
#[test]
fn a_loose_ref_that_is_a_symlink_is_refused_not_read_from_packed_refs() {
    let (dir, a, b) = repo();
    let p = dir.path();
    // A loose main (at B) and evil packed at A; evil made a link to main.
    git(p, &["update-ref", "refs/heads/main", &b]);
    let read = read_set(
        p,
        Substrate::Git,
        Algorithm::Sha256,
        &["refs/heads/evil".into()],
    )
    .unwrap();
    std::os::unix::fs::symlink("main", p.join(".git/refs/heads/evil")).unwrap();
    // git reads the link (git 2.47: as nothing), never the packed A; the
    // old reader fell back to packed-refs and said A.
    assert_ne!(git_resolves(p, "refs/heads/evil"), Some(a));
    agree(p, "refs/heads/evil", true);
    // A receipt recorded at A is never fresh now.
    assert!(matches!(
        check_read_set(p, Substrate::Git, &read),
        ItemState::Unknown(_)
    ));
    // A symbolic-ref style link (`refs/...`), and a dangling one.
    std::fs::remove_file(p.join(".git/refs/heads/evil")).unwrap();
    std::os::unix::fs::symlink("refs/heads/main", p.join(".git/refs/heads/evil")).unwrap();
    agree(p, "refs/heads/evil", true);
    std::fs::remove_file(p.join(".git/refs/heads/evil")).unwrap();
    std::os::unix::fs::symlink("nowhere", p.join(".git/refs/heads/evil")).unwrap();
    agree(p, "refs/heads/evil", true);
}

#[test]
fn a_ref_listed_twice_in_packed_refs_is_refused() {
    let (dir, _a, b) = repo();
    let p = dir.path();
    let text = packed(p);
    // evil listed again, at B, right after its line.
    let evil = text
        .lines()
        .find(|l| l.ends_with(" refs/heads/evil"))
        .unwrap()
        .to_string();
    write_packed(
        p,
        &text.replace(
            &format!("{evil}\n"),
            &format!("{evil}\n{b} refs/heads/evil\n"),
        ),
    );
    agree(p, "refs/heads/evil", true);
    agree(p, "refs/heads/main", true);
}

#[test]
fn a_packed_refs_line_that_is_no_ref_line_is_refused() {
    let (dir, _a, _b) = repo();
    let p = dir.path();
    let text = packed(p);
    let bad_files = [
        format!("{text}this is not a ref line\n"),
        format!("{text}\n"),
        text.trim_end_matches('\n').to_string(), // last line unterminated
        format!("{text}# a comment that is no header\n"),
        text.replacen("refs/heads/evil", "refs/heads/../evil", 1),
        text.replacen(" refs/heads/evil", "\trefs/heads/evil", 1),
    ];
    for bad in &bad_files {
        write_packed(p, bad);
        agree(p, "refs/heads/evil", true);
    }
    // A peel line with no ref line before it.
    let header = text.lines().next().unwrap();
    let rest: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    let oid = rest.split(' ').next().unwrap();
    write_packed(p, &format!("{header}\n^{oid}\n{rest}"));
    agree(p, "refs/heads/evil", true);
}

#[test]
fn packed_refs_out_of_order_or_of_another_format_are_refused() {
    let (dir, _a, _b) = repo();
    let p = dir.path();
    let text = packed(p);
    let mut lines: Vec<&str> = text.lines().collect();
    let header = lines.remove(0);
    lines.reverse();
    // The header says sorted: git binary-searches and may miss a name.
    write_packed(p, &format!("{header}\n{}\n", lines.join("\n")));
    agree(p, "refs/heads/evil", true);
    // A SHA-256 object id in a SHA-1 repository.
    let evil = text
        .lines()
        .find(|l| l.ends_with(" refs/heads/evil"))
        .unwrap();
    let oid = evil.split(' ').next().unwrap();
    write_packed(p, &text.replace(oid, &format!("{oid}{}", &oid[..24])));
    agree(p, "refs/heads/evil", true);
}

#[test]
fn a_loose_ref_git_would_read_otherwise_is_refused() {
    let (dir, _a, b) = repo();
    let p = dir.path();
    let loose = p.join(".git/refs/heads/evil");
    // Upper-case hex (git accepts), trailing words (git accepts), no space
    // after "ref:" (git accepts): rcpt reads none of them.
    for text in [
        format!("{}\n", b.to_uppercase()),
        format!("{b} trailing\n"),
        "ref:refs/heads/main\n".to_string(),
    ] {
        std::fs::write(&loose, text).unwrap();
        agree(p, "refs/heads/evil", true);
    }
}

#[test]
fn a_config_git_reads_as_reftable_is_not_read_as_files() {
    let (dir, _a, _b) = repo();
    let p = dir.path();
    let config = p.join(".git/config");
    let base = std::fs::read_to_string(&config).unwrap();
    for extra in [
        "[extensions] refStorage = reftable\n",
        "[extensions]\n\trefstorage = \"reftable\" # comment\n",
        "[extensions]\n\tREFSTORAGE=reftable;c\n",
    ] {
        std::fs::write(&config, format!("{base}{extra}")).unwrap();
        assert!(rcpt_resolves(p, "refs/heads/main").is_err(), "{extra:?}");
    }
    std::fs::write(&config, &base).unwrap();
    std::fs::create_dir(p.join(".git/reftable")).unwrap();
    assert!(rcpt_resolves(p, "refs/heads/main").is_err());
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_dir_all(path);
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

#[cfg(unix)]
#[test]
fn repository_files_planted_as_fifos_are_refused_at_once() {
    for planted in [
        ".git/packed-refs",
        ".git/config",
        ".git/refs/heads/main",
        ".git",
    ] {
        let (dir, _a, b) = repo();
        let p = dir.path();
        if planted.ends_with("main") {
            git(p, &["update-ref", "refs/heads/main", &b]);
        }
        mkfifo(&p.join(planted));
        assert!(rcpt_resolves(p, "refs/heads/main").is_err(), "{planted}");
    }
}

#[cfg(unix)]
#[test]
fn the_cli_refuses_fifo_repository_files_without_hanging() {
    for planted in [".git/packed-refs", ".git/config", ".git"] {
        let (dir, _a, _b) = repo();
        let p = dir.path().to_path_buf();
        mkfifo(&p.join(planted));
        let out = within(move || {
            support::rcpt()
                .args(["receipt", "read-set", "--substrate", "git", "--root"])
                .arg(&p)
                .arg("refs/heads/main")
                .output()
                .unwrap()
        });
        assert!(!out.status.success(), "{planted}");
        assert_ne!(out.status.code(), Some(0), "{planted}");
    }
}
