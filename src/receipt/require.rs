//! require: what a receipt must say to let a change through.
//!
//! Boundary: the requirements a caller states (flags, or a trust file's
//! `"require"` object) and their evaluation against a decoded [`Receipt`].
//! Each requirement is its own check, present only when asked for
//! (spec/gate.md "Requirements"). No I/O except the system clock, and only
//! when no `--now` was given.

use crate::digest::Digest;
use crate::reason::Reason;
use crate::receipt::{Receipt, Verdict};
use serde::Deserialize;

/// How far in the future `issued_at` may lie (clock skew), in seconds.
pub const MAX_CLOCK_SKEW_S: i64 = 300;
/// Largest `--max-age` / `max_age_s` accepted: 100 years, in seconds.
pub const MAX_AGE_LIMIT_S: i64 = 100 * 365 * 24 * 3600;
/// Most values in one "any of" requirement list.
pub const MAX_REQUIRE_VALUES: usize = 256;

/// The name in the `policy_id` of every approval receipt (`rcpt gate approve`).
pub const APPROVAL_POLICY: &str = "rcpt.approve";

/// `policy_id` of every approval receipt: the identity of `{"name":
/// "rcpt.approve"}`, by which an approval is told from other receipts.
pub fn approval_policy_id() -> Digest {
    use crate::receipt::canonical::{Value, dagcbor, identity};
    identity(&dagcbor::encode(&Value::Map(
        std::collections::BTreeMap::from([(
            "name".to_string(),
            Value::Text(APPROVAL_POLICY.to_string()),
        )]),
    )))
}

/// What an escalation or an approval receipt is, in words (`receipt
/// inspect`, `verify`); `None` for any other receipt.
pub fn describe(receipt: &Receipt) -> Option<String> {
    let approval = receipt.policy_id == approval_policy_id();
    let held = receipt
        .precondition
        .map_or_else(|| "none".to_string(), |d| d.to_string());
    match (&receipt.verdict, approval) {
        (Verdict::Escalate { ticket }, _) => Some(format!(
            "escalated (ticket {ticket}): nothing applied; the change waits for an approval \
             (rcpt gate approve)"
        )),
        (Verdict::Admit { .. }, true) => Some(format!(
            "approval by {} of the escalation with ticket {held}",
            receipt.issuer
        )),
        (Verdict::Deny { reasons }, true) => Some(format!(
            "refusal by {} of the escalation with ticket {held} ({})",
            receipt.issuer,
            reasons.join(", ")
        )),
        _ => None,
    }
}

/// The arm of a verdict, without its contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerdictArm {
    /// `admit`
    Admit,
    /// `deny`
    Deny,
    /// `escalate`
    Escalate,
}

impl VerdictArm {
    /// The arm of `verdict`.
    pub fn of(verdict: &Verdict) -> VerdictArm {
        match verdict {
            Verdict::Admit { .. } => VerdictArm::Admit,
            Verdict::Deny { .. } => VerdictArm::Deny,
            Verdict::Escalate { .. } => VerdictArm::Escalate,
        }
    }

    /// `admit`, `deny` or `escalate`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictArm::Admit => "admit",
            VerdictArm::Deny => "deny",
            VerdictArm::Escalate => "escalate",
        }
    }

    /// Parse `admit`, `deny` or `escalate`.
    pub fn parse(s: &str) -> Result<VerdictArm, RequireError> {
        match s {
            "admit" => Ok(VerdictArm::Admit),
            "deny" => Ok(VerdictArm::Deny),
            "escalate" => Ok(VerdictArm::Escalate),
            other => Err(RequireError::Verdict(other.to_string())),
        }
    }
}

/// Why a requirement could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequireError {
    /// Not a verdict arm.
    #[error("{0:?} is not a verdict; expected admit, deny or escalate")]
    Verdict(String),
    /// Not a duration.
    #[error("{0:?} is not a duration; write a whole number with s, m, h or d (30m, 24h, 7d)")]
    Duration(String),
    /// A duration or age out of range.
    #[error("max age {0} s is out of range (1 s to {MAX_AGE_LIMIT_S} s)")]
    AgeRange(i64),
    /// Not a digest.
    #[error("{field}: {source}")]
    Digest {
        /// Which requirement.
        field: &'static str,
        /// Why the digest was refused.
        #[source]
        source: crate::digest::DigestError,
    },
    /// A list is empty or too long.
    #[error("{0}: give between 1 and {MAX_REQUIRE_VALUES} values")]
    Count(&'static str),
}

/// The requirements, each `None` when not asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    /// `--require-verdict` / `"verdict"`: any of these arms.
    pub verdict: Option<Vec<VerdictArm>>,
    /// `--issuer` / `"issuer"`: any of these names.
    pub issuer: Option<Vec<String>>,
    /// `--change-id` / `"change_id"`: exactly this change.
    pub change_id: Option<Digest>,
    /// `--policy-id` / `"policy_id"`: any of these policies.
    pub policy_id: Option<Vec<Digest>>,
    /// `--applied` / `"applied"`.
    pub applied: Option<bool>,
    /// `--max-age` / `"max_age_s"`, seconds.
    pub max_age_s: Option<i64>,
}

/// The trust file's `"require"` object, as written (strict: unknown keys refused).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequireFile {
    verdict: Option<Vec<VerdictArm>>,
    issuer: Option<Vec<String>>,
    change_id: Option<String>,
    policy_id: Option<Vec<String>>,
    applied: Option<bool>,
    max_age_s: Option<i64>,
}

impl RequireFile {
    /// Check values and convert to [`Requirements`].
    pub fn into_requirements(self) -> Result<Requirements, RequireError> {
        let count = |name, len: usize| {
            if (1..=MAX_REQUIRE_VALUES).contains(&len) {
                Ok(())
            } else {
                Err(RequireError::Count(name))
            }
        };
        if let Some(v) = &self.verdict {
            count("verdict", v.len())?;
        }
        if let Some(v) = &self.issuer {
            count("issuer", v.len())?;
        }
        let policy_id = match self.policy_id {
            Some(list) => {
                count("policy_id", list.len())?;
                Some(
                    list.iter()
                        .map(|d| parse_digest("policy_id", d))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
            None => None,
        };
        if let Some(age) = self.max_age_s {
            check_age(age)?;
        }
        Ok(Requirements {
            verdict: self.verdict,
            issuer: self.issuer,
            change_id: self
                .change_id
                .map(|d| parse_digest("change_id", &d))
                .transpose()?,
            policy_id,
            applied: self.applied,
            max_age_s: self.max_age_s,
        })
    }
}

impl Requirements {
    /// `self` with every requirement `over` states replacing this one's
    /// (a flag overrides the trust file's value for its key).
    pub fn overridden_by(self, over: Requirements) -> Requirements {
        Requirements {
            verdict: over.verdict.or(self.verdict),
            issuer: over.issuer.or(self.issuer),
            change_id: over.change_id.or(self.change_id),
            policy_id: over.policy_id.or(self.policy_id),
            applied: over.applied.or(self.applied),
            max_age_s: over.max_age_s.or(self.max_age_s),
        }
    }

    /// True when nothing is required.
    pub fn is_empty(&self) -> bool {
        *self == Requirements::default()
    }
}

/// Parse a digest requirement.
pub fn parse_digest(field: &'static str, text: &str) -> Result<Digest, RequireError> {
    text.parse::<Digest>()
        .map_err(|source| RequireError::Digest { field, source })
}

fn check_age(age: i64) -> Result<(), RequireError> {
    if (1..=MAX_AGE_LIMIT_S).contains(&age) {
        Ok(())
    } else {
        Err(RequireError::AgeRange(age))
    }
}

/// Parse a duration: a whole number followed by `s`, `m`, `h` or `d`
/// (`30m`, `24h`, `7d`), 1 s to [`MAX_AGE_LIMIT_S`].
pub fn parse_duration(text: &str) -> Result<i64, RequireError> {
    let bad = || RequireError::Duration(text.to_string());
    let split = text.len().checked_sub(1).ok_or_else(bad)?;
    let (number, unit) = (text.get(..split).ok_or_else(bad)?, text.get(split..));
    let scale: i64 = match unit {
        Some("s") => 1,
        Some("m") => 60,
        Some("h") => 3600,
        Some("d") => 86_400,
        _ => return Err(bad()),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = number.parse().map_err(|_| bad())?;
    let secs = n.checked_mul(scale).ok_or_else(bad)?;
    check_age(secs)?;
    Ok(secs)
}

/// The result of one requirement check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Met {
    /// The receipt says what was required.
    Yes,
    /// It does not: the detail says what it says instead.
    No(String),
}

/// One requirement check: its stable name, which is also its reason code
/// when not met, and its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequirementCheck {
    /// The reason code and check name: `policy.verdict`, `policy.issuer`, ...
    pub reason: Reason,
    /// Met or not.
    pub met: Met,
}

/// The requirement checks `req` asks for (and `policy.fresh` when
/// `fresh`), in report order: each is named by its reason code.
pub fn asked(req: &Requirements, fresh: bool) -> Vec<Reason> {
    [
        (req.verdict.is_some(), Reason::PolicyVerdict),
        (req.issuer.is_some(), Reason::PolicyIssuer),
        (req.change_id.is_some(), Reason::PolicyChangeId),
        (req.policy_id.is_some(), Reason::PolicyPolicyId),
        (req.applied.is_some(), Reason::PolicyApplied),
        (req.max_age_s.is_some(), Reason::PolicyAge),
        (fresh, Reason::PolicyFresh),
    ]
    .into_iter()
    .filter_map(|(on, reason)| on.then_some(reason))
    .collect()
}

/// Evaluate every requirement in `req` against `receipt` at `now` (Unix
/// seconds), in the order of [`asked`] (freshness excluded: it reads
/// files and is in [`super::fresh`]).
pub fn evaluate(receipt: &Receipt, req: &Requirements, now: i64) -> Vec<RequirementCheck> {
    let mut out = Vec::new();
    let mut push = |reason, met| out.push(RequirementCheck { reason, met });
    if let Some(arms) = &req.verdict {
        push(Reason::PolicyVerdict, verdict_met(arms, receipt));
    }
    if let Some(names) = &req.issuer {
        let issuer = &receipt.issuer;
        push(
            Reason::PolicyIssuer,
            one_of(names, issuer, "issuer", issuer),
        );
    }
    if let Some(want) = &req.change_id {
        let met = if *want == receipt.change_id {
            Met::Yes
        } else {
            Met::No(format!(
                "change_id is {}, not the required {want}",
                receipt.change_id
            ))
        };
        push(Reason::PolicyChangeId, met);
    }
    if let Some(ids) = &req.policy_id {
        let id = receipt.policy_id.to_string();
        push(
            Reason::PolicyPolicyId,
            one_of(ids, &receipt.policy_id, "policy_id", &id),
        );
    }
    if let Some(want) = req.applied {
        let met = if receipt.applied == want {
            Met::Yes
        } else {
            Met::No(format!("applied is {}, required {want}", receipt.applied))
        };
        push(Reason::PolicyApplied, met);
    }
    if let Some(max_age) = req.max_age_s {
        push(Reason::PolicyAge, age(receipt.issued_at, max_age, now));
    }
    out
}

/// The verdict requirement: when not met, the detail holds what a CI log
/// needs to act on: the verdict with its reasons (or ticket), the arms
/// required, and the change the receipt is about.
fn verdict_met(arms: &[VerdictArm], receipt: &Receipt) -> Met {
    let arm = VerdictArm::of(&receipt.verdict);
    if arms.contains(&arm) {
        return Met::Yes;
    }
    let why = match &receipt.verdict {
        crate::receipt::Verdict::Deny { reasons } if !reasons.is_empty() => {
            format!(" (reasons: {})", reasons.join(", "))
        }
        crate::receipt::Verdict::Escalate { ticket } => format!(" (ticket: {ticket})"),
        _ => String::new(),
    };
    let wanted: Vec<&str> = arms.iter().map(|a| a.as_str()).collect();
    Met::No(format!(
        "verdict is \"{}\"{why}, required {} (change_id {})",
        arm.as_str(),
        wanted.join(" or "),
        receipt.change_id
    ))
}

fn one_of<T: PartialEq>(allowed: &[T], actual: &T, field: &str, shown: &str) -> Met {
    if allowed.contains(actual) {
        Met::Yes
    } else {
        Met::No(format!("{field} is {shown:?}, not one of those required"))
    }
}

/// `issued_at >= now - max_age` and `issued_at <= now + MAX_CLOCK_SKEW_S`.
fn age(issued_at: i64, max_age: i64, now: i64) -> Met {
    let oldest = now.saturating_sub(max_age);
    let newest = now.saturating_add(MAX_CLOCK_SKEW_S);
    if issued_at < oldest {
        Met::No(format!(
            "issued at {issued_at}, {} s before now ({now}); the limit is {max_age} s",
            now.saturating_sub(issued_at)
        ))
    } else if issued_at > newest {
        Met::No(format!(
            "issued at {issued_at}, {} s after now ({now}); more than {MAX_CLOCK_SKEW_S} s of clock skew",
            issued_at.saturating_sub(now)
        ))
    } else {
        Met::Yes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30m").ok(), Some(1800));
        assert_eq!(parse_duration("24h").ok(), Some(86_400));
        assert_eq!(parse_duration("7d").ok(), Some(604_800));
        assert_eq!(parse_duration("45s").ok(), Some(45));
        for bad in [
            "",
            "m",
            "10",
            "1.5h",
            "-1h",
            "+1h",
            "0s",
            "1w",
            "99999999999999999d",
            "1 h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn age_window() {
        assert_eq!(age(1000, 100, 1050), Met::Yes);
        assert_eq!(age(900, 100, 1000), Met::Yes);
        assert!(matches!(age(899, 100, 1000), Met::No(_)));
        assert_eq!(age(1300, 100, 1000), Met::Yes);
        assert!(matches!(age(1301, 100, 1000), Met::No(_)));
        assert!(matches!(age(i64::MIN, 100, i64::MAX), Met::No(_)));
    }

    #[test]
    fn flags_override_the_file_per_key() {
        let file = Requirements {
            verdict: Some(vec![VerdictArm::Admit]),
            applied: Some(true),
            ..Requirements::default()
        };
        let flags = Requirements {
            applied: Some(false),
            ..Requirements::default()
        };
        let merged = file.overridden_by(flags);
        assert_eq!(merged.verdict, Some(vec![VerdictArm::Admit]));
        assert_eq!(merged.applied, Some(false));
    }
}
