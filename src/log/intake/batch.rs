//! batch: a stream of envelopes (a command's files and lines) taken in
//! durable batches. Inputs are read a chunk at a time on the caller's
//! thread and admitted on every core while the next chunk is read; the
//! envelope bytes are dropped as soon as their chunk is admitted, so
//! memory holds the entries of one batch, not its input. Each batch is
//! appended and published before its outcomes are handed back, in input
//! order, refusals included.

use super::{Intake, IntakeError};
use crate::limits::{MAX_APPEND_BATCH_BYTES, MAX_APPEND_BATCH_ENTRIES};
use crate::log::admit::{self, AcceptedIssuers, Refusal, Signatures};
use crate::log::{Appended, HashedEntry};
use rayon::prelude::*;

/// Inputs read and admitted at a time while a batch is gathered.
pub const ADMIT_CHUNK: usize = 4096;

/// One input of a stream: the caller's tag for it (its name), and its
/// envelope bytes or why the caller could not read them.
#[derive(Debug)]
pub struct Offered<T, U> {
    /// The caller's tag, handed back with the outcome.
    pub tag: T,
    /// The envelope JSON, or the caller's reason it has none.
    pub envelope: Result<Vec<u8>, U>,
}

/// What became of one input.
#[derive(Debug)]
#[non_exhaustive]
pub enum Outcome<U> {
    /// Admitted and appended: its index, its receipt's id, what was
    /// checked of its signatures.
    Logged {
        /// Its index, and whether it is new.
        appended: Appended,
        /// `blake3:` identity of the receipt payload.
        receipt_id: String,
        /// `verified` or `not_checked`.
        signatures: &'static str,
    },
    /// The log refused it.
    Refused(Refusal),
    /// The caller could not read it.
    Unread(U),
}

/// An input's outcome before its batch is appended (the entry itself
/// goes to the writer).
enum Checked<U> {
    Admitted(String, &'static str),
    Refused(Refusal),
    Unread(U),
}

/// How much of a durable batch has been gathered.
#[derive(Default)]
struct Gathered {
    inputs: usize,
    bytes: usize,
}

impl Gathered {
    /// Room for another input: at most `max` (and
    /// `MAX_APPEND_BATCH_ENTRIES`) inputs, and about
    /// `MAX_APPEND_BATCH_BYTES` of input.
    fn room(&self, max: usize) -> bool {
        self.inputs < max.min(MAX_APPEND_BATCH_ENTRIES) && self.bytes < MAX_APPEND_BATCH_BYTES / 2
    }
}

/// One admitted chunk: each input's tag and check, and its entry if admitted.
type AdmittedChunk<T, U> = Vec<(T, Checked<U>, Option<HashedEntry>)>;

/// Take the next chunk of inputs of the batch being `gathered`.
fn next_chunk<T, U>(
    inputs: &mut impl Iterator<Item = Offered<T, U>>,
    gathered: &mut Gathered,
    max: usize,
) -> Vec<Offered<T, U>> {
    let mut chunk = Vec::new();
    while chunk.len() < ADMIT_CHUNK && gathered.room(max) {
        let Some(input) = inputs.next() else { break };
        gathered.inputs += 1;
        gathered.bytes += input.envelope.as_ref().map_or(0, Vec::len);
        chunk.push(input);
    }
    chunk
}

/// Admit the inputs of one chunk on every core.
fn admit_chunk<T: Send, U: Send>(
    accepted: Option<&AcceptedIssuers>,
    chunk: Vec<Offered<T, U>>,
) -> AdmittedChunk<T, U> {
    chunk
        .into_par_iter()
        .map(|input| match input.envelope {
            Err(u) => (input.tag, Checked::Unread(u), None),
            Ok(bytes) => match admit::admit(&bytes, accepted) {
                Ok(a) => {
                    let signatures = Signatures::as_str(&a.signatures);
                    let checked = Checked::Admitted(a.receipt_id, signatures);
                    (input.tag, checked, Some(HashedEntry::new(a.entry)))
                }
                Err(r) => (input.tag, Checked::Refused(r), None),
            },
        })
        .collect()
}

impl Intake {
    /// Read and admit (a chunk at a time, the next read while the last is
    /// admitted) the inputs of the next durable batch.
    #[allow(clippy::type_complexity)]
    fn gather<T: Send, U: Send>(
        &self,
        inputs: &mut impl Iterator<Item = Offered<T, U>>,
        max: usize,
    ) -> Result<(Vec<HashedEntry>, Vec<(T, Checked<U>)>), IntakeError> {
        let accepted = self.accepted.as_ref();
        let mut gathered = Gathered::default();
        let (mut entries, mut checked) = (Vec::new(), Vec::new());
        std::thread::scope(|scope| -> Result<(), IntakeError> {
            let mut pending: Option<std::thread::ScopedJoinHandle<'_, AdmittedChunk<T, U>>> = None;
            loop {
                let chunk = next_chunk(inputs, &mut gathered, max);
                if let Some(admitting) = pending.take() {
                    let admitted = admitting.join().map_err(|_| IntakeError::AdmissionThread)?;
                    for (tag, c, entry) in admitted {
                        checked.push((tag, c));
                        entries.extend(entry);
                    }
                }
                if chunk.is_empty() {
                    return Ok(());
                }
                pending = Some(scope.spawn(move || admit_chunk(accepted, chunk)));
            }
        })?;
        Ok((entries, checked))
    }

    /// Take `inputs` in durable batches of at most `max` (and the batch
    /// limits): each batch is admitted, appended and published, then
    /// `each` is given its outcomes in input order. Stops at the first
    /// error (of the log, or of `each`).
    pub fn append_stream<T, U, E>(
        &mut self,
        mut inputs: impl Iterator<Item = Offered<T, U>>,
        max: usize,
        mut each: impl FnMut(Vec<(T, Outcome<U>)>) -> Result<(), E>,
    ) -> Result<(), E>
    where
        T: Send,
        U: Send,
        E: From<IntakeError>,
    {
        loop {
            let (entries, checked) = self.gather(&mut inputs, max)?;
            if checked.is_empty() {
                return Ok(());
            }
            let mut appended = self.append_hashed(entries)?.into_iter();
            self.publish()?;
            let mut outcomes = Vec::with_capacity(checked.len());
            for (tag, c) in checked {
                let outcome = match c {
                    Checked::Admitted(receipt_id, signatures) => Outcome::Logged {
                        appended: appended
                            .next()
                            .ok_or(IntakeError::Short { got: 0, want: 1 })?,
                        receipt_id,
                        signatures,
                    },
                    Checked::Refused(r) => Outcome::Refused(r),
                    Checked::Unread(u) => Outcome::Unread(u),
                };
                outcomes.push((tag, outcome));
            }
            each(outcomes)?;
        }
    }
}
