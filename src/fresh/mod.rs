//! fresh: a receipt's `read_set`, re-read now under a root directory.
//!
//! Boundary: the rules that turn a resource name into bytes to digest, used
//! both to make a read set (`rcpt receipt read-set`) and to check one
//! (`rcpt verify --fresh`), so a gate and a CI job agree byte for byte
//! (spec/gate.md "Freshness"):
//!
//! - `filesystem` and `git` substrates: a resource is a relative path under
//!   ROOT in normal form (no empty, `.` or `..` component, not absolute); a
//!   path that leaves ROOT, directly or through a symlink, is refused; its
//!   digest is over the file's bytes; only regular files are read.
//! - `git`: a resource under `refs/` names a ref of the repository at ROOT;
//!   its digest is over the ASCII lowercase hex object id it resolves to.
//!   The resource `HEAD` is the work tree's `HEAD`, by the same rule (the
//!   commit checked out, whatever the branch is called).
//! - other substrates have no freshness rule.
//!
//! Reads only: nothing is written, no process is run, no socket opened.

pub mod git;
mod read_set;
mod resource;

pub use read_set::{ItemState, ReadSetError, check_read_set, read_set};
pub use resource::{Reader, ResourceError, check_relative};

/// The git resource naming the work tree's `HEAD` (spec/gate.md).
pub const HEAD: &str = "HEAD";
