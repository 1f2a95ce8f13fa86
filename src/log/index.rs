//! index: the dedup index, a redb map from leaf hash to the first index of
//! that entry, under `DIR/.rcpt/index`.
//!
//! The index is a hint, never the truth: the caller confirms every hit
//! against the checkpoint size and the entry bytes (see `spec/log.md`,
//! "Dedup"). It also records `indexed_size`, the tree size of its last
//! commit, so a lost or stale index is rebuilt from the entries.

use super::LogError;
use crate::merkle::Hash;
use redb::{Database, TableDefinition};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Leaf hash to first index.
const LEAVES: TableDefinition<&[u8; 32], u64> = TableDefinition::new("leaves");
/// Bookkeeping: `indexed_size`.
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Key of the tree size covered by the last commit.
const INDEXED_SIZE: &str = "indexed_size";
/// Page cache of the index: memory stays bounded whatever the log's size.
const INDEX_CACHE_BYTES: usize = 64 * 1024 * 1024;
/// How long an open waits for a reader that holds the file briefly.
const OPEN_RETRY: Duration = Duration::from_secs(10);

/// An open dedup index.
pub struct Index {
    db: Database,
    path: PathBuf,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index").field("path", &self.path).finish()
    }
}

/// Map any redb error to [`LogError::Index`] naming the file.
fn idx_err<E: Into<redb::Error>>(path: &Path) -> impl FnOnce(E) -> LogError + '_ {
    move |e| LogError::Index {
        path: path.to_path_buf(),
        detail: e.into().to_string(),
    }
}

impl Index {
    /// Open (creating if absent) the index at `path`. When `retry`, a file
    /// held by another process (a reader's short look-up) is retried for a
    /// few seconds; otherwise `Ok(None)` is returned at once.
    pub fn open(path: &Path, retry: bool) -> Result<Option<Index>, LogError> {
        let start = Instant::now();
        loop {
            match Database::builder()
                .set_cache_size(INDEX_CACHE_BYTES)
                .create(path)
            {
                Ok(db) => {
                    return Ok(Some(Index {
                        db,
                        path: path.to_path_buf(),
                    }));
                }
                Err(redb::DatabaseError::DatabaseAlreadyOpen)
                    if retry && start.elapsed() < OPEN_RETRY =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(redb::DatabaseError::DatabaseAlreadyOpen) if !retry => return Ok(None),
                Err(e) => return Err(idx_err(path)(e)),
            }
        }
    }

    /// The tree size covered by the last commit (0 for a new index).
    pub fn indexed_size(&self) -> Result<u64, LogError> {
        let p = &self.path;
        let txn = self.db.begin_read().map_err(idx_err(p))?;
        let table = match txn.open_table(META) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
            Err(e) => return Err(idx_err(p)(e)),
        };
        let v = table.get(INDEXED_SIZE).map_err(idx_err(p))?;
        Ok(v.map(|g| g.value()).unwrap_or(0))
    }

    /// The stored index of each leaf hash (unconfirmed hints).
    pub fn get_many(&self, leaves: &[Hash]) -> Result<Vec<Option<u64>>, LogError> {
        let p = &self.path;
        let txn = self.db.begin_read().map_err(idx_err(p))?;
        let table = match txn.open_table(LEAVES) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![None; leaves.len()]),
            Err(e) => return Err(idx_err(p)(e)),
        };
        leaves
            .iter()
            .map(|l| Ok(table.get(l).map_err(idx_err(p))?.map(|g| g.value())))
            .collect()
    }

    /// Durably record `leaves` (leaf hash, index) and the new `indexed_size`
    /// in one transaction; returns after the commit is on disk.
    pub fn commit(&self, leaves: &[(Hash, u64)], indexed_size: u64) -> Result<(), LogError> {
        let p = &self.path;
        let txn = self.db.begin_write().map_err(idx_err(p))?;
        {
            let mut table = txn.open_table(LEAVES).map_err(idx_err(p))?;
            // Sorted keys make the B-tree inserts sequential.
            let mut sorted: Vec<&(Hash, u64)> = leaves.iter().collect();
            sorted.sort_unstable_by_key(|p| p.0);
            for (leaf, index) in sorted {
                table.insert(leaf, index).map_err(idx_err(p))?;
            }
            let mut meta = txn.open_table(META).map_err(idx_err(p))?;
            meta.insert(INDEXED_SIZE, indexed_size)
                .map_err(idx_err(p))?;
        }
        txn.commit().map_err(idx_err(p))
    }
}
