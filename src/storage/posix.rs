//! posix: a log in a directory. The public objects are files at their
//! tlog-tiles paths (servable as static files); private state is under
//! `DIR/.rcpt/`; temporary files under `DIR/.rcpt/tmp/`.
//!
//! Reads and single-file writes go through the crate's one capped reader
//! and one atomic writer ([`crate::io::read_path`] and
//! [`crate::io::write_atomic_via`], with the temporary file in
//! `DIR/.rcpt/tmp/`): [`read_capped`] (never more than the limit plus one
//! byte, never a FIFO, a device or a symlink) and [`write_replace`] (a new
//! temporary file, fsync, rename over the name, fsync of the directory).
//! The one other writer is [`write_durable`], for batches of tiles: the
//! same steps without the directory fsync, which the caller does once for
//! the whole batch ([`sync_dirs`]). A rename is atomic, so a reader sees
//! the old file or the whole new one, never half of one.
//!
//! Create-only tile writes and the checkpoint's compare-and-swap are a
//! look before the rename; they are exact because one writer holds the
//! lock (`DIR/.rcpt/lock`, an `flock` released when its holder dies).

use super::{
    Family, PrivateDir, PrivateKey, PublicKey, PublicRead, RandomRead, Staged, StagedWrite,
    StoreError, TileKey, Version, Versioned, WriterLock,
};
use crate::io::{InputError, OutputError};
use crate::storage::{CheckpointStore, PrivateStore, TileStore};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Private state directory, relative to the log directory.
pub const PRIVATE_DIR: &str = ".rcpt";
/// Mode of the files the store writes (what umask 022 gave before).
const FILE_MODE: u32 = 0o644;
/// Threads that write and fsync tile files at once: fsync waits on the
/// device, not the CPU, so more threads than cores keep the device busy.
const WRITE_THREADS: usize = 16;

/// A log directory.
#[derive(Clone, Debug)]
pub struct PosixStore {
    root: PathBuf,
    /// Directories whose own name is durable (see [`sync_dirs_known`]).
    named: Arc<Mutex<HashSet<PathBuf>>>,
}

/// Tiles staged at once by [`PosixStore::create_tiles`]: each holds an
/// open file from its write to its fsync, so a batch of 100,000 entries
/// (about 800 files) is written in a few groups, never 800 descriptors.
const STAGE_GROUP: usize = 256;

/// A tile written to a temporary file, not yet synced or named.
struct StagedTile {
    file: File,
    tmp: PathBuf,
    dest: PathBuf,
}

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

/// Read a whole regular file of at most `max` bytes: `Ok(None)` when it
/// does not exist, [`StoreError::TooLarge`] when longer (at most `max + 1`
/// bytes are read, whatever the file's metadata says). A symlink, a FIFO,
/// a device or a directory is refused before it is opened, so a read never
/// waits on a pipe and never leaves the directory.
///
/// The read is [`crate::io::read_path`]'s; this adds the symlink refusal
/// (a log's files are its own, never links out of it) and the store's
/// error kinds.
pub fn read_capped(path: &Path, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
    let not_regular =
        || std::io::Error::other("not a regular file (a symlink, directory, FIFO or device)");
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {}
        Ok(_) => return Err(io_err(path)(not_regular())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    }
    match crate::io::read_path(path, max) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(InputError::NotFound { .. }) => Ok(None),
        Err(InputError::TooLarge { .. }) => Err(StoreError::TooLarge {
            what: path.display().to_string(),
            max,
        }),
        Err(InputError::Open { source, .. } | InputError::Read { source, .. }) => {
            Err(io_err(path)(source))
        }
        Err(InputError::NotRegular { .. }) => Err(io_err(path)(not_regular())),
        Err(e) => Err(io_err(path)(std::io::Error::other(e))),
    }
}

/// Replace (or create) the file `dest` whole and durably with the crate's
/// atomic writer ([`crate::io::write_atomic_via`]), the temporary file in
/// `tmp_dir`: written, fsynced, renamed over `dest`, `dest`'s directory
/// fsynced. `dest`'s directory must exist.
pub fn write_replace(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    if !tmp_dir.is_dir() {
        std::fs::create_dir_all(tmp_dir).map_err(io_err(tmp_dir))?;
    }
    crate::io::write_atomic_via(tmp_dir, dest, bytes, FILE_MODE).map_err(|e| match e {
        OutputError::Io { path, source, .. } => io_err(&path)(source),
        other => io_err(dest)(std::io::Error::other(other)),
    })
}

/// A fresh temporary file in `tmp_dir`, created exclusively under an
/// unpredictable name by the crate's one creator ([`crate::io::create_temp_in`]).
fn create_temp(tmp_dir: &Path) -> Result<(File, PathBuf), StoreError> {
    match crate::io::create_temp_in(tmp_dir, FILE_MODE) {
        // No directory yet: make it (idempotent: several writers of one
        // batch may all find it missing, and whichever makes it first, each
        // then creates its file). Testing `is_dir()` here instead would
        // fail the writers that test after another made it.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(tmp_dir).map_err(io_err(tmp_dir))?;
            crate::io::create_temp_in(tmp_dir, FILE_MODE).map_err(io_err(tmp_dir))
        }
        other => other.map_err(io_err(tmp_dir)),
    }
}

/// Write `bytes` to a new file in `tmp_dir`, fsync it, and rename it to
/// `dest` (creating `dest`'s parent directories). On failure the temporary
/// file is removed. The caller fsyncs the directories that gained a name
/// ([`sync_dirs`]) before relying on `dest`.
///
/// The batch writer, and the only writer besides [`crate::io`]'s: a batch
/// of tiles is many such writes from several threads, then one fsync per
/// directory, instead of one per file ([`write_replace`] for one file).
pub fn write_durable(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let (mut file, tmp) = create_temp(tmp_dir)?;
    let written = (|| {
        file.write_all(bytes).map_err(io_err(&tmp))?;
        file.sync_all().map_err(io_err(&tmp))?;
        drop(file);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        std::fs::rename(&tmp, dest).map_err(io_err(dest))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
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
fn sync_dirs_known<'a>(
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
fn parallel<T: Sync>(
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

/// The path of the tiles of index group `group` (index / 1000): every
/// element of `encode_index(group)` with its `x`.
fn group_dir(group: u64) -> String {
    if group == 0 {
        return String::new();
    }
    crate::tlog::tiles::path::encode_index(group)
        .split('/')
        .map(|e| {
            if e.starts_with('x') {
                e.to_string()
            } else {
                format!("x{e}")
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// File names in `dir` (none when it does not exist); names that are not
/// UTF-8 are skipped (no key can name them).
fn names(dir: &Path) -> Result<Vec<String>, StoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err(dir))?;
        if let Ok(name) = entry.file_name().into_string() {
            out.push(name);
        }
    }
    Ok(out)
}

/// The version of checkpoint bytes: hex SHA-256.
fn version_of(bytes: &[u8]) -> Version {
    let digest = Sha256::digest(bytes);
    Version(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// The largest checkpoint a compare-and-swap reads to learn its version.
const CHECKPOINT_READ_MAX: usize = crate::limits::MAX_NOTE_BYTES;

impl PosixStore {
    /// The store of the log directory `root` (nothing is touched yet).
    pub fn new(root: &Path) -> PosixStore {
        PosixStore {
            root: root.to_path_buf(),
            named: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// The log directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `DIR/.rcpt/`.
    pub fn private_dir(&self) -> PathBuf {
        self.root.join(PRIVATE_DIR)
    }

    /// `DIR/.rcpt/tmp/`.
    fn tmp(&self) -> PathBuf {
        self.private_dir().join("tmp")
    }

    /// The file of a public object.
    pub fn public_path(&self, key: &PublicKey) -> PathBuf {
        self.root.join(key.path())
    }

    /// The file of a private object.
    pub fn private_path(&self, key: &PrivateKey) -> PathBuf {
        self.private_dir().join(key.path())
    }

    /// `DIR/.rcpt/lock`.
    pub fn lock_path(&self) -> PathBuf {
        self.private_dir().join("lock")
    }

    /// Stage one tile create-only (see [`Store::create_tiles`]): `None`
    /// when the same bytes are already under its name (a retried write),
    /// a conflict when other bytes are, else its bytes written to a new
    /// temporary file (not synced, not named yet).
    fn stage_tile(&self, key: &TileKey, bytes: &[u8]) -> Result<Option<StagedTile>, StoreError> {
        let dest = self.public_path(&PublicKey::Tile(*key));
        match read_capped(&dest, bytes.len()) {
            Ok(None) => {}
            Ok(Some(old)) if old == bytes => return Ok(None),
            Ok(Some(_)) | Err(StoreError::TooLarge { .. }) => {
                return Err(StoreError::Conflict { key: *key });
            }
            Err(e) => return Err(e),
        }
        let (mut file, tmp) = create_temp(&self.tmp())?;
        if let Err(e) = file.write_all(bytes) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_err(&tmp)(e));
        }
        Ok(Some(StagedTile { file, tmp, dest }))
    }

    /// One group of tiles: all written, then all synced, then all named
    /// (see [`TileStore::create_tiles`]).
    fn create_group(&self, objects: &[(TileKey, Vec<u8>)]) -> Result<(), StoreError> {
        let staged: Vec<Mutex<Option<StagedTile>>> =
            objects.iter().map(|_| Mutex::new(None)).collect();
        let slots: Vec<_> = objects.iter().zip(&staged).collect();
        let result = (|| {
            // Write: every file of the group, no sync yet.
            parallel(&slots, |((key, bytes), slot)| {
                let tile = self.stage_tile(key, bytes)?;
                if let Ok(mut s) = slot.lock() {
                    *s = tile;
                }
                Ok(())
            })?;
            let tiles: Vec<StagedTile> = staged
                .iter()
                .filter_map(|s| s.lock().ok().and_then(|mut s| s.take()))
                .collect();
            // Sync: every file's bytes durable before any is named.
            let synced = parallel(&tiles, |t| t.file.sync_data().map_err(io_err(&t.tmp)));
            let named = synced.and_then(|()| self.name_tiles(&tiles));
            if named.is_err() {
                for t in &tiles {
                    let _ = std::fs::remove_file(&t.tmp);
                }
            }
            named
        })();
        if result.is_err() {
            // Staged but never collected (another thread failed first).
            for slot in &staged {
                if let Some(t) = slot.lock().ok().and_then(|mut s| s.take()) {
                    let _ = std::fs::remove_file(&t.tmp);
                }
            }
        }
        result
    }

    /// Rename each synced tile to its name (its directories made once each).
    fn name_tiles(&self, tiles: &[StagedTile]) -> Result<(), StoreError> {
        let parents: BTreeSet<&Path> = tiles.iter().filter_map(|t| t.dest.parent()).collect();
        for parent in parents {
            if !parent.is_dir() {
                std::fs::create_dir_all(parent).map_err(io_err(parent))?;
            }
        }
        parallel(tiles, |t| {
            std::fs::rename(&t.tmp, &t.dest).map_err(io_err(&t.dest))
        })
    }
}

impl PublicRead for PosixStore {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn read(&self, key: &PublicKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        read_capped(&self.public_path(key), max)
    }

    fn read_checkpoint(&self, max: usize) -> Result<Option<Versioned>, StoreError> {
        let bytes = self.read(&PublicKey::Checkpoint, max)?;
        Ok(bytes.map(|bytes| Versioned {
            version: version_of(&bytes),
            bytes,
        }))
    }
}

/// A private file open for random-access reads.
struct PosixRead {
    file: File,
    len: u64,
    path: PathBuf,
}

impl RandomRead for PosixRead {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), StoreError> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(io_err(&self.path))
    }
}

/// A private file being written in `.rcpt/tmp/`.
struct PosixStaged {
    file: File,
    path: PathBuf,
}

impl StagedWrite for PosixStaged {
    fn write_at(&mut self, bytes: &[u8], offset: u64) -> Result<(), StoreError> {
        self.file
            .write_all_at(bytes, offset)
            .map_err(io_err(&self.path))
    }
    fn finish(self: Box<Self>) -> Result<Staged, StoreError> {
        self.file.sync_all().map_err(io_err(&self.path))?;
        let temp = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Staged { temp })
    }
}

/// The held `flock` of `DIR/.rcpt/lock`; released when dropped or when
/// the process dies.
#[derive(Debug)]
struct FileLock {
    _file: File,
}

impl WriterLock for FileLock {
    fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

impl TileStore for PosixStore {
    /// The durable batch write of `spec/log.md` step 4, in groups of
    /// [`STAGE_GROUP`] files: every file of a group written to
    /// `.rcpt/tmp/` from [`WRITE_THREADS`] threads, then every one
    /// fdatasynced from as many threads (the device sees the whole group's
    /// data at once, and the file system commits the syncs together), then
    /// each renamed to its name; after the last group, each directory that
    /// gained a name fsynced once (its ancestors only while their own name
    /// is not yet known durable). Every file is durable before it is named,
    /// and every name before the call returns.
    fn create_tiles(&self, objects: &[(TileKey, Vec<u8>)]) -> Result<(), StoreError> {
        for group in objects.chunks(STAGE_GROUP) {
            self.create_group(group)?;
        }
        // Retried writes (already named) still need their directory synced:
        // an interrupted writer may have named them without the sync.
        let paths: Vec<PathBuf> = objects
            .iter()
            .map(|(k, _)| self.public_path(&PublicKey::Tile(*k)))
            .collect();
        sync_dirs_known(&self.root, paths.iter().map(PathBuf::as_path), &self.named)
    }

    fn list_tiles(&self, family: Family, from: u64, to: u64) -> Result<Vec<TileKey>, StoreError> {
        let prefix = match family {
            Family::Hashes(l) => format!("tile/{l}"),
            Family::Entries => "tile/entries".to_string(),
        };
        let mut out = Vec::new();
        for group in from / 1000..=to / 1000 {
            let rel = [prefix.clone(), group_dir(group)]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("/");
            for name in names(&self.root.join(&rel))? {
                let mut paths = vec![format!("{rel}/{name}")];
                if let Some(stem) = name.strip_suffix(".p") {
                    let widths = names(&self.root.join(&rel).join(&name))?;
                    paths = widths
                        .iter()
                        .map(|w| format!("{rel}/{stem}.p/{w}"))
                        .collect();
                }
                for p in paths {
                    if let Some(PublicKey::Tile(t)) = PublicKey::from_path(&p)
                        && t.family() == family
                        && (from..=to).contains(&t.index())
                    {
                        out.push(t);
                    }
                }
            }
        }
        Ok(out)
    }

    fn remove_tiles(&self, keys: &[TileKey]) -> Result<(), StoreError> {
        for key in keys {
            let path = self.public_path(&PublicKey::Tile(*key));
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&path)(e)),
            }
        }
        Ok(())
    }
}

impl CheckpointStore for PosixStore {
    fn is_empty(&self) -> Result<bool, StoreError> {
        match std::fs::read_dir(&self.root) {
            Ok(mut entries) => Ok(entries.next().is_none()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(io_err(&self.root)(e)),
        }
    }

    fn replace_checkpoint(
        &self,
        expected: Option<&Version>,
        bytes: &[u8],
    ) -> Result<Version, StoreError> {
        let current = self.read_checkpoint(CHECKPOINT_READ_MAX)?;
        if current.as_ref().map(|c| &c.version) != expected {
            return Err(StoreError::CheckpointMoved);
        }
        let path = self.public_path(&PublicKey::Checkpoint);
        write_replace(&self.tmp(), &path, bytes)?;
        Ok(version_of(bytes))
    }

    fn lock(&self, wait: bool) -> Result<Box<dyn WriterLock>, StoreError> {
        let path = self.lock_path();
        let dir = self.private_dir();
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let file = crate::io::open_lock(&path).map_err(io_err(&path))?;
        if wait {
            file.lock().map_err(io_err(&path))?;
        } else {
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(StoreError::Locked {
                        store: self.describe(),
                        lock: path.display().to_string(),
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&path)(e)),
            }
        }
        Ok(Box::new(FileLock { _file: file }))
    }
}

impl PrivateStore for PosixStore {
    fn read_private(&self, key: &PrivateKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        read_capped(&self.private_path(key), max)
    }

    fn write_private(&self, key: &PrivateKey, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.private_path(key);
        let parent = path.parent().unwrap_or(&self.root).to_path_buf();
        let made = !parent.is_dir();
        if made {
            std::fs::create_dir_all(&parent).map_err(io_err(&parent))?;
        }
        write_replace(&self.tmp(), &path, bytes)?;
        if made {
            // A new directory is a name in its parent too.
            sync_dirs(&self.root, [path.as_path()])?;
        }
        Ok(())
    }

    fn remove_private(&self, keys: &[PrivateKey]) -> Result<(), StoreError> {
        for key in keys {
            let path = self.private_path(key);
            let removed = match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
                Ok(_) => std::fs::remove_file(&path),
                Err(e) => Err(e),
            };
            match removed {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&path)(e)),
            }
        }
        Ok(())
    }

    fn list_private(&self, dir: PrivateDir) -> Result<Vec<PrivateKey>, StoreError> {
        let mut names = names(&self.private_dir().join(dir.path()))?;
        names.sort();
        Ok(names
            .iter()
            .filter_map(|n| PrivateKey::in_dir(dir, n))
            .collect())
    }

    fn open_private(&self, key: &PrivateKey) -> Result<Option<Box<dyn RandomRead>>, StoreError> {
        let path = self.private_path(key);
        // The one reader's open: a FIFO or a device is refused without
        // blocking (opened non-blocking, then `fstat`).
        let (file, meta) = match crate::io::open_regular(&path) {
            Ok(opened) => opened,
            Err(InputError::NotFound { .. } | InputError::NotRegular { .. }) => return Ok(None),
            Err(InputError::Open { source, .. }) => return Err(io_err(&path)(source)),
            Err(e) => return Err(io_err(&path)(std::io::Error::other(e))),
        };
        Ok(Some(Box::new(PosixRead {
            file,
            len: meta.len(),
            path,
        })))
    }

    fn stage_private(&self) -> Result<Box<dyn StagedWrite>, StoreError> {
        let (file, path) = create_temp(&self.tmp())?;
        Ok(Box::new(PosixStaged { file, path }))
    }

    fn install_private(&self, staged: Staged, key: &PrivateKey) -> Result<(), StoreError> {
        if staged.temp.is_empty() || staged.temp.contains('/') || staged.temp.starts_with('.') {
            return Err(StoreError::BadName(staged.temp));
        }
        let tmp = self.tmp().join(&staged.temp);
        let dest = self.private_path(key);
        let parent = dest.parent().unwrap_or(&self.root).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(io_err(&parent))?;
        std::fs::rename(&tmp, &dest).map_err(io_err(&dest))?;
        sync_dir(&parent)
    }

    fn clear_staging(&self) -> Result<(), StoreError> {
        let tmp = self.tmp();
        std::fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
        for name in names(&tmp)? {
            let path = tmp.join(name);
            std::fs::remove_file(&path).map_err(io_err(&path))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::storage::Width;

    /// Each trait's group of the contract, each on a new directory, then
    /// all of them in turn on one.
    #[test]
    fn the_contract_holds_for_a_directory() {
        use super::super::contract;
        let all: contract::Group = contract::run;
        let groups = contract::GROUPS.map(|(_, g)| g);
        for group in groups.into_iter().chain([all]) {
            let tmp = tempfile::tempdir().unwrap();
            let store = PosixStore::new(&tmp.path().join("log"));
            group(&store).unwrap();
        }
    }

    #[test]
    fn reads_refuse_fifos_and_symlinks_and_stop_at_the_cap() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("f");
        std::fs::write(&p, [7u8; 10]).unwrap();
        assert_eq!(read_capped(&p, 10).unwrap().unwrap().len(), 10);
        assert!(matches!(
            read_capped(&p, 9),
            Err(StoreError::TooLarge { max: 9, .. })
        ));
        let link = tmp.path().join("l");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(matches!(read_capped(&link, 10), Err(StoreError::Io { .. })));
        let fifo = tmp.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(matches!(read_capped(&fifo, 10), Err(StoreError::Io { .. })));
        }
        assert!(
            read_capped(&tmp.path().join("absent"), 10)
                .unwrap()
                .is_none()
        );
    }

    /// More tiles than one staging group: every one named with its bytes,
    /// a retried write accepted, and a conflict in a later group stops the
    /// write with no temporary file left and nothing of that group named.
    #[test]
    fn tiles_are_written_in_groups_create_only() {
        let tmp = tempfile::tempdir().unwrap();
        let store = PosixStore::new(&tmp.path().join("log"));
        let n = 2 * STAGE_GROUP as u64 + 10;
        let tiles: Vec<(TileKey, Vec<u8>)> = (0..n)
            .map(|t| (TileKey::entries(t, Width::Full), t.to_be_bytes().repeat(3)))
            .collect();
        store.create_tiles(&tiles).unwrap();
        for (key, bytes) in &tiles {
            let got = store.read(&PublicKey::Tile(*key), 1 << 10).unwrap();
            assert_eq!(got.as_deref(), Some(bytes.as_slice()));
        }
        store.create_tiles(&tiles).unwrap();
        let tmp_dir = store.private_dir().join("tmp");
        assert_eq!(std::fs::read_dir(&tmp_dir).unwrap().count(), 0);
        // Directories whose own name was made durable (never the root).
        let named = store.named.lock().unwrap().clone();
        assert!(named.contains(&store.root().join("tile/entries")));
        assert!(named.contains(&store.root().join("tile")));
        assert!(!named.contains(store.root()));
        // New tiles past the first ones; one in the last group conflicts.
        let mut more: Vec<(TileKey, Vec<u8>)> = (n..n + 2 * STAGE_GROUP as u64)
            .map(|t| (TileKey::entries(t, Width::Full), vec![1, 2, 3]))
            .collect();
        let last = more.len() - 1;
        more[last] = (TileKey::entries(0, Width::Full), vec![9]);
        let err = store.create_tiles(&more).unwrap_err();
        assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
        assert_eq!(std::fs::read_dir(&tmp_dir).unwrap().count(), 0);
        let second_group = TileKey::entries(n + STAGE_GROUP as u64, Width::Full);
        assert!(
            store
                .read(&PublicKey::Tile(second_group), 16)
                .unwrap()
                .is_none()
        );
    }

    /// Writers of one batch that all find `.rcpt/tmp` missing all succeed
    /// (the race `rcpt log mirror` into S3 lost once in CI: ENOENT for
    /// the writer that checked after a sibling made the directory).
    #[test]
    fn concurrent_writers_all_make_the_missing_tmp_dir() {
        for round in 0..40 {
            let top = tempfile::tempdir().unwrap();
            let t = top.path().join(".rcpt/tmp");
            let barrier = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                for k in 0..8 {
                    let (t, barrier, top) = (&t, &barrier, top.path());
                    s.spawn(move || {
                        barrier.wait();
                        let dest = top.join(format!("out/{k}"));
                        write_durable(t, &dest, b"x")
                            .unwrap_or_else(|e| panic!("round {round}, writer {k}: {e}"));
                    });
                }
            });
            assert_eq!(
                std::fs::read_dir(top.path().join("out")).unwrap().count(),
                8
            );
        }
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().join("tmp");
        std::fs::create_dir(&t).unwrap();
        // The destination's parent is a file: the rename cannot happen.
        std::fs::write(tmp.path().join("file"), b"x").unwrap();
        let dest = tmp.path().join("file/child");
        assert!(write_durable(&t, &dest, b"bytes").is_err());
        assert_eq!(std::fs::read_dir(&t).unwrap().count(), 0);
    }
}
