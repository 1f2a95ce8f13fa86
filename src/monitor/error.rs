//! error: why a monitor's round could not complete (`monitor.error`).

use super::{SinkError, StateError};
use crate::storage::StoreError;
use crate::storage::walk::WalkError;

/// Why a round could not complete (reported as `monitor.error`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MonitorError {
    /// The source could not be read.
    #[error("reading the source {source_name}")]
    Source {
        /// The source.
        source_name: String,
        /// The cause.
        #[source]
        source: StoreError,
    },
    /// The source has no checkpoint.
    #[error("{0} has no checkpoint; is this a tiled log?")]
    NoCheckpoint(String),
    /// No known log key has the checkpoint's origin.
    #[error("no log key for the origin {0:?} (give --log-key or a trust file listing it)")]
    NoLogKey(String),
    /// A tile or entry bundle the signed tree needs could not be read
    /// (`WalkError::Tiles` or `WalkError::Bundle`).
    #[error(transparent)]
    Read(WalkError),
    /// The source's entries (or tiles) do not give the signed tree.
    #[error(
        "the source's entries up to index {end} do not give the signed tree of size {size}; \
         nothing past index {start} is reported"
    )]
    Mismatch {
        /// First entry of the bundle that failed.
        start: u64,
        /// End of the bundle.
        end: u64,
        /// The signed tree size.
        size: u64,
        /// What the consistency walk found.
        #[source]
        source: WalkError,
    },
    /// The state directory.
    #[error(transparent)]
    State(#[from] StateError),
    /// An event could not be delivered.
    #[error(transparent)]
    Sink(#[from] SinkError),
}
