//! rules: a policy's Rego module, whether a change is allowed for what it
//! is (spec/gate.md "Rules").
//!
//! ```rego
//! package rcpt
//!
//! escalate contains "workflow.changed" if {
//!     some f in input.files
//!     startswith(f.path, ".github/workflows/")
//! }
//! deny contains "file.too_large" if {
//!     some f in input.files
//!     f.size > 1048576
//! }
//! ```
//!
//! Boundary: [`Rules::load`] reads a module (its bytes are part of the
//! policy's identity); [`Rules::evaluate`] gives the two sets of reasons
//! ([`RuleOutcome`]) for an `input` (the git substrate's is built by
//! [`input`]; the tool proxy builds its own), or a [`RulesError`]: no
//! verdict, never a deny and never an admit. Substrate-neutral: the
//! combination with checks and approvals is [`crate::gate::decide`].
//!
//! Evaluation is bounded and deterministic. regorus is built without the
//! builtins that reach outside the input (no `http.send`, no clock, no
//! `uuid`, no `opa.runtime`, no environment, no files), and a module
//! calling one, or `rand.intn`, is refused before it runs. It runs in a
//! confined child process ([`sandbox`]) under the VM's instruction budget
//! and timer ([`vm`]), the child's own limits on memory and CPU time, and
//! the parent's deadline.

pub mod input;
pub mod sandbox;
pub mod vm;

pub use sandbox::Evaluator;

use crate::digest::Digest;
use crate::receipt::canonical::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use vm::Answer;

/// Most bytes of a rules module.
pub const MAX_RULES_MODULE_BYTES: usize = 256 * 1024;
/// Most VM instructions evaluating one set (`deny`, then `escalate`).
pub const MAX_RULES_INSTRUCTIONS: usize = 20_000_000;
/// The VM's own timer, per set.
pub const RULES_TIME_LIMIT: Duration = Duration::from_secs(2);
/// The parent kills the evaluator process after this long.
pub const RULES_DEADLINE: Duration = Duration::from_secs(5);
/// CPU seconds the evaluator process may use (RLIMIT_CPU).
pub const RULES_CPU_LIMIT_S: u64 = 5;
/// Address space of the evaluator process (RLIMIT_AS).
pub const MAX_RULES_MEMORY_BYTES: u64 = 1024 * 1024 * 1024;
/// Most bytes of one request to the evaluator (the module and its input).
pub const MAX_RULES_REQUEST_BYTES: usize = 32 * 1024 * 1024;
/// Most bytes of the evaluator's answer.
pub const MAX_RULES_ANSWER_BYTES: usize = 1024 * 1024;
/// Most reasons in one set.
pub const MAX_RULE_REASONS: usize = 64;
/// Most bytes of one reason.
pub const MAX_RULE_REASON_BYTES: usize = 64;
/// Builtins regorus has without the outside-world features that are still
/// refused: they would make the result depend on something else than the
/// module and its input.
pub const REFUSED_BUILTINS: &[&str] = &[
    "rand.intn",
    "time.now_ns",
    "http.send",
    "opa.runtime",
    "uuid.rfc4122",
    "uuid.parse",
    "net.lookup_ip_addr",
];

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

/// A rules module as read: its text and the digest of its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Module {
    /// Where it was read from (for messages only).
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// BLAKE3 of its bytes (part of `policy_id`).
    pub digest: Digest,
}

impl Module {
    /// Read the module at `path` (at most [`MAX_RULES_MODULE_BYTES`], UTF-8).
    pub fn read(path: &Path) -> Result<Module, RulesError> {
        let bytes = crate::io::read_path(path, MAX_RULES_MODULE_BYTES).map_err(|source| {
            RulesError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let digest = Digest::blake3(&bytes);
        let text = String::from_utf8(bytes).map_err(|_| RulesError::Refused {
            path: path.to_path_buf(),
            why: "not UTF-8".into(),
        })?;
        Ok(Module {
            path: path.to_path_buf(),
            text,
            digest,
        })
    }
}

/// What the rules said: the reasons to deny and to escalate, each sorted
/// and without duplicates (the prefix `rule.` is added where a receipt
/// carries them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuleOutcome {
    /// `deny`.
    pub deny: BTreeSet<String>,
    /// `escalate`.
    pub escalate: BTreeSet<String>,
}

/// A module and the evaluator that runs it.
#[derive(Clone, Debug)]
pub struct Rules {
    module: Module,
    evaluator: Evaluator,
}

impl Rules {
    /// Read the module at `path`, to be run by `evaluator`.
    pub fn load(path: &Path, evaluator: Evaluator) -> Result<Rules, RulesError> {
        Ok(Rules::new(Module::read(path)?, evaluator))
    }

    /// Rules of a module already read.
    pub fn new(module: Module, evaluator: Evaluator) -> Rules {
        Rules { module, evaluator }
    }

    /// The module.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Evaluate `deny` and `escalate` against `input`.
    pub fn evaluate(&self, input: &Value) -> Result<RuleOutcome, RulesError> {
        match sandbox::run(&self.evaluator, &self.module.text, input)? {
            Answer::Sets { deny, escalate } => Ok(RuleOutcome {
                deny: reasons("deny", deny)?,
                escalate: reasons("escalate", escalate)?,
            }),
            Answer::Refused(why) => Err(RulesError::Refused {
                path: self.module.path.clone(),
                why,
            }),
            Answer::NotEvaluated(why) => Err(RulesError::NotEvaluated(why)),
        }
    }
}

/// `members` checked as reasons.
fn reasons(set: &'static str, members: Vec<String>) -> Result<BTreeSet<String>, RulesError> {
    if members.len() > MAX_RULE_REASONS {
        return Err(RulesError::TooMany {
            set,
            count: members.len(),
        });
    }
    members
        .into_iter()
        .map(|reason| {
            if is_reason(&reason) {
                Ok(reason)
            } else {
                Err(RulesError::Reason { set, reason })
            }
        })
        .collect()
}

/// 1 to [`MAX_RULE_REASON_BYTES`] of `a-z 0-9 . _ -`.
pub fn is_reason(text: &str) -> bool {
    (1..=MAX_RULE_REASON_BYTES).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}
