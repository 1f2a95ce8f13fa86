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
    /// For an escalate receipt: its ticket's escalation record, re-hashed.
    pub escalation: Option<Escalated>,
}

/// An escalation record as stored.
#[derive(Debug)]
pub struct Escalated {
    /// The ticket (the record's identity).
    pub ticket: Digest,
    /// Its reasons.
    pub reasons: Vec<String>,
    /// How many reads it holds.
    pub reads: usize,
}

/// What `gate show` prints for an approval receipt: the record its proof
/// is the identity of, re-hashed.
#[derive(Debug)]
pub struct ShownApproval {
    /// The record's identity.
    pub record: Digest,
    /// The escalated receipt approved.
    pub approves: Digest,
    /// The ticket approved (the approval's precondition).
    pub ticket: Digest,
}

/// The record of approval receipt `receipt` (id `receipt_id`), re-hashed:
/// it names the ticket the receipt's precondition is, and an approval's
/// proof is its identity.
pub fn show_approval(
    store: &GateStore,
    receipt: &Receipt,
    receipt_id: &Digest,
) -> Result<ShownApproval, ShowError> {
    let record = store
        .receipt_record(receipt_id)?
        .ok_or(ShowError::Unknown(*receipt_id))?;
    let value = store.get_record(&record)?;
    let field = |k: &str| -> Result<Digest, ShowError> {
        value
            .as_map()
            .filter(|m| m.len() == 2)
            .and_then(|m| m.get(k))
            .and_then(|v| v.as_text())
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| {
                ShowError::Mismatch("the stored record is not an approval record".into())
            })
    };
    let (approves, ticket) = (field("approves")?, field("ticket")?);
    if receipt.precondition != Some(ticket) {
        return Err(ShowError::Mismatch(
            "the approval's precondition is not its ticket".into(),
        ));
    }
    if let Verdict::Admit { proof } = &receipt.verdict
        && *proof != record
    {
        return Err(ShowError::Mismatch(format!(
            "the admit proof is {proof}, the record {record}"
        )));
    }
    Ok(ShownApproval {
        record,
        approves,
        ticket,
    })
}

/// The escalation record a ticket names, re-hashed; it must name the
/// receipt's change and policy.
fn escalated(store: &GateStore, receipt: &Receipt, ticket: &str) -> Result<Escalated, ShowError> {
    let mismatch = |why: &str| ShowError::Mismatch(why.to_string());
    let ticket: Digest = ticket
        .parse()
        .map_err(|_| mismatch("the ticket is not a digest"))?;
    let value = store.get_record(&ticket)?;
    let map = value
        .as_map()
        .ok_or_else(|| mismatch("the ticket names no escalation record"))?;
    let text = |k: &str| map.get(k).and_then(|v| v.as_text()).unwrap_or_default();
    if text("change_id") != receipt.change_id.to_string()
        || text("policy_id") != receipt.policy_id.to_string()
    {
        return Err(mismatch(
            "the escalation record names another change or policy",
        ));
    }
    let list = |k: &str| match map.get(k) {
        Some(crate::receipt::canonical::Value::Array(a)) => Ok(a),
        _ => Err(mismatch("the escalation record is malformed")),
    };
    let reasons = list("reasons")?
        .iter()
        .map(|v| v.as_text().map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| mismatch("the escalation record is malformed"))?;
    Ok(Escalated {
        ticket,
        reasons,
        reads: list("read_set")?.len(),
    })
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
    let escalation = match &receipt.verdict {
        Verdict::Escalate { ticket } => Some(escalated(store, receipt, ticket)?),
        _ => None,
    };
    Ok(Shown {
        id,
        evidence,
        outputs,
        escalation,
    })
}
