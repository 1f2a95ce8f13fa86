//! clean: the clean copy the checks run in (seed 001's clean mode).
//!
//! A copy of the base with the change's files copied in and its deleted
//! files removed, so an untracked or ignored file the change does not
//! contain cannot make a check pass. It lives in a private directory of
//! its own, outside the user's work tree and git directory
//! ([`super::park`]: `$XDG_CACHE_HOME/rcpt/clean/<key>/`, or the temporary
//! directory), and is a repository of its own, so nothing a check finds by
//! looking in parent directories (node's module resolution, cargo's and
//! npm's configuration, dotenv files, `pyproject.toml`, `git` discovery)
//! is the user's. The repository's parked copy is used when it is free,
//! brought to the base and verified clean; else a fresh copy is checked
//! out in the run's own directory. The user's index, HEAD, refs, objects
//! and worktree list are never written.
//!
//! Each copied file is read once, hashed, and compared with the digest the
//! change recorded before it is written ([`crate::io::write_scratch`]:
//! exclusive, no-follow, unsynced, since the copy is thrown away), so the
//! checks run on exactly the bytes the change identity names. Every
//! directory of the copy is opened without following a link
//! ([`crate::io::Dir`]). When the [`CleanTree`] is dropped, whatever ended
//! the run, the run's directory is removed (a fresh copy with it) and the
//! parked copy's lock released.

use super::change::{Change, FileChange};
use super::git::{GitError, WorkTree};
use super::park::{Home, Parked, Run};
use crate::digest::Digest;
use crate::io::{Dir, DirError};
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
    /// No place for the copy outside the user's tree.
    #[error(
        "no directory outside the work tree {} for the clean copy: {} {} inside it; \
         set XDG_CACHE_HOME or TMPDIR to a directory outside it",
        top.display(),
        tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        if tried.len() == 1 { "is" } else { "are" }
    )]
    NoHome {
        /// The work tree.
        top: PathBuf,
        /// The candidates refused.
        tried: Vec<PathBuf>,
    },
    /// A directory of the copy is a link, not a directory, or unusable.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// git could not make the copy.
    #[error("cannot check out the base in a clean copy")]
    Worktree(#[source] GitError),
    /// The copy is not the base after it was made.
    #[error("the clean copy is not the base after reset and clean: git status lists {0}")]
    NotClean(String),
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
    #[error("writing {path} into the clean copy")]
    Write {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Writing a changed file into the clean copy failed.
    #[error("writing {path} into the clean copy")]
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

/// A clean copy of the base with the change applied; given back on drop.
#[derive(Debug)]
pub struct CleanTree {
    path: PathBuf,
    // Field order is drop order: the parked copy's lock is released
    // after nothing of the run is left.
    run: Run,
    _parked: Option<Parked>,
}

impl CleanTree {
    /// A clean copy of `change.base` with the change copied in (files of
    /// `change` are read from `tree`).
    pub fn create(tree: &WorkTree, change: &Change) -> Result<CleanTree, CleanError> {
        let home = Home::open(tree)?;
        let run = home.new_run()?;
        let parked = home.take(tree, &change.base)?;
        let path = match &parked {
            Some(p) => p.path().to_path_buf(),
            None => run.fresh(tree, &change.base)?,
        };
        let clean = CleanTree {
            path,
            run,
            _parked: parked,
        };
        // Deletions first: a deleted file may be where a new directory goes.
        for f in change.files.iter().filter(|f| f.digest.is_none()) {
            clean.remove(&f.path)?;
        }
        for f in change.existing() {
            clean.copy_in(&tree.top, f)?;
        }
        Ok(clean)
    }

    /// The top of the clean copy.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A directory for the checks' captured output, in the run's private
    /// directory beside the copy (removed with it).
    pub fn scratch(&self) -> std::io::Result<PathBuf> {
        let out = self
            .run
            .dir()
            .child_or_create("out", crate::io::PRIVATE_DIR_MODE);
        Ok(out.map_err(DirError::into_io)?.path().to_path_buf())
    }

    /// The directory holding `rel` in the copy and the file's name, never
    /// reached through a link (made when `create`); `None` when absent.
    fn parent_of<'r>(
        &self,
        rel: &'r str,
        create: bool,
    ) -> Result<Option<(Dir, &'r str)>, CleanError> {
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let opened = Dir::open(&self.path).and_then(|d| d.descend(parent, create.then_some(0o777)));
        match opened {
            Ok(d) => Ok(Some((d, name))),
            Err(e) if e.is_not_found() && !create => Ok(None),
            Err(DirError::Link { .. } | DirError::NotADirectory { .. }) => {
                Err(CleanError::Parent(rel.to_string()))
            }
            Err(e) => Err(CleanError::Write {
                path: rel.to_string(),
                source: e.into_io(),
            }),
        }
    }

    fn remove(&self, rel: &str) -> Result<(), CleanError> {
        let write = |e: DirError| CleanError::Write {
            path: rel.to_string(),
            source: e.into_io(),
        };
        let Some((dir, name)) = self.parent_of(rel, false)? else {
            return Ok(());
        };
        if !dir.remove_file(name).map_err(write)? {
            return Ok(());
        }
        // Leave no empty directory git would not have left.
        let mut at = rel;
        while let Some((parent, _)) = at.rsplit_once('/') {
            let Some((up, name)) = self.parent_of(parent, false)? else {
                break;
            };
            if !up.remove_empty_dir(name).unwrap_or(false) {
                break;
            }
            at = parent;
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
        let Some((dir, name)) = self.parent_of(&f.path, true)? else {
            return Err(CleanError::Parent(f.path.clone()));
        };
        let write = |source| CleanError::Write {
            path: f.path.clone(),
            source,
        };
        // A directory of the base where the change has a file (its files
        // were deleted above): an empty one gives way.
        if dir.kind(name)? == Some(crate::io::FileKind::Directory) {
            dir.remove_empty_dir(name).map_err(|e| write(e.into_io()))?;
        }
        let target = dir.join(name);
        let mode = if f.executable { 0o755 } else { 0o644 };
        // A scratch copy: written without syncs (it is reset after the run).
        crate::io::write_scratch(&target, &bytes, mode).map_err(|source| CleanError::Output {
            path: f.path.clone(),
            source,
        })?;
        crate::io::set_mode(&target, mode).map_err(write)
    }
}
