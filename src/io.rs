//! io: the one capped reader and the one atomic writer for the files a user
//! names (spec/security.md "Inputs and outputs").
//!
//! Reading. Every input `rcpt` is given (bundle, envelope, payload, trust
//! file, key, checkpoint, consistency proof, manifest, a corpus file) is read
//! by [`read_capped`]: at most `limit + 1` bytes are ever read, so a file
//! over the limit is told apart without reading it whole, and nothing is
//! sized first and read uncapped after. A path must name a regular file: it
//! is opened non-blocking and checked with `fstat` on the opened file, so a
//! FIFO, a device or a directory is refused at once, never waited on or read
//! forever. Standard input, named `-` ([`Source::Stdin`]), is the one
//! exception, and it is capped the same way. Large files are hashed as a
//! stream ([`sha256_capped`]); JSON Lines are read by [`LineReader`], one
//! capped line at a time.
//!
//! Writing. Every output file (`-o`) goes through [`write_output`]: `-`
//! ([`Target::Stdout`]) is the caller's standard output; a path that does
//! not exist or is a regular file is written to a temporary file created
//! exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`) in the same directory, synced,
//! renamed over the path, and the directory synced; the temporary file is
//! removed on failure. A path that exists and is not a regular file is never
//! replaced: a FIFO or a character device (a terminal, `/dev/null`) is
//! written through; anything else (a directory, a block device, a socket, a
//! symbolic link to a regular file) is refused with a message that says so.
//!
//! The library never chooses standard input or output itself: the caller
//! passes them in.

use crate::digest::Digest;
use sha2::Digest as _;
use std::ffi::OsString;
use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};

/// Buffer size for streaming hashes.
const HASH_BUFFER_BYTES: usize = 64 * 1024;
/// Attempts at a fresh temporary name before giving up.
const TEMP_NAME_ATTEMPTS: usize = 16;
/// Mode of files written by [`write_output`] (before the umask).
pub const OUTPUT_FILE_MODE: u32 = 0o644;

/// An error and its sources, joined by ": " (for details in reports, where
/// no error chain is printed).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(e) = next {
        text.push_str(": ");
        text.push_str(&e.to_string());
        next = e.source();
    }
    text
}

/// Where an input comes from: a path, or standard input (`-`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Standard input, spelled `-` on the command line.
    Stdin,
    /// A file path (a file literally named `-` is spelled `./-`).
    Path(PathBuf),
}

impl From<OsString> for Source {
    fn from(arg: OsString) -> Source {
        if arg == "-" {
            Source::Stdin
        } else {
            Source::Path(PathBuf::from(arg))
        }
    }
}

impl From<&Path> for Source {
    fn from(path: &Path) -> Source {
        Source::from(path.as_os_str().to_owned())
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Stdin => f.write_str("-"),
            Source::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Where an output goes: a path, or standard output (`-`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Standard output, spelled `-` on the command line.
    Stdout,
    /// A file path (a file literally named `-` is spelled `./-`).
    Path(PathBuf),
}

impl From<OsString> for Target {
    fn from(arg: OsString) -> Target {
        if arg == "-" {
            Target::Stdout
        } else {
            Target::Path(PathBuf::from(arg))
        }
    }
}

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

/// One line of a [`LineReader`].
#[derive(Debug)]
pub struct Line {
    /// 1-based line number.
    pub number: u64,
    /// The line without its newline, or why it was refused.
    pub bytes: Result<Vec<u8>, InputError>,
}

/// Reads JSON Lines (or any lines) with each line capped: a line over the
/// limit is reported as [`InputError::TooLarge`] and its rest skipped in
/// bounded reads, never held. Blank lines are skipped.
pub struct LineReader<R> {
    reader: R,
    name: String,
    limit: usize,
    number: u64,
    done: bool,
}

impl<R: BufRead> LineReader<R> {
    /// Lines of `reader` (named `name` in errors), each at most `limit` bytes.
    pub fn new(reader: R, name: &str, limit: usize) -> Self {
        LineReader {
            reader,
            name: name.to_string(),
            limit,
            number: 0,
            done: false,
        }
    }

    /// The reader, positioned after the last line returned.
    pub fn into_inner(self) -> R {
        self.reader
    }

    /// Read one raw line (at most `limit + 1` bytes); `None` at the end.
    fn raw_line(&mut self) -> Option<Line> {
        self.number += 1;
        let number = self.number;
        let cap = u64::try_from(self.limit)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let mut line = Vec::new();
        let read = (&mut self.reader).take(cap).read_until(b'\n', &mut line);
        let name = format!("{}:{number}", self.name);
        match read {
            Err(source) => {
                self.done = true;
                let error = InputError::Read {
                    source_name: name,
                    source,
                };
                return Some(Line {
                    number,
                    bytes: Err(error),
                });
            }
            Ok(0) => return None,
            Ok(_) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > self.limit {
            self.skip_rest(cap);
            let error = InputError::TooLarge {
                source_name: name,
                limit: self.limit,
            };
            return Some(Line {
                number,
                bytes: Err(error),
            });
        }
        Some(Line {
            number,
            bytes: Ok(line),
        })
    }

    /// Skip the rest of an over-long line, in bounded reads.
    fn skip_rest(&mut self, cap: u64) {
        let mut sink = Vec::new();
        loop {
            sink.clear();
            match (&mut self.reader).take(cap).read_until(b'\n', &mut sink) {
                Ok(0) | Err(_) => return,
                Ok(_) if sink.last() == Some(&b'\n') => return,
                Ok(_) => {}
            }
        }
    }
}

impl<R: BufRead> Iterator for LineReader<R> {
    type Item = Line;
    fn next(&mut self) -> Option<Line> {
        while !self.done {
            let line = self.raw_line()?;
            match &line.bytes {
                Ok(b) if b.iter().all(u8::is_ascii_whitespace) => continue,
                _ => return Some(line),
            }
        }
        None
    }
}

/// Why an output could not be written.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The path exists and is not a file `rcpt` may replace or write through.
    #[error(
        "{path} is {kind}: rcpt does not replace it; name a regular file, \
         a path that does not exist yet, or '-' for standard output"
    )]
    Refused {
        /// The path given.
        path: PathBuf,
        /// What it is.
        kind: FileKind,
    },
    /// A symbolic link: never replaced, and written through only to a FIFO
    /// or a character device.
    #[error(
        "{path} is a symbolic link to {kind}: rcpt neither replaces a link nor writes \
         through it into a file; name the file it points to, or '-' for standard output"
    )]
    Symlink {
        /// The path given.
        path: PathBuf,
        /// What it points to.
        kind: FileKind,
    },
    /// The path has no file name (`/`, `..`).
    #[error("{path} names no file")]
    NoFileName {
        /// The path given.
        path: PathBuf,
    },
    /// An I/O step failed.
    #[error("cannot {step} {path}")]
    Io {
        /// What was being done: `create a temporary file in`, `write`, ...
        step: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl OutputError {
    /// True when the error is an `EPIPE` on standard output or a FIFO.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, OutputError::Io { source, .. } if source.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// An I/O error at `step` on `path`.
fn io_error(step: &'static str, path: &Path) -> impl FnOnce(io::Error) -> OutputError {
    let path = path.to_path_buf();
    move |source| OutputError::Io { step, path, source }
}

/// Write `bytes` to `target`: standard output (the caller's `stdout`) for
/// [`Target::Stdout`], else [`write_file`].
pub fn write_output(
    target: &Target,
    bytes: &[u8],
    mut stdout: impl Write,
) -> Result<(), OutputError> {
    match target {
        Target::Stdout => {
            let path = Path::new("-");
            stdout.write_all(bytes).map_err(io_error("write", path))?;
            stdout.flush().map_err(io_error("write", path))
        }
        Target::Path(path) => write_file(path, bytes, OUTPUT_FILE_MODE),
    }
}

/// Write `bytes` to the file `path` by the rule of this module: replace a
/// regular file (or create a new one) atomically; write through a FIFO or a
/// character device; refuse anything else.
pub fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), OutputError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => write_atomic(path, bytes, mode),
        Err(e) => Err(io_error("examine", path)(e)),
        Ok(meta) => match FileKind::of(&meta) {
            FileKind::Regular => write_atomic(path, bytes, mode),
            FileKind::Fifo | FileKind::CharDevice => write_through(path, bytes),
            FileKind::Symlink => match std::fs::metadata(path).map(|m| FileKind::of(&m)) {
                Ok(FileKind::Fifo | FileKind::CharDevice) => write_through(path, bytes),
                Ok(kind) => Err(OutputError::Symlink {
                    path: path.to_path_buf(),
                    kind,
                }),
                Err(_) => Err(OutputError::Symlink {
                    path: path.to_path_buf(),
                    kind: FileKind::Other,
                }),
            },
            kind => Err(OutputError::Refused {
                path: path.to_path_buf(),
                kind,
            }),
        },
    }
}

/// Write into an existing FIFO or character device: no create, no truncate.
fn write_through(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let mut options = OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOCTTY);
    let mut file = options.open(path).map_err(io_error("open", path))?;
    // Opened by path: check that it is still what was examined.
    let kind = file
        .metadata()
        .map(|m| FileKind::of(&m))
        .map_err(io_error("examine", path))?;
    if !matches!(kind, FileKind::Fifo | FileKind::CharDevice) {
        return Err(OutputError::Refused {
            path: path.to_path_buf(),
            kind,
        });
    }
    file.write_all(bytes).map_err(io_error("write", path))?;
    file.flush().map_err(io_error("write", path))
}

/// The directory a path's file lives in (`.` for a bare name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A fresh random suffix for a temporary name.
fn random_suffix() -> String {
    let mut raw = [0u8; 8];
    // Without OS randomness the pid and a counter still make collisions
    // unlikely, and O_EXCL makes them harmless (another name is tried).
    if getrandom::fill(&mut raw).is_err() {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        raw = (u64::from(std::process::id()) << 32 ^ n).to_be_bytes();
    }
    crate::digest::to_hex(&raw)
}

/// Create a new file exclusively: `O_CREAT | O_EXCL | O_NOFOLLOW`, `mode`.
pub fn create_exclusive(path: &Path, mode: u32) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    #[cfg(not(unix))]
    let _ = mode;
    options.open(path)
}

/// A new temporary file in `dir` under an unpredictable name
/// (`tmp-<random>`), created exclusively (`O_CREAT | O_EXCL |
/// O_NOFOLLOW`, `mode`): nothing planted at a name in `dir` is ever opened
/// or followed. The caller writes, syncs and renames it (the batch writer
/// of `storage::posix`, which syncs each directory once per batch).
pub fn create_temp_in(dir: &Path, mode: u32) -> io::Result<(File, PathBuf)> {
    for _ in 0..TEMP_NAME_ATTEMPTS {
        let tmp = dir.join(format!("tmp-{}", random_suffix()));
        match create_exclusive(&tmp, mode) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            other => return other.map(|f| (f, tmp)),
        }
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
}

/// A new private directory `PREFIX-<random>` in `parent` (mode 0700),
/// made by `mkdir`, which never follows or reuses anything planted at the
/// name: a predictable scratch directory in a shared `/tmp` could be a
/// link to somewhere else. The caller removes it when done.
pub fn create_temp_dir(parent: &Path, prefix: &str) -> io::Result<PathBuf> {
    for _ in 0..TEMP_NAME_ATTEMPTS {
        let dir = parent.join(format!("{prefix}-{}", random_suffix()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            other => return other.map(|()| dir),
        }
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
}

/// Create the parent directories of the relative path `rel` (components
/// separated by `/`) under `top`, one component at a time, never through a
/// symbolic link: a component that exists and is not a directory (a file,
/// a link, even one to a directory) is refused with
/// [`io::ErrorKind::NotADirectory`].
pub fn create_parents(top: &Path, rel: &str) -> io::Result<()> {
    let mut dir = top.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{} is not a directory", dir.display()),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir(&dir)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Set a file's permission bits (`mode & 0o7777`); nothing where there are none.
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

/// Open (creating it if absent) a lock file, never through a symbolic link
/// (`O_NOFOLLOW`) and never truncated: only its lock is used, no byte of it
/// is read or written.
pub fn open_lock(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options
            .mode(OUTPUT_FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

/// Sync a directory so a rename or a new name in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC,
    );
    options.open(dir)?.sync_all()
}

/// Replace (or create) `path` atomically: a temporary file created
/// exclusively in the same directory, written, synced, renamed over `path`,
/// and the directory synced. On failure the temporary file is removed and
/// `path` is left as it was.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), OutputError> {
    write_atomic_via(parent_dir(path), path, bytes, mode)
}

/// [`write_atomic`] with the temporary file made in `tmp_dir` instead of
/// beside `path` (it must be on the same file system, so the rename stays
/// atomic): a log keeps its temporary files in one private directory that
/// it empties when opened, so a crash leaves none among its public files.
/// The directory synced afterwards is `path`'s, which gained the name.
pub fn write_atomic_via(
    tmp_dir: &Path,
    path: &Path,
    bytes: &[u8],
    mode: u32,
) -> Result<(), OutputError> {
    let name = path.file_name().ok_or_else(|| OutputError::NoFileName {
        path: path.to_path_buf(),
    })?;
    let dir = tmp_dir;
    let (tmp, mut file) = (0..TEMP_NAME_ATTEMPTS)
        .find_map(|_| {
            let mut tmp_name = OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(".{}.rcpt-tmp", random_suffix()));
            let tmp = dir.join(tmp_name);
            match create_exclusive(&tmp, mode) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => None,
                other => Some(other.map(|f| (tmp, f))),
            }
        })
        .unwrap_or_else(|| Err(io::Error::from(io::ErrorKind::AlreadyExists)))
        .map_err(io_error("create a temporary file in", dir))?;
    let result = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io_error("write", &tmp))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(io_error("rename over", path)));
    drop(file);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    let dest_dir = parent_dir(path);
    sync_dir(dest_dir).map_err(io_error("sync the directory", dest_dir))
}

/// Create `path` with `mode`, refusing to replace anything (a key file):
/// `O_CREAT | O_EXCL | O_NOFOLLOW`, written, synced, directory synced. On a
/// failed write the new file is removed.
pub fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), OutputError> {
    let mut file = create_exclusive(path, mode).map_err(io_error("create", path))?;
    let result = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(io_error("write", path));
    drop(file);
    if result.is_err() {
        let _ = std::fs::remove_file(path);
        return result;
    }
    sync_dir(parent_dir(path)).map_err(io_error("sync the directory", parent_dir(path)))
}

/// Write a file of a scratch tree that is deleted after use (the gate's
/// clean worktree): whatever is at `path` is removed first (a symbolic
/// link is removed, never followed), then the file is created exclusively
/// (`O_CREAT | O_EXCL | O_NOFOLLOW`) and written, without the syncs
/// [`write_atomic`] makes: nothing here has to survive a crash.
pub fn write_scratch(path: &Path, bytes: &[u8], mode: u32) -> Result<(), OutputError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error("remove", path)(e)),
    }
    let mut file = create_exclusive(path, mode).map_err(io_error("create", path))?;
    file.write_all(bytes).map_err(io_error("write", path))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[cfg(unix)]
    #[test]
    fn parents_are_made_but_never_through_a_link_or_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        std::fs::create_dir(&top).unwrap();
        create_parents(&top, "a/b/c.txt").unwrap();
        assert!(top.join("a/b").is_dir());
        assert!(!top.join("a/b/c.txt").exists());
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, top.join("l")).unwrap();
        let e = create_parents(&top, "l/x/y").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotADirectory, "{e}");
        assert!(!outside.join("x").exists());
        std::fs::write(top.join("f"), b"").unwrap();
        let e = create_parents(&top, "f/y").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotADirectory, "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_scratch_write_replaces_a_link_without_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let link = dir.path().join("f");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        write_scratch(&link, b"new", 0o644).unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        assert_eq!(std::fs::read(&link).unwrap(), b"new");
        assert!(
            !std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

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
