//! undo: `rcpt gate undo RECEIPT` (spec/gate.md "Undo").
//!
//! Only a receipt authentic under the gate's own key, saying `applied`
//! true, with an inverse; only when every file it touched is still at the
//! receipt's post-image (else refused, naming the file, nothing written).
//! The current state is stored first, as the undo's own inverse (the
//! record with its sides swapped), so an undo is itself undone the same
//! way; then the files are written under the journal ([`execute`]), and
//! the undo gets its receipt.

use super::apply::{
    Outcome, Plan, change_of, execute, precondition_of_transition, put_side, read_set_written,
};
use super::conclude::Concluded;
use super::error::GateError;
use super::evidence::Evidence;
use super::issue::{Signer, sign};
use super::journal::{self, JournalError};
use super::store::GateStore;
use crate::digest::Digest;
use crate::fresh::HEAD;
use crate::limits::MAX_GATE_PREIMAGE_BYTES;
use crate::receipt::canonical::{Value, dagcbor, identity};
use crate::receipt::dsse::{Envelope, SignatureCheck, TrustedKeys};
use crate::receipt::{Receipt, Replay, Substrate, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The name of the undo's rule, in its evidence record.
pub const UNDO_POLICY: &str = "rcpt.undo";

/// `policy_id` of an undo: the identity of `{"name": "rcpt.undo",
/// "undo_of": receipt id}` (the rule: authentic, applied, files at their
/// post-images), so the undo names the receipt it undoes.
pub fn undo_policy_id(receipt_id: &Digest) -> Digest {
    identity(&dagcbor::encode(&Value::Map(BTreeMap::from([
        ("name".to_string(), Value::Text(UNDO_POLICY.to_string())),
        ("undo_of".to_string(), Value::Text(receipt_id.to_string())),
    ]))))
}

/// What to undo.
pub struct UndoRequest<'a> {
    /// A directory inside the work tree.
    pub dir: &'a Path,
    /// The receipt's envelope.
    pub envelope: &'a Envelope,
    /// The store, locked and recovered ([`journal::lock_and_recover`]).
    pub store: &'a journal::Locked,
    /// Who signs, and when; its key must have signed the receipt.
    pub signer: Signer<'a>,
    /// Called after each durable write step.
    pub crash: &'a dyn Fn(u32),
}

impl<'a> Plan<'a> {
    /// The plan of an undo: the inverse transition `record` (`record_id`),
    /// its files before the receipt pointer to `evidence_id`.
    pub fn undo(
        record: &'a super::inverse::Record,
        record_id: Digest,
        evidence_id: Digest,
    ) -> Plan<'a> {
        Plan {
            op: "undo",
            record,
            record_id,
            evidence_id,
            link_first: false,
        }
    }
}

pub(crate) fn refused(why: impl Into<String>) -> GateError {
    GateError::Refused(why.into())
}

/// The receipt in `envelope`, if it is the gate's and was applied, and its
/// inverse record's identity.
fn authentic(
    envelope: &Envelope,
    signer: &Signer<'_>,
) -> Result<(Receipt, Digest, Digest), GateError> {
    if envelope.payload_type != crate::constants::RECEIPT_PAYLOAD_TYPE {
        return Err(refused("the envelope does not hold a receipt"));
    }
    let (receipt, id) = own_receipt(envelope, signer)?;
    let inverse = inverse_of(&receipt)?;
    Ok((receipt, id, inverse))
}

/// The receipt in `envelope` and its id, if `signer` signed it under its
/// name (only the gate's own receipts are undone).
pub(crate) fn own_receipt(
    envelope: &Envelope,
    signer: &Signer<'_>,
) -> Result<(Receipt, Digest), GateError> {
    let keys = TrustedKeys::new(&[signer.key.verifying_key()]);
    if !matches!(keys.check(envelope), SignatureCheck::Verified { .. }) {
        return Err(refused(NOT_SIGNED));
    }
    let (receipt, id) = crate::receipt::receipt_from_cbor(&envelope.payload)?;
    if receipt.issuer != signer.issuer {
        return Err(refused(format!(
            "the receipt's issuer is {:?}, the gate key's name {:?}",
            receipt.issuer, signer.issuer
        )));
    }
    Ok((receipt, id))
}

/// Why a receipt that is not the gate's own is refused.
pub(crate) const NOT_SIGNED: &str =
    "the receipt is not signed by this gate key: only the gate's own receipts are undone";

/// The inverse record's identity of `receipt`, if it was applied and has one.
pub(crate) fn inverse_of(receipt: &Receipt) -> Result<Digest, GateError> {
    if !receipt.applied {
        return Err(refused(
            "the receipt says applied false: nothing was written, nothing to undo",
        ));
    }
    receipt.inverse_delta_id.ok_or_else(|| {
        refused("the receipt has no inverse (reversibility false): it cannot be undone")
    })
}

/// The inverse record `id`, its pre-images all in the store, every file
/// still at its post-image (else refused, naming the file).
fn restorable(
    store: &GateStore,
    top: &Path,
    id: &Digest,
) -> Result<super::inverse::Record, GateError> {
    let record = super::inverse::load(store, id).map_err(JournalError::from)?;
    record
        .check_objects(store, true, false)
        .map_err(JournalError::from)?;
    let mut moved = None;
    let mut all_pre = true;
    for t in &record.files {
        let now = journal::side_now(top, &t.path)?;
        all_pre &= now == t.pre;
        if now != t.post && moved.is_none() {
            moved = Some(t.path.clone());
        }
    }
    match moved {
        None => Ok(record),
        Some(_) if all_pre => Err(refused(
            "already undone: every file it touched is back at its state before the change; \
             nothing was written",
        )),
        Some(path) => Err(JournalError::Mismatch {
            path,
            why: "it is no longer what the receipt's change left".into(),
        }
        .into()),
    }
}

/// The current state first: each file's bytes stored (re-hashed against
/// `post`), and the swapped record stored and checked: the undo's own
/// inverse, and its identity.
fn keep_current(
    store: &GateStore,
    top: &Path,
    record: &super::inverse::Record,
    head: &str,
) -> Result<(super::inverse::Record, Digest), GateError> {
    for t in &record.files {
        if let Some(side) = t.post {
            put_side(store, top, &t.path, side, MAX_GATE_PREIMAGE_BYTES)?;
        }
    }
    let back = record.swapped(head);
    let id = back
        .store_checked(store, true, true)
        .map_err(JournalError::from)?;
    Ok((back, id))
}

/// Undo the change of `req.envelope`'s receipt.
pub fn undo(req: &UndoRequest<'_>) -> Result<Outcome, GateError> {
    let tree = super::change::work_tree(req.dir)?;
    let store = req.store.store();
    let (_, receipt_id, inverse) = authentic(req.envelope, &req.signer)?;
    let record = restorable(store, &tree.top, &inverse)?;
    let head = tree
        .commit(HEAD)
        .map_err(super::change::ChangeError::from)?
        .ok_or_else(|| super::change::ChangeError::NoCommit(HEAD.into()))?;
    let (back, back_id) = keep_current(store, &tree.top, &record, &head)?;
    let change = change_of(&back, &BTreeSet::new());
    let change_id = change.id();
    let policy_id = undo_policy_id(&receipt_id);
    let evidence = Evidence {
        base: head,
        change_id,
        policy_id,
        policy: UNDO_POLICY.to_string(),
        checks: Vec::new(),
        rules: None,
        approvals: Vec::new(),
    };
    let evidence_id = store.put_record(&evidence.to_value())?;
    let receipt = Receipt {
        issuer: req.signer.issuer.to_string(),
        issued_at: req.signer.now,
        substrate: Substrate::Git,
        change_id,
        inverse_delta_id: Some(back_id),
        reversibility: Some(true),
        read_set: read_set_written(&tree.top, &back, &[])?,
        precondition: Some(precondition_of_transition(&back, Some(back_id))),
        policy_id,
        verdict: Verdict::Admit { proof: evidence_id },
        applied: true,
        replay: Replay::DeterministicReplay,
    };
    let signed = sign(&receipt, req.signer.key)?;
    let plan = Plan::undo(&back, back_id, evidence_id);
    execute(store, &tree.top, &plan, &signed, req.crash)?;
    Ok(Outcome {
        change_id,
        record: back,
        inverse: Some(back_id),
        signed,
        applied: true,
        concluded: Concluded::plain(receipt.verdict, evidence, evidence_id),
    })
}
