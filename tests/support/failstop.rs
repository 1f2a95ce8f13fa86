//! A store that stops dead after a number of writes: the crash of a writer
//! between any two of its storage calls, made from outside the library
//! (the library has no crash hook).
//!
//! [`FailStop`] wraps any [`Store`] and counts the calls that change it
//! (tiles created or removed, the checkpoint replaced, private objects
//! written, staged, installed or removed, staging cleared, a staged
//! object's writes and finish). After `budget` of them every call fails,
//! reads too, as a process that died would do nothing more: whatever the
//! writer does next (its error path, its repair, its drop) reaches no
//! store. [`FailStop::stopped`] tells whether the budget was reached, so a
//! test walks `budget = 0, 1, 2, ...` until an append runs whole: a crash
//! at every boundary between two storage calls, with the store as it was
//! left there.

use rcpt::storage::{
    CheckpointStore, Family, HoldStatus, PrivateDir, PrivateKey, PrivateStore, PublicKey,
    PublicRead, RandomRead, Staged, StagedWrite, Store, StoreError, TileKey, TileStore, Version,
    Versioned, WriterLock,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A store that fails every call once `budget` changing calls were made.
#[derive(Debug)]
pub struct FailStop {
    inner: Arc<dyn Store>,
    state: Arc<Budget>,
}

#[derive(Debug)]
struct Budget {
    budget: u64,
    spent: AtomicU64,
    refused: AtomicBool,
}

impl Budget {
    fn dead(&self) -> bool {
        self.spent.load(Ordering::SeqCst) >= self.budget
    }

    /// Count one changing call, or fail if the store is already dead.
    fn spend(&self) -> Result<(), StoreError> {
        let before = self.spent.fetch_add(1, Ordering::SeqCst);
        if before >= self.budget {
            return Err(self.refuse());
        }
        Ok(())
    }

    fn alive(&self) -> Result<(), StoreError> {
        if self.dead() {
            Err(self.refuse())
        } else {
            Ok(())
        }
    }

    fn refuse(&self) -> StoreError {
        self.refused.store(true, Ordering::SeqCst);
        crashed()
    }
}

fn crashed() -> StoreError {
    StoreError::Io {
        what: "the fail-stop store (the writer crashed here)".into(),
        source: std::io::Error::other("crashed"),
    }
}

impl FailStop {
    /// `inner`, dead after `budget` changing calls.
    pub fn new(inner: Arc<dyn Store>, budget: u64) -> Arc<FailStop> {
        Arc::new(FailStop {
            inner,
            state: Arc::new(Budget {
                budget,
                spent: AtomicU64::new(0),
                refused: AtomicBool::new(false),
            }),
        })
    }

    /// True when a call was refused (the writer "crashed" before it).
    pub fn stopped(&self) -> bool {
        self.state.refused.load(Ordering::SeqCst)
    }
}

impl PublicRead for FailStop {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn read(&self, key: &PublicKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        self.state.alive()?;
        self.inner.read(key, max)
    }
    fn read_checkpoint(&self, max: usize) -> Result<Option<Versioned>, StoreError> {
        self.state.alive()?;
        self.inner.read_checkpoint(max)
    }
    fn exists(&self) -> bool {
        self.inner.exists()
    }
}

impl TileStore for FailStop {
    fn create_tiles(&self, objects: &[(TileKey, Vec<u8>)]) -> Result<(), StoreError> {
        self.state.spend()?;
        self.inner.create_tiles(objects)
    }
    fn list_tiles(&self, family: Family, from: u64, to: u64) -> Result<Vec<TileKey>, StoreError> {
        self.state.alive()?;
        self.inner.list_tiles(family, from, to)
    }
    fn remove_tiles(&self, keys: &[TileKey]) -> Result<(), StoreError> {
        self.state.spend()?;
        self.inner.remove_tiles(keys)
    }
}

impl CheckpointStore for FailStop {
    fn is_empty(&self) -> Result<bool, StoreError> {
        self.state.alive()?;
        self.inner.is_empty()
    }
    fn replace_checkpoint(
        &self,
        expected: Option<&Version>,
        bytes: &[u8],
    ) -> Result<Version, StoreError> {
        self.state.spend()?;
        self.inner.replace_checkpoint(expected, bytes)
    }
    fn lock(&self, wait: bool) -> Result<Box<dyn WriterLock>, StoreError> {
        self.state.alive()?;
        self.inner.lock(wait)
    }
    fn hold_status(&self) -> Option<HoldStatus> {
        self.inner.hold_status()
    }
}

impl PrivateStore for FailStop {
    fn read_private(&self, key: &PrivateKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        self.state.alive()?;
        self.inner.read_private(key, max)
    }
    fn write_private(&self, key: &PrivateKey, bytes: &[u8]) -> Result<(), StoreError> {
        self.state.spend()?;
        self.inner.write_private(key, bytes)
    }
    fn remove_private(&self, keys: &[PrivateKey]) -> Result<(), StoreError> {
        self.state.spend()?;
        self.inner.remove_private(keys)
    }
    fn list_private(&self, dir: PrivateDir) -> Result<Vec<PrivateKey>, StoreError> {
        self.state.alive()?;
        self.inner.list_private(dir)
    }
    fn open_private(&self, key: &PrivateKey) -> Result<Option<Box<dyn RandomRead>>, StoreError> {
        self.state.alive()?;
        self.inner.open_private(key)
    }
    fn stage_private(&self) -> Result<Box<dyn StagedWrite>, StoreError> {
        self.state.spend()?;
        Ok(Box::new(StagedFailStop {
            inner: self.inner.stage_private()?,
            state: Arc::clone(&self.state),
        }))
    }
    fn install_private(&self, staged: Staged, key: &PrivateKey) -> Result<(), StoreError> {
        self.state.spend()?;
        self.inner.install_private(staged, key)
    }
    fn clear_staging(&self) -> Result<(), StoreError> {
        self.state.spend()?;
        self.inner.clear_staging()
    }
}

/// A staged object of a [`FailStop`]: its writes and finish count too.
struct StagedFailStop {
    inner: Box<dyn StagedWrite>,
    state: Arc<Budget>,
}

impl StagedWrite for StagedFailStop {
    fn write_at(&mut self, bytes: &[u8], offset: u64) -> Result<(), StoreError> {
        self.state.spend()?;
        self.inner.write_at(bytes, offset)
    }
    fn finish(self: Box<Self>) -> Result<Staged, StoreError> {
        self.state.spend()?;
        self.inner.finish()
    }
}
