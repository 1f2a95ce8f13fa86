//! log: the durable writer and reader of a tiled transparency log directory.
//!
//! STUB: interface fixed, body to be written (helper D).

use crate::keys::{NoteVerifier, SigningKey};
use crate::merkle::Hash;
use std::path::Path;

/// Why a log operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// Placeholder until the log lands.
    #[error("not implemented")]
    Unimplemented,
}

/// Where one appended entry landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Its index in the log.
    pub index: u64,
    /// False when the same entry was already logged (its first index is returned).
    pub new: bool,
}

/// A read-only view of a log directory at its latest checkpoint.
#[derive(Debug)]
pub struct Log {
    _private: (),
}

impl Log {
    /// Create a new empty log in `dir` (empty or absent), with its first checkpoint (size 0).
    pub fn init(dir: &Path, origin: &str, key: &SigningKey) -> Result<Log, LogError> {
        let _ = (dir, origin, key);
        todo!()
    }

    /// Open an existing log read-only at its latest checkpoint.
    pub fn open(dir: &Path) -> Result<Log, LogError> {
        let _ = dir;
        todo!()
    }

    /// Origin line (and log key name).
    pub fn origin(&self) -> &str {
        todo!()
    }

    /// The log's checkpoint verifier key.
    pub fn verifier(&self) -> &NoteVerifier {
        todo!()
    }

    /// Tree size of the latest checkpoint.
    pub fn size(&self) -> u64 {
        todo!()
    }

    /// Signed checkpoint note published at `size` (kept under `.rcpt/checkpoints/`).
    pub fn checkpoint_at(&self, size: u64) -> Result<String, LogError> {
        let _ = size;
        todo!()
    }

    /// Entry bytes at `index`.
    pub fn entry(&self, index: u64) -> Result<Vec<u8>, LogError> {
        let _ = index;
        todo!()
    }

    /// First index of the entry with this leaf hash, if logged.
    pub fn find(&self, leaf: &Hash) -> Result<Option<u64>, LogError> {
        let _ = leaf;
        todo!()
    }

    /// Inclusion proof of `index` in the tree of `size` leaves.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, LogError> {
        let _ = (index, size);
        todo!()
    }

    /// Consistency proof from `m` to `n`.
    pub fn consistency_proof(&self, m: u64, n: u64) -> Result<Vec<Hash>, LogError> {
        let _ = (m, n);
        todo!()
    }
}

/// The single writer of a log (holds `DIR/.rcpt/lock`).
#[derive(Debug)]
pub struct LogWriter {
    _private: (),
}

impl LogWriter {
    /// Take the lock (waiting for another writer when `wait`), repair any
    /// work past the checkpoint, and open for appends.
    pub fn open(dir: &Path, key: &SigningKey, wait: bool) -> Result<LogWriter, LogError> {
        let _ = (dir, key, wait);
        todo!()
    }

    /// Append a batch of entries durably, publish the new checkpoint, then return.
    pub fn append(&mut self, entries: &[Vec<u8>]) -> Result<Vec<Appended>, LogError> {
        let _ = entries;
        todo!()
    }

    /// The log as it stands after the last append.
    pub fn log(&self) -> &Log {
        todo!()
    }
}
