//! gate: receipts from real work in a git work tree (spec/gate.md).
//!
//! The issuing side, in the order the seeds ask for: identify the change
//! ([`change`]), run the policy's checks ([`policy`]) in a clean copy
//! ([`clean`], [`run`]), keep their evidence in the store ([`store`],
//! [`evidence`]), decide (admit, deny, or no verdict), and build the
//! receipt whose read set pins what was tested. The gate runs `git` and the
//! checks as processes; the verifier ([`crate::verify`]) never imports it.
//!
//! Boundary: this folder is the issuing engine; the binary
//! (`src/bin/rcpt/cli/gate/`) only parses arguments, prints and maps
//! [`GateError`] kinds to exit statuses. Engines, one file each:
//!
//! | file | engine |
//! |---|---|
//! | [`check`] | `gate check`: the change, its checks, the read set tested |
//! | [`apply`] | `gate apply`: a patch's change, its inverse kept, the compare and swap |
//! | [`undo`] | `gate undo`: an applied receipt's inverse restored |
//! | [`journal`] | writing files so a crash leaves all before or all after; recovery |
//! | [`rules`] | the policy's Rego module, evaluated in a confined process |
//! | [`decide`] | the combination of rules, checks and approvals (every substrate) |
//! | [`conclude`] | the end of a git evaluation: approvals judged, evidence, verdict |
//! | [`approval`] | `gate approve`'s receipts, and whether one counts |
//! | [`escalation`] | the record an escalate verdict's ticket names |
//! | [`issue`] | who signs ([`Signer`]) and signing a checked receipt |
//! | [`show`] | a receipt's evidence, re-hashed |
//!
//! Three outcomes apart: a [`check::Decision`] carries a verdict (admit,
//! deny or escalate); rules that could not be evaluated, a check that
//! could not run, a change that cannot be identified, or a store that
//! cannot hold the evidence is a [`GateError`]: no verdict.

pub mod apply;
pub mod approval;
pub mod change;
pub mod check;
pub mod clean;
pub mod conclude;
pub mod decide;
pub mod error;
pub mod escalation;
pub mod evidence;
pub mod git;
pub mod inverse;
pub mod issue;
pub mod journal;
pub mod park;
pub mod patch;
pub mod policy;
pub mod rules;
pub mod run;
pub mod show;
pub mod store;
pub mod undo;

pub use check::{Decision, Request, evaluate, identify};
pub use error::GateError;
pub use issue::{IssuerError, Signed, Signer, issue, issuer_name, sign};
pub use show::{ShowError, Shown, ShownApproval, show, show_approval};
