//! error: why a storage operation failed, the same for every backend.

use super::TileKey;

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
