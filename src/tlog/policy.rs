//! policy: C2SP tlog-policy files (logs, witnesses, groups, quorum) and
//! the evaluation of a checkpoint against one.
//!
//! Boundary: the octets of a policy file in, a [`TlogPolicy`] out; a signed
//! checkpoint note in, an [`Evaluation`] out (which listed log signed it,
//! which listed witness cosigned, failed or stayed silent, and whether the
//! quorum is met). No I/O. Signatures are checked by [`crate::tlog::note`] (log,
//! type 0x01) and [`crate::tlog::cosig`] (witnesses, type 0x04). Rules and
//! refusals: `spec/witness.md`.

use crate::keys::NoteVerifier;
use crate::tlog::cosig::{self, CosigError, CosigStatus, WitnessVerifier};
use crate::tlog::note::{self, Checkpoint, Note, NoteCheck, NoteError};

mod parse;

/// The predefined name: "it can be used when defining the quorum, but it is
/// invalid as a group member".
pub const NONE: &[u8] = b"none";

/// A name of a witness or group: opaque octets ("names must be handled as
/// opaque octet strings").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Name(pub Vec<u8>);

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

/// A `log <vkey> [<url>]` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyLog {
    /// The log's key; its name is the log's origin.
    pub verifier: NoteVerifier,
    /// Optional URL, opaque octets.
    pub url: Option<Vec<u8>>,
}

/// A `witness <name> <vkey> [<url>]` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyWitness {
    /// The name inside the policy (for groups and the quorum).
    pub name: Name,
    /// The witness's cosignature key (type 0x04).
    pub verifier: WitnessVerifier,
    /// Optional URL (the tlog-witness submission prefix), opaque octets.
    pub url: Option<Vec<u8>>,
}

/// A group or quorum member: an index into [`TlogPolicy::witnesses`] or
/// [`TlogPolicy::groups`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member {
    /// A witness.
    Witness(usize),
    /// A group defined on an earlier line.
    Group(usize),
}

/// A `group <name> all|any|<k> <name>...` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyGroup {
    /// The group's name.
    pub name: Name,
    /// k: the group witnesses a checkpoint when at least k members do.
    pub threshold: usize,
    /// The members, each defined on an earlier line.
    pub members: Vec<Member>,
}

/// The `quorum` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quorum {
    /// `quorum none`: no cosignature required.
    None,
    /// A witness or a group.
    Member(Member),
}

/// A parsed tlog-policy file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlogPolicy {
    /// Log lines, in file order.
    pub logs: Vec<PolicyLog>,
    /// Witness lines, in file order.
    pub witnesses: Vec<PolicyWitness>,
    /// Group lines, in file order (members always precede their group).
    pub groups: Vec<PolicyGroup>,
    /// The quorum.
    pub quorum: Quorum,
}

/// Why a policy file was refused; `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlogPolicyError {
    /// A file over [`MAX_POLICY_BYTES`].
    #[error("policy file is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Size found.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// An octet outside 0x09, 0x0A, 0x20-0x7E, 0x80-0xFF.
    #[error(
        "line {line}: byte 0x{byte:02x} is not allowed (only tab, newline, printable ASCII \
         and octets 0x80-0xff)"
    )]
    Charset {
        /// Line of the byte.
        line: usize,
        /// The byte.
        byte: u8,
    },
    /// A last line without its newline.
    #[error("line {0}: every line must end with a newline, the last one does not")]
    NoFinalNewline(usize),
    /// A first word that is not `log`, `witness`, `group` or `quorum`.
    #[error("line {line}: unknown keyword {word:?} (expected log, witness, group or quorum)")]
    UnknownKeyword {
        /// The line.
        line: usize,
        /// The word.
        word: String,
    },
    /// A line with the wrong number of items for its keyword.
    #[error("line {line}: {keyword} takes {expected}, found {found} item(s)")]
    Arity {
        /// The line.
        line: usize,
        /// The keyword.
        keyword: &'static str,
        /// What the keyword takes.
        expected: &'static str,
        /// Items after the keyword.
        found: usize,
    },
    /// A log vkey that does not parse as an Ed25519 (0x01) verifier key.
    #[error("line {line}: log key: {detail}")]
    LogKey {
        /// The line.
        line: usize,
        /// Why.
        detail: String,
    },
    /// A witness vkey that does not parse as a cosignature (0x04) key.
    #[error("line {line}: witness key")]
    WitnessKey {
        /// The line.
        line: usize,
        /// Why.
        #[source]
        source: CosigError,
    },
    /// Two log lines wrap the same public key.
    #[error("line {line}: duplicate log: the same public key is listed on line {first}")]
    DuplicateLog {
        /// The line.
        line: usize,
        /// The earlier line.
        first: usize,
    },
    /// Two witness lines wrap the same public key.
    #[error("line {line}: duplicate witness: the same public key is listed on line {first}")]
    DuplicateWitness {
        /// The line.
        line: usize,
        /// The earlier line.
        first: usize,
    },
    /// A witness or group name defined twice (or `none` redefined).
    #[error("line {line}: name {name} is already defined")]
    DuplicateName {
        /// The line.
        line: usize,
        /// The name.
        name: Name,
    },
    /// A member or quorum name not defined on an earlier line.
    #[error("line {line}: name {name} is not defined on an earlier line")]
    Undefined {
        /// The line.
        line: usize,
        /// The name.
        name: Name,
    },
    /// `none` listed as a group member.
    #[error("line {0}: the predefined name none cannot be a group member")]
    NoneMember(usize),
    /// A name listed as a member a second time.
    #[error("line {line}: {name} is already a group member (each name may be listed once)")]
    MemberTwice {
        /// The line.
        line: usize,
        /// The name.
        name: Name,
    },
    /// A threshold that is not `all`, `any` or a decimal k with 1 <= k <= n.
    #[error("line {line}: threshold {found:?} must be all, any or a decimal k with 1 <= k <= {n}")]
    Threshold {
        /// The line.
        line: usize,
        /// The text found.
        found: String,
        /// Number of members.
        n: usize,
    },
    /// A second quorum line.
    #[error("line {line}: a second quorum line (the first is on line {first})")]
    QuorumTwice {
        /// The line.
        line: usize,
        /// The first quorum line.
        first: usize,
    },
    /// No quorum line.
    #[error("policy has no quorum line (write `quorum none` to require no witnesses)")]
    NoQuorum,
    /// More logs, witnesses or groups than the named limits.
    #[error("line {line}: more than {limit} {what}")]
    TooMany {
        /// The line.
        line: usize,
        /// logs, witnesses or groups.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
}

impl TlogPolicy {
    /// The listed logs whose key name is `origin` (tlog-policy: the log
    /// vkey's name "MUST correspond to the log's origin line").
    pub fn logs_for_origin<'a>(&'a self, origin: &'a str) -> impl Iterator<Item = &'a PolicyLog> {
        self.logs.iter().filter(move |l| l.verifier.name == origin)
    }

    /// Whether the quorum is met when exactly the witnesses with
    /// `cosigned[i]` true have witnessed (one flag per [`TlogPolicy::witnesses`]).
    ///
    /// A group witnesses a checkpoint "if and only if at least k of its n
    /// members have witnessed that checkpoint". Members precede their group,
    /// so one pass in file order settles every group.
    pub fn quorum_met(&self, cosigned: &[bool]) -> bool {
        let mut groups: Vec<bool> = Vec::with_capacity(self.groups.len());
        let met = |m: &Member, groups: &[bool]| match *m {
            Member::Witness(i) => cosigned.get(i).copied().unwrap_or(false),
            Member::Group(g) => groups.get(g).copied().unwrap_or(false),
        };
        for group in &self.groups {
            let count = group.members.iter().filter(|m| met(m, &groups)).count();
            groups.push(count >= group.threshold);
        }
        match &self.quorum {
            Quorum::None => true,
            Quorum::Member(m) => met(m, &groups),
        }
    }

    /// Evaluate a signed checkpoint note: its log signature by the listed
    /// logs of its origin, each listed witness's cosignature, the quorum.
    pub fn evaluate(&self, note: &Note) -> Result<Evaluation, NoteError> {
        let checkpoint = Checkpoint::parse(&note.text)?;
        let logs: Vec<NoteVerifier> = self
            .logs_for_origin(&checkpoint.origin)
            .map(|l| l.verifier.clone())
            .collect();
        let log = if logs.is_empty() {
            LogStatus::UnknownOrigin
        } else {
            match note::check(note, &logs) {
                NoteCheck::Verified { names } => LogStatus::Verified { names },
                NoteCheck::Failed { name, key_hash } => LogStatus::Failed { name, key_hash },
                NoteCheck::NotEvaluated => LogStatus::NotSigned,
            }
        };
        let verifiers: Vec<WitnessVerifier> =
            self.witnesses.iter().map(|w| w.verifier.clone()).collect();
        let witnesses: Vec<CosigStatus> = cosig::check(note, &verifiers);
        let cosigned: Vec<bool> = witnesses
            .iter()
            .map(|s| matches!(s, CosigStatus::Verified { .. }))
            .collect();
        let quorum_met = self.quorum_met(&cosigned);
        Ok(Evaluation {
            checkpoint,
            log,
            witnesses,
            quorum_met,
        })
    }
}

/// The log signature of a checkpoint under a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogStatus {
    /// A listed log of the origin signed, and no listed log's line failed.
    Verified {
        /// Key names that verified (the origin).
        names: Vec<String>,
    },
    /// A line with a listed log's name and key hash did not verify.
    Failed {
        /// Key name.
        name: String,
        /// Key hash.
        key_hash: [u8; 4],
    },
    /// The policy lists logs for this origin, but none of them signed.
    NotSigned,
    /// The policy lists no log for this origin.
    UnknownOrigin,
}

/// A checkpoint weighed against a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluation {
    /// The checkpoint body.
    pub checkpoint: Checkpoint,
    /// The log signature.
    pub log: LogStatus,
    /// One status per [`TlogPolicy::witnesses`], same order.
    pub witnesses: Vec<CosigStatus>,
    /// Whether the verified cosignatures meet the quorum.
    pub quorum_met: bool,
}

/// The one-word summary of an [`Evaluation`], most serious first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuorumVerdict {
    /// Signed by a listed log, no listed key failed, quorum met.
    Verified,
    /// A listed log's signature line did not verify.
    LogFailed,
    /// A listed witness's cosignature did not verify (indexes into
    /// [`TlogPolicy::witnesses`]). Reported even when the quorum is met
    /// without it: a known key's bad signature is a refusal.
    CosignatureFailed(Vec<usize>),
    /// The verified cosignatures do not meet the quorum.
    QuorumNotMet,
    /// No listed log applies to the origin, or none signed: the
    /// checkpoint cannot be evaluated under this policy.
    LogNotEvaluated,
}

impl Evaluation {
    /// Indexes of the listed witnesses whose cosignature failed.
    pub fn failed_witnesses(&self) -> Vec<usize> {
        self.witnesses
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, CosigStatus::Failed(_)))
            .map(|(i, _)| i)
            .collect()
    }

    /// Failures first (log, cosignature, quorum), then "not evaluated".
    pub fn verdict(&self) -> QuorumVerdict {
        if matches!(self.log, LogStatus::Failed { .. }) {
            return QuorumVerdict::LogFailed;
        }
        let failed = self.failed_witnesses();
        if !failed.is_empty() {
            return QuorumVerdict::CosignatureFailed(failed);
        }
        if !self.quorum_met {
            return QuorumVerdict::QuorumNotMet;
        }
        match self.log {
            LogStatus::Verified { .. } => QuorumVerdict::Verified,
            _ => QuorumVerdict::LogNotEvaluated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::SigningKey;
    use parse::parse_threshold;

    fn wkey(seed: u8, name: &str) -> String {
        WitnessVerifier::new(name, SigningKey::from_bytes(&[seed; 32]).verifying_key())
            .unwrap()
            .to_string()
    }

    #[test]
    fn example_policy_of_the_spec_parses() {
        let text = format!(
            "log {}\n\nwitness X1 {}\nwitness X2 {}\nwitness X3 {}\ngroup X-witnesses 2 X1 X2 X3\n\n\
             witness Y1 {}\nwitness Y2 {}\nwitness Y3 {}\ngroup Y-witnesses any Y1 Y2 Y3\n\n\
             group X-and-Y all X-witnesses Y-witnesses\nquorum X-and-Y\n",
            NoteVerifier::new(
                "example.com/log",
                SigningKey::from_bytes(&[1; 32]).verifying_key()
            )
            .unwrap(),
            wkey(2, "x1"),
            wkey(3, "x2"),
            wkey(4, "x3"),
            wkey(5, "y1"),
            wkey(6, "y2"),
            wkey(7, "y3"),
        );
        let p = TlogPolicy::parse(text.as_bytes()).unwrap();
        assert_eq!(p.logs.len(), 1);
        assert_eq!(p.witnesses.len(), 6);
        assert_eq!(p.groups.len(), 3);
        assert_eq!(p.quorum, Quorum::Member(Member::Group(2)));
        // Two X and one Y: met. One X and three Y: not. Two X and no Y: not.
        assert!(p.quorum_met(&[true, true, false, true, false, false]));
        assert!(!p.quorum_met(&[true, false, false, true, true, true]));
        assert!(!p.quorum_met(&[true, true, true, false, false, false]));
    }

    #[test]
    fn quorum_none_and_thresholds() {
        let p = TlogPolicy::parse(b"quorum none\n").unwrap();
        assert!(p.quorum_met(&[]));
        assert_eq!(parse_threshold(1, b"3", 3), Ok(3));
        assert!(parse_threshold(1, b"4", 3).is_err());
        assert!(parse_threshold(1, b"0", 3).is_err());
        assert!(parse_threshold(1, b"01", 3).is_err());
        assert!(parse_threshold(1, b"+1", 3).is_err());
        assert!(parse_threshold(1, b"99999999999999999999999", 3).is_err());
    }
}
