//! traits: what a store provides (spec/storage.md): public reads, random
//! reads, staged writes, the writer's lock, tiles, the checkpoint and the
//! private state, and [`Store`], all of them.

use super::{Family, PrivateDir, PrivateKey, PublicKey, StoreError, TileKey};

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
