//! escalation: the record an escalate verdict's ticket names
//! (spec/gate.md "Escalation").
//!
//! ```text
//! {"change_id": D, "policy_id": D, "reasons": ["rule.…", ...], "read_set": [{"resource", "digest"}, ...]}
//! ```
//!
//! Stored as canonical DAG-CBOR; the ticket is its identity. Nothing in it
//! depends on the clock or on how long a check ran, so the same change
//! under the same policy, for the same reasons and on the same reads, is
//! the same ticket at every evaluation: that is what an approval names.

use crate::digest::Digest;
use crate::receipt::ReadItem;
use crate::receipt::canonical::{Value, dagcbor, identity};
use std::collections::BTreeMap;

/// What an escalation asks an approver to decide on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Escalation {
    /// The change.
    pub change_id: Digest,
    /// The policy evaluated.
    pub policy_id: Digest,
    /// Its reasons, `rule.<reason>`, sorted.
    pub reasons: Vec<String>,
    /// The receipt's read set.
    pub read_set: Vec<ReadItem>,
}

impl Escalation {
    /// The record.
    pub fn to_value(&self) -> Value {
        let text = |s: String| Value::Text(s);
        let read_set = self
            .read_set
            .iter()
            .map(|i| {
                Value::Map(BTreeMap::from([
                    ("resource".to_string(), text(i.resource.clone())),
                    ("digest".to_string(), text(i.digest.to_string())),
                ]))
            })
            .collect();
        Value::Map(BTreeMap::from([
            ("change_id".to_string(), text(self.change_id.to_string())),
            ("policy_id".to_string(), text(self.policy_id.to_string())),
            (
                "reasons".to_string(),
                Value::Array(self.reasons.iter().cloned().map(text).collect()),
            ),
            ("read_set".to_string(), Value::Array(read_set)),
        ]))
    }

    /// The ticket: the record's identity.
    pub fn ticket(&self) -> Digest {
        identity(&dagcbor::encode(&self.to_value()))
    }
}
