//! module: a rules module read ([`Module`]), the rules that run it
//! ([`Rules`]), and what they said ([`RuleOutcome`]), each member checked
//! as a reason.

use super::bounds::{MAX_RULE_REASON_BYTES, MAX_RULE_REASONS, MAX_RULES_MODULE_BYTES};
use super::error::RulesError;
use super::sandbox::{self, Evaluator};
use super::vm::Answer;
use crate::digest::Digest;
use crate::receipt::canonical::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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

    /// Start the evaluator with the module, before the input is made: it
    /// compiles the module meanwhile.
    pub fn start(&self) -> Result<Started, RulesError> {
        Ok(Started {
            path: self.module.path.clone(),
            running: sandbox::start(&self.evaluator, &self.module.text)?,
        })
    }

    /// Evaluate `deny` and `escalate` against `input`.
    pub fn evaluate(&self, input: &Value) -> Result<RuleOutcome, RulesError> {
        self.start()?.evaluate(input)
    }

    /// Evaluate `deny` and `escalate` against `input` given as JSON (the
    /// tool proxy's: arguments as received).
    pub fn evaluate_json(&self, input: &serde_json::Value) -> Result<RuleOutcome, RulesError> {
        self.start()?.evaluate_json(input)
    }
}

/// Rules whose evaluator is started with the module, waiting for the input
/// (dropped unused, the evaluator is killed).
pub struct Started {
    path: PathBuf,
    running: sandbox::Running,
}

impl Started {
    /// Evaluate `deny` and `escalate` against `input`.
    pub fn evaluate(self, input: &Value) -> Result<RuleOutcome, RulesError> {
        self.evaluate_json(&crate::receipt::canonical::json::to_json(input))
    }

    /// Evaluate `deny` and `escalate` against `input` given as JSON.
    pub fn evaluate_json(self, input: &serde_json::Value) -> Result<RuleOutcome, RulesError> {
        match self.running.finish(input)? {
            Answer::Sets { deny, escalate } => Ok(RuleOutcome {
                deny: reasons("deny", deny)?,
                escalate: reasons("escalate", escalate)?,
            }),
            Answer::Refused(why) => Err(RulesError::Refused {
                path: self.path,
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
