//! approval: receipts by which a person approves (or refuses) an
//! escalated change, and whether one counts (spec/gate.md "Approval").
//!
//! [`approve`] checks an escalate receipt (signed by the gate key the
//! approver trusts) and makes the approval receipt: issuer the approver's
//! key name; the escalated receipt's `substrate`, `change_id` and
//! `read_set`; `precondition` the ticket (the escalation it holds for);
//! `policy_id` the identity of `{"name": "rcpt.approve"}`; verdict admit
//! with proof the identity of `{"approves": receipt id, "ticket": T}`, or
//! deny `approval.refused` (and `approval.reason.<R>`); `applied` false.
//!
//! [`judge`] decides, for a later evaluation of the same change, which
//! approvals count: substrate-neutral (the caller gives the freshness
//! rule), so the tool proxy uses it as the git gate does.

use super::decide::{APPROVAL_REFUSED, Tally};
use super::error::GateError;
use super::issue::{Signed, Signer, sign};
use super::rules::is_reason;
use super::store::{GateStore, StoreError};
use crate::digest::Digest;
use crate::keys::NoteVerifier;
use crate::receipt::canonical::{Value, dagcbor, identity};
use crate::receipt::dsse::{Envelope, SignatureCheck, TrustedKeys};
use crate::receipt::{PayloadError, ReadItem, Receipt, Replay, Substrate, Verdict};
use std::collections::{BTreeMap, BTreeSet};

pub use crate::receipt::require::{APPROVAL_POLICY, approval_policy_id, describe};

/// The record an approval's proof is the identity of.
pub fn approval_record(approves: &Digest, ticket: &Digest) -> Value {
    Value::Map(BTreeMap::from([
        ("approves".to_string(), Value::Text(approves.to_string())),
        ("ticket".to_string(), Value::Text(ticket.to_string())),
    ]))
}

/// Whether `receipt` is an approval receipt (by its `policy_id`).
pub fn is_approval(receipt: &Receipt) -> bool {
    receipt.policy_id == approval_policy_id()
}

/// Why no approval receipt was made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The receipt is not authentic under the gate key (exit 1).
    #[error("refused: {0}; nothing was issued")]
    Refused(String),
    /// The receipt cannot be read.
    #[error("the receipt to approve")]
    Payload(#[from] PayloadError),
    /// The refusal's reason is not a reason code (a bad invocation).
    #[error(
        "--reason {0:?}: a reason is 1 to 64 of a-z 0-9 . _ - (it becomes approval.reason.<R>)"
    )]
    Reason(String),
    /// Signing or storing failed.
    #[error(transparent)]
    Gate(#[from] GateError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What to approve, and who approves.
#[derive(Debug)]
pub struct ApproveRequest<'a> {
    /// The escalate receipt's envelope.
    pub escalation: &'a Envelope,
    /// The gate key that must have signed it (its name is the issuer).
    pub gate_key: &'a NoteVerifier,
    /// The approver (its key's name is the issuer).
    pub signer: Signer<'a>,
    /// `Some(R)`: refuse, with reason R.
    pub refusal: Option<&'a str>,
}

/// An approval receipt made.
#[derive(Debug)]
pub struct Approved {
    /// The receipt, signed.
    pub signed: Signed,
    /// The escalated receipt's id.
    pub escalated: Digest,
    /// The ticket approved.
    pub ticket: Digest,
    /// The approval record (`{"approves", "ticket"}`) and its identity.
    pub record: Value,
}

/// The escalate receipt in `envelope`, authentic under `gate_key`; its id
/// and ticket.
fn escalated(
    envelope: &Envelope,
    gate_key: &NoteVerifier,
) -> Result<(Receipt, Digest, Digest), ApprovalError> {
    let refused = |why: String| ApprovalError::Refused(why);
    if envelope.payload_type != crate::constants::RECEIPT_PAYLOAD_TYPE {
        return Err(refused("the envelope does not hold a receipt".into()));
    }
    let keys = TrustedKeys::new(&[gate_key.key]);
    if !matches!(keys.check(envelope), SignatureCheck::Verified { .. }) {
        return Err(refused(format!(
            "the receipt is not signed by the gate key {} (--gate-key)",
            gate_key.name
        )));
    }
    let (receipt, id) = crate::receipt::receipt_from_cbor(&envelope.payload)?;
    if receipt.issuer != gate_key.name {
        return Err(refused(format!(
            "the receipt's issuer is {:?}, the gate key's name {:?}",
            receipt.issuer, gate_key.name
        )));
    }
    let Verdict::Escalate { ticket } = &receipt.verdict else {
        return Err(refused(
            "the receipt is not an escalation (its verdict is not escalate)".into(),
        ));
    };
    let ticket: Digest = ticket
        .parse()
        .map_err(|_| refused(format!("its ticket {ticket:?} is not a gate ticket")))?;
    Ok((receipt, id, ticket))
}

/// Make the approval (or refusal) receipt of `req.escalation`.
pub fn approve(req: &ApproveRequest<'_>) -> Result<Approved, ApprovalError> {
    let (escalated_receipt, escalated, ticket) = escalated(req.escalation, req.gate_key)?;
    let record = approval_record(&escalated, &ticket);
    let verdict = match req.refusal {
        None => Verdict::Admit {
            proof: identity(&dagcbor::encode(&record)),
        },
        Some(r) if is_reason(r) => Verdict::Deny {
            reasons: vec![format!("approval.reason.{r}"), APPROVAL_REFUSED.to_string()],
        },
        Some(r) => return Err(ApprovalError::Reason(r.to_string())),
    };
    let receipt = Receipt {
        issuer: req.signer.issuer.to_string(),
        issued_at: req.signer.now,
        substrate: escalated_receipt.substrate,
        change_id: escalated_receipt.change_id,
        inverse_delta_id: None,
        reversibility: None,
        read_set: escalated_receipt.read_set,
        precondition: Some(ticket),
        policy_id: approval_policy_id(),
        verdict,
        applied: false,
        replay: Replay::Unknown,
    };
    let signed = sign(&receipt, req.signer.key)?;
    Ok(Approved {
        signed,
        escalated,
        ticket,
        record,
    })
}

/// Keep `approved` in `store`: its record (the receipt pointer names it)
/// and its envelope under its ticket.
pub fn keep(store: &GateStore, approved: &Approved) -> Result<(), StoreError> {
    let record = store.put_record(&approved.record)?;
    store.link_receipt(&approved.signed.valid.id, &record)?;
    store.put_approval(
        &approved.ticket,
        &approved.signed.valid.id,
        approved.signed.envelope.to_json().as_bytes(),
    )
}

/// The approvals `store` keeps under `ticket`, as candidates after
/// `offered` (a kept file that is not an envelope is skipped: it cannot
/// count).
pub fn with_stored(
    offered: &[Candidate],
    store: &GateStore,
    ticket: &Digest,
) -> Result<Vec<Candidate>, StoreError> {
    let mut candidates = offered.to_vec();
    for bytes in store.approvals(ticket)? {
        if let Ok(envelope) = Envelope::from_json(&bytes) {
            candidates.push(Candidate {
                source: "store".into(),
                envelope,
            });
        }
    }
    Ok(candidates)
}

/// An approval offered to an evaluation: where it came from, and it.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// A file name, or `store`.
    pub source: String,
    /// The envelope.
    pub envelope: Envelope,
}

/// Whether an approval counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// It counts toward `approvals_required`.
    Counts,
    /// An approver refused: the change is denied.
    Refuses,
    /// It does not count, and why.
    Void(String),
}

/// One candidate judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judged {
    /// Where it came from.
    pub source: String,
    /// Its receipt id, when its payload could be read.
    pub receipt_id: Option<Digest>,
    /// The approver whose key signed it, when one did.
    pub approver: Option<String>,
    /// Whether it counts.
    pub standing: Standing,
}

/// What an evaluation asks of an approval.
pub struct Context<'a> {
    /// The policy's approvers.
    pub approvers: &'a [NoteVerifier],
    /// `approvals_required`.
    pub required: usize,
    /// The substrate of the change.
    pub substrate: Substrate,
    /// The change evaluated.
    pub change_id: Digest,
    /// The ticket this evaluation would escalate with.
    pub ticket: Digest,
    /// Whether a read set is still fresh (else why not).
    pub fresh: &'a dyn Fn(&[ReadItem]) -> Result<(), String>,
}

/// Judge every candidate (each receipt once), and what they amount to.
pub fn judge(candidates: &[Candidate], ctx: &Context<'_>) -> (Vec<Judged>, Tally) {
    let mut seen = BTreeSet::new();
    let mut counted: BTreeMap<String, Digest> = BTreeMap::new();
    let mut judged = Vec::new();
    for c in candidates {
        let mut j = judge_one(c, ctx);
        if let Some(id) = j.receipt_id
            && !seen.insert(id)
        {
            continue;
        }
        if let (Standing::Counts, Some(name), Some(id)) = (&j.standing, &j.approver, j.receipt_id) {
            if let Some(first) = counted.get(name) {
                j.standing = Standing::Void(format!(
                    "approver {name} is already counted (receipt {first}); each approver counts once"
                ));
            } else {
                counted.insert(name.clone(), id);
            }
        }
        judged.push(j);
    }
    let tally = Tally {
        approvals: counted.len(),
        refused: judged.iter().any(|j| j.standing == Standing::Refuses),
        required: ctx.required,
    };
    (judged, tally)
}

/// Judge one candidate.
fn judge_one(c: &Candidate, ctx: &Context<'_>) -> Judged {
    let mut j = Judged {
        source: c.source.clone(),
        receipt_id: None,
        approver: None,
        standing: Standing::Void(String::new()),
    };
    let (receipt, id) = match crate::receipt::receipt_from_cbor(&c.envelope.payload) {
        Ok(r) if c.envelope.payload_type == crate::constants::RECEIPT_PAYLOAD_TYPE => r,
        _ => {
            j.standing = Standing::Void("not a receipt".into());
            return j;
        }
    };
    j.receipt_id = Some(id);
    let signer = ctx.approvers.iter().find(|k| {
        matches!(
            TrustedKeys::new(&[k.key]).check(&c.envelope),
            SignatureCheck::Verified { .. }
        )
    });
    j.approver = signer.map(|k| k.name.clone());
    j.standing = match signer {
        None => Standing::Void(
            "not signed by any of the policy's approvers (forged, or by a key the policy \
             does not name)"
                .into(),
        ),
        Some(k) => standing(&receipt, k, ctx),
    };
    j
}

/// The standing of an authentic receipt signed by approver `key`.
fn standing(r: &Receipt, key: &NoteVerifier, ctx: &Context<'_>) -> Standing {
    let void = |why: String| Standing::Void(why);
    if r.issuer != key.name {
        return void(format!(
            "its issuer {:?} is not the name of the key that signed it ({})",
            r.issuer, key.name
        ));
    }
    if r.policy_id != approval_policy_id() || r.applied || r.substrate != ctx.substrate {
        return void("not an approval receipt (rcpt gate approve makes them)".into());
    }
    if r.change_id != ctx.change_id {
        return void(format!(
            "it approves another change ({}), not {}",
            r.change_id, ctx.change_id
        ));
    }
    // Its reads first (the ticket covers them too): the more precise why.
    if let Err(why) = (ctx.fresh)(&r.read_set) {
        return void(format!("stale: {why}"));
    }
    if r.precondition != Some(ctx.ticket) {
        return void(format!(
            "its ticket is not this escalation's ({}): the reasons or the policy changed \
             since it was approved",
            ctx.ticket
        ));
    }
    match &r.verdict {
        Verdict::Admit { .. } => Standing::Counts,
        Verdict::Deny { reasons } if reasons.iter().any(|x| x == APPROVAL_REFUSED) => {
            Standing::Refuses
        }
        _ => void("its verdict is neither an approval nor a refusal".into()),
    }
}
