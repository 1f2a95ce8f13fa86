//! contracted: steps gated by contracts, and a demonstration recorded
//! (spec/gate-mcp.md "Contracts from a demonstrated run").
//!
//! [`Contracted`] wraps the policy's decider. For a step of a tool that a
//! live contract covers (bound, of this server, not the one this session
//! records), the contract is judged first: the arguments must be one
//! demonstrated call's (RFC 8785 digest: JSON types included), and every
//! read that call depended on must have been made again in this session
//! since the previous step (not spent), with the same arguments, within
//! `max_age`, with the demonstrated answer (else the contract is marked
//! unproven, in its file). A contract's refusals join the table's as
//! refusals of the inner decider, which denies on them as it denies on any
//! (the one combination, decide.rs and ruled.rs). An admitted step's
//! evidence carries the contract record `{"contract", "version", "call",
//! "reads"}` (its identity is the admit's proof, its reads the receipt's
//! read set); the receipt's `policy_id` is the identity of `{"policy",
//! "contracts"}`. Every step, whatever its verdict, spends the reads made
//! before it.
//!
//! A recording of a demonstration is [`Recording`] (recording.rs).

use super::contract::{Contract, Contracts, DemoCall, DemoRead, MAX_CALL_READS, Status, Unproven};
use super::decide::{DecideError, Decider, Decision, Facts, Ruling, sorted};
use super::judge::{Judged, Seen, judge};
use super::table::jcs_sha256;
use crate::digest::Digest;
use crate::receipt::canonical::{Value, dagcbor, identity};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use super::recording::{Recorded, Recording};

/// Reason: the arguments are no demonstrated call's.
pub const CONTRACT_ARGUMENTS: &str = "contract.arguments";
/// Reason: a read the call depended on was not made again.
pub const CONTRACT_READ_MISSING: &str = "contract.read_missing";
/// Reason: the read is older than `max_age`.
pub const CONTRACT_READ_STALE: &str = "contract.read_stale";
/// Reason: the read was made before the previous step.
pub const CONTRACT_READ_SPENT: &str = "contract.read_spent";
/// Reason: a replayed read answered otherwise.
pub const CONTRACT_UNPROVEN: &str = "contract.unproven";
pub(super) fn t(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn seen_reads(input: &serde_json::Value) -> Vec<Seen> {
    let Some(list) = input.get("reads").and_then(serde_json::Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|r| {
            Some(Seen {
                tool: r.get("tool")?.as_str()?.to_string(),
                arguments: r.get("arguments")?.as_str()?.parse().ok()?,
                answer: r.get("answer")?.as_str()?.parse().ok()?,
                at: r.get("at")?.as_i64()?,
                call: r.get("call")?.as_u64()?,
            })
        })
        .collect()
}

/// The contract record of an admitted step's decider evidence: the
/// identity of `{"contract", "version", "call", "reads"}`.
pub fn proof_of(evidence: &Value) -> Option<Digest> {
    let record = evidence.as_map()?.get("contract")?;
    Some(identity(&dagcbor::encode(record)))
}

/// The reads a contract consumed, from a decider's evidence:
/// `("mcp:<tool>/<arguments digest>", answer digest)`.
pub fn reads_of(evidence: &Value) -> Vec<(String, Digest)> {
    let Some(Value::Array(reads)) = evidence
        .as_map()
        .and_then(|m| m.get("contract"))
        .and_then(Value::as_map)
        .and_then(|m| m.get("reads"))
    else {
        return Vec::new();
    };
    reads
        .iter()
        .filter_map(|r| {
            let m = r.as_map()?;
            let read = m.get("read")?.as_text()?.to_string();
            let answer = m.get("answer")?.as_text()?.parse().ok()?;
            Some((read, answer))
        })
        .collect()
}

/// Reads as a data-model value: `[{"tool", "arguments", "answer"}]`.
pub fn reads_value(reads: &[DemoRead]) -> Value {
    Value::Array(reads.iter().map(DemoRead::value).collect())
}

/// The tool, the time and the arguments of a step's decision input.
fn call_of<'a>(facts: &Facts<'a>) -> (&'a str, i64, &'a serde_json::Value) {
    let tool = facts
        .input
        .pointer("/tool/name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let now = facts
        .input
        .pointer("/now")
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0);
    let arguments = facts
        .input
        .get("arguments")
        .unwrap_or(&serde_json::Value::Null);
    (tool, now, arguments)
}

/// The policy identity of a contracted decision: the policy's and the
/// covering contracts'.
fn contracted_policy_id(policy_id: &Digest, covering: &[Contract]) -> Digest {
    let ids = covering
        .iter()
        .map(|c| t(c.identity().to_string()))
        .collect();
    identity(&dagcbor::encode(&Value::Map(BTreeMap::from([
        ("policy".to_string(), t(policy_id.to_string())),
        ("contracts".to_string(), Value::Array(ids)),
    ]))))
}

/// The decider's ruling with the contracts': an admit carries the
/// contract's record; an admit with no contract matched is a denial.
fn with_contract(ruling: Ruling, admitted: Option<Value>, reasons: &[String]) -> Ruling {
    match (ruling, admitted) {
        (Ruling::Admit { evidence }, Some(record)) => Ruling::Admit {
            evidence: Value::Map(BTreeMap::from([
                ("contract".to_string(), record),
                ("decider".to_string(), evidence),
            ])),
        },
        (Ruling::Admit { .. }, None) => {
            // A decider that admits over refusals: a contract's refusal still denies.
            Ruling::Deny(sorted(reasons))
        }
        (other, _) => other,
    }
}

/// The policy's decider with contracts in front.
pub struct Contracted {
    inner: Box<dyn Decider>,
    contracts: Contracts,
    server: String,
    /// Reads of a session call number below this are spent; held while a
    /// step is decided, so two steps never consume one read.
    spent_below: Mutex<u64>,
    recording: Option<Arc<Recording>>,
    note: Box<dyn Fn(&str) + Send + Sync>,
}

impl std::fmt::Debug for Contracted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contracted")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Contracted {
    /// `inner` with the contracts of `contracts` in front, for the server
    /// `server`; `recording` exempts its own contract; `note` hears what an
    /// operator should (a contract that could not be marked unproven).
    pub fn new(
        inner: Box<dyn Decider>,
        contracts: Contracts,
        server: &str,
        recording: Option<Arc<Recording>>,
        note: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Contracted {
        Contracted {
            inner,
            contracts,
            server: server.to_string(),
            spent_below: Mutex::new(0),
            recording,
            note,
        }
    }

    fn enforce(
        &self,
        facts: &Facts<'_>,
        covering: &[Contract],
        seen: &[Seen],
        since: u64,
    ) -> Result<Decision, DecideError> {
        let (tool, now, arguments) = call_of(facts);
        let digest = jcs_sha256(arguments).map_err(|e| DecideError(e.to_string()))?;
        let policy_id = contracted_policy_id(&facts.policy_id, covering);
        let mut admitted = None;
        let mut failures = Vec::new();
        for c in covering {
            match judge(c, tool, arguments, &digest, seen, since, now) {
                Judged::Admit(record) => {
                    admitted.get_or_insert(record);
                }
                Judged::Refuse(list, unproven) => {
                    failures.extend(list);
                    if let Some(u) = unproven {
                        self.mark_unproven(c, u);
                    }
                }
            }
        }
        let reasons: Vec<String> = match &admitted {
            Some(_) => facts.refusals.to_vec(),
            None => facts
                .refusals
                .iter()
                .cloned()
                .chain(failures.iter().map(|(r, _)| r.clone()))
                .collect(),
        };
        let reasons = sorted(&reasons);
        let sub = Facts {
            input: facts.input,
            refusals: &reasons,
            change_id: facts.change_id,
            policy_id,
            read_set: facts.read_set,
        };
        let inner = self.inner.decide_call(&sub)?;
        let matched = admitted.is_some();
        let ruling = with_contract(inner.ruling, admitted, &reasons);
        // The contracts' details only when no contract matched (a matched
        // step refused by the rules says why through their reasons).
        let mut details = if matched { Vec::new() } else { failures };
        details.extend(inner.details);
        Ok(Decision {
            ruling,
            policy_id: Some(policy_id),
            details,
        })
    }

    /// Persist a contradiction: the contract's file rewritten unproven.
    fn mark_unproven(&self, c: &Contract, u: Unproven) {
        let mut marked = c.clone();
        marked.status = Status::Unproven;
        marked.unproven = Some(u);
        if let Err(e) = self.contracts.write(&marked) {
            (self.note)(&format!(
                "the contract {} could not be marked unproven ({}); this step is denied all the same",
                c.name,
                crate::io::error_chain(&e)
            ));
        } else {
            (self.note)(&format!(
                "the contract {} is unproven: a replayed read answered otherwise",
                c.name
            ));
        }
    }

    /// What a recording keeps of an admitted step: the call and the reads
    /// made since the step before it (the newest of each read, newest
    /// [`MAX_CALL_READS`]).
    fn demo_call(facts: &Facts<'_>, seen: &[Seen], since: u64) -> Option<DemoCall> {
        let tool = facts
            .input
            .pointer("/tool/name")
            .and_then(serde_json::Value::as_str)?
            .to_string();
        let arguments = facts.input.get("arguments")?.clone();
        let arguments_digest = jcs_sha256(&arguments).ok()?;
        let mut reads: Vec<DemoRead> = Vec::new();
        for s in seen.iter().rev().filter(|s| s.call >= since) {
            if reads
                .iter()
                .any(|r| r.tool == s.tool && r.arguments == s.arguments)
            {
                continue;
            }
            if reads.len() == MAX_CALL_READS {
                break;
            }
            reads.push(DemoRead {
                tool: s.tool.clone(),
                arguments: s.arguments,
                answer: s.answer,
            });
        }
        reads.reverse();
        Some(DemoCall {
            tool,
            arguments,
            arguments_digest,
            reads,
        })
    }
}

impl Decider for Contracted {
    fn decide(&self, facts: &Facts<'_>) -> Result<Ruling, DecideError> {
        self.decide_call(facts).map(|d| d.ruling)
    }

    fn decide_call(&self, facts: &Facts<'_>) -> Result<Decision, DecideError> {
        let mut spent_below = lock(&self.spent_below);
        let since = *spent_below;
        let seen = seen_reads(facts.input);
        let (tool, _, _) = call_of(facts);
        let all = self
            .contracts
            .all()
            .map_err(|e| DecideError(crate::io::error_chain(&e)))?;
        let recorded = self.recording.as_ref().map(|r| r.name());
        let covering: Vec<Contract> = all
            .into_iter()
            .filter(|c| {
                c.bound
                    && c.server == self.server
                    && c.covers(tool)
                    && Some(c.name.as_str()) != recorded
            })
            .collect();
        let mut decision = if covering.is_empty() {
            let mut d = self.inner.decide_call(facts)?;
            if let Ruling::Admit { evidence } = &mut d.ruling {
                let inner = std::mem::replace(evidence, Value::Null);
                *evidence = Value::Map(BTreeMap::from([("decider".to_string(), inner)]));
            }
            d
        } else {
            self.enforce(facts, &covering, &seen, since)?
        };
        // An admitted step's evidence keeps the reads made since the step
        // before it (what `gate contract learn` takes from the store).
        let call = Self::demo_call(facts, &seen, since);
        if let (
            Ruling::Admit {
                evidence: Value::Map(m),
            },
            Some(call),
        ) = (&mut decision.ruling, &call)
        {
            m.insert("reads".to_string(), reads_value(&call.reads));
        }
        if let (Some(r), Ruling::Admit { .. }, Some(call)) =
            (&self.recording, &decision.ruling, call)
        {
            r.admitted(facts.change_id, call);
        }
        // This step spends every read made before it.
        let top = seen.iter().map(|s| s.call.saturating_add(1)).max();
        *spent_below = since.max(top.unwrap_or(0));
        Ok(decision)
    }

    fn finished(&self, change_id: &Digest, ok: bool) {
        if let Some(r) = &self.recording {
            r.finished(change_id, ok);
        }
        self.inner.finished(change_id, ok);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::TableDecider;
    use serde_json::json;

    struct World {
        _tmp: tempfile::TempDir,
        contracts: Contracts,
    }

    fn read_digest(path: &str) -> Digest {
        jcs_sha256(&json!({"path": path})).unwrap()
    }

    fn world() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let contracts = Contracts::open(tmp.path()).unwrap();
        let args = json!({"path": "/w/release", "content": "v1"});
        let c = Contract::new(
            "deploy",
            1,
            "fs",
            60,
            vec![DemoCall {
                tool: "write".into(),
                arguments_digest: jcs_sha256(&args).unwrap(),
                arguments: args,
                reads: vec![DemoRead {
                    tool: "read".into(),
                    arguments: read_digest("/w/config"),
                    answer: Digest::sha256(b"config v1"),
                }],
            }],
        );
        contracts.write(&c).unwrap();
        World {
            _tmp: tmp,
            contracts,
        }
    }

    fn gate(w: &World) -> Contracted {
        Contracted::new(
            Box::new(TableDecider),
            w.contracts.clone(),
            "fs",
            None,
            Box::new(|_| {}),
        )
    }

    fn input(args: serde_json::Value, reads: &[(u64, i64, &[u8])]) -> serde_json::Value {
        let reads: Vec<serde_json::Value> = reads
            .iter()
            .map(|(call, at, answer)| {
                json!({"tool": "read", "arguments": read_digest("/w/config").to_string(),
                       "answer": Digest::sha256(answer).to_string(), "at": at, "call": call})
            })
            .collect();
        json!({"tool": {"name": "write"}, "now": 1000, "arguments": args, "reads": reads})
    }

    fn decide(g: &Contracted, input: &serde_json::Value) -> Decision {
        let facts = Facts {
            input,
            refusals: &[],
            change_id: Digest::blake3(b"c"),
            policy_id: Digest::blake3(b"p"),
            read_set: &[],
        };
        g.decide_call(&facts).unwrap()
    }

    fn reasons(d: &Decision) -> Vec<String> {
        match &d.ruling {
            Ruling::Deny(r) => r.clone(),
            other => panic!("not a deny: {other:?}"),
        }
    }

    #[test]
    fn an_exact_replay_after_a_fresh_read_is_admitted_and_spends_the_read() {
        let w = world();
        let g = gate(&w);
        let ok = json!({"content": "v1", "path": "/w/release"});
        let d = decide(&g, &input(ok.clone(), &[(0, 990, b"config v1")]));
        let Ruling::Admit { evidence } = &d.ruling else {
            panic!("{d:?}")
        };
        assert_ne!(d.policy_id, Some(Digest::blake3(b"p")));
        assert!(proof_of(evidence).is_some());
        let reads = reads_of(evidence);
        assert_eq!(
            reads,
            vec![(
                format!("mcp:read/{}", read_digest("/w/config")),
                Digest::sha256(b"config v1")
            )]
        );
        // The same read cannot serve a second step.
        let d = decide(&g, &input(ok, &[(0, 990, b"config v1")]));
        assert_eq!(reasons(&d), vec![CONTRACT_READ_SPENT]);
        assert!(d.details[0].1.contains("contract deploy v1"), "{d:?}");
    }

    #[test]
    fn each_refusal_has_its_reason_and_a_detail() {
        let w = world();
        let ok = json!({"content": "v1", "path": "/w/release"});
        // An argument changed, its type only: "1" is not 1.
        let d = decide(
            &gate(&w),
            &input(
                json!({"content": "v2", "path": "/w/release"}),
                &[(0, 990, b"config v1")],
            ),
        );
        assert_eq!(reasons(&d), vec![CONTRACT_ARGUMENTS]);
        let detail = &d.details[0].1;
        assert!(
            detail.contains("/content") && detail.contains("\"v1\"") && detail.contains("\"v2\""),
            "{detail}"
        );
        // No read.
        let d = decide(&gate(&w), &input(ok.clone(), &[]));
        assert_eq!(reasons(&d), vec![CONTRACT_READ_MISSING]);
        // A read too old.
        let d = decide(&gate(&w), &input(ok.clone(), &[(0, 900, b"config v1")]));
        assert_eq!(reasons(&d), vec![CONTRACT_READ_STALE]);
        // Another answer: unproven, persisted, and refused after.
        let d = decide(&gate(&w), &input(ok.clone(), &[(0, 990, b"config v2")]));
        assert_eq!(reasons(&d), vec![CONTRACT_UNPROVEN]);
        assert_eq!(w.contracts.get("deploy").unwrap().status, Status::Unproven);
        let d = decide(&gate(&w), &input(ok, &[(0, 990, b"config v1")]));
        assert_eq!(reasons(&d), vec![CONTRACT_UNPROVEN]);
    }

    #[test]
    fn an_unbound_contract_or_another_tool_is_not_enforced() {
        let w = world();
        let mut c = w.contracts.get("deploy").unwrap();
        c.bound = false;
        w.contracts.write(&c).unwrap();
        let d = decide(&gate(&w), &input(json!({"x": 1}), &[]));
        assert!(matches!(d.ruling, Ruling::Admit { .. }));
        assert_eq!(d.policy_id, None);
    }

    #[test]
    fn a_bad_contract_file_is_no_verdict() {
        let w = world();
        std::fs::write(w.contracts.path("broken"), b"{").unwrap();
        let facts_input = input(json!({}), &[]);
        let facts = Facts {
            input: &facts_input,
            refusals: &[],
            change_id: Digest::blake3(b"c"),
            policy_id: Digest::blake3(b"p"),
            read_set: &[],
        };
        assert!(gate(&w).decide_call(&facts).is_err());
    }
}
