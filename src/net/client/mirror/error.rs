//! What a mirror run reports: its error and, when it succeeds, what it did.

use crate::net::client::ClientError;
use crate::storage::StoreError;
use crate::tlog::merkle::Hash;
use std::path::PathBuf;

/// Why a mirror run stopped (the mirror is then as it was before the run).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MirrorError {
    /// A request failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The log serves no checkpoint.
    #[error("{url} has no checkpoint (HTTP 404); is this the URL of a tiled log?")]
    NoCheckpoint {
        /// The checkpoint URL.
        url: String,
    },
    /// The log's checkpoint does not verify under the log key.
    #[error(
        "{url} does not verify under the log key given (is it the right log, and that log's \
         .vkey?)"
    )]
    Checkpoint {
        /// The checkpoint URL.
        url: String,
        /// What is wrong with the checkpoint.
        #[source]
        source: Box<crate::log::LogError>,
    },
    /// The mirror directory holds something else.
    #[error("the mirror at {dir}: {detail}")]
    Local {
        /// The mirror directory.
        dir: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The mirror's settings could not be read.
    #[error("the mirror at {dir}")]
    LocalSettings {
        /// The mirror directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<crate::log::LogError>,
    },
    /// The mirror's own checkpoint does not verify under the log key.
    #[error("the mirror at {dir}: its checkpoint does not verify (not a mirror of this log?)")]
    NotThisLog {
        /// The mirror directory.
        dir: PathBuf,
        /// What is wrong with the checkpoint.
        #[source]
        source: Box<crate::log::LogError>,
    },
    /// The mirror's settings could not be put as JSON.
    #[error("the mirror's settings")]
    SettingsJson(#[source] serde_json::Error),
    /// A tile the mirror holds does not decode.
    #[error("the mirror's {key} does not decode (the mirror is kept)")]
    LocalTile {
        /// The tile.
        key: crate::storage::TileKey,
        /// Why it does not decode.
        #[source]
        source: crate::tlog::tiles::TileError,
    },
    /// A task of the run stopped (it panicked or was cancelled).
    #[error("{0} stopped")]
    Task(&'static str, #[source] tokio::task::JoinError),
    /// The log's checkpoint is older than the mirror's.
    #[error(
        "the log now shows size {new}, smaller than the mirrored size {old}: it rolled back \
         (the mirror is kept at {old})"
    )]
    Rollback {
        /// Mirrored size.
        old: u64,
        /// The log's size.
        new: u64,
    },
    /// Same size, another root: two histories.
    #[error(
        "the log shows a different root at the mirrored size {size}: it forked (the mirror is kept)"
    )]
    Fork {
        /// The size.
        size: u64,
    },
    /// The new tree does not extend the mirrored one.
    #[error(
        "the log rewrote its history: no consistency from the mirrored size {old} to {new} \
         ({detail}); the mirror is kept at {old}"
    )]
    Rewritten {
        /// Mirrored size.
        old: u64,
        /// The log's size.
        new: u64,
        /// What failed.
        detail: String,
    },
    /// The fetched files do not match the checkpoint.
    #[error("the log's files do not match its checkpoint: {0}; the mirror is kept")]
    Mismatch(String),
    /// A file the checkpoint needs is not served.
    #[error("{url}: not found, but the checkpoint of size {size} needs it")]
    Missing {
        /// The file's URL.
        url: String,
        /// The checkpoint size.
        size: u64,
    },
    /// A local file operation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The mirror directory could not be made.
    #[error("{path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What a run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorReport {
    /// Size mirrored before the run (0 for a new mirror).
    pub old_size: u64,
    /// Size mirrored now.
    pub new_size: u64,
    /// Files fetched in this run (staged files from an interrupted run not counted).
    pub fetched: u64,
    /// The new root.
    pub root: Hash,
}
