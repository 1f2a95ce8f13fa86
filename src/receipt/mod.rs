//! receipt: the version-1 payload model, its schema and invariants, and the
//! replay combining function.
//!
//! Boundary: a canonical [`Value`] ⇄ a typed [`Receipt`], and the two
//! paths that make a payload trustworthy: [`payload_from_json`] (issuing)
//! and [`payload_from_cbor`] (verifying, logging). Every refusal carries a
//! stable reason code (spec/receipt.md). No I/O, no signatures.
//!
//! The receipt layer: [`canonical`] (the value and its two encodings),
//! this module (the payload model), [`dsse`] (the signed envelope and the
//! log entry), [`require`] (what a verified receipt must say). It uses only
//! the shared basics (digest, limits, reason, keys, strictjson), never the
//! tlog layer, storage, the log or the binary.

pub mod canonical;
pub mod dsse;
pub mod require;

use crate::digest::Digest;
use crate::limits::{MAX_DENY_REASONS, MAX_PAYLOAD_BYTES, MAX_READ_SET_ITEMS, MAX_TEXT_BYTES};
use crate::reason::Reason;
use crate::receipt::canonical::{MAX_SAFE_INTEGER, Value, ValueRef, dagcbor, identity};

/// Where the gated change happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Substrate {
    /// `filesystem`
    Filesystem,
    /// `git`
    Git,
    /// `tool-proxy`
    ToolProxy,
    /// `postgresql`
    Postgresql,
    /// `mysql`
    Mysql,
}

/// The gate's decision. Exactly three arms: "could not evaluate" is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `{"admit": {"proof": digest}}`
    Admit { proof: Digest },
    /// `{"deny": {"reasons": [text, ...]}}`
    Deny { reasons: Vec<String> },
    /// `{"escalate": {"ticket": text}}`
    Escalate { ticket: String },
}

/// Origin of one stage (proposal or execution) of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// `deterministic`
    Deterministic,
    /// `llm`
    Llm,
    /// `unknown`
    Unknown,
}

/// The replay class of a receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replay {
    /// `{"class": "deterministic_replay"}`
    DeterministicReplay,
    /// `{"class": "llm_originated"}`
    LlmOriginated,
    /// `{"class": "unknown"}`
    Unknown,
    /// `{"class": "mixed", "proposal": S, "execution": S}`
    Mixed { proposal: Stage, execution: Stage },
}

/// The combining function: the normal form of a (proposal, execution) pair.
///
/// spec/receipt.md "The combining function" (invariant 5): p = e =
/// deterministic gives `deterministic_replay`, llm gives `llm_originated`,
/// unknown gives `unknown`; otherwise `mixed(p, e)`. An established stage is never laundered into `unknown`:
/// `combine(deterministic, unknown)` is `mixed`, not `unknown`.
pub fn combine(proposal: Stage, execution: Stage) -> Replay {
    match (proposal, execution) {
        (Stage::Deterministic, Stage::Deterministic) => Replay::DeterministicReplay,
        (Stage::Llm, Stage::Llm) => Replay::LlmOriginated,
        (Stage::Unknown, Stage::Unknown) => Replay::Unknown,
        (proposal, execution) => Replay::Mixed {
            proposal,
            execution,
        },
    }
}

/// One read the decision depended on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadItem {
    /// The resource read.
    pub resource: String,
    /// Digest of what was read.
    pub digest: Digest,
}

/// A version-1 receipt payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    pub issuer: String,
    pub issued_at: i64,
    pub substrate: Substrate,
    pub change_id: Digest,
    pub inverse_delta_id: Option<Digest>,
    pub reversibility: Option<bool>,
    pub read_set: Vec<ReadItem>,
    pub precondition: Option<Digest>,
    pub policy_id: Digest,
    pub verdict: Verdict,
    pub applied: bool,
    pub replay: Replay,
}

/// The five invariants of spec/receipt.md "Invariants", each with its own
/// reason code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invariant {
    /// 1. `inverse_delta_id` non-null exactly when `reversibility` is true.
    Reversibility,
    /// 2. deny reasons non-empty, sorted, unique; escalate ticket non-empty.
    Verdict,
    /// 3. `applied` only with admit.
    Applied,
    /// 4. `read_set` sorted by resource, unique.
    ReadSet,
    /// 5. `replay` in the combining function's normal form.
    Replay,
}

impl Invariant {
    /// Every invariant, in the order of spec/receipt.md "Invariants".
    pub const ALL: [Invariant; 5] = [
        Invariant::Reversibility,
        Invariant::Verdict,
        Invariant::Applied,
        Invariant::ReadSet,
        Invariant::Replay,
    ];

    /// Stable reason code, e.g. `invariant.reversibility`.
    pub fn reason_code(self) -> Reason {
        match self {
            Invariant::Reversibility => Reason::InvariantReversibility,
            Invariant::Verdict => Reason::InvariantVerdict,
            Invariant::Applied => Reason::InvariantApplied,
            Invariant::ReadSet => Reason::InvariantReadSet,
            Invariant::Replay => Reason::InvariantReplay,
        }
    }

    /// The verifier's check name of this invariant: its reason code.
    pub fn check_name(self) -> &'static str {
        self.reason_code().as_str()
    }
}

/// One broken invariant, with what a person needs to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {detail}", invariant.reason_code())]
pub struct InvariantViolation {
    pub invariant: Invariant,
    pub detail: String,
}

/// Why a value is not a version-1 receipt (before invariants).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// `version` is an integer other than 1: not evaluated, not failed.
    #[error("unsupported receipt version {0} (this rcpt reads version 1)")]
    UnsupportedVersion(i64),
    /// A field is missing, unknown, or of the wrong type or value.
    #[error("field `{field}`: {detail}")]
    Field { field: String, detail: String },
}

impl SchemaError {
    /// `payload.version_unsupported` or `payload.schema`.
    pub fn reason_code(&self) -> Reason {
        match self {
            SchemaError::UnsupportedVersion(_) => Reason::PayloadVersionUnsupported,
            SchemaError::Field { .. } => Reason::PayloadSchema,
        }
    }
}

impl Receipt {
    /// Read a receipt from a value: schema only (types, fields), no invariants.
    ///
    /// Every field of spec/receipt.md "Fields" is required;
    /// unknown fields, wrong types and values outside the enumerations are
    /// refused with the path of the field (`read_set[2].digest`). A
    /// `version` that is an integer other than 1 is
    /// [`SchemaError::UnsupportedVersion`] whatever the other fields, checked
    /// first.
    pub fn from_value(value: &Value) -> Result<Receipt, SchemaError> {
        Receipt::from_ref(&value.borrow())
    }

    /// [`Receipt::from_value`] of a borrowed value (as
    /// [`dagcbor::decode_ref`] reads it).
    pub fn from_ref(value: &ValueRef<'_>) -> Result<Receipt, SchemaError> {
        // Version before schema: a payload whose `version` is an integer
        // other than 1 is another format, not judged by this one's fields
        // (a future receipt is not a forgery).
        if let Some(ValueRef::Integer(v)) = value.get("version")
            && *v != 1
        {
            return Err(SchemaError::UnsupportedVersion(*v));
        }
        let top = Obj::new(value, "", TOP_FIELDS)?;
        match top.get("version")? {
            ValueRef::Integer(1) => {}
            ValueRef::Integer(v) => return Err(SchemaError::UnsupportedVersion(*v)),
            other => return Err(wrong_type("version", "the integer 1", other)),
        }
        Ok(Receipt {
            issuer: text(top.get("issuer")?, "issuer")?,
            issued_at: issued_at(top.get("issued_at")?)?,
            substrate: Substrate::from_value(top.get("substrate")?)?,
            change_id: digest(top.get("change_id")?, "change_id")?,
            inverse_delta_id: nullable(top.get("inverse_delta_id")?, |v| {
                digest(v, "inverse_delta_id")
            })?,
            reversibility: nullable(top.get("reversibility")?, |v| boolean(v, "reversibility"))?,
            read_set: read_set(top.get("read_set")?)?,
            precondition: nullable(top.get("precondition")?, |v| digest(v, "precondition"))?,
            policy_id: digest(top.get("policy_id")?, "policy_id")?,
            verdict: Verdict::from_value(top.get("verdict")?)?,
            applied: boolean(top.get("applied")?, "applied")?,
            replay: Replay::from_value(top.get("replay")?)?,
        })
    }

    /// The receipt as a value (version 1).
    pub fn to_value(&self) -> Value {
        let opt_digest = |d: &Option<Digest>| d.as_ref().map_or(Value::Null, digest_value);
        let read_set = self.read_set.iter().map(ReadItem::to_value).collect();
        map([
            ("version", Value::Integer(1)),
            ("issuer", Value::Text(self.issuer.clone())),
            ("issued_at", Value::Integer(self.issued_at)),
            ("substrate", Value::Text(self.substrate.as_str().to_owned())),
            ("change_id", digest_value(&self.change_id)),
            ("inverse_delta_id", opt_digest(&self.inverse_delta_id)),
            (
                "reversibility",
                self.reversibility.map_or(Value::Null, Value::Bool),
            ),
            ("read_set", Value::Array(read_set)),
            ("precondition", opt_digest(&self.precondition)),
            ("policy_id", digest_value(&self.policy_id)),
            ("verdict", self.verdict.to_value()),
            ("applied", Value::Bool(self.applied)),
            ("replay", self.replay.to_value()),
        ])
    }

    /// Check one invariant (spec/receipt.md "Invariants", 1-5).
    pub fn check(&self, invariant: Invariant) -> Result<(), InvariantViolation> {
        let detail = match invariant {
            Invariant::Reversibility => self.reversibility_problem(),
            Invariant::Verdict => self.verdict.problem(),
            Invariant::Applied => self.applied_problem(),
            Invariant::ReadSet => read_set_problem(&self.read_set),
            Invariant::Replay => self.replay.problem(),
        };
        match detail {
            None => Ok(()),
            Some(detail) => Err(InvariantViolation { invariant, detail }),
        }
    }

    /// Check every invariant; all violations, in spec/receipt.md order.
    pub fn violations(&self) -> Vec<InvariantViolation> {
        Invariant::ALL
            .iter()
            .filter_map(|i| self.check(*i).err())
            .collect()
    }

    /// 1. "`inverse_delta_id` is non-null exactly when `reversibility` is true."
    fn reversibility_problem(&self) -> Option<String> {
        match (self.reversibility, &self.inverse_delta_id) {
            (Some(true), None) => Some(
                "reversibility is true but inverse_delta_id is null; set inverse_delta_id to \
                 the stored inverse's digest or reversibility to false/null"
                    .into(),
            ),
            (r, Some(_)) if r != Some(true) => Some(format!(
                "inverse_delta_id is set but reversibility is {}; set reversibility to true \
                 or inverse_delta_id to null",
                r.map_or("null".to_owned(), |b| b.to_string())
            )),
            _ => None,
        }
    }

    /// 3. "`applied` is true only with `admit`."
    fn applied_problem(&self) -> Option<String> {
        match (&self.verdict, self.applied) {
            (Verdict::Admit { .. }, _) | (_, false) => None,
            (v, true) => Some(format!(
                "applied is true but the verdict is {}; only an admitted change can be \
                 applied: set applied to false",
                v.arm()
            )),
        }
    }
}

/// 4. "`read_set` is sorted by `resource` bytewise, without duplicate resources."
fn read_set_problem(items: &[ReadItem]) -> Option<String> {
    items.windows(2).enumerate().find_map(|(i, w)| match w {
        [a, b] if a.resource.as_bytes() >= b.resource.as_bytes() => Some(format!(
            "read_set[{}].resource {:?} {} read_set[{i}].resource {:?}; sort read_set by \
             resource bytewise and list each resource once",
            i + 1,
            b.resource,
            if a.resource == b.resource {
                "repeats"
            } else {
                "sorts before"
            },
            a.resource
        )),
        _ => None,
    })
}

/// Fields of the top-level payload map, in the order of spec/receipt.md
/// "Fields".
const TOP_FIELDS: &[&str] = &[
    "version",
    "issuer",
    "issued_at",
    "substrate",
    "change_id",
    "inverse_delta_id",
    "reversibility",
    "read_set",
    "precondition",
    "policy_id",
    "verdict",
    "applied",
    "replay",
];

/// A map checked to hold exactly `fields`, read with field paths for errors.
struct Obj<'a> {
    value: &'a ValueRef<'a>,
    path: &'a str,
}

impl<'a> Obj<'a> {
    /// Refuse a non-map, any unknown field and any missing field.
    fn new(
        value: &'a ValueRef<'a>,
        path: &'a str,
        fields: &[&str],
    ) -> Result<Obj<'a>, SchemaError> {
        let ValueRef::Map(map) = value else {
            let name = if path.is_empty() { "payload" } else { path };
            return Err(wrong_type(name, "a map", value));
        };
        let join = |k: &str| {
            if path.is_empty() {
                k.to_owned()
            } else {
                format!("{path}.{k}")
            }
        };
        // The bytewise-first unknown key, as the owned value's map lists them.
        let unknown = map.iter().map(|(k, _)| *k).filter(|k| !fields.contains(k));
        if let Some(k) = unknown.min() {
            return Err(field(
                join(k),
                "unknown field; remove it (version 1 has no such field)",
            ));
        }
        if let Some(k) = fields.iter().find(|f| !map.iter().any(|(k, _)| k == *f)) {
            return Err(field(join(k), "missing; every version-1 field is required"));
        }
        Ok(Obj { value, path })
    }

    /// A field known to be present (checked in `new`).
    fn get(&self, key: &str) -> Result<&'a ValueRef<'a>, SchemaError> {
        self.value
            .get(key)
            .ok_or_else(|| field(format!("{}{key}", self.prefix()), "missing"))
    }

    /// `path.` or nothing at the top level.
    fn prefix(&self) -> String {
        if self.path.is_empty() {
            String::new()
        } else {
            format!("{}.", self.path)
        }
    }
}

/// A map value from static keys.
fn map<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

/// A schema error for `path`.
fn field(path: impl Into<String>, detail: impl Into<String>) -> SchemaError {
    SchemaError::Field {
        field: path.into(),
        detail: detail.into(),
    }
}

/// A schema error for a value of the wrong type.
fn wrong_type(path: &str, expected: &str, found: &ValueRef<'_>) -> SchemaError {
    field(
        path,
        format!("expected {expected}, found {}", found.type_name()),
    )
}

/// Text of at most `MAX_TEXT_BYTES` bytes.
fn text(value: &ValueRef<'_>, path: &str) -> Result<String, SchemaError> {
    text_ref(value, path).map(str::to_owned)
}

/// [`text`], borrowed.
fn text_ref<'v>(value: &ValueRef<'v>, path: &str) -> Result<&'v str, SchemaError> {
    match value {
        ValueRef::Text(s) if s.len() > MAX_TEXT_BYTES => Err(field(
            path,
            format!(
                "text is {} bytes, over the limit of {MAX_TEXT_BYTES}",
                s.len()
            ),
        )),
        ValueRef::Text(s) => Ok(s),
        other => Err(wrong_type(path, "text", other)),
    }
}

/// A boolean.
fn boolean(value: &ValueRef<'_>, path: &str) -> Result<bool, SchemaError> {
    match value {
        ValueRef::Bool(b) => Ok(*b),
        other => Err(wrong_type(path, "a boolean", other)),
    }
}

/// A digest in its strict text form (`blake3:`/`sha256:` + 64 lowercase hex).
fn digest(value: &ValueRef<'_>, path: &str) -> Result<Digest, SchemaError> {
    let ValueRef::Text(s) = value else {
        return Err(wrong_type(path, "a digest (text)", value));
    };
    s.parse::<Digest>()
        .map_err(|e| field(path, format!("{e} (found {:?})", truncate(s))))
}

/// The first 80 characters of `s`, for quoting in a message.
fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

/// The digest as a text value.
fn digest_value(d: &Digest) -> Value {
    Value::Text(d.to_string())
}

/// `null`, or the value read by `read`.
fn nullable<'v, T>(
    value: &'v ValueRef<'v>,
    read: impl FnOnce(&'v ValueRef<'v>) -> Result<T, SchemaError>,
) -> Result<Option<T>, SchemaError> {
    match value {
        ValueRef::Null => Ok(None),
        v => read(v).map(Some),
    }
}

/// `issued_at`: Unix seconds, 0 ..= 2^53-1 (a receipt before 1970 is refused).
fn issued_at(value: &ValueRef<'_>) -> Result<i64, SchemaError> {
    match value {
        ValueRef::Integer(n) if (0..=MAX_SAFE_INTEGER).contains(n) => Ok(*n),
        ValueRef::Integer(n) => Err(field(
            "issued_at",
            format!("{n} is outside 0..=2^53-1 Unix seconds; write the issuing time in UTC"),
        )),
        other => Err(wrong_type("issued_at", "an integer (Unix seconds)", other)),
    }
}

/// `read_set`: at most `MAX_READ_SET_ITEMS` `{resource, digest}` maps.
fn read_set(value: &ValueRef<'_>) -> Result<Vec<ReadItem>, SchemaError> {
    let ValueRef::Array(items) = value else {
        return Err(wrong_type("read_set", "an array", value));
    };
    if items.len() > MAX_READ_SET_ITEMS {
        return Err(field(
            "read_set",
            format!(
                "{} items, over the limit of {MAX_READ_SET_ITEMS}",
                items.len()
            ),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| ReadItem::from_value(item, &format!("read_set[{i}]")))
        .collect()
}

impl ReadItem {
    /// `{"resource": text, "digest": digest}`.
    fn from_value(value: &ValueRef<'_>, path: &str) -> Result<ReadItem, SchemaError> {
        let obj = Obj::new(value, path, &["resource", "digest"])?;
        Ok(ReadItem {
            resource: text(obj.get("resource")?, &format!("{path}.resource"))?,
            digest: digest(obj.get("digest")?, &format!("{path}.digest"))?,
        })
    }

    /// The item as a value.
    fn to_value(&self) -> Value {
        map([
            ("resource", Value::Text(self.resource.clone())),
            ("digest", digest_value(&self.digest)),
        ])
    }
}

impl Substrate {
    /// Every substrate, in the order of spec/receipt.md "Fields".
    pub const ALL: [Substrate; 5] = [
        Substrate::Filesystem,
        Substrate::Git,
        Substrate::ToolProxy,
        Substrate::Postgresql,
        Substrate::Mysql,
    ];

    /// The text form.
    pub fn as_str(self) -> &'static str {
        match self {
            Substrate::Filesystem => "filesystem",
            Substrate::Git => "git",
            Substrate::ToolProxy => "tool-proxy",
            Substrate::Postgresql => "postgresql",
            Substrate::Mysql => "mysql",
        }
    }

    /// One of the five names, exactly.
    fn from_value(value: &ValueRef<'_>) -> Result<Substrate, SchemaError> {
        let ValueRef::Text(s) = value else {
            return Err(wrong_type("substrate", "text", value));
        };
        Substrate::ALL
            .into_iter()
            .find(|x| x.as_str() == *s)
            .ok_or_else(|| {
                field(
                    "substrate",
                    format!(
                        "{:?} is not one of filesystem, git, tool-proxy, postgresql, mysql",
                        truncate(s)
                    ),
                )
            })
    }
}

impl Verdict {
    /// The arm's name: `admit`, `deny` or `escalate`.
    pub fn arm(&self) -> &'static str {
        match self {
            Verdict::Admit { .. } => "admit",
            Verdict::Deny { .. } => "deny",
            Verdict::Escalate { .. } => "escalate",
        }
    }

    /// Exactly one of `{"admit": {"proof"}}`, `{"deny": {"reasons"}}`,
    /// `{"escalate": {"ticket"}}`.
    fn from_value(value: &ValueRef<'_>) -> Result<Verdict, SchemaError> {
        let arms = value.as_map().filter(|m| m.len() == 1);
        let Some((arm, inner)) = arms.and_then(|m| m.iter().next()) else {
            return Err(field(
                "verdict",
                format!(
                    "expected a map with exactly one of admit, deny, escalate; found {}",
                    describe(value)
                ),
            ));
        };
        let path = format!("verdict.{arm}");
        match *arm {
            "admit" => {
                let o = Obj::new(inner, &path, &["proof"])?;
                let proof = digest(o.get("proof")?, "verdict.admit.proof")?;
                Ok(Verdict::Admit { proof })
            }
            "deny" => {
                let o = Obj::new(inner, &path, &["reasons"])?;
                Ok(Verdict::Deny {
                    reasons: reasons(o.get("reasons")?)?,
                })
            }
            "escalate" => {
                let o = Obj::new(inner, &path, &["ticket"])?;
                let ticket = text(o.get("ticket")?, "verdict.escalate.ticket")?;
                Ok(Verdict::Escalate { ticket })
            }
            _ => Err(field(path, "unknown verdict; use admit, deny or escalate")),
        }
    }

    /// The verdict as a value.
    fn to_value(&self) -> Value {
        let inner = match self {
            Verdict::Admit { proof } => map([("proof", digest_value(proof))]),
            Verdict::Deny { reasons } => {
                let r = reasons.iter().map(|s| Value::Text(s.clone())).collect();
                map([("reasons", Value::Array(r))])
            }
            Verdict::Escalate { ticket } => map([("ticket", Value::Text(ticket.clone()))]),
        };
        map([(self.arm(), inner)])
    }

    /// 2. "`deny.reasons` is non-empty, sorted bytewise, without duplicates;
    ///    `escalate.ticket` is non-empty."
    fn problem(&self) -> Option<String> {
        match self {
            Verdict::Admit { .. } => None,
            Verdict::Deny { reasons } if reasons.is_empty() => {
                Some("deny.reasons is empty; a denial names at least one reason".into())
            }
            Verdict::Deny { reasons } => {
                reasons.windows(2).enumerate().find_map(|(i, w)| match w {
                    [a, b] if a.as_bytes() >= b.as_bytes() => Some(format!(
                        "deny.reasons[{}] {b:?} {} deny.reasons[{i}] {a:?}; sort the reasons \
                         bytewise and list each once",
                        i + 1,
                        if a == b { "repeats" } else { "sorts before" },
                    )),
                    _ => None,
                })
            }
            Verdict::Escalate { ticket } if ticket.is_empty() => Some(
                "escalate.ticket is empty; name the ticket the decision was escalated to".into(),
            ),
            Verdict::Escalate { .. } => None,
        }
    }
}

/// `deny.reasons`: at most `MAX_DENY_REASONS` texts.
fn reasons(value: &ValueRef<'_>) -> Result<Vec<String>, SchemaError> {
    let path = "verdict.deny.reasons";
    let ValueRef::Array(items) = value else {
        return Err(wrong_type(path, "an array of text", value));
    };
    if items.len() > MAX_DENY_REASONS {
        return Err(field(
            path,
            format!(
                "{} reasons, over the limit of {MAX_DENY_REASONS}",
                items.len()
            ),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| text(v, &format!("{path}[{i}]")))
        .collect()
}

/// A short description of a value for messages: its type, or a map's keys.
fn describe(value: &ValueRef<'_>) -> String {
    match value {
        ValueRef::Map(m) => {
            // Bytewise order, as the owned value's map lists them.
            let mut sorted: Vec<&str> = m.iter().map(|(k, _)| *k).collect();
            sorted.sort_unstable();
            let keys: Vec<String> = sorted
                .into_iter()
                .take(8)
                .map(|k| format!("{:?}", truncate(k)))
                .collect();
            format!("a map with keys [{}]", keys.join(", "))
        }
        other => other.type_name().to_owned(),
    }
}

impl Stage {
    /// Every stage.
    pub const ALL: [Stage; 3] = [Stage::Deterministic, Stage::Llm, Stage::Unknown];

    /// The text form.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Deterministic => "deterministic",
            Stage::Llm => "llm",
            Stage::Unknown => "unknown",
        }
    }

    /// One of `deterministic`, `llm`, `unknown`.
    fn from_value(value: &ValueRef<'_>, path: &str) -> Result<Stage, SchemaError> {
        let ValueRef::Text(s) = value else {
            return Err(wrong_type(path, "text", value));
        };
        Stage::ALL
            .into_iter()
            .find(|x| x.as_str() == *s)
            .ok_or_else(|| {
                let found = truncate(s);
                field(
                    path,
                    format!("{found:?} is not one of deterministic, llm, unknown"),
                )
            })
    }
}

impl Replay {
    /// The (proposal, execution) stages this class stands for; [`combine`]
    /// of them gives the normal form.
    pub fn stages(self) -> (Stage, Stage) {
        match self {
            Replay::DeterministicReplay => (Stage::Deterministic, Stage::Deterministic),
            Replay::LlmOriginated => (Stage::Llm, Stage::Llm),
            Replay::Unknown => (Stage::Unknown, Stage::Unknown),
            Replay::Mixed {
                proposal,
                execution,
            } => (proposal, execution),
        }
    }

    /// The `class` text.
    pub fn class(self) -> &'static str {
        match self {
            Replay::DeterministicReplay => "deterministic_replay",
            Replay::LlmOriginated => "llm_originated",
            Replay::Unknown => "unknown",
            Replay::Mixed { .. } => "mixed",
        }
    }

    /// `{"class": ...}`, with `proposal` and `execution` for `mixed` only.
    fn from_value(value: &ValueRef<'_>) -> Result<Replay, SchemaError> {
        if value.as_map().is_none() {
            return Err(wrong_type("replay", "a map", value));
        }
        let class = value
            .get("class")
            .ok_or_else(|| field("replay.class", "missing; every replay names its class"))?;
        let class = text_ref(class, "replay.class")?;
        if class == "mixed" {
            let o = Obj::new(value, "replay", &["class", "proposal", "execution"])?;
            return Ok(Replay::Mixed {
                proposal: Stage::from_value(o.get("proposal")?, "replay.proposal")?,
                execution: Stage::from_value(o.get("execution")?, "replay.execution")?,
            });
        }
        Obj::new(value, "replay", &["class"])?;
        let all = [
            Replay::DeterministicReplay,
            Replay::LlmOriginated,
            Replay::Unknown,
        ];
        all.into_iter().find(|r| r.class() == class).ok_or_else(|| {
            field(
                "replay.class",
                format!(
                    "{:?} is not one of deterministic_replay, llm_originated, unknown, mixed",
                    truncate(class)
                ),
            )
        })
    }

    /// The replay as a value.
    fn to_value(self) -> Value {
        let class = ("class", Value::Text(self.class().to_owned()));
        match self {
            Replay::Mixed {
                proposal,
                execution,
            } => map([
                class,
                ("proposal", Value::Text(proposal.as_str().to_owned())),
                ("execution", Value::Text(execution.as_str().to_owned())),
            ]),
            _ => map([class]),
        }
    }

    /// 5. "`replay` is in the normal form of the combining function."
    fn problem(self) -> Option<String> {
        let (p, e) = self.stages();
        let normal = combine(p, e);
        (normal != self).then(|| {
            format!(
                "replay is mixed with proposal and execution both {0:?}; write {{\"class\": \
                 {1:?}}}, the normal form of combine({0}, {0})",
                p.as_str(),
                normal.class()
            )
        })
    }
}

/// A payload that passed every issuing check.
#[derive(Clone, Debug)]
pub struct ValidPayload {
    /// Canonical DAG-CBOR bytes.
    pub bytes: Vec<u8>,
    /// The decoded value.
    pub value: Value,
    /// The typed receipt.
    pub receipt: Receipt,
    /// `blake3:` identity of `bytes`.
    pub id: Digest,
}

/// Why a payload was refused, with a stable reason code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// The JSON text could not be read as a data-model value.
    #[error("payload JSON: {0}")]
    Json(#[from] crate::receipt::canonical::json::JsonError),
    /// The CBOR bytes are not canonical DAG-CBOR of the data model.
    #[error("payload CBOR: {0}")]
    Cbor(#[from] crate::receipt::canonical::dagcbor::DecodeError),
    /// Over `MAX_PAYLOAD_BYTES` once encoded.
    #[error("payload is {0} bytes, over the limit of {max}", max = crate::limits::MAX_PAYLOAD_BYTES)]
    TooLarge(usize),
    /// Schema error.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// First broken invariant (all are listed in `violations`).
    #[error("{}", .0.first().map(|v| v.to_string()).unwrap_or_default())]
    Invariants(Vec<InvariantViolation>),
}

impl PayloadError {
    /// Stable reason code of this refusal: `payload.malformed` (JSON that is
    /// not a data-model value, CBOR outside the data model),
    /// `payload.too_large` (over [`MAX_PAYLOAD_BYTES`]), `payload.non_canonical`, `payload.schema`,
    /// `payload.version_unsupported`, or the first broken invariant's code.
    pub fn reason_code(&self) -> Reason {
        match self {
            PayloadError::Json(_) => Reason::PayloadMalformed,
            PayloadError::TooLarge(_) => Reason::PayloadTooLarge,
            PayloadError::Cbor(e) => e.reason_code(),
            PayloadError::Schema(e) => e.reason_code(),
            PayloadError::Invariants(v) => v
                .first()
                .map_or(Reason::PayloadMalformed, |v| v.invariant.reason_code()),
        }
    }
}

/// Issuing path: JSON text -> value -> receipt -> invariants -> canonical bytes.
///
/// The bytes are the canonical DAG-CBOR of the value read, so any key order
/// or whitespace of the JSON gives the same bytes and the same id.
pub fn payload_from_json(json: &[u8]) -> Result<ValidPayload, PayloadError> {
    let value = crate::receipt::canonical::json::from_json(json)?;
    let receipt = checked(&value.borrow())?;
    let bytes = dagcbor::encode(&value);
    if bytes.len() > MAX_PAYLOAD_BYTES {
        return Err(PayloadError::TooLarge(bytes.len()));
    }
    let id = identity(&bytes);
    Ok(ValidPayload {
        bytes,
        value,
        receipt,
        id,
    })
}

/// Verifying/logging path: strict decode -> receipt -> invariants.
///
/// The id is BLAKE3 over the bytes as received; the strict decoder has
/// already refused every byte string that is not the canonical form.
pub fn payload_from_cbor(bytes: &[u8]) -> Result<ValidPayload, PayloadError> {
    let (value, receipt) = read_cbor(bytes)?;
    Ok(ValidPayload {
        bytes: bytes.to_vec(),
        value: value.to_value(),
        receipt,
        id: identity(bytes),
    })
}

/// [`payload_from_cbor`] without the copies: the checked receipt and its
/// id, decoded from a value borrowed from `bytes` ([`dagcbor::decode_ref`]).
pub fn receipt_from_cbor(bytes: &[u8]) -> Result<(Receipt, Digest), PayloadError> {
    let (_, receipt) = read_cbor(bytes)?;
    Ok((receipt, identity(bytes)))
}

/// Size limit, strict decode (borrowed), schema and invariants.
fn read_cbor(bytes: &[u8]) -> Result<(ValueRef<'_>, Receipt), PayloadError> {
    if bytes.len() > MAX_PAYLOAD_BYTES {
        return Err(PayloadError::TooLarge(bytes.len()));
    }
    let value = dagcbor::decode_ref(bytes)?;
    let receipt = checked(&value)?;
    Ok((value, receipt))
}

/// Schema, then every invariant.
fn checked(value: &ValueRef<'_>) -> Result<Receipt, PayloadError> {
    let receipt = Receipt::from_ref(value)?;
    let violations = receipt.violations();
    if violations.is_empty() {
        Ok(receipt)
    } else {
        Err(PayloadError::Invariants(violations))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::receipt::canonical::json;

    fn valid() -> Value {
        let text = br#"{"version": 1, "issuer": "i", "issued_at": 1, "substrate": "git",
            "change_id": "blake3:0000000000000000000000000000000000000000000000000000000000000000",
            "inverse_delta_id": null, "reversibility": null, "read_set": [],
            "precondition": null,
            "policy_id": "blake3:0000000000000000000000000000000000000000000000000000000000000000",
            "verdict": {"escalate": {"ticket": "T-1"}}, "applied": false,
            "replay": {"class": "unknown"}}"#;
        json::from_json(text).unwrap()
    }

    fn with(key: &str, value: Value) -> Value {
        let mut v = valid();
        if let Value::Map(m) = &mut v {
            m.insert(key.to_owned(), value);
        }
        v
    }

    /// The payload as the decoder reads it: keys in DAG-CBOR's length-first
    /// order, borrowed from the bytes.
    fn from_cbor(v: &Value) -> Result<Receipt, SchemaError> {
        let bytes = dagcbor::encode(v);
        Receipt::from_ref(&dagcbor::decode_ref(&bytes).unwrap())
    }

    #[test]
    fn the_borrowed_reader_reads_what_the_owned_one_reads() {
        let v = valid();
        assert_eq!(from_cbor(&v).unwrap(), Receipt::from_value(&v).unwrap());
        let (receipt, id) = receipt_from_cbor(&dagcbor::encode(&v)).unwrap();
        let owned = payload_from_cbor(&dagcbor::encode(&v)).unwrap();
        assert_eq!((receipt, id), (owned.receipt, owned.id));
        assert_eq!(owned.value, v);
    }

    #[test]
    fn errors_name_keys_in_bytewise_order_whatever_the_encoding_order() {
        // Length-first (the CBOR order) puts "zz" before "aaa"; bytewise
        // (the owned map's order, and the messages') puts "aaa" first.
        let v = with("zz", Value::Null);
        let v = if let Value::Map(mut m) = v {
            m.insert("aaa".into(), Value::Null);
            Value::Map(m)
        } else {
            panic!()
        };
        let owned = Receipt::from_value(&v).unwrap_err();
        assert_eq!(from_cbor(&v).unwrap_err(), owned);
        assert!(owned.to_string().contains("aaa"), "{owned}");

        let mut arms = std::collections::BTreeMap::new();
        arms.insert("zz".to_owned(), Value::Null);
        arms.insert("aaa".to_owned(), Value::Null);
        let v = with("verdict", Value::Map(arms));
        let owned = Receipt::from_value(&v).unwrap_err();
        assert_eq!(from_cbor(&v).unwrap_err(), owned);
        assert!(
            owned.to_string().contains(r#"keys ["aaa", "zz"]"#),
            "{owned}"
        );
    }
}
