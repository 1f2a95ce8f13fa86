//! conclude: the end of one git evaluation, shared by `gate check` and
//! `gate apply`: the approvals of an escalation judged, the combination
//! ([`super::decide::combine`]), the evidence record stored, and the
//! verdict (admit with the evidence as proof, deny with its reasons, or
//! escalate with the stored escalation record as ticket).

use super::approval::{self, Candidate, Judged, Standing};
use super::decide::{CheckOutcome, Decided, Tally, combine, rule_reasons};
use super::error::GateError;
use super::escalation::Escalation;
use super::evidence::{ApprovalNote, Evidence};
use super::policy::Policy;
use super::rules::RuleOutcome;
use super::run::Ran;
use super::store::GateStore;
use crate::digest::Digest;
use crate::receipt::{ReadItem, Substrate, Verdict};
use std::path::Path;

/// What one evaluation found, to conclude on.
pub struct Findings<'a> {
    /// The store.
    pub store: &'a GateStore,
    /// The policy.
    pub policy: &'a Policy,
    /// The base commit.
    pub base: &'a str,
    /// The change.
    pub change_id: Digest,
    /// What the rules said (`None`: the policy has none).
    pub rules: Option<RuleOutcome>,
    /// The checks that ran, and the one that failed.
    pub checks: (Vec<Ran>, Option<String>),
    /// The receipt's read set.
    pub read_set: &'a [ReadItem],
    /// Approvals offered on the command line.
    pub offered: &'a [Candidate],
    /// The work tree whose files freshness re-reads.
    pub top: &'a Path,
}

/// The verdict and what it rests on.
#[derive(Debug)]
pub struct Concluded {
    /// The verdict.
    pub verdict: Verdict,
    /// The evidence record.
    pub evidence: Evidence,
    /// Its identity (the admit proof; what the receipt pointer names).
    pub evidence_id: Digest,
    /// Every approval offered, judged (empty unless the rules escalated).
    pub approvals: Vec<Judged>,
    /// The escalation, when the rules escalated.
    pub escalation: Option<Escalation>,
}

impl Concluded {
    /// A verdict with its evidence, without rules or approvals (an undo).
    pub fn plain(verdict: Verdict, evidence: Evidence, evidence_id: Digest) -> Concluded {
        Concluded {
            verdict,
            evidence,
            evidence_id,
            approvals: Vec::new(),
            escalation: None,
        }
    }
}

/// Judge, combine, store the evidence, and give the verdict.
pub fn conclude(mut f: Findings<'_>) -> Result<Concluded, GateError> {
    let rules = f.rules.clone().unwrap_or_default();
    let (ran, failed) = std::mem::take(&mut f.checks);
    let checks = match (&failed, rules.deny.is_empty()) {
        (_, false) => CheckOutcome::Skipped,
        (Some(name), true) => CheckOutcome::Failed(vec![name.clone()]),
        (None, true) => CheckOutcome::Passed,
    };
    let escalation =
        (checks == CheckOutcome::Passed && !rules.escalate.is_empty()).then(|| Escalation {
            change_id: f.change_id,
            policy_id: f.policy.id,
            reasons: rule_reasons(&rules.escalate),
            read_set: f.read_set.to_vec(),
        });
    let (approvals, tally) = match &escalation {
        Some(e) => judge(&f, e.ticket())?,
        None => (Vec::new(), Tally::default()),
    };
    let decided = combine(&rules, &checks, &tally);
    let evidence = Evidence {
        base: f.base.to_string(),
        change_id: f.change_id,
        policy_id: f.policy.id,
        policy: f.policy.name.clone(),
        checks: ran,
        rules: f.rules.take(),
        approvals: notes(&approvals),
    };
    let evidence_id = f.store.put_record(&evidence.to_value())?;
    let verdict = match (decided, &escalation) {
        (Decided::Admit, _) => Verdict::Admit { proof: evidence_id },
        (Decided::Deny(reasons), _) => Verdict::Deny { reasons },
        (Decided::Escalate(_), Some(e)) => Verdict::Escalate {
            ticket: f.store.put_record(&e.to_value())?.to_string(),
        },
        (Decided::Escalate(reasons), None) => Verdict::Deny { reasons },
    };
    Ok(Concluded {
        verdict,
        evidence,
        evidence_id,
        approvals,
        escalation,
    })
}

/// The approvals offered and those the store keeps under `ticket`, judged.
fn judge(f: &Findings<'_>, ticket: Digest) -> Result<(Vec<Judged>, Tally), GateError> {
    let candidates = approval::with_stored(f.offered, f.store, &ticket)?;
    let top = f.top.to_path_buf();
    let fresh =
        move |items: &[ReadItem]| match crate::fresh::check_read_set(&top, Substrate::Git, items) {
            crate::fresh::ItemState::Fresh => Ok(()),
            crate::fresh::ItemState::Stale(why) | crate::fresh::ItemState::Unknown(why) => Err(why),
        };
    let ctx = approval::Context {
        approvers: &f.policy.approvers,
        required: f.policy.approvals_required,
        substrate: Substrate::Git,
        change_id: f.change_id,
        ticket,
        fresh: &fresh,
    };
    Ok(approval::judge(&candidates, &ctx))
}

/// The approvals that decided, sorted by receipt id (the tool proxy's
/// evidence lists them too).
pub fn notes(judged: &[Judged]) -> Vec<ApprovalNote> {
    let mut notes: Vec<ApprovalNote> = judged
        .iter()
        .filter_map(|j| {
            let refused = match j.standing {
                Standing::Counts => false,
                Standing::Refuses => true,
                Standing::Void(_) => return None,
            };
            Some(ApprovalNote {
                receipt: j.receipt_id?,
                approver: j.approver.clone()?,
                refused,
            })
        })
        .collect();
    notes.sort_by_key(|a| a.receipt.to_string());
    notes
}
