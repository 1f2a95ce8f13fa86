//! serve: the log as an HTTP service (spec/service.md).
//!
//! One process holds the log's writer lock. Async workers (tokio, hyper
//! HTTP/1.1) serve the read API (C2SP tlog-tiles) and admit `POST /add`
//! submissions; one dedicated writer thread closes batches (at
//! `batch_max` entries or `batch_wait` after a batch's first entry) and
//! integrates each with one durable append through the log's intake
//! ([`Intake::append_hashed`]: every tile, then the checkpoint, fsynced
//! and renamed; [`Intake::publish`]: cosigned first when witnessed). A
//! submitter is answered only after the append that holds its entry has
//! published its checkpoint, so every 200 survives a crash of the process
//! at any instant.
//!
//! Memory is bounded by the queue: a submission takes one of `queue_max`
//! permits before its body is read and keeps it until it is answered, so at
//! most `queue_max` submissions are being read, queued, integrated or
//! answered at once; one more gets 503 with `Retry-After`.
//!
//! [`Intake::append_hashed`]: crate::log::intake::Intake::append_hashed
//! [`Intake::publish`]: crate::log::intake::Intake::publish

use crate::keys::SigningKey;
use crate::limits::MAX_ENVELOPE_BYTES;
use crate::log::LogError;
use crate::log::admit::AcceptedIssuers;
use crate::log::intake::IntakeError;
use crate::net::client::witnessing::Witnessing;
pub use crate::net::server::{CACHE_NONE, MAX_LOGGED_PATH_BYTES, RequestSink};
use crate::storage::Store;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Largest `POST /add` body: one envelope (`limits::MAX_ENVELOPE_BYTES`).
pub const MAX_BODY_BYTES: usize = MAX_ENVELOPE_BYTES;
/// Most open connections; the accept loop waits for one to close beyond it.
pub const MAX_CONNECTIONS: usize = 16_384;
/// Largest `--queue-max`.
pub const MAX_QUEUE: usize = 1 << 20;
/// Time allowed for a request's headers to arrive.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed for a `POST /add` body to arrive.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// `Retry-After` of a 503 (seconds).
pub const RETRY_AFTER_SECONDS: u64 = 1;
/// Cache-Control of the checkpoint (C2SP tlog-tiles: mutable).
pub const CACHE_CHECKPOINT: &str = "no-cache";
/// Cache-Control of a full tile or entry bundle (immutable once published).
pub const CACHE_FULL_TILE: &str = "public, max-age=604800, immutable";
/// Cache-Control of a partial tile (spec/service.md explains the short life).
pub const CACHE_PARTIAL_TILE: &str = "public, max-age=60";

/// How the service runs.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The log directory (for a log on object storage, its `s3://` location, for messages).
    pub dir: PathBuf,
    /// Where the log lives: `None` is the directory `dir`; an object store
    /// (`s3://`) is given here.
    pub store: Option<Arc<dyn Store>>,
    /// Wait for the writer lock (a standby: on object storage, until the
    /// holder's lease is released or expires) instead of failing at once.
    pub wait: bool,
    /// The log's signing key.
    pub key: SigningKey,
    /// Accepted issuers (at least one, by type): an envelope needs a
    /// signature by one of them, under the name its payload gives as `issuer`.
    pub accepted: AcceptedIssuers,
    /// Most entries in one batch (1..=`MAX_APPEND_BATCH_ENTRIES`).
    pub batch_max: usize,
    /// How long a batch stays open after its first entry.
    pub batch_wait: Duration,
    /// Most submissions in the service at once (1..=[`MAX_QUEUE`]).
    pub queue_max: usize,
    /// Witnesses whose quorum must cosign each checkpoint before it is
    /// published (`--witness-policy`); `None` publishes at once.
    pub witnessing: Option<Arc<Witnessing>>,
}

impl ServeConfig {
    /// The store of the log: the one given, or the directory.
    fn open_store(&self) -> Arc<dyn Store> {
        match &self.store {
            Some(store) => Arc::clone(store),
            None => Arc::new(crate::storage::posix::PosixStore::new(&self.dir)),
        }
    }
}

/// Why the service could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A setting is out of range.
    #[error("{0}")]
    Setting(String),
    /// Opening or writing the log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Opening the log's intake failed.
    #[error(transparent)]
    Intake(#[from] IntakeError),
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The async runtime, a signal handler or the writer thread could not start.
    #[error("starting the service: {0}")]
    Start(std::io::Error),
    /// The writer thread stopped abnormally.
    #[error("the log writer thread stopped unexpectedly")]
    WriterThread,
}

/// What a service did, returned when it has drained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Requests answered.
    pub requests: u64,
    /// Durable appends made.
    pub batches: u64,
    /// Submissions integrated (new or duplicate).
    pub integrated: u64,
}

mod observe;
mod reply;
mod routes;
mod sequencer;
mod server;
mod shared;
mod status;

pub use server::Server;
