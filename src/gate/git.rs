//! git: the `git` processes the gate runs, with bounded output, and the
//! facts about a work tree it needs (its top, its git directory, whether an
//! operation is in progress, the base commit).
//!
//! Every command runs with `--no-optional-locks` where it reads (so `git
//! status` never rewrites the user's index), in a clean environment (no
//! inherited `GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE` redirecting it),
//! with `LC_ALL=C`. Output is read up to [`MAX_GIT_OUTPUT_BYTES`]; more is
//! refused, never truncated into a wrong answer.

use crate::limits::MAX_GIT_OUTPUT_BYTES;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Most bytes of a failing git command's stderr kept for its message.
const MAX_GIT_STDERR_BYTES: u64 = 16 * 1024;

/// Environment variables that would point git somewhere else.
const GIT_ENV_REMOVED: [&str; 7] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
];

/// Why a git command gave no usable answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// `git` could not be started.
    #[error("cannot run git (is it installed and on PATH?)")]
    Spawn(#[source] std::io::Error),
    /// Reading its output failed.
    #[error("reading the output of git {args}")]
    Io {
        /// The arguments.
        args: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// It exited non-zero.
    #[error("git {args} failed ({status}): {stderr}")]
    Failed {
        /// The arguments.
        args: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The start of its stderr.
        stderr: String,
    },
    /// Its output is over [`MAX_GIT_OUTPUT_BYTES`].
    #[error(
        "git {args} wrote more than {MAX_GIT_OUTPUT_BYTES} bytes; the change is too large for the gate"
    )]
    TooLarge {
        /// The arguments.
        args: String,
    },
}

/// A `git` command in `dir` with the gate's environment.
pub fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).env("LC_ALL", "C");
    for var in GIT_ENV_REMOVED {
        cmd.env_remove(var);
    }
    cmd
}

/// Run `git ARGS` in `dir`; its stdout, at most [`MAX_GIT_OUTPUT_BYTES`].
pub fn run(dir: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let shown = args.join(" ");
    let mut child = command(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(GitError::Spawn)?;
    let io = |source| GitError::Io {
        args: shown.clone(),
        source,
    };
    // stderr is drained on its own thread so neither pipe can fill and stall git.
    let stderr = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = (&mut err).take(MAX_GIT_STDERR_BYTES).read_to_end(&mut kept);
            let _ = std::io::copy(&mut err, &mut std::io::sink());
            kept
        })
    });
    let mut out = Vec::new();
    let read = match child.stdout.take() {
        Some(stdout) => stdout
            .take(MAX_GIT_OUTPUT_BYTES as u64 + 1)
            .read_to_end(&mut out)
            .map(|_| ()),
        None => Ok(()),
    };
    if out.len() > MAX_GIT_OUTPUT_BYTES {
        let _ = child.kill();
        let _ = child.wait();
        return Err(GitError::TooLarge { args: shown });
    }
    read.map_err(io)?;
    let status = child.wait().map_err(io)?;
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    if !status.success() {
        return Err(GitError::Failed {
            args: shown,
            status,
            stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
        });
    }
    Ok(out)
}

/// [`run`], as one line of text (trailing newline removed).
pub fn run_line(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let out = run(dir, args)?;
    Ok(String::from_utf8_lossy(&out)
        .trim_end_matches('\n')
        .to_string())
}

/// An operation that leaves the work tree between two states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InProgress {
    /// `MERGE_HEAD` exists.
    Merge,
    /// `rebase-merge/` or `rebase-apply/` exists.
    Rebase,
    /// `CHERRY_PICK_HEAD` exists.
    CherryPick,
    /// `REVERT_HEAD` exists.
    Revert,
}

impl InProgress {
    /// The word for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            InProgress::Merge => "a merge",
            InProgress::Rebase => "a rebase",
            InProgress::CherryPick => "a cherry-pick",
            InProgress::Revert => "a revert",
        }
    }
}

/// A git work tree as the gate sees it.
#[derive(Clone, Debug)]
pub struct WorkTree {
    /// The top of the work tree (absolute).
    pub top: PathBuf,
    /// Its own git directory (`.git`, or `.git/worktrees/<name>`).
    pub git_dir: PathBuf,
    /// The git directory shared by all its worktrees.
    pub common_dir: PathBuf,
}

impl WorkTree {
    /// The work tree containing `dir`, or `None` when `dir` is not inside
    /// one (a bare repository, or no repository).
    pub fn discover(dir: &Path) -> Result<Option<WorkTree>, GitError> {
        let out = match run(
            dir,
            &[
                "rev-parse",
                "--path-format=absolute",
                "--show-toplevel",
                "--git-dir",
                "--git-common-dir",
            ],
        ) {
            Ok(out) => out,
            Err(GitError::Failed { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let text = String::from_utf8_lossy(&out);
        let mut lines = text.lines().map(PathBuf::from);
        match (lines.next(), lines.next(), lines.next()) {
            (Some(top), Some(git_dir), Some(common_dir)) if top.is_absolute() => {
                Ok(Some(WorkTree {
                    top,
                    git_dir,
                    common_dir,
                }))
            }
            _ => Ok(None),
        }
    }

    /// The operation in progress in this work tree, if any.
    pub fn in_progress(&self) -> Option<InProgress> {
        let has = |name: &str| self.git_dir.join(name).exists();
        if has("MERGE_HEAD") {
            Some(InProgress::Merge)
        } else if has("rebase-merge") || has("rebase-apply") {
            Some(InProgress::Rebase)
        } else if has("CHERRY_PICK_HEAD") {
            Some(InProgress::CherryPick)
        } else if has("REVERT_HEAD") {
            Some(InProgress::Revert)
        } else {
            None
        }
    }

    /// The commit id `rev` names (`git rev-parse --verify REV^{commit}`),
    /// or `None` when it names no commit.
    pub fn commit(&self, rev: &str) -> Result<Option<String>, GitError> {
        if rev.starts_with('-') {
            return Ok(None);
        }
        let spec = format!("{rev}^{{commit}}");
        match run_line(&self.top, &["rev-parse", "--verify", "--quiet", &spec]) {
            Ok(oid) if is_oid(&oid) => Ok(Some(oid)),
            Ok(_) | Err(GitError::Failed { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// 40 or 64 lowercase hex digits.
pub fn is_oid(text: &str) -> bool {
    (text.len() == 40 || text.len() == 64)
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
