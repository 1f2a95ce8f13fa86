//! park: one clean worktree per repository, kept between runs so that
//! bringing it to the base costs what changed, not the whole repository
//! (spec/gate.md "Clean mode", decision of issue 23 "Speed").
//!
//! ```text
//! <git common dir>/rcpt/clean/lock     flock: one run uses the parked tree at a time
//! <git common dir>/rcpt/clean/tree/    the parked files (not a registered worktree)
//! <git common dir>/rcpt/clean/index    the index git wrote for them, saved right
//!                                      after they were verified clean
//! <git common dir>/rcpt/clean/work-<random>/   the tree during a run
//! ```
//!
//! A run registers a worktree with `git worktree add --no-checkout
//! --detach work-<random> BASE` (no file written), moves the parked
//! directory in its place (a rename: the files keep their inode and ctime)
//! with the saved index, then `git reset --hard`, `git clean -ffdx`, and
//! requires `git status --porcelain=v2 --ignored=matching
//! --untracked-files=all` to print nothing. git compares each file's stat
//! data (ctime included, which no unprivileged process can set back) with
//! the saved index and re-reads any file that differs, so every file a
//! previous run's checks touched is restored and every other file is
//! removed. Only then is the index saved again, before the change is
//! copied in. Afterwards the tree is parked again (the `.git` file
//! removed, the directory renamed back) and the worktree's administrative
//! directory removed, so git knows of no extra worktree between runs. When
//! the lock is held, or anything fails, the caller makes a fresh worktree
//! instead (the reference behaviour).

use super::git::{self, WorkTree};
use std::fs::File;
use std::path::{Path, PathBuf};

/// A parked tree brought out for one run; park it again with [`Parked::park`].
#[derive(Debug)]
pub struct Parked {
    dir: PathBuf,
    work: PathBuf,
    admin: PathBuf,
    repo_top: PathBuf,
    _lock: File,
}

/// The administrative directory a worktree's `.git` file names, only if
/// it is `<common>/worktrees/<name>` (a check may have rewritten the file:
/// nothing else is ever removed).
fn admin_of(work: &Path, common: &Path) -> Option<PathBuf> {
    let text = crate::io::read_path_text(&work.join(".git"), 64 * 1024).ok()?;
    let dir = PathBuf::from(text.strip_prefix("gitdir: ")?.trim_end());
    let ok = dir.parent() == Some(common.join("worktrees").as_path())
        && dir.file_name().is_some_and(|n| n != ".." && n != ".");
    ok.then_some(dir)
}

/// Remove what a killed run left: its tree and its administrative directory.
fn sweep(dir: &Path, common: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with("work-") {
            if let Some(admin) = admin_of(&e.path(), common) {
                let _ = std::fs::remove_dir_all(admin);
            }
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn random_name() -> Option<String> {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).ok()?;
    Some(format!("work-{}", crate::digest::to_hex(&raw)))
}

fn add(top: &Path, work: &Path, base: &str, checkout: bool) -> Option<()> {
    let path = work.to_string_lossy().into_owned();
    let mut args = vec![
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "checkout.workers=0",
        "worktree",
        "add",
        "--detach",
        "--quiet",
    ];
    if !checkout {
        args.push("--no-checkout");
    }
    args.extend([path.as_str(), base]);
    git::run(top, &args).ok().map(|_| ())
}

fn copy(from: &Path, to: &Path) -> Option<()> {
    let bytes = crate::io::read_path(from, crate::limits::MAX_GIT_OUTPUT_BYTES).ok()?;
    crate::io::write_scratch(to, &bytes, 0o600).ok()
}

impl Parked {
    /// Bring out the parked tree of `tree`'s repository at `base`,
    /// verified clean; `None` when another run holds it or anything fails.
    pub fn take(tree: &WorkTree, base: &str) -> Option<Parked> {
        let dir = tree.common_dir.join("rcpt").join("clean");
        std::fs::create_dir_all(&dir).ok()?;
        let lock = crate::io::open_lock(&dir.join("lock")).ok()?;
        lock.try_lock().ok()?;
        sweep(&dir, &tree.common_dir);
        let work = dir.join(random_name()?);
        let (parked, index) = (dir.join("tree"), dir.join("index"));
        let reuse = parked.is_dir() && index.is_file();
        if !reuse {
            let _ = std::fs::remove_dir_all(&parked);
            let _ = std::fs::remove_file(&index);
        }
        add(&tree.top, &work, base, !reuse)?;
        let admin = admin_of(&work, &tree.common_dir);
        let taken = Parked {
            dir,
            work,
            admin: admin.clone().unwrap_or_default(),
            repo_top: tree.top.clone(),
            _lock: lock,
        };
        match admin.and_then(|_| taken.prepare(reuse)) {
            Some(()) => Some(taken),
            None => {
                taken.discard();
                None
            }
        }
    }

    /// Move the parked files in (when `reuse`), reset, clean, verify, save the index.
    fn prepare(&self, reuse: bool) -> Option<()> {
        let gitfile = self.work.join(".git");
        if reuse {
            let link = crate::io::read_path(&gitfile, 64 * 1024).ok()?;
            std::fs::remove_file(&gitfile).ok()?;
            std::fs::remove_dir(&self.work).ok()?;
            std::fs::rename(self.dir.join("tree"), &self.work).ok()?;
            let _ = std::fs::remove_dir_all(&gitfile);
            crate::io::write_scratch(&gitfile, &link, 0o644).ok()?;
            copy(&self.dir.join("index"), &self.admin.join("index"))?;
        }
        let _ = std::fs::remove_file(self.dir.join("index"));
        let hooks = ["-c", "core.hooksPath=/dev/null"];
        let run = |args: &[&str]| git::run(&self.work, &[&hooks[..], args].concat()).ok();
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
            return None;
        }
        copy(&self.admin.join("index"), &self.dir.join("index"))
    }

    /// The top of the tree.
    pub fn path(&self) -> &Path {
        &self.work
    }

    /// Park the tree again for the next run and unregister the worktree.
    pub fn park(self) {
        let gitfile = self.work.join(".git");
        let _ = std::fs::remove_file(&gitfile);
        let _ = std::fs::remove_dir_all(&gitfile);
        let parked = self.dir.join("tree");
        let _ = std::fs::remove_dir_all(&parked);
        if std::fs::rename(&self.work, &parked).is_err() {
            let _ = std::fs::remove_file(self.dir.join("index"));
            let _ = std::fs::remove_dir_all(&self.work);
        }
        self.unregister();
    }

    /// Remove the tree and its registration; nothing stays parked.
    fn discard(self) {
        let _ = std::fs::remove_dir_all(&self.work);
        let _ = std::fs::remove_file(self.dir.join("index"));
        self.unregister();
    }

    fn unregister(&self) {
        if self.admin.as_os_str().is_empty() || std::fs::remove_dir_all(&self.admin).is_err() {
            let _ = git::run(&self.repo_top, &["worktree", "prune"]);
        }
    }
}
