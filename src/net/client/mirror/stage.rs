//! The staging area while a run checks: fetched files are read from the
//! stage first, then from the mirror itself ([`Union`]), each with the read
//! limit of its kind.

use super::error::MirrorError;
use crate::limits::MAX_ENTRY_BUNDLE_BYTES;
use crate::storage::posix::PosixStore;
use crate::storage::{Family, PublicKey, PublicRead, Store, StoreError, TileKey, Versioned};
use crate::tlog::tiles::MAX_HASH_TILE_BYTES;
use std::sync::Arc;

/// Where a fetched object is read from while it is checked: the staging
/// area first, then the mirror itself.
#[derive(Debug)]
pub(super) struct Union {
    /// Files fetched in this run or an interrupted one.
    pub(super) staged: PosixStore,
    /// The mirror.
    pub(super) public: Arc<dyn Store>,
}

impl PublicRead for Union {
    fn describe(&self) -> String {
        self.public.describe()
    }
    fn read(&self, key: &PublicKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        match self.staged.read(key, max)? {
            Some(bytes) => Ok(Some(bytes)),
            None => self.public.read(key, max),
        }
    }
    fn read_checkpoint(&self, max: usize) -> Result<Option<Versioned>, StoreError> {
        self.public.read_checkpoint(max)
    }
}

/// The read limit of a tile of `family`.
pub(super) fn max_bytes(family: Family) -> usize {
    match family {
        Family::Entries => MAX_ENTRY_BUNDLE_BYTES,
        Family::Hashes(_) => MAX_HASH_TILE_BYTES,
    }
}

/// True when the mirror already holds the tile `key` (a directory: the
/// file exists; another store: reading it finds it).
pub(super) fn has_tile(public: &dyn Store, key: &TileKey) -> Result<bool, MirrorError> {
    Ok(public
        .read(&PublicKey::Tile(*key), max_bytes(key.family()))?
        .is_some())
}

/// A fetched object (staged, else already mirrored), which must exist.
pub(super) fn read_new(union: &Union, key: &TileKey) -> Result<Vec<u8>, MirrorError> {
    union
        .read(&PublicKey::Tile(*key), max_bytes(key.family()))?
        .ok_or_else(|| MirrorError::Mismatch(format!("{key} was not fetched")))
}
