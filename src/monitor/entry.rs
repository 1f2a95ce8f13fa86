//! entry: one log entry against the watch list: the event it gives, if
//! any (spec/monitor.md "Events": the first of the table that applies).
//! Pure: no I/O, so a bundle's entries are classified in parallel.

use super::watch::{Watch, WatchedIssuer};
use super::{Event, EventKind, event_id};
use crate::constants::RECEIPT_PAYLOAD_TYPE;
use crate::receipt::dsse::{Envelope, SignatureCheck};
use crate::receipt::{self, Receipt};

/// The event entry `index` of `origin` gives under `watch`, or `None` for
/// an entry that decodes and concerns nothing watched.
pub(crate) fn classify(origin: &str, index: u64, entry: &[u8], watch: &Watch) -> Option<Event> {
    let malformed = |summary: String| Event {
        id: event_id(EventKind::Malformed, origin, Some(index), b""),
        kind: EventKind::Malformed,
        origin: origin.to_string(),
        index: Some(index),
        receipt_id: None,
        issuer: None,
        verdict: None,
        summary,
    };
    let env = match Envelope::from_entry(entry) {
        Ok(env) => env,
        Err(e) => return Some(malformed(format!("not an envelope: {e}"))),
    };
    if env.payload_type != RECEIPT_PAYLOAD_TYPE {
        return Some(malformed(format!(
            "payload type {:?}, not {RECEIPT_PAYLOAD_TYPE:?}",
            env.payload_type
        )));
    }
    let (receipt, id) = match receipt::receipt_from_cbor(&env.payload) {
        Ok(r) => r,
        Err(e) => {
            return Some(malformed(format!(
                "the payload is not a valid receipt ({}): {e}",
                e.reason_code()
            )));
        }
    };
    let (kind, summary) = judge(&env, &receipt, &id.to_string(), watch)?;
    Some(Event {
        id: event_id(kind, origin, Some(index), b""),
        kind,
        origin: origin.to_string(),
        index: Some(index),
        receipt_id: Some(id.to_string()),
        issuer: Some(receipt.issuer.clone()),
        verdict: Some(receipt.verdict.arm().to_string()),
        summary,
    })
}

/// True when a signature of `env` verifies under one of `issuer`'s keys.
/// Only signatures whose keyid names one of its keys (or is empty) are
/// tried, so an entry costs a verification only where a key applies.
fn signed_by(env: &Envelope, issuer: &WatchedIssuer) -> bool {
    let applies = env
        .signatures
        .iter()
        .any(|s| s.keyid.is_empty() || issuer.trusted.keyids().any(|k| k == s.keyid));
    applies && matches!(issuer.trusted.check(env), SignatureCheck::Verified { .. })
}

/// The receipt events, in the table's order.
fn judge(
    env: &Envelope,
    receipt: &Receipt,
    id: &str,
    watch: &Watch,
) -> Option<(EventKind, String)> {
    let claimed = receipt.issuer.as_str();
    if let Some(own) = watch.issuer(claimed) {
        if signed_by(env, own) {
            return Some(match &watch.authorized {
                Some(list) if !list.contains(id) => (
                    EventKind::Unauthorized,
                    format!("{claimed} signed {id}, which is not in the authorized list"),
                ),
                _ => (EventKind::Matched, format!("{claimed} signed {id}")),
            });
        }
        return Some((
            EventKind::Impersonation,
            format!("{id} claims the issuer {claimed} but no signature verifies under its keys"),
        ));
    }
    if let Some(other) = watch.issuers.iter().find(|i| signed_by(env, i)) {
        return Some((
            EventKind::KeyMisuse,
            format!(
                "{id} is signed by a key of {} but claims the issuer {claimed}",
                other.name
            ),
        ));
    }
    if watch.change_ids.contains(&receipt.change_id) {
        return Some((
            EventKind::Change,
            format!(
                "{id} by {claimed} concerns the change {}",
                receipt.change_id
            ),
        ));
    }
    None
}
