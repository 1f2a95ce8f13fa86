//! error: why rules gave no result ([`RulesError`]): a module refused as
//! written (a bad policy) apart from an evaluation that did not finish.

use super::bounds::{MAX_RULE_REASON_BYTES, MAX_RULE_REASONS, MAX_RULES_REQUEST_BYTES};
use std::path::PathBuf;
use std::time::Duration;

/// Why rules gave no result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RulesError {
    /// The module file could not be read.
    #[error("reading the rules {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::io::InputError,
    },
    /// The module is refused as written (exit 2: fix the policy).
    #[error("the rules {path} are refused: {why}")]
    Refused {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The evaluation did not finish (an error, a budget, the timer).
    #[error("the rules were not evaluated: {0}")]
    NotEvaluated(String),
    /// A member of a set is not a reason.
    #[error(
        "the rules' {set} set holds {reason:?}, not a reason (1 to {MAX_RULE_REASON_BYTES} of \
         a-z 0-9 . _ -): no verdict"
    )]
    Reason {
        /// `deny` or `escalate`.
        set: &'static str,
        /// The member.
        reason: String,
    },
    /// A set holds too many reasons.
    #[error("the rules' {set} set holds {count} reasons, over {MAX_RULE_REASONS}: no verdict")]
    TooMany {
        /// `deny` or `escalate`.
        set: &'static str,
        /// How many.
        count: usize,
    },
    /// The evaluator was killed at the deadline.
    #[error("the rules evaluator ran past {0:?} and was killed: no verdict")]
    TimedOut(Duration),
    /// The evaluator ended without an answer (out of memory, CPU time, a
    /// stack overflow, a crash).
    #[error("the rules evaluator ended without an answer ({status}): no verdict{}",
        if stderr.is_empty() { String::new() } else { format!("; it said: {stderr}") })]
    Crashed {
        /// Its exit status.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// The evaluator could not be started.
    #[error("starting the rules evaluator {program}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for the evaluator failed.
    #[error("waiting for the rules evaluator")]
    Io(#[source] std::io::Error),
    /// The request would be over [`MAX_RULES_REQUEST_BYTES`].
    #[error("the rules' input is {0} bytes, over {MAX_RULES_REQUEST_BYTES}: no verdict")]
    InputTooLarge(usize),
}

impl RulesError {
    /// True when the module itself is refused (a bad policy: exit 2).
    pub fn is_refused(&self) -> bool {
        matches!(self, RulesError::Read { .. } | RulesError::Refused { .. })
    }
}
