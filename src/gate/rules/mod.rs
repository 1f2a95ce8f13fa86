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

pub mod bounds;
pub mod error;
pub mod input;
pub mod module;
pub mod sandbox;
pub mod vm;

pub use bounds::*;
pub use error::RulesError;
pub use module::{Module, RuleOutcome, Rules, Started, is_reason};
pub use sandbox::Evaluator;
