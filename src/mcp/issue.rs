//! issue: the evidence record and the receipt of a tool call
//! (spec/gate-mcp.md "The receipt").
//!
//! Pure: a step's record and what was found in, out. The evidence record
//! (its identity is an admit's proof) names the call (tool, definition,
//! arguments digest and the object of their bytes), the files before, the
//! decider's own evidence and, once the call was forwarded, its outcome
//! (answered or not, applied, the answer's digest, the files after). The
//! inverse record is the gate's, with paths relative to `/`.

use super::files;
use super::ledger::StepRecord;
use super::step::{INVERSE_BASE, now};
use crate::digest::Digest;
use crate::gate::inverse::{Record, Transition};
use crate::receipt::canonical::{Value, dagcbor, identity};
use crate::receipt::{ReadItem, Receipt, Substrate, Verdict};
use std::collections::BTreeMap;

fn t(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

/// A data-model map of `items`.
pub fn map<const N: usize>(items: [(&str, Value); N]) -> Value {
    Value::Map(items.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// The files of a record with their states (`pre` or post) as a value.
pub fn files_value(record: &StepRecord, states: &[files::State]) -> Value {
    Value::Array(
        record
            .files
            .iter()
            .zip(states)
            .map(|(f, s)| {
                let d = s.map_or(Value::Null, |s| t(s.digest.to_string()));
                map([("path", t(format!("/{}", f.path))), ("digest", d)])
            })
            .collect(),
    )
}

/// The evidence record of a step (`outcome`: null for a refusal).
pub fn evidence_of(record: &StepRecord, outcome: Option<Value>) -> Value {
    let pre: Vec<files::State> = record.files.iter().map(|f| f.pre).collect();
    let def = record.def.map_or(Value::Null, |d| t(d.to_string()));
    map([
        ("version", Value::Integer(1)),
        ("kind", t("tool-call")),
        ("step", t(record.id.clone())),
        ("server", t(record.server.clone())),
        ("tool", t(record.tool.clone())),
        ("def", def),
        ("arguments", t(record.arguments_digest.to_string())),
        (
            "arguments_object",
            t(Digest::blake3(record.arguments.as_bytes()).to_string()),
        ),
        ("decided_at", Value::Integer(record.decided_at)),
        ("change_id", t(record.change_id.to_string())),
        ("policy_id", t(record.policy_id.to_string())),
        ("pre", files_value(record, &pre)),
        ("decider", record.evidence.clone()),
        ("outcome", outcome.unwrap_or(Value::Null)),
    ])
}

/// The inverse record: every file from its state before to its state now.
pub fn inverse_record(record: &StepRecord, states: &[files::State]) -> Record {
    let files = record
        .files
        .iter()
        .zip(states)
        .map(|(f, s)| Transition {
            path: f.path.clone(),
            pre: f.pre,
            post: *s,
        })
        .collect();
    Record {
        base: INVERSE_BASE.to_string(),
        files,
    }
}

/// `precondition`: identity of `{"server", "inverse", "pre": [{"path", "digest"}]}`.
pub fn precondition(record: &StepRecord, inverse: Option<Digest>) -> Digest {
    let pre: Vec<files::State> = record.files.iter().map(|f| f.pre).collect();
    let inv = inverse.map_or(Value::Null, |d| t(d.to_string()));
    identity(&dagcbor::encode(&map([
        ("server", t(record.server.clone())),
        ("inverse", inv),
        ("pre", files_value(record, &pre)),
    ])))
}

/// The read set of a step: each file that exists (in `states`), by its
/// absolute path, sorted.
pub fn read_set_of(record: &StepRecord, states: &[files::State]) -> Vec<ReadItem> {
    let mut read_set: BTreeMap<String, Digest> = BTreeMap::new();
    for (f, s) in record.files.iter().zip(states) {
        if let Some(s) = s {
            read_set.insert(format!("/{}", f.path), s.digest);
        }
    }
    for (resource, answer) in super::contracted::reads_of(&record.evidence) {
        read_set.insert(resource, answer);
    }
    read_set
        .into_iter()
        .map(|(resource, digest)| ReadItem { resource, digest })
        .collect()
}

/// The receipt of a step: files (in `states`) as the read set.
pub fn receipt_of(
    issuer: &str,
    record: &StepRecord,
    verdict: Verdict,
    inverse: Option<Digest>,
    states: &[files::State],
    applied: bool,
) -> Receipt {
    let reversibility = match (&verdict, inverse) {
        (_, Some(_)) => Some(true),
        (Verdict::Admit { .. }, None) => Some(false),
        _ => None,
    };
    Receipt {
        issuer: issuer.to_string(),
        issued_at: now(),
        substrate: Substrate::ToolProxy,
        change_id: record.change_id,
        inverse_delta_id: inverse,
        reversibility,
        read_set: read_set_of(record, states),
        precondition: Some(precondition(record, inverse)),
        policy_id: record.policy_id,
        verdict,
        applied,
        replay: record.replay,
    }
}
