//! The checks of one bundle, in order, each independent of the others'
//! failures wherever its inputs allow.

use super::consistency::ConsistencyInput;
use super::log_checks::{checkpoint_match, inclusion, since_body};
use super::payload_checks::payload_chain;
use super::{
    Check, CheckResult, CheckVerdict, Failure, NotEvaluated, PayloadSummary, Reason, Report,
};
use crate::bundle::{BundleError, RawBundle};
use crate::constants;
use crate::fresh::{self, ItemState};
use crate::io::{self, InputError};
use crate::limits::MAX_BUNDLE_BYTES;
use crate::receipt::Receipt;
use crate::receipt::dsse::{self, Envelope};
use crate::receipt::require::{self, Met, Requirements};
use crate::tlog::note::Checkpoint;
use crate::tlog::policy::TlogPolicy;
use crate::trust::Trust;
use crate::witness::error_chain;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Check names, in report order (spec/verify.md).
mod checkpoint;
mod envelope;

pub(crate) mod name {
    pub const BUNDLE: &str = "bundle";
    pub const ENVELOPE: &str = "envelope";
    pub const PAYLOAD_TYPE: &str = "payload_type";
    pub const SIGNATURE: &str = "signature";
    pub const PAYLOAD_CANONICAL: &str = "payload.canonical";
    pub const PAYLOAD_SCHEMA: &str = "payload.schema";
    pub const RECEIPT_ID: &str = "receipt_id";
    pub const CHECKPOINT_SIGNATURE: &str = "checkpoint.signature";
    /// Only with a tlog-policy (`--policy`): log listed, witness quorum met.
    pub const CHECKPOINT_WITNESSES: &str = "checkpoint.witnesses";
    pub const CHECKPOINT_MATCH: &str = "checkpoint.match";
    pub const INCLUSION: &str = "inclusion";
    pub const CONSISTENCY: &str = "consistency";
    /// Only with `--mirror DIR`, for bundles of the mirror's origin.
    pub const MIRROR: &str = "consistency.mirror";
}

/// Most distinct checkpoints remembered (verified once, reused by every
/// bundle that carries the same text); the cache is cleared when full.
const CHECKPOINT_CACHE_ENTRIES: usize = 4096;

/// Capacity of a report's check list: room for the 17 checks a bundle can
/// have (spec/verify.md) and the gate's, without growing.
const CHECKS_PER_BUNDLE: usize = 24;

/// Why a verifier could not be set up (a bad invocation, exit status 2).
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum VerifierError {
    /// No issuer key at all: no signature could ever be evaluated.
    #[error(
        "no trusted issuer key: pass --issuer-key KEY, --issuer-key-file FILE or a --trust \
         file with \"issuers\""
    )]
    NoIssuerKeys,
    /// No log key at all: no checkpoint could ever be evaluated.
    #[error(
        "no trusted log key: pass --log-key VKEY, --log-key-file FILE or a --trust file \
         with \"logs\""
    )]
    NoLogKeys,
    /// A consistency proof file is neither the text form (base64 hashes,
    /// one a line) nor one `{"from": M, "to": N, "proof": [...]}` object
    /// nor JSON Lines of them.
    #[error("consistency proof file {file}{line}: {detail}", line = line.map(|l| format!(", line {l}")).unwrap_or_default())]
    ProofFile {
        /// The file's name as given (or its 1-based position among them).
        file: String,
        /// 1-based line, for JSON Lines.
        line: Option<usize>,
        /// What is wrong.
        detail: String,
    },
    /// Two proofs to one tree size: which one counts would be ambiguous.
    #[error("two consistency proofs to tree size {to}: give one proof per tree size")]
    DuplicateProof {
        /// The tree size.
        to: u64,
    },
}

/// A checkpoint as verified once: the signature result, the witness
/// check under the policy (when there is one) and the parsed body.
#[derive(Debug)]
struct VerifiedCheckpoint {
    signature: CheckResult,
    witnesses: Option<CheckResult>,
    body: Result<Checkpoint, Failure>,
}

/// Verifies bundles against a fixed trust set. Shareable across threads.
#[derive(Debug)]
pub struct Verifier {
    trust: Trust,
    issuer_keys: dsse::TrustedKeys,
    /// (keyid, bound name) of each trusted issuer listing, computed once
    /// for the issuer binding (not per bundle).
    issuer_names: Vec<(String, Option<String>)>,
    /// `--since`: the input, and the old checkpoint's body parsed once.
    since: Option<(ConsistencyInput, Result<Checkpoint, Failure>)>,
    cache: Mutex<HashMap<[u8; 32], Arc<VerifiedCheckpoint>>>,
    gate: GateConfig,
    /// `--policy`: the tlog-policy every checkpoint must satisfy.
    policy: Option<Arc<TlogPolicy>>,
    /// `--mirror`: the mirror each bundle of its origin is judged against.
    mirror: Option<Arc<super::mirror::Mirror>>,
}

/// What the gating checks need (spec/gate.md): the requirements, the
/// freshness root, and the clock.
#[derive(Clone, Debug, Default)]
pub struct Gate {
    /// Requirements stated on the command line; each replaces the trust
    /// file's `"require"` value for its key.
    pub requirements: Requirements,
    /// `--fresh ROOT`.
    pub fresh: Option<std::path::PathBuf>,
    /// `--now`: Unix seconds; the system clock when `None`.
    pub now: Option<i64>,
}

/// The gate as the checks use it: requirements merged, clock read once.
#[derive(Clone, Debug, Default)]
struct GateConfig {
    requirements: Requirements,
    fresh: Option<std::path::PathBuf>,
    now: i64,
    asked: Vec<Reason>,
}

impl GateConfig {
    fn new(file: &Requirements, gate: Gate) -> GateConfig {
        let requirements = file.clone().overridden_by(gate.requirements);
        let asked = require::asked(&requirements, gate.fresh.is_some());
        let now = gate.now.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        });
        GateConfig {
            requirements,
            fresh: gate.fresh,
            now,
            asked,
        }
    }
}

/// What became of the payload, for the checks that read what it says.
pub(super) enum PayloadState {
    /// A v1 receipt (invariants may still be broken).
    Decoded(Box<Receipt>),
    /// A receipt version this rcpt does not read.
    Unsupported,
    /// Not decodable, or not reached: the check that stopped it.
    Unread(&'static str),
}

impl Verifier {
    /// A verifier for `trust`; refuses a trust set that could evaluate nothing.
    pub fn new(trust: Trust, since: Option<ConsistencyInput>) -> Result<Verifier, VerifierError> {
        if trust.issuers.is_empty() {
            return Err(VerifierError::NoIssuerKeys);
        }
        if trust.logs.is_empty() {
            return Err(VerifierError::NoLogKeys);
        }
        let issuer_keys = dsse::TrustedKeys::new(&trust.issuer_keys());
        let issuer_names = trust
            .issuers
            .iter()
            .map(|i| (crate::keys::keyid(&i.key), i.name.clone()))
            .collect();
        let gate = GateConfig::new(&trust.require, Gate::default());
        Ok(Verifier {
            trust,
            issuer_keys,
            issuer_names,
            since: since.map(|s| {
                let body = since_body(&s.old_checkpoint);
                (s, body)
            }),
            cache: Mutex::new(HashMap::new()),
            gate,
            policy: None,
            mirror: None,
        })
    }

    /// The same verifier, demanding that every checkpoint satisfy `policy`
    /// (C2SP tlog-policy; spec/witness.md "Verifying with a policy").
    ///
    /// The policy's `log` lines are added to the trusted log keys, so
    /// `checkpoint.signature` accepts them (with any `--log-key` or trust
    /// file log); the new check `checkpoint.witnesses` then demands a
    /// signature by a log the *policy* lists for the origin and the
    /// policy's quorum of valid witness cosignatures.
    pub fn with_policy(mut self, policy: TlogPolicy) -> Verifier {
        for log in &policy.logs {
            self.trust.add_log(log.verifier.clone());
        }
        self.policy = Some(Arc::new(policy));
        if let Ok(mut cache) = self.cache.lock() {
            cache.clear();
        }
        self
    }

    /// The same verifier, judging each bundle of the mirror's origin
    /// against it (check `consistency.mirror`).
    pub fn with_mirror(mut self, mirror: super::mirror::Mirror) -> Verifier {
        self.mirror = Some(Arc::new(mirror));
        self
    }

    /// The same verifier, gating as `gate` says (requirements on top of
    /// the trust file's `"require"`, freshness, clock).
    pub fn with_gate(mut self, gate: Gate) -> Verifier {
        self.gate = GateConfig::new(&self.trust.require, gate);
        self
    }

    /// Read one bundle file with the capped reader ([`crate::io::read_path`],
    /// at most [`MAX_BUNDLE_BYTES`], a regular file only) and verify it.
    pub fn verify_file(&self, path: &Path) -> Report {
        self.verify_read(io::read_path(path, MAX_BUNDLE_BYTES))
    }

    /// [`Verifier::verify_file`] of a path already found to be a regular
    /// file ([`io::read_regular_path`]: no second `stat` before the open).
    pub fn verify_regular_file(&self, path: &io::RegularPath) -> Report {
        self.verify_read(io::read_regular_path(path, MAX_BUNDLE_BYTES))
    }

    fn verify_read(&self, read: Result<Vec<u8>, InputError>) -> Report {
        match read {
            Ok(bytes) => self.verify_bytes(&bytes),
            Err(e) => self.report_input_error(&e),
        }
    }

    /// The report of a bundle whose bytes could not be read: over the size
    /// limit is `bundle.too_large` (failed), anything else
    /// `input.unreadable` (not evaluated).
    pub fn report_input_error(&self, e: &InputError) -> Report {
        match e {
            InputError::TooLarge { .. } => {
                bundle_only(fail(Reason::BundleTooLarge, io::error_chain(e)))
            }
            _ => unreadable(&io::error_chain(e)),
        }
    }

    /// Verify one bundle's bytes: every check, in order. A C2SP tlog-proof
    /// (spec/witness.md) gets the same checks as the bundle it states.
    pub fn verify_bytes(&self, bytes: &[u8]) -> Report {
        if bytes.starts_with(b"c2sp.org/tlog-proof@") {
            return self.verify_tlog_proof(bytes);
        }
        let raw = match RawBundle::parse(bytes) {
            Ok(raw) => raw,
            Err(e) => return unparsed(&e),
        };
        // Room for every check of a bundle (bundle .. consistency).
        let mut checks = Vec::with_capacity(CHECKS_PER_BUNDLE);
        checks.push(pass(name::BUNDLE));
        let envelope = Envelope::from_json(raw.envelope.get().as_bytes());
        checks.push(Check {
            name: name::ENVELOPE,
            result: match &envelope {
                Ok(_) => Ok(CheckVerdict::Pass),
                Err(e) => fail(e.reason_code(), format!("envelope: {e}")),
            },
        });
        let (receipt_id, payload) = match &envelope {
            Ok(env) => self.envelope_checks(env, &raw.receipt_id, &mut checks),
            Err(_) => {
                skip(&mut checks, name::PAYLOAD_TYPE, name::ENVELOPE);
                skip_all(&mut checks, &payload_chain(), name::ENVELOPE);
                (None, PayloadState::Unread(name::ENVELOPE))
            }
        };
        self.log_checks(&raw, envelope.as_ref().ok(), &mut checks);
        self.gate_checks(&payload, &mut checks);
        let summary = match &payload {
            PayloadState::Decoded(r) => Some(PayloadSummary::of(r)),
            _ => None,
        };
        Report {
            receipt_id,
            checks,
            summary,
        }
    }

    /// The requirement and freshness checks asked for, after every
    /// authenticity check (spec/gate.md).
    fn gate_checks(&self, payload: &PayloadState, checks: &mut Vec<Check>) {
        if self.gate.asked.is_empty() {
            return;
        }
        let receipt = match payload {
            PayloadState::Decoded(r) => r,
            PayloadState::Unsupported => {
                for reason in &self.gate.asked {
                    checks.push(not_evaluated(
                        reason.as_str(),
                        Reason::PayloadVersionUnsupported,
                        "the receipt's version is not one this rcpt reads: what it says \
                         cannot be checked"
                            .to_string(),
                    ));
                }
                return;
            }
            PayloadState::Unread(cause) => {
                for reason in &self.gate.asked {
                    skip(checks, reason.as_str(), cause);
                }
                return;
            }
        };
        let now = self.gate.now;
        for rc in require::evaluate(receipt, &self.gate.requirements, now) {
            let result = match rc.met {
                Met::Yes => Ok(CheckVerdict::Pass),
                Met::No(detail) => fail(rc.reason, detail),
            };
            checks.push(Check {
                name: rc.reason.as_str(),
                result,
            });
        }
        if let Some(root) = &self.gate.fresh {
            let result = match fresh::check_read_set(root, receipt.substrate, &receipt.read_set) {
                ItemState::Fresh => Ok(CheckVerdict::Pass),
                ItemState::Stale(why) => {
                    fail(Reason::PolicyFresh, format!("stale read set: {why}"))
                }
                ItemState::Unknown(why) => Err(NotEvaluated {
                    reason: Reason::PolicyFreshUnsupported,
                    detail: format!("read set not re-read: {why}"),
                }),
            };
            checks.push(Check {
                name: Reason::PolicyFresh.as_str(),
                result,
            });
        }
    }

    /// A tlog-proof: another version is not evaluated, a malformed one
    /// fails as a malformed bundle, else its bundle is verified.
    fn verify_tlog_proof(&self, bytes: &[u8]) -> Report {
        use crate::tlog::proof::TlogProof;
        let first_line = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
        let result = if first_line != constants::TLOG_PROOF_HEADER.as_bytes() {
            Err(NotEvaluated {
                reason: Reason::BundleUnsupported,
                detail: format!(
                    "{:?} is not {} (the version this rcpt reads)",
                    String::from_utf8_lossy(first_line),
                    constants::TLOG_PROOF_HEADER
                ),
            })
        } else {
            match TlogProof::parse(bytes)
                .map_err(crate::bundle::ProofBundleError::from)
                .and_then(|p| p.to_bundle())
            {
                Ok(bundle) => return self.verify_bytes(bundle.to_json().as_bytes()),
                Err(e) => fail(
                    Reason::BundleMalformed,
                    format!("tlog-proof: {}", error_chain(&e)),
                ),
            }
        };
        bundle_only(result)
    }

    /// Checkpoint signature and match, inclusion, and consistency.
    fn log_checks(&self, raw: &RawBundle, env: Option<&Envelope>, checks: &mut Vec<Check>) {
        let cp = self.checkpoint(&raw.log.origin, &raw.log.checkpoint);
        checks.push(Check {
            name: name::CHECKPOINT_SIGNATURE,
            result: cp.signature.clone(),
        });
        if let Some(witnesses) = &cp.witnesses {
            checks.push(Check {
                name: name::CHECKPOINT_WITNESSES,
                result: witnesses.clone(),
            });
        }
        let body = match &cp.body {
            Ok(body) => body,
            Err(f) => {
                checks.push(Check {
                    name: name::CHECKPOINT_MATCH,
                    result: Ok(CheckVerdict::Fail(f.clone())),
                });
                skip(checks, name::INCLUSION, name::CHECKPOINT_MATCH);
                if self.since.is_some() {
                    skip(checks, name::CONSISTENCY, name::CHECKPOINT_MATCH);
                }
                if self.mirror_for(&raw.log.origin).is_some() {
                    skip(checks, name::MIRROR, name::CHECKPOINT_MATCH);
                }
                return;
            }
        };
        checks.push(Check {
            name: name::CHECKPOINT_MATCH,
            result: checkpoint_match(raw, body),
        });
        checks.push(Check {
            name: name::INCLUSION,
            result: inclusion(raw, env, body),
        });
        if let Some((since, old_body)) = &self.since {
            let result = self.consistency(since, old_body, raw.log.tree_size, body);
            checks.push(Check {
                name: name::CONSISTENCY,
                result,
            });
        }
        if let Some(m) = self.mirror_for(&raw.log.origin) {
            checks.push(Check {
                name: name::MIRROR,
                result: m.check(raw.log.index, body.size, &body.root_hash, env),
            });
        }
    }

    /// The mirror, when it is of `origin`'s log.
    fn mirror_for(&self, origin: &str) -> Option<&super::mirror::Mirror> {
        self.mirror.as_deref().filter(|m| m.origin() == origin)
    }
}

/// `Some(result to return)` unless `result` passed.
pub(super) fn not_passing(result: &CheckResult, what: &str) -> Option<CheckResult> {
    match result {
        Ok(CheckVerdict::Pass) => None,
        Ok(CheckVerdict::Fail(f)) => Some(Ok(CheckVerdict::Fail(Failure {
            reason: f.reason,
            detail: format!("{what}: {}", f.detail),
        }))),
        Err(e) => Some(Err(NotEvaluated {
            reason: e.reason,
            detail: format!("{what}: {}", e.detail),
        })),
    }
}

/// The keyids of an envelope's signatures, for messages.
pub(super) fn keyid_list(env: &Envelope) -> String {
    let ids: Vec<&str> = env
        .signatures
        .iter()
        .map(|s| {
            if s.keyid.is_empty() {
                "(none)"
            } else {
                s.keyid.as_str()
            }
        })
        .collect();
    if ids.is_empty() {
        "no signatures".to_string()
    } else {
        ids.join(", ")
    }
}

/// A passed check.
pub(super) fn pass(name: &'static str) -> Check {
    Check {
        name,
        result: Ok(CheckVerdict::Pass),
    }
}

/// A failed check result.
pub(super) fn fail(reason: Reason, detail: String) -> CheckResult {
    Ok(CheckVerdict::Fail(Failure { reason, detail }))
}

/// A check that could not run.
pub(super) fn not_evaluated(name: &'static str, reason: Reason, detail: String) -> Check {
    Check {
        name,
        result: Err(NotEvaluated { reason, detail }),
    }
}

/// Not run because `cause` did not pass.
pub(super) fn skipped(cause: &str) -> NotEvaluated {
    NotEvaluated {
        reason: Reason::CheckSkipped,
        detail: format!("not run: needs `{cause}`, which did not pass"),
    }
}

/// Push `name` as skipped because of `cause`.
pub(super) fn skip(checks: &mut Vec<Check>, name: &'static str, cause: &str) {
    checks.push(Check {
        name,
        result: Err(skipped(cause)),
    });
}

/// Push each of `names` as skipped because of `cause`.
pub(super) fn skip_all(checks: &mut Vec<Check>, names: &[&'static str], cause: &str) {
    for name in names {
        skip(checks, name, cause);
    }
}

/// The report of a bundle that could not be read at all.
fn unreadable(detail: &str) -> Report {
    bundle_only(Err(NotEvaluated {
        reason: Reason::InputUnreadable,
        detail: detail.to_string(),
    }))
}

/// The report of a bundle that got no further than its one `bundle` check.
fn bundle_only(result: CheckResult) -> Report {
    Report {
        receipt_id: None,
        summary: None,
        checks: vec![Check {
            name: name::BUNDLE,
            result,
        }],
    }
}

/// The report of a bundle whose JSON was refused.
fn unparsed(e: &BundleError) -> Report {
    let result = match e {
        BundleError::UnsupportedMediaType(_) => Err(NotEvaluated {
            reason: Reason::BundleUnsupported,
            detail: e.to_string(),
        }),
        BundleError::TooLarge(_) => fail(Reason::BundleTooLarge, e.to_string()),
        _ => fail(Reason::BundleMalformed, e.to_string()),
    };
    bundle_only(result)
}
