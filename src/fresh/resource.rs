//! resource: one resource name turned into a digest under ROOT (a relative
//! path in normal form, never leaving ROOT; for git, a ref or `HEAD`).

use super::HEAD;
use super::git::{RefError, Repository};
use crate::digest::{Algorithm, Digest};
use crate::limits::MAX_TEXT_BYTES;
use crate::receipt::Substrate;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Bytes read at a time while hashing a file.
const HASH_CHUNK_BYTES: usize = 64 * 1024;

/// Why one resource could not be turned into a digest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResourceError {
    /// The resource is absent now (file or ref): stale when checking.
    #[error("{0} does not exist")]
    Missing(String),
    /// The name is not a relative path in normal form under ROOT.
    #[error("{name:?} is refused: {why}")]
    BadPath {
        /// The resource name.
        name: String,
        /// The rule it breaks.
        why: &'static str,
    },
    /// The path leaves ROOT through a symlink.
    #[error("{0:?} is refused: it resolves outside ROOT through a symlink")]
    Escapes(String),
    /// The path names something other than a regular file.
    #[error("{0:?} is not a regular file")]
    NotAFile(String),
    /// The substrate has no freshness rule.
    #[error("substrate {0} has no freshness rule")]
    Unsupported(&'static str),
    /// A git ref could not be resolved (other than by absence).
    #[error(transparent)]
    Ref(RefError),
    /// Reading failed for a reason other than absence (permissions, I/O).
    #[error("{name}: {source}")]
    Io {
        /// The resource.
        name: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ResourceError {
    /// True when this says the recorded resource is no longer what it was
    /// (absent, replaced by a non-file, or named by a path the rules refuse):
    /// a stale read set, so `policy.fresh` fails. False when the resource
    /// could not be examined at all: not evaluated.
    pub fn is_stale(&self) -> bool {
        matches!(
            self,
            ResourceError::Missing(_)
                | ResourceError::BadPath { .. }
                | ResourceError::Escapes(_)
                | ResourceError::NotAFile(_)
        )
    }
}

/// Where resources are read from: ROOT and, for git, its repository.
#[derive(Debug)]
pub struct Reader {
    root: PathBuf,
    substrate: Substrate,
    pub(super) repo: Option<Result<Repository, RefError>>,
}

impl Reader {
    /// A reader of `substrate` resources under `root`.
    pub fn new(root: &Path, substrate: Substrate) -> Reader {
        let repo = (substrate == Substrate::Git).then(|| Repository::discover(root));
        Reader {
            root: root.to_path_buf(),
            substrate,
            repo,
        }
    }

    /// The digest of one resource, read now by the rules above.
    pub fn digest(&self, resource: &str, alg: Algorithm) -> Result<Digest, ResourceError> {
        match self.substrate {
            Substrate::Filesystem => self.file_digest(resource, alg),
            Substrate::Git if resource.starts_with("refs/") || resource == HEAD => {
                self.ref_digest(resource, alg)
            }
            Substrate::Git => self.file_digest(resource, alg),
            Substrate::ToolProxy => Err(ResourceError::Unsupported("tool-proxy")),
            Substrate::Postgresql => Err(ResourceError::Unsupported("postgresql")),
            Substrate::Mysql => Err(ResourceError::Unsupported("mysql")),
        }
    }

    fn ref_digest(&self, name: &str, alg: Algorithm) -> Result<Digest, ResourceError> {
        let repo = match &self.repo {
            Some(Ok(repo)) => repo,
            Some(Err(RefError::NotARepository(p))) => {
                return Err(ResourceError::Ref(RefError::NotARepository(p.clone())));
            }
            Some(Err(e)) => {
                return Err(ResourceError::Ref(RefError::Corrupt {
                    path: self.root.clone(),
                    why: e.to_string(),
                }));
            }
            None => return Err(ResourceError::Unsupported("filesystem")),
        };
        let resolved = if name == HEAD {
            repo.resolve_head()
        } else {
            repo.resolve(name)
        };
        match resolved {
            Ok(oid) => Ok(digest_of(alg, oid.as_bytes())),
            Err(RefError::Missing(_)) => Err(ResourceError::Missing(name.to_string())),
            Err(RefError::BadName { why, .. }) => Err(ResourceError::BadPath {
                name: name.to_string(),
                why,
            }),
            Err(e) => Err(ResourceError::Ref(e)),
        }
    }

    fn file_digest(&self, resource: &str, alg: Algorithm) -> Result<Digest, ResourceError> {
        check_relative(resource)?;
        let root = std::fs::canonicalize(&self.root).map_err(|source| ResourceError::Io {
            name: self.root.display().to_string(),
            source,
        })?;
        let io = |source: std::io::Error| {
            if source.kind() == std::io::ErrorKind::NotFound {
                ResourceError::Missing(resource.to_string())
            } else {
                ResourceError::Io {
                    name: resource.to_string(),
                    source,
                }
            }
        };
        let real = std::fs::canonicalize(root.join(resource)).map_err(io)?;
        if !real.starts_with(&root) {
            return Err(ResourceError::Escapes(resource.to_string()));
        }
        let meta = std::fs::symlink_metadata(&real).map_err(io)?;
        if !meta.is_file() {
            // Never opened: a FIFO would block, a device never ends.
            return Err(ResourceError::NotAFile(resource.to_string()));
        }
        // The one reader's open: non-blocking, then `fstat` (a file swapped
        // for a FIFO since the `lstat` is refused, never waited on).
        let (file, _) = crate::io::open_regular(&real).map_err(|e| match e {
            crate::io::InputError::Open { source, .. } => io(source),
            crate::io::InputError::NotFound { .. } => ResourceError::Missing(resource.to_string()),
            _ => ResourceError::NotAFile(resource.to_string()),
        })?;
        // The file opened must be the file examined (no swap in between).
        let opened = file.metadata().map_err(io)?;
        if !same_file(&meta, &opened) {
            return Err(ResourceError::NotAFile(resource.to_string()));
        }
        hash_reader(alg, file).map_err(io)
    }
}

/// A resource name is a relative path in normal form: not empty, not
/// absolute, no empty, `.` or `..` component, no NUL, at most
/// [`MAX_TEXT_BYTES`] bytes.
pub fn check_relative(resource: &str) -> Result<(), ResourceError> {
    let bad = |why| {
        Err(ResourceError::BadPath {
            name: resource.to_string(),
            why,
        })
    };
    if resource.is_empty() {
        return bad("empty");
    }
    if resource.len() > MAX_TEXT_BYTES {
        return bad("longer than the text limit");
    }
    if resource.contains('\0') {
        return bad("contains NUL");
    }
    if resource.starts_with('/') {
        return bad("absolute path; a resource is relative to ROOT");
    }
    if resource
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return bad("has an empty, . or .. component");
    }
    // Belt and braces: the standard library agrees it is only normal parts.
    if !Path::new(resource)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        return bad("not a normal relative path");
    }
    Ok(())
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino() && b.is_file()
}

#[cfg(not(unix))]
fn same_file(_a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    b.is_file()
}

/// The digest of everything `reader` yields, read in chunks.
fn hash_reader(alg: Algorithm, mut reader: impl Read) -> std::io::Result<Digest> {
    let mut buf = vec![0u8; HASH_CHUNK_BYTES];
    let bytes = match alg {
        Algorithm::Blake3 => {
            let mut h = blake3::Hasher::new();
            each_chunk(&mut reader, &mut buf, |chunk| {
                h.update(chunk);
            })?;
            *h.finalize().as_bytes()
        }
        Algorithm::Sha256 => {
            use sha2::Digest as _;
            let mut h = sha2::Sha256::new();
            each_chunk(&mut reader, &mut buf, |chunk| h.update(chunk))?;
            h.finalize().into()
        }
    };
    Ok(Digest {
        algorithm: alg,
        bytes,
    })
}

/// Calls `f` with each chunk `reader` yields, in order, until its end.
fn each_chunk(
    reader: &mut impl Read,
    buf: &mut [u8],
    mut f: impl FnMut(&[u8]),
) -> std::io::Result<()> {
    loop {
        let n = reader.read(buf)?;
        let Some(chunk) = buf.get(..n).filter(|c| !c.is_empty()) else {
            return Ok(());
        };
        f(chunk);
    }
}

fn digest_of(alg: Algorithm, bytes: &[u8]) -> Digest {
    match alg {
        Algorithm::Blake3 => Digest::blake3(bytes),
        Algorithm::Sha256 => Digest::sha256(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names_must_be_normal_relative_paths() {
        for good in ["a", "a/b.txt", "src/x y", ".github/workflows/ci.yml"] {
            assert!(check_relative(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            "./a",
            "a/.",
            "a/",
            "a\0b",
        ] {
            assert!(
                matches!(check_relative(bad), Err(ResourceError::BadPath { .. })),
                "{bad:?}"
            );
        }
    }
}
