//! park: where the clean copy lives, and the parked copy kept there
//! between runs so that bringing it to the base costs what changed, not
//! the whole repository (spec/gate.md "Clean mode", "The parked clean
//! copy").
//!
//! ```text
//! HOME = $XDG_CACHE_HOME/rcpt/clean, else $HOME/.cache/rcpt/clean,
//!        else $TMPDIR/rcpt-<uid>/clean: the first that is not inside the
//!        user's work tree or git directory (each directory mode 0700,
//!        this user's, opened without following a link)
//! HOME/<key>/                 one per repository: key = BLAKE3 of its git
//!                             common directory's real path (32 hex digits)
//! HOME/<key>/origin           that path, for people and for pruning
//! HOME/<key>/lock             flock: one run at a time uses the parked copy
//! HOME/<key>/index            the parked copy's index, saved once verified clean
//! HOME/<key>/tree/<name>/     the parked copy, named like the user's work tree
//! HOME/<key>/run-<random>/    one run: lock, out/ (the checks' output),
//!                             tree/<name>/ (a fresh copy when the parked one is busy)
//! ```
//!
//! A copy is a repository of its own: `git init` (no template, so no
//! hook), `objects/info/alternates` naming the user's object directory
//! (read only: nothing is copied, nothing is written there), `HEAD`
//! detached at the base, `shallow` copied when the user's repository is
//! shallow. No branch, tag, remote, config or hook of the user's is in it,
//! and nothing of the user's work tree is above it, so a check that looks
//! in parent directories (node's module resolution, `.cargo/config.toml`,
//! `.npmrc`, dotenv files, `pyproject.toml`, `git` discovery) finds
//! nothing of the user's.
//!
//! The parked copy keeps its files between runs. A run takes its lock,
//! replaces its `.git` with a new repository holding the saved index, and
//! runs `git reset --hard`, `git clean -ffdx` and `git status
//! --porcelain=v2 --ignored=matching --untracked-files=all`, which must
//! print nothing; git compares each file's stat data (ctime included,
//! which no unprivileged process can set back) with the saved index and
//! rewrites any file that differs, so what a previous run's checks left
//! is undone. Only then is the index saved again, before the change is
//! copied in. When the lock is held or anything fails, the run makes a
//! fresh copy in its own directory instead (the reference behaviour).

use super::clean::CleanError;
use super::git::{self, WorkTree};
use crate::io::{Dir, PRIVATE_DIR_MODE};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Age under which a run directory without its lock file may be a run
/// starting now; an older one was left by a killed run.
const RUN_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Largest saved index read back (git's own index of a large repository).
const MAX_INDEX_BYTES: usize = crate::limits::MAX_GIT_OUTPUT_BYTES;

/// Settings of every git command the gate runs in a clean copy: no hook;
/// the index compared by its full stat data (never trusted from a
/// monitor, an untracked cache or a split index the copy does not have).
const GIT_SAFE: [&str; 16] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.splitIndex=false",
    "-c",
    "core.trustctime=true",
    "-c",
    "core.checkStat=default",
    "-c",
    "core.ignoreStat=false",
    "-c",
    "checkout.workers=0",
];

/// `git GIT_SAFE ARGS` in the copy at `dir`.
pub fn git_in(dir: &Path, args: &[&str]) -> Result<Vec<u8>, git::GitError> {
    git::run(dir, &[&GIT_SAFE[..], args].concat())
}

/// The repository's private directory under the clean copies' home.
#[derive(Debug)]
pub struct Home {
    dir: Dir,
}

/// One run's private directory (`HOME/<key>/run-<random>`), locked while
/// it lives; removed (never through a link) when dropped.
#[derive(Debug)]
pub struct Run {
    home: Dir,
    name: String,
    dir: Dir,
    _lock: File,
}

/// The parked copy, taken for one run (its lock held until dropped).
#[derive(Debug)]
pub struct Parked {
    path: PathBuf,
    _lock: File,
}

/// The candidate bases of the home, in order: `$XDG_CACHE_HOME`, then
/// `$HOME/.cache` (each only when absolute), then the temporary
/// directory; with whether it is shared (a per-user directory is made in it).
fn candidates() -> Vec<(PathBuf, bool)> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let mut out = Vec::new();
    if let Some(p) = absolute(std::env::var_os("XDG_CACHE_HOME")) {
        out.push((p, false));
    }
    if let Some(p) = absolute(std::env::var_os("HOME")) {
        out.push((p.join(".cache"), false));
    }
    out.push((std::env::temp_dir(), true));
    out
}

/// `path` made absolute and real as far as it exists (its missing tail kept).
fn real(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut tail = Vec::new();
    loop {
        if let Ok(r) = std::fs::canonicalize(&existing) {
            return tail.iter().rev().fold(r, |p, n: &OsString| p.join(n));
        }
        match (
            existing.file_name().map(OsStr::to_os_string),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                tail.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The directories nothing of which may be above a clean copy: the work
/// tree, its git directories, and the main work tree of the repository.
fn users(tree: &WorkTree) -> Vec<PathBuf> {
    let mut out = vec![real(&tree.top), real(&tree.git_dir), real(&tree.common_dir)];
    if tree.common_dir.file_name() == Some(OsStr::new(".git"))
        && let Some(main) = tree.common_dir.parent()
    {
        out.push(real(main));
    }
    out
}

/// Open (making each missing directory, mode 0700, never through a link)
/// the home under `base`: `BASE/rcpt/clean`, or `BASE/rcpt-<uid>/clean`
/// when `base` is shared by every user (its directory must be this user's).
fn open_home_under(base: &Path, shared: bool) -> Result<Dir, CleanError> {
    let base_dir = Dir::create(base, PRIVATE_DIR_MODE)?;
    let top = if shared {
        let uid = rustix::process::geteuid().as_raw();
        base_dir.child_or_create(format!("rcpt-{uid}"), PRIVATE_DIR_MODE)?
    } else {
        base_dir.child_or_create("rcpt", PRIVATE_DIR_MODE)?
    };
    top.make_private()?;
    let home = top.child_or_create("clean", PRIVATE_DIR_MODE)?;
    home.make_private()?;
    Ok(home)
}

/// The home of the clean copies of `tree`'s repository: the first
/// candidate base whose home would not be inside the user's tree.
fn open_home(tree: &WorkTree) -> Result<Dir, CleanError> {
    let users = users(tree);
    let mut tried = Vec::new();
    for (base, shared) in candidates() {
        let home = real(&base).join(if shared { "rcpt-<uid>" } else { "rcpt" });
        if users.iter().any(|u| home.starts_with(u)) {
            tried.push(base);
            continue;
        }
        return open_home_under(&base, shared);
    }
    Err(CleanError::NoHome {
        top: tree.top.clone(),
        tried,
    })
}

/// The key of `tree`'s repository: BLAKE3 of its common directory's real
/// path, 32 hex digits.
fn key_of(tree: &WorkTree) -> String {
    let common = real(&tree.common_dir);
    let digest = crate::digest::Digest::blake3(common.as_os_str().as_encoded_bytes());
    crate::digest::to_hex(digest.bytes.get(..16).unwrap_or_default())
}

/// Take `dir/lock` (made if absent, never through a link) without
/// waiting; `None` when another process holds it.
fn try_lock(dir: &Dir) -> Option<File> {
    let lock = crate::io::open_lock(&dir.join("lock")).ok()?;
    lock.try_lock().ok()?;
    Some(lock)
}

impl Home {
    /// The private directory of `tree`'s repository, made if absent; what
    /// killed runs and vanished repositories left, and the parked
    /// worktree of earlier versions under `.git/rcpt/clean/`, removed.
    pub fn open(tree: &WorkTree) -> Result<Home, CleanError> {
        let root = open_home(tree)?;
        let key = key_of(tree);
        let dir = root.child_or_create(&key, PRIVATE_DIR_MODE)?;
        dir.make_private()?;
        let origin = real(&tree.common_dir);
        let recorded = crate::io::read_at(&dir, "origin", 64 * 1024).ok();
        if recorded.as_deref() != Some(origin.as_os_str().as_encoded_bytes()) {
            let _ = crate::io::write_atomic(
                &dir.join("origin"),
                origin.as_os_str().as_encoded_bytes(),
                0o600,
            );
        }
        sweep_vanished(&root, &key);
        let home = Home { dir };
        home.sweep_runs();
        prune_legacy(tree);
        Ok(home)
    }

    /// Remove run directories a killed run left: older than [`RUN_GRACE`]
    /// (a run making its directory now has not taken its lock yet) and
    /// with their lock free or absent.
    fn sweep_runs(&self) {
        let now = std::time::SystemTime::now();
        let Ok(names) = self.dir.names() else {
            return;
        };
        for name in names {
            if !name.as_encoded_bytes().starts_with(b"run-") {
                continue;
            }
            let Ok(run) = self.dir.child(&name) else {
                continue;
            };
            let old = self
                .dir
                .modified(&name)
                .ok()
                .flatten()
                .is_some_and(|t| now.duration_since(t).is_ok_and(|age| age > RUN_GRACE));
            let stale = old
                && match run.kind("lock") {
                    Ok(Some(_)) => try_lock(&run).is_some(),
                    _ => true,
                };
            if stale {
                let _ = self.dir.remove_tree(&name);
            }
        }
    }

    /// A new run directory, locked for this process.
    pub fn new_run(&self) -> Result<Run, CleanError> {
        let dir = self.dir.create_unique("run", PRIVATE_DIR_MODE)?;
        let name = dir
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let lock =
            crate::io::open_lock(&dir.join("lock")).map_err(|source| CleanError::TempDir {
                path: dir.path().to_path_buf(),
                source,
            })?;
        // Never contended: the directory's name is new.
        let _ = lock.try_lock();
        Ok(Run {
            home: self.dir.descend("", None)?,
            name,
            dir,
            _lock: lock,
        })
    }

    /// The parked copy of `tree` at `base`, verified clean; `None` when
    /// another run holds it or it cannot be brought to the base (it is
    /// removed then, and the next run checks the base out in full again).
    /// A link planted in place of one of its directories is an error.
    pub fn take(&self, tree: &WorkTree, base: &str) -> Result<Option<Parked>, CleanError> {
        let Some(lock) = try_lock(&self.dir) else {
            return Ok(None);
        };
        let holder = self.dir.child_or_create("tree", PRIVATE_DIR_MODE)?;
        // A link in place of the parked copy is refused, never used or followed.
        for n in holder.names()? {
            if holder.kind(&n)? == Some(crate::io::FileKind::Symlink) {
                return Err(crate::io::DirError::Link {
                    path: holder.join(n),
                }
                .into());
            }
        }
        let name = copy_name(tree);
        let index = crate::io::read_at(&self.dir, "index", MAX_INDEX_BYTES).ok();
        let _ = self.dir.remove_file("index");
        let reuse = index.is_some() && adopt(&holder, &name)?;
        if !reuse {
            holder.remove_entries(|_, _| true)?;
            holder.child_or_create(&name, PRIVATE_DIR_MODE)?;
        }
        let copy = holder.child(&name)?;
        let index = if reuse { index } else { None };
        match prepare(&copy, tree, base, index.as_deref()) {
            Ok(saved) => {
                let kept = crate::io::write_atomic(&self.dir.join("index"), &saved, 0o600);
                Ok(kept.ok().map(|()| Parked {
                    path: copy.path().to_path_buf(),
                    _lock: lock,
                }))
            }
            Err(_) => {
                holder.remove_entries(|_, _| true)?;
                Ok(None)
            }
        }
    }
}

/// The name of the clean copy's directory: the user's work tree's, so a
/// tool that uses the directory's name sees the one a clone would have.
fn copy_name(tree: &WorkTree) -> OsString {
    tree.top
        .file_name()
        .filter(|n| !n.as_encoded_bytes().contains(&b'/'))
        .map_or_else(|| OsString::from("tree"), OsStr::to_os_string)
}

/// Make the parked copy in `holder` the one directory named `name` (a
/// rename keeps its files' inodes, so the saved index still matches);
/// `false` when there is no single parked copy to reuse.
fn adopt(holder: &Dir, name: &OsStr) -> Result<bool, CleanError> {
    let names = holder.names()?;
    let [only] = names.as_slice() else {
        return Ok(false);
    };
    if holder.kind(only)? != Some(crate::io::FileKind::Directory) {
        return Ok(false);
    }
    if only != name {
        holder.rename_to(only, holder, name)?;
    }
    Ok(true)
}

impl Parked {
    /// The top of the copy.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Run {
    /// The run's directory.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// A fresh copy of `tree` at `base` in `RUN/tree/<name>`, checked out in
    /// full and verified clean; its path.
    pub fn fresh(&self, tree: &WorkTree, base: &str) -> Result<PathBuf, CleanError> {
        let holder = self.dir.child_or_create("tree", PRIVATE_DIR_MODE)?;
        let copy = holder.child_or_create(copy_name(tree), PRIVATE_DIR_MODE)?;
        prepare(&copy, tree, base, None)?;
        Ok(copy.path().to_path_buf())
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.home.remove_tree(&self.name);
    }
}

/// Bring the copy in `copy` to `base`: a new repository of its own in
/// `.git` (with the saved `index` when the files are a parked copy's),
/// `reset --hard`, `clean -ffdx`, and a `status` that must print
/// nothing. The index git wrote, to save for the next run.
fn prepare(
    copy: &Dir,
    tree: &WorkTree,
    base: &str,
    index: Option<&[u8]>,
) -> Result<Vec<u8>, CleanError> {
    copy.remove_tree(".git")?;
    let path = copy.path();
    // The base's object format, and the files ref format (HEAD is written
    // below as a file), whatever the user's init.* defaults say; a git too
    // old to know these settings ignores them and makes what they name.
    let format = if base.len() == 64 { "sha256" } else { "sha1" };
    let object_format = format!("init.defaultObjectFormat={format}");
    let run = |args: &[&str]| git_in(path, args).map_err(CleanError::Worktree);
    run(&[
        "-c",
        &object_format,
        "-c",
        "init.defaultRefFormat=files",
        "init",
        "--quiet",
        "--template=",
    ])?;
    let git_dir = copy.child(".git")?;
    let objects = real(&tree.common_dir.join("objects"));
    let mut alternates = objects.as_os_str().as_encoded_bytes().to_vec();
    alternates.push(b'\n');
    let info = git_dir.descend("objects/info", Some(0o755))?;
    write(&info, "alternates", &alternates)?;
    write(&git_dir, "HEAD", format!("{base}\n").as_bytes())?;
    if let Ok(shallow) = crate::io::read_path(&tree.common_dir.join("shallow"), MAX_INDEX_BYTES) {
        write(&git_dir, "shallow", &shallow)?;
    }
    if let Some(index) = index {
        write(&git_dir, "index", index)?;
    }
    run(&["reset", "--hard", "--quiet"])?;
    run(&["clean", "-ffdxq"])?;
    let status = run(&[
        "--no-optional-locks",
        "status",
        "--porcelain=v2",
        "-z",
        "--ignored=matching",
        "--untracked-files=all",
    ])?;
    if !status.is_empty() {
        return Err(CleanError::NotClean(
            String::from_utf8_lossy(&status).replace('\0', " "),
        ));
    }
    crate::io::read_at(&git_dir, "index", MAX_INDEX_BYTES).map_err(|source| CleanError::Read {
        path: git_dir.join("index").display().to_string(),
        source,
    })
}

/// Write a file of a copy's repository (a scratch file: no sync).
fn write(dir: &Dir, name: &str, bytes: &[u8]) -> Result<(), CleanError> {
    crate::io::write_scratch(&dir.join(name), bytes, 0o644).map_err(|source| CleanError::Output {
        path: dir.join(name).display().to_string(),
        source,
    })
}

/// Remove the homes of repositories that no longer exist (their `origin`
/// is gone and no run holds their lock).
fn sweep_vanished(root: &Dir, mine: &str) {
    let Ok(names) = root.names() else {
        return;
    };
    for name in names {
        if name == mine {
            continue;
        }
        let Ok(dir) = root.child(&name) else {
            continue;
        };
        let Ok(origin) = crate::io::read_at(&dir, "origin", 64 * 1024) else {
            continue;
        };
        // An origin that cannot be examined is kept.
        let origin = Path::new(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&origin));
        let gone = std::fs::symlink_metadata(origin)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        if gone && try_lock(&dir).is_some() {
            let _ = root.remove_tree(&name);
        }
    }
}

/// Remove the parked worktree of rcpt versions before this one
/// (`<git common dir>/rcpt/clean/`: a `tree/`, an `index`, a `lock`, and
/// `work-<random>/` trees a killed run left with their administrative
/// directories under `<common>/worktrees/`), never through a link, and
/// only when no run of such a version holds its lock.
fn prune_legacy(tree: &WorkTree) {
    let Ok(common) = Dir::open(&tree.common_dir) else {
        return;
    };
    let Ok(Some(rcpt)) = common.try_child("rcpt") else {
        return;
    };
    let Ok(Some(clean)) = rcpt.try_child("clean") else {
        return;
    };
    let Some(_lock) = try_lock(&clean) else {
        return;
    };
    for name in clean.names().unwrap_or_default() {
        if !name.as_encoded_bytes().starts_with(b"work-") {
            continue;
        }
        if let Some(admin) = legacy_admin(&clean, &name, &tree.common_dir)
            && let Ok(Some(worktrees)) = common.try_child("worktrees")
        {
            let _ = worktrees.remove_tree(admin);
        }
    }
    let _ = rcpt.remove_tree("clean");
}

/// The administrative directory's name a legacy `work-*` tree's `.git`
/// file names, only when it is `<common>/worktrees/<name>`.
fn legacy_admin(clean: &Dir, work: &OsStr, common: &Path) -> Option<OsString> {
    let dir = clean.child(work).ok()?;
    let text = crate::io::read_at(&dir, ".git", 64 * 1024).ok()?;
    let text = String::from_utf8(text).ok()?;
    let admin = PathBuf::from(text.strip_prefix("gitdir: ")?.trim_end());
    let name = admin.file_name()?;
    (admin.parent() == Some(common.join("worktrees").as_path())).then(|| name.to_os_string())
}
