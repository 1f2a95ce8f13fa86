//! judge: one contract judged for a step (spec/gate-mcp.md "Contracts
//! from a demonstrated run"): the arguments one demonstrated call's, and
//! every read that call depended on made again, unspent, fresh, with the
//! demonstrated answer; what a refusal says, and the record of an admit.

use super::contract::{Contract, DemoCall, DemoRead, Unproven};
use super::contracted::{
    CONTRACT_ARGUMENTS, CONTRACT_READ_MISSING, CONTRACT_READ_SPENT, CONTRACT_READ_STALE,
    CONTRACT_UNPROVEN, t,
};
use super::table::jcs_sha256;
use crate::digest::Digest;
use crate::receipt::canonical::Value;
use std::collections::BTreeMap;

/// Longest value shown in a refusal's detail (characters).
const MAX_SHOWN_CHARS: usize = 120;
/// Deepest a field is looked for when arguments differ.
const MAX_DIFF_DEPTH: usize = 32;

/// A read of the session, as the rules' `input.reads` hold it.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub(super) tool: String,
    pub(super) arguments: Digest,
    pub(super) answer: Digest,
    pub(super) at: i64,
    pub(super) call: u64,
}

/// A value shown in a detail, cut short.
fn shown(v: Option<&serde_json::Value>) -> String {
    let Some(v) = v else {
        return "absent".into();
    };
    let s = v.to_string();
    if s.chars().count() <= MAX_SHOWN_CHARS {
        s
    } else {
        let cut: String = s.chars().take(MAX_SHOWN_CHARS).collect();
        format!("{cut}…")
    }
}

fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (jcs_sha256(a), jcs_sha256(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// The first field (a JSON Pointer) where `now` differs from `demo`, with
/// both values (`None`: absent).
fn first_difference<'a>(
    demo: &'a serde_json::Value,
    now: &'a serde_json::Value,
    at: String,
    depth: usize,
) -> Option<(
    String,
    Option<&'a serde_json::Value>,
    Option<&'a serde_json::Value>,
)> {
    if same(demo, now) {
        return None;
    }
    if let (Some(a), Some(b)) = (demo.as_object(), now.as_object())
        && depth < MAX_DIFF_DEPTH
    {
        let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
            match (a.get(k), b.get(k)) {
                (Some(x), Some(y)) => {
                    if let Some(d) = first_difference(x, y, here, depth + 1) {
                        return Some(d);
                    }
                }
                (x, y) => return Some((here, x, y)),
            }
        }
    }
    Some((at, Some(demo), Some(now)))
}

/// What judging one contract gave.
pub(super) enum Judged {
    /// The contract record of the matched call.
    Admit(Value),
    /// Its refusals, and the contradiction found (the contract to be marked).
    Refuse(Vec<(String, String)>, Option<Unproven>),
}

/// The detail of arguments no demonstrated call has: the first field
/// that differs from the first demonstrated call of the tool.
fn arguments_detail(c: &Contract, name: &str, tool: &str, arguments: &serde_json::Value) -> String {
    c.calls
        .iter()
        .enumerate()
        .filter(|(_, d)| d.tool == tool)
        .filter_map(|(i, d)| {
            first_difference(&d.arguments, arguments, String::new(), 0).map(|x| (i, x))
        })
        .next()
        .map_or_else(
            || format!("{name}: no demonstrated call of {tool} has these arguments"),
            |(i, (field, was, is))| {
                format!(
                    "{name}, call {i} ({tool}): the arguments' field {} was {} when \
                     demonstrated, is {} now (arguments must equal a demonstrated call's, \
                     JSON types included)",
                    if field.is_empty() { "/" } else { &field },
                    shown(was),
                    shown(is)
                )
            },
        )
}

/// A read a demonstrated call depended on, against the session's: the
/// answer consumed, or the reason, why, and the answer that contradicts
/// the demonstration.
fn check_read(
    c: &Contract,
    r: &DemoRead,
    seen: &[Seen],
    since: u64,
    now: i64,
) -> Result<Digest, (&'static str, String, Option<Digest>)> {
    let latest = seen
        .iter()
        .rev()
        .find(|s| s.tool == r.tool && s.arguments == r.arguments);
    let Some(s) = latest else {
        let why = "was demonstrated before it; none was made in this session".to_string();
        return Err((CONTRACT_READ_MISSING, why, None));
    };
    let age = now.saturating_sub(s.at);
    if s.call < since {
        let why = "was made before the previous step, which spent it (two steps cannot share \
                   one read); read again";
        Err((CONTRACT_READ_SPENT, why.to_string(), None))
    } else if u64::try_from(age).map_or(true, |a| a > c.max_age) {
        let why = format!(
            "was made {age} s ago, over max_age {} s; read again",
            c.max_age
        );
        Err((CONTRACT_READ_STALE, why, None))
    } else if c.check_evidence && s.answer != r.answer {
        let why = format!(
            "answered {} when demonstrated, {} now: the contract is unproven until a rebind",
            r.answer, s.answer
        );
        Err((CONTRACT_UNPROVEN, why, Some(s.answer)))
    } else {
        Ok(s.answer)
    }
}

/// One contract judged for a step.
pub(super) fn judge(
    c: &Contract,
    tool: &str,
    arguments: &serde_json::Value,
    digest: &Digest,
    seen: &[Seen],
    since: u64,
    now: i64,
) -> Judged {
    let name = format!("contract {} v{}", c.name, c.version);
    if let Some(refused) = unproven_refusal(c, &name) {
        return refused;
    }
    let candidates: Vec<(usize, &DemoCall)> = c
        .calls
        .iter()
        .enumerate()
        .filter(|(_, d)| d.tool == tool && d.arguments_digest == *digest)
        .collect();
    if candidates.is_empty() {
        let detail = arguments_detail(c, &name, tool, arguments);
        return Judged::Refuse(vec![(CONTRACT_ARGUMENTS.into(), detail)], None);
    }
    let mut first: Option<Vec<(String, String)>> = None;
    let mut unproven = None;
    for (i, call) in candidates {
        let mut refusals = Vec::new();
        let mut consumed = Vec::new();
        for r in &call.reads {
            let what = format!(
                "{name}, call {i} ({tool}): the read {} with arguments {}",
                r.tool, r.arguments
            );
            match check_read(c, r, seen, since, now) {
                Ok(answer) => consumed.push(consumed_read(r, answer)),
                Err((reason, why, contradiction)) => {
                    refusals.push((reason.to_string(), format!("{what} {why}")));
                    if let Some(answer) = contradiction {
                        unproven.get_or_insert(Unproven {
                            at: now,
                            call: i,
                            tool: r.tool.clone(),
                            arguments: r.arguments,
                            demonstrated: r.answer,
                            now: answer,
                        });
                    }
                }
            }
        }
        if refusals.is_empty() {
            return Judged::Admit(admit_record(c, i, consumed));
        }
        first.get_or_insert(refusals);
    }
    Judged::Refuse(first.unwrap_or_default(), unproven)
}

/// The refusal of every step of an unproven contract (`None`: it is not).
fn unproven_refusal(c: &Contract, name: &str) -> Option<Judged> {
    let u = c.unproven.as_ref()?;
    let why = format!(
        "{name} is unproven: the read {} (arguments {}) answered {} where {} was demonstrated; \
         its steps are refused until `rcpt gate contract rebind {}` and a new demonstration",
        u.tool, u.arguments, u.now, u.demonstrated, c.name
    );
    Some(Judged::Refuse(vec![(CONTRACT_UNPROVEN.into(), why)], None))
}

/// A read an admitted step consumed, as its contract record holds it.
fn consumed_read(r: &DemoRead, answer: Digest) -> Value {
    Value::Map(BTreeMap::from([
        (
            "read".to_string(),
            t(format!("mcp:{}/{}", r.tool, r.arguments)),
        ),
        ("answer".to_string(), t(answer.to_string())),
    ]))
}

/// The contract record of an admitted step: the contract, its version,
/// the demonstrated call matched and the reads consumed.
fn admit_record(c: &Contract, i: usize, consumed: Vec<Value>) -> Value {
    Value::Map(BTreeMap::from([
        ("contract".to_string(), t(c.name.clone())),
        (
            "version".to_string(),
            Value::Integer(i64::try_from(c.version).unwrap_or(i64::MAX)),
        ),
        (
            "call".to_string(),
            Value::Integer(i64::try_from(i).unwrap_or(i64::MAX)),
        ),
        ("reads".to_string(), Value::Array(consumed)),
    ]))
}
