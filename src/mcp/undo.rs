//! undo: a step's files put back (`rcpt gate undo RECEIPT --store DIR
//! --root DIR`, spec/gate-mcp.md "Undo").
//!
//! The gate's undo for the tool-proxy substrate, on the gate's own parts:
//! the receipt must be signed by the gate key, name it as issuer, say
//! `applied` true and carry an inverse; every file of the inverse record
//! must lie under a `--root` (no link on the way) and still be at the
//! state the step left, else nothing is written. The current state is
//! stored first (the undo's own inverse: an undo is undone the same way),
//! then the files are written under the gate's journal, with a receipt.

use super::step::INVERSE_BASE;
use crate::digest::Digest;
use crate::gate::apply::{Plan, execute, put_side};
use crate::gate::inverse::{self, Record};
use crate::gate::journal::{self, JournalError, Recovered};
use crate::gate::undo::{NOT_SIGNED, inverse_of, own_receipt, refused};
use crate::gate::{GateError, Signed, Signer};
use crate::limits::MAX_GATE_PREIMAGE_BYTES;
use crate::receipt::canonical::{Value, dagcbor, identity};
use crate::receipt::dsse::Envelope;
use crate::receipt::{ReadItem, Receipt, Replay, Substrate, Verdict};
use std::collections::BTreeMap;
use std::path::Path;

/// What an undo did.
#[derive(Debug)]
pub struct Undone {
    /// The undo's receipt, signed.
    pub signed: Signed,
    /// The record written (the step's, sides swapped).
    pub record: Record,
    /// An interrupted apply or undo of the store recovered first.
    pub recovered: Option<Recovered>,
}

fn t(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

/// The receipt in `envelope` if it is this gate's, a tool-proxy step that
/// was applied and has an inverse: (its id, the inverse's id).
fn authentic(envelope: &Envelope, signer: &Signer<'_>) -> Result<(Digest, Digest), GateError> {
    if envelope.payload_type != crate::constants::RECEIPT_PAYLOAD_TYPE {
        return Err(refused(NOT_SIGNED));
    }
    let (receipt, id) = own_receipt(envelope, signer)?;
    if receipt.substrate != Substrate::ToolProxy {
        return Err(refused(
            "not a tool-proxy receipt: undo it without --root, in its work tree",
        ));
    }
    Ok((id, inverse_of(&receipt)?))
}

/// Every file under a root (no link on the way) and at its post side.
fn restorable(record: &Record, roots: &[super::files::Root]) -> Result<(), GateError> {
    if record.base != INVERSE_BASE {
        return Err(refused(
            "the inverse record is not a tool-proxy one (its paths are not from /)",
        ));
    }
    for t in &record.files {
        let abs = format!("/{}", t.path);
        super::files::resolve_path(&abs, roots, Path::new("/")).map_err(|r| {
            refused(format!(
                "{abs}: {} ({}); nothing was written",
                r.detail, r.reason
            ))
        })?;
        let now = journal::side_now(Path::new(INVERSE_BASE), &t.path)?;
        if now != t.post {
            return Err(JournalError::Mismatch {
                path: abs,
                why: "it is no longer what the receipt's step left".into(),
            }
            .into());
        }
    }
    Ok(())
}

/// Undo the step of `envelope`'s receipt.
pub fn undo(
    envelope: &Envelope,
    store_dir: &Path,
    roots: &[super::files::Root],
    signer: &Signer<'_>,
) -> Result<Undone, GateError> {
    let (locked, recovered) = journal::lock_and_recover(store_dir)?;
    let store = locked.store();
    let (receipt_id, inverse_id) = authentic(envelope, signer)?;
    let record = inverse::load(store, &inverse_id).map_err(JournalError::from)?;
    record
        .check_objects(store, true, false)
        .map_err(JournalError::from)?;
    restorable(&record, roots)?;
    for t in &record.files {
        if let Some(side) = t.post {
            put_side(
                store,
                Path::new(INVERSE_BASE),
                &t.path,
                side,
                MAX_GATE_PREIMAGE_BYTES,
            )?;
        }
    }
    let back = record.swapped(INVERSE_BASE);
    let back_id = back
        .store_checked(store, true, true)
        .map_err(JournalError::from)?;
    let evidence = Value::Map(BTreeMap::from([
        ("version".to_string(), Value::Integer(1)),
        ("kind".to_string(), t("tool-undo")),
        ("policy".to_string(), t(crate::gate::undo::UNDO_POLICY)),
        ("undo_of".to_string(), t(receipt_id.to_string())),
        ("record".to_string(), t(back_id.to_string())),
    ]));
    let evidence_id = store.put_record(&evidence)?;
    let receipt = undo_receipt(&back, back_id, receipt_id, evidence_id, signer);
    let signed = crate::gate::sign(&receipt, signer.key)?;
    let plan = Plan::undo(&back, back_id, evidence_id);
    execute(store, Path::new(INVERSE_BASE), &plan, &signed, &|_| {})?;
    Ok(Undone {
        signed,
        record: back,
        recovered,
    })
}

/// The undo's receipt: its change is the files it leaves.
fn undo_receipt(
    back: &Record,
    back_id: Digest,
    receipt_id: Digest,
    evidence_id: Digest,
    signer: &Signer<'_>,
) -> Receipt {
    let files: Vec<Value> = back
        .files
        .iter()
        .map(|f| {
            let d = f.post.map_or(Value::Null, |s| t(s.digest.to_string()));
            Value::Map(BTreeMap::from([
                ("path".to_string(), t(format!("/{}", f.path))),
                ("digest".to_string(), d),
            ]))
        })
        .collect();
    let change = Value::Map(BTreeMap::from([
        ("undo_of".to_string(), t(receipt_id.to_string())),
        ("files".to_string(), Value::Array(files)),
    ]));
    let precondition = Value::Map(BTreeMap::from([
        ("undo_of".to_string(), t(receipt_id.to_string())),
        ("inverse".to_string(), t(back_id.to_string())),
    ]));
    let read_set = back
        .files
        .iter()
        .filter_map(|f| {
            f.post.map(|s| ReadItem {
                resource: format!("/{}", f.path),
                digest: s.digest,
            })
        })
        .collect();
    Receipt {
        issuer: signer.issuer.to_string(),
        issued_at: signer.now,
        substrate: Substrate::ToolProxy,
        change_id: identity(&dagcbor::encode(&change)),
        inverse_delta_id: Some(back_id),
        reversibility: Some(true),
        read_set,
        precondition: Some(identity(&dagcbor::encode(&precondition))),
        policy_id: crate::gate::undo::undo_policy_id(&receipt_id),
        verdict: Verdict::Admit { proof: evidence_id },
        applied: true,
        replay: Replay::DeterministicReplay,
    }
}
