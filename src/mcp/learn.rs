//! learn: a contract from the last steps a store kept (`rcpt gate contract
//! learn NAME --last K --store DIR`; spec/gate-mcp.md "Learning a
//! contract").
//!
//! The store keeps, for each step, its evidence record (tool, arguments
//! digest, the object of the arguments' bytes, when it was decided, its
//! outcome and, for a proxy run with `--contracts`, the reads made since
//! the step before it) and the arguments' bytes. The steps that were
//! admitted and applied are ordered by decision time (then by step id), the
//! last K taken, each with its exact arguments (re-read from the store,
//! their RFC 8785 digest checked against the evidence) and its reads. The
//! store only knows steps decided with `--contracts` to have reads: a step
//! without them is taken with none and said so, for the operator to judge.

use super::contract::{DemoCall, DemoRead, MAX_CALL_READS, MAX_CONTRACT_CALLS};
use super::table::jcs_sha256;
use crate::digest::Digest;
use crate::gate::store::GateStore;
use crate::receipt::canonical::Value;

/// Most receipts of a store read to learn from.
pub const MAX_LEARN_RECEIPTS: usize = 100_000;

/// Why the last steps could not be learned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LearnError {
    /// `--last` out of its range.
    #[error("--last {0}: 1 to {MAX_CONTRACT_CALLS}")]
    Last(usize),
    /// The store could not be read.
    #[error("reading the store")]
    Store(#[from] crate::gate::store::StoreError),
    /// A step's evidence lacks a field, or holds one of the wrong kind.
    #[error("a step's evidence: {field} {why}")]
    Evidence {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A step's stored arguments are not JSON.
    #[error("the arguments of step {step}")]
    Arguments {
        /// The step.
        step: String,
        /// Why.
        #[source]
        source: crate::strictjson::StrictJsonError,
    },
    /// A step's stored arguments do not hash to the evidence's digest.
    #[error("the arguments of step {0} do not hash to its evidence's digest")]
    Digest(String),
}

impl LearnError {
    /// True when the invocation is what is wrong (`--last`): exit 2.
    pub fn is_usage(&self) -> bool {
        matches!(self, LearnError::Last(_))
    }
}

/// One step taken.
#[derive(Clone, Debug)]
pub struct Learned {
    /// The server's name.
    pub server: String,
    /// The step's id (`<session>-<seq>`).
    pub step: String,
    /// When it was decided.
    pub decided_at: i64,
    /// The call, with its reads.
    pub call: DemoCall,
    /// Whether its evidence recorded the reads (decided with `--contracts`).
    pub reads_known: bool,
}

fn text<'a>(m: &'a std::collections::BTreeMap<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k)?.as_text()
}

/// The text field `field` of a step's evidence.
fn field_of<'a>(
    m: &'a std::collections::BTreeMap<String, Value>,
    field: &'static str,
) -> Result<&'a str, LearnError> {
    text(m, field).ok_or(LearnError::Evidence {
        field,
        why: "is missing",
    })
}

/// The reads of a decider's evidence (`{"reads": [...]}`), if recorded.
fn reads_of(decider: Option<&Value>) -> Option<Vec<DemoRead>> {
    let Value::Array(list) = decider?.as_map()?.get("reads")? else {
        return None;
    };
    list.iter()
        .take(MAX_CALL_READS)
        .map(|r| {
            let m = r.as_map()?;
            Some(DemoRead {
                tool: text(m, "tool")?.to_string(),
                arguments: text(m, "arguments")?.parse().ok()?,
                answer: text(m, "answer")?.parse().ok()?,
            })
        })
        .collect()
}

/// A step's evidence, when it was admitted and applied: the step taken
/// (its arguments read back from the store).
fn learned(store: &GateStore, evidence: &Value) -> Result<Option<Learned>, LearnError> {
    let Some(m) = evidence.as_map() else {
        return Ok(None);
    };
    let applied = m
        .get("outcome")
        .and_then(Value::as_map)
        .and_then(|o| o.get("applied"));
    if text(m, "kind") != Some("tool-call") || applied != Some(&Value::Bool(true)) {
        return Ok(None);
    }
    let field = |field: &'static str| field_of(m, field);
    let digest_of = |field: &'static str| -> Result<Digest, LearnError> {
        field_of(m, field)?
            .parse()
            .map_err(|_| LearnError::Evidence {
                field,
                why: "is not a digest",
            })
    };
    let object = digest_of("arguments_object")?;
    let digest = digest_of("arguments")?;
    let bytes = store.get(&object)?;
    let step = field("step")?;
    let arguments: serde_json::Value =
        crate::strictjson::from_slice(&bytes, 128).map_err(|source| LearnError::Arguments {
            step: step.to_string(),
            source,
        })?;
    if jcs_sha256(&arguments).ok() != Some(digest) {
        return Err(LearnError::Digest(step.to_string()));
    }
    let reads = reads_of(m.get("decider"));
    let decided_at = match m.get("decided_at") {
        Some(Value::Integer(n)) => *n,
        _ => 0,
    };
    Ok(Some(Learned {
        server: field("server")?.to_string(),
        step: field("step")?.to_string(),
        decided_at,
        reads_known: reads.is_some(),
        call: DemoCall {
            tool: field("tool")?.to_string(),
            arguments,
            arguments_digest: digest,
            reads: reads.unwrap_or_default(),
        },
    }))
}

/// The step id's session and sequence, for ordering within one second.
fn order_key(l: &Learned) -> (i64, String, u64) {
    let (session, seq) = l.step.rsplit_once('-').unwrap_or((l.step.as_str(), "0"));
    (l.decided_at, session.to_string(), seq.parse().unwrap_or(0))
}

/// The last `k` (1 to [`MAX_CONTRACT_CALLS`]) admitted and applied steps
/// the store kept, oldest first.
pub fn last_steps(store: &GateStore, k: usize) -> Result<Vec<Learned>, LearnError> {
    if k == 0 || k > MAX_CONTRACT_CALLS {
        return Err(LearnError::Last(k));
    }
    let records = store.receipt_records(MAX_LEARN_RECEIPTS)?;
    let mut steps = Vec::new();
    for r in records {
        let evidence = store.get_record(&r)?;
        if let Some(l) = learned(store, &evidence)? {
            steps.push(l);
        }
    }
    steps.sort_by_key(order_key);
    let skip = steps.len().saturating_sub(k);
    Ok(steps.split_off(skip))
}
