//! Freshness rules (spec/gate.md) against real files and a real git
//! repository made by the `git` command in each test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use rcpt::digest::{Algorithm, Digest};
use rcpt::fresh::{ItemState, ReadSetError, ResourceError, check_read_set, read_set};
use rcpt::receipt::Substrate;
use std::process::Command;
use support::gate::git_trimmed as git;

/// A repository with one commit on main, a tag, and a file.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("a.txt"), b"hello\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), b"fn main() {}\n").unwrap();
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-q", "-m", "one"]);
    git(dir.path(), &["tag", "-a", "v1", "-m", "tag one"]);
    dir
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn ref_digest_is_over_the_hex_object_id_git_prints() {
    let dir = repo();
    let head = git(dir.path(), &["rev-parse", "refs/heads/main"]);
    let tag = git(dir.path(), &["rev-parse", "refs/tags/v1"]);
    for alg in [Algorithm::Blake3, Algorithm::Sha256] {
        let set = read_set(
            dir.path(),
            Substrate::Git,
            alg,
            &strings(&["refs/tags/v1", "refs/heads/main", "a.txt"]),
        )
        .unwrap();
        let names: Vec<&str> = set.iter().map(|i| i.resource.as_str()).collect();
        assert_eq!(names, ["a.txt", "refs/heads/main", "refs/tags/v1"]);
        let d = |b: &[u8]| match alg {
            Algorithm::Blake3 => Digest::blake3(b),
            Algorithm::Sha256 => Digest::sha256(b),
        };
        assert_eq!(set[0].digest, d(b"hello\n"));
        assert_eq!(set[1].digest, d(head.as_bytes()));
        // An annotated tag resolves to the tag object, not the commit.
        assert_eq!(set[2].digest, d(tag.as_bytes()));
        assert!(matches!(
            check_read_set(dir.path(), Substrate::Git, &set),
            ItemState::Fresh
        ));
    }
}

#[test]
fn packed_refs_and_moved_refs() {
    let dir = repo();
    git(dir.path(), &["pack-refs", "--all", "--prune"]);
    assert!(!dir.path().join(".git/refs/heads/main").exists());
    let set = read_set(
        dir.path(),
        Substrate::Git,
        Algorithm::Blake3,
        &strings(&["refs/heads/main"]),
    )
    .unwrap();
    let head = git(dir.path(), &["rev-parse", "refs/heads/main"]);
    assert_eq!(set[0].digest, Digest::blake3(head.as_bytes()));
    // Move the ref: a new commit writes a loose ref over the packed one.
    std::fs::write(dir.path().join("a.txt"), b"changed\n").unwrap();
    git(dir.path(), &["commit", "-q", "-am", "two"]);
    match check_read_set(dir.path(), Substrate::Git, &set) {
        ItemState::Stale(why) => assert!(why.contains("refs/heads/main"), "{why}"),
        other => panic!("moved ref must be stale, got {other:?}"),
    }
    // A deleted ref is stale too.
    git(dir.path(), &["branch", "-q", "gone"]);
    let gone = read_set(
        dir.path(),
        Substrate::Git,
        Algorithm::Sha256,
        &strings(&["refs/heads/gone"]),
    )
    .unwrap();
    git(dir.path(), &["branch", "-q", "-D", "gone"]);
    assert!(matches!(
        check_read_set(dir.path(), Substrate::Git, &gone),
        ItemState::Stale(_)
    ));
}

#[test]
fn symbolic_refs_and_linked_worktrees() {
    let dir = repo();
    git(
        dir.path(),
        &["symbolic-ref", "refs/heads/alias", "refs/heads/main"],
    );
    let head = git(dir.path(), &["rev-parse", "refs/heads/main"]);
    let set = read_set(
        dir.path(),
        Substrate::Git,
        Algorithm::Blake3,
        &strings(&["refs/heads/alias"]),
    )
    .unwrap();
    assert_eq!(set[0].digest, Digest::blake3(head.as_bytes()));

    let wt_parent = tempfile::tempdir().unwrap();
    let wt = wt_parent.path().join("wt");
    git(
        dir.path(),
        &["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "side"],
    );
    let in_wt = read_set(
        &wt,
        Substrate::Git,
        Algorithm::Blake3,
        &strings(&["refs/heads/main", "refs/heads/side", "a.txt"]),
    )
    .unwrap();
    assert_eq!(in_wt[1].digest, Digest::blake3(head.as_bytes()));
    assert_eq!(in_wt[2].digest, Digest::blake3(head.as_bytes()));
}

#[test]
fn edited_and_vanished_files_are_stale() {
    let dir = repo();
    let set = read_set(
        dir.path(),
        Substrate::Filesystem,
        Algorithm::Blake3,
        &strings(&["src/lib.rs", "a.txt"]),
    )
    .unwrap();
    assert!(matches!(
        check_read_set(dir.path(), Substrate::Filesystem, &set),
        ItemState::Fresh
    ));
    std::fs::write(dir.path().join("src/lib.rs"), b"fn main() { }\n").unwrap();
    assert!(matches!(
        check_read_set(dir.path(), Substrate::Filesystem, &set),
        ItemState::Stale(_)
    ));
    std::fs::write(dir.path().join("src/lib.rs"), b"fn main() {}\n").unwrap();
    std::fs::remove_file(dir.path().join("a.txt")).unwrap();
    match check_read_set(dir.path(), Substrate::Filesystem, &set) {
        ItemState::Stale(why) => assert!(why.contains("a.txt does not exist"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn paths_leaving_root_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"s").unwrap();
    let dir = repo();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("outdir")).unwrap();
    // A symlink that stays inside ROOT is followed.
    std::os::unix::fs::symlink("a.txt", dir.path().join("inside")).unwrap();
    for (name, want_escape) in [("link", true), ("outdir/secret", true), ("inside", false)] {
        let r = read_set(
            dir.path(),
            Substrate::Filesystem,
            Algorithm::Blake3,
            &strings(&[name]),
        );
        match (r, want_escape) {
            (Err(ReadSetError::Resource(ResourceError::Escapes(_))), true) => {}
            (Ok(set), false) => assert_eq!(set[0].digest, Digest::blake3(b"hello\n")),
            (other, _) => panic!("{name}: {other:?}"),
        }
    }
    for name in ["../x", "/etc/passwd", "a/../a.txt", "./a.txt", ""] {
        let r = read_set(
            dir.path(),
            Substrate::Filesystem,
            Algorithm::Blake3,
            &strings(&[name]),
        );
        assert!(
            matches!(
                r,
                Err(ReadSetError::Resource(ResourceError::BadPath { .. }))
            ),
            "{name:?}: {r:?}"
        );
    }
}

#[test]
fn non_files_are_never_opened() {
    let dir = repo();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // Would block forever if opened for reading.
    let r = read_set(
        dir.path(),
        Substrate::Filesystem,
        Algorithm::Blake3,
        &strings(&["fifo"]),
    );
    assert!(
        matches!(r, Err(ReadSetError::Resource(ResourceError::NotAFile(_)))),
        "{r:?}"
    );
    let r = read_set(
        dir.path(),
        Substrate::Filesystem,
        Algorithm::Blake3,
        &strings(&["src"]),
    );
    assert!(
        matches!(r, Err(ReadSetError::Resource(ResourceError::NotAFile(_)))),
        "{r:?}"
    );
}

#[test]
fn duplicates_and_unsupported_substrates() {
    let dir = repo();
    let r = read_set(
        dir.path(),
        Substrate::Filesystem,
        Algorithm::Blake3,
        &strings(&["a.txt", "a.txt"]),
    );
    assert!(matches!(r, Err(ReadSetError::Duplicate(_))), "{r:?}");
    let set = read_set(
        dir.path(),
        Substrate::Filesystem,
        Algorithm::Blake3,
        &strings(&["a.txt"]),
    )
    .unwrap();
    assert!(matches!(
        check_read_set(dir.path(), Substrate::Postgresql, &set),
        ItemState::Unknown(_)
    ));
    // A git ref outside a repository cannot be examined: not evaluated.
    let plain = tempfile::tempdir().unwrap();
    let head = git(dir.path(), &["rev-parse", "refs/heads/main"]);
    let item = rcpt::receipt::ReadItem {
        resource: "refs/heads/main".into(),
        digest: Digest::blake3(head.as_bytes()),
    };
    assert!(matches!(
        check_read_set(plain.path(), Substrate::Git, &[item]),
        ItemState::Unknown(_)
    ));
}

#[test]
fn reftable_repositories_are_not_evaluated() {
    let dir = repo();
    let head = git(dir.path(), &["rev-parse", "refs/heads/main"]);
    let config = dir.path().join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[extensions]\n\trefStorage = reftable\n");
    std::fs::write(&config, text).unwrap();
    let item = rcpt::receipt::ReadItem {
        resource: "refs/heads/main".into(),
        digest: Digest::blake3(head.as_bytes()),
    };
    assert!(matches!(
        check_read_set(dir.path(), Substrate::Git, &[item]),
        ItemState::Unknown(_)
    ));
}
