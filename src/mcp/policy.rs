//! policy: the tool-proxy policy and its pinned tool table
//! (spec/gate-mcp.md "The policy").
//!
//! ```text
//! {"name": text, "substrate": "tool-proxy", "server": {"name": text},
//!  "tools": {TOOL: {"kind": "step", "def": "sha256:…", "files": [POINTER, ...]}
//!          | {"kind": "read", "def": "sha256:…"}, ...},
//!  "allow_irreversible": bool,                                   (optional)
//!  "replay": {"proposal": STAGE, "execution": STAGE},            (optional)
//!  "rules": "FILE.rego", "approvers": [VKEY, ...], "approvals_required": n}  (optional)
//! ```
//!
//! Read as a receipt data-model value (duplicate keys, floats and integers
//! beyond ±(2^53-1) refused), every field checked, no other field; its
//! identity is `policy_id`, so the table is part of every receipt's policy.
//! `rules`, `approvers` and `approvals_required` are read as the git
//! policy reads them ([`crate::gate::policy`]): the module relative to the
//! policy file, its bytes (never its name) in `policy_id`.

use crate::digest::{Algorithm, Digest};
use crate::gate::policy::{PolicyError, approvers, read_policy, rules_module};
use crate::gate::rules::Module;
use crate::keys::NoteVerifier;
use crate::receipt::canonical::{Value, dagcbor, identity, json};
use crate::receipt::{Replay, Stage, combine};
use std::collections::BTreeMap;
use std::path::Path;

/// Most tools in a pinned table.
pub const MAX_PINNED_TOOLS: usize = 1024;
/// Most file pointers of one step tool.
pub const MAX_STEP_FILES: usize = 64;
/// Longest tool name (bytes).
pub const MAX_TOOL_NAME_BYTES: usize = 256;

/// What a pinned tool does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolKind {
    /// Forwarded and recorded in the session.
    Read,
    /// Gated: decided, its files' pre-images stored, a receipt.
    Step,
}

impl ToolKind {
    /// The word in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Step => "step",
        }
    }
}

/// One pinned tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinned {
    /// Read or step.
    pub kind: ToolKind,
    /// RFC 8785 SHA-256 of its definition when pinned.
    pub def: Digest,
    /// JSON Pointers (RFC 6901) into the arguments naming files it writes.
    pub files: Vec<String>,
}

/// A tool-proxy policy.
#[derive(Clone, Debug)]
pub struct ToolPolicy {
    /// Its name.
    pub name: String,
    /// The server's name (in every change id).
    pub server: String,
    /// The pinned tool table.
    pub tools: BTreeMap<String, Pinned>,
    /// Admit a step whose pre-images cannot be stored, as irreversible.
    pub allow_irreversible: bool,
    /// The receipts' replay class.
    pub replay: Replay,
    /// `"rules"`: the Rego module, read.
    pub rules: Option<Module>,
    /// `"approvers"`: the keys whose approval receipts count.
    pub approvers: Vec<NoteVerifier>,
    /// `"approvals_required"` (0 when the policy names no approver).
    pub approvals_required: usize,
    /// `policy_id`.
    pub id: Digest,
}

/// Why a policy was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolPolicyError {
    /// The file could not be read.
    #[error("reading the policy {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: crate::io::InputError,
    },
    /// Not a data-model JSON value.
    #[error("the policy is not valid JSON for rcpt")]
    Json(#[source] json::JsonError),
    /// A field is missing, unknown, of the wrong type or out of range.
    #[error("policy: {0}")]
    Schema(String),
    /// `rules`, `approvers` or `approvals_required` refused (as for git).
    #[error(transparent)]
    Rules(#[from] PolicyError),
}

fn schema(msg: impl Into<String>) -> ToolPolicyError {
    ToolPolicyError::Schema(msg.into())
}

/// The required and optional top-level fields.
const REQUIRED: &[&str] = &["name", "substrate", "server", "tools"];
const OPTIONAL: &[&str] = &[
    "allow_irreversible",
    "replay",
    "rules",
    "approvers",
    "approvals_required",
];

impl ToolPolicy {
    /// Read and check the policy file at `path`.
    pub fn read(path: &Path) -> Result<ToolPolicy, ToolPolicyError> {
        read_policy(
            path,
            |path, source| ToolPolicyError::Read { path, source },
            ToolPolicy::parse_in,
        )
    }

    /// Check policy JSON without `rules` (a module is read relative to the
    /// policy file: [`ToolPolicy::read`]).
    pub fn parse(bytes: &[u8]) -> Result<ToolPolicy, ToolPolicyError> {
        ToolPolicy::parse_in(bytes, None)
    }

    /// Check policy JSON; `rules` is read relative to `dir`.
    fn parse_in(bytes: &[u8], dir: Option<&Path>) -> Result<ToolPolicy, ToolPolicyError> {
        let mut value = json::from_json(bytes).map_err(ToolPolicyError::Json)?;
        let map = value
            .as_map()
            .ok_or_else(|| schema("the policy must be an object"))?;
        if let Some(k) = map
            .keys()
            .find(|k| !REQUIRED.contains(&k.as_str()) && !OPTIONAL.contains(&k.as_str()))
        {
            let hint = if k == "checks" {
                " (checks, commands run on a change, are not run for tool calls: a policy \
                 naming them is refused rather than half applied; rules are)"
            } else {
                ""
            };
            return Err(schema(format!("unknown field {k:?}{hint}")));
        }
        if let Some(k) = REQUIRED.iter().find(|k| !map.contains_key(**k)) {
            return Err(schema(format!("the field {k:?} is missing")));
        }
        let name = text(map.get("name"), "name")?;
        if map.get("substrate").and_then(Value::as_text) != Some("tool-proxy") {
            return Err(schema("substrate must be \"tool-proxy\""));
        }
        let server = match map.get("server").and_then(Value::as_map) {
            Some(s) if s.len() == 1 => text(s.get("name"), "server.name")?,
            _ => return Err(schema("server must be {\"name\": text}")),
        };
        let tools = tools(map.get("tools"))?;
        let allow_irreversible = match map.get("allow_irreversible") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(schema("allow_irreversible must be true or false")),
        };
        let replay = match map.get("replay") {
            None => combine(Stage::Llm, Stage::Unknown),
            Some(v) => replay(v)?,
        };
        let (approvers, approvals_required) = approvers(map)?;
        let rules = match map.get("rules") {
            None => None,
            Some(v) => Some(rules_module(v, dir)?),
        };
        if let (Some(m), Value::Map(map)) = (&rules, &mut value) {
            // The module's bytes, never its file name, are in the identity.
            map.insert("rules".into(), Value::Text(m.digest.to_string()));
        }
        Ok(ToolPolicy {
            name,
            server,
            tools,
            allow_irreversible,
            replay,
            rules,
            approvers,
            approvals_required,
            id: identity(&dagcbor::encode(&value)),
        })
    }
}

fn text(value: Option<&Value>, what: &str) -> Result<String, ToolPolicyError> {
    match value {
        Some(Value::Text(s)) if !s.is_empty() && s.len() <= crate::limits::MAX_TEXT_BYTES => {
            Ok(s.clone())
        }
        _ => Err(schema(format!("{what} must be a non-empty text"))),
    }
}

fn stage(value: Option<&Value>, what: &str) -> Result<Stage, ToolPolicyError> {
    match value.and_then(Value::as_text) {
        Some("deterministic") => Ok(Stage::Deterministic),
        Some("llm") => Ok(Stage::Llm),
        Some("unknown") => Ok(Stage::Unknown),
        _ => Err(schema(format!(
            "{what} must be \"deterministic\", \"llm\" or \"unknown\""
        ))),
    }
}

fn replay(value: &Value) -> Result<Replay, ToolPolicyError> {
    let m = value
        .as_map()
        .filter(|m| m.len() == 2)
        .ok_or_else(|| schema("replay must be {\"proposal\": STAGE, \"execution\": STAGE}"))?;
    Ok(combine(
        stage(m.get("proposal"), "replay.proposal")?,
        stage(m.get("execution"), "replay.execution")?,
    ))
}

fn tools(value: Option<&Value>) -> Result<BTreeMap<String, Pinned>, ToolPolicyError> {
    let map = value
        .and_then(Value::as_map)
        .ok_or_else(|| schema("tools must be an object: the pinned tool table"))?;
    if map.len() > MAX_PINNED_TOOLS {
        return Err(schema(format!("tools holds over {MAX_PINNED_TOOLS} tools")));
    }
    let mut out = BTreeMap::new();
    for (name, entry) in map {
        if name.is_empty() || name.len() > MAX_TOOL_NAME_BYTES {
            return Err(schema(format!(
                "tool name {name:?}: 1 to {MAX_TOOL_NAME_BYTES} bytes"
            )));
        }
        out.insert(name.clone(), pinned(name, entry)?);
    }
    Ok(out)
}

fn pinned(name: &str, entry: &Value) -> Result<Pinned, ToolPolicyError> {
    let m = entry
        .as_map()
        .ok_or_else(|| schema(format!("tools.{name} must be an object")))?;
    if let Some(k) = m
        .keys()
        .find(|k| !["kind", "def", "files"].contains(&k.as_str()))
    {
        return Err(schema(format!("tools.{name}: unknown field {k:?}")));
    }
    let kind = match m.get("kind").and_then(Value::as_text) {
        Some("read") => ToolKind::Read,
        Some("step") => ToolKind::Step,
        _ => {
            return Err(schema(format!(
                "tools.{name}.kind must be \"read\" or \"step\""
            )));
        }
    };
    let def = m
        .get("def")
        .and_then(Value::as_text)
        .and_then(|t| t.parse::<Digest>().ok())
        .filter(|d| d.algorithm == Algorithm::Sha256)
        .ok_or_else(|| schema(format!("tools.{name}.def must be a sha256: digest")))?;
    let files = match (m.get("files"), kind) {
        (None, _) => Vec::new(),
        (Some(_), ToolKind::Read) => {
            return Err(schema(format!("tools.{name}: a read tool names no files")));
        }
        (Some(Value::Array(list)), ToolKind::Step) if list.len() <= MAX_STEP_FILES => list
            .iter()
            .map(|p| match p {
                Value::Text(t) if is_pointer(t) => Ok(t.clone()),
                _ => Err(schema(format!(
                    "tools.{name}.files: each is a JSON Pointer (RFC 6901) such as \"/path\""
                ))),
            })
            .collect::<Result<_, _>>()?,
        (Some(_), ToolKind::Step) => {
            return Err(schema(format!(
                "tools.{name}.files must be an array of at most {MAX_STEP_FILES} JSON Pointers"
            )));
        }
    };
    Ok(Pinned { kind, def, files })
}

/// RFC 6901 section 3: empty, or `/`-prefixed tokens whose `~` is `~0` or `~1`.
pub fn is_pointer(p: &str) -> bool {
    (p.is_empty() || p.starts_with('/'))
        && p.split('~')
            .skip(1)
            .all(|rest| rest.starts_with('0') || rest.starts_with('1'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEF: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn policy(tools: &str) -> String {
        format!(
            r#"{{"name": "agent", "substrate": "tool-proxy", "server": {{"name": "fs"}}, "tools": {tools}}}"#
        )
    }

    #[test]
    fn a_policy_with_its_table_is_read_and_identified_by_its_value() {
        let text = policy(&format!(
            r#"{{"write_file": {{"kind": "step", "def": "{DEF}", "files": ["/path"]}},
                 "read_file": {{"kind": "read", "def": "{DEF}"}}}}"#
        ));
        let p = ToolPolicy::parse(text.as_bytes()).unwrap();
        assert_eq!(p.server, "fs");
        assert_eq!(p.tools["write_file"].files, vec!["/path".to_string()]);
        assert_eq!(p.tools["read_file"].kind, ToolKind::Read);
        assert_eq!(p.replay, combine(Stage::Llm, Stage::Unknown));
        assert!(!p.allow_irreversible);
        // Another table is another policy.
        let other = text.replace("/path", "/file");
        assert_ne!(ToolPolicy::parse(other.as_bytes()).unwrap().id, p.id);
    }

    #[test]
    fn bad_policies_are_refused_naming_the_field() {
        let good_def = format!(r#"{{"kind": "read", "def": "{DEF}"}}"#);
        let cases = [
            (policy("{}").replace("tool-proxy", "git"), "substrate"),
            (policy("[]"), "tools must be an object"),
            (
                policy(&format!(r#"{{"t": {{"kind": "write", "def": "{DEF}"}}}}"#)),
                "kind",
            ),
            (
                policy(r#"{"t": {"kind": "read", "def": "blake3:00"}}"#),
                "def",
            ),
            (
                policy(&format!(
                    r#"{{"t": {{"kind": "read", "def": "{DEF}", "files": []}}}}"#
                )),
                "names no files",
            ),
            (
                policy(&format!(
                    r#"{{"t": {{"kind": "step", "def": "{DEF}", "files": ["path"]}}}}"#
                )),
                "JSON Pointer",
            ),
            (
                policy(&format!(
                    r#"{{"t": {{"kind": "step", "def": "{DEF}", "files": ["/a~2"]}}}}"#
                )),
                "JSON Pointer",
            ),
            (
                policy(&format!(r#"{{"t": {good_def}}}"#))
                    .replace("\"tools\"", "\"checks\": [], \"tools\""),
                "not run for tool calls",
            ),
            (
                policy(&format!(r#"{{"t": {good_def}}}"#))
                    .replace("\"tools\"", "\"rules\": \"r.rego\", \"tools\""),
                "read the policy from its file",
            ),
            (
                policy(&format!(r#"{{"t": {good_def}}}"#))
                    .replace("\"tools\"", "\"approvals_required\": 1, \"tools\""),
                "go together",
            ),
            (
                policy("{}").replace("\"name\": \"fs\"", "\"name\": \"\""),
                "server.name",
            ),
        ];
        for (text, want) in cases {
            let e = ToolPolicy::parse(text.as_bytes()).unwrap_err();
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
    }
}
