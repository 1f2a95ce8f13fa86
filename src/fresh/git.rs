//! gitref: resolve a git ref to its object id by reading the repository's
//! files, with no `git` process and no network.
//!
//! Boundary: the ref storage of a git repository as git itself writes it
//! ("files" backend): loose refs (`<dir>/refs/...`, one object id or a
//! `ref: <target>` line), `packed-refs` (`<oid> <name>` lines, `^<oid>`
//! peel lines, a `#` header), symbolic refs followed a bounded number of
//! times, and linked worktrees (`.git` file with `gitdir:`, `commondir`).
//! A repository that stores refs in the reftable format is not read: its
//! refs are reported as unsupported, never as missing (spec/gate.md).
//!
//! Why no library: gix would add some hundred crates to the verifier for a
//! lookup of a few dozen lines, and the rules read here are small, stable
//! and tested against the real `git` in tests/gate_fresh.rs.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// Most symbolic-ref hops followed (git's own limit is 5).
pub const MAX_SYMREF_DEPTH: usize = 5;
/// Largest loose ref file read (bytes); a real one is 41 or 65 bytes.
pub const MAX_LOOSE_REF_BYTES: u64 = 4096;
/// Longest line read from `packed-refs` (bytes).
pub const MAX_PACKED_REF_LINE_BYTES: usize = 4096;
/// Largest `.git` file or `commondir` file read (bytes).
pub const MAX_POINTER_FILE_BYTES: u64 = 4096;
/// Largest repository `config` file scanned for the ref storage format.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Why a ref could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RefError {
    /// The ref does not exist (deleted, or never created).
    #[error("ref {0} does not exist")]
    Missing(String),
    /// The name is not a valid git ref name under `refs/`.
    #[error("{name:?} is not a valid ref name: {why}")]
    BadName {
        /// The name given.
        name: String,
        /// The rule it breaks.
        why: &'static str,
    },
    /// ROOT holds no git repository (no `.git` directory or file).
    #[error("{0} is not a git work tree (no .git directory or file)")]
    NotARepository(PathBuf),
    /// The repository keeps its refs in a format this reader does not read.
    #[error("the repository at {0} stores refs as reftable, which rcpt does not read")]
    Reftable(PathBuf),
    /// A ref file holds something that is not a ref.
    #[error("{path}: not a ref file ({why})")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        why: String,
    },
    /// Symbolic refs chain too deep, or in a loop.
    #[error("ref {0}: symbolic refs nest deeper than {MAX_SYMREF_DEPTH}")]
    TooDeep(String),
    /// Reading a repository file failed for a reason other than absence.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The directories of one repository that refs live in.
#[derive(Clone, Debug)]
pub struct Repository {
    /// The per-worktree git directory (`.git`, or `.git/worktrees/<name>`).
    git_dir: PathBuf,
    /// The directory shared by every worktree (`commondir`), where
    /// `refs/heads`, `refs/tags` and `packed-refs` live.
    common_dir: PathBuf,
}

impl Repository {
    /// Find the repository of the work tree at `root` (`root/.git`).
    pub fn discover(root: &Path) -> Result<Repository, RefError> {
        let dot_git = root.join(".git");
        let meta = match std::fs::metadata(&dot_git) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(RefError::NotARepository(root.to_path_buf()));
            }
            Err(source) => {
                return Err(RefError::Io {
                    path: dot_git,
                    source,
                });
            }
        };
        let git_dir = if meta.is_dir() {
            dot_git
        } else {
            // A linked worktree or submodule: "gitdir: <path>".
            let text = read_small(&dot_git, MAX_POINTER_FILE_BYTES)?;
            let target = text
                .strip_prefix("gitdir: ")
                .map(str::trim_end)
                .ok_or_else(|| corrupt(&dot_git, "no gitdir: line"))?;
            root.join(target)
        };
        let common_dir = match read_small(&git_dir.join("commondir"), MAX_POINTER_FILE_BYTES) {
            Ok(text) => git_dir.join(text.trim_end()),
            Err(RefError::Missing(_)) => git_dir.clone(),
            Err(e) => return Err(e),
        };
        let repo = Repository {
            git_dir,
            common_dir,
        };
        if repo.uses_reftable()? {
            return Err(RefError::Reftable(repo.common_dir));
        }
        Ok(repo)
    }

    /// Whether `config` sets `extensions.refStorage = reftable`.
    fn uses_reftable(&self) -> Result<bool, RefError> {
        let path = self.common_dir.join("config");
        let text = match read_small(&path, MAX_CONFIG_BYTES) {
            Ok(t) => t,
            Err(RefError::Missing(_)) => return Ok(false),
            Err(e) => return Err(e),
        };
        // Key names are case-insensitive in git config; the one key that
        // selects reftable is `refstorage`, and only reftable is not "files".
        Ok(text.lines().any(|line| {
            let line = line.trim().to_ascii_lowercase();
            let mut kv = line.splitn(2, '=');
            let key = kv.next().unwrap_or("").trim();
            let value = kv.next().unwrap_or("").trim();
            key == "refstorage" && value.trim_matches('"') == "reftable"
        }))
    }

    /// The object id (lowercase hex) that `name` resolves to, following
    /// symbolic refs. An annotated tag resolves to the tag object, as
    /// `git rev-parse refs/tags/T` prints it (no peeling).
    pub fn resolve(&self, name: &str) -> Result<String, RefError> {
        check_ref_name(name)?;
        let mut current = name.to_string();
        for _ in 0..=MAX_SYMREF_DEPTH {
            match self.lookup(&current)? {
                RefValue::Oid(oid) => return Ok(oid),
                RefValue::Symbolic(target) => {
                    check_ref_name(&target)?;
                    current = target;
                }
            }
        }
        Err(RefError::TooDeep(name.to_string()))
    }

    /// The object id `HEAD` resolves to: the per-worktree `HEAD` file, an
    /// object id (detached) or `ref: <target>`, followed as [`resolve`]
    /// follows refs. An unborn branch (no commit yet) is
    /// [`RefError::Missing`].
    ///
    /// [`resolve`]: Repository::resolve
    pub fn resolve_head(&self) -> Result<String, RefError> {
        match parse_loose(&self.git_dir.join("HEAD")) {
            Ok(RefValue::Oid(oid)) => Ok(oid),
            Ok(RefValue::Symbolic(target)) => match self.resolve(&target) {
                Err(RefError::Missing(_)) => Err(RefError::Missing("HEAD".into())),
                other => other,
            },
            Err(RefError::Missing(_)) => Err(RefError::Missing("HEAD".into())),
            Err(e) => Err(e),
        }
    }

    /// One step: the loose ref file, else the `packed-refs` line.
    fn lookup(&self, name: &str) -> Result<RefValue, RefError> {
        let dir = if is_per_worktree(name) {
            &self.git_dir
        } else {
            &self.common_dir
        };
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => return parse_loose(&path),
            // A directory of that name (refs/heads/a when a/b exists) or
            // nothing at all: the packed refs decide.
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(RefError::Io { path, source }),
        }
        self.packed(name)?
            .map(RefValue::Oid)
            .ok_or_else(|| RefError::Missing(name.to_string()))
    }

    /// The object id of `name` in `packed-refs`, if listed.
    fn packed(&self, name: &str) -> Result<Option<String>, RefError> {
        let path = self.common_dir.join("packed-refs");
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(RefError::Io { path, source }),
        };
        let mut reader = BufReader::new(file);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut reader)
                .take(MAX_PACKED_REF_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut line)
                .map_err(|source| RefError::Io {
                    path: path.clone(),
                    source,
                })?;
            if n == 0 {
                return Ok(None);
            }
            if n > MAX_PACKED_REF_LINE_BYTES {
                return Err(corrupt(&path, "line too long"));
            }
            let text = std::str::from_utf8(&line)
                .map_err(|_| corrupt(&path, "not UTF-8"))?
                .trim_end_matches('\n');
            if text.starts_with('#') || text.starts_with('^') || text.is_empty() {
                continue;
            }
            let (oid, ref_name) = text
                .split_once(' ')
                .ok_or_else(|| corrupt(&path, "line without a space"))?;
            if ref_name == name {
                return check_oid(oid, &path).map(Some);
            }
        }
    }
}

/// What one ref file says.
enum RefValue {
    Oid(String),
    Symbolic(String),
}

/// Refs git keeps per worktree rather than in the common directory.
fn is_per_worktree(name: &str) -> bool {
    ["refs/bisect/", "refs/worktree/", "refs/rewritten/"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Parse a loose ref file: `<oid>\n` or `ref: <target>\n`.
fn parse_loose(path: &Path) -> Result<RefValue, RefError> {
    let text = read_small(path, MAX_LOOSE_REF_BYTES)?;
    let text = text.trim_end_matches('\n');
    match text.strip_prefix("ref: ") {
        Some(target) => Ok(RefValue::Symbolic(target.trim().to_string())),
        None => check_oid(text, path).map(RefValue::Oid),
    }
}

/// An object id is 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
fn check_oid(oid: &str, path: &Path) -> Result<String, RefError> {
    let hex = oid
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if (oid.len() == 40 || oid.len() == 64) && hex {
        Ok(oid.to_string())
    } else {
        Err(corrupt(
            path,
            "not a 40- or 64-digit lowercase hex object id",
        ))
    }
}

/// git check-ref-format's rules, for a full name under `refs/`.
pub fn check_ref_name(name: &str) -> Result<(), RefError> {
    let bad = |why| {
        Err(RefError::BadName {
            name: name.to_string(),
            why,
        })
    };
    if !name.starts_with("refs/") {
        return bad("does not start with refs/");
    }
    if name.len() > 1024 {
        return bad("longer than 1024 bytes");
    }
    if name.contains("..") || name.contains("@{") || name == "@" {
        return bad("contains .. or @{");
    }
    if name
        .bytes()
        .any(|b| b < 0x20 || b == 0x7f || b" ~^:?*[\\".contains(&b))
    {
        return bad("contains a control character, space, or one of ~^:?*[\\");
    }
    if name.ends_with('/') || name.ends_with('.') {
        return bad("ends with / or .");
    }
    for component in name.split('/') {
        if component.is_empty() {
            return bad("has an empty path component");
        }
        if component.starts_with('.') || component.ends_with(".lock") {
            return bad("a component starts with . or ends with .lock");
        }
    }
    Ok(())
}

/// Read a small text file whole; absence is [`RefError::Missing`].
fn read_small(path: &Path, max: u64) -> Result<String, RefError> {
    let io = |source| RefError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(RefError::Missing(path.display().to_string()));
        }
        Err(e) => return Err(io(e)),
    };
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(corrupt(path, "file too large"));
    }
    String::from_utf8(bytes).map_err(|_| corrupt(path, "not UTF-8"))
}

fn corrupt(path: &Path, why: &str) -> RefError {
    RefError::Corrupt {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_names_follow_check_ref_format() {
        for good in ["refs/heads/main", "refs/tags/v1.0", "refs/heads/a/b-c_d"] {
            assert!(check_ref_name(good).is_ok(), "{good}");
        }
        for bad in [
            "HEAD",
            "refs/heads/../x",
            "refs/heads/.hidden",
            "refs/heads/x.lock",
            "refs/heads/a b",
            "refs/heads/a~1",
            "refs/heads/",
            "refs/heads//x",
            "refs/heads/x.",
            "refs/heads/x@{1}",
            "refs/heads/\u{1}",
        ] {
            assert!(
                matches!(check_ref_name(bad), Err(RefError::BadName { .. })),
                "{bad:?}"
            );
        }
    }
}
