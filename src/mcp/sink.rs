//! sink: where issued receipts go after the client has its answer
//! (spec/gate-mcp.md "Receipts and the log").
//!
//! One thread, the [`Finisher`], takes issued steps in batches: it stores
//! each one's objects in the gate store (the arguments as received, the
//! evidence record, the envelope, the inverse record, the receipt
//! pointer), appends the batch's envelopes to the log through one
//! [`ReceiptLog`] call (one durable append for a burst of calls, not one
//! each), and only then removes the steps' pending files. A crash anywhere
//! in that leaves the pending files, and the next start does it again
//! (storing is idempotent, the log keeps one index per entry).
//!
//! [`ReceiptLog`] is where the log plugs in: a log's [`Intake`] (a
//! directory or a bucket), or the binary's submission to a service.

use super::ledger::Pending;
use crate::gate::store::{GateStore, StoreError};
use crate::log::intake::{Intake, IntakeError};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

/// Most steps one batch stores and logs.
pub const MAX_SINK_BATCH: usize = 1024;
/// Most issued steps waiting for the finisher (the relay waits beyond).
pub const MAX_SINK_QUEUE: usize = 4096;
/// A log writer left idle this long is closed (its lock released).
pub const LOG_IDLE_CLOSE: Duration = Duration::from_secs(1);
/// How long the finisher gathers a batch after its first step: steps that
/// come one at a time share one store commit and one log append instead of
/// paying one each (their receipts are durable in the ledger meanwhile).
pub const FINISH_GATHER: Duration = Duration::from_millis(20);

/// Why a batch could not be stored or logged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// The gate store failed.
    #[error("storing the receipt")]
    Store(#[from] StoreError),
    /// The log refused an envelope, or failed.
    #[error("logging the receipts")]
    Log(#[from] IntakeError),
    /// Another log (a service) refused or failed.
    #[error("logging the receipts")]
    Remote(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A pending file could not be removed.
    #[error(transparent)]
    Ledger(#[from] super::ledger::LedgerError),
}

/// A log that takes a batch of receipts: the one place receipts leave the
/// proxy.
pub trait ReceiptLog: Send {
    /// Append `envelopes` (DSSE JSON), durably, in one batch.
    fn append(&mut self, envelopes: &[&str]) -> Result<(), SinkError>;
    /// Nothing to do for a while: release what can be released.
    fn idle(&mut self) {}
}

/// A log on a store (a directory, a bucket), through its intake: the
/// envelopes admitted under the issuers it accepts (as `log append`
/// admits them), appended in one durable batch, its checkpoint published;
/// its writer released while the proxy is idle.
impl ReceiptLog for Intake {
    fn append(&mut self, envelopes: &[&str]) -> Result<(), SinkError> {
        let bytes: Vec<&[u8]> = envelopes.iter().map(|e| e.as_bytes()).collect();
        self.append_envelopes(&bytes)?;
        Ok(())
    }

    fn idle(&mut self) {
        self.release();
    }
}

/// Store what the store keeps of an issued step (idempotent).
pub fn keep(store: &GateStore, p: &Pending) -> Result<(), SinkError> {
    keep_all(store, std::slice::from_ref(p))
}

/// Store what the store keeps of each issued step, in one group commit:
/// every object first (the pre-images its file carried among them), then (after a barrier) the receipt pointers that
/// name them (idempotent).
pub fn keep_all(store: &GateStore, steps: &[Pending]) -> Result<(), SinkError> {
    let mut batch = crate::io::Batch::new();
    // Off every step's path: one flush of the file system for the batch's
    // hundreds of files, not one each (`Batch::sync_whole_filesystem`).
    batch
        .sync_whole_filesystem(store.dir())
        .map_err(|e| SinkError::Store(StoreError::Write(e)))?;
    let mut links = Vec::with_capacity(steps.len());
    for p in steps {
        let Some(issued) = &p.issued else { continue };
        for preimage in &p.carried {
            store.put_in(&mut batch, preimage)?;
        }
        store.put_in(&mut batch, p.step.arguments.as_bytes())?;
        let evidence = store.put_record_in(&mut batch, &issued.evidence)?;
        if let Some(inverse) = &issued.inverse {
            store.put_record_in(&mut batch, inverse)?;
        }
        store.put_in(&mut batch, issued.envelope.as_bytes())?;
        links.push((issued.receipt_id, evidence));
    }
    batch.barrier();
    for (receipt, evidence) in &links {
        store.link_receipt_in(&mut batch, receipt, evidence)?;
    }
    batch
        .commit()
        .map_err(|e| SinkError::Store(StoreError::Write(e)))
}

/// What the finisher reports: a batch stored and logged, or why not.
pub type Report = Box<dyn Fn(Result<usize, &SinkError>) + Send>;

/// The finisher thread: issued steps in, stored, logged, pending removed.
#[derive(Debug)]
pub struct Finisher {
    tx: Option<SyncSender<Pending>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Finisher {
    /// Start the thread.
    pub fn start(store: GateStore, log: Option<Box<dyn ReceiptLog>>, report: Report) -> Finisher {
        let (tx, rx) = std::sync::mpsc::sync_channel(MAX_SINK_QUEUE);
        let thread = std::thread::Builder::new()
            .name("rcpt-mcp-finisher".into())
            .spawn(move || run(&store, log, &rx, &report))
            .ok();
        Finisher {
            tx: Some(tx),
            thread,
        }
    }

    /// Hand over an issued step (waits when the queue is full).
    pub fn send(&self, p: Pending) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(p);
        }
    }

    /// Finish everything handed over, then stop.
    pub fn close(mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    store: &GateStore,
    mut log: Option<Box<dyn ReceiptLog>>,
    rx: &Receiver<Pending>,
    report: &Report,
) {
    loop {
        let first = match rx.recv_timeout(LOG_IDLE_CLOSE) {
            Ok(p) => p,
            Err(RecvTimeoutError::Timeout) => {
                if let Some(l) = log.as_mut() {
                    l.idle();
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let (batch, open) = gather(first, rx);
        match finish_batch(store, log.as_deref_mut(), &batch) {
            Ok(()) => report(Ok(batch.len())),
            Err(e) => report(Err(&e)),
        }
        if !open {
            return;
        }
    }
}

/// A batch: `first`, then what comes within [`FINISH_GATHER`] (at most
/// [`MAX_SINK_BATCH`]); false when the sender has gone.
fn gather(first: Pending, rx: &Receiver<Pending>) -> (Vec<Pending>, bool) {
    let until = std::time::Instant::now() + FINISH_GATHER;
    let mut batch = vec![first];
    while batch.len() < MAX_SINK_BATCH {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(p) => batch.push(p),
            Err(RecvTimeoutError::Timeout) => break,
            Err(RecvTimeoutError::Disconnected) => return (batch, false),
        }
    }
    (batch, true)
}

/// Store, log, then remove the pending files of `batch`. On an error the
/// files stay: the next start finishes them.
pub fn finish_batch(
    store: &GateStore,
    log: Option<&mut (dyn ReceiptLog + '_)>,
    batch: &[Pending],
) -> Result<(), SinkError> {
    keep_all(store, batch)?;
    if let Some(log) = log {
        let envelopes: Vec<&str> = batch
            .iter()
            .filter_map(|p| p.issued.as_ref().map(|i| i.envelope.as_str()))
            .collect();
        if !envelopes.is_empty() {
            log.append(&envelopes)?;
        }
    }
    for p in batch {
        p.unlink()?;
    }
    match batch.first() {
        Some(p) => Ok(p.sync_removals()?),
        None => Ok(()),
    }
}
