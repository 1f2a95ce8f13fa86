//! step: one gated tool call, from its decision to its receipt
//! (spec/gate-mcp.md "Each step call").
//!
//! [`Gate::prepare`] identifies the call (`change_id`), resolves its files,
//! asks the [`Decider`], keeps the pre-images in the gate store and makes
//! the decision durable in the ledger; only then may the caller forward
//! it. A refusal is signed at once and never forwarded. [`Gate::finish`]
//! re-reads the files after the answer (constated writes), builds the
//! inverse record and the evidence, signs the receipt and makes it durable
//! before the answer is relayed; the [`Finisher`] stores and logs it.

use super::commit::Durable;
use super::decide::{Decider, Facts, Input, Ruling};
use super::files::{self, Root, StepFile};
use super::issue::{evidence_of, map, read_set_of, receipt_of};
use super::ledger::{FileRecord, Issued, Ledger, MAX_CARRIED_PREIMAGE_BYTES, Pending, StepRecord};
use super::policy::{ToolKind, ToolPolicy};
use super::session::Session;
use super::sink::Finisher;
use super::table::{self, Listed, Standing};
use crate::digest::Digest;
use crate::gate::store::GateStore;
use crate::keys::SigningKey;
use crate::receipt::canonical::{Value, dagcbor, identity};
use crate::receipt::{Receipt, Verdict};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The base of a tool-proxy inverse record: its paths are relative to `/`.
pub const INVERSE_BASE: &str = "/";

/// Why a step reached no verdict (nothing forwarded, no receipt).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// The arguments have no RFC 8785 form.
    #[error(transparent)]
    Jcs(#[from] table::JcsError),
    /// The decider could not evaluate.
    #[error(transparent)]
    Decide(#[from] super::decide::DecideError),
    /// The store failed.
    #[error("the gate store failed")]
    Store(#[source] crate::gate::GateError),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] super::ledger::LedgerError),
    /// The receipt could not be built or signed.
    #[error("signing the receipt")]
    Sign(#[source] crate::gate::GateError),
}

/// A tool call to decide.
#[derive(Debug)]
pub struct Call<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The arguments as received (JSON text; `{}` when absent).
    pub arguments_text: &'a str,
    /// The arguments, parsed.
    pub arguments: &'a serde_json::Value,
    /// The tool as the server lists it now (`None`: not listed).
    pub listed: Option<&'a Listed>,
}

/// A step decided and durable: forward it, then [`Gate::finish`] it.
#[derive(Debug)]
pub struct InFlight {
    pub(super) pending: Pending,
}

impl InFlight {
    /// The step's record.
    pub fn record(&self) -> &StepRecord {
        &self.pending.step
    }
}

/// A refused step: its receipt was issued; the call is not forwarded.
#[derive(Clone, Debug)]
pub struct Refused {
    /// The receipt's id.
    pub receipt_id: Digest,
    /// Deny or escalate.
    pub verdict: Verdict,
    /// Its reasons (an escalation's too: they are not in its verdict).
    pub reasons: Vec<String>,
    /// The refusals' details, for the client.
    pub details: Vec<String>,
}

/// What [`Gate::prepare`] decided.
#[derive(Debug)]
pub enum Prepared {
    /// Durable: forward the call.
    Forward(Box<InFlight>),
    /// Refused, with its receipt.
    Refused(Refused),
}

/// How a forwarded step ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered: `ok` when without error (no JSON-RPC error, a
    /// complete result, `isError` not true); `answer` the answer's digest.
    Answered {
        /// Answered without error.
        ok: bool,
        /// `sha256:` over the RFC 8785 form of the answer.
        answer: Digest,
    },
    /// No answer (the server exited, the proxy was killed): `applied` is
    /// established from the files, or false and "outcome unknown".
    Unanswered(String),
}

/// The issuing side of a session: policy, roots, store, key, ledger.
pub struct Gate {
    /// The policy.
    pub policy: ToolPolicy,
    /// The roots files must lie under.
    pub roots: Vec<Root>,
    /// The server's working directory (relative paths).
    pub cwd: PathBuf,
    /// The gate store.
    pub store: GateStore,
    key: SigningKey,
    /// The gate key's name.
    pub issuer: String,
    pub(super) decider: Box<dyn Decider>,
    pub(super) ledger: Ledger,
    finisher: Mutex<Option<Finisher>>,
    used: AtomicU64,
    /// The session's reads.
    pub session: Mutex<Session>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// What a [`Gate`] is made of.
pub struct GateParts {
    /// The policy.
    pub policy: ToolPolicy,
    /// The roots.
    pub roots: Vec<Root>,
    /// The server's working directory.
    pub cwd: PathBuf,
    /// The store.
    pub store: GateStore,
    /// The gate key.
    pub key: SigningKey,
    /// Its name.
    pub issuer: String,
    /// The decision.
    pub decider: Box<dyn Decider>,
    /// The finisher (store and log).
    pub finisher: Finisher,
}

/// Unix seconds now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

pub(super) fn t(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

/// `change_id`: identity of `{"server", "tool", "def", "arguments"}`.
pub fn change_id(server: &str, tool: &str, def: Option<&Digest>, arguments: &Digest) -> Digest {
    let def = def.map_or(Value::Null, |d| t(d.to_string()));
    identity(&dagcbor::encode(&map([
        ("server", t(server)),
        ("tool", t(tool)),
        ("def", def),
        ("arguments", t(arguments.to_string())),
    ])))
}

impl Gate {
    /// A gate for one session (its ledger opened in the store).
    pub fn new(parts: GateParts) -> Result<Gate, StepError> {
        let ledger = Ledger::open(&parts.store)?;
        let used = parts.store.size().map_err(|e| StepError::Store(e.into()))?;
        Ok(Gate {
            policy: parts.policy,
            roots: parts.roots,
            cwd: parts.cwd,
            store: parts.store,
            key: parts.key,
            issuer: parts.issuer,
            decider: parts.decider,
            ledger,
            finisher: Mutex::new(Some(parts.finisher)),
            used: AtomicU64::new(used),
            session: Mutex::new(Session::default()),
        })
    }

    /// Stop: every issued receipt stored and logged (a step issued after
    /// this stays pending for the next start).
    pub fn close(&self) {
        let f = self.finisher.lock().ok().and_then(|mut f| f.take());
        if let Some(f) = f {
            f.close();
        }
    }

    /// Hand an issued step to the finisher.
    pub(super) fn hand_on(&self, p: Pending) {
        if let Ok(f) = self.finisher.lock()
            && let Some(f) = f.as_ref()
        {
            f.send(p);
        }
    }

    /// The standing of a listed tool (`kind` when pinned as listed).
    pub fn kind_of(&self, tool: &str, listed: Option<&Listed>) -> Option<ToolKind> {
        match table::standing(&self.policy, tool, listed.map(|l| &l.def)) {
            Standing::Pinned(p) => Some(p.kind),
            _ => None,
        }
    }

    /// Decide a step call; forward it only on [`Prepared::Forward`], and
    /// only once `durable` (what it staged) is committed ([`Gate::commit`]).
    pub fn prepare(&self, call: &Call<'_>, durable: &mut Durable) -> Result<Prepared, StepError> {
        let arguments_digest = table::jcs_sha256(call.arguments)?;
        let def = call.listed.map(|l| l.def);
        let standing = table::standing(&self.policy, call.tool, def.as_ref());
        let mut refusals: Vec<(String, String)> = Vec::new();
        if let Some(r) = standing.reason() {
            refusals.push((r.to_string(), format!("{}: {r}", call.tool)));
        }
        let pointers = match standing {
            Standing::Pinned(p) => p.files.clone(),
            _ => Vec::new(),
        };
        let (files, pre) = self.files_of(&pointers, call.arguments, &mut refusals);
        let (id, path) = self.ledger.next();
        let mut record = self.record_of(call, id, def, arguments_digest, &files, &pre);
        // Contracts: the decider's policy_id and refusals' details (decide.rs Decision).
        let decision = self.rule(call, &record, &refusals)?;
        record.policy_id = decision.policy_id.unwrap_or(record.policy_id);
        refusals.extend(decision.details);
        record.evidence = match decision.ruling {
            Ruling::Admit { evidence } => evidence,
            other => return self.refuse(record, other, path, &refusals, durable),
        };
        // A step without files has no inverse: irreversible, and says so.
        let mut carried = Vec::new();
        match self.keep_preimages(&files, &pre, &mut durable.batch)? {
            Ok(c) => {
                record.reversible = !files.is_empty();
                carried = c;
            }
            Err(_) if self.policy.allow_irreversible => {}
            Err(why) => {
                refusals.push((files::FILES_PREIMAGE.into(), why));
                let ruling = Ruling::Deny(vec![files::FILES_PREIMAGE.to_string()]);
                return self.refuse(record, ruling, path, &refusals, durable);
            }
        }
        let pending = Pending {
            path,
            step: record,
            issued: None,
            carried,
        };
        // Small pre-images ride in the decision's own file; larger ones are
        // objects made durable in the same phase (no barrier: one sync
        // fewer on the step's path). A crash between them leaves a decision
        // whose pre-image is missing; nothing is forwarded before the whole
        // commit ends, so recovery knows that call never reached the server
        // ([`Gate::recover`]).
        pending.stage(&mut durable.batch, self.ledger.tmp())?;
        Ok(Prepared::Forward(Box::new(InFlight { pending })))
    }

    /// The step's record as decided (before the ruling).
    fn record_of(
        &self,
        call: &Call<'_>,
        id: String,
        def: Option<Digest>,
        arguments_digest: Digest,
        files: &[StepFile],
        pre: &[files::State],
    ) -> StepRecord {
        StepRecord {
            id,
            decided_at: now(),
            server: self.policy.server.clone(),
            tool: call.tool.to_string(),
            def,
            arguments: call.arguments_text.to_string(),
            arguments_digest,
            change_id: change_id(
                &self.policy.server,
                call.tool,
                def.as_ref(),
                &arguments_digest,
            ),
            policy_id: self.policy.id,
            replay: self.policy.replay,
            files: files
                .iter()
                .zip(pre)
                .map(|(f, s)| FileRecord {
                    pointer: f.pointer.clone(),
                    path: f.rel(),
                    pre: *s,
                })
                .collect(),
            reversible: false,
            evidence: Value::Null,
        }
    }
}

impl Gate {
    /// Resolve the files and read their state now; refusals collected.
    fn files_of(
        &self,
        pointers: &[String],
        arguments: &serde_json::Value,
        refusals: &mut Vec<(String, String)>,
    ) -> (Vec<StepFile>, Vec<files::State>) {
        let files = match files::resolve(pointers, arguments, &self.roots, &self.cwd) {
            Ok(f) => f,
            Err(r) => {
                refusals.push((r.reason.to_string(), r.detail));
                return (Vec::new(), Vec::new());
            }
        };
        let mut states = Vec::with_capacity(files.len());
        for f in &files {
            match files::state_now(f) {
                Ok(s) => states.push(s),
                Err(why) => {
                    refusals.push((
                        files::FILES_NOT_REGULAR.into(),
                        format!("{}: {why}", f.path.display()),
                    ));
                    states.push(None);
                }
            }
        }
        (files, states)
    }

    /// Ask the decider, with the rules' input.
    fn rule(
        &self,
        call: &Call<'_>,
        record: &StepRecord,
        refusals: &[(String, String)],
    ) -> Result<super::decide::Decision, StepError> {
        let reads = self
            .session
            .lock()
            .map(|s| s.to_json())
            .unwrap_or(serde_json::Value::Array(Vec::new()));
        let input = Input {
            issuer: &self.issuer,
            now: record.decided_at,
            server: &self.policy.server,
            tool: call.tool,
            def: record.def.map(|d| d.to_string()),
            annotations: call
                .listed
                .map_or(serde_json::Value::Null, |l| l.annotations.clone()),
            arguments: call.arguments,
            reads,
            files: record
                .files
                .iter()
                .map(|f| (format!("/{}", f.path), f.pre.map(|s| s.digest.to_string())))
                .collect(),
        }
        .to_json();
        let reasons: Vec<String> = refusals.iter().map(|(r, _)| r.clone()).collect();
        let pre: Vec<files::State> = record.files.iter().map(|f| f.pre).collect();
        let facts = Facts {
            input: &input,
            refusals: &super::decide::sorted(&reasons),
            change_id: record.change_id,
            policy_id: record.policy_id,
            read_set: &read_set_of(record, &pre),
        };
        Ok(self.decider.decide_call(&facts)?)
    }

    /// Keep every existing file's pre-image: carried in the step's file
    /// (returned) while they fit [`MAX_CARRIED_PREIMAGE_BYTES`] together,
    /// else staged as an object; `Ok(Err(why))` when one cannot be kept
    /// (over a limit, unreadable, moved), `Err` when the store itself failed.
    fn keep_preimages(
        &self,
        files: &[StepFile],
        pre: &[files::State],
        batch: &mut crate::io::Batch,
    ) -> Result<Result<Vec<Vec<u8>>, String>, StepError> {
        use crate::limits::MAX_GATE_PREIMAGE_BYTES;
        let mut carried: Vec<Vec<u8>> = Vec::new();
        let mut carried_bytes = 0;
        for (f, side) in files.iter().zip(pre) {
            let Some(side) = side else { continue };
            let size = std::fs::symlink_metadata(&f.path).map_or(0, |m| m.len());
            let used = self.used.load(Ordering::Relaxed);
            if let Err(e) =
                crate::gate::apply::store_limits(&[(f.path.display().to_string(), size)], used)
            {
                return Ok(Err(e.to_string()));
            }
            let root = Path::new(INVERSE_BASE);
            let bytes =
                match crate::gate::apply::read_side(root, &f.rel(), *side, MAX_GATE_PREIMAGE_BYTES)
                {
                    Ok(b) => b,
                    Err(e) => return Ok(Err(format!("{}: {e}", f.path.display()))),
                };
            if carried_bytes + bytes.len() <= MAX_CARRIED_PREIMAGE_BYTES {
                carried_bytes += bytes.len();
                carried.push(bytes);
            } else {
                self.store
                    .put_in(batch, &bytes)
                    .map_err(|e| StepError::Store(crate::gate::GateError::Store(e)))?;
            }
            self.used.fetch_add(size, Ordering::Relaxed);
        }
        Ok(Ok(carried))
    }

    /// Sign a refusal (deny or escalate), make it durable, hand it on.
    fn refuse(
        &self,
        record: StepRecord,
        ruling: Ruling,
        path: PathBuf,
        refusals: &[(String, String)],
        durable: &mut Durable,
    ) -> Result<Prepared, StepError> {
        let details: Vec<String> = refusals.iter().map(|(_, d)| d.clone()).collect();
        let mut evidence = evidence_of(&record, None);
        if let Value::Map(m) = &mut evidence {
            let list = refusals
                .iter()
                .map(|(r, d)| map([("reason", t(r.clone())), ("detail", t(d.clone()))]))
                .collect();
            m.insert("refusals".into(), Value::Array(list));
        }
        let states: Vec<files::State> = record.files.iter().map(|f| f.pre).collect();
        let (verdict, reasons) = match ruling {
            Ruling::Deny(reasons) => (
                Verdict::Deny {
                    reasons: reasons.clone(),
                },
                reasons,
            ),
            Ruling::Escalate(reasons) => {
                let ticket = self.ticket(&record, &states, &reasons)?.to_string();
                (Verdict::Escalate { ticket }, reasons)
            }
            Ruling::Admit { .. } => {
                let reasons = vec![files::FILES_PREIMAGE.to_string()];
                let verdict = Verdict::Deny {
                    reasons: reasons.clone(),
                };
                (verdict, reasons)
            }
        };
        let receipt = self.receipt_of(&record, verdict.clone(), None, &states, false);
        let issued = self.issue(&receipt, evidence, None)?;
        let receipt_id = issued.receipt_id;
        let pending = Pending {
            path,
            step: record,
            issued: Some(issued),
            carried: Vec::new(),
        };
        pending.stage(&mut durable.batch, self.ledger.tmp())?;
        durable.hand_on.push(pending);
        Ok(Prepared::Refused(Refused {
            receipt_id,
            verdict,
            reasons,
            details,
        }))
    }

    /// The escalation ticket: identity of the stored record
    /// `{"change_id", "policy_id", "reasons", "read_set"}` (the git gate's,
    /// with the receipt's read set).
    fn ticket(
        &self,
        record: &StepRecord,
        states: &[files::State],
        reasons: &[String],
    ) -> Result<Digest, StepError> {
        let escalation = crate::gate::escalation::Escalation {
            change_id: record.change_id,
            policy_id: record.policy_id,
            reasons: reasons.to_vec(),
            read_set: read_set_of(record, states),
        };
        self.store
            .put_record(&escalation.to_value())
            .map_err(|e| StepError::Store(e.into()))
    }

    /// Sign `receipt`; the issued state (not yet durable).
    pub(super) fn issue(
        &self,
        receipt: &Receipt,
        evidence: Value,
        inverse: Option<Value>,
    ) -> Result<Issued, StepError> {
        let signed = crate::gate::sign(receipt, &self.key).map_err(StepError::Sign)?;
        Ok(Issued {
            envelope: signed.envelope.to_json(),
            receipt_id: signed.valid.id,
            evidence,
            inverse,
        })
    }

    /// The receipt of a step record.
    pub(super) fn receipt_of(
        &self,
        record: &StepRecord,
        verdict: Verdict,
        inverse: Option<Digest>,
        states: &[files::State],
        applied: bool,
    ) -> Receipt {
        receipt_of(&self.issuer, record, verdict, inverse, states, applied)
    }
}
