//! bundle: the one place a bundle is assembled from a log entry, for
//! `rcpt log prove`, the service's `POST /add` answer, the intake's
//! [`Published::bundle`](crate::log::intake::Published::bundle) and every other
//! caller: the envelope decoded from the entry, its receipt checked, the
//! id computed from the payload, and the proof and checkpoint as given.

use super::{Log, LogError};
use crate::bundle::{Bundle, LogProof};
use crate::receipt::dsse::Envelope;
use crate::tlog::merkle::Hash;

impl Log {
    /// The bundle of entry `index` in the tree of `size` leaves under
    /// `checkpoint` (the signed note of that size, with any cosignatures):
    /// the entry and its inclusion proof are read from the tiles.
    pub fn bundle(&self, index: u64, size: u64, checkpoint: &str) -> Result<Bundle, LogError> {
        let entry = self.entry(index)?;
        self.bundle_of(index, &entry, size, checkpoint)
    }

    /// The bundle of entry `index` when the caller holds the entry's
    /// bytes (a service that just appended it): its inclusion proof is
    /// made here.
    pub fn bundle_of(
        &self,
        index: u64,
        entry: &[u8],
        size: u64,
        checkpoint: &str,
    ) -> Result<Bundle, LogError> {
        let inclusion = self.inclusion_proof(index, size)?;
        self.bundle_from(index, entry, inclusion, size, checkpoint)
    }

    /// The bundle of entry `index` when the caller already holds the
    /// entry's bytes and its inclusion proof (a range proved at once).
    pub fn bundle_from(
        &self,
        index: u64,
        entry: &[u8],
        inclusion: Vec<Hash>,
        size: u64,
        checkpoint: &str,
    ) -> Result<Bundle, LogError> {
        let envelope = Envelope::from_entry(entry)
            .map_err(|source| LogError::EntryDecode { index, source })?;
        let (_, id) = crate::receipt::receipt_from_cbor(&envelope.payload)
            .map_err(|source| LogError::EntryPayload { index, source })?;
        Ok(Bundle {
            receipt_id: id.to_string(),
            envelope,
            log: LogProof {
                origin: self.origin().to_string(),
                index,
                tree_size: size,
                inclusion,
                checkpoint: checkpoint.to_string(),
            },
        })
    }
}
