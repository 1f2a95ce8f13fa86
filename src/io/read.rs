//! Reading: the capped reader of every input (see the module doc of `io`).

use super::Source;
use crate::digest::Digest;
use sha2::Digest as _;
use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Buffer size for streaming hashes.
const HASH_BUFFER_BYTES: usize = 64 * 1024;

/// What kind of file a path names, for messages.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A named pipe.
    Fifo,
    /// A character device (a terminal, `/dev/null`, `/dev/zero`).
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A Unix socket.
    Socket,
    /// A symbolic link (only from `lstat`).
    Symlink,
    /// Anything else.
    Other,
}

impl FileKind {
    /// The kind of file `meta` describes.
    pub fn of(meta: &Metadata) -> FileKind {
        let t = meta.file_type();
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt as _;
            if t.is_fifo() {
                return FileKind::Fifo;
            }
            if t.is_char_device() {
                return FileKind::CharDevice;
            }
            if t.is_block_device() {
                return FileKind::BlockDevice;
            }
            if t.is_socket() {
                return FileKind::Socket;
            }
        }
        if t.is_symlink() {
            FileKind::Symlink
        } else if t.is_dir() {
            FileKind::Directory
        } else if t.is_file() {
            FileKind::Regular
        } else {
            FileKind::Other
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Regular => "a regular file",
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a named pipe (FIFO)",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Symlink => "a symbolic link",
            FileKind::Other => "not a regular file",
        })
    }
}

/// Why an input could not be read.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The path does not exist (the OS error says no more than that).
    #[error("{path}: no such file")]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The path exists but could not be opened (permissions, a loop...).
    #[error("cannot open {path}")]
    Open {
        /// The path given.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The path names something other than a regular file.
    #[error(
        "{path} is {kind}, not a regular file: rcpt reads inputs from regular files \
         (use '-' to read standard input)"
    )]
    NotRegular {
        /// The path given.
        path: PathBuf,
        /// What it is.
        kind: FileKind,
    },
    /// More than `limit` bytes.
    #[error("{source_name} is over the limit of {limit} bytes")]
    TooLarge {
        /// The path, or `-`.
        source_name: String,
        /// The limit.
        limit: usize,
    },
    /// Reading failed after the file was opened.
    #[error("cannot read {source_name}")]
    Read {
        /// The path, or `-`.
        source_name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Text was expected and the bytes are not UTF-8.
    #[error("{source_name} is not UTF-8 text")]
    NotUtf8 {
        /// The path, or `-`.
        source_name: String,
    },
}

impl InputError {
    /// True when the input could not be found or opened as a regular file:
    /// a user named the wrong thing (a bad invocation), as opposed to an
    /// input that was read and found wanting.
    pub fn is_bad_path(&self) -> bool {
        matches!(
            self,
            InputError::NotFound { .. } | InputError::Open { .. } | InputError::NotRegular { .. }
        )
    }
}

/// Open `path` for reading if it is a regular file; refuse anything else
/// without blocking (spec/security.md "Inputs and outputs").
///
/// The path is checked before opening (so a device is not even opened in
/// the common case), then opened with `O_NONBLOCK | O_NOCTTY` (opening a
/// FIFO then returns at once instead of waiting for a writer), then the
/// opened file is checked with `fstat`, which is the check that counts (the
/// path may have been swapped in between). For a regular file `O_NONBLOCK`
/// changes nothing.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), InputError> {
    let before = std::fs::metadata(path).map_err(|e| open_error(path, e))?;
    if !before.is_file() {
        return Err(not_regular(path, &before));
    }
    open_checked(path)
}

/// The second half of [`open_regular`]: open `path` with `O_NONBLOCK |
/// O_NOCTTY` and refuse what `fstat` says is not a regular file.
fn open_checked(path: &Path) -> Result<(File, Metadata), InputError> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOCTTY,
    );
    let file = options.open(path).map_err(|e| open_error(path, e))?;
    let meta = file.metadata().map_err(|e| open_error(path, e))?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta));
    }
    Ok((file, meta))
}

/// An error opening (or stat-ing) `path`: not found, or the system's error.
fn open_error(path: &Path, source: io::Error) -> InputError {
    match source.kind() {
        io::ErrorKind::NotFound => InputError::NotFound {
            path: path.to_path_buf(),
        },
        _ => InputError::Open {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// `path` is something other than a regular file.
fn not_regular(path: &Path, meta: &Metadata) -> InputError {
    InputError::NotRegular {
        path: path.to_path_buf(),
        kind: FileKind::of(meta),
    }
}

/// A path that named a regular file when its `stat` was taken (by a caller
/// that looks at many paths before reading any, as `rcpt verify` does to
/// refuse a bad argument before any output). [`read_regular_path`] opens it
/// without a second `stat` before the open; the `fstat` of the opened file
/// still refuses anything but a regular file, so a path swapped since is
/// refused as [`read_path`] refuses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegularPath(PathBuf);

impl RegularPath {
    /// `path`, when `meta` (its `stat`) says it is a regular file.
    pub fn new(path: PathBuf, meta: &Metadata) -> Option<RegularPath> {
        meta.is_file().then_some(RegularPath(path))
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// [`read_path`] of a path already found to be a regular file.
pub fn read_regular_path(path: &RegularPath, limit: usize) -> Result<Vec<u8>, InputError> {
    let (file, meta) = open_checked(path.path())?;
    read_file_to_limit(file, meta.len(), limit, || {
        path.path().display().to_string()
    })
}

/// Read an opened regular file whose `fstat` gave `size`, at most `limit`
/// bytes. A file is read up to the size it had when opened: when that much
/// has been read there is no further read to find the end (one `read` per
/// file, not two). A size of 0 (as `/proc` files report) or over the limit
/// reads to the end, capped as [`read_to_limit`] caps.
fn read_file_to_limit(
    file: File,
    size: u64,
    limit: usize,
    name: impl Fn() -> String,
) -> Result<Vec<u8>, InputError> {
    match usize::try_from(size) {
        Ok(expected) if expected > 0 && expected <= limit => {
            // `take` returns end of file at `expected` without a system call.
            read_to_limit(file.take(size), limit, expected, name)
        }
        _ => read_to_limit(file, limit, 0, name),
    }
}

/// Read all of `reader`, at most `limit` bytes: `limit + 1` are read at most,
/// and one byte over is [`InputError::TooLarge`].
fn read_to_limit(
    reader: impl Read,
    limit: usize,
    capacity: usize,
    name: impl Fn() -> String,
) -> Result<Vec<u8>, InputError> {
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let mut bytes = Vec::with_capacity(capacity.min(limit).saturating_add(1));
    reader
        .take(cap)
        .read_to_end(&mut bytes)
        .map_err(|source| InputError::Read {
            source_name: name(),
            source,
        })?;
    if bytes.len() > limit {
        return Err(InputError::TooLarge {
            source_name: name(),
            limit,
        });
    }
    Ok(bytes)
}

/// Read the regular file at `path`, at most `limit` bytes.
pub fn read_path(path: &Path, limit: usize) -> Result<Vec<u8>, InputError> {
    let (file, meta) = open_regular(path)?;
    read_file_to_limit(file, meta.len(), limit, || path.display().to_string())
}

/// Open the regular file `name` of the directory `dir` (a handle reached
/// without following links, [`super::Dir`]): `O_NOFOLLOW | O_NONBLOCK |
/// O_NOCTTY` relative to the handle, then `fstat`, so a link, a FIFO, a
/// device or a directory at the name is refused at once.
pub fn open_regular_at(dir: &super::Dir, name: &str) -> Result<(File, Metadata), InputError> {
    let path = dir.join(name);
    if !super::is_plain_name(std::ffi::OsStr::new(name)) {
        return Err(InputError::Open {
            path,
            source: io::Error::new(io::ErrorKind::InvalidInput, "not a plain file name"),
        });
    }
    let flags = rustix::fs::OFlags::RDONLY
        | rustix::fs::OFlags::NOFOLLOW
        | rustix::fs::OFlags::NONBLOCK
        | rustix::fs::OFlags::NOCTTY
        | rustix::fs::OFlags::CLOEXEC;
    let opened = rustix::fs::openat(dir.fd(), name, flags, rustix::fs::Mode::empty());
    let file = match opened {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::LOOP) => {
            return Err(InputError::NotRegular {
                path,
                kind: FileKind::Symlink,
            });
        }
        Err(e) => return Err(open_error(&path, e.into())),
    };
    let meta = file.metadata().map_err(|e| open_error(&path, e))?;
    if !meta.is_file() {
        return Err(not_regular(&path, &meta));
    }
    Ok((file, meta))
}

/// [`read_path`] of the file `name` in `dir`, opened by [`open_regular_at`].
pub fn read_at(dir: &super::Dir, name: &str, limit: usize) -> Result<Vec<u8>, InputError> {
    let (file, meta) = open_regular_at(dir, name)?;
    read_file_to_limit(file, meta.len(), limit, || {
        dir.join(name).display().to_string()
    })
}

/// Read `source`, at most `limit` bytes; `stdin` is read for
/// [`Source::Stdin`] (the caller passes it: the library never picks it).
pub fn read_capped(source: &Source, limit: usize, stdin: impl Read) -> Result<Vec<u8>, InputError> {
    match source {
        Source::Stdin => read_to_limit(stdin, limit, 0, || "-".to_string()),
        Source::Path(path) => read_path(path, limit),
    }
}

/// [`read_path`], as UTF-8 text.
pub fn read_path_text(path: &Path, limit: usize) -> Result<String, InputError> {
    String::from_utf8(read_path(path, limit)?).map_err(|_| InputError::NotUtf8 {
        source_name: path.display().to_string(),
    })
}

/// A state file the program keeps (a monitor's, a witness's): the bytes
/// at `path` (at most `limit`), or `None` when there is none. A file over
/// the limit was not written by the program: `corrupt(why)`; any other
/// failure is `read(why)`.
pub fn read_state_file<E>(
    path: &Path,
    limit: usize,
    corrupt: impl FnOnce(String) -> E,
    read: impl FnOnce(InputError) -> E,
) -> Result<Option<Vec<u8>>, E> {
    match read_path(path, limit) {
        Ok(b) => Ok(Some(b)),
        Err(InputError::NotFound { .. }) => Ok(None),
        Err(e @ InputError::TooLarge { .. }) => Err(corrupt(e.to_string())),
        Err(e) => Err(read(e)),
    }
}

/// SHA-256 of the regular file at `path`, read as a stream of at most
/// `limit` bytes (memory stays at one buffer whatever the size).
pub fn sha256_capped(path: &Path, limit: u64) -> Result<Digest, InputError> {
    let (file, _) = open_regular(path)?;
    let name = || path.display().to_string();
    let mut reader = file.take(limit.saturating_add(1));
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; HASH_BUFFER_BYTES];
    let mut total: u64 = 0;
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(InputError::Read {
                    source_name: name(),
                    source,
                });
            }
        };
        total = total.saturating_add(n as u64);
        hasher.update(buffer.get(..n).unwrap_or_default());
    }
    if total > limit {
        return Err(InputError::TooLarge {
            source_name: name(),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        });
    }
    Ok(Digest {
        algorithm: crate::digest::Algorithm::Sha256,
        bytes: hasher.finalize().into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(path: &Path) -> RegularPath {
        RegularPath::new(path.to_path_buf(), &std::fs::metadata(path).unwrap()).unwrap()
    }

    #[test]
    fn a_checked_path_reads_like_read_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json");
        std::fs::write(&path, b"0123456789").unwrap();
        let p = checked(&path);
        assert_eq!(read_regular_path(&p, 10).unwrap(), b"0123456789");
        assert_eq!(read_path(&path, 10).unwrap(), b"0123456789");
        // One byte over the limit: refused by both, and by its size alone.
        assert!(matches!(
            read_regular_path(&p, 9),
            Err(InputError::TooLarge { limit: 9, .. })
        ));
        assert!(matches!(
            read_path(&path, 9),
            Err(InputError::TooLarge { limit: 9, .. })
        ));
        // An empty file reads as empty.
        std::fs::write(&path, b"").unwrap();
        assert_eq!(read_regular_path(&p, 10).unwrap(), b"");
    }

    #[test]
    fn a_directory_is_not_a_regular_path() {
        let dir = tempfile::tempdir().unwrap();
        let meta = std::fs::metadata(dir.path()).unwrap();
        assert_eq!(RegularPath::new(dir.path().to_path_buf(), &meta), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_checked_path_swapped_for_a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json");
        std::fs::write(&path, b"{}").unwrap();
        let p = checked(&path);
        std::fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer: an open without O_NONBLOCK would wait forever.
        assert!(matches!(
            read_regular_path(&p, 10),
            Err(InputError::NotRegular {
                kind: FileKind::Fifo,
                ..
            })
        ));
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(
            read_regular_path(&p, 10),
            Err(InputError::NotFound { .. })
        ));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_whose_stat_says_zero_bytes_is_read_to_its_end() {
        // /proc files are regular with a size of 0 and content.
        let path = Path::new("/proc/self/status");
        let bytes = read_regular_path(&checked(path), 1 << 20).unwrap();
        assert!(bytes.starts_with(b"Name:"), "{bytes:?}");
    }
}
