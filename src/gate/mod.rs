//! gate: does a verified receipt let THIS change through, now?
//!
//! Boundary: what a receipt must say ([`require`]) and whether its read set
//! still holds ([`fresh`], with git refs read by [`gitref`]). The verifier
//! runs these after the authenticity checks; `rcpt receipt read-set` uses
//! [`fresh::read_set`] so that gates and verifiers read by the same rules
//! (spec/gate.md).

pub mod fresh;
pub mod gitref;
pub mod require;
