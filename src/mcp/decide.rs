//! decide: the one place a tool call's verdict is made (spec/gate-mcp.md
//! "Deciding").
//!
//! The proxy gathers the facts (the table's standing, the files, the
//! session's reads) into the `input` of the rules, then asks a
//! [`Decider`]. [`TableDecider`] is the decision of a policy without
//! rules: the table's and the files' refusals deny, anything else is
//! admitted. [`super::ruled::RulesDecider`] keeps the combination of
//! spec/gate.md "Deciding" (the git gate's own, `crate::gate::decide`):
//! the table's denials, then the rule denials deny (Deny absorbs), else
//! rule escalations escalate unless approved, else admit; reasons sorted.

use crate::digest::Digest;
use crate::receipt::ReadItem;
use crate::receipt::canonical::Value;
use serde_json::json;

/// The facts of one step call.
#[derive(Debug)]
pub struct Facts<'a> {
    /// The rules' `input`: `{"substrate": "tool-proxy", "issuer", "now",
    /// "server", "tool": {"name", "def", "annotations"}, "arguments",
    /// "reads": [...], "files": [{"path", "digest" or null}]}`.
    pub input: &'a serde_json::Value,
    /// The table's and the files' refusals (`tool.*`, `files.*`), sorted.
    pub refusals: &'a [String],
    /// The call's `change_id` (what an approval names).
    pub change_id: Digest,
    /// The policy's identity.
    pub policy_id: Digest,
    /// The receipt's read set: the step's files as found.
    pub read_set: &'a [ReadItem],
}

/// What a decider says.
#[derive(Clone, Debug, PartialEq)]
pub enum Ruling {
    /// Admit; `evidence` joins the proof record (approvals, rule results).
    Admit {
        /// Extra evidence (a data-model value), or null.
        evidence: Value,
    },
    /// Deny with these reasons (non-empty, sorted, unique).
    Deny(Vec<String>),
    /// Escalate with these reasons (non-empty, sorted, unique).
    Escalate(Vec<String>),
}

/// Why no verdict could be reached (never a deny): exit 3's kind.
#[derive(Debug, thiserror::Error)]
#[error("the decision could not be evaluated: {0}")]
pub struct DecideError(pub String);

/// A ruling with what a decider adds to the step's record: a `policy_id`
/// covering more than the policy (contracts), refusals' details for the
/// client and the evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The ruling.
    pub ruling: Ruling,
    /// The receipt's `policy_id`, when it is not the policy's own.
    pub policy_id: Option<Digest>,
    /// `(reason, detail)` of the decider's own refusals.
    pub details: Vec<(String, String)>,
}

/// The decision of a step call.
pub trait Decider: Send + Sync {
    /// Decide one step call.
    fn decide(&self, facts: &Facts<'_>) -> Result<Ruling, DecideError>;

    /// Decide one step call, with what the decider adds to its record.
    fn decide_call(&self, facts: &Facts<'_>) -> Result<Decision, DecideError> {
        Ok(Decision {
            ruling: self.decide(facts)?,
            policy_id: None,
            details: Vec::new(),
        })
    }

    /// A forwarded step ended: `ok` when the server answered without error.
    fn finished(&self, _change_id: &Digest, _ok: bool) {}
}

/// The table's decision: its refusals deny; anything else is admitted.
#[derive(Clone, Copy, Debug, Default)]
pub struct TableDecider;

impl Decider for TableDecider {
    fn decide(&self, facts: &Facts<'_>) -> Result<Ruling, DecideError> {
        if facts.refusals.is_empty() {
            Ok(Ruling::Admit {
                evidence: Value::Null,
            })
        } else {
            Ok(Ruling::Deny(sorted(facts.refusals)))
        }
    }
}

/// Reasons sorted bytewise, without duplicates.
pub fn sorted(reasons: &[String]) -> Vec<String> {
    let mut r = reasons.to_vec();
    r.sort();
    r.dedup();
    r
}

/// The rules' `input` of a step call.
#[derive(Debug)]
pub struct Input<'a> {
    /// The gate key's name.
    pub issuer: &'a str,
    /// Unix seconds.
    pub now: i64,
    /// The server's name (the policy's).
    pub server: &'a str,
    /// The tool's name.
    pub tool: &'a str,
    /// Its definition's digest as listed now (null: not listed).
    pub def: Option<String>,
    /// Its annotations as listed (untrusted).
    pub annotations: serde_json::Value,
    /// The arguments as received.
    pub arguments: &'a serde_json::Value,
    /// The session's reads, oldest first.
    pub reads: serde_json::Value,
    /// The step's files: `(path, digest or null)`.
    pub files: Vec<(String, Option<String>)>,
}

impl Input<'_> {
    /// As JSON, the shape rules read.
    pub fn to_json(&self) -> serde_json::Value {
        let files: Vec<serde_json::Value> = self
            .files
            .iter()
            .map(|(p, d)| json!({"path": p, "digest": d}))
            .collect();
        json!({
            "substrate": "tool-proxy",
            "issuer": self.issuer,
            "now": self.now,
            "server": self.server,
            "tool": {"name": self.tool, "def": self.def, "annotations": self.annotations},
            "arguments": self.arguments,
            "reads": self.reads,
            "files": files,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts_of<'a>(input: &'a serde_json::Value, refusals: &'a [String]) -> Facts<'a> {
        Facts {
            input,
            refusals,
            change_id: Digest::blake3(b"change"),
            policy_id: Digest::blake3(b"policy"),
            read_set: &[],
        }
    }

    #[test]
    fn the_table_decides_a_policy_without_rules() {
        let input = json!({});
        let none: Vec<String> = Vec::new();
        let facts = facts_of(&input, &none);
        assert_eq!(
            TableDecider.decide(&facts).unwrap(),
            Ruling::Admit {
                evidence: Value::Null
            }
        );
        let r = vec![
            "tool.changed".to_string(),
            "files.link".into(),
            "tool.changed".into(),
        ];
        let facts = facts_of(&input, &r);
        assert_eq!(
            TableDecider.decide(&facts).unwrap(),
            Ruling::Deny(vec!["files.link".into(), "tool.changed".into()])
        );
    }

    #[test]
    fn the_input_has_the_documented_shape() {
        let args = json!({"path": "/w/a"});
        let i = Input {
            issuer: "gate",
            now: 5,
            server: "fs",
            tool: "write_file",
            def: Some("sha256:00".into()),
            annotations: json!({"readOnlyHint": false}),
            arguments: &args,
            reads: json!([]),
            files: vec![("/w/a".into(), None)],
        };
        let v = i.to_json();
        assert_eq!(v["tool"]["name"], "write_file");
        assert_eq!(v["files"][0], json!({"path": "/w/a", "digest": null}));
        assert_eq!(v["substrate"], "tool-proxy");
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = [
            "substrate",
            "issuer",
            "now",
            "server",
            "tool",
            "arguments",
            "reads",
            "files",
        ];
        want.sort_unstable();
        assert_eq!(keys, want);
    }
}
