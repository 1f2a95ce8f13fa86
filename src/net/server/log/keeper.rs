//! keeper: the service's one writer, kept. It is held while it can write;
//! once it has stopped for good (its lease lost, another writer's
//! checkpoint found, a lost answer it could not settle), it is dropped,
//! which releases its hold, and opened again on a schedule by the running
//! service, however long the store stays away (spec/storage.md "Recovery
//! of a served log"). Nothing here knows HTTP: the writer thread asks it
//! for the writer, tells it of failures, and lets it tend the writer
//! between batches.

use crate::keys::SigningKey;
use crate::log::{LogError, LogWriter};
use crate::storage::Store;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// First wait before opening a stopped writer again.
pub const REOPEN_FIRST_DELAY: Duration = Duration::from_millis(50);
/// Longest wait between two attempts to open it (the wait doubles up to it).
pub const REOPEN_MAX_DELAY: Duration = Duration::from_secs(1);
/// How often the hold (the lease) of a writer waiting for work is looked at.
pub const HOLD_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// What tending the writer did.
#[derive(Debug)]
pub(super) enum Tended {
    /// Nothing to do, or not yet time.
    Nothing,
    /// The writer's hold was lost while it waited for work: it was dropped.
    Lost,
    /// A stopped writer was opened again, after this many attempts.
    Reopened { attempts: u64, after: Duration },
    /// An attempt to open it failed (the error chain); the next one is due
    /// after `retry_in`.
    NotYet { error: String, retry_in: Duration },
}

/// The writer of a service, and how to open it again.
pub(super) struct WriterKeeper {
    writer: Option<LogWriter>,
    store: Arc<dyn Store>,
    key: SigningKey,
    /// Since when the writer has been gone, attempts made, the next wait
    /// and when the next attempt is due.
    gone_since: Instant,
    attempts: u64,
    delay: Duration,
    due: Instant,
}

impl WriterKeeper {
    /// Keeps `writer`, opened on its store with `key`.
    pub(super) fn new(writer: LogWriter, key: SigningKey) -> WriterKeeper {
        let now = Instant::now();
        WriterKeeper {
            store: Arc::clone(writer.log().store()),
            writer: Some(writer),
            key,
            gone_since: now,
            attempts: 0,
            delay: REOPEN_FIRST_DELAY,
            due: now,
        }
    }

    /// The writer, while there is one that can write.
    pub(super) fn writer(&mut self) -> Option<&mut LogWriter> {
        self.writer.as_mut()
    }

    /// After an append failed with `error`: a writer stopped for good is
    /// dropped (releasing its hold) and its reason returned; one that can
    /// go on (it repairs at its next append) is kept.
    pub(super) fn failed(&mut self, error: &LogError) -> Option<&'static str> {
        let w = self.writer.as_ref()?;
        let reason = match (w.stopped(), error) {
            (Some(reason), _) => reason,
            (None, LogError::Stopped { reason }) => *reason,
            _ => return None,
        };
        self.drop_writer();
        Some(reason)
    }

    /// Between batches: a writer whose hold was lost is dropped; a missing
    /// one is opened when due (not while `stopping`).
    pub(super) fn tend(&mut self, stopping: bool) -> Tended {
        if let Some(w) = &self.writer {
            let held = w.log().store().hold_status().is_none_or(|h| h.held);
            if held {
                return Tended::Nothing;
            }
            self.drop_writer();
            return Tended::Lost;
        }
        if stopping || Instant::now() < self.due {
            return Tended::Nothing;
        }
        self.attempts += 1;
        match LogWriter::open_store(Arc::clone(&self.store), &self.key, false) {
            Ok(writer) => {
                self.writer = Some(writer);
                Tended::Reopened {
                    attempts: self.attempts,
                    after: self.gone_since.elapsed(),
                }
            }
            Err(e) => {
                let retry_in = self.delay;
                self.due = Instant::now() + retry_in;
                self.delay = (self.delay * 2).min(REOPEN_MAX_DELAY);
                Tended::NotYet {
                    error: crate::io::error_chain(&e),
                    retry_in,
                }
            }
        }
    }

    /// How long the writer thread may wait for work before tending again.
    pub(super) fn next_tick(&self) -> Duration {
        match &self.writer {
            Some(_) => HOLD_CHECK_INTERVAL,
            None => self
                .due
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(1), HOLD_CHECK_INTERVAL),
        }
    }

    fn drop_writer(&mut self) {
        // Dropping releases the hold (a lease still ours is marked
        // released; one lost is remembered so that it is taken back
        // without waiting out its TTL).
        self.writer = None;
        let now = Instant::now();
        self.gone_since = now;
        self.attempts = 0;
        self.delay = REOPEN_FIRST_DELAY;
        self.due = now + REOPEN_FIRST_DELAY;
    }
}
