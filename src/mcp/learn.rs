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
fn learned(store: &GateStore, evidence: &Value) -> Result<Option<Learned>, String> {
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
    let field = |k: &str| text(m, k).ok_or_else(|| format!("a step's evidence lacks {k}"));
    let object: Digest = field("arguments_object")?
        .parse()
        .map_err(|_| "a step's arguments_object is not a digest".to_string())?;
    let digest: Digest = field("arguments")?
        .parse()
        .map_err(|_| "a step's arguments digest is not one".to_string())?;
    let bytes = store.get(&object).map_err(|e| crate::io::error_chain(&e))?;
    let arguments: serde_json::Value = crate::strictjson::from_slice(&bytes, 128).map_err(|e| {
        format!(
            "the arguments of step {}: {e}",
            field("step").unwrap_or("?")
        )
    })?;
    if jcs_sha256(&arguments).ok() != Some(digest) {
        return Err(format!(
            "the arguments of step {} do not hash to its evidence's digest",
            field("step")?
        ));
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
pub fn last_steps(store: &GateStore, k: usize) -> Result<Vec<Learned>, String> {
    if k == 0 || k > MAX_CONTRACT_CALLS {
        return Err(format!("--last {k}: 1 to {MAX_CONTRACT_CALLS}"));
    }
    let records = store
        .receipt_records(MAX_LEARN_RECEIPTS)
        .map_err(|e| crate::io::error_chain(&e))?;
    let mut steps = Vec::new();
    for r in records {
        let evidence = store
            .get_record(&r)
            .map_err(|e| crate::io::error_chain(&e))?;
        if let Some(l) = learned(store, &evidence)? {
            steps.push(l);
        }
    }
    steps.sort_by_key(order_key);
    let skip = steps.len().saturating_sub(k);
    Ok(steps.split_off(skip))
}
