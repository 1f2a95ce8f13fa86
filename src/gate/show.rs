//! show: a receipt's evidence from the store, every object re-hashed
//! (`rcpt gate show`, spec/gate.md "The store").

use super::evidence::{Evidence, EvidenceError};
use super::store::{GateStore, StoreError};
use crate::digest::Digest;
use crate::receipt::{Receipt, Verdict};

/// Why `gate show` cannot show a receipt's evidence.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShowError {
    /// The store has no record for the receipt.
    #[error("this store holds no evidence for receipt {0} (was it issued with another --store?)")]
    Unknown(Digest),
    /// The store failed or an object is corrupt.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The record is not evidence.
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    /// The evidence does not belong to the receipt.
    #[error("the stored evidence does not match the receipt: {0}")]
    Mismatch(String),
}

/// What `gate show` prints: the evidence record, its identity, and each
/// check's stdout and stderr, all re-hashed.
#[derive(Debug)]
pub struct Shown {
    /// The record's identity.
    pub id: Digest,
    /// The record.
    pub evidence: Evidence,
    /// (stdout, stderr) of each check, in order.
    pub outputs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The evidence of `receipt` (id `receipt_id`) and every output it names,
/// each object re-hashed; the evidence must name the receipt's change and
/// policy, and be an admit receipt's proof.
pub fn show(store: &GateStore, receipt: &Receipt, receipt_id: &Digest) -> Result<Shown, ShowError> {
    let id = store
        .receipt_record(receipt_id)?
        .ok_or(ShowError::Unknown(*receipt_id))?;
    let evidence = Evidence::from_value(&store.get_record(&id)?)?;
    if evidence.change_id != receipt.change_id || evidence.policy_id != receipt.policy_id {
        return Err(ShowError::Mismatch("change_id or policy_id differs".into()));
    }
    if let Verdict::Admit { proof } = &receipt.verdict
        && *proof != id
    {
        return Err(ShowError::Mismatch(format!(
            "the admit proof is {proof}, the record {id}"
        )));
    }
    let mut outputs = Vec::with_capacity(evidence.checks.len());
    for c in &evidence.checks {
        let (out, err) = (store.get(&c.stdout)?, store.get(&c.stderr)?);
        if out.len() as u64 != c.stdout_bytes || err.len() as u64 != c.stderr_bytes {
            return Err(ShowError::Mismatch(format!(
                "check {}: output sizes",
                c.name
            )));
        }
        outputs.push((out, err));
    }
    Ok(Shown {
        id,
        evidence,
        outputs,
    })
}
