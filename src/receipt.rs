//! receipt: the version-1 payload model, its schema and invariants, and the
//! replay combining function.
//!
//! STUB: interface fixed, body to be written (helper A).

use crate::canonical::Value;
use crate::digest::Digest;

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

/// The five invariants of DESIGN.md, each with its own reason code.
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
    /// Every invariant, in DESIGN.md order.
    pub const ALL: [Invariant; 5] = [
        Invariant::Reversibility,
        Invariant::Verdict,
        Invariant::Applied,
        Invariant::ReadSet,
        Invariant::Replay,
    ];

    /// Stable reason code, e.g. `invariant.reversibility`.
    pub fn reason_code(self) -> &'static str {
        match self {
            Invariant::Reversibility => "invariant.reversibility",
            Invariant::Verdict => "invariant.verdict",
            Invariant::Applied => "invariant.applied",
            Invariant::ReadSet => "invariant.read_set",
            Invariant::Replay => "invariant.replay",
        }
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
    pub fn reason_code(&self) -> &'static str {
        match self {
            SchemaError::UnsupportedVersion(_) => "payload.version_unsupported",
            SchemaError::Field { .. } => "payload.schema",
        }
    }
}

impl Receipt {
    /// Read a receipt from a value: schema only (types, fields), no invariants.
    pub fn from_value(value: &Value) -> Result<Receipt, SchemaError> {
        let _ = value;
        todo!()
    }

    /// The receipt as a value (version 1).
    pub fn to_value(&self) -> Value {
        todo!()
    }

    /// Check one invariant.
    pub fn check(&self, invariant: Invariant) -> Result<(), InvariantViolation> {
        let _ = invariant;
        todo!()
    }

    /// Check every invariant; all violations, in DESIGN.md order.
    pub fn violations(&self) -> Vec<InvariantViolation> {
        Invariant::ALL
            .iter()
            .filter_map(|i| self.check(*i).err())
            .collect()
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
    Json(#[from] crate::canonical::json::JsonError),
    /// The CBOR bytes are not canonical DAG-CBOR of the data model.
    #[error("payload CBOR: {0}")]
    Cbor(#[from] crate::canonical::dagcbor::DecodeError),
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
    /// Stable reason code of this refusal.
    pub fn reason_code(&self) -> &'static str {
        todo!()
    }
}

/// Issuing path: JSON text -> value -> receipt -> invariants -> canonical bytes.
pub fn payload_from_json(json: &[u8]) -> Result<ValidPayload, PayloadError> {
    let _ = json;
    todo!()
}

/// Verifying/logging path: strict decode -> receipt -> invariants.
pub fn payload_from_cbor(bytes: &[u8]) -> Result<ValidPayload, PayloadError> {
    let _ = bytes;
    todo!()
}
