//! patch: a proposed change in git's diff format, read and applied by `git
//! apply` inside the clean copy, never in the user's work tree.
//!
//! `git apply --numstat -z` lists the paths a patch touches (both paths of
//! a rename); `git apply --check` says whether it applies; `git apply`
//! applies it to the clean copy's files only (no `--index`: no index, no
//! object is written). git handles text and binary hunks (`GIT binary
//! patch`, which carries the bytes), creations, deletions, renames and
//! mode changes; a binary diff without its bytes (`Binary files ...
//! differ`) does not apply. The new bytes and modes are then read back
//! from the clean copy, so the change is exactly what git made of the patch.

use super::git::{self, GitError};
use crate::limits::MAX_CHANGE_FILES;
use std::path::Path;

/// Why a patch could not be read or applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PatchError {
    /// The patch file could not be read.
    #[error("reading the patch")]
    Read(#[source] crate::io::InputError),
    /// The patch could not be copied beside the clean copy.
    #[error("copying the patch into the private directory")]
    Copy(#[source] crate::io::OutputError),
    /// git does not apply it to the base with the work tree's change.
    #[error("the patch does not apply to the work tree's files: {0}")]
    NotApplicable(String),
    /// It touches nothing.
    #[error("the patch changes no file")]
    Empty,
    /// A path the gate refuses.
    #[error("{path:?}: {why}")]
    BadPath {
        /// The path.
        path: String,
        /// Why.
        why: String,
    },
    /// More paths than a change may hold.
    #[error("the patch touches {0} paths, over the limit of {MAX_CHANGE_FILES}")]
    TooManyFiles(usize),
    /// git failed otherwise.
    #[error(transparent)]
    Git(GitError),
}

/// One path the patch touches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Touch {
    /// The path (the new one for a rename).
    pub path: String,
    /// The old path, for a rename or copy.
    pub from: Option<String>,
}

fn git_apply(clean: &Path, patch: &Path, extra: &[&str]) -> Result<Vec<u8>, PatchError> {
    let patch = patch.to_string_lossy().into_owned();
    let mut args = vec![
        "-c",
        "core.hooksPath=/dev/null",
        "apply",
        "--whitespace=nowarn",
    ];
    args.extend_from_slice(extra);
    args.push(&patch);
    git::run(clean, &args).map_err(|e| match e {
        GitError::Failed { stderr, .. } => PatchError::NotApplicable(without_flag_hints(&stderr)),
        e => PatchError::Git(e),
    })
}

/// `line` without the parenthesised parts that name a flag (`--...`).
fn drop_flag_parentheses(line: &str) -> String {
    let mut kept = String::new();
    let mut rest = line;
    while let Some((before, after)) = rest.split_once('(') {
        kept.push_str(before);
        match after.split_once(')') {
            Some((inside, tail)) => {
                if !inside.contains("--") {
                    kept.push('(');
                    kept.push_str(inside);
                    kept.push(')');
                }
                rest = tail;
            }
            None => {
                kept.push('(');
                rest = after;
                break;
            }
        }
    }
    kept.push_str(rest);
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// git's message without its hints about git's own flags (`(allow with
/// "--allow-empty")`, `hint:` lines): rcpt does not take them, and the
/// patch is to be fixed, not git told to accept it. A file that holds no
/// patch at all is said so.
fn without_flag_hints(stderr: &str) -> String {
    let lines: Vec<String> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("hint:"))
        .map(drop_flag_parentheses)
        .collect();
    let text = lines.join("; ");
    if text.contains("No valid patches in input") {
        format!("not a patch: it holds nothing in git diff format ({text})")
    } else {
        text
    }
}

/// The paths `patch` touches, as git reads it (in the clean copy `clean`).
pub fn touched(clean: &Path, patch: &Path) -> Result<Vec<Touch>, PatchError> {
    let out = git_apply(clean, patch, &["--numstat", "-z"])?;
    let mut tokens = out.split(|&b| b == 0).filter(|t| !t.is_empty()).map(|t| {
        std::str::from_utf8(t).map_err(|_| bad("(not UTF-8)", "a path that is not UTF-8"))
    });
    let mut list = Vec::new();
    while let Some(token) = tokens.next() {
        let token = token?;
        let rest = token.splitn(3, '\t').nth(2).unwrap_or("");
        let touch = if rest.is_empty() {
            let (Some(from), Some(to)) = (tokens.next(), tokens.next()) else {
                return Err(PatchError::NotApplicable(format!(
                    "unexpected output of git apply --numstat: {token:?}"
                )));
            };
            Touch {
                path: to?.to_string(),
                from: Some(from?.to_string()),
            }
        } else {
            Touch {
                path: rest.to_string(),
                from: None,
            }
        };
        list.push(touch);
        if list.len() > MAX_CHANGE_FILES {
            return Err(PatchError::TooManyFiles(list.len()));
        }
    }
    if list.is_empty() {
        return Err(PatchError::Empty);
    }
    Ok(list)
}

fn bad(path: &str, why: &str) -> PatchError {
    PatchError::BadPath {
        path: path.to_string(),
        why: why.to_string(),
    }
}

/// Check that `patch` applies in `clean`, then apply it there.
pub fn apply_in(clean: &Path, patch: &Path) -> Result<(), PatchError> {
    git_apply(clean, patch, &["--check"])?;
    git_apply(clean, patch, &[])?;
    Ok(())
}

/// Every path `git status` lists in the clean copy (modified, deleted,
/// untracked; renames not paired).
pub fn changed_paths(clean: &Path) -> Result<Vec<String>, PatchError> {
    let out = git::run(
        clean,
        &[
            "--no-optional-locks",
            "status",
            "--porcelain=v2",
            "-z",
            "--no-renames",
            "--untracked-files=all",
        ],
    )
    .map_err(PatchError::Git)?;
    let mut paths = Vec::new();
    for record in out.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let text = std::str::from_utf8(record).map_err(|_| bad("(not UTF-8)", "not UTF-8"))?;
        let path = match text.split_once(' ') {
            Some(("1", _)) => text.splitn(9, ' ').nth(8),
            Some(("?", rest)) => Some(rest),
            _ => None,
        };
        if let Some(p) = path {
            paths.push(p.to_string());
        }
        if paths.len() > MAX_CHANGE_FILES {
            return Err(PatchError::TooManyFiles(paths.len()));
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gits_hints_about_its_own_flags_are_not_passed_on() {
        for (git_says, want) in [
            (
                "error: No valid patches in input (allow with \"--allow-empty\")\n",
                "not a patch: it holds nothing in git diff format (error: No valid patches in input)",
            ),
            (
                "error: patch failed: a.txt:1\nerror: a.txt: patch does not apply\nhint: use --reject\n",
                "error: patch failed: a.txt:1; error: a.txt: patch does not apply",
            ),
            (
                "error: corrupt patch at line 3 (try --recount) (line 3)\n",
                "error: corrupt patch at line 3 (line 3)",
            ),
            ("error: unbalanced (paren\n", "error: unbalanced (paren"),
        ] {
            let said = without_flag_hints(git_says);
            assert_eq!(said, want, "{git_says:?}");
            assert!(!said.contains("--"), "{said}");
        }
    }
}
