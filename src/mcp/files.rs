//! files: the files a step writes, named by JSON Pointers into its
//! arguments, each resolved under a `--root` (spec/gate-mcp.md "Files").
//!
//! A pointer must name a string: a path, absolute or relative to the
//! server's working directory (the proxy's). The path must lie under a
//! root (as given or canonical), with no `..` component and no `~`; every
//! component below the root is examined without following links, and a
//! link anywhere on the way (one that stays inside a root too) refuses the
//! step, so the file the receipt names is the file the server writes. The
//! file itself is a regular file or absent; anything else is refused.
//! The resolved path is the canonical root joined with the rest; the
//! inverse record names it relative to `/`.

use crate::digest::Digest;
use std::path::{Component, Path, PathBuf};

/// Reason: a pointer names nothing in the arguments.
pub const FILES_MISSING: &str = "files.missing";
/// Reason: a pointer names something that is not a usable path.
pub const FILES_NOT_A_PATH: &str = "files.not_a_path";
/// Reason: the path is outside every root.
pub const FILES_OUTSIDE: &str = "files.outside_root";
/// Reason: a symbolic link is on the path.
pub const FILES_LINK: &str = "files.link";
/// Reason: the path names something that is not a regular file.
pub const FILES_NOT_REGULAR: &str = "files.not_regular";
/// Reason: the file's pre-image could not be kept (too large, unreadable).
pub const FILES_PREIMAGE: &str = "files.preimage";
/// Longest path accepted (bytes).
pub const MAX_PATH_BYTES: usize = 4096;

/// A root the proxy may gate writes under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// As given on the command line (absolute).
    pub given: PathBuf,
    /// Canonical (links resolved).
    pub canonical: PathBuf,
}

/// Why a root is refused.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The root could not be resolved (it does not exist, or a link
    /// or permission is in the way).
    #[error("--root {}", path.display())]
    Io {
        /// The root.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The root is not a directory.
    #[error("--root {}: not a directory", path.display())]
    NotDir {
        /// The root.
        path: PathBuf,
    },
}

impl Root {
    /// A root: an existing directory, made absolute against `cwd`.
    pub fn new(path: &Path, cwd: &Path) -> Result<Root, RootError> {
        let given = cwd.join(path);
        let canonical = std::fs::canonicalize(&given).map_err(|source| RootError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if !canonical.is_dir() {
            return Err(RootError::NotDir {
                path: path.to_path_buf(),
            });
        }
        Ok(Root { given, canonical })
    }
}

/// One file of a step, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepFile {
    /// The pointer that named it.
    pub pointer: String,
    /// The canonical absolute path.
    pub path: PathBuf,
}

impl StepFile {
    /// The path relative to `/` (the inverse record's form).
    pub fn rel(&self) -> String {
        self.path
            .strip_prefix("/")
            .unwrap_or(&self.path)
            .to_string_lossy()
            .into_owned()
    }
}

/// A refusal: its reason code and what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The reason code.
    pub reason: &'static str,
    /// The detail, for the client and the evidence.
    pub detail: String,
}

fn refuse(reason: &'static str, detail: String) -> Refusal {
    Refusal { reason, detail }
}

/// Resolve every pointer of a step against `arguments`.
pub fn resolve(
    pointers: &[String],
    arguments: &serde_json::Value,
    roots: &[Root],
    cwd: &Path,
) -> Result<Vec<StepFile>, Refusal> {
    let mut out: Vec<StepFile> = Vec::with_capacity(pointers.len());
    for pointer in pointers {
        let value = arguments.pointer(pointer).ok_or_else(|| {
            refuse(
                FILES_MISSING,
                format!("{pointer}: the arguments have no value there"),
            )
        })?;
        let text = value
            .as_str()
            .ok_or_else(|| refuse(FILES_NOT_A_PATH, format!("{pointer}: not a string")))?;
        let path = resolve_path(text, roots, cwd).map_err(|r| Refusal {
            detail: format!("{pointer}: {text:?}: {}", r.detail),
            ..r
        })?;
        if !out.iter().any(|f| f.path == path) {
            out.push(StepFile {
                pointer: pointer.clone(),
                path,
            });
        }
    }
    out.sort_by_key(StepFile::rel);
    Ok(out)
}

/// Resolve one path under the roots (see the module doc).
pub fn resolve_path(text: &str, roots: &[Root], cwd: &Path) -> Result<PathBuf, Refusal> {
    let clean = lexical(text, cwd)?;
    let (root, rest) = roots
        .iter()
        .find_map(|r| {
            [&r.canonical, &r.given]
                .into_iter()
                .find_map(|base| clean.strip_prefix(base).ok())
                .map(|rest| (r, rest.to_path_buf()))
        })
        .ok_or_else(|| refuse(FILES_OUTSIDE, "outside every --root".into()))?;
    let parts: Vec<_> = rest.components().collect();
    if parts.is_empty() {
        return Err(refuse(
            FILES_NOT_REGULAR,
            "a root itself is a directory".into(),
        ));
    }
    let mut at = root.canonical.clone();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let last = i + 1 == parts.len();
        let meta = match std::fs::symlink_metadata(&at) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The rest does not exist yet: nothing on it can be a link.
                at.extend(parts.iter().skip(i + 1));
                return Ok(at);
            }
            Err(e) => return Err(refuse(FILES_NOT_REGULAR, format!("cannot examine it: {e}"))),
            Ok(m) => m,
        };
        if meta.file_type().is_symlink() {
            return Err(refuse(
                FILES_LINK,
                format!("{} is a symbolic link", at.display()),
            ));
        }
        if last && !meta.is_file() {
            return Err(refuse(FILES_NOT_REGULAR, "not a regular file".into()));
        }
        if !last && !meta.is_dir() {
            return Err(refuse(
                FILES_NOT_REGULAR,
                format!("{} is not a directory", at.display()),
            ));
        }
    }
    Ok(at)
}

/// `text` made absolute against `cwd`, `.` components dropped; refused
/// when empty, too long, with a NUL, a leading `~` or a `..` component.
fn lexical(text: &str, cwd: &Path) -> Result<PathBuf, Refusal> {
    if text.is_empty()
        || text.len() > MAX_PATH_BYTES
        || text.contains('\0')
        || text.starts_with('~')
    {
        return Err(refuse(
            FILES_NOT_A_PATH,
            "empty, too long, with a NUL, or starting with ~".into(),
        ));
    }
    let mut clean = PathBuf::new();
    for c in cwd.join(text).components() {
        match c {
            Component::ParentDir => return Err(refuse(FILES_NOT_A_PATH, "a .. component".into())),
            Component::CurDir => {}
            other => clean.push(other),
        }
    }
    Ok(clean)
}

/// A file's state: BLAKE3 and executable bit, or absent.
pub type State = Option<crate::gate::inverse::Side>;

/// The state of `file` now (re-read from disk).
pub fn state_now(file: &StepFile) -> Result<State, String> {
    crate::gate::journal::side_now(Path::new("/"), &file.rel()).map_err(|e| e.to_string())
}

/// The digest a read set gives a file state (absent: none).
pub fn digest_of(state: &State) -> Option<Digest> {
    state.map(|s| s.digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_resolve_under_a_root_and_everything_else_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().join("work");
        std::fs::create_dir_all(top.join("sub")).unwrap();
        std::fs::write(top.join("a.txt"), b"a").unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, top.join("out")).unwrap();
        std::os::unix::fs::symlink(top.join("sub"), top.join("in")).unwrap();
        std::os::unix::fs::symlink(top.join("a.txt"), top.join("alink")).unwrap();
        let roots = vec![Root::new(&top, tmp.path()).unwrap()];
        // A root that is not there: the OS error is kept as the cause.
        let missing = Root::new(Path::new("nowhere"), tmp.path()).unwrap_err();
        assert_eq!(missing.to_string(), "--root nowhere");
        let cause = std::error::Error::source(&missing).unwrap();
        let io = cause.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(matches!(
            Root::new(Path::new("a.txt"), &top),
            Err(RootError::NotDir { .. })
        ));
        let canon = roots[0].canonical.clone();
        let ok = |p: &str, cwd: &Path| {
            resolve(&["/p".into()], &json!({"p": p}), &roots, cwd).map(|f| f[0].path.clone())
        };
        let top_s = top.display().to_string();
        assert_eq!(
            ok(&format!("{top_s}/a.txt"), tmp.path()).unwrap(),
            canon.join("a.txt")
        );
        assert_eq!(
            ok(&format!("{top_s}/./new.txt"), tmp.path()).unwrap(),
            canon.join("new.txt")
        );
        assert_eq!(
            ok(&format!("{top_s}/sub/x/y.txt"), tmp.path()).unwrap(),
            canon.join("sub/x/y.txt")
        );
        assert_eq!(ok("a.txt", &top).unwrap(), canon.join("a.txt"));
        let reason = |p: &str| ok(p, tmp.path()).unwrap_err().reason;
        assert_eq!(reason(&format!("{top_s}/out/x")), FILES_LINK);
        assert_eq!(reason(&format!("{top_s}/in/x")), FILES_LINK);
        assert_eq!(reason(&format!("{top_s}/alink")), FILES_LINK);
        assert_eq!(reason(&format!("{top_s}/../outside/x")), FILES_NOT_A_PATH);
        assert_eq!(
            reason(&outside.join("x").display().to_string()),
            FILES_OUTSIDE
        );
        assert_eq!(reason("/etc/passwd"), FILES_OUTSIDE);
        assert_eq!(reason(&format!("{top_s}/sub")), FILES_NOT_REGULAR);
        assert_eq!(reason(&format!("{top_s}/a.txt/x")), FILES_NOT_REGULAR);
        assert_eq!(reason("~/x"), FILES_NOT_A_PATH);
        assert_eq!(reason(&top_s), FILES_NOT_REGULAR);
        let missing = resolve(&["/q".into()], &json!({"p": "x"}), &roots, tmp.path());
        assert_eq!(missing.unwrap_err().reason, FILES_MISSING);
        let number = resolve(&["/p".into()], &json!({"p": 3}), &roots, tmp.path());
        assert_eq!(number.unwrap_err().reason, FILES_NOT_A_PATH);
    }
}
