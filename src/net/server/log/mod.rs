//! serve: the log as an HTTP service (spec/service.md).
//!
//! One process holds the log's writer lock. Async workers (tokio, hyper
//! HTTP/1.1) serve the read API (C2SP tlog-tiles) and admit `POST /add`
//! submissions; one dedicated writer thread closes batches (at
//! `batch_max` entries or `batch_wait` after a batch's first entry) and
//! integrates each with one durable append through the log's intake
//! ([`Intake::append_hashed`]: every tile, then the checkpoint, fsynced
//! and renamed; [`Intake::publish`]: cosigned first when witnessed). A submitter is answered
//! only after the append that holds its entry has published its checkpoint,
//! so every 200 survives a crash of the process at any instant.
//!
//! Memory is bounded by the queue: a submission takes one of `queue_max`
//! permits before its body is read and keeps it until it is answered, so at
//! most `queue_max` submissions are being read, queued, integrated or
//! answered at once; one more gets 503 with `Retry-After`.

use crate::keys::SigningKey;
use crate::limits::{MAX_APPEND_BATCH_ENTRIES, MAX_ENTRY_BUNDLE_BYTES, MAX_ENVELOPE_BYTES};
use crate::log::admit::AcceptedIssuers;
use crate::log::intake::{Intake, IntakeError};
use crate::log::{Log, LogError};
use crate::net::client::witnessing::Witnessing;
pub use crate::net::server::{CACHE_NONE, MAX_LOGGED_PATH_BYTES, RequestSink};
use crate::net::server::{Limits, bind, runtime_with_stop, serve};
use crate::storage::{Family, PublicKey, Store, TileKey};
use crate::tlog::tiles::MAX_HASH_TILE_BYTES;
use hyper::StatusCode;
use hyper::header;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, oneshot, watch};

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

/// A bound, not yet running, service: it holds the writer lock and the socket.
pub struct Server {
    config: ServeConfig,
    intake: Intake,
    listener: std::net::TcpListener,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("dir", &self.config.dir)
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Check the settings, take the log's writer lock (failing at once if
    /// another writer holds it), and bind `addr`.
    pub fn bind(config: ServeConfig, addr: &str) -> Result<Server, ServeError> {
        if !(1..=MAX_APPEND_BATCH_ENTRIES).contains(&config.batch_max) {
            return Err(ServeError::Setting(format!(
                "--batch-max must be 1..={MAX_APPEND_BATCH_ENTRIES}"
            )));
        }
        if !(1..=MAX_QUEUE).contains(&config.queue_max) {
            return Err(ServeError::Setting(format!(
                "--queue-max must be 1..={MAX_QUEUE}"
            )));
        }
        let intake = Intake::serve(
            config.open_store(),
            config.key.clone(),
            config.accepted.clone(),
            config.wait,
        )
        .map_err(|e| match e {
            IntakeError::Log(e) => ServeError::Log(e),
            e => ServeError::Intake(e),
        })?;
        let listener = bind(addr).map_err(|source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        Ok(Server {
            config,
            intake,
            listener,
        })
    }

    /// The address the socket is bound to (the port, when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until SIGTERM or SIGINT, then drain: stop accepting, finish
    /// the requests in flight (queued submissions are integrated and
    /// answered), and return.
    pub fn run(self, sink: RequestSink) -> Result<Summary, ServeError> {
        let (runtime, stop) = runtime_with_stop().map_err(ServeError::Start)?;
        self.run_until(&runtime, stop, sink)
    }

    /// [`Server::run`] with the stop signal given by the caller.
    fn run_until(
        self,
        runtime: &tokio::runtime::Runtime,
        stop: watch::Receiver<bool>,
        sink: RequestSink,
    ) -> Result<Summary, ServeError> {
        let Server {
            config,
            mut intake,
            listener,
        } = self;
        let Some(log) = intake.log() else {
            return Err(IntakeError::WriterAway.into());
        };
        let shared = Arc::new(Shared::new(log, &config.dir, config.witnessing.clone()));
        let (tx, rx) = mpsc::channel::<Job>();
        let batcher = Batcher {
            config: config.clone(),
            shared: Arc::clone(&shared),
            sink: Arc::clone(&sink),
            runtime: runtime.handle().clone(),
            stop: stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("rcpt-log-writer".to_string())
            .spawn(move || batcher.run(intake, rx))
            .map_err(ServeError::Start)?;
        let service = LogService {
            shared: Arc::clone(&shared),
            tx,
            permits: Arc::new(Semaphore::new(config.queue_max)),
            queue_max: config.queue_max,
            accepted: config.accepted,
        };
        let limits = Limits {
            max_connections: MAX_CONNECTIONS,
            header_timeout: HEADER_READ_TIMEOUT,
        };
        // The service, and with it the last sender of the queue, is gone
        // when serve returns: the writer integrates what is queued,
        // answers it, and ends.
        let served = serve(runtime, listener, limits, stop, service, sink);
        let batches = thread.join().map_err(|_| ServeError::WriterThread)?;
        let requests = served.map_err(ServeError::Start)?;
        Ok(Summary {
            requests,
            batches: batches.0,
            integrated: batches.1,
        })
    }
}

mod observe;
mod reply;
mod routes;
mod sequencer;
mod shared;
mod status;

use observe::*;
use reply::*;
use routes::*;
use sequencer::*;
use shared::*;
use status::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(path: &str) -> TileKey {
        match PublicKey::from_path(path) {
            Some(PublicKey::Tile(t)) => t,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn a_tile_is_served_only_inside_the_published_tree() {
        for (path, first_size) in [
            ("tile/0/001", 512),
            ("tile/entries/001.p/3", 259),
            ("tile/1/000", 65_536),
            ("tile/1/000.p/1", 256),
            ("tile/2/000.p/1", 65_536),
        ] {
            assert!(!within(&tile(path), first_size - 1), "{path}");
            assert!(within(&tile(path), first_size), "{path}");
        }
        let last = format!(
            "tile/0/{}",
            crate::tlog::tiles::path::encode_index(u64::MAX)
        );
        assert!(!within(&tile(&last), u64::MAX));
    }
}
