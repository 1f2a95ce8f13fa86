//! verify: offline checks of bundles, their three outcomes, and reports.
//!
//! Every check of a bundle runs and is reported by name. A check either ran
//! and gave a [`CheckVerdict`] (pass or fail), or could not run and gave
//! [`NotEvaluated`]: "could not evaluate" lives outside the verdict type, so
//! it can never be folded into "failed" or "passed". A bundle's [`Outcome`]
//! follows: any failure makes it `Failed`; otherwise anything not evaluated
//! makes it `NotEvaluated`; otherwise it is `Verified`.
//!
//! This module reads nothing but the bytes it is handed (and, from
//! [`Verifier::verify_file`], the one file named), opens no socket, and
//! never prints: rendering is in [`report`].

mod checks;
mod consistency;
pub mod corpus;
pub mod errata;
mod log_checks;
pub mod mirror;
mod outcome;
mod payload_checks;
pub mod report;

pub use crate::reason::Reason;
pub use checks::{Gate, Verifier, VerifierError};
pub use consistency::{ConsistencyInput, ConsistencyProof, UnsizedProof};
pub use outcome::{
    Check, CheckResult, CheckVerdict, Failure, NotEvaluated, Outcome, PayloadSummary, Report,
    Summary,
};
