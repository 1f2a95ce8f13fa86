//! decide: the combination of the two evaluation systems and the
//! approvals (spec/gate.md "The combination"), for every substrate.
//!
//! Rules first: a rule denial (`rule.<reason>`) denies, and the checks do
//! not run. Then the checks: a failure (`check.<name>.failed`) denies.
//! Then the rules' escalations (`rule.<reason>`): a refusal by an approver
//! denies (`approval.refused`); enough distinct approvers admit; else the
//! change is escalated. Else admit. Deny absorbs escalate, escalate
//! absorbs admit, and every list of reasons is sorted and without
//! duplicates, so the same refusal is the same receipt whichever system
//! spoke first. "Could not evaluate" is never an arm here: it is an error
//! before [`combine`] is reached.

use super::rules::RuleOutcome;
use std::collections::BTreeSet;

/// The reason of a deny by an approver's refusal.
pub const APPROVAL_REFUSED: &str = "approval.refused";

/// What the checks said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// Every check exited 0 (or the policy has none to run here).
    Passed,
    /// These checks failed (their names).
    Failed(Vec<String>),
    /// Not run: the rules denied first.
    Skipped,
}

/// What the approvals of an escalation amount to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Distinct approver keys whose approval counts.
    pub approvals: usize,
    /// Whether an approver refused.
    pub refused: bool,
    /// Approvals the policy requires (0: it names no approver, so an
    /// escalation cannot be approved).
    pub required: usize,
}

impl Tally {
    /// Whether the approvals admit the escalation.
    pub fn admits(&self) -> bool {
        self.required > 0 && !self.refused && self.approvals >= self.required
    }
}

/// The verdict's arm and its reasons, before the receipt is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decided {
    /// Admit.
    Admit,
    /// Deny, with these reasons (sorted).
    Deny(Vec<String>),
    /// Escalate, with these reasons (sorted): the ticket's reasons.
    Escalate(Vec<String>),
}

/// `rule.<reason>` for each reason, sorted.
pub fn rule_reasons(reasons: &BTreeSet<String>) -> Vec<String> {
    sorted(reasons.iter().map(|r| format!("rule.{r}")))
}

/// `check.<name>.failed` for each name, sorted.
pub fn check_reasons(names: &[String]) -> Vec<String> {
    sorted(names.iter().map(|n| format!("check.{n}.failed")))
}

fn sorted(reasons: impl Iterator<Item = String>) -> Vec<String> {
    let set: BTreeSet<String> = reasons.collect();
    set.into_iter().collect()
}

/// Combine the rules, the checks and the approvals (see the module doc).
pub fn combine(rules: &RuleOutcome, checks: &CheckOutcome, tally: &Tally) -> Decided {
    if !rules.deny.is_empty() {
        return Decided::Deny(rule_reasons(&rules.deny));
    }
    if let CheckOutcome::Failed(names) = checks {
        return Decided::Deny(check_reasons(names));
    }
    if rules.escalate.is_empty() {
        return Decided::Admit;
    }
    if tally.refused {
        return Decided::Deny(vec![APPROVAL_REFUSED.to_string()]);
    }
    if tally.admits() {
        return Decided::Admit;
    }
    Decided::Escalate(rule_reasons(&rules.escalate))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(deny: &[&str], escalate: &[&str]) -> RuleOutcome {
        RuleOutcome {
            deny: deny.iter().map(|s| s.to_string()).collect(),
            escalate: escalate.iter().map(|s| s.to_string()).collect(),
        }
    }

    const NONE: Tally = Tally {
        approvals: 0,
        refused: false,
        required: 1,
    };

    #[test]
    fn deny_absorbs_escalate_absorbs_admit() {
        let passed = CheckOutcome::Passed;
        let failed = CheckOutcome::Failed(vec!["test".into()]);
        // Every quadrant of (rules deny?, checks fail?), with escalations.
        for (deny, checks, want) in [
            (true, &passed, Decided::Deny(vec!["rule.big".into()])),
            (true, &failed, Decided::Deny(vec!["rule.big".into()])),
            (
                false,
                &failed,
                Decided::Deny(vec!["check.test.failed".into()]),
            ),
            (false, &passed, Decided::Escalate(vec!["rule.wf".into()])),
        ] {
            let rules = outcome(if deny { &["big"] } else { &[] }, &["wf"]);
            assert_eq!(combine(&rules, checks, &NONE), want);
        }
        assert_eq!(combine(&outcome(&[], &[]), &passed, &NONE), Decided::Admit);
    }

    #[test]
    fn approvals_admit_only_when_enough_and_none_refused() {
        let rules = outcome(&[], &["wf"]);
        let p = CheckOutcome::Passed;
        let t = |approvals, refused, required| Tally {
            approvals,
            refused,
            required,
        };
        assert_eq!(combine(&rules, &p, &t(1, false, 1)), Decided::Admit);
        assert_eq!(combine(&rules, &p, &t(3, false, 2)), Decided::Admit);
        assert!(matches!(
            combine(&rules, &p, &t(1, false, 2)),
            Decided::Escalate(_)
        ));
        assert_eq!(
            combine(&rules, &p, &t(2, true, 2)),
            Decided::Deny(vec![APPROVAL_REFUSED.into()])
        );
        // No approvers in the policy: never approved.
        assert!(matches!(
            combine(&rules, &p, &t(5, false, 0)),
            Decided::Escalate(_)
        ));
        // A failing check is not approved away.
        let failed = CheckOutcome::Failed(vec!["t".into()]);
        assert!(matches!(
            combine(&rules, &failed, &t(1, false, 1)),
            Decided::Deny(_)
        ));
    }

    #[test]
    fn the_same_refusal_is_the_same_whichever_order_it_was_found_in() {
        let a = outcome(&["z.last", "a.first", "m"], &["y", "b"]);
        let b = outcome(&["m", "a.first", "z.last", "m"], &["b", "y"]);
        let p = CheckOutcome::Passed;
        assert_eq!(combine(&a, &p, &NONE), combine(&b, &p, &NONE));
        assert_eq!(
            combine(&a, &p, &NONE),
            Decided::Deny(vec![
                "rule.a.first".into(),
                "rule.m".into(),
                "rule.z.last".into()
            ])
        );
        let f1 = CheckOutcome::Failed(vec!["b".into(), "a".into()]);
        let f2 = CheckOutcome::Failed(vec!["a".into(), "b".into(), "a".into()]);
        let none = outcome(&[], &[]);
        assert_eq!(combine(&none, &f1, &NONE), combine(&none, &f2, &NONE));
    }
}
