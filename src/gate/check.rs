//! check: the engine of `rcpt gate check` (spec/gate.md "Clean mode").
//!
//! Identify the change, run the policy's checks in a clean copy, keep
//! their evidence in the store, read the read set back (it must still be
//! what was tested), and decide. [`run_checks_in`] and [`fits_resources`]
//! are shared with `gate apply`.

use super::approval::{Candidate, Judged};
use super::change::{self, Change, ChangeError};
use super::clean::CleanTree;
use super::conclude::{Findings, conclude};
use super::error::GateError;
use super::escalation::Escalation;
use super::evidence::Evidence;
use super::git::WorkTree;
use super::policy::Policy;
use super::rules::{Evaluator, RuleOutcome, Rules, RulesError, Started, input};
use super::run::{self, Ran};
use super::store::{self, GateStore};
use crate::digest::{Algorithm, Digest};
use crate::fresh::HEAD;
use crate::receipt::canonical::{Value, dagcbor, identity};
use crate::receipt::{ReadItem, Receipt, Replay, Substrate, Verdict};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// What to evaluate.
#[derive(Debug)]
pub struct Request<'a> {
    /// A directory inside the work tree.
    pub dir: &'a Path,
    /// The base revision (`HEAD` by default).
    pub base: &'a str,
    /// The policy.
    pub policy: &'a Policy,
    /// The store directory; default `<git common dir>/rcpt/store`.
    pub store: Option<&'a Path>,
    /// Set by the caller's SIGINT/SIGTERM handler.
    pub interrupted: &'a AtomicBool,
    /// The issuer the receipt will name (the rules' `input.issuer`).
    pub issuer: &'a str,
    /// `issued_at` of the receipt (the rules' `input.now`).
    pub now: i64,
    /// Runs the policy's rules.
    pub evaluator: &'a Evaluator,
    /// Approvals offered (`--approval`); those the store keeps are added.
    pub approvals: &'a [Candidate],
}

/// A verdict and everything the receipt says about it.
#[derive(Debug)]
pub struct Decision {
    /// The work tree.
    pub tree: WorkTree,
    /// The change evaluated.
    pub change: Change,
    /// Its identity.
    pub change_id: Digest,
    /// The evidence.
    pub evidence: Evidence,
    /// The evidence record's identity (the admit proof).
    pub evidence_id: Digest,
    /// Admit, deny or escalate.
    pub verdict: Verdict,
    /// Every approval offered, judged (when the rules escalated).
    pub approvals: Vec<Judged>,
    /// The escalation, when the rules escalated.
    pub escalation: Option<Escalation>,
    /// The read set, read after the checks.
    pub read_set: Vec<ReadItem>,
    /// Identity of `{"base", "read_set"}`.
    pub precondition: Digest,
    /// The store holding the evidence.
    pub store: GateStore,
}

/// The work tree at `dir` and its change against `base` (`rcpt gate id`).
pub fn identify(dir: &Path, base: &str) -> Result<(WorkTree, Change), ChangeError> {
    let tree = change::work_tree(dir)?;
    let change = change::read_change(&tree, base)?;
    Ok((tree, change))
}

/// Identify the change, run the policy's checks in a clean copy, keep
/// the evidence, decide.
pub fn evaluate(req: &Request<'_>) -> Result<Decision, GateError> {
    // The evaluator compiles the rules while the change is read.
    let started = start_rules(req.policy, req.evaluator);
    let (tree, change) = identify(req.dir, req.base)?;
    let head = tree.commit(HEAD).map_err(ChangeError::from)?;
    fits(&change, req.policy)?;
    let store = GateStore::open(
        &req.store
            .map_or_else(|| store::default_dir(&tree), Path::to_path_buf),
    )?;
    // The rules are evaluated while the clean copy is made (it is only
    // used once they have not denied: a rule denial means no check runs).
    let (rules, clean) = std::thread::scope(|scope| {
        let rules = scope.spawn(|| {
            rules_of(started, || {
                let files = input::files_of(&change, |p| file_size(&tree.top, p));
                input::git_input(req.issuer, req.now, &change.base, false, &files)
            })
        });
        let clean = CleanTree::create(&tree, &change);
        (rules.join(), clean)
    });
    let rules = rules.map_err(|_| GateError::RulesPanicked)??;
    let checks = match (&rules, clean) {
        (Some(r), _) if !r.deny.is_empty() => (Vec::new(), None),
        (_, clean) => run_checks_in(&clean?, req.policy, &store, req.interrupted)?,
    };
    let change_id = change.id();
    let read_set = read_set_tested(&tree, &change, head.as_deref(), &req.policy.reads)?;
    let precondition = precondition_of_read_set(&change.base, &read_set);
    let concluded = conclude(Findings {
        store: &store,
        policy: req.policy,
        base: &change.base,
        change_id,
        rules,
        checks,
        read_set: &read_set,
        offered: req.approvals,
        top: &tree.top,
    })?;
    Ok(Decision {
        tree,
        change,
        change_id,
        evidence: concluded.evidence,
        evidence_id: concluded.evidence_id,
        verdict: concluded.verdict,
        approvals: concluded.approvals,
        escalation: concluded.escalation,
        read_set,
        precondition,
        store,
    })
}

/// The policy's rules' evaluator started with its module (only when the
/// policy has rules), to be given its input by [`rules_of`].
pub fn start_rules(policy: &Policy, evaluator: &Evaluator) -> Result<Option<Started>, RulesError> {
    policy
        .rules
        .as_ref()
        .map(|module| Rules::new(module.clone(), evaluator.clone()).start())
        .transpose()
}

/// What the started rules say about the change whose `input` is made by
/// `input` (only when the policy has rules).
pub fn rules_of(
    started: Result<Option<Started>, RulesError>,
    input: impl FnOnce() -> Value,
) -> Result<Option<RuleOutcome>, GateError> {
    match started? {
        Some(started) => Ok(Some(started.evaluate(&input())?)),
        None => Ok(None),
    }
}

/// Bytes of the file at `path` under `top` now.
pub fn file_size(top: &Path, path: &str) -> Option<u64> {
    std::fs::symlink_metadata(top.join(path))
        .ok()
        .map(|m| m.len())
}

/// Refuse, before any check runs, a change whose receipt would be over
/// the payload limit: the receipt with this read set (digests of the same
/// length) and the longest verdict this policy can give.
fn fits(change: &Change, policy: &Policy) -> Result<(), GateError> {
    let resources: Vec<&str> = change.existing().map(|f| f.path.as_str()).collect();
    fits_resources(change.files.len(), resources, policy)
}

/// [`fits`] for a receipt whose read set holds `resources` (and `HEAD`
/// and the policy's reads), with an inverse.
pub fn fits_resources<'a>(
    files: usize,
    mut resources: Vec<&'a str>,
    policy: &'a Policy,
) -> Result<(), GateError> {
    let placeholder = Digest::blake3(b"");
    resources.push(HEAD);
    resources.extend(policy.reads.iter().map(String::as_str));
    resources.sort_unstable();
    resources.dedup();
    let longest = policy
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    let receipt = Receipt {
        issuer: "x".repeat(crate::limits::MAX_TEXT_BYTES.min(256)),
        issued_at: crate::receipt::canonical::MAX_SAFE_INTEGER,
        substrate: Substrate::Git,
        change_id: placeholder,
        inverse_delta_id: Some(placeholder),
        reversibility: Some(true),
        read_set: resources
            .iter()
            .map(|r| ReadItem {
                resource: (*r).to_string(),
                digest: placeholder,
            })
            .collect(),
        precondition: Some(placeholder),
        policy_id: placeholder,
        verdict: Verdict::Deny {
            reasons: vec![format!("check.{}.failed", "x".repeat(longest.max(64)))],
        },
        applied: false,
        replay: Replay::DeterministicReplay,
    };
    let bytes = dagcbor::encode(&receipt.to_value()).len();
    if bytes > crate::limits::MAX_PAYLOAD_BYTES {
        return Err(GateError::TooLarge { files, bytes });
    }
    Ok(())
}

/// The checks of `policy` in order in `clean`, stopping at the first
/// failure (its name).
pub fn run_checks_in(
    clean: &CleanTree,
    policy: &Policy,
    store: &GateStore,
    interrupted: &AtomicBool,
) -> Result<(Vec<Ran>, Option<String>), GateError> {
    let scratch = clean.scratch().map_err(GateError::Scratch)?;
    let mut ran = Vec::new();
    for (i, check) in policy.checks.iter().enumerate() {
        if interrupted.load(Ordering::SeqCst) {
            return Err(GateError::Interrupted);
        }
        let r = run::run_check(check, clean.path(), &scratch, i, store, interrupted)?;
        let passed = r.exit == 0;
        ran.push(r);
        if !passed {
            return Ok((ran, Some(check.name.clone())));
        }
    }
    Ok((ran, None))
}

/// The read set, read now: every file of the change that exists, `HEAD`,
/// the policy's reads. Each changed file must still have the digest the
/// change recorded, each deleted one must still be absent, and `HEAD` must
/// be where it was: else the receipt would not describe what was tested.
fn read_set_tested(
    tree: &WorkTree,
    change: &Change,
    head: Option<&str>,
    reads: &[String],
) -> Result<Vec<ReadItem>, GateError> {
    let mut resources: Vec<String> = change.existing().map(|f| f.path.clone()).collect();
    resources.push(HEAD.to_string());
    resources.extend(reads.iter().cloned());
    resources.sort();
    resources.dedup();
    let items = crate::fresh::read_set(&tree.top, Substrate::Git, Algorithm::Blake3, &resources)?;
    let found: BTreeMap<&str, &Digest> = items
        .iter()
        .map(|i| (i.resource.as_str(), &i.digest))
        .collect();
    for f in &change.files {
        let now = found.get(f.path.as_str()).copied();
        let gone = f.digest.is_none() && std::fs::symlink_metadata(tree.top.join(&f.path)).is_ok();
        if (f.digest.is_some() && now != f.digest.as_ref()) || gone {
            return Err(GateError::Moved(f.path.clone()));
        }
    }
    let head_now = found.get(HEAD).copied();
    if head.map(|h| Digest::blake3(h.as_bytes())).as_ref() != head_now {
        return Err(GateError::Moved(HEAD.to_string()));
    }
    Ok(items)
}

/// `precondition`: identity of `{"base": oid, "read_set": [...]}`.
pub fn precondition_of_read_set(base: &str, read_set: &[ReadItem]) -> Digest {
    let items = read_set
        .iter()
        .map(|i| {
            Value::Map(BTreeMap::from([
                ("resource".to_string(), Value::Text(i.resource.clone())),
                ("digest".to_string(), Value::Text(i.digest.to_string())),
            ]))
        })
        .collect();
    let value = Value::Map(BTreeMap::from([
        ("base".to_string(), Value::Text(base.to_string())),
        ("read_set".to_string(), Value::Array(items)),
    ]));
    identity(&dagcbor::encode(&value))
}

impl Decision {
    /// The receipt of this decision (`applied` false, no inverse).
    pub fn receipt(&self, issuer: &str, issued_at: i64) -> Receipt {
        Receipt {
            issuer: issuer.to_string(),
            issued_at,
            substrate: Substrate::Git,
            change_id: self.change_id,
            inverse_delta_id: None,
            reversibility: None,
            read_set: self.read_set.clone(),
            precondition: Some(self.precondition),
            policy_id: self.evidence.policy_id,
            verdict: self.verdict.clone(),
            applied: false,
            replay: Replay::DeterministicReplay,
        }
    }
}
