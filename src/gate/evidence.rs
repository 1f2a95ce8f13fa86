//! evidence: the record of what the checks of one evaluation did, whose
//! identity is an `admit` verdict's proof (spec/gate.md "Evidence record").
//!
//! ```text
//! {"version": 1, "base": oid, "change_id": D, "policy_id": D, "policy": name,
//!  "checks": [{"name", "run": [argv], "exit": n, "duration_ms": n,
//!              "stdout": D, "stdout_bytes": n, "stderr": D, "stderr_bytes": n}]}
//! ```
//!
//! A policy with rules writes version 2, which adds what the rules said
//! and the approvals that decided:
//!
//! ```text
//! {"version": 2, ..., "rules": {"deny": [R...], "escalate": [R...]},
//!  "approvals": [{"receipt": D, "approver": NAME, "verdict": "admit"|"deny"}, ...]}
//! ```
//!
//! Stored as canonical DAG-CBOR in the gate store; read back strictly
//! (every field, no other) and every output it names re-hashed.

use super::rules::RuleOutcome;
use super::run::Ran;
use crate::digest::Digest;
use crate::receipt::canonical::Value;
use std::collections::BTreeMap;

/// Version of the evidence record of a policy without rules.
pub const EVIDENCE_VERSION: i64 = 1;
/// Version of the evidence record of a policy with rules.
pub const EVIDENCE_VERSION_RULES: i64 = 2;

/// An approval that decided: it counted, or it refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalNote {
    /// The approval receipt's id.
    pub receipt: Digest,
    /// The approver's name.
    pub approver: String,
    /// True for a refusal.
    pub refused: bool,
}

/// The evidence of one evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// The base commit the clean copy checked out.
    pub base: String,
    /// The change evaluated.
    pub change_id: Digest,
    /// The policy evaluated.
    pub policy_id: Digest,
    /// The policy's name.
    pub policy: String,
    /// The checks that ran, in order (up to the first failure).
    pub checks: Vec<Ran>,
    /// What the policy's rules said (`None`: it has none; version 1).
    pub rules: Option<RuleOutcome>,
    /// The approvals that counted or refused, by receipt id.
    pub approvals: Vec<ApprovalNote>,
}

/// Why a stored record is not evidence.
#[derive(Debug, thiserror::Error)]
#[error("the record is not gate evidence: {0}")]
pub struct EvidenceError(pub String);

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

fn int(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `[{"receipt", "approver", "verdict": "admit"|"deny"}, ...]`: the
/// approvals that decided (the tool proxy's evidence lists them the same way).
pub fn approvals_value(notes: &[ApprovalNote]) -> Value {
    Value::Array(
        notes
            .iter()
            .map(|a| {
                Value::Map(BTreeMap::from([
                    ("receipt".into(), text(&a.receipt.to_string())),
                    ("approver".into(), text(&a.approver)),
                    (
                        "verdict".into(),
                        text(if a.refused { "deny" } else { "admit" }),
                    ),
                ]))
            })
            .collect(),
    )
}

impl Evidence {
    /// The record.
    pub fn to_value(&self) -> Value {
        let checks = self
            .checks
            .iter()
            .map(|c| {
                Value::Map(BTreeMap::from([
                    ("name".into(), text(&c.name)),
                    (
                        "run".into(),
                        Value::Array(c.run.iter().map(|a| text(a)).collect()),
                    ),
                    ("exit".into(), Value::Integer(i64::from(c.exit))),
                    ("duration_ms".into(), int(c.duration_ms)),
                    ("stdout".into(), text(&c.stdout.to_string())),
                    ("stdout_bytes".into(), int(c.stdout_bytes)),
                    ("stderr".into(), text(&c.stderr.to_string())),
                    ("stderr_bytes".into(), int(c.stderr_bytes)),
                ]))
            })
            .collect();
        let mut map = BTreeMap::from([
            ("version".into(), Value::Integer(EVIDENCE_VERSION)),
            ("base".into(), text(&self.base)),
            ("change_id".into(), text(&self.change_id.to_string())),
            ("policy_id".into(), text(&self.policy_id.to_string())),
            ("policy".into(), text(&self.policy)),
            ("checks".into(), Value::Array(checks)),
        ]);
        if let Some(rules) = &self.rules {
            let set = |s: &std::collections::BTreeSet<String>| {
                Value::Array(s.iter().map(|r| text(r)).collect())
            };
            map.insert("version".into(), Value::Integer(EVIDENCE_VERSION_RULES));
            map.insert(
                "rules".into(),
                Value::Map(BTreeMap::from([
                    ("deny".into(), set(&rules.deny)),
                    ("escalate".into(), set(&rules.escalate)),
                ])),
            );
            map.insert("approvals".into(), approvals_value(&self.approvals));
        }
        Value::Map(map)
    }

    /// Read a record back, strictly.
    pub fn from_value(value: &Value) -> Result<Evidence, EvidenceError> {
        let v1 = [
            "version",
            "base",
            "change_id",
            "policy_id",
            "policy",
            "checks",
        ];
        let version = value.as_map().and_then(|m| m.get("version"));
        let top = match version {
            Some(Value::Integer(EVIDENCE_VERSION)) => exact(value, &v1)?,
            Some(Value::Integer(EVIDENCE_VERSION_RULES)) => {
                exact(value, &[&v1[..], &["rules", "approvals"]].concat())?
            }
            _ => return Err(EvidenceError("unsupported version".into())),
        };
        let (rules, approvals) = match top.get("rules") {
            None => (None, Vec::new()),
            Some(r) => (
                Some(rule_outcome(r)?),
                approval_notes(top.get("approvals"))?,
            ),
        };
        let Some(Value::Array(list)) = top.get("checks") else {
            return Err(EvidenceError("checks is not an array".into()));
        };
        let checks = list.iter().map(ran).collect::<Result<Vec<_>, _>>()?;
        Ok(Evidence {
            base: get_text(top, "base")?,
            change_id: get_digest(top, "change_id")?,
            policy_id: get_digest(top, "policy_id")?,
            policy: get_text(top, "policy")?,
            checks,
            rules,
            approvals,
        })
    }
}

fn rule_outcome(value: &Value) -> Result<RuleOutcome, EvidenceError> {
    let map = exact(value, &["deny", "escalate"])?;
    let set = |k: &str| match map.get(k) {
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_text().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| EvidenceError(format!("rules.{k} holds a non-text"))),
        _ => Err(EvidenceError(format!("rules.{k} is not an array"))),
    };
    Ok(RuleOutcome {
        deny: set("deny")?,
        escalate: set("escalate")?,
    })
}

fn approval_notes(value: Option<&Value>) -> Result<Vec<ApprovalNote>, EvidenceError> {
    let Some(Value::Array(list)) = value else {
        return Err(EvidenceError("approvals is not an array".into()));
    };
    list.iter()
        .map(|v| {
            let m = exact(v, &["receipt", "approver", "verdict"])?;
            let refused = match get_text(m, "verdict")?.as_str() {
                "admit" => false,
                "deny" => true,
                _ => {
                    return Err(EvidenceError(
                        "an approval's verdict is not admit or deny".into(),
                    ));
                }
            };
            Ok(ApprovalNote {
                receipt: get_digest(m, "receipt")?,
                approver: get_text(m, "approver")?,
                refused,
            })
        })
        .collect()
}

fn exact<'a>(
    value: &'a Value,
    keys: &[&str],
) -> Result<&'a BTreeMap<String, Value>, EvidenceError> {
    let map = value
        .as_map()
        .ok_or_else(|| EvidenceError("not a map".into()))?;
    if map.len() != keys.len() || keys.iter().any(|k| !map.contains_key(*k)) {
        return Err(EvidenceError(format!(
            "fields must be exactly {}",
            keys.join(", ")
        )));
    }
    Ok(map)
}

fn get_text(map: &BTreeMap<String, Value>, key: &str) -> Result<String, EvidenceError> {
    map.get(key)
        .and_then(Value::as_text)
        .map(str::to_string)
        .ok_or_else(|| EvidenceError(format!("{key} is not a text")))
}

fn get_digest(map: &BTreeMap<String, Value>, key: &str) -> Result<Digest, EvidenceError> {
    get_text(map, key)?
        .parse()
        .map_err(|_| EvidenceError(format!("{key} is not a digest")))
}

fn get_u64(map: &BTreeMap<String, Value>, key: &str) -> Result<u64, EvidenceError> {
    match map.get(key) {
        Some(Value::Integer(n)) if *n >= 0 => Ok(n.unsigned_abs()),
        _ => Err(EvidenceError(format!("{key} is not a count"))),
    }
}

fn ran(value: &Value) -> Result<Ran, EvidenceError> {
    let keys = [
        "name",
        "run",
        "exit",
        "duration_ms",
        "stdout",
        "stdout_bytes",
        "stderr",
        "stderr_bytes",
    ];
    let map = exact(value, &keys)?;
    let Some(Value::Array(argv)) = map.get("run") else {
        return Err(EvidenceError("run is not an array".into()));
    };
    let run = argv
        .iter()
        .map(|a| a.as_text().map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| EvidenceError("run holds a non-text".into()))?;
    let exit = match map.get("exit") {
        Some(Value::Integer(n)) => {
            i32::try_from(*n).map_err(|_| EvidenceError("exit out of range".into()))?
        }
        _ => return Err(EvidenceError("exit is not an integer".into())),
    };
    Ok(Ran {
        name: get_text(map, "name")?,
        run,
        exit,
        duration_ms: get_u64(map, "duration_ms")?,
        stdout: get_digest(map, "stdout")?,
        stdout_bytes: get_u64(map, "stdout_bytes")?,
        stderr: get_digest(map, "stderr")?,
        stderr_bytes: get_u64(map, "stderr_bytes")?,
    })
}
