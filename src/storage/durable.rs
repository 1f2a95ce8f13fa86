//! durable: the file steps of the POSIX store ([`super::posix`]): capped
//! reads in a directory handle, replacing one file (temporary file, fsync,
//! rename, directory fsync), the batch writer (the same without the
//! directory fsync, which the caller does once per batch), renames
//! relative to two directory handles, and the directory fsyncs of a batch
//! from several threads. Every directory here is a [`Dir`], opened by the
//! store without following a link.

use super::StoreError;
use crate::io::{Dir, DirError, InputError, OutputError};
use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Mode of the files the store writes (what umask 022 gave before).
pub(super) const FILE_MODE: u32 = 0o644;
/// Threads that write and fsync tile files at once: fsync waits on the
/// device, not the CPU, so more threads than cores keep the device busy.
const WRITE_THREADS: usize = 16;

/// Map an I/O error on `path` to a [`StoreError`] (full and read-only
/// file systems get their own variants).
pub fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| {
        let what = path.display().to_string();
        match source.kind() {
            std::io::ErrorKind::StorageFull => StoreError::NoSpace { what },
            std::io::ErrorKind::ReadOnlyFilesystem => StoreError::ReadOnlyFs { what },
            _ => StoreError::Io { what, source },
        }
    }
}

/// A directory of the log that is a link, not a directory, or unusable:
/// [`StoreError::Io`] on the log directory, the message naming the path
/// (a full disk stays [`StoreError::NoSpace`]).
pub fn dir_err(root: &Path) -> impl FnOnce(DirError) -> StoreError + '_ {
    move |e| io_err(root)(e.into_io())
}

/// Read the whole regular file `name` of `dir`, at most `max` bytes:
/// `Ok(None)` when it does not exist, [`StoreError::TooLarge`] when
/// longer (at most `max + 1` bytes are read, whatever the file's metadata
/// says). A symlink, a FIFO, a device or a directory is refused without
/// being followed or waited on ([`crate::io::read_at`]: `O_NOFOLLOW |
/// O_NONBLOCK`, then `fstat`), so a read never leaves the directory.
pub fn read_in(dir: &Dir, name: &str, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
    let path = dir.join(name);
    let not_regular =
        || std::io::Error::other("not a regular file (a symlink, directory, FIFO or device)");
    match crate::io::read_at(dir, name, max) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(InputError::NotFound { .. }) => Ok(None),
        Err(InputError::TooLarge { .. }) => Err(StoreError::TooLarge {
            what: path.display().to_string(),
            max,
        }),
        Err(InputError::Open { source, .. } | InputError::Read { source, .. }) => {
            Err(io_err(&path)(source))
        }
        Err(InputError::NotRegular { .. }) => Err(io_err(&path)(not_regular())),
        Err(e) => Err(io_err(&path)(std::io::Error::other(e))),
    }
}

/// Replace (or create) the file `name` of `dir` whole and durably with the
/// crate's atomic writer ([`crate::io::write_atomic_via`]), the temporary
/// file in `tmp`: written, fsynced, renamed over the name, `dir` fsynced.
pub fn write_replace(tmp: &Dir, dir: &Dir, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
    let dest = dir.join(name);
    crate::io::write_atomic_via(tmp.path(), &dest, bytes, FILE_MODE).map_err(|e| match e {
        OutputError::Io { path, source, .. } => io_err(&path)(source),
        other => io_err(&dest)(std::io::Error::other(other)),
    })
}

/// A fresh temporary file in `tmp`, created exclusively under an
/// unpredictable name by the crate's one creator
/// ([`crate::io::create_temp_in`]); its path and its name.
pub(super) fn create_temp(tmp: &Dir) -> Result<(File, PathBuf, String), StoreError> {
    let (file, path) =
        crate::io::create_temp_in(tmp.path(), FILE_MODE).map_err(io_err(tmp.path()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((file, path, name))
}

/// Write `bytes` to a new file in `tmp`, fsync it, and rename it to `name`
/// in `dir` (relative to both handles: `renameat`). On failure the
/// temporary file is removed. The caller fsyncs the directories that
/// gained a name ([`sync_dirs`]) before relying on it.
///
/// The batch writer, and the only writer besides [`crate::io`]'s: a batch
/// of tiles is many such writes from several threads, then one fsync per
/// directory, instead of one per file ([`write_replace`] for one file).
pub fn write_durable(tmp: &Dir, dir: &Dir, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
    let (mut file, path, tmp_name) = create_temp(tmp)?;
    let written = (|| {
        file.write_all(bytes).map_err(io_err(&path))?;
        file.sync_all().map_err(io_err(&path))?;
        drop(file);
        rename_at(tmp, &tmp_name, dir, name)
    })();
    if written.is_err() {
        let _ = tmp.remove_file(&tmp_name);
    }
    written
}

/// Rename `from` in `from_dir` to `to` in `to_dir`, relative to the two
/// handles (no path is resolved again, so no link planted since is used).
pub(super) fn rename_at(
    from_dir: &Dir,
    from: &str,
    to_dir: &Dir,
    to: &str,
) -> Result<(), StoreError> {
    from_dir
        .rename_to(from, to_dir, to)
        .map_err(|e| io_err(&to_dir.join(to))(e.into_io()))
}

/// fsync one directory, so that the names created or renamed in it last.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    crate::io::sync_dir(dir).map_err(io_err(dir))
}

/// fsync the parent directory of every path in `files`, and each of their
/// ancestors up to and including `root` (a directory made by an earlier,
/// interrupted writer may not be durable in its parent yet). Each
/// directory is synced once, from several threads.
pub fn sync_dirs<'a>(
    root: &Path,
    files: impl IntoIterator<Item = &'a Path>,
) -> Result<(), StoreError> {
    sync_dirs_known(root, files, &Mutex::new(HashSet::new()))
}

/// [`sync_dirs`], skipping the ancestors already in `named`: directories
/// whose own name this process made durable (it fsynced their parent
/// while they existed). The parent of every file is always synced (it
/// gained a name); an ancestor is synced only to make a directory in
/// `named`'s complement durable, and is then added. Directories are never
/// removed while the writer holds the lock (repair removes files only), so
/// an entry stays true for the store's life.
pub(super) fn sync_dirs_known<'a>(
    root: &Path,
    files: impl IntoIterator<Item = &'a Path>,
    named: &Mutex<HashSet<PathBuf>>,
) -> Result<(), StoreError> {
    let known = named.lock().map(|n| n.clone()).unwrap_or_default();
    let mut dirs = BTreeSet::new();
    // The directories whose name in their parent this sync makes durable.
    let mut naming = Vec::new();
    for file in files {
        let mut cur = file.parent();
        while let Some(dir) = cur {
            if !dir.starts_with(root) || !dirs.insert(dir.to_path_buf()) {
                break;
            }
            if dir == root || known.contains(dir) {
                break;
            }
            naming.push(dir.to_path_buf());
            cur = dir.parent();
        }
    }
    let dirs: Vec<PathBuf> = dirs.into_iter().collect();
    parallel(&dirs, |d| sync_dir(d))?;
    if let Ok(mut n) = named.lock() {
        n.extend(naming);
    }
    Ok(())
}

/// Run `f` on every item from [`WRITE_THREADS`] threads; the first error wins.
pub(super) fn parallel<T: Sync>(
    items: &[T],
    f: impl Fn(&T) -> Result<(), StoreError> + Sync,
) -> Result<(), StoreError> {
    if items.len() <= 1 {
        // Nothing to overlap: no thread.
        return items.iter().try_for_each(f);
    }
    let next = AtomicU64::new(0);
    let threads = WRITE_THREADS.min(items.len());
    let results: Vec<Result<(), StoreError>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(item) = items.get(k) else {
                            return Ok(());
                        };
                        f(item)?;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or(Err(StoreError::Thread)))
            .collect()
    });
    results.into_iter().collect()
}
