//! posix: a log in a directory. The public objects are files at their
//! tlog-tiles paths (servable as static files); private state is under
//! `DIR/.rcpt/`; temporary files under `DIR/.rcpt/tmp/`.
//!
//! Every directory of the log (the log directory itself, `tile/…`,
//! `.rcpt/`, `.rcpt/tmp/`, the private directories) is opened, made,
//! listed and cleaned without following a link ([`crate::io::Dir`]: each
//! component `O_NOFOLLOW | O_DIRECTORY` from its parent's handle): a link
//! planted in place of one is refused with an error naming it, and nothing
//! outside the log is read, written or removed through it.
//!
//! Reads and single-file writes go through the crate's one capped reader
//! and one atomic writer ([`crate::io::read_at`] and
//! [`crate::io::write_atomic_via`], with the temporary file in
//! `DIR/.rcpt/tmp/`): [`read_in`] (never more than the limit plus one
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

use super::durable::{create_temp, parallel, rename_at, sync_dirs_known};
pub use super::durable::{
    dir_err, io_err, read_in, sync_dir, sync_dirs, write_durable, write_replace,
};
use super::{
    Family, PrivateDir, PrivateKey, PublicKey, PublicRead, RandomRead, Staged, StagedWrite,
    StoreError, TileKey, Version, Versioned, WriterLock,
};
use crate::io::{Dir, InputError};
use crate::storage::{CheckpointStore, PrivateStore, TileStore};
use crate::tlog::tiles::path::group_dir;
use sha2::{Digest as _, Sha256};
use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Private state directory, relative to the log directory.
pub const PRIVATE_DIR: &str = ".rcpt";
/// Mode of the directories the store makes (before the umask).
const DIR_MODE: u32 = 0o755;

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
    /// Its name in `.rcpt/tmp/`.
    tmp_name: String,
}

/// File names in `dir`; names that are not UTF-8 are skipped (no key can
/// name them).
fn names(dir: &Dir) -> Result<Vec<String>, StoreError> {
    Ok(dir
        .names()
        .map_err(dir_err(dir.path()))?
        .into_iter()
        .filter_map(|n| n.into_string().ok())
        .collect())
}

/// `rel` as (its directory, its last name).
fn split(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
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

    /// The directory `rel` (plain components, `""` for the log directory)
    /// beneath the log directory, to write in or clean: every component,
    /// the log directory's own name too, opened without following a link;
    /// made where absent when `create`, else `None` when absent.
    fn dir(&self, rel: &str, create: bool) -> Result<Option<Dir>, StoreError> {
        let opened = if create {
            Dir::create(&self.root, DIR_MODE).and_then(|d| d.descend(rel, Some(DIR_MODE)))
        } else {
            Dir::open(&self.root).and_then(|d| d.descend(rel, None))
        };
        match opened {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.is_not_found() && !create => Ok(None),
            Err(e) => Err(dir_err(&self.root)(e)),
        }
    }

    /// The directory `rel` beneath the log directory, to read from: the
    /// log directory as the user named it (an input: a link there is
    /// followed), every component beneath opened without following a
    /// link; `None` when absent.
    fn found(&self, rel: &str) -> Result<Option<Dir>, StoreError> {
        match Dir::open_input(&self.root).and_then(|d| d.descend(rel, None)) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(dir_err(&self.root)(e)),
        }
    }

    /// [`PosixStore::dir`] made where absent.
    fn made(&self, rel: &str) -> Result<Dir, StoreError> {
        self.dir(rel, true)?
            .ok_or_else(|| io_err(&self.root)(std::io::ErrorKind::NotFound.into()))
    }

    /// `DIR/.rcpt/tmp/`, made where absent.
    fn tmp(&self) -> Result<Dir, StoreError> {
        self.made(".rcpt/tmp")
    }

    /// Read the file at `rel` beneath the log directory (see [`read_in`]).
    fn read_rel(&self, rel: &str, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        let (parent, name) = split(rel);
        match self.found(parent)? {
            Some(d) => read_in(&d, name, max),
            None => Ok(None),
        }
    }

    /// Replace the file at `rel` (see [`write_replace`]); whether its
    /// directory had to be made.
    fn replace_rel(&self, rel: &str, bytes: &[u8]) -> Result<bool, StoreError> {
        let (parent, name) = split(rel);
        let made = self.dir(parent, false)?.is_none();
        write_replace(&self.tmp()?, &self.made(parent)?, name, bytes)?;
        Ok(made)
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
    fn stage_tile(
        &self,
        tmp: &Dir,
        key: &TileKey,
        bytes: &[u8],
    ) -> Result<Option<StagedTile>, StoreError> {
        let rel = PublicKey::Tile(*key).path();
        let dest = self.root.join(&rel);
        match self.read_rel(&rel, bytes.len()) {
            Ok(None) => {}
            Ok(Some(old)) if old == bytes => return Ok(None),
            Ok(Some(_)) | Err(StoreError::TooLarge { .. }) => {
                return Err(StoreError::Conflict { key: *key });
            }
            Err(e) => return Err(e),
        }
        let (mut file, path, tmp_name) = create_temp(tmp)?;
        if let Err(e) = file.write_all(bytes) {
            let _ = tmp.remove_file(&tmp_name);
            return Err(io_err(&path)(e));
        }
        Ok(Some(StagedTile {
            file,
            tmp: path,
            dest,
            tmp_name,
        }))
    }

    /// One group of tiles: all written, then all synced, then all named
    /// (see [`TileStore::create_tiles`]).
    fn create_group(&self, objects: &[(TileKey, Vec<u8>)]) -> Result<(), StoreError> {
        let staged: Vec<Mutex<Option<StagedTile>>> =
            objects.iter().map(|_| Mutex::new(None)).collect();
        let slots: Vec<_> = objects.iter().zip(&staged).collect();
        let tmp = self.tmp()?;
        let result = (|| {
            // Write: every file of the group, no sync yet.
            parallel(&slots, |((key, bytes), slot)| {
                let tile = self.stage_tile(&tmp, key, bytes)?;
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
            let named = synced.and_then(|()| self.name_tiles(&tmp, &tiles));
            if named.is_err() {
                for t in &tiles {
                    let _ = tmp.remove_file(&t.tmp_name);
                }
            }
            named
        })();
        if result.is_err() {
            // Staged but never collected (another thread failed first).
            for slot in &staged {
                if let Some(t) = slot.lock().ok().and_then(|mut s| s.take()) {
                    let _ = tmp.remove_file(&t.tmp_name);
                }
            }
        }
        result
    }

    /// Rename each synced tile to its name (its directories made once
    /// each, without following a link; each rename relative to the two
    /// directory handles).
    fn name_tiles(&self, tmp: &Dir, tiles: &[StagedTile]) -> Result<(), StoreError> {
        let mut dirs = std::collections::BTreeMap::new();
        for t in tiles {
            let rel = t.dest.strip_prefix(&self.root).unwrap_or(&t.dest);
            let parent = rel.parent().map(|p| p.to_string_lossy().into_owned());
            let parent = parent.unwrap_or_default();
            if let std::collections::btree_map::Entry::Vacant(slot) = dirs.entry(parent) {
                let d = self.made(slot.key())?;
                slot.insert(d);
            }
        }
        parallel(tiles, |t| {
            let rel = t.dest.strip_prefix(&self.root).unwrap_or(&t.dest);
            let parent = rel.parent().map(|p| p.to_string_lossy().into_owned());
            let name = rel.file_name().map(|n| n.to_string_lossy().into_owned());
            match (dirs.get(&parent.unwrap_or_default()), name) {
                (Some(dir), Some(name)) => rename_at(tmp, &t.tmp_name, dir, &name),
                _ => Err(io_err(&t.dest)(std::io::ErrorKind::NotFound.into())),
            }
        })
    }
}

impl PublicRead for PosixStore {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn read(&self, key: &PublicKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        self.read_rel(&key.path(), max)
    }

    fn read_checkpoint(&self, max: usize) -> Result<Option<Versioned>, StoreError> {
        let bytes = self.read(&PublicKey::Checkpoint, max)?;
        Ok(bytes.map(|bytes| Versioned {
            version: version_of(&bytes),
            bytes,
        }))
    }

    fn exists(&self) -> bool {
        // Whatever is there (a file, a link) is not "missing": opening it
        // says what is wrong with it.
        std::fs::symlink_metadata(&self.root).is_ok()
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
    /// `.rcpt/tmp/` from several threads, then every one
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
            let Some(dir) = self.found(&rel)? else {
                continue;
            };
            for name in names(&dir)? {
                let mut paths = vec![format!("{rel}/{name}")];
                if let Some(stem) = name.strip_suffix(".p") {
                    let widths = match dir.try_child(&name).map_err(dir_err(&self.root))? {
                        Some(partial) => names(&partial)?,
                        None => Vec::new(),
                    };
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
            let rel = PublicKey::Tile(*key).path();
            let (parent, name) = split(&rel);
            if let Some(dir) = self.dir(parent, false)? {
                dir.remove_file(name).map_err(dir_err(&self.root))?;
            }
        }
        Ok(())
    }
}

impl CheckpointStore for PosixStore {
    fn is_empty(&self) -> Result<bool, StoreError> {
        match self.found("")? {
            Some(root) => Ok(root.names().map_err(dir_err(&self.root))?.is_empty()),
            None => Ok(true),
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
        self.replace_rel(&PublicKey::Checkpoint.path(), bytes)?;
        Ok(version_of(bytes))
    }

    fn lock(&self, wait: bool) -> Result<Box<dyn WriterLock>, StoreError> {
        let path = self.made(PRIVATE_DIR)?.join("lock");
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
        self.read_rel(&format!("{PRIVATE_DIR}/{}", key.path()), max)
    }

    fn write_private(&self, key: &PrivateKey, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.private_path(key);
        let made = self.replace_rel(&format!("{PRIVATE_DIR}/{}", key.path()), bytes)?;
        if made {
            // A new directory is a name in its parent too.
            sync_dirs(&self.root, [path.as_path()])?;
        }
        Ok(())
    }

    fn remove_private(&self, keys: &[PrivateKey]) -> Result<(), StoreError> {
        for key in keys {
            let rel = format!("{PRIVATE_DIR}/{}", key.path());
            let (parent, name) = split(&rel);
            // A file, or a directory removed whole: never through a link.
            if let Some(dir) = self.dir(parent, false)? {
                dir.remove_tree(name).map_err(dir_err(&self.root))?;
            }
        }
        Ok(())
    }

    fn list_private(&self, dir: PrivateDir) -> Result<Vec<PrivateKey>, StoreError> {
        let names = match self.found(&format!("{PRIVATE_DIR}/{}", dir.path()))? {
            Some(d) => names(&d)?,
            None => Vec::new(),
        };
        Ok(PrivateKey::all_in(dir, names))
    }

    fn open_private(&self, key: &PrivateKey) -> Result<Option<Box<dyn RandomRead>>, StoreError> {
        let path = self.private_path(key);
        let rel = format!("{PRIVATE_DIR}/{}", key.path());
        let (parent, name) = split(&rel);
        let Some(dir) = self.found(parent)? else {
            return Ok(None);
        };
        // The one reader's open: a FIFO, a device or a link is refused
        // without blocking or following (`O_NOFOLLOW | O_NONBLOCK`, `fstat`).
        let (file, meta) = match crate::io::open_regular_at(&dir, name) {
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
        let (file, path, _) = create_temp(&self.tmp()?)?;
        Ok(Box::new(PosixStaged { file, path }))
    }

    fn install_private(&self, staged: Staged, key: &PrivateKey) -> Result<(), StoreError> {
        if staged.temp.is_empty() || staged.temp.contains('/') || staged.temp.starts_with('.') {
            return Err(StoreError::BadName(staged.temp));
        }
        let rel = format!("{PRIVATE_DIR}/{}", key.path());
        let (parent, name) = split(&rel);
        let dir = self.made(parent)?;
        rename_at(&self.tmp()?, &staged.temp, &dir, name)?;
        dir.sync().map_err(dir_err(&self.root))
    }

    fn clear_staging(&self) -> Result<(), StoreError> {
        // On the handle of `.rcpt/tmp/` (a link there is refused, never
        // followed); everything in it is a leftover of this store's writers.
        let tmp = self.tmp()?;
        tmp.remove_entries(|_, _| true)
            .map_err(dir_err(&self.root))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
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
        let d = Dir::open(tmp.path()).unwrap();
        std::fs::write(d.join("f"), [7u8; 10]).unwrap();
        assert_eq!(read_in(&d, "f", 10).unwrap().unwrap().len(), 10);
        assert!(matches!(
            read_in(&d, "f", 9),
            Err(StoreError::TooLarge { max: 9, .. })
        ));
        std::os::unix::fs::symlink(d.join("f"), d.join("l")).unwrap();
        assert!(matches!(read_in(&d, "l", 10), Err(StoreError::Io { .. })));
        let fifo = d.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(matches!(
                read_in(&d, "pipe", 10),
                Err(StoreError::Io { .. })
            ));
        }
        assert!(read_in(&d, "absent", 10).unwrap().is_none());
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
            let store = PosixStore::new(top.path());
            let barrier = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                for k in 0..8 {
                    let (store, barrier) = (&store, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let (tmp, out) = (store.tmp().unwrap(), store.made("out").unwrap());
                        write_durable(&tmp, &out, &k.to_string(), b"x")
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
        let store = PosixStore::new(tmp.path());
        let (t, out) = (store.tmp().unwrap(), store.made("out").unwrap());
        // The destination is a directory that is not empty: the rename fails.
        std::fs::create_dir_all(out.join("child/x")).unwrap();
        assert!(write_durable(&t, &out, "child", b"bytes").is_err());
        assert_eq!(t.names().unwrap().len(), 0);
    }

    /// A link planted in place of any directory of the log (the staging
    /// directory, the private directory, a tile directory, a private
    /// subdirectory) is refused with an error naming it, and nothing in
    /// the directory it points to is read, written or removed.
    #[test]
    fn a_link_in_place_of_a_directory_is_refused_and_nothing_outside_is_touched() {
        use crate::storage::{CheckpointStore as _, PrivateStore as _, TileStore as _};
        for planted in [
            ".rcpt/tmp",
            ".rcpt",
            "tile",
            "tile/entries",
            ".rcpt/checkpoints",
        ] {
            let top = tempfile::tempdir().unwrap();
            let log = top.path().join("log");
            let outside = top.path().join("outside");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(outside.join("old"), b"keep").unwrap();
            let at = log.join(planted);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(&outside, &at).unwrap();
            let store = PosixStore::new(&log);
            let tile = [(TileKey::entries(0, Width::Full), vec![1u8; 8])];
            let key = PrivateKey::in_dir(PrivateDir::Checkpoints, "7").unwrap();
            let results = [
                store.clear_staging().err(),
                store.lock(false).err(),
                store.create_tiles(&tile).err(),
                store.list_tiles(Family::Entries, 0, 0).err(),
                store.write_private(&key, b"x").err(),
                store.remove_private(std::slice::from_ref(&key)).err(),
                store.list_private(PrivateDir::Checkpoints).err(),
            ];
            let errors: Vec<String> = results
                .into_iter()
                .flatten()
                .map(|e| crate::io::error_chain(&e))
                .collect();
            assert!(!errors.is_empty(), "{planted}: nothing refused");
            for e in &errors {
                assert!(
                    e.contains("symbolic link") && e.contains(planted),
                    "{planted}: {e}"
                );
            }
            let mut left: Vec<_> = std::fs::read_dir(&outside)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            left.sort();
            assert_eq!(left, vec![std::ffi::OsString::from("old")], "{planted}");
            assert_eq!(std::fs::read(outside.join("old")).unwrap(), b"keep");
        }
    }
}
