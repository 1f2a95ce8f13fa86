//! The sequencer: one writer thread closes batches (at `batch_max` entries or
//! `batch_wait` after the first), integrates each with one durable append,
//! gets the checkpoint witnessed when a policy is set, publishes it, and only
//! then answers the batch. No HTTP types: a submission is a [`Job`] with an
//! answer channel (Tessera's queue and Sunlight's sequencer split). The
//! append, the writer's care and the publication are the log's intake
//! (`log::intake`); witnessing plugs into it as a [`Witness`].

use super::ServeConfig;
use super::shared::Shared;
use crate::log::HashedEntry;
use crate::log::Log;
use crate::log::intake::{Cosigned, NotCosigned, Published, Tended, Witness, Witnessed};
use crate::log::intake::{Intake, IntakeError};
use crate::net::client::witnessing::{Prover, Witnessing};
use crate::net::server::RequestSink;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// How long the writer sleeps when an open batch's queue is empty (see
/// [`Batcher::next_batch`]): a batch closes at most this late after it is
/// full.
const BATCH_POLL: Duration = Duration::from_millis(1);

/// One admitted submission waiting for its batch.
pub(super) struct Job {
    /// The admitted entry, hashed on the worker that admitted it (taken
    /// by the writer).
    pub(super) entry: Option<HashedEntry>,
    /// When the submission was queued: its batch closes `batch_wait` after
    /// the arrival of its first entry, not after the writer picked it up.
    pub(super) arrived: Instant,
    pub(super) want_bundle: bool,
    pub(super) reply: oneshot::Sender<Result<Answer, NotLogged>>,
}

/// Where an integrated submission landed, with a reader of the log at the
/// published size when a bundle was asked for.
pub(super) struct Answer {
    pub(super) index: u64,
    pub(super) new: bool,
    pub(super) tree_size: u64,
    pub(super) snapshot: Option<Arc<Log>>,
    /// The published checkpoint (with its cosignatures) of `tree_size`.
    pub(super) checkpoint: Arc<str>,
}

/// The writer thread: closes batches and integrates them.
pub(super) struct Batcher {
    pub(super) config: ServeConfig,
    pub(super) shared: Arc<Shared>,
    pub(super) sink: RequestSink,
    /// For the witnessing requests (the writer thread waits on them).
    pub(super) runtime: tokio::runtime::Handle,
    /// Set at shutdown: witnessing gives up.
    pub(super) stop: watch::Receiver<bool>,
}

/// One line of the service log per durable append.
#[derive(serde::Serialize)]
pub(super) struct BatchLine {
    pub(super) event: &'static str,
    pub(super) entries: usize,
    pub(super) new: usize,
    pub(super) tree_size: u64,
    /// From the first entry's arrival to the batch's close.
    pub(super) wait_ms: f64,
    /// The durable append, checkpoint published.
    pub(super) append_ms: f64,
    pub(super) error: Option<String>,
}

/// Milliseconds, to the microsecond.
pub(super) fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl Batcher {
    /// Run until every sender is gone and the queue is empty; returns
    /// (appends made, submissions integrated).
    pub(super) fn run(self, intake: Intake, rx: mpsc::Receiver<Job>) -> (u64, u64) {
        let mut intake = match &self.config.witnessing {
            Some(w) => intake.with_witness(Box::new(ServiceWitness {
                witnessing: Arc::clone(w),
                runtime: self.runtime.clone(),
                sink: Arc::clone(&self.sink),
                stop: self.stop.clone(),
            })),
            None => intake,
        };
        // A witnessed log first gets its current checkpoint cosigned (after
        // a restart, the one it may not have published before stopping).
        if self.config.witnessing.is_some() {
            let _ = self.publish(&mut intake);
        }
        let (mut batches, mut integrated) = (0u64, 0u64);
        while let Some(jobs) = self.next_batch(&rx, &mut intake) {
            if !intake.writing() {
                reply_all(jobs, &NotLogged::Unavailable(WRITER_AWAY.into()));
                continue;
            }
            let count = jobs.len() as u64;
            if self.integrate(&mut intake, jobs) {
                batches += 1;
                integrated += count;
            }
        }
        (batches, integrated)
    }

    /// Append one batch through the intake and answer its jobs; true when
    /// the append was durable.
    fn integrate(&self, intake: &mut Intake, mut jobs: Vec<Job>) -> bool {
        let entries: Vec<HashedEntry> = jobs.iter_mut().filter_map(|j| j.entry.take()).collect();
        let count = entries.len();
        let closed = Instant::now();
        let wait = jobs.first().map_or(Duration::ZERO, |j| closed - j.arrived);
        let before = intake.log().map_or(0, Log::size);
        let appended = intake.append_hashed(entries);
        let size = intake.log().map_or(before, Log::size);
        let line = |new: usize, error: Option<String>| BatchLine {
            event: "batch",
            entries: count,
            new,
            tree_size: size,
            wait_ms: millis(wait),
            append_ms: millis(closed.elapsed()),
            error,
        };
        match appended {
            Ok(results) => {
                self.shared.metrics.batch(count, closed.elapsed());
                let new = results.iter().filter(|a| a.new).count();
                self.log_line(&line(new, None));
                self.answer(intake, jobs, &results);
                true
            }
            Err(e) => {
                self.shared.metrics.append_failed();
                let chain = match e.log_error() {
                    Some(inner) => crate::io::error_chain(inner),
                    None => crate::io::error_chain(&e),
                };
                let detail = format!("the log append failed: {chain}");
                self.log_line(&line(0, Some(detail.clone())));
                reply_all(jobs, &NotLogged::Failed(detail));
                // The writer keeps its lock and repairs what the failed
                // append left past the checkpoint at its next append
                // (spec/log.md), however long the store stays down.
                // Only a stopped writer (its lease lost, another
                // writer's checkpoint found) is dropped, and the intake
                // opens it again.
                if let Some(reason) = intake.take_dropped() {
                    self.writer_away(reason);
                }
                false
            }
        }
    }

    pub(super) fn log_line(&self, line: &BatchLine) {
        if let Ok(text) = serde_json::to_string(line) {
            (self.sink)(&text);
        }
    }

    /// Wait for a first job, then take more until `batch_max` or
    /// `batch_wait` after the first; `None` once the queue is closed and empty.
    ///
    /// While the batch is open the writer takes what is queued without
    /// waiting, then sleeps [`BATCH_POLL`] (or what is left of the wait)
    /// when the queue is empty, instead of waiting on the queue for each
    /// job: a thread parked on the queue is woken by every submission (two
    /// context switches each, a fifth of the server's CPU in a profile at
    /// 256 connections), a sleeping one once per slice.
    pub(super) fn next_batch(
        &self,
        rx: &mpsc::Receiver<Job>,
        intake: &mut Intake,
    ) -> Option<Vec<Job>> {
        let first = self.first_job(rx, intake)?;
        let deadline = first.arrived + self.config.batch_wait;
        let mut jobs = vec![first];
        while jobs.len() < self.config.batch_max {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(mpsc::TryRecvError::Disconnected) => break,
                Err(mpsc::TryRecvError::Empty) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(left.min(BATCH_POLL));
                }
            }
        }
        Some(jobs)
    }

    /// Wait for a job, tending the writer meanwhile ([`Intake::tend`]:
    /// a stopped one is opened again when due, an idle one whose hold was
    /// lost is dropped); `None` once the queue is closed and empty.
    fn first_job(&self, rx: &mpsc::Receiver<Job>, intake: &mut Intake) -> Option<Job> {
        loop {
            match intake.tend(*self.stop.borrow()) {
                Tended::Lost => self.writer_away("the lock was lost"),
                Tended::Reopened { attempts, after } => {
                    let size = intake.log().map_or(0, Log::size);
                    let line = serde_json::json!({"event": "writer", "state": "reopened",
                        "tree_size": size, "attempts": attempts, "ms": millis(after)});
                    (self.sink)(&line.to_string());
                    // Its truth may be past what was served (a
                    // checkpoint whose answer was lost did land).
                    let _ = self.publish(intake);
                    self.shared.writer_alive.store(true, Ordering::Relaxed);
                }
                Tended::NotYet { error, retry_in } => {
                    let line = serde_json::json!({"event": "writer", "state": "reopen_failed",
                        "error": crate::io::error_chain(&error), "retry_in_ms": millis(retry_in)});
                    (self.sink)(&line.to_string());
                }
                _ => {}
            }
            match rx.recv_timeout(intake.next_tick()) {
                Ok(job) => return Some(job),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The writer was dropped: `/add` answers 503 until it is back.
    fn writer_away(&self, reason: &str) {
        self.shared.writer_alive.store(false, Ordering::Relaxed);
        let line = serde_json::json!({"event": "writer", "state": "stopped", "reason": reason});
        (self.sink)(&line.to_string());
    }

    /// Publish the log's checkpoint through the intake (for a witnessed
    /// log, once a quorum of the policy's witnesses cosigned it, waiting
    /// as long as that takes unless the service stops), then serve it:
    /// only a checkpoint the intake stored and published is served.
    pub(super) fn publish(&self, intake: &mut Intake) -> Result<Published, IntakeError> {
        let published = intake.publish()?;
        self.shared
            .publish(published.size, published.checkpoint.to_string());
        Ok(published)
    }

    /// The append is durable: publish its checkpoint, then answer each job
    /// (not before: a submitter's answer means its entry is published).
    pub(super) fn answer(
        &self,
        intake: &mut Intake,
        jobs: Vec<Job>,
        results: &[crate::log::Appended],
    ) {
        let appended = Instant::now();
        let published = match self.publish(intake) {
            Ok(published) => published,
            // The cosigned note was not stored (said in the service log's
            // `witnessed` line): a failure of the log, answered 500.
            Err(e @ IntakeError::NotStored(_)) => {
                reply_all(jobs, &NotLogged::Failed(crate::io::error_chain(&e)));
                return;
            }
            Err(_) => {
                let detail = "the entry is durably logged, but the service stopped before a \
                              quorum of witnesses cosigned its checkpoint; it is published \
                              after a restart";
                reply_all(jobs, &NotLogged::NotWitnessed(detail.into()));
                return;
            }
        };
        self.shared.metrics.published(appended.elapsed());
        for (job, a) in jobs.into_iter().zip(results) {
            let _ = job.reply.send(Ok(Answer {
                index: a.index,
                new: a.new,
                tree_size: published.size,
                checkpoint: Arc::clone(&published.checkpoint),
                snapshot: job.want_bundle.then(|| Arc::clone(&published.log)),
            }));
        }
    }
}

/// The service's witnesses, as the intake asks for them
/// ([`crate::log::intake::Witness`]): the writer thread waits on the
/// witnessing requests, and each publication is one line of the service log.
struct ServiceWitness {
    witnessing: Arc<Witnessing>,
    runtime: tokio::runtime::Handle,
    sink: RequestSink,
    stop: watch::Receiver<bool>,
}

impl Witness for ServiceWitness {
    fn quorum_in(&self, note: &str) -> Option<Vec<String>> {
        quorum_cosigners(&self.witnessing, note)
    }

    fn cosign(&self, checkpoint: &str, size: u64, log: Arc<Log>) -> Result<Cosigned, NotCosigned> {
        let prover: Prover =
            Arc::new(move |m, n| log.consistency_proof(m, n).map_err(|e| e.to_string()));
        let witnessed = self.runtime.block_on(self.witnessing.witness(
            checkpoint,
            size,
            prover,
            Arc::clone(&self.sink),
            self.stop.clone(),
        ));
        match witnessed {
            Ok(w) => Ok(Cosigned {
                note: w.note,
                cosigners: w.cosigners,
            }),
            Err(stopped) => Err(NotCosigned(Box::new(stopped))),
        }
    }

    fn witnessed(&self, r: &Witnessed<'_>) {
        let line = if r.from_store {
            serde_json::json!({"event": "witnessed", "tree_size": r.size,
                "published": true, "cosigners": r.cosigners, "ms": 0.0, "from_store": true})
        } else {
            let error = match r.stored {
                Some(Err(e)) => Some(format!(
                    "storing the cosigned checkpoint: {}",
                    crate::io::error_chain(e)
                )),
                _ => None,
            };
            serde_json::json!({"event": "witnessed", "tree_size": r.size,
                "published": r.published, "cosigners": r.cosigners,
                "ms": millis(r.elapsed), "stored": matches!(r.stored, Some(Ok(()))),
                "error": error})
        };
        (self.sink)(&line.to_string());
    }
}

/// The names of the policy witnesses whose cosignatures in `note` verify,
/// when they meet the quorum and no listed witness's line fails; `None`
/// otherwise (a note signed by the log alone, or one short of the quorum).
pub(super) fn quorum_cosigners(witnessing: &Witnessing, note: &str) -> Option<Vec<String>> {
    let policy = witnessing.policy();
    let parsed = crate::tlog::note::Note::parse(note.as_bytes()).ok()?;
    let eval = policy.evaluate(&parsed).ok()?;
    if !eval.quorum_met || !eval.failed_witnesses().is_empty() {
        return None;
    }
    let names = policy.witnesses.iter().zip(&eval.witnesses);
    let names =
        names.filter(|(_, s)| matches!(s, crate::tlog::cosig::CosigStatus::Verified { .. }));
    Some(names.map(|(w, _)| w.name.to_string()).collect())
}

/// The answer to a submission queued while the writer is away.
pub(super) const WRITER_AWAY: &str =
    "the log writer stopped after an error and is being opened again; retry";

/// Why a queued submission gets no index.
#[derive(Clone, Debug)]
pub(super) enum NotLogged {
    /// The append failed (500).
    Failed(String),
    /// The writer is away, being opened again (503 `log_unavailable`).
    Unavailable(String),
    /// Appended durably, but the service stopped before a quorum of
    /// witnesses cosigned its checkpoint (503: published after a restart).
    NotWitnessed(String),
}

pub(super) fn reply_all(jobs: Vec<Job>, why: &NotLogged) {
    for job in jobs {
        let _ = job.reply.send(Err(why.clone()));
    }
}
