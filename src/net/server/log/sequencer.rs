//! The sequencer: one writer thread closes batches (at `batch_max` entries or
//! `batch_wait` after the first), integrates each with one durable append,
//! gets the checkpoint witnessed when a policy is set, publishes it, and only
//! then answers the batch. No HTTP types: a submission is a [`Job`] with an
//! answer channel (Tessera's queue and Sunlight's sequencer split).

use super::keeper::{Tended, WriterKeeper};
use super::*;
use crate::net::client::witnessing::{Prover, Stopped, Witnessing};
use std::sync::mpsc;

/// How long the writer sleeps when an open batch's queue is empty (see
/// [`Batcher::next_batch`]): a batch closes at most this late after it is
/// full.
const BATCH_POLL: Duration = Duration::from_millis(1);

/// One admitted submission waiting for its batch.
pub(super) struct Job {
    pub(super) entry: Vec<u8>,
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
    pub(super) fn run(self, writer: LogWriter, rx: mpsc::Receiver<Job>) -> (u64, u64) {
        // A witnessed log first gets its current checkpoint cosigned (after
        // a restart, the one it may not have published before stopping).
        let mut writer = writer;
        if self.config.witnessing.is_some() {
            let _ = self.publish(&mut writer);
        }
        let mut keeper = WriterKeeper::new(writer, self.config.key.clone());
        let (mut batches, mut integrated) = (0u64, 0u64);
        while let Some(mut jobs) = self.next_batch(&rx, &mut keeper) {
            let Some(w) = keeper.writer() else {
                reply_all(jobs, &NotLogged::Unavailable(WRITER_AWAY.into()));
                continue;
            };
            let entries: Vec<Vec<u8>> = jobs
                .iter_mut()
                .map(|j| std::mem::take(&mut j.entry))
                .collect();
            let closed = Instant::now();
            let wait = jobs.first().map_or(Duration::ZERO, |j| closed - j.arrived);
            let appended = w.append(&entries);
            let line = |new: usize, size: u64, error: Option<String>| BatchLine {
                event: "batch",
                entries: entries.len(),
                new,
                tree_size: size,
                wait_ms: millis(wait),
                append_ms: millis(closed.elapsed()),
                error,
            };
            match appended {
                Ok(results) => {
                    self.shared.metrics.batch(entries.len(), closed.elapsed());
                    let new = results.iter().filter(|a| a.new).count();
                    self.log_line(&line(new, w.log().size(), None));
                    batches += 1;
                    integrated += jobs.len() as u64;
                    self.answer(w, jobs, &results);
                }
                Err(e) => {
                    self.shared.metrics.append_failed();
                    let detail = format!("the log append failed: {}", crate::io::error_chain(&e));
                    self.log_line(&line(0, w.log().size(), Some(detail.clone())));
                    reply_all(jobs, &NotLogged::Failed(detail));
                    // The writer keeps its lock and repairs what the failed
                    // append left past the checkpoint at its next append
                    // (spec/log.md), however long the store stays down.
                    // Only a stopped writer (its lease lost, another
                    // writer's checkpoint found) is dropped, and the keeper
                    // opens it again.
                    if let Some(reason) = keeper.failed(&e) {
                        self.writer_away(reason);
                    }
                }
            }
        }
        (batches, integrated)
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
        keeper: &mut WriterKeeper,
    ) -> Option<Vec<Job>> {
        let first = self.first_job(rx, keeper)?;
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

    /// Wait for a job, tending the writer meanwhile ([`WriterKeeper::tend`]:
    /// a stopped one is opened again when due, an idle one whose hold was
    /// lost is dropped); `None` once the queue is closed and empty.
    fn first_job(&self, rx: &mpsc::Receiver<Job>, keeper: &mut WriterKeeper) -> Option<Job> {
        loop {
            match keeper.tend(*self.stop.borrow()) {
                Tended::Nothing => {}
                Tended::Lost => self.writer_away("the lock was lost"),
                Tended::Reopened { attempts, after } => {
                    if let Some(w) = keeper.writer() {
                        let line = serde_json::json!({"event": "writer", "state": "reopened",
                            "tree_size": w.log().size(), "attempts": attempts,
                            "ms": millis(after)});
                        (self.sink)(&line.to_string());
                        // Its truth may be past what was served (a
                        // checkpoint whose answer was lost did land).
                        let _ = self.publish(w);
                    }
                    self.shared.writer_alive.store(true, Ordering::Relaxed);
                }
                Tended::NotYet { error, retry_in } => {
                    let line = serde_json::json!({"event": "writer", "state": "reopen_failed",
                        "error": error, "retry_in_ms": millis(retry_in)});
                    (self.sink)(&line.to_string());
                }
            }
            match rx.recv_timeout(keeper.next_tick()) {
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

    /// Publish the log's checkpoint: at once, or, for a witnessed log,
    /// once a quorum of the policy's witnesses cosigned it (waiting as
    /// long as that takes, unless the service stops). The cosigned note is
    /// first made the log's stored checkpoint ([`LogWriter::add_signatures`];
    /// spec/witness.md "Witnessed log"), so the log's files, `log prove`
    /// and a restarted service give it too. A stored checkpoint that
    /// already carries a quorum's cosignatures (after a restart, or a batch
    /// of duplicates) is published as it is.
    pub(super) fn publish(&self, w: &mut LogWriter) -> Result<Arc<str>, Stopped> {
        let log = w.log();
        let Some(witnessing) = &self.config.witnessing else {
            let note: Arc<str> = Arc::from(log.checkpoint());
            self.shared.publish(log.size(), note.to_string());
            return Ok(note);
        };
        if let Some(cosigners) = quorum_cosigners(witnessing, log.checkpoint()) {
            let line = serde_json::json!({"event": "witnessed", "tree_size": log.size(),
                "published": true, "cosigners": cosigners, "ms": 0.0, "from_store": true});
            (self.sink)(&line.to_string());
            let note: Arc<str> = Arc::from(log.checkpoint());
            self.shared.publish(log.size(), note.to_string());
            return Ok(note);
        }
        let reader = Log::open_store(Arc::clone(log.store()), None).map(Arc::new);
        let prover: Prover = Arc::new(move |m, n| match &reader {
            Ok(r) => r.consistency_proof(m, n).map_err(|e| e.to_string()),
            Err(e) => Err(format!("opening the log for a proof: {e}")),
        });
        let started = Instant::now();
        let size = log.size();
        let unwitnessed = log_signed_only(log.checkpoint(), log.verifier());
        let cosigned = self.runtime.block_on(witnessing.witness(
            &unwitnessed,
            size,
            prover,
            Arc::clone(&self.sink),
            self.stop.clone(),
        ));
        let cosigners = cosigned.as_ref().map(|c| c.cosigners.clone()).ok();
        // Stored before it is published: a submitter's answer means the
        // cosigned checkpoint is durable.
        let stored = cosigned.as_ref().ok().map(|c| w.add_signatures(&c.note));
        let error = match &stored {
            Some(Err(e)) => Some(format!("storing the cosigned checkpoint: {e}")),
            _ => None,
        };
        let line = serde_json::json!({"event": "witnessed", "tree_size": size,
            "published": cosigned.is_ok(), "cosigners": cosigners,
            "ms": millis(started.elapsed()), "stored": matches!(stored, Some(Ok(()))),
            "error": error});
        (self.sink)(&line.to_string());
        let note: Arc<str> = Arc::from(cosigned?.note);
        self.shared.publish(size, note.to_string());
        Ok(note)
    }

    /// The append is durable: publish its checkpoint, then answer each job
    /// (not before: a submitter's answer means its entry is published).
    pub(super) fn answer(
        &self,
        w: &mut LogWriter,
        jobs: Vec<Job>,
        results: &[crate::log::Appended],
    ) {
        let appended = Instant::now();
        let published = self.publish(w);
        if published.is_ok() {
            self.shared.metrics.published(appended.elapsed());
        }
        let Ok(checkpoint) = published else {
            let detail = "the entry is durably logged, but the service stopped before a quorum \
                          of witnesses cosigned its checkpoint; it is published after a restart";
            reply_all(jobs, &NotLogged::NotWitnessed(detail.into()));
            return;
        };
        let log = w.log();
        let snapshot = if jobs.iter().any(|j| j.want_bundle) {
            Log::open_store(Arc::clone(log.store()), None)
                .ok()
                .map(Arc::new)
        } else {
            None
        };
        for (job, a) in jobs.into_iter().zip(results) {
            let _ = job.reply.send(Ok(Answer {
                index: a.index,
                new: a.new,
                tree_size: log.size(),
                checkpoint: Arc::clone(&checkpoint),
                snapshot: if job.want_bundle {
                    snapshot.clone()
                } else {
                    None
                },
            }));
        }
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

/// `note` with only the signature lines of the log key `verifier`: what
/// the witnesses are sent (a stored note may carry older cosignatures).
pub(super) fn log_signed_only(note: &str, verifier: &crate::keys::NoteVerifier) -> String {
    use base64::Engine;
    let Ok(parsed) = crate::tlog::note::Note::parse(note.as_bytes()) else {
        return note.to_string();
    };
    let mut out = format!("{}\n", parsed.text);
    for sig in parsed
        .signatures
        .iter()
        .filter(|s| s.name == verifier.name && s.key_hash == verifier.key_hash)
    {
        let mut raw = sig.key_hash.to_vec();
        raw.extend_from_slice(&sig.sig);
        let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
        out.push_str(&format!(
            "{}{} {b64}\n",
            crate::tlog::note::SIGNATURE_LINE_PREFIX,
            sig.name
        ));
    }
    out
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
