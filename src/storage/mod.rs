//! storage: where a log's bytes live, behind one interface.
//!
//! Boundary: every read and write of a log's tiles, entry bundles,
//! checkpoint and private state goes through [`Store`] (or, for a source
//! that only serves public objects, [`PublicRead`]). The log decides what
//! to write and in which order (`spec/log.md`); a store decides only how
//! bytes become durable where it keeps them. Nothing here knows what a
//! hash or a checkpoint means. The contract every implementation keeps is
//! `spec/storage.md`, and [`contract`] tests it through the trait, so a
//! second backend runs the same tests.
//!
//! Implementations: [`posix::PosixStore`], a directory (the first, and the
//! model: temporary file, fsync, rename, fsync the directory);
//! [`PublicOnly`], any [`PublicRead`] (a mirror's HTTP source, a copy of the
//! public files) as a read-only store with no private state. An object
//! store is one more: its immutable writes are `If-None-Match: *` PUTs,
//! its checkpoint replacement an `If-Match` PUT on the ETag, its private
//! objects live under `PREFIX/.rcpt/`.

pub mod contract;
mod durable;
pub mod posix;
#[cfg(feature = "s3")]
pub mod s3;
pub mod tiles;
pub mod walk;

pub use crate::tlog::tiles::path::{Family, PrivateDir, PrivateKey, PublicKey, TileKey, Width};

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An I/O operation on `what` (a file, directory or object) failed.
    #[error("{what}")]
    Io {
        /// The file, directory or object.
        what: String,
        /// The OS or transport error.
        #[source]
        source: std::io::Error,
    },
    /// The device holding the log is full.
    #[error(
        "no space left on the device holding {what}; free some space and run the \
         append again (the log is unchanged: its checkpoint names only durable files)"
    )]
    NoSpace {
        /// The file being written.
        what: String,
    },
    /// The store is on a read-only file system.
    #[error(
        "{what} is on a read-only file system; appending needs write access to the log \
         directory (remount it read-write, or copy the log)"
    )]
    ReadOnlyFs {
        /// The file or directory that could not be written.
        what: String,
    },
    /// An object is larger than the caller's limit for its kind.
    #[error("{what} is over {max} bytes; it is not a file this log wrote")]
    TooLarge {
        /// The object.
        what: String,
        /// The limit.
        max: usize,
    },
    /// An immutable object already holds other bytes (a create-only
    /// write met a different object: another writer, or a damaged log).
    #[error(
        "{key} already holds different bytes; an immutable object is never replaced \
         (is another writer using this log?)"
    )]
    Conflict {
        /// The object.
        key: TileKey,
    },
    /// The checkpoint is not the version the writer read: another writer
    /// published in between, so this one must stop.
    #[error(
        "the checkpoint changed since this writer read it (another writer published); \
         stopping without publishing"
    )]
    CheckpointMoved,
    /// Another writer holds the lock.
    #[error(
        "another rcpt process is writing to {store} (lock {lock} is held); \
         retry when it finishes, or pass --wait"
    )]
    Locked {
        /// The store (log directory).
        store: String,
        /// The lock (file or object).
        lock: String,
    },
    /// This writer's hold on the store was lost (its lease expired or was
    /// taken over): it must not write again.
    #[error("{store}: {detail}; this writer stopped (another sequencer may hold the log now)")]
    LockLost {
        /// The store.
        store: String,
        /// How the hold was lost.
        detail: String,
    },
    /// The store serves public objects only.
    #[error("{store} is read-only here (public files only); writing needs the log itself")]
    ReadOnly {
        /// The store.
        store: String,
    },
    /// A private name that is not one path element.
    #[error("{0:?} is not a private object name")]
    BadName(String),
    /// A writing thread stopped unexpectedly.
    #[error("a file-writing thread stopped unexpectedly; run the append again")]
    Thread,
}

impl StoreError {
    /// True when the error says the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// An opaque token for one version of the checkpoint (an object store's
/// ETag; for a directory, a digest of the bytes). Compare-and-swap
/// replaces the checkpoint only if it is still this version.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Version(pub String);

/// The published checkpoint as read, with its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    /// The checkpoint bytes.
    pub bytes: Vec<u8>,
    /// Their version, for [`Store::replace_checkpoint`].
    pub version: Version,
}

/// What a read-only source of a log must provide: its public objects.
/// An HTTP mirror source, a copy of the public files, a directory.
pub trait PublicRead: Send + Sync + std::fmt::Debug {
    /// Where the objects are, for messages (a directory, a URL).
    fn describe(&self) -> String;

    /// The object `key`, at most `max` bytes: `Ok(None)` when it does not
    /// exist, [`StoreError::TooLarge`] when it is longer (read no further
    /// than `max + 1` bytes).
    fn read(&self, key: &PublicKey, max: usize) -> Result<Option<Vec<u8>>, StoreError>;

    /// The checkpoint (at most `max` bytes) with its version.
    fn read_checkpoint(&self, max: usize) -> Result<Option<Versioned>, StoreError>;

    /// False when the source is known not to exist at all (a directory
    /// that is not there), so "no log here" can say which it is; true
    /// when it exists or cannot tell (a bucket, a URL).
    fn exists(&self) -> bool {
        true
    }
}

/// Random-access reads of one private object (a dedup run).
pub trait RandomRead: Send + Sync {
    /// Its length in bytes.
    fn len(&self) -> u64;
    /// True when it holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`; fails if the object ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), StoreError>;
}

/// A private object being written: positional writes, then [`finish`],
/// which makes it durable under no name yet.
///
/// [`finish`]: StagedWrite::finish
pub trait StagedWrite: Send {
    /// Write `bytes` at `offset`.
    fn write_at(&mut self, bytes: &[u8], offset: u64) -> Result<(), StoreError>;
    /// Make the whole object durable; [`Store::install_private`] names it.
    fn finish(self: Box<Self>) -> Result<Staged, StoreError>;
}

/// A durable private object waiting for its name.
#[derive(Debug)]
pub struct Staged {
    /// The store's temporary name for it.
    pub temp: String,
}

/// The writer's exclusive hold on a log (a file lock, a lease object).
/// Dropping it releases the hold.
pub trait WriterLock: Send + Sync + std::fmt::Debug {
    /// Fail if the hold was lost (a lease expired): a writer checks this
    /// before it publishes. A file lock is never lost while held.
    fn check(&self) -> Result<(), StoreError>;
}

/// The immutable half of a log: tiles and entry bundles, written once.
///
/// [`TileStore::create_tiles`] is create-only: an object that exists with
/// the same bytes is a retried write and succeeds, one with different bytes
/// is [`StoreError::Conflict`]; on return every object is durable.
pub trait TileStore: PublicRead {
    /// Write immutable objects, each create-only (same bytes: success;
    /// other bytes: [`StoreError::Conflict`]). On return every object is
    /// durable under its name (a directory: each file fsynced and renamed,
    /// then each directory that gained a name fsynced).
    fn create_tiles(&self, objects: &[(TileKey, Vec<u8>)]) -> Result<(), StoreError>;

    /// Every stored tile of `family` with an index in `from..=to`, full and
    /// partial, in no particular order (for the writer's repair).
    fn list_tiles(&self, family: Family, from: u64, to: u64) -> Result<Vec<TileKey>, StoreError>;

    /// Remove tiles (absent ones are fine). Only the writer's repair calls
    /// this, for tiles past the published checkpoint. A removal need not be
    /// durable on return: one lost in a crash is repeated by the next repair.
    fn remove_tiles(&self, keys: &[TileKey]) -> Result<(), StoreError>;
}

/// The one mutable public object and who may change it: the checkpoint's
/// compare-and-swap and the writer's lock (Sunlight's `LockBackend`).
pub trait CheckpointStore: PublicRead {
    /// True when the store holds nothing yet (a new log may be made here).
    fn is_empty(&self) -> Result<bool, StoreError>;

    /// Replace the checkpoint with `bytes` if it is still version
    /// `expected` (`None`: only if there is none), durably; else
    /// [`StoreError::CheckpointMoved`]. Returns the new version.
    fn replace_checkpoint(
        &self,
        expected: Option<&Version>,
        bytes: &[u8],
    ) -> Result<Version, StoreError>;

    /// Take the writer's lock: wait for it when `wait`, else fail at once
    /// with [`StoreError::Locked`].
    fn lock(&self, wait: bool) -> Result<Box<dyn WriterLock>, StoreError>;

    /// The state of a writer's hold that can be lost (a lease taken
    /// through this store), for an operator's metrics; `None` for a hold
    /// that cannot be lost (a file lock) or before one was taken.
    fn hold_status(&self) -> Option<HoldStatus> {
        None
    }
}

/// A lease's state as [`CheckpointStore::hold_status`] reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HoldStatus {
    /// True while the hold is this writer's.
    pub held: bool,
    /// Renewals that succeeded.
    pub renewals: u64,
    /// Renewals that failed (refused, or a transport error or timeout).
    pub renewal_failures: u64,
    /// Time left before the holder must stop (zero once lost).
    pub remaining: std::time::Duration,
}

/// The writer's private state beside the public objects (under
/// `.rcpt/`): settings, the dedup index, kept checkpoints. Never served.
/// Private objects are replaced whole and durably.
pub trait PrivateStore: Send + Sync {
    /// The private object `key`, at most `max` bytes (`Ok(None)`: absent).
    fn read_private(&self, key: &PrivateKey, max: usize) -> Result<Option<Vec<u8>>, StoreError>;

    /// Replace the private object `key` with `bytes`, whole and durably.
    fn write_private(&self, key: &PrivateKey, bytes: &[u8]) -> Result<(), StoreError>;

    /// Remove private objects (absent ones are fine). Need not be durable
    /// on return: every removal the log makes is repeated by the next
    /// writer's repair if a crash loses it.
    fn remove_private(&self, keys: &[PrivateKey]) -> Result<(), StoreError>;

    /// The objects in a private directory, sorted by name.
    fn list_private(&self, dir: PrivateDir) -> Result<Vec<PrivateKey>, StoreError>;

    /// Random-access reads of a private object (`Ok(None)`: absent).
    fn open_private(&self, key: &PrivateKey) -> Result<Option<Box<dyn RandomRead>>, StoreError>;

    /// Begin writing a private object that [`PrivateStore::install_private`]
    /// will name once it is durable.
    fn stage_private(&self) -> Result<Box<dyn StagedWrite>, StoreError>;

    /// Give a staged object its name, durably (replacing any object of
    /// that name).
    fn install_private(&self, staged: Staged, key: &PrivateKey) -> Result<(), StoreError>;

    /// Drop what an interrupted writer left in the store's own staging
    /// area (temporary files). Called by a writer holding the lock.
    fn clear_staging(&self) -> Result<(), StoreError>;
}

/// Where a log lives: its public objects ([`PublicRead`], [`TileStore`]),
/// its checkpoint and writer lock ([`CheckpointStore`]) and its private
/// state ([`PrivateStore`]). Every type with the four is a `Store`; a
/// source that only serves public objects (a mirror's HTTP source) is a
/// [`PublicRead`] and nothing more. The contract is `spec/storage.md`,
/// tested one group per trait by [`contract`].
pub trait Store: TileStore + CheckpointStore + PrivateStore {}

impl<T: TileStore + CheckpointStore + PrivateStore + ?Sized> Store for T {}
