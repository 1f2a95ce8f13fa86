//! round: one pass of the monitor over a source (module doc of
//! [`super`]; spec/monitor.md "A round").

use super::entry::classify;
use super::state::{Saved, StateDir, StateError};
use super::{Event, EventKind, MonitorError, STATE_SAVE_INTERVAL, Sink, Watch};
use crate::keys::NoteVerifier;
use crate::limits::MAX_NOTE_BYTES;
use crate::storage::PublicRead;
use crate::storage::tiles::{TileCache, TileReader};
use crate::storage::walk::{self, ConsistencyWalk, Tree, WalkError};
use crate::tlog::merkle::Hash;
use crate::tlog::note::{Checkpoint, Note};
use crate::tlog::policy::{QuorumVerdict, TlogPolicy};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rayon::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// A monitor: a source, the keys, what to watch, and its state directory.
#[derive(Debug)]
pub struct Monitor {
    source: Arc<dyn PublicRead>,
    logs: Vec<NoteVerifier>,
    policy: Option<TlogPolicy>,
    watch: Watch,
    state: StateDir,
    start_at_end: bool,
    cache: Arc<TileCache>,
}

/// What one round did.
#[derive(Debug, Default)]
pub struct RoundReport {
    /// The log's origin, once its checkpoint was read.
    pub origin: Option<String>,
    /// The size checked before the round.
    pub old_size: u64,
    /// The source's verified size.
    pub new_size: u64,
    /// Entries checked in this round.
    pub scanned: u64,
    /// Of those, entries that gave no event.
    pub quiet: u64,
    /// Events delivered.
    pub events: u64,
    /// Of those, alarms.
    pub alarms: u64,
    /// The round stopped early on request (state saved).
    pub stopped: bool,
    /// Why the round could not complete (also delivered as `monitor.error`).
    pub error: Option<MonitorError>,
    /// Every alarm of the state directory not yet acknowledged, after the
    /// round (those it delivered included), oldest first.
    pub open: Vec<super::Alarm>,
}

/// The old and new checkpoint of a round, verified.
struct Heads<'a> {
    origin: &'a str,
    old: &'a Checkpoint,
    old_text: &'a str,
    new: &'a Checkpoint,
    new_text: &'a str,
}

impl Heads<'_> {
    /// What a log event about these two checkpoints is about (its id's input).
    fn about(&self) -> Vec<u8> {
        [self.old_text.as_bytes(), b"\0", self.new_text.as_bytes()].concat()
    }
}

impl Monitor {
    /// A monitor of `source` whose checkpoints verify under one of `logs`
    /// (the one named by the checkpoint's origin), with `policy`'s witness
    /// quorum when given. With `start_at_end`, a log this state directory
    /// has never seen is taken as checked at its current size.
    pub fn new(
        source: Arc<dyn PublicRead>,
        logs: Vec<NoteVerifier>,
        policy: Option<TlogPolicy>,
        watch: Watch,
        state: StateDir,
        start_at_end: bool,
    ) -> Monitor {
        Monitor {
            source,
            logs,
            policy,
            watch,
            state,
            start_at_end,
            cache: Arc::new(TileCache::new()),
        }
    }

    /// The state directory.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// One round. Between entries `stop` is read: once set, the round
    /// saves its state and returns. An error is delivered as `monitor.error`.
    pub fn round(&self, sink: &mut dyn Sink, stop: &AtomicBool) -> RoundReport {
        let mut report = RoundReport::default();
        if let Err(e) = self.run(sink, stop, &mut report) {
            let origin = report.origin.clone().unwrap_or_default();
            let summary = crate::io::error_chain(&e);
            let event = Event::log(
                EventKind::Error,
                &origin,
                summary.clone(),
                summary.as_bytes(),
            );
            if sink.emit(&event).is_ok() {
                report.events += 1;
            }
            report.error = Some(e);
        }
        if let Err(e) = sink.flush() {
            report.error.get_or_insert(MonitorError::Sink(e));
        }
        match self.state.open_alarms() {
            Ok(open) => report.open = open,
            Err(e) => {
                report.error.get_or_insert(MonitorError::State(e));
            }
        }
        report
    }

    fn emit(
        &self,
        sink: &mut dyn Sink,
        report: &mut RoundReport,
        event: &Event,
    ) -> Result<(), MonitorError> {
        sink.emit(event)?;
        report.events += 1;
        if event.kind.is_alarm() {
            // Kept open until acknowledged (spec/monitor.md "Alarms"),
            // before the state that covers the event is saved.
            self.state.record_alarm(event)?;
            report.alarms += 1;
        }
        Ok(())
    }

    /// The log key for a checkpoint: the only one, or the one its origin names.
    fn key_for(&self, text: &[u8]) -> Result<&NoteVerifier, MonitorError> {
        if let [only] = self.logs.as_slice() {
            return Ok(only);
        }
        let origin = Note::parse(text)
            .ok()
            .and_then(|n| Checkpoint::parse(&n.text).ok())
            .map(|c| c.origin);
        match origin {
            Some(o) => self
                .logs
                .iter()
                .find(|k| k.name == o)
                .ok_or(MonitorError::NoLogKey(o)),
            None => self
                .logs
                .first()
                .ok_or_else(|| MonitorError::NoLogKey(String::new())),
        }
    }

    fn run(
        &self,
        sink: &mut dyn Sink,
        stop: &AtomicBool,
        report: &mut RoundReport,
    ) -> Result<(), MonitorError> {
        let source_err = |source| MonitorError::Source {
            source_name: self.source.describe(),
            source,
        };
        let read = self
            .source
            .read_checkpoint(MAX_NOTE_BYTES)
            .map_err(source_err)?
            .ok_or_else(|| MonitorError::NoCheckpoint(self.source.describe()))?;
        let key = self.key_for(&read.bytes)?;
        let origin = key.name.as_str();
        report.origin = Some(origin.to_string());
        let new = match crate::log::verify_checkpoint(&read.bytes, key, None) {
            Ok(c) => c,
            Err(e) => {
                let summary = format!(
                    "the source's checkpoint is refused: {}",
                    crate::io::error_chain(&e)
                );
                let event = Event::log(EventKind::CheckpointInvalid, origin, summary, &read.bytes);
                return self.emit(sink, report, &event);
            }
        };
        let new_text = String::from_utf8_lossy(&read.bytes).into_owned();
        if let Some(summary) = self.unwitnessed(&read.bytes) {
            let event = Event::log(EventKind::Unwitnessed, origin, summary, &read.bytes);
            return self.emit(sink, report, &event);
        }
        report.new_size = new.size;
        let saved = self.state.load(origin)?;
        let next = match saved {
            None if self.start_at_end => {
                report.old_size = new.size;
                sink.flush()?;
                return Ok(self.state.save(&Saved::new(origin, &new_text, new.size))?);
            }
            None => 0,
            Some(saved) => {
                let old = self.saved_checkpoint(&saved, key)?;
                report.old_size = old.size;
                let heads = Heads {
                    origin,
                    old: &old,
                    old_text: &saved.checkpoint,
                    new: &new,
                    new_text: &new_text,
                };
                if !self.extends(sink, report, &heads)? {
                    return Ok(());
                }
                saved.next_index
            }
        };
        sink.flush()?;
        self.state.save(&Saved::new(origin, &new_text, next))?;
        self.scan(sink, stop, report, origin, (&new, &new_text), next)
    }

    /// The saved checkpoint, verified again (a state file is not trusted blindly).
    fn saved_checkpoint(
        &self,
        saved: &Saved,
        key: &NoteVerifier,
    ) -> Result<Checkpoint, MonitorError> {
        let path = self.state.origin_path(&saved.origin);
        let corrupt = |detail: String| StateError::Corrupt {
            path: path.clone(),
            detail,
        };
        let old = crate::log::verify_checkpoint(saved.checkpoint.as_bytes(), key, None)
            .map_err(|e| corrupt(crate::io::error_chain(&e)))?;
        if saved.next_index > old.size {
            return Err(corrupt(format!(
                "next index {} is past its checkpoint's size {}",
                saved.next_index, old.size
            ))
            .into());
        }
        Ok(old)
    }

    /// With a policy: why the checkpoint does not meet it, if it does not.
    fn unwitnessed(&self, text: &[u8]) -> Option<String> {
        let policy = self.policy.as_ref()?;
        let note = match Note::parse(text) {
            Ok(n) => n,
            Err(e) => return Some(format!("the checkpoint note: {e}")),
        };
        match policy.evaluate(&note) {
            Err(e) => Some(format!("the checkpoint under the policy: {e}")),
            Ok(eval) => match eval.verdict() {
                QuorumVerdict::Verified => None,
                QuorumVerdict::QuorumNotMet => Some(format!(
                    "the checkpoint of size {} does not meet the policy's witness quorum",
                    eval.checkpoint.size
                )),
                other => Some(format!(
                    "the checkpoint of size {} fails the policy: {other:?}",
                    eval.checkpoint.size
                )),
            },
        }
    }

    /// True when the new checkpoint extends the old one; otherwise the
    /// evidence is kept and `log.rollback` or `log.inconsistent` delivered.
    fn extends(
        &self,
        sink: &mut dyn Sink,
        report: &mut RoundReport,
        h: &Heads<'_>,
    ) -> Result<bool, MonitorError> {
        let (m, n) = (h.old.size, h.new.size);
        if n < m {
            let dir = self.evidence(h, "rollback", &[], "a smaller tree")?;
            let summary = format!(
                "the log shows size {n}, smaller than the size {m} already checked \
                 (evidence in {})",
                dir.display()
            );
            self.emit(
                sink,
                report,
                &Event::log(EventKind::Rollback, h.origin, summary, &h.about()),
            )?;
            return Ok(false);
        }
        let reader = TileReader::over(Arc::clone(&self.source), n, Some(Arc::clone(&self.cache)));
        let (old, new) = (tree_of(h.old), tree_of(h.new));
        let (proof, detail) = match walk::prove_extends(&reader, old, new) {
            Ok(()) => return Ok(true),
            Err(WalkError::Fork { .. }) => (Vec::new(), "same size, another root: a fork".into()),
            Err(WalkError::Inconsistent { proof, source, .. }) => (proof, source.to_string()),
            Err(e) => return Err(walked(m, m, n, e)),
        };
        let dir = self.evidence(h, "inconsistent", &proof, &detail)?;
        let summary = format!(
            "the checkpoint of size {n} does not extend the one of size {m} already checked \
             ({detail}; evidence in {})",
            dir.display()
        );
        self.emit(
            sink,
            report,
            &Event::log(EventKind::Inconsistent, h.origin, summary, &h.about()),
        )?;
        Ok(false)
    }

    /// Keep both checkpoints and the proof that failed.
    fn evidence(
        &self,
        h: &Heads<'_>,
        what: &str,
        proof: &[Hash],
        detail: &str,
    ) -> Result<std::path::PathBuf, MonitorError> {
        let hashes: Vec<String> = proof.iter().map(|p| STANDARD.encode(p)).collect();
        let proof_json = serde_json::json!({
            "from": h.old.size, "to": h.new.size, "proof": hashes, "failed": detail,
        })
        .to_string();
        Ok(self.state.keep_evidence(
            h.origin,
            what,
            (h.old.size, h.new.size),
            &[
                ("old.checkpoint", h.old_text.as_bytes()),
                ("new.checkpoint", h.new_text.as_bytes()),
                ("proof.json", proof_json.as_bytes()),
            ],
        )?)
    }

    /// Check and report every entry from `next` to the new size, bundle by
    /// bundle, saving the state after a bundle (spec/monitor.md "Delivery":
    /// every [`STATE_SAVE_INTERVAL`], after every bundle when the sink runs
    /// a hook, and at the end).
    ///
    /// A pipeline: while the next bundles' entries are classified on the
    /// worker threads (their signature checks), this thread delivers the
    /// events of one bundle, saves the state, and reads and proves the
    /// bundle after them (at most [`PIPELINE_DEPTH`] in flight). The order is the serial one: a bundle's events are
    /// delivered only after those of every earlier bundle and only once its
    /// entries are proved to be in the signed tree; an error in a later
    /// bundle is returned only after every earlier bundle is delivered and
    /// the state saved past it.
    fn scan(
        &self,
        sink: &mut dyn Sink,
        stop: &AtomicBool,
        report: &mut RoundReport,
        origin: &str,
        (new, text): (&Checkpoint, &str),
        next: u64,
    ) -> Result<(), MonitorError> {
        let n = new.size;
        let reader = TileReader::over(Arc::clone(&self.source), n, Some(Arc::clone(&self.cache)));
        let mut walk = ConsistencyWalk::from_tiles(reader, tree_of(new), next)
            .map_err(|e| walked(next, next, n, e))?;
        // The index saved last, and when.
        let saved = std::cell::Cell::new((next, Instant::now()));
        let save = |sink: &mut dyn Sink, index: u64| -> Result<(), MonitorError> {
            sink.flush()?;
            if index != saved.get().0 {
                self.state.save(&Saved::new(origin, text, index))?;
                saved.set((index, Instant::now()));
            }
            Ok(())
        };
        let watch = &self.watch;
        std::thread::scope(|s| {
            // Bundles proved and being classified, oldest first; whether
            // the walk goes on; the error that ended it.
            let mut jobs = std::collections::VecDeque::new();
            let mut ahead = next < n;
            let mut later = None;
            loop {
                while ahead && jobs.len() < PIPELINE_DEPTH {
                    match proved(&mut walk) {
                        Ok(b) => {
                            ahead = b.end < n;
                            jobs.push_back(s.spawn(move || b.classify(origin, watch)));
                        }
                        Err(e) => (ahead, later) = (false, Some(e)),
                    }
                }
                let Some(job) = jobs.pop_front() else { break };
                let done = joined(job);
                let end = done.end;
                match self.deliver(sink, stop, report, done) {
                    Delivered::All => {
                        if sink.hooked() || saved.get().1.elapsed() >= STATE_SAVE_INTERVAL {
                            save(sink, end)?;
                        }
                        sink.progress(end - next, n - next);
                    }
                    Delivered::Stopped(index) => {
                        save(sink, index)?;
                        report.stopped = true;
                        return Ok(());
                    }
                    Delivered::Failed(index, e) => {
                        // The events before this one are delivered only if
                        // the sink's buffer is; otherwise the state stays
                        // where it was and they come again.
                        if sink.flush().is_ok() {
                            save(sink, index)?;
                        }
                        return Err(e);
                    }
                }
            }
            save(sink, next + report.scanned)?;
            later.map_or(Ok(()), Err)
        })
    }

    /// Deliver the events of a classified bundle in order, reading `stop`
    /// between two entries.
    fn deliver(
        &self,
        sink: &mut dyn Sink,
        stop: &AtomicBool,
        report: &mut RoundReport,
        done: Classified,
    ) -> Delivered {
        for (index, event) in (done.start..).zip(done.events) {
            if stop.load(Ordering::Relaxed) {
                return Delivered::Stopped(index);
            }
            if let Some(event) = event {
                if let Err(e) = self.emit(sink, report, &event) {
                    return Delivered::Failed(index, e);
                }
            } else {
                report.quiet += 1;
            }
            report.scanned += 1;
        }
        Delivered::All
    }
}

/// Entries `start..end` of the log, proved to be in the signed tree.
struct Proved {
    start: u64,
    end: u64,
    entries: Vec<Vec<u8>>,
}

impl Proved {
    /// Each entry's event, on the worker threads.
    fn classify(self, origin: &str, watch: &Watch) -> Classified {
        let events = self
            .entries
            .par_iter()
            .enumerate()
            .map(|(k, e)| classify(origin, self.start + k as u64, e, watch))
            .collect();
        Classified {
            start: self.start,
            end: self.end,
            events,
        }
    }
}

/// Entry bundles proved and classifying at once during a scan: the worker
/// threads always have the next bundle while this thread delivers one.
const PIPELINE_DEPTH: usize = 3;

/// How far [`Monitor::deliver`] got with a bundle.
enum Delivered {
    /// Every event.
    All,
    /// A stop was asked for before the entry at this index.
    Stopped(u64),
    /// The sink refused the event of the entry at this index.
    Failed(u64, MonitorError),
}

/// A scoped thread's result; its panic goes on in this thread.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The events of entries `start..end`, not yet delivered.
struct Classified {
    start: u64,
    end: u64,
    events: Vec<Option<Event>>,
}

/// Read the bundle holding the walk's next entry, push its entries from
/// there, and prove the result a prefix of the signed tree
/// (`storage::walk`): the entries of the bundle it returns are the signed
/// tree's.
fn proved(walk: &mut ConsistencyWalk) -> Result<Proved, MonitorError> {
    let (start, n) = (walk.size(), walk.signed().size);
    let Some(mut bundle) = walk.next_bundle().map_err(|e| walked(start, start, n, e))? else {
        return Err(walked(
            start,
            start,
            n,
            WalkError::WrongSize {
                end: start,
                size: n,
            },
        ));
    };
    walk.push_bundle(&bundle, |_, _| {})
        .map_err(|e| walked(start, bundle.end(), n, e))?;
    walk.prove_prefix()
        .map_err(|e| walked(start, bundle.end(), n, e))?;
    let skip = usize::try_from(start - bundle.first).unwrap_or(usize::MAX);
    bundle.entries.drain(..skip.min(bundle.entries.len()));
    Ok(Proved {
        start,
        end: walk.size(),
        entries: bundle.entries,
    })
}

/// The signed tree of a verified checkpoint.
fn tree_of(c: &Checkpoint) -> Tree {
    Tree {
        size: c.size,
        root: c.root_hash,
    }
}

/// The monitor's error for a failed step of the walk over entries
/// `start..end` of the signed tree of `size`: a tile or bundle the source
/// does not give is a read error; anything else is entries that do not
/// give the signed tree.
fn walked(start: u64, end: u64, size: u64, e: WalkError) -> MonitorError {
    match e {
        WalkError::Tiles { .. } | WalkError::Bundle { .. } => MonitorError::Read(e),
        other => MonitorError::Mismatch {
            start,
            end,
            size,
            source: other,
        },
    }
}
