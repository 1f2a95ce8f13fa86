//! dir: directories opened without following links (spec/security.md "The
//! one writer's rule for directories").
//!
//! A [`Dir`] is an open directory (`O_DIRECTORY`) and the path it was
//! reached by, kept for messages. The directory a caller names is opened
//! with its last component `O_NOFOLLOW` ([`Dir::open`], [`Dir::create`]):
//! the path leading to it is the user's, as the directory of an output file
//! is, and a link at the name itself is refused. Every directory beneath is
//! reached one component at a time from its parent's handle with
//! `O_NOFOLLOW | O_DIRECTORY` ([`Dir::child`], [`Dir::descend`]), and made
//! with `mkdirat` where asked. A link or anything else where a directory is
//! expected is refused ([`DirError::Link`], [`DirError::NotADirectory`]),
//! naming the path; nothing is read, written or removed through it.
//!
//! Cleanup works on the handle: an entry is removed with `unlinkat`, a link
//! is removed itself and never followed, and [`Dir::remove_tree`] goes down
//! only through directories it opened `O_NOFOLLOW` and comes back up by
//! `..`, checked against the device and inode it came from, so a directory
//! swapped for a link during the walk stops the removal instead of
//! redirecting it.

use super::FileKind;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

mod tree;

/// Deepest directory tree [`Dir::remove_tree`] removes (git's own default
/// `core.maxTreeDepth`); a deeper one is refused, never walked without end.
pub const MAX_TREE_DEPTH: usize = 4096;

/// Mode of a private directory (the gate's clean copies, scratch space).
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// Attempts at a fresh random name for [`Dir::create_unique`].
const UNIQUE_NAME_ATTEMPTS: usize = 16;

/// Why a directory could not be opened, made, listed or cleaned.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// A symbolic link where rcpt expects one of its directories.
    #[error(
        "{path} is a symbolic link: rcpt never follows a link in place of a directory \
         it opens, writes in or cleans; nothing was read, written or removed through \
         it (remove the link, or name the directory it points to)"
    )]
    Link {
        /// The link.
        path: PathBuf,
    },
    /// Something other than a directory.
    #[error("{path} is {kind}, not a directory")]
    NotADirectory {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: FileKind,
    },
    /// A name that is not one plain path component.
    #[error("{name:?} is not a plain name inside {dir}")]
    BadName {
        /// The directory.
        dir: PathBuf,
        /// The name.
        name: OsString,
    },
    /// A private directory that another user owns.
    #[error(
        "{path} belongs to uid {owner}, not to this user (uid {me}): it is not a \
         private directory of this user, and rcpt does not use it"
    )]
    NotOwned {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The effective uid of this process.
        me: u32,
    },
    /// A tree deeper than [`MAX_TREE_DEPTH`].
    #[error("{path}: more than {MAX_TREE_DEPTH} nested directories; not removed")]
    TooDeep {
        /// The directory where the limit was reached.
        path: PathBuf,
    },
    /// A directory moved while it was being removed.
    #[error("{path} moved while it was being removed; the removal stopped")]
    Moved {
        /// The directory.
        path: PathBuf,
    },
    /// The system refused an operation.
    #[error("cannot {step} {path}")]
    Io {
        /// What was being done.
        step: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl DirError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            DirError::Link { path }
            | DirError::NotADirectory { path, .. }
            | DirError::NotOwned { path, .. }
            | DirError::TooDeep { path }
            | DirError::Moved { path }
            | DirError::Io { path, .. } => path,
            DirError::BadName { dir, .. } => dir,
        }
    }

    /// True when the directory (or an entry) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, DirError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// The error as an [`io::Error`] of the same kind (a full disk stays
    /// `StorageFull`), its message naming the path.
    pub fn into_io(self) -> io::Error {
        let kind = match &self {
            DirError::Io { source, .. } => source.kind(),
            DirError::NotADirectory { .. } => io::ErrorKind::NotADirectory,
            DirError::BadName { .. } => io::ErrorKind::InvalidInput,
            DirError::NotOwned { .. } => io::ErrorKind::PermissionDenied,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }
}

/// The [`DirError::Io`] of `step` on `path`.
fn io_err<'p>(
    step: &'static str,
    path: &'p Path,
) -> impl FnOnce(rustix::io::Errno) -> DirError + 'p {
    move |e| DirError::Io {
        step,
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// What a `stat` mode says a file is.
fn kind_of(stat: &Stat) -> FileKind {
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => FileKind::Regular,
        FileType::Directory => FileKind::Directory,
        FileType::Symlink => FileKind::Symlink,
        FileType::Fifo => FileKind::Fifo,
        FileType::CharacterDevice => FileKind::CharDevice,
        FileType::BlockDevice => FileKind::BlockDevice,
        FileType::Socket => FileKind::Socket,
        FileType::Unknown => FileKind::Other,
    }
}

/// Flags of every directory open: read-only, a directory, not a link.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// An open directory, reached without following a link.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    /// Open the existing directory `path`; a link at its last component is
    /// refused ([`DirError::Link`]), the path leading to it is followed.
    pub fn open(path: &Path) -> Result<Dir, DirError> {
        match split(path) {
            Some((parent, name)) => Dir::plain(parent)?.child(name),
            None => Dir::plain(path),
        }
    }

    /// [`Dir::open`], creating the directory (mode `mode`, before the
    /// umask) when it does not exist; missing directories above it are
    /// made as `mkdir -p` makes them.
    pub fn create(path: &Path, mode: u32) -> Result<Dir, DirError> {
        match split(path) {
            Some((parent, name)) => {
                if !parent.as_os_str().is_empty() {
                    std::fs::create_dir_all(parent).map_err(|source| DirError::Io {
                        step: "create the directory",
                        path: parent.to_path_buf(),
                        source,
                    })?;
                }
                Dir::plain(parent)?.child_or_create(name, mode)
            }
            None => Dir::plain(path),
        }
    }

    /// Open the directory `path` names as an input, to read only: links in
    /// it are followed, the last one too, as an input file's are (a
    /// directory rcpt writes in or cleans is opened by [`Dir::open`]).
    pub fn open_input(path: &Path) -> Result<Dir, DirError> {
        Dir::plain(path)
    }

    /// Open `path` as a directory, following links (the caller's own path).
    fn plain(path: &Path) -> Result<Dir, DirError> {
        let at = if path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            path
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(rustix::fs::CWD, at, flags, Mode::empty())
            .map_err(io_err("open the directory", path))?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The path this directory was reached by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this directory (for messages and for the
    /// writers that take a path).
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    /// The handle, for opening a file relative to it.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `name` checked to be one plain component.
    fn name<'n>(&self, name: &'n OsStr) -> Result<&'n OsStr, DirError> {
        if is_plain_name(name) {
            Ok(name)
        } else {
            Err(DirError::BadName {
                dir: self.path.clone(),
                name: name.to_os_string(),
            })
        }
    }

    /// What `name` is, without following a link; `None` when absent.
    pub fn kind(&self, name: impl AsRef<OsStr>) -> Result<Option<FileKind>, DirError> {
        Ok(self.stat(name.as_ref())?.map(|s| kind_of(&s)))
    }

    fn stat(&self, name: &OsStr) -> Result<Option<Stat>, DirError> {
        let name = self.name(name)?;
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => Ok(Some(s)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(io_err("examine", &self.join(name))(e)),
        }
    }

    /// The subdirectory `name`, opened `O_NOFOLLOW | O_DIRECTORY`.
    pub fn child(&self, name: impl AsRef<OsStr>) -> Result<Dir, DirError> {
        let name = self.name(name.as_ref())?;
        let path = self.join(name);
        match rustix::fs::openat(&self.fd, name, dir_flags(), Mode::empty()) {
            Ok(fd) => Ok(Dir { fd, path }),
            Err(e @ (rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR)) => {
                Err(match self.stat(name)? {
                    Some(s) if kind_of(&s) == FileKind::Symlink => DirError::Link { path },
                    Some(s) => DirError::NotADirectory {
                        path,
                        kind: kind_of(&s),
                    },
                    None => io_err("open the directory", &path)(e),
                })
            }
            Err(e) => Err(io_err("open the directory", &path)(e)),
        }
    }

    /// [`Dir::child`], `None` when nothing is at `name`.
    pub fn try_child(&self, name: impl AsRef<OsStr>) -> Result<Option<Dir>, DirError> {
        match self.child(name) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`Dir::child`], made first (`mkdirat`, `mode` before the umask)
    /// when nothing is at `name`.
    pub fn child_or_create(&self, name: impl AsRef<OsStr>, mode: u32) -> Result<Dir, DirError> {
        let name = self.name(name.as_ref())?;
        match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => self.child(name),
            Err(e) => Err(io_err("create the directory", &self.join(name))(e)),
        }
    }

    /// The directory at the relative path `rel` beneath this one, each
    /// component opened `O_NOFOLLOW`; made (mode `create`) where absent
    /// when `create` is given. `rel` is plain components only.
    pub fn descend(&self, rel: impl AsRef<Path>, create: Option<u32>) -> Result<Dir, DirError> {
        let mut parts = Vec::new();
        for c in rel.as_ref().components() {
            match c {
                Component::Normal(name) => parts.push(name),
                Component::CurDir => {}
                _ => {
                    return Err(DirError::BadName {
                        dir: self.path.clone(),
                        name: rel.as_ref().as_os_str().to_os_string(),
                    });
                }
            }
        }
        let mut cur: Option<Dir> = None;
        for name in parts {
            let at = cur.as_ref().unwrap_or(self);
            let next = match create {
                Some(mode) => at.child_or_create(name, mode)?,
                None => at.child(name)?,
            };
            cur = Some(next);
        }
        match cur {
            Some(d) => Ok(d),
            None => self.reopen(),
        }
    }

    /// A second handle on this directory.
    fn reopen(&self) -> Result<Dir, DirError> {
        let fd = rustix::fs::openat(&self.fd, ".", dir_flags(), Mode::empty())
            .map_err(io_err("open the directory", &self.path))?;
        Ok(Dir {
            fd,
            path: self.path.clone(),
        })
    }

    /// A new directory `PREFIX-<random>` in this one (`mkdirat`, which
    /// never reuses or follows anything already at the name), opened.
    pub fn create_unique(&self, prefix: &str, mode: u32) -> Result<Dir, DirError> {
        let mut last = None;
        for _ in 0..UNIQUE_NAME_ATTEMPTS {
            let name = format!("{prefix}-{}", random_hex()?);
            match rustix::fs::mkdirat(&self.fd, name.as_str(), Mode::from_raw_mode(mode)) {
                Ok(()) => return self.child(&name),
                Err(e @ rustix::io::Errno::EXIST) => last = Some(e),
                Err(e) => return Err(io_err("create a directory in", &self.path)(e)),
            }
        }
        Err(io_err("create a directory in", &self.path)(
            last.unwrap_or(rustix::io::Errno::EXIST),
        ))
    }

    /// The names in this directory (not `.` and `..`), in no set order.
    pub fn names(&self) -> Result<Vec<OsString>, DirError> {
        let err = io_err("list", &self.path);
        let entries = rustix::fs::Dir::read_from(&self.fd).map_err(err)?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err("list", &self.path))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name != "." && name != ".." {
                out.push(name.to_os_string());
            }
        }
        Ok(out)
    }

    /// Rename `from` in this directory to `to` in `dest`, relative to the
    /// two handles (`renameat`: no path is resolved again, so no link
    /// planted since either was opened is used).
    pub fn rename_to(
        &self,
        from: impl AsRef<OsStr>,
        dest: &Dir,
        to: impl AsRef<OsStr>,
    ) -> Result<(), DirError> {
        let (from, to) = (self.name(from.as_ref())?, dest.name(to.as_ref())?);
        rustix::fs::renameat(&self.fd, from, &dest.fd, to)
            .map_err(io_err("rename into", &dest.join(to)))
    }

    /// Remove `name` when it is not a directory (a file, or a link, which
    /// is removed itself); `false` when nothing was there.
    pub fn remove_file(&self, name: impl AsRef<OsStr>) -> Result<bool, DirError> {
        let name = self.name(name.as_ref())?;
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::NOENT) => Ok(false),
            Err(e) => Err(io_err("remove", &self.join(name))(e)),
        }
    }

    /// Remove the empty directory `name`; `false` when it is absent or not
    /// empty (a directory something else still uses is left).
    pub fn remove_empty_dir(&self, name: impl AsRef<OsStr>) -> Result<bool, DirError> {
        let name = self.name(name.as_ref())?;
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) => Ok(true),
            Err(
                rustix::io::Errno::NOENT | rustix::io::Errno::NOTEMPTY | rustix::io::Errno::EXIST,
            ) => Ok(false),
            Err(e) => Err(io_err("remove", &self.join(name))(e)),
        }
    }

    /// Remove `name` whatever it is: a file or a link (the link itself,
    /// never what it points to), or a directory and everything in it,
    /// never through a link; `false` when nothing was there.
    pub fn remove_tree(&self, name: impl AsRef<OsStr>) -> Result<bool, DirError> {
        let name = self.name(name.as_ref())?;
        match self.stat(name)? {
            None => return Ok(false),
            Some(s) if kind_of(&s) != FileKind::Directory => return self.remove_file(name),
            Some(_) => {}
        }
        tree::empty_tree(self.child(name)?)?;
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(true),
            Err(e) => Err(io_err("remove", &self.join(name))(e)),
        }
    }

    /// Remove the entries of this directory that `remove` picks (given
    /// the name and what it is, a link never followed); directories are
    /// removed whole ([`Dir::remove_tree`]). The count removed.
    pub fn remove_entries(
        &self,
        mut remove: impl FnMut(&OsStr, FileKind) -> bool,
    ) -> Result<usize, DirError> {
        let mut count = 0;
        for name in self.names()? {
            let Some(kind) = self.kind(&name)? else {
                continue;
            };
            if remove(&name, kind) && self.remove_tree(&name)? {
                count += 1;
            }
        }
        Ok(count)
    }

    /// When `name` was last modified, without following a link.
    pub fn modified(
        &self,
        name: impl AsRef<OsStr>,
    ) -> Result<Option<std::time::SystemTime>, DirError> {
        Ok(self.stat(name.as_ref())?.map(|s| {
            let secs = u64::try_from(s.st_mtime).unwrap_or(0);
            let nanos = u32::try_from(s.st_mtime_nsec).unwrap_or(0);
            std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos)
        }))
    }

    /// fsync the directory, so that names made or removed in it last.
    pub fn sync(&self) -> Result<(), DirError> {
        rustix::fs::fsync(&self.fd).map_err(io_err("sync the directory", &self.path))
    }

    /// Sync the whole file system this directory is on (`syncfs(2)`): every
    /// file written on it is durable when this returns. A batch of new
    /// outputs is made durable so, once ([`super::NewFiles::finish`]).
    pub fn sync_filesystem(&self) -> Result<(), DirError> {
        rustix::fs::syncfs(&self.fd).map_err(io_err("sync the file system of", &self.path))
    }

    /// Require the directory to be this user's own and private: owned by
    /// the effective uid, mode made [`PRIVATE_DIR_MODE`] when it is wider.
    pub fn make_private(&self) -> Result<(), DirError> {
        let stat = rustix::fs::fstat(&self.fd).map_err(io_err("examine", &self.path))?;
        let me = rustix::process::geteuid().as_raw();
        if stat.st_uid != me {
            return Err(DirError::NotOwned {
                path: self.path.clone(),
                owner: stat.st_uid,
                me,
            });
        }
        if stat.st_mode & 0o077 != 0 {
            rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(PRIVATE_DIR_MODE))
                .map_err(io_err("make private", &self.path))?;
        }
        Ok(())
    }

    /// The device and inode of the directory.
    fn identity(&self) -> Result<(u64, u64), DirError> {
        let s = rustix::fs::fstat(&self.fd).map_err(io_err("examine", &self.path))?;
        Ok((s.st_dev, s.st_ino))
    }
}

/// Remove `path` whatever it is ([`Dir::remove_tree`]: a link removed
/// itself, a directory and everything in it, never through a link); the
/// path leading to it is the caller's. `false` when nothing was there.
pub fn remove_tree_at(path: &Path) -> Result<bool, DirError> {
    match split(path) {
        Some((parent, name)) => match Dir::plain(parent) {
            Ok(d) => d.remove_tree(name),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        },
        None => Err(DirError::BadName {
            dir: path.to_path_buf(),
            name: path.as_os_str().to_os_string(),
        }),
    }
}

/// 16 random hex digits from the OS (an unpredictable name: `mkdirat`
/// refuses one that exists, so a collision costs one more attempt).
fn random_hex() -> Result<String, DirError> {
    let mut raw = [0u8; 8];
    super::random_bytes(&mut raw).map_err(|source| DirError::Io {
        step: "draw a random name for",
        path: PathBuf::from("a new directory"),
        source,
    })?;
    Ok(crate::digest::to_hex(&raw))
}

/// `path` as (the directory it is in, its last name); `None` when it ends
/// in no name (`/`, `.`, `..`).
fn split(path: &Path) -> Option<(&Path, &OsStr)> {
    match path.components().next_back() {
        Some(Component::Normal(name)) => Some((path.parent().unwrap_or(Path::new("")), name)),
        _ => None,
    }
}

/// Whether `name` is one plain path component: not empty, not `.` or
/// `..`, no `/` and no NUL (what a directory handle may name).
pub fn is_plain_name(name: &OsStr) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.as_bytes().contains(&b'/')
        && !name.as_bytes().contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A directory outside with a file in it, and a link `name` in `at` to it.
    fn planted(at: &Path, outside: &Path, name: &str) {
        std::fs::create_dir_all(outside).unwrap();
        std::fs::write(outside.join("keep"), b"keep").unwrap();
        symlink(outside, at.join(name)).unwrap();
    }

    #[test]
    fn a_link_at_a_named_or_nested_directory_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        planted(t.path(), &outside, "named");
        for r in [
            Dir::open(&t.path().join("named")),
            Dir::create(&t.path().join("named"), 0o755),
        ] {
            let e = r.unwrap_err();
            assert!(matches!(e, DirError::Link { .. }), "{e}");
            assert!(e.to_string().contains("named"), "{e}");
        }
        let top = Dir::create(&t.path().join("top"), 0o755).unwrap();
        planted(top.path(), &outside, "tmp");
        assert!(matches!(top.child("tmp"), Err(DirError::Link { .. })));
        assert!(matches!(
            top.child_or_create("tmp", 0o755),
            Err(DirError::Link { .. })
        ));
        assert!(matches!(
            top.descend("tmp/x", Some(0o755)),
            Err(DirError::Link { .. })
        ));
        let made = top.descend("a/b/c", Some(0o755)).unwrap();
        assert_eq!(made.path(), t.path().join("top/a/b/c"));
        planted(&t.path().join("top/a"), &outside, "l");
        assert!(matches!(
            top.descend("a/l/c", Some(0o755)),
            Err(DirError::Link { .. })
        ));
        assert!(!outside.join("x").exists() && !outside.join("c").exists());
        std::fs::write(t.path().join("top/f"), b"").unwrap();
        assert!(matches!(
            top.child("f"),
            Err(DirError::NotADirectory { .. })
        ));
        assert!(matches!(
            top.descend("../x", None),
            Err(DirError::BadName { .. })
        ));
        assert!(matches!(top.child("a/b"), Err(DirError::BadName { .. })));
        assert!(top.try_child("absent").unwrap().is_none());
    }

    #[test]
    fn removal_never_goes_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        let top = Dir::create(&t.path().join("top"), 0o755).unwrap();
        let tree = top.descend("tree/a/b", Some(0o755)).unwrap();
        std::fs::write(tree.join("f"), b"x").unwrap();
        planted(tree.path(), &outside, "link");
        symlink(outside.join("keep"), top.join("tree/a/file-link")).unwrap();
        assert!(top.remove_tree("tree").unwrap());
        assert!(!top.join("tree").exists());
        assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"keep");
        // A link as the tree itself: the link goes, its target stays.
        planted(top.path(), &outside, "tree");
        assert!(top.remove_tree("tree").unwrap());
        assert!(std::fs::symlink_metadata(top.join("tree")).is_err());
        assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"keep");
        assert!(!top.remove_tree("tree").unwrap());
        // Entries picked by name; a link among them is removed, not followed.
        let tmp = top.child_or_create("tmp", 0o755).unwrap();
        std::fs::write(tmp.join("old"), b"").unwrap();
        std::fs::write(tmp.join("young"), b"").unwrap();
        planted(tmp.path(), &outside, "old-link");
        let n = tmp
            .remove_entries(|name, _| name.as_bytes().starts_with(b"old"))
            .unwrap();
        assert_eq!(n, 2);
        let mut left = tmp.names().unwrap();
        left.sort();
        assert_eq!(left, vec![OsString::from("young")]);
        assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"keep");
    }

    #[test]
    fn a_deep_tree_is_removed_without_recursion_up_to_the_limit() {
        let t = tempfile::tempdir().unwrap();
        let top = Dir::create(&t.path().join("top"), 0o755).unwrap();
        let mut d = top.child_or_create("deep", 0o755).unwrap();
        for _ in 0..300 {
            d = d.child_or_create("d", 0o755).unwrap();
        }
        std::fs::write(d.join("f"), b"").unwrap();
        assert!(top.remove_tree("deep").unwrap());
        assert!(top.names().unwrap().is_empty());
    }

    #[test]
    fn private_directories_are_made_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let t = tempfile::tempdir().unwrap();
        let d = Dir::create(&t.path().join("p"), 0o755).unwrap();
        d.make_private().unwrap();
        let mode = std::fs::metadata(d.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, PRIVATE_DIR_MODE);
        let u = d.create_unique("run", PRIVATE_DIR_MODE).unwrap();
        assert!(
            u.path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("run-")
        );
    }
}
