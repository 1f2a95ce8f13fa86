//! policy: the gate's policy file, read strictly, and its identity
//! `policy_id` (spec/gate.md "Policy").
//!
//! `{"name": text, "checks": [{"name": text, "run": [argv...], "timeout_s":
//! n}], "reads": [resource, ...]}`, every field required; optional
//! `allow_irreversible`, `rules` (a Rego module, a path relative to the
//! policy file), `approvers` (verifier keys) with `approvals_required`; no
//! other field. The JSON is read as a receipt data-model value (duplicate
//! keys, floats and out-of-range integers refused), so `policy_id` is the
//! identity of exactly the value the file holds, with `rules` standing for
//! the BLAKE3 digest of the module's bytes (never its file name).

use super::rules::{Module, RulesError};
use crate::digest::Digest;
use crate::fresh::{HEAD, check_relative};
use crate::keys::NoteVerifier;
use crate::limits::{
    MAX_GATE_ARGV, MAX_GATE_CHECKS, MAX_GATE_POLICY_BYTES, MAX_GATE_TIMEOUT_S, MAX_READ_SET_ITEMS,
    MAX_TEXT_BYTES,
};
use crate::receipt::canonical::{Value, dagcbor, identity, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// One check: a command and its timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// Its name (in reason codes: `check.<name>.failed`).
    pub name: String,
    /// The program and its arguments (no shell).
    pub run: Vec<String>,
    /// How long it may run.
    pub timeout: Duration,
}

/// A policy: its checks, in order, and the extra resources its receipts read.
#[derive(Clone, Debug)]
pub struct Policy {
    /// Its name.
    pub name: String,
    /// The checks, run in order.
    pub checks: Vec<Check>,
    /// Resources added to every receipt's read set.
    pub reads: Vec<String>,
    /// `"allow_irreversible": true`: `gate apply` may apply a change whose
    /// pre-images are over the store's limits, with `reversibility` false
    /// and no inverse (absent: false, such a change is refused).
    pub allow_irreversible: bool,
    /// `"rules"`: the Rego module, read.
    pub rules: Option<Module>,
    /// `"approvers"`: the keys whose approval receipts count.
    pub approvers: Vec<NoteVerifier>,
    /// `"approvals_required"`: distinct approvers an escalation needs
    /// (0 when the policy names none: an escalation then stays one).
    pub approvals_required: usize,
    /// `policy_id`.
    pub id: Digest,
}

/// Most approvers a policy names.
pub const MAX_GATE_APPROVERS: usize = 64;

/// Optional fields of a policy.
const OPTIONAL: [&str; 4] = [
    "allow_irreversible",
    "rules",
    "approvers",
    "approvals_required",
];

/// Why a policy file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The file could not be read.
    #[error("reading the policy {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: crate::io::InputError,
    },
    /// The rules module named by `rules` is unusable.
    #[error(transparent)]
    Rules(#[from] RulesError),
    /// Not a data-model JSON value.
    #[error("the policy is not valid JSON for rcpt")]
    Json(#[source] json::JsonError),
    /// A field is missing, unknown, of the wrong type or out of range.
    #[error("policy: {0}")]
    Schema(String),
}

/// Read the policy file at `path` (at most `MAX_GATE_POLICY_BYTES`) and
/// check it with `parse`, its `rules` read relative to the file's
/// directory; a failed read becomes `read_error(the path shown, why)`.
/// The gate's and the tool proxy's policies are read alike.
pub(crate) fn read_policy<T, E>(
    path: &Path,
    read_error: impl FnOnce(String, crate::io::InputError) -> E,
    parse: impl FnOnce(&[u8], Option<&Path>) -> Result<T, E>,
) -> Result<T, E> {
    let bytes = crate::io::read_path(path, MAX_GATE_POLICY_BYTES)
        .map_err(|source| read_error(path.display().to_string(), source))?;
    parse(&bytes, path.parent())
}

impl Policy {
    /// Read and check the policy file at `path`.
    pub fn read(path: &Path) -> Result<Policy, PolicyError> {
        read_policy(
            path,
            |path, source| PolicyError::Read { path, source },
            Policy::parse_in,
        )
    }

    /// Check policy JSON without `rules` (they are read relative to the
    /// policy file: [`Policy::read`]).
    pub fn parse(bytes: &[u8]) -> Result<Policy, PolicyError> {
        Policy::parse_in(bytes, None)
    }

    /// Check policy JSON; `rules` is read relative to `dir`.
    fn parse_in(bytes: &[u8], dir: Option<&Path>) -> Result<Policy, PolicyError> {
        let mut value = json::from_json(bytes).map_err(PolicyError::Json)?;
        let map = value
            .as_map()
            .ok_or_else(|| schema("the policy must be an object"))?;
        let allow_irreversible = match map.get("allow_irreversible") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(schema("allow_irreversible must be true or false")),
        };
        let mut keys = vec!["name", "checks", "reads"];
        keys.extend(OPTIONAL.iter().filter(|k| map.contains_key(**k)));
        let top = fields(&value, "the policy", &keys)?;
        let name = text(top.get("name"), "name")?;
        let Some(Value::Array(list)) = top.get("checks") else {
            return Err(schema("checks must be an array"));
        };
        if list.is_empty() || list.len() > MAX_GATE_CHECKS {
            return Err(schema(format!(
                "checks must hold 1 to {MAX_GATE_CHECKS} checks, not {}",
                list.len()
            )));
        }
        let checks = list.iter().map(check).collect::<Result<Vec<_>, _>>()?;
        let mut names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w.first() == w.get(1)) {
            return Err(schema(format!(
                "check {:?} is named twice",
                w.first().unwrap_or(&"")
            )));
        }
        let reads = reads(top.get("reads"))?;
        let (approvers, approvals_required) = approvers(top)?;
        let rules = match top.get("rules") {
            None => None,
            Some(v) => Some(rules_module(v, dir)?),
        };
        if let (Some(m), Value::Map(map)) = (&rules, &mut value) {
            // The module's bytes, never its file name, are in the identity.
            map.insert("rules".into(), Value::Text(m.digest.to_string()));
        }
        Ok(Policy {
            name,
            checks,
            reads,
            allow_irreversible,
            rules,
            approvers,
            approvals_required,
            id: identity(&dagcbor::encode(&value)),
        })
    }
}

/// The module `rules` names, read relative to `dir` (shared with the
/// tool-proxy policy, `crate::mcp::policy`).
pub fn rules_module(value: &Value, dir: Option<&Path>) -> Result<Module, PolicyError> {
    let rel = text(Some(value), "rules")?;
    check_relative(&rel).map_err(|e| schema(format!("rules: {e}")))?;
    let dir = dir.ok_or_else(|| schema("rules: read the policy from its file"))?;
    Ok(Module::read(&dir.join(rel))?)
}

/// `approvers` and `approvals_required`: both or neither; distinct keys
/// and names; 1 to the number of approvers required (shared with the
/// tool-proxy policy).
pub fn approvers(top: &BTreeMap<String, Value>) -> Result<(Vec<NoteVerifier>, usize), PolicyError> {
    let (list, required) = match (top.get("approvers"), top.get("approvals_required")) {
        (None, None) => return Ok((Vec::new(), 0)),
        (Some(Value::Array(list)), Some(Value::Integer(n))) => (list, *n),
        _ => {
            return Err(schema(
                "approvers (an array of verifier keys) and approvals_required (an integer) \
                 go together",
            ));
        }
    };
    if list.is_empty() || list.len() > MAX_GATE_APPROVERS {
        return Err(schema(format!(
            "approvers must hold 1 to {MAX_GATE_APPROVERS} verifier keys"
        )));
    }
    let mut keys: Vec<NoteVerifier> = Vec::with_capacity(list.len());
    for v in list {
        let text = text(Some(v), "each of approvers")?;
        let key =
            NoteVerifier::parse(&text).map_err(|e| schema(format!("approvers: {text:?}: {e}")))?;
        if keys.iter().any(|k| k.key == key.key || k.name == key.name) {
            return Err(schema(format!(
                "approvers: {} is named twice (each approver is one key with one name)",
                key.name
            )));
        }
        keys.push(key);
    }
    let required = usize::try_from(required)
        .ok()
        .filter(|n| (1..=keys.len()).contains(n))
        .ok_or_else(|| {
            schema(format!(
                "approvals_required must be from 1 to the {} approvers",
                keys.len()
            ))
        })?;
    Ok((keys, required))
}

fn schema(msg: impl Into<String>) -> PolicyError {
    PolicyError::Schema(msg.into())
}

/// The map of `value` with exactly the keys `keys`.
fn fields<'a>(
    value: &'a Value,
    what: &str,
    keys: &[&str],
) -> Result<&'a BTreeMap<String, Value>, PolicyError> {
    let map = value
        .as_map()
        .ok_or_else(|| schema(format!("{what} must be an object")))?;
    if let Some(k) = map.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(schema(format!(
            "{what} has an unknown field {k:?} (allowed: {})",
            keys.join(", ")
        )));
    }
    if let Some(k) = keys.iter().find(|k| !map.contains_key(**k)) {
        return Err(schema(format!("{what} lacks the field {k:?}")));
    }
    Ok(map)
}

fn text(value: Option<&Value>, what: &str) -> Result<String, PolicyError> {
    match value {
        Some(Value::Text(s)) if !s.is_empty() && s.len() <= MAX_TEXT_BYTES => Ok(s.clone()),
        _ => Err(schema(format!(
            "{what} must be a non-empty text of at most {MAX_TEXT_BYTES} bytes"
        ))),
    }
}

fn check(value: &Value) -> Result<Check, PolicyError> {
    let map = fields(value, "a check", &["name", "run", "timeout_s"])?;
    let name = text(map.get("name"), "a check's name")?;
    let word = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if !name.chars().all(word) || name.len() > 64 {
        return Err(schema(format!(
            "check name {name:?}: use at most 64 of A-Z a-z 0-9 . _ - (it is part of a reason code)"
        )));
    }
    let Some(Value::Array(argv)) = map.get("run") else {
        return Err(schema(format!(
            "check {name}: run must be an array of texts"
        )));
    };
    if argv.is_empty() || argv.len() > MAX_GATE_ARGV {
        return Err(schema(format!(
            "check {name}: run must hold 1 to {MAX_GATE_ARGV} texts"
        )));
    }
    let what = format!("check {name}: each run argument");
    let run = argv
        .iter()
        .map(|a| text(Some(a), &what))
        .collect::<Result<Vec<_>, _>>()?;
    let timeout = match map.get("timeout_s") {
        Some(Value::Integer(n)) if (1..=MAX_GATE_TIMEOUT_S).contains(n) => {
            Duration::from_secs(n.unsigned_abs())
        }
        _ => {
            return Err(schema(format!(
                "check {name}: timeout_s must be an integer from 1 to {MAX_GATE_TIMEOUT_S}"
            )));
        }
    };
    Ok(Check { name, run, timeout })
}

/// `reads`: resources by the read-set rules (paths, `refs/...`, `HEAD`).
fn reads(value: Option<&Value>) -> Result<Vec<String>, PolicyError> {
    let Some(Value::Array(list)) = value else {
        return Err(schema("reads must be an array of resources"));
    };
    if list.len() > MAX_READ_SET_ITEMS {
        return Err(schema(format!(
            "reads holds over {MAX_READ_SET_ITEMS} resources"
        )));
    }
    list.iter()
        .map(|v| {
            let r = text(Some(v), "each of reads")?;
            if r != HEAD && !r.starts_with("refs/") {
                check_relative(&r).map_err(|e| schema(format!("reads: {e}")))?;
            }
            Ok(r)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"name": "ci", "checks": [{"name": "test", "run": ["cargo", "test"],
        "timeout_s": 600}], "reads": ["Cargo.lock", "refs/heads/main"]}"#;

    #[test]
    fn a_policy_is_read_strictly_and_its_id_is_its_value() {
        let p = Policy::parse(GOOD.as_bytes()).unwrap();
        assert_eq!(p.checks.len(), 1);
        assert_eq!(p.checks[0].timeout, Duration::from_secs(600));
        // Key order and spacing do not change the identity.
        let same = r#"{"reads":["Cargo.lock","refs/heads/main"],"name":"ci","checks":[{"timeout_s":600,"run":["cargo","test"],"name":"test"}]}"#;
        assert_eq!(Policy::parse(same.as_bytes()).unwrap().id, p.id);
        let other = GOOD.replace("600", "601");
        assert_ne!(Policy::parse(other.as_bytes()).unwrap().id, p.id);
    }

    #[test]
    fn bad_policies_are_refused_with_the_field_named() {
        let cases = [
            (
                GOOD.replace("\"reads\"", "\"extra\": 1, \"reads\""),
                "unknown field",
            ),
            (
                GOOD.replace(", \"reads\": [\"Cargo.lock\", \"refs/heads/main\"]", ""),
                "lacks",
            ),
            (GOOD.replace("600", "0"), "timeout_s"),
            (GOOD.replace("600", "6.5"), "not valid JSON"),
            (GOOD.replace("[\"cargo\", \"test\"]", "[]"), "run must hold"),
            (
                GOOD.replace("\"test\", \"run\"", "\"a b\", \"run\""),
                "check name",
            ),
            (GOOD.replace("Cargo.lock", "../x"), "reads"),
            (
                GOOD.replace("\"name\": \"ci\"", "\"name\": \"ci\", \"name\": \"x\""),
                "not valid JSON",
            ),
        ];
        for (text, want) in cases {
            let e = Policy::parse(text.as_bytes()).unwrap_err();
            let shown = format!(
                "{e}: {}",
                e.source().map(|s| s.to_string()).unwrap_or_default()
            );
            assert!(shown.contains(want), "{text}: {shown}");
        }
    }

    use std::error::Error as _;
}
