//! Clean mode that is clean (issue 34, defect 1): the copy the checks run
//! in has nothing of the user's above it. A check that walks every parent
//! directory finds none of the user's ignored files (`node_modules/`,
//! `.cargo/config.toml`, `.env`, `pyproject.toml`, `.npmrc`,
//! `.python-version`), `git` in the copy sees the copy's own repository
//! (no branch, tag, remote or config of the user's), a real `node`
//! `require()` of a module only the user's ignored `node_modules/` holds
//! fails as in a fresh clone; the copy's home is never inside the work
//! tree (whatever XDG_CACHE_HOME, HOME and TMPDIR say), is private and
//! keyed to the repository; the parked worktree of earlier versions under
//! `.git/rcpt/clean/` is pruned.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use support::gate::{Gate, git, shown};

fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// The names tools look for in parent directories, each planted in the
/// user's work tree (ignored, so no change contains them).
const LOOKED_UP: &[&str] = &[
    "node_modules",
    ".cargo/config.toml",
    ".env",
    "pyproject.toml",
    ".npmrc",
    ".python-version",
];

/// The check: from its directory up to `/`, fail when a name of
/// [`LOOKED_UP`] exists whose real path is in the user's repository (`$1`),
/// or when a parent directory is the user's repository; then require
/// `git` to see the copy's own repository, with none of the user's
/// branches, tags, remotes or config, and the base's history readable.
const WALK: &str = r#"#!/bin/sh
set -eu
user=$1
here=$(pwd -P)
case "$here/" in "$user"/*) echo "the copy is inside the user's tree: $here"; exit 1;; esac
d=$here
while :; do
  [ "$d" = "$user" ] && { echo "parent $d is the user's tree"; exit 1; }
  for f in node_modules .cargo/config.toml .env pyproject.toml .npmrc .python-version; do
    if [ -e "$d/$f" ]; then
      real=$(cd "$(dirname "$d/$f")" && pwd -P)/$(basename "$f")
      case "$real" in "$user"/*) echo "found the user's $real from $d"; exit 1;; esac
    fi
  done
  [ "$d" = / ] && break
  d=$(dirname "$d")
done
top=$(git rev-parse --show-toplevel)
[ "$top" = "$here" ] || { echo "git toplevel $top"; exit 1; }
common=$(cd "$(git rev-parse --git-common-dir)" && pwd -P)
[ "$common" = "$here/.git" ] || { echo "git common dir $common"; exit 1; }
refs=$(git for-each-ref)
[ -z "$refs" ] || { echo "refs seen: $refs"; exit 1; }
[ -z "$(git remote)" ] || { echo "remotes seen: $(git remote)"; exit 1; }
if git config --get user.marker; then echo "the user's config is seen"; exit 1; fi
git log --oneline >/dev/null
echo "nothing of the user's above $here"
"#;

/// A repository whose ignored files are the names tools look up, a user
/// branch, tag, remote and config value, and the walking check.
fn planted() -> Gate {
    let ignore = LOOKED_UP.join("\n") + "\n.cache/\n";
    let g = Gate::new(&[
        (".gitignore", ignore.as_str()),
        ("README", "a project\n"),
        ("walk.sh", WALK),
        (
            "test.js",
            "const pad = require('leftpad');\nprocess.exit(pad('x') === 'padded x' ? 0 : 1);\n",
        ),
    ]);
    for (path, text) in [
        (
            "node_modules/leftpad/index.js",
            "module.exports = (s) => 'padded ' + s;\n",
        ),
        (
            "node_modules/leftpad/package.json",
            "{\"name\": \"leftpad\"}\n",
        ),
        (
            ".cargo/config.toml",
            "[build]\nrustflags = [\"--cfg\", \"users\"]\n",
        ),
        (".env", "USER_SECRET=only-in-the-users-tree\n"),
        ("pyproject.toml", "[project]\nname = \"users\"\n"),
        (".npmrc", "registry=http://users.invalid/\n"),
        (".python-version", "3.99\n"),
    ] {
        g.write(path, text);
    }
    git(&g.repo, &["branch", "users-branch"]);
    git(&g.repo, &["tag", "users-tag"]);
    git(
        &g.repo,
        &["remote", "add", "origin", "http://users.invalid/repo"],
    );
    git(&g.repo, &["config", "user.marker", "users"]);
    g
}

/// The user's repository's real path (what the walking check compares with).
fn user_root(g: &Gate) -> String {
    std::fs::canonicalize(&g.repo)
        .unwrap()
        .display()
        .to_string()
}

/// `gate check` of the work tree with one check, `-o` to `out`.
fn check(g: &Gate, name: &str, run: &[&str], out: &Path) -> std::process::Output {
    let policy = g.policy(&[(name, run, 60)], &[]);
    g.check(&policy, out, &[])
}

#[test]
fn a_check_walking_up_from_the_clean_copy_finds_nothing_of_the_users() {
    let g = planted();
    let root = user_root(&g);
    // In the user's own tree the walk finds the user's files: it can fail.
    let here = std::process::Command::new("sh")
        .args(["walk.sh", &root])
        .current_dir(&g.repo)
        .output()
        .unwrap();
    assert_eq!(code(&here), 1, "{}", shown(&here));
    // In the clean copy, first (full checkout) and parked runs alike.
    for run in 0..3 {
        g.write("README", &format!("a project, edit {run}\n"));
        let bundle = g.world.dir().join(format!("walk-{run}.json"));
        let out = check(&g, "walk", &["sh", "walk.sh", &root], &bundle);
        assert_eq!(code(&out), 0, "run {run}: {}", shown(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("verdict: admit"),
            "{}",
            shown(&out)
        );
        assert!(g.leftovers().is_empty(), "{:?}", g.leftovers());
    }
    // The parked copy busy (another run holds its lock): a fresh copy in
    // the run's own directory, just as clean.
    let homes = g.homes();
    let held = std::fs::File::options()
        .write(true)
        .open(homes[0].join("lock"))
        .unwrap();
    held.lock().unwrap();
    let out = check(
        &g,
        "walk",
        &["sh", "walk.sh", &root],
        &g.world.dir().join("busy.json"),
    );
    assert_eq!(code(&out), 0, "parked copy busy: {}", shown(&out));
    drop(held);
    assert!(g.leftovers().is_empty(), "{:?}", g.leftovers());
    // Nothing registered in the user's repository.
    assert_eq!(g.worktrees(), 1);
    assert!(!g.repo.join(".git/rcpt/clean").exists());
}

#[test]
fn a_require_that_only_the_users_ignored_node_modules_satisfies_fails_as_in_a_fresh_clone() {
    let g = planted();
    let node = std::process::Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("RCPT_REQUIRE_NODE").as_deref() != Ok("1"),
            "RCPT_REQUIRE_NODE=1 but node is not on PATH (apt-get install -y nodejs)"
        );
        support::skip("node is not on PATH: the real require() check cannot run");
        return;
    }
    // In the user's tree the ignored module is found: the test passes.
    let here = std::process::Command::new("node")
        .arg("test.js")
        .current_dir(&g.repo)
        .output()
        .unwrap();
    assert_eq!(code(&here), 0, "{}", shown(&here));
    // In a fresh clone it is not: `node test.js` fails there.
    let clone = g.world.dir().join("clone");
    let out = std::process::Command::new("git")
        .args(["clone", "-q"])
        .arg(&g.repo)
        .arg(&clone)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let there = std::process::Command::new("node")
        .arg("test.js")
        .current_dir(&clone)
        .output()
        .unwrap();
    assert_ne!(code(&there), 0, "{}", shown(&there));
    // The gate decides as the fresh clone does: deny, on every run.
    for run in 0..2 {
        g.write("README", &format!("a project, edit {run}\n"));
        let bundle = g.world.dir().join(format!("node-{run}.json"));
        let out = check(&g, "node", &["node", "test.js"], &bundle);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 1, "run {run}: {}", shown(&out));
        assert!(err.contains("verdict: deny (check.node.failed)"), "{err}");
    }
}

/// `rcpt gate check` with the walking check under the environment `env`
/// (XDG_CACHE_HOME, HOME, TMPDIR: unset when `None`).
fn walk_with(g: &Gate, env: &[(&str, Option<&Path>)], out: &Path) -> std::process::Output {
    let policy = g.policy(&[("walk", &["sh", "walk.sh", &user_root(g)], 60)], &[]);
    let mut cmd = g.rcpt();
    cmd.args(["gate", "check", "--policy"])
        .arg(&policy)
        .arg("--key")
        .arg(&g.key)
        .arg("-o")
        .arg(out);
    for (name, value) in env {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    cmd.output().unwrap()
}

#[test]
fn the_home_of_the_clean_copy_is_never_inside_the_users_tree() {
    let g = planted();
    let inside = g.repo.join(".cache");
    let outside_home = g.world.dir().join("home");
    std::fs::create_dir_all(&outside_home).unwrap();
    // XDG_CACHE_HOME inside the work tree (a CI cache, say): not used;
    // HOME/.cache is, and nothing is made under the work tree.
    let out = walk_with(
        &g,
        &[
            ("XDG_CACHE_HOME", Some(&inside)),
            ("HOME", Some(&outside_home)),
        ],
        &g.world.dir().join("1.json"),
    );
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert!(!inside.exists(), "nothing made in the work tree");
    assert!(outside_home.join(".cache/rcpt/clean").is_dir());
    // HOME inside the work tree too (a dotfiles repository at HOME): the
    // temporary directory's per-user home.
    let out = walk_with(
        &g,
        &[("XDG_CACHE_HOME", None), ("HOME", Some(&g.repo))],
        &g.world.dir().join("2.json"),
    );
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert!(!inside.exists());
    let uid = std::fs::metadata(&g.tmp).map(|_| rustix_uid()).unwrap();
    assert!(g.tmp.join(format!("rcpt-{uid}/clean")).is_dir());
    // Every candidate inside: no verdict, nothing made, the way out named.
    let out = walk_with(
        &g,
        &[
            ("XDG_CACHE_HOME", Some(&inside)),
            ("HOME", Some(&g.repo)),
            ("TMPDIR", Some(&g.repo.join("tmp"))),
        ],
        &g.world.dir().join("3.json"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(
        err.contains("no directory outside the work tree") && err.contains("TMPDIR"),
        "{err}"
    );
    assert!(!inside.exists() && !g.repo.join("tmp").exists() && !g.repo.join(".cache").exists());
}

/// The effective uid of this process (the owner of what it makes).
fn rustix_uid() -> u32 {
    let probe = tempfile::tempfile().unwrap();
    std::os::unix::fs::MetadataExt::uid(&probe.metadata().unwrap())
}

#[test]
fn the_home_is_private_keyed_to_the_repository_and_swept_when_it_is_gone() {
    let g = planted();
    let out = check(
        &g,
        "walk",
        &["sh", "walk.sh", &user_root(&g)],
        &g.world.dir().join("a.json"),
    );
    assert_eq!(code(&out), 0, "{}", shown(&out));
    let homes = g.homes();
    assert_eq!(homes.len(), 1, "{homes:?}");
    let home = &homes[0];
    for dir in [
        g.cache.join("rcpt"),
        g.cache.join("rcpt/clean"),
        home.clone(),
    ] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
    let origin = std::fs::read_to_string(home.join("origin")).unwrap();
    let common = std::fs::canonicalize(g.repo.join(".git")).unwrap();
    assert_eq!(Path::new(&origin), common);
    // The copy is named like the work tree, as a clone would be.
    assert_eq!(g.parked().file_name(), g.repo.file_name());
    // A second repository with the same cache: a home of its own.
    let other = Gate::new(&[("f.txt", "x\n")]);
    let other_repo = other.repo.clone();
    let run_other = |what: &str| {
        let policy = g.policy(&[("true", &["true"], 10)], &[]);
        let out = std::process::Command::new(support::rcpt_bin())
            .current_dir(&other_repo)
            .env("TMPDIR", &g.tmp)
            .env("XDG_CACHE_HOME", &g.cache)
            .args(["gate", "check", "--policy"])
            .arg(&policy)
            .arg("--key")
            .arg(&g.key)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{what}: {}", shown(&out));
    };
    run_other("second repository");
    assert_eq!(g.homes().len(), 2);
    // The first repository is deleted: the next run elsewhere removes its home.
    std::fs::remove_dir_all(&g.repo).unwrap();
    run_other("after the first is gone");
    let left: Vec<PathBuf> = g.homes();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_ne!(&left[0], home);
}

#[test]
fn the_parked_worktree_of_an_earlier_version_is_pruned() {
    let g = planted();
    let legacy = g.repo.join(".git/rcpt/clean");
    // What an earlier version left: a parked tree, its index, its lock,
    // and a registered work-* tree a killed run left.
    std::fs::create_dir_all(legacy.join("tree")).unwrap();
    std::fs::write(legacy.join("tree/README"), "old\n").unwrap();
    std::fs::write(legacy.join("index"), "DIRC").unwrap();
    std::fs::write(legacy.join("lock"), "").unwrap();
    let work = legacy.join("work-0123456789abcdef");
    git(
        &g.repo,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            work.to_str().unwrap(),
            "HEAD",
        ],
    );
    assert_eq!(g.worktrees(), 2);
    let store_file = g.repo.join(".git/rcpt/store/keep");
    std::fs::create_dir_all(store_file.parent().unwrap()).unwrap();
    std::fs::write(&store_file, "store\n").unwrap();
    // While an earlier version's run holds its lock, nothing is pruned.
    let held = std::fs::File::options()
        .write(true)
        .open(legacy.join("lock"))
        .unwrap();
    held.lock().unwrap();
    let walk = ["sh", "walk.sh", &user_root(&g)];
    let out = check(&g, "walk", &walk, &g.world.dir().join("1.json"));
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert!(work.join("README").exists() && legacy.join("tree/README").exists());
    drop(held);
    let out = check(&g, "walk", &walk, &g.world.dir().join("2.json"));
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert!(!legacy.exists(), "the legacy parked worktree is removed");
    assert!(!g.repo.join(".git/worktrees/work-0123456789abcdef").exists());
    assert_eq!(g.worktrees(), 1, "git knows of no extra worktree");
    let prune = git(&g.repo, &["worktree", "prune", "--dry-run", "-v"]);
    assert!(prune.is_empty(), "{prune}");
    assert_eq!(std::fs::read_to_string(&store_file).unwrap(), "store\n");
}
