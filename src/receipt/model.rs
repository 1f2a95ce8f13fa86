//! model: the version-1 payload as types (substrate, verdict, stages and
//! the replay combining function, the read set, the receipt), its five
//! invariants and their checks (spec/receipt.md "Fields", "Invariants").
//! Reading and writing values field by field is `schema`.

use super::schema::{
    Obj, TOP_FIELDS, boolean, digest, digest_value, issued_at, map, nullable, read_set,
    read_set_problem, text, wrong_type,
};
use crate::digest::Digest;
use crate::reason::Reason;
use crate::receipt::canonical::{Value, ValueRef};

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
#[non_exhaustive]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipt::canonical::{dagcbor, json};
    use crate::receipt::payload::{payload_from_cbor, receipt_from_cbor};

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
