//! outcome: what verification says: a check's result (a verdict, or not
//! evaluated), a bundle's report and its outcome, a run's summary.

use super::Reason;

/// Why a check said no: a stable reason code and a detail for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Stable reason code (spec/reasons.md).
    pub reason: Reason,
    /// What failed, where, and what to do next.
    pub detail: String,
}

/// What a check that ran concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckVerdict {
    /// The check ran and passed.
    Pass,
    /// The check ran and said no.
    Fail(Failure),
}

/// A check that could not run: no trusted key applies, unreadable input,
/// an unsupported version, or a check it depends on did not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotEvaluated {
    /// Stable reason code (spec/reasons.md).
    pub reason: Reason,
    /// Why it could not run.
    pub detail: String,
}

/// The result of one check.
pub type CheckResult = Result<CheckVerdict, NotEvaluated>;

/// One named check and its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// Stable check name (spec/verify.md).
    pub name: &'static str,
    /// What happened.
    pub result: CheckResult,
}

/// The outcome of one bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Every check ran and passed.
    Verified,
    /// At least one check ran and said no.
    Failed,
    /// Nothing failed, but at least one check could not run.
    NotEvaluated,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 3] = [Outcome::Verified, Outcome::Failed, Outcome::NotEvaluated];

    /// `verified`, `failed` or `error` (the word used in reports and manifests).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Verified => "verified",
            Outcome::Failed => "failed",
            Outcome::NotEvaluated => "error",
        }
    }
}

impl serde::Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A manifest's `expect` reads as the outcome type: `verified`, `failed` or
/// `error`, nothing else.
impl<'de> serde::Deserialize<'de> for Outcome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Outcome, D::Error> {
        let word = String::deserialize(d)?;
        Outcome::ALL
            .into_iter()
            .find(|o| o.as_str() == word)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "outcome {word:?} is not verified, failed or error"
                ))
            })
    }
}

/// Everything the verifier found about one bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The receipt id computed from the payload, when the envelope could be read.
    pub receipt_id: Option<String>,
    /// Every check, in a fixed order.
    pub checks: Vec<Check>,
    /// What the receipt says, when its payload could be decoded.
    pub summary: Option<PayloadSummary>,
}

/// What a receipt says, for the CI log that acts on it (spec/verify.md
/// "JSON"): present whenever the payload decoded as a v1 receipt, whatever
/// the outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayloadSummary {
    /// `issuer`.
    pub issuer: String,
    /// `issued_at`, Unix seconds.
    pub issued_at: i64,
    /// `substrate`.
    pub substrate: &'static str,
    /// `change_id`.
    pub change_id: String,
    /// `policy_id`.
    pub policy_id: String,
    /// The verdict's arm: `admit`, `deny` or `escalate`.
    pub verdict: &'static str,
    /// `applied`.
    pub applied: bool,
    /// A `deny` verdict's reasons (empty for `admit` and `escalate`).
    pub reasons: Vec<String>,
    /// `reversibility` (`None`: null, not known).
    pub reversibility: Option<bool>,
    /// An escalation or an approval, in words (human output only).
    pub decision: Option<String>,
}

impl PayloadSummary {
    /// The summary of `receipt`.
    pub fn of(receipt: &crate::receipt::Receipt) -> PayloadSummary {
        PayloadSummary {
            issuer: receipt.issuer.clone(),
            issued_at: receipt.issued_at,
            substrate: receipt.substrate.as_str(),
            change_id: receipt.change_id.to_string(),
            policy_id: receipt.policy_id.to_string(),
            verdict: crate::receipt::require::VerdictArm::of(&receipt.verdict).as_str(),
            applied: receipt.applied,
            reversibility: receipt.reversibility,
            reasons: match &receipt.verdict {
                crate::receipt::Verdict::Deny { reasons } => reasons.clone(),
                _ => Vec::new(),
            },
            decision: crate::receipt::require::describe(receipt),
        }
    }
}

impl Report {
    /// The bundle's outcome, from its checks.
    pub fn outcome(&self) -> Outcome {
        if self
            .checks
            .iter()
            .any(|c| matches!(c.result, Ok(CheckVerdict::Fail(_))))
        {
            Outcome::Failed
        } else if self.checks.iter().any(|c| c.result.is_err()) {
            Outcome::NotEvaluated
        } else {
            Outcome::Verified
        }
    }

    /// The reason code that decided the outcome: the first failure, else the
    /// first check not evaluated, else `None` (verified).
    pub fn primary_reason(&self) -> Option<Reason> {
        let failure = self.checks.iter().find_map(|c| match &c.result {
            Ok(CheckVerdict::Fail(f)) => Some(f.reason),
            _ => None,
        });
        failure.or_else(|| {
            self.checks
                .iter()
                .find_map(|c| c.result.as_ref().err().map(|e| e.reason))
        })
    }
}

/// Counts of outcomes over many bundles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Bundles verified.
    pub verified: u64,
    /// Bundles failed.
    pub failed: u64,
    /// Bundles not evaluated.
    pub not_evaluated: u64,
}

impl Summary {
    /// Count one outcome.
    pub fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Verified => self.verified += 1,
            Outcome::Failed => self.failed += 1,
            Outcome::NotEvaluated => self.not_evaluated += 1,
        }
    }

    /// The overall outcome: failed if any failed, else not evaluated if any
    /// was not, else verified (also for zero bundles).
    pub fn outcome(&self) -> Outcome {
        if self.failed > 0 {
            Outcome::Failed
        } else if self.not_evaluated > 0 {
            Outcome::NotEvaluated
        } else {
            Outcome::Verified
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &'static str, result: CheckResult) -> Check {
        Check { name, result }
    }
    fn fail(reason: Reason) -> CheckResult {
        Ok(CheckVerdict::Fail(Failure {
            reason,
            detail: String::new(),
        }))
    }
    fn not_evaluated(reason: Reason) -> CheckResult {
        Err(NotEvaluated {
            reason,
            detail: String::new(),
        })
    }

    #[test]
    fn outcome_keeps_the_three_apart() {
        let pass = || check("a", Ok(CheckVerdict::Pass));
        let all_pass = Report {
            receipt_id: None,
            summary: None,
            checks: vec![pass(), pass()],
        };
        assert_eq!(all_pass.outcome(), Outcome::Verified);
        assert_eq!(all_pass.primary_reason(), None);

        let one_error = Report {
            receipt_id: None,
            summary: None,
            checks: vec![pass(), check("b", not_evaluated(Reason::LogUntrusted))],
        };
        assert_eq!(one_error.outcome(), Outcome::NotEvaluated);
        assert_eq!(one_error.primary_reason(), Some(Reason::LogUntrusted));

        // A failure anywhere decides, even after a check that could not run.
        let both = Report {
            receipt_id: None,
            summary: None,
            checks: vec![
                check("b", not_evaluated(Reason::LogUntrusted)),
                pass(),
                check("c", fail(Reason::InclusionInvalid)),
            ],
        };
        assert_eq!(both.outcome(), Outcome::Failed);
        assert_eq!(both.primary_reason(), Some(Reason::InclusionInvalid));

        // A bundle that was never read is not evaluated, never verified by default.
        let unread = Report {
            receipt_id: None,
            summary: None,
            checks: vec![check("bundle", not_evaluated(Reason::InputUnreadable))],
        };
        assert_eq!(unread.outcome(), Outcome::NotEvaluated);
    }

    #[test]
    fn summary_outcome_and_words() {
        let mut s = Summary::default();
        assert_eq!(s.outcome(), Outcome::Verified);
        s.add(Outcome::Verified);
        s.add(Outcome::NotEvaluated);
        assert_eq!(s.outcome(), Outcome::NotEvaluated);
        s.add(Outcome::Failed);
        assert_eq!(s.outcome(), Outcome::Failed);
        assert_eq!((s.verified, s.failed, s.not_evaluated), (1, 1, 1));
        assert_eq!(
            [Outcome::Verified, Outcome::Failed, Outcome::NotEvaluated].map(Outcome::as_str),
            ["verified", "failed", "error"]
        );
    }
}
