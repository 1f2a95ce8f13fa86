//! change: the difference between a base commit and the work tree, read
//! back from disk, and its canonical identity `change_id` (spec/gate.md
//! "The change").
//!
//! Against `HEAD` the file list is `git status --porcelain=v2 -z` (untracked
//! files one by one, ignored files not, renames only when staged); against
//! another base it is `git diff --raw -z -M BASE` plus the untracked files
//! (`git ls-files --others --exclude-standard`). Each path gets one word
//! from what the base and the work tree hold: `added` (only the work tree),
//! `deleted` (only the base), `modified` (both), `renamed` (the new path of
//! a staged rename; its old path is listed as `deleted`). Each file that
//! exists is hashed from its bytes on disk (BLAKE3), by the read-set rules
//! of [`crate::fresh`], so a receipt's read set and its change agree.
//!
//! Refused, never given a wrong identity: no work tree, an operation in
//! progress (merge, rebase, cherry-pick, revert), unmerged paths, submodule
//! changes, symbolic links and nested repositories in the change, paths that
//! are not UTF-8, and paths a git read set would read as refs (`HEAD`,
//! `refs/...`).

use super::git::{self, GitError, InProgress, WorkTree};
use crate::digest::{Algorithm, Digest};
use crate::fresh::{Reader, ResourceError, check_relative};
use crate::limits::MAX_CHANGE_FILES;
use crate::receipt::Substrate;
use crate::receipt::canonical::{Value, dagcbor, identity};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// git's word for what happened to one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Only in the work tree.
    Added,
    /// In both, possibly different.
    Modified,
    /// Only in the base.
    Deleted,
    /// The new path of a staged rename.
    Renamed,
}

impl Status {
    /// The word in the change record.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Added => "added",
            Status::Modified => "modified",
            Status::Deleted => "deleted",
            Status::Renamed => "renamed",
        }
    }
}

/// One path of a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    /// Relative to the top of the work tree, `/`-separated.
    pub path: String,
    /// What happened to it.
    pub status: Status,
    /// BLAKE3 of its bytes now; `None` when deleted.
    pub digest: Option<Digest>,
    /// Whether the work tree's file is executable (copied into the clean
    /// worktree; part of the identity as the record's `mode`).
    pub executable: bool,
}

/// A change: a base commit and the files that differ from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The base commit id (lowercase hex).
    pub base: String,
    /// The files, sorted bytewise by path, each once.
    pub files: Vec<FileChange>,
}

/// Why a change could not be identified.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChangeError {
    /// The directory is not inside a git work tree.
    #[error("{0} is not inside a git work tree (the gate reads the change with git)")]
    NotAWorkTree(PathBuf),
    /// An operation is half done.
    #[error("the work tree is in the middle of {}: finish or abort it first", .0.as_str())]
    InProgress(InProgress),
    /// The base names no commit.
    #[error("{0:?} names no commit (a repository without commits has no base)")]
    NoCommit(String),
    /// A path has merge conflicts.
    #[error("{0}: unmerged (conflicts); resolve them first")]
    Unmerged(String),
    /// A submodule changed.
    #[error("{0}: a submodule changed; the gate does not read submodule changes")]
    Submodule(String),
    /// A symbolic link in the change.
    #[error("{0}: a symbolic link; the gate hashes file bytes and refuses links in a change")]
    Symlink(String),
    /// An untracked nested repository.
    #[error("{0}: an untracked directory holding its own repository; the gate refuses it")]
    NestedRepository(String),
    /// A path that cannot be a receipt resource.
    #[error("{path:?}: {why}")]
    BadPath {
        /// The path as git printed it (lossy).
        path: String,
        /// Why.
        why: String,
    },
    /// More files than a change may hold.
    #[error("{0} changed files, over the limit of {MAX_CHANGE_FILES}")]
    TooManyFiles(usize),
    /// git's output could not be read as documented.
    #[error("unexpected output from git: {0}")]
    Parse(String),
    /// The file changed on disk while it was being read.
    #[error("{0} changed while the gate read it; run again")]
    Raced(String),
    /// Reading a file failed.
    #[error("reading {path}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: ResourceError,
    },
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] GitError),
}

impl ChangeError {
    /// True for a bad invocation (the wrong directory, a base that is no
    /// commit) rather than a work tree whose change cannot be identified.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ChangeError::NotAWorkTree(_) | ChangeError::NoCommit(_)
        )
    }
}

/// What the base and the work tree hold for one path, as git reported it.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    in_base: bool,
    in_work_tree: bool,
    renamed: bool,
}

/// The work tree containing `dir`, refused when none or mid-operation.
pub fn work_tree(dir: &Path) -> Result<WorkTree, ChangeError> {
    let tree = WorkTree::discover(dir)?.ok_or_else(|| ChangeError::NotAWorkTree(dir.into()))?;
    if let Some(op) = tree.in_progress() {
        return Err(ChangeError::InProgress(op));
    }
    Ok(tree)
}

/// The change of the work tree `tree` against `base` (a revision).
pub fn read_change(tree: &WorkTree, base: &str) -> Result<Change, ChangeError> {
    let commit = tree
        .commit(base)?
        .ok_or_else(|| ChangeError::NoCommit(base.to_string()))?;
    let head = tree.commit("HEAD")?;
    let mut seen = BTreeMap::new();
    if head.as_deref() == Some(commit.as_str()) {
        let out = git::run(
            &tree.top,
            &[
                "-c",
                "status.renames=true",
                "--no-optional-locks",
                "status",
                "--porcelain=v2",
                "-z",
                "--untracked-files=all",
                "--ignore-submodules=none",
            ],
        )?;
        parse_status(&out, &mut seen)?;
    } else {
        let out = git::run(
            &tree.top,
            &[
                "--no-optional-locks",
                "diff",
                "--raw",
                "-z",
                "-M",
                "--no-ext-diff",
                "--ignore-submodules=none",
                &commit,
                "--",
            ],
        )?;
        parse_raw_diff(&out, &mut seen)?;
        let others = git::run(
            &tree.top,
            &[
                "--no-optional-locks",
                "ls-files",
                "-z",
                "--others",
                "--exclude-standard",
            ],
        )?;
        for path in others.split(|&b| b == 0).filter(|p| !p.is_empty()) {
            untracked(path, &mut seen)?;
        }
    }
    let files = finish(&tree.top, seen)?;
    Ok(Change {
        base: commit,
        files,
    })
}

/// `1`, `2`, `u`, `?` records of `git status --porcelain=v2 -z`.
fn parse_status(out: &[u8], seen: &mut BTreeMap<String, Seen>) -> Result<(), ChangeError> {
    let mut records = out.split(|&b| b == 0).filter(|r| !r.is_empty());
    while let Some(record) = records.next() {
        let text = std::str::from_utf8(record).map_err(|_| non_utf8(record))?;
        let kind = text.split(' ').next().unwrap_or("");
        match kind {
            "1" => {
                let f: Vec<&str> = text.splitn(9, ' ').collect();
                let [_, _xy, sub, m_head, _m_index, m_work, _, _, path] = f.as_slice() else {
                    return Err(ChangeError::Parse(format!("status record {text:?}")));
                };
                check_modes(path, sub, &[m_head, m_work])?;
                note(seen, path, *m_head != "000000", *m_work != "000000")?;
            }
            "2" => {
                let f: Vec<&str> = text.splitn(10, ' ').collect();
                let [_, xy, sub, m_head, _m_index, m_work, _, _, _score, path] = f.as_slice()
                else {
                    return Err(ChangeError::Parse(format!("status record {text:?}")));
                };
                let orig = records.next().ok_or_else(|| {
                    ChangeError::Parse(format!("rename record {text:?} without its source"))
                })?;
                let orig = std::str::from_utf8(orig).map_err(|_| non_utf8(orig))?;
                check_modes(path, sub, &[m_head, m_work])?;
                let in_work_tree = *m_work != "000000";
                if xy.starts_with('R') {
                    note(seen, orig, true, false)?;
                    note(seen, path, false, in_work_tree)?;
                    if let Some(s) = seen.get_mut(*path) {
                        s.renamed = true;
                    }
                } else {
                    // A copy: the new path is added, its source untouched.
                    note(seen, path, false, in_work_tree)?;
                }
            }
            "u" => {
                let path = text.splitn(11, ' ').nth(10).unwrap_or(text);
                return Err(ChangeError::Unmerged(path.to_string()));
            }
            "?" => untracked(record.get(2..).unwrap_or_default(), seen)?,
            "#" | "!" => {}
            _ => return Err(ChangeError::Parse(format!("status record {text:?}"))),
        }
    }
    Ok(())
}

/// Records of `git diff --raw -z -M`: `:mA mB oA oB S` then one path, or
/// two for `R`/`C`.
fn parse_raw_diff(out: &[u8], seen: &mut BTreeMap<String, Seen>) -> Result<(), ChangeError> {
    let mut fields = out.split(|&b| b == 0).filter(|r| !r.is_empty());
    while let Some(header) = fields.next() {
        let text = std::str::from_utf8(header).map_err(|_| non_utf8(header))?;
        let parts: Vec<&str> = text.trim_start_matches(':').split(' ').collect();
        let [m_base, m_work, _, _, status] = parts.as_slice() else {
            return Err(ChangeError::Parse(format!("diff record {text:?}")));
        };
        let mut path = || -> Result<&str, ChangeError> {
            let raw = fields.next().ok_or_else(|| {
                ChangeError::Parse(format!("diff record {text:?} without a path"))
            })?;
            std::str::from_utf8(raw).map_err(|_| non_utf8(raw))
        };
        let first = path()?;
        check_modes(first, "N...", &[m_base, m_work])?;
        match status.chars().next() {
            Some('R') => {
                let to = path()?;
                note(seen, first, true, false)?;
                note(seen, to, false, *m_work != "000000")?;
                if let Some(s) = seen.get_mut(to) {
                    s.renamed = true;
                }
            }
            Some('C') => {
                let to = path()?;
                note(seen, to, false, *m_work != "000000")?;
            }
            Some('U') => return Err(ChangeError::Unmerged(first.to_string())),
            Some('A' | 'D' | 'M' | 'T') => {
                note(seen, first, *m_base != "000000", *m_work != "000000")?;
            }
            _ => return Err(ChangeError::Parse(format!("diff status {status:?}"))),
        }
    }
    Ok(())
}

/// An untracked path, relative to the top (its type is read from disk in
/// [`finish`]).
fn untracked(raw: &[u8], seen: &mut BTreeMap<String, Seen>) -> Result<(), ChangeError> {
    let path = std::str::from_utf8(raw).map_err(|_| non_utf8(raw))?;
    if path.ends_with('/') {
        return Err(ChangeError::NestedRepository(path.to_string()));
    }
    note(seen, path, false, true)
}

/// Refuse submodules (sub field `S...`, mode 160000) and links in the work tree.
fn check_modes(path: &str, sub: &str, modes: &[&&str]) -> Result<(), ChangeError> {
    if sub.starts_with('S') || modes.iter().any(|m| **m == "160000") {
        return Err(ChangeError::Submodule(path.to_string()));
    }
    if modes.last().is_some_and(|m| **m == "120000") {
        return Err(ChangeError::Symlink(path.to_string()));
    }
    Ok(())
}

/// Merge what one record says about `path` into `seen`.
fn note(
    seen: &mut BTreeMap<String, Seen>,
    path: &str,
    in_base: bool,
    in_work_tree: bool,
) -> Result<(), ChangeError> {
    let entry = seen.entry(path.to_string()).or_default();
    entry.in_base |= in_base;
    entry.in_work_tree |= in_work_tree;
    if seen.len() > MAX_CHANGE_FILES {
        return Err(ChangeError::TooManyFiles(seen.len()));
    }
    Ok(())
}

fn non_utf8(raw: &[u8]) -> ChangeError {
    ChangeError::BadPath {
        path: String::from_utf8_lossy(raw).into_owned(),
        why: "not UTF-8; a receipt names resources in UTF-8".into(),
    }
}

/// Check every path, hash every file that exists, and give each its word.
fn finish(top: &Path, seen: BTreeMap<String, Seen>) -> Result<Vec<FileChange>, ChangeError> {
    let reader = Reader::new(top, Substrate::Filesystem);
    let mut files = Vec::with_capacity(seen.len());
    for (path, s) in seen {
        let status = match (s.in_base, s.in_work_tree) {
            (false, true) if s.renamed => Status::Renamed,
            (false, true) => Status::Added,
            (true, true) => Status::Modified,
            (true, false) => Status::Deleted,
            // Added to the index, then removed from the work tree: no change.
            (false, false) => continue,
        };
        check_path(&path)?;
        let on_disk = std::fs::symlink_metadata(top.join(&path));
        let digest = match (status, on_disk) {
            (Status::Deleted, Err(e)) if e.kind() == std::io::ErrorKind::NotFound => None,
            (Status::Deleted, _) => return Err(ChangeError::Raced(path)),
            (_, Ok(meta)) if meta.file_type().is_symlink() => {
                return Err(ChangeError::Symlink(path));
            }
            (_, _) => Some(reader.digest(&path, Algorithm::Blake3).map_err(
                |source| match source {
                    ResourceError::Missing(_) => ChangeError::Raced(path.clone()),
                    source => ChangeError::Read {
                        path: path.clone(),
                        source,
                    },
                },
            )?),
        };
        let executable = digest.is_some() && is_executable(&top.join(&path));
        files.push(FileChange {
            path,
            status,
            digest,
            executable,
        });
    }
    Ok(files)
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(_path: &Path) -> bool {
    false
}

/// A path of a change must be a resource of a git read set that names the file.
pub fn check_path(path: &str) -> Result<(), ChangeError> {
    check_relative(path).map_err(|e| ChangeError::BadPath {
        path: path.to_string(),
        why: e.to_string(),
    })?;
    if path == crate::fresh::HEAD || path.starts_with("refs/") {
        return Err(ChangeError::BadPath {
            path: path.to_string(),
            why: "a git read set reads this name as a ref, not as the file".into(),
        });
    }
    Ok(())
}

impl Change {
    /// The change record: `{"base", "files": [{"path", "status", "digest",
    /// "mode"}]}`; `mode` is git's `100644` or `100755` for a file that
    /// exists, null for a deleted one: making a file executable changes
    /// what runs, so it changes the identity.
    pub fn to_value(&self) -> Value {
        let files = self
            .files
            .iter()
            .map(|f| {
                let digest = f.digest.map_or(Value::Null, |d| Value::Text(d.to_string()));
                let mode = match (f.digest, f.executable) {
                    (None, _) => Value::Null,
                    (Some(_), true) => Value::Text("100755".into()),
                    (Some(_), false) => Value::Text("100644".into()),
                };
                Value::Map(BTreeMap::from([
                    ("path".to_string(), Value::Text(f.path.clone())),
                    ("status".to_string(), Value::Text(f.status.as_str().into())),
                    ("digest".to_string(), digest),
                    ("mode".to_string(), mode),
                ]))
            })
            .collect();
        Value::Map(BTreeMap::from([
            ("base".to_string(), Value::Text(self.base.clone())),
            ("files".to_string(), Value::Array(files)),
        ]))
    }

    /// `change_id`: BLAKE3 over the record's canonical DAG-CBOR.
    pub fn id(&self) -> Digest {
        identity(&dagcbor::encode(&self.to_value()))
    }

    /// The paths that exist in the work tree (every status but `deleted`).
    pub fn existing(&self) -> impl Iterator<Item = &FileChange> {
        self.files.iter().filter(|f| f.digest.is_some())
    }
}
