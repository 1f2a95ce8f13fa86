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
//! Where this reader and git could disagree, it refuses (the resource is
//! then not evaluated), never guesses: a loose ref that is a symbolic link
//! or anything but a regular file or a directory, a `packed-refs` file
//! with any line git would not accept, a name listed twice, lines out of
//! order (git binary-searches a sorted file), object ids of another length
//! than the repository's format, a config whose ref storage or object
//! format it cannot read for sure. Every file is read through
//! [`crate::io`]: regular files only, opened non-blocking, capped, so a
//! FIFO planted as `.git`, `config` or `packed-refs` is refused at once.
//!
//! Why no library: gix would add some hundred crates to the verifier for a
//! lookup of a few dozen lines, and the rules read here are small, stable
//! and tested against the real `git` in tests/gate_fresh.rs.

use crate::io::InputError;
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
/// Hex digits of a SHA-1 object id.
const SHA1_HEX: usize = 40;
/// Hex digits of a SHA-256 object id.
const SHA256_HEX: usize = 64;
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
    /// Hex digits of an object id: 40 (SHA-1) or 64 (SHA-256).
    oid_len: usize,
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
        let mut repo = Repository {
            git_dir,
            common_dir,
            oid_len: SHA1_HEX,
        };
        let (reftable, oid_len) = repo.format()?;
        if reftable {
            return Err(RefError::Reftable(repo.common_dir));
        }
        repo.oid_len = oid_len;
        Ok(repo)
    }

    /// Whether the repository keeps its refs as reftable: a `reftable`
    /// directory, or a `refStorage` key whose value is not for sure
    /// `files`; and the object id length its `objectFormat` gives.
    fn format(&self) -> Result<(bool, usize), RefError> {
        let path = self.common_dir.join("config");
        if std::fs::symlink_metadata(self.common_dir.join("reftable")).is_ok() {
            return Ok((true, SHA1_HEX));
        }
        let text = match read_small(&path, MAX_CONFIG_BYTES) {
            Ok(t) => t,
            Err(RefError::Missing(_)) => return Ok((false, SHA1_HEX)),
            Err(e) => return Err(e),
        };
        let mut reftable = false;
        let mut oid_len = SHA1_HEX;
        for (key, value) in text.lines().filter_map(config_entry) {
            match key.as_str() {
                "refstorage" => reftable |= value != "files",
                "objectformat" => {
                    oid_len = match value.as_str() {
                        "sha1" => SHA1_HEX,
                        "sha256" => SHA256_HEX,
                        _ => return Err(corrupt(&path, "an objectFormat rcpt does not know")),
                    }
                }
                _ => {}
            }
        }
        Ok((reftable, oid_len))
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
        match parse_loose(&self.git_dir.join("HEAD"), self.oid_len) {
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
            Ok(m) if m.is_file() => return parse_loose(&path, self.oid_len),
            // A directory of that name (refs/heads/a when a/b exists) or
            // nothing at all: the packed refs decide, as in git.
            Ok(m) if m.is_dir() => {}
            // git follows a link (to a file, or as a symbolic ref when it
            // reads `refs/...`) and opens anything else: never the packed
            // refs. rcpt reads neither and refuses.
            Ok(m) if m.file_type().is_symlink() => {
                return Err(corrupt(
                    &path,
                    "a symbolic link, which rcpt does not follow",
                ));
            }
            Ok(_) => return Err(corrupt(&path, "not a regular file")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(RefError::Io { path, source }),
        }
        self.packed(name)?
            .map(RefValue::Oid)
            .ok_or_else(|| RefError::Missing(name.to_string()))
    }

    /// The object id of `name` in `packed-refs`, if listed. The whole file
    /// is checked as git reads it, whatever line `name` is on: a header
    /// only first, each ref line `<oid> <name>`, a peel line `^<oid>` only
    /// after a ref line, names in strictly increasing byte order (so none
    /// twice, and git's binary search finds what this scan finds), every
    /// line ended by a newline. Any other file is refused.
    fn packed(&self, name: &str) -> Result<Option<String>, RefError> {
        let path = self.common_dir.join("packed-refs");
        let file = match crate::io::open_regular(&path) {
            Ok((f, _)) => f,
            Err(InputError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(input_error(&path, e)),
        };
        let mut scan = PackedScan::new(&path, self.oid_len);
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
                return Ok(scan.hit);
            }
            scan.line(&line, name)?;
        }
    }
}

/// The state of a check of `packed-refs`, line by line.
struct PackedScan<'p> {
    path: &'p Path,
    oid_len: usize,
    /// Lines read.
    lines: u64,
    /// The last ref name (the next must sort after it), and whether its
    /// peel line was read.
    last: Option<(String, bool)>,
    /// The object id of the name looked up.
    hit: Option<String>,
}

impl<'p> PackedScan<'p> {
    fn new(path: &'p Path, oid_len: usize) -> Self {
        PackedScan {
            path,
            oid_len,
            lines: 0,
            last: None,
            hit: None,
        }
    }

    /// One raw line, with its newline.
    fn line(&mut self, raw: &[u8], name: &str) -> Result<(), RefError> {
        self.lines += 1;
        let bad = |why: &str| corrupt(self.path, &format!("line {}: {why}", self.lines));
        let Some(body) = raw.strip_suffix(b"\n") else {
            return Err(if raw.len() > MAX_PACKED_REF_LINE_BYTES {
                bad("too long")
            } else {
                bad("no newline at the end of the file")
            });
        };
        let text = std::str::from_utf8(body).map_err(|_| bad("not UTF-8"))?;
        if let Some(header) = text.strip_prefix('#') {
            if self.lines != 1 || !header.starts_with(" pack-refs with:") {
                return Err(bad("a # line that is not the header on the first line"));
            }
            return Ok(());
        }
        if let Some(peeled) = text.strip_prefix('^') {
            match &mut self.last {
                Some((_, seen @ false)) => *seen = true,
                _ => return Err(bad("a peel line not after a ref line")),
            }
            return self.oid(peeled).map(|_| ());
        }
        let (oid, ref_name) = text
            .split_once(' ')
            .ok_or_else(|| bad("not a ref line (<oid> <name>)"))?;
        let oid = self.oid(oid)?;
        check_packed_name(ref_name).map_err(&bad)?;
        if let Some((prev, _)) = &self.last
            && prev.as_str() >= ref_name
        {
            return Err(bad(
                "names not in strictly increasing order (or listed twice)",
            ));
        }
        if ref_name == name {
            self.hit = Some(oid);
        }
        self.last = Some((ref_name.to_string(), false));
        Ok(())
    }

    fn oid(&self, text: &str) -> Result<String, RefError> {
        check_oid(text, self.path, self.oid_len)
    }
}

/// A name in `packed-refs`: git accepts one-level names (`HEAD`-like) there
/// only as broken refs; a valid full name is all this reader takes.
fn check_packed_name(name: &str) -> Result<(), &'static str> {
    check_ref_name(name).map_err(|e| match e {
        RefError::BadName { why, .. } => why,
        _ => "not a valid ref name",
    })
}

/// The lowercased key (without its section) and value of one config line,
/// its comment and quotes removed; `None` for a line without `=`.
fn config_entry(line: &str) -> Option<(String, String)> {
    let mut line = line.trim().to_ascii_lowercase();
    // `[extensions] refStorage = x` is valid git config: drop the section.
    if line.starts_with('[')
        && let Some(end) = line.find(']')
    {
        line = line[end + 1..].trim().to_string();
    }
    let (key, value) = line.split_once('=')?;
    let value = value
        .split(['#', ';'])
        .next()
        .unwrap_or("")
        .trim()
        .trim_matches('"')
        .trim();
    Some((key.trim().to_string(), value.to_string()))
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
fn parse_loose(path: &Path, oid_len: usize) -> Result<RefValue, RefError> {
    let text = read_small(path, MAX_LOOSE_REF_BYTES)?;
    let text = text.trim_end_matches('\n');
    match text.strip_prefix("ref: ") {
        Some(target) => Ok(RefValue::Symbolic(target.trim().to_string())),
        None => check_oid(text, path, oid_len).map(RefValue::Oid),
    }
}

/// An object id of the repository's format: `oid_len` (40 for SHA-1, 64
/// for SHA-256) lowercase hex digits.
fn check_oid(oid: &str, path: &Path, oid_len: usize) -> Result<String, RefError> {
    let hex = oid
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if oid.len() == oid_len && hex {
        Ok(oid.to_string())
    } else {
        Err(corrupt(
            path,
            &format!("not a {oid_len}-digit lowercase hex object id"),
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

/// Read a small text file whole with the one reader ([`crate::io`]:
/// regular files only, never a FIFO waited on); absence is
/// [`RefError::Missing`].
fn read_small(path: &Path, max: u64) -> Result<String, RefError> {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    match crate::io::read_path_text(path, max) {
        Ok(text) => Ok(text),
        Err(InputError::NotFound { .. }) => Err(RefError::Missing(path.display().to_string())),
        Err(e) => Err(input_error(path, e)),
    }
}

/// A [`crate::io`] refusal of a repository file, as a [`RefError`].
fn input_error(path: &Path, e: InputError) -> RefError {
    match e {
        InputError::NotFound { .. } => RefError::Missing(path.display().to_string()),
        InputError::Open { source, .. } | InputError::Read { source, .. } => RefError::Io {
            path: path.to_path_buf(),
            source,
        },
        InputError::NotRegular { kind, .. } => {
            corrupt(path, &format!("{kind}, not a regular file"))
        }
        InputError::TooLarge { .. } => corrupt(path, "file too large"),
        InputError::NotUtf8 { .. } => corrupt(path, "not UTF-8"),
    }
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
