//! ruled: the decision of a tool-proxy policy with rules
//! (spec/gate-mcp.md "Rules and approvals for tool calls").
//!
//! [`RulesDecider`] evaluates the policy's Rego module with the step's
//! `input` and combines as the git gate does, through the gate's own
//! pieces: the combination (`crate::gate::decide::combine`, no checks for
//! tool calls), the escalation record (`crate::gate::escalation`) and the
//! judging of approvals (`crate::gate::approval::judge`, the approvals the
//! store keeps under the ticket). The table's and the files' refusals deny
//! first, and then the rules are not evaluated (as the git gate's checks
//! do not run after a rule denial). A module that cannot be evaluated is
//! no verdict ([`DecideError`]), never a deny.

use super::decide::{DecideError, Decider, Facts, Ruling, sorted};
use super::policy::ToolPolicy;
use crate::gate::approval::{self, Judged};
use crate::gate::conclude::notes;
use crate::gate::decide::{CheckOutcome, Decided, Tally, combine, rule_reasons};
use crate::gate::escalation::Escalation;
use crate::gate::evidence::approvals_value;
use crate::gate::rules::{Evaluator, RuleOutcome, Rules};
use crate::gate::store::GateStore;
use crate::keys::NoteVerifier;
use crate::receipt::canonical::Value;
use crate::receipt::{ReadItem, Substrate};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The decision of a policy naming `rules`.
#[derive(Debug)]
pub struct RulesDecider {
    rules: Rules,
    approvers: Vec<NoteVerifier>,
    required: usize,
    store: GateStore,
}

impl RulesDecider {
    /// The decider of `policy` (`None` when it names no rules): its module
    /// run by `evaluator`, approvals looked up in `store`.
    pub fn new(
        policy: &ToolPolicy,
        evaluator: Evaluator,
        store: GateStore,
    ) -> Option<RulesDecider> {
        let module = policy.rules.clone()?;
        Some(RulesDecider {
            rules: Rules::new(module, evaluator),
            approvers: policy.approvers.clone(),
            required: policy.approvals_required,
            store,
        })
    }

    /// The approvals the store keeps under the escalation's ticket, judged.
    fn judge(&self, e: &Escalation) -> Result<(Vec<Judged>, Tally), DecideError> {
        let ticket = e.ticket();
        let candidates = approval::with_stored(&[], &self.store, &ticket)
            .map_err(|err| DecideError(format!("reading the approvals: {err}")))?;
        let ctx = approval::Context {
            approvers: &self.approvers,
            required: self.required,
            substrate: Substrate::ToolProxy,
            change_id: e.change_id,
            ticket,
            fresh: &fresh,
        };
        Ok(approval::judge(&candidates, &ctx))
    }
}

impl Decider for RulesDecider {
    fn decide(&self, facts: &Facts<'_>) -> Result<Ruling, DecideError> {
        if !facts.refusals.is_empty() {
            return Ok(Ruling::Deny(sorted(facts.refusals)));
        }
        let rules = self
            .rules
            .evaluate_json(facts.input)
            .map_err(|e| DecideError(crate::io::error_chain(&e)))?;
        let escalation =
            (rules.deny.is_empty() && !rules.escalate.is_empty()).then(|| Escalation {
                change_id: facts.change_id,
                policy_id: facts.policy_id,
                reasons: rule_reasons(&rules.escalate),
                read_set: facts.read_set.to_vec(),
            });
        let (judged, tally) = match &escalation {
            Some(e) => self.judge(e)?,
            None => (Vec::new(), Tally::default()),
        };
        Ok(match combine(&rules, &CheckOutcome::Passed, &tally) {
            Decided::Admit => Ruling::Admit {
                evidence: evidence(&rules, &judged),
            },
            Decided::Deny(reasons) => Ruling::Deny(reasons),
            Decided::Escalate(reasons) => Ruling::Escalate(reasons),
        })
    }
}

/// The decider's evidence of an admit: `{"rules": {"deny", "escalate"},
/// "approvals": [{"receipt", "approver", "verdict"}, ...]}`.
fn evidence(rules: &RuleOutcome, judged: &[Judged]) -> Value {
    let set = |s: &BTreeSet<String>| Value::Array(s.iter().cloned().map(Value::Text).collect());
    Value::Map(BTreeMap::from([
        (
            "rules".to_string(),
            Value::Map(BTreeMap::from([
                ("deny".to_string(), set(&rules.deny)),
                ("escalate".to_string(), set(&rules.escalate)),
            ])),
        ),
        ("approvals".to_string(), approvals_value(&notes(judged))),
    ]))
}

/// Whether every file of a read set (absolute paths) still holds its
/// digest, re-read from disk without following a link.
pub fn fresh(items: &[ReadItem]) -> Result<(), String> {
    for item in items {
        let rel = item.resource.trim_start_matches('/');
        match crate::gate::journal::side_now(Path::new("/"), rel) {
            Ok(Some(side)) if side.digest == item.digest => {}
            Ok(Some(_)) => return Err(format!("{} changed", item.resource)),
            Ok(None) => return Err(format!("{} is gone", item.resource)),
            Err(e) => return Err(format!("{}: {e}", item.resource)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;

    #[test]
    fn a_read_set_is_fresh_only_while_every_file_holds_its_digest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(tmp.path()).unwrap();
        let file = dir.join("a.cfg");
        std::fs::write(&file, "old\n").unwrap();
        let item = ReadItem {
            resource: file.display().to_string(),
            digest: Digest::blake3(b"old\n"),
        };
        assert_eq!(fresh(std::slice::from_ref(&item)), Ok(()));
        std::fs::write(&file, "new\n").unwrap();
        assert!(
            fresh(std::slice::from_ref(&item))
                .unwrap_err()
                .contains("changed")
        );
        std::fs::remove_file(&file).unwrap();
        assert!(
            fresh(std::slice::from_ref(&item))
                .unwrap_err()
                .contains("gone")
        );
        // A link in its place is not followed.
        let target = dir.join("t");
        std::fs::write(&target, "old\n").unwrap();
        std::os::unix::fs::symlink(&target, &file).unwrap();
        assert!(fresh(std::slice::from_ref(&item)).is_err());
        assert_eq!(fresh(&[]), Ok(()));
    }
}
