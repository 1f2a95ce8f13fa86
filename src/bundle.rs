//! bundle: the offline proof bundle of one receipt (DESIGN.md "Bundle").
//!
//! Interface fixed; the parser with limits is written by the lead.

use crate::dsse::Envelope;
use crate::merkle::Hash;

/// Where a receipt sits in a log, with the proof and the signed checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogProof {
    /// The log's origin (checkpoint first line, log key name).
    pub origin: String,
    /// Leaf index of the entry.
    pub index: u64,
    /// Tree size the proof and checkpoint are for.
    pub tree_size: u64,
    /// RFC 9162 inclusion proof, leaf to root.
    pub inclusion: Vec<Hash>,
    /// The signed checkpoint note text at `tree_size`.
    pub checkpoint: String,
}

/// A v1 bundle: the envelope, its claimed id, and its log proof.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    /// Claimed receipt id (`blake3:`...); must match the payload.
    pub receipt_id: String,
    /// The DSSE envelope.
    pub envelope: Envelope,
    /// Log inclusion.
    pub log: LogProof,
}

impl Bundle {
    /// The bundle as JSON text (media type `application/vnd.rcpt.bundle.v1+json`).
    pub fn to_json(&self) -> String {
        todo!()
    }
}
