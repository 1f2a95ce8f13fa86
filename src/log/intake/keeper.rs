//! keeper: the intake's one writer, kept. It is held while it can write.
//! A writer stopped for good (its lease lost, another writer's checkpoint
//! found, a lost answer it could not settle) is dropped, which releases
//! its hold, and opened again: on demand at the next append (a command,
//! the tool-call proxy), or, for a service, on a schedule while the
//! service runs, however long the store stays away (spec/storage.md
//! "Recovery of a served log"). Nothing here knows HTTP: the service's
//! writer thread asks for the writer, and lets the keeper tend it between
//! batches.

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

/// When a missing writer is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reopen {
    /// At the next append, waiting for the lock when `wait`; after any
    /// failed append the writer is dropped and the next one opens afresh.
    OnDemand {
        /// Wait for another writer instead of failing at once.
        wait: bool,
    },
    /// On a schedule, by [`crate::log::intake::Intake::tend`] (a service):
    /// only a writer stopped for good is dropped; appends meanwhile are
    /// refused ([`super::IntakeError::WriterAway`]).
    Scheduled,
}

/// What tending the writer did.
#[derive(Debug)]
#[non_exhaustive]
pub enum Tended {
    /// Nothing to do, or not yet time.
    Nothing,
    /// The writer's hold was lost while it waited for work: it was dropped.
    Lost,
    /// A stopped writer was opened again, after this many attempts.
    Reopened {
        /// Attempts made.
        attempts: u64,
        /// Since the writer was dropped.
        after: Duration,
    },
    /// An attempt to open it failed; the next one is due after `retry_in`.
    NotYet {
        /// Why (the error, with its causes).
        error: LogError,
        /// When the next attempt is due.
        retry_in: Duration,
    },
}

/// The writer of a log, and how to open it again.
pub(super) struct Keeper {
    writer: Option<LogWriter>,
    store: Arc<dyn Store>,
    key: SigningKey,
    reopen: Reopen,
    /// Since when the writer has been gone, attempts made, the next wait
    /// and when the next attempt is due.
    gone_since: Instant,
    attempts: u64,
    delay: Duration,
    due: Instant,
}

impl Keeper {
    /// Keeps the writer of `store`, opened with `key` (now, when `writer` is given).
    pub(super) fn new(
        store: Arc<dyn Store>,
        key: SigningKey,
        reopen: Reopen,
        writer: Option<LogWriter>,
    ) -> Keeper {
        let now = Instant::now();
        Keeper {
            writer,
            store,
            key,
            reopen,
            gone_since: now,
            attempts: 0,
            delay: REOPEN_FIRST_DELAY,
            due: now,
        }
    }

    /// The store the log lives in.
    pub(super) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The writer, while there is one that can write.
    pub(super) fn writer(&mut self) -> Option<&mut LogWriter> {
        self.writer.as_mut()
    }

    /// The writer, opened now if it is missing and opening is on demand.
    pub(super) fn writer_for_append(&mut self) -> Result<Option<&mut LogWriter>, LogError> {
        if let (None, Reopen::OnDemand { wait }) = (&self.writer, self.reopen) {
            let opened = LogWriter::open_store(Arc::clone(&self.store), &self.key, wait)?;
            self.writer = Some(opened);
        }
        Ok(self.writer.as_mut())
    }

    /// After an append failed with `error`: on demand, the writer is
    /// dropped (the next append opens and repairs afresh); on a schedule,
    /// a writer stopped for good is dropped (releasing its hold) and its
    /// reason returned, one that can go on (it repairs at its next
    /// append) is kept.
    pub(super) fn failed(&mut self, error: &LogError) -> Option<&'static str> {
        let w = self.writer.as_ref()?;
        if let Reopen::OnDemand { .. } = self.reopen {
            self.drop_writer();
            return None;
        }
        let reason = match (w.stopped(), error) {
            (Some(reason), _) => reason,
            (None, LogError::Stopped { reason }) => *reason,
            _ => return None,
        };
        self.drop_writer();
        Some(reason)
    }

    /// Between batches: a writer whose hold was lost is dropped; a missing
    /// one is opened when due (not while `stopping`, and only on a schedule).
    pub(super) fn tend(&mut self, stopping: bool) -> Tended {
        if let Some(w) = &self.writer {
            let held = w.log().store().hold_status().is_none_or(|h| h.held);
            if held {
                return Tended::Nothing;
            }
            self.drop_writer();
            return Tended::Lost;
        }
        if stopping || Instant::now() < self.due || self.reopen != Reopen::Scheduled {
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
            Err(error) => {
                let retry_in = self.delay;
                self.due = Instant::now() + retry_in;
                self.delay = (self.delay * 2).min(REOPEN_MAX_DELAY);
                Tended::NotYet { error, retry_in }
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

    /// Drop the writer (releasing its lock); it is opened again as [`Reopen`] says.
    pub(super) fn drop_writer(&mut self) {
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

impl super::Intake {
    /// Between batches (a service): a writer whose hold was lost is
    /// dropped; a missing one is opened again when due (not while `stopping`).
    pub fn tend(&mut self, stopping: bool) -> Tended {
        self.keeper.tend(stopping)
    }

    /// How long a service's writer thread may wait for work before tending again.
    pub fn next_tick(&self) -> Duration {
        self.keeper.next_tick()
    }

    /// Why the last failed append dropped the writer for good (its lease
    /// lost, another writer's checkpoint found), once.
    pub fn take_dropped(&mut self) -> Option<&'static str> {
        self.dropped.take()
    }
}
