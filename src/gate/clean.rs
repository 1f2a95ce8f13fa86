//! clean: the clean copy the checks run in (seed 001's clean mode).
//!
//! The repository's parked clean worktree brought to the base and verified
//! clean ([`super::park`]), or, when it is busy or cannot be used, a fresh
//! `git worktree add --detach` of the base commit in a new private
//! directory under the system's temporary directory (outside the user's
//! work tree); either way with the change's files copied in and its deleted files
//! removed, so an untracked or ignored file the change does not contain
//! cannot make a check pass. Hooks are off for the checkout
//! (`core.hooksPath=/dev/null`). The copy is parked again, or (a fresh
//! one) removed, when [`CleanTree`] is dropped, whatever ended the run (a
//! failed check, an error, an interrupt the caller turned into an early
//! return): `git worktree remove --force`, then the directory, then `git
//! worktree prune`. The user's index, HEAD,
//! refs and objects are never written: `worktree add` writes only the new
//! worktree's own administrative directory, which the removal deletes.
//!
//! Each copied file is read once, hashed, and compared with the digest the
//! change recorded before it is written ([`crate::io::write_scratch`]:
//! exclusive, no-follow, unsynced, since the tree is thrown away), so the
//! checks run on exactly the bytes the change identity names.

use super::change::{Change, FileChange};
use super::git::{self, GitError, WorkTree};
use crate::digest::Digest;
use crate::limits::MAX_CHANGE_FILE_BYTES;
use std::path::{Path, PathBuf};

/// Why the clean copy could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CleanError {
    /// The private directory could not be made.
    #[error("cannot create a private directory under {path}")]
    TempDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `git worktree add` failed.
    #[error("cannot check out the base in a clean worktree")]
    Worktree(#[source] GitError),
    /// A changed file could not be read.
    #[error("reading the changed file {path}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: crate::io::InputError,
    },
    /// A changed file no longer has the bytes the change recorded.
    #[error("{0} changed since the change was read; run again")]
    Raced(String),
    /// Writing into the clean copy failed.
    #[error("writing {path} into the clean worktree")]
    Write {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Writing a changed file into the clean copy failed.
    #[error("writing {path} into the clean worktree")]
    Output {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: crate::io::OutputError,
    },
    /// A path of the change passes through a symbolic link of the base.
    #[error("{0}: in the base, a parent directory of this path is a symbolic link or a file")]
    Parent(String),
}

/// A clean worktree of the base with the change applied; removed on drop.
#[derive(Debug)]
pub struct CleanTree {
    repo_top: PathBuf,
    private: PathBuf,
    path: PathBuf,
    parked: Option<super::park::Parked>,
}

impl CleanTree {
    /// Check out `change.base` in a new private directory and copy the
    /// change in (files of `change` are read from `tree`).
    pub fn create(tree: &WorkTree, change: &Change) -> Result<CleanTree, CleanError> {
        let private = private_dir()?;
        let parked = super::park::Parked::take(tree, &change.base);
        let clean = CleanTree {
            repo_top: tree.top.clone(),
            path: parked
                .as_ref()
                .map_or_else(|| private.join("work"), |p| p.path().to_path_buf()),
            private,
            parked,
        };
        if clean.parked.is_none() {
            let path = clean.path.to_string_lossy().into_owned();
            git::run(
                &tree.top,
                &[
                    "-c",
                    "core.hooksPath=/dev/null",
                    "-c",
                    "checkout.workers=0",
                    "worktree",
                    "add",
                    "--detach",
                    "--quiet",
                    &path,
                    &change.base,
                ],
            )
            .map_err(CleanError::Worktree)?;
        }
        // Deletions first: a deleted file may be where a new directory goes.
        for f in change.files.iter().filter(|f| f.digest.is_none()) {
            clean.remove(&f.path)?;
        }
        for f in change.existing() {
            clean.copy_in(&tree.top, f)?;
        }
        Ok(clean)
    }

    /// The top of the clean worktree.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A directory for the checks' captured output, beside the worktree
    /// (removed with it).
    pub fn scratch(&self) -> std::io::Result<PathBuf> {
        let dir = self.private.join("out");
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    fn remove(&self, rel: &str) -> Result<(), CleanError> {
        let target = self.path.join(rel);
        match std::fs::remove_file(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(CleanError::Write {
                    path: rel.to_string(),
                    source,
                });
            }
        }
        // Leave no empty directory git would not have left.
        let mut dir = target.parent();
        while let Some(d) = dir.filter(|d| *d != self.path) {
            if std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }

    fn copy_in(&self, top: &Path, f: &FileChange) -> Result<(), CleanError> {
        let bytes =
            crate::io::read_path(&top.join(&f.path), MAX_CHANGE_FILE_BYTES).map_err(|source| {
                CleanError::Read {
                    path: f.path.clone(),
                    source,
                }
            })?;
        if Some(Digest::blake3(&bytes)) != f.digest {
            return Err(CleanError::Raced(f.path.clone()));
        }
        let target = self.path.join(&f.path);
        self.make_parents(&f.path)?;
        let write = |source| CleanError::Write {
            path: f.path.clone(),
            source,
        };
        // A directory of the base where the change has a file (its files
        // were deleted above): an empty one gives way.
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
            std::fs::remove_dir(&target).map_err(write)?;
        }
        let mode = if f.executable { 0o755 } else { 0o644 };
        // A scratch tree: written without syncs (it is deleted after the run).
        crate::io::write_scratch(&target, &bytes, mode).map_err(|source| CleanError::Output {
            path: f.path.clone(),
            source,
        })?;
        crate::io::set_mode(&target, mode).map_err(write)
    }

    /// Create the parent directories of `rel` inside the clean tree, one
    /// component at a time, refusing any that is a link or a file.
    fn make_parents(&self, rel: &str) -> Result<(), CleanError> {
        crate::io::create_parents(&self.path, rel).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotADirectory {
                CleanError::Parent(rel.to_string())
            } else {
                CleanError::Write {
                    path: rel.to_string(),
                    source,
                }
            }
        })
    }
}

impl Drop for CleanTree {
    fn drop(&mut self) {
        if let Some(parked) = self.parked.take() {
            parked.park();
            let _ = std::fs::remove_dir_all(&self.private);
            return;
        }
        let path = self.path.to_string_lossy().into_owned();
        let removed = git::run(
            &self.repo_top,
            &["worktree", "remove", "--force", "--force", &path],
        );
        let _ = std::fs::remove_dir_all(&self.private);
        if removed.is_err() {
            let _ = git::run(&self.repo_top, &["worktree", "prune"]);
        }
    }
}

/// A new directory `rcpt-gate-<random>` under the temporary directory, mode 0700.
fn private_dir() -> Result<PathBuf, CleanError> {
    let base = std::env::temp_dir();
    crate::io::create_temp_dir(&base, "rcpt-gate")
        .map_err(|source| CleanError::TempDir { path: base, source })
}
