//! Writing: the one atomic no-follow writer (see the module doc of `io`).

use super::{FileKind, Target};
use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Attempts at a fresh temporary name before giving up.
const TEMP_NAME_ATTEMPTS: usize = 16;
/// Mode of files written by [`write_output`] (before the umask).
pub const OUTPUT_FILE_MODE: u32 = 0o644;

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
pub(super) fn io_error(step: &'static str, path: &Path) -> impl FnOnce(io::Error) -> OutputError {
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
pub(super) fn parent_dir(path: &Path) -> &Path {
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
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, OUTPUT_FILE_MODE);
    open_regular_no_follow(options, path)
}

/// `options` opened without following a link (`O_NOFOLLOW | O_CLOEXEC |
/// O_NONBLOCK`), refused unless a regular file is what was opened.
fn open_regular_no_follow(mut options: OpenOptions, path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
    );
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

/// Open an existing regular file to append to it, never through a
/// symbolic link (`O_WRONLY | O_APPEND | O_NOFOLLOW`), never created or
/// truncated: the caller's bytes go after what is there
/// ([`super::Batch::append`]).
pub fn open_append(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.append(true);
    open_regular_no_follow(options, path)
}

/// Sync a directory so a rename or a new name in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    open_dir(dir)?.sync_all()
}

/// A directory opened read-only (`O_DIRECTORY`: a file there is refused)
/// for its handle: to sync it, or its file system
/// ([`super::Batch::sync_whole_filesystem`]).
pub fn open_dir(dir: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_CLOEXEC,
    );
    options.open(dir)
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
    let mut batch = super::Batch::new();
    batch.write_atomic_via(tmp_dir, path, bytes, mode)?;
    batch.commit()
}

/// A new temporary file for `name` in `dir`, `.NAME.<random>.rcpt-tmp`,
/// created exclusively ([`create_exclusive`]).
pub(super) fn temp_file(
    dir: &Path,
    name: &OsStr,
    mode: u32,
) -> Result<(PathBuf, File), OutputError> {
    for _ in 0..TEMP_NAME_ATTEMPTS {
        let mut tmp_name = OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.rcpt-tmp", random_suffix()));
        let tmp = dir.join(tmp_name);
        match create_exclusive(&tmp, mode) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_error("create a temporary file in", dir)(e)),
            Ok(f) => return Ok((tmp, f)),
        }
    }
    let exhausted = io::Error::from(io::ErrorKind::AlreadyExists);
    Err(io_error("create a temporary file in", dir)(exhausted))
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

/// New output files written into one directory as a batch (`rcpt log prove
/// --out-dir`): each created exclusively relative to the directory's handle
/// (`O_CREAT | O_EXCL | O_NOFOLLOW`: nothing planted at a name is opened or
/// followed, no file is replaced) and written, none synced on its own.
/// [`NewFiles::finish`] makes them all durable at once: the file system
/// synced once (`syncfs(2)`), then the directory. Until `finish` returns, a
/// crash may leave any of them missing, empty or short; the command says it
/// is done only after `finish` (spec/security.md "Outputs written as a
/// batch"). Shared by reference across threads.
#[derive(Debug)]
pub struct NewFiles {
    dir: super::Dir,
    mode: u32,
}

impl NewFiles {
    /// Write new files of `mode` (before the umask) into `dir`.
    pub fn new(dir: super::Dir, mode: u32) -> NewFiles {
        NewFiles { dir, mode }
    }

    /// The directory.
    pub fn dir(&self) -> &super::Dir {
        &self.dir
    }

    /// Create the new file `name` (one plain name) and write `bytes`; on a
    /// failed write the file is removed.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<(), OutputError> {
        use rustix::fs::{Mode, OFlags};
        let path = self.dir.join(name);
        if !super::is_plain_name(std::ffi::OsStr::new(name)) {
            return Err(OutputError::NoFileName { path });
        }
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(self.dir.fd(), name, flags, Mode::from_raw_mode(self.mode))
            .map_err(|e| io_error("create", &path)(e.into()))?;
        let mut file = File::from(fd);
        if let Err(e) = file.write_all(bytes) {
            drop(file);
            let _ = self.dir.remove_file(name);
            return Err(io_error("write", &path)(e));
        }
        Ok(())
    }

    /// Make every file written durable: the file system synced once, then
    /// the directory.
    pub fn finish(self) -> Result<(), OutputError> {
        let step = |e: super::DirError| OutputError::Io {
            step: "sync the outputs in",
            path: self.dir.path().to_path_buf(),
            source: e.into_io(),
        };
        self.dir.sync_filesystem().map_err(step)?;
        self.dir.sync().map_err(step)
    }
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
    use super::*;

    #[cfg(unix)]
    #[test]
    fn new_files_never_follow_or_replace_what_is_at_a_name() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::os::unix::fs::symlink(&outside, out.join("1.bundle.json")).unwrap();
        std::fs::write(out.join("2.bundle.json"), b"old").unwrap();
        let files = NewFiles::new(super::super::Dir::open(&out).unwrap(), OUTPUT_FILE_MODE);
        assert!(files.write("1.bundle.json", b"new").is_err());
        assert!(files.write("2.bundle.json", b"new").is_err());
        for bad in ["../x", "", "..", "a/b"] {
            assert!(
                matches!(
                    files.write(bad, b"new"),
                    Err(OutputError::NoFileName { .. })
                ),
                "{bad:?}"
            );
        }
        files.write("3.bundle.json", b"three").unwrap();
        files.finish().unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        assert_eq!(std::fs::read(out.join("2.bundle.json")).unwrap(), b"old");
        assert_eq!(std::fs::read(out.join("3.bundle.json")).unwrap(), b"three");
        assert!(!dir.path().join("x").exists());
        assert!(!out.join("a").exists());
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
}
