//! schema: reading a payload value into the typed model field by field
//! (unknown, missing and mistyped fields refused with their path), and
//! writing the model back as a value. The invariants are checked by
//! [`super::Receipt`].

use super::model::{ReadItem, Replay, SchemaError, Stage, Substrate, Verdict, combine};
use crate::digest::Digest;
use crate::limits::{MAX_DENY_REASONS, MAX_READ_SET_ITEMS, MAX_TEXT_BYTES};
use crate::receipt::canonical::{MAX_SAFE_INTEGER, Value, ValueRef};

/// 4. "`read_set` is sorted by `resource` bytewise, without duplicate resources."
pub(super) fn read_set_problem(items: &[ReadItem]) -> Option<String> {
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
pub const TOP_FIELDS: &[&str] = &[
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
pub(super) struct Obj<'a> {
    pub(super) value: &'a ValueRef<'a>,
    pub(super) path: &'a str,
}

impl<'a> Obj<'a> {
    /// Refuse a non-map, any unknown field and any missing field.
    pub(super) fn new(
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
    pub(super) fn get(&self, key: &str) -> Result<&'a ValueRef<'a>, SchemaError> {
        self.value
            .get(key)
            .ok_or_else(|| field(format!("{}{key}", self.prefix()), "missing"))
    }

    /// `path.` or nothing at the top level.
    pub(super) fn prefix(&self) -> String {
        if self.path.is_empty() {
            String::new()
        } else {
            format!("{}.", self.path)
        }
    }
}

/// A map value from static keys.
pub(super) fn map<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

/// A schema error for `path`.
pub(super) fn field(path: impl Into<String>, detail: impl Into<String>) -> SchemaError {
    SchemaError::Field {
        field: path.into(),
        detail: detail.into(),
    }
}

/// A schema error for a value of the wrong type.
pub(super) fn wrong_type(path: &str, expected: &str, found: &ValueRef<'_>) -> SchemaError {
    field(
        path,
        format!("expected {expected}, found {}", found.type_name()),
    )
}

/// Text of at most `MAX_TEXT_BYTES` bytes.
pub(super) fn text(value: &ValueRef<'_>, path: &str) -> Result<String, SchemaError> {
    text_ref(value, path).map(str::to_owned)
}

/// [`text`], borrowed.
pub(super) fn text_ref<'v>(value: &ValueRef<'v>, path: &str) -> Result<&'v str, SchemaError> {
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
pub(super) fn boolean(value: &ValueRef<'_>, path: &str) -> Result<bool, SchemaError> {
    match value {
        ValueRef::Bool(b) => Ok(*b),
        other => Err(wrong_type(path, "a boolean", other)),
    }
}

/// A digest in its strict text form (`blake3:`/`sha256:` + 64 lowercase hex).
pub(super) fn digest(value: &ValueRef<'_>, path: &str) -> Result<Digest, SchemaError> {
    let ValueRef::Text(s) = value else {
        return Err(wrong_type(path, "a digest (text)", value));
    };
    s.parse::<Digest>()
        .map_err(|e| field(path, format!("{e} (found {:?})", truncate(s))))
}

/// The first 80 characters of `s`, for quoting in a message.
pub(super) fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

/// The digest as a text value.
pub(super) fn digest_value(d: &Digest) -> Value {
    Value::Text(d.to_string())
}

/// `null`, or the value read by `read`.
pub(super) fn nullable<'v, T>(
    value: &'v ValueRef<'v>,
    read: impl FnOnce(&'v ValueRef<'v>) -> Result<T, SchemaError>,
) -> Result<Option<T>, SchemaError> {
    match value {
        ValueRef::Null => Ok(None),
        v => read(v).map(Some),
    }
}

/// `issued_at`: Unix seconds, 0 ..= 2^53-1 (a receipt before 1970 is refused).
pub(super) fn issued_at(value: &ValueRef<'_>) -> Result<i64, SchemaError> {
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
pub(super) fn read_set(value: &ValueRef<'_>) -> Result<Vec<ReadItem>, SchemaError> {
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
    pub(super) fn from_value(value: &ValueRef<'_>, path: &str) -> Result<ReadItem, SchemaError> {
        let obj = Obj::new(value, path, &["resource", "digest"])?;
        Ok(ReadItem {
            resource: text(obj.get("resource")?, &format!("{path}.resource"))?,
            digest: digest(obj.get("digest")?, &format!("{path}.digest"))?,
        })
    }

    /// The item as a value.
    pub(super) fn to_value(&self) -> Value {
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
    pub(super) fn from_value(value: &ValueRef<'_>) -> Result<Substrate, SchemaError> {
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
    pub(super) fn from_value(value: &ValueRef<'_>) -> Result<Verdict, SchemaError> {
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
    pub(super) fn to_value(&self) -> Value {
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
    pub(super) fn problem(&self) -> Option<String> {
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
pub(super) fn reasons(value: &ValueRef<'_>) -> Result<Vec<String>, SchemaError> {
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
pub(super) fn describe(value: &ValueRef<'_>) -> String {
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
    pub(super) fn from_value(value: &ValueRef<'_>, path: &str) -> Result<Stage, SchemaError> {
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
    pub fn from_value(value: &ValueRef<'_>) -> Result<Replay, SchemaError> {
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
    pub fn to_value(self) -> Value {
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
    pub(super) fn problem(self) -> Option<String> {
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
