//! What the read API serves (the published checkpoint) and the health of the writer.

use super::observe::Metrics;
use super::sequencer::quorum_cosigners;
use crate::log::Log;
use crate::net::client::witnessing::Witnessing;
use crate::storage::Store;
use bytes::Bytes;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// What the read API serves and the health of the writer.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) published: RwLock<Published>,
    pub(super) writer_alive: AtomicBool,
    /// The log's origin and verifier key (for the status page).
    pub(super) origin: String,
    pub(super) vkey: String,
    pub(super) witnessing: Option<Arc<Witnessing>>,
    pub(super) metrics: Metrics,
    /// When the service started, and when it last published a checkpoint.
    started: Instant,
    last_published: std::sync::Mutex<Option<Instant>>,
}

/// The latest published checkpoint (empty: none yet, a witnessed log
/// before its first quorum).
#[derive(Debug, Clone)]
pub(super) struct Published {
    pub(super) size: u64,
    pub(super) checkpoint: Bytes,
    pub(super) store: Arc<dyn Store>,
    pub(super) dir: PathBuf,
}

impl Shared {
    /// A witnessed log publishes nothing until its checkpoint is cosigned:
    /// a stored checkpoint that already carries a quorum is published from
    /// the first request on (before any is accepted); any other waits for
    /// the writer thread to get it witnessed.
    pub(super) fn new(log: &Log, dir: &Path, witnessing: Option<Arc<Witnessing>>) -> Shared {
        let stored = (log.size(), Bytes::from(log.checkpoint().to_string()));
        let (size, checkpoint) = match witnessing.as_deref() {
            None => stored,
            Some(w) if quorum_cosigners(w, log.checkpoint()).is_some() => stored,
            Some(_) => (0, Bytes::new()),
        };
        let now = Instant::now();
        Shared {
            origin: log.origin().to_string(),
            vkey: log.verifier().to_string(),
            metrics: Metrics::new(witnessing.clone(), Arc::clone(log.store())),
            witnessing,
            started: now,
            last_published: std::sync::Mutex::new((!checkpoint.is_empty()).then_some(now)),
            published: RwLock::new(Published {
                size,
                checkpoint,
                store: Arc::clone(log.store()),
                dir: dir.to_path_buf(),
            }),
            writer_alive: AtomicBool::new(true),
        }
    }

    pub(super) fn published(&self) -> Published {
        match self.published.read() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub(super) fn publish(&self, size: u64, checkpoint: String) {
        let mut p = match self.published.write() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        p.size = size;
        p.checkpoint = Bytes::from(checkpoint);
        drop(p);
        if let Ok(mut last) = self.last_published.lock() {
            *last = Some(Instant::now());
        }
    }

    /// Time since this service last published a checkpoint (the stored
    /// one counts as published at start); before any, since start.
    pub(super) fn checkpoint_age(&self) -> Duration {
        let last = self.last_published.lock().map_or(None, |l| *l);
        last.unwrap_or(self.started).elapsed()
    }
}
