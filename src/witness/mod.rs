//! witness: a C2SP tlog-witness v1 witness, without the HTTP.
//!
//! Boundary: a witness directory (settings, the policy of logs it
//! witnesses, per-origin state), the `add-checkpoint` decision as a pure
//! function of (known logs, stored tree head, request) ([`decide`]), and
//! [`Witness::add_checkpoint`], which parses a request body, decides, signs
//! a `cosignature/v1` and commits the new state by compare-and-swap before
//! returning. An HTTP server only maps the result to a response
//! ([`Refusal::status`], [`Refusal::content_type`], [`Refusal::body`]).
//! Layout and rules: `spec/witness.md`.
//!
//! ```text
//! DIR/settings.json   name, public key, verifier key, key file path
//! DIR/policy          tlog-policy file: its `log` lines are the logs witnessed
//! DIR/state/<hex SHA-256(origin)>        latest cosigned checkpoint of that origin
//! DIR/state/<hex SHA-256(origin)>.lock   its compare-and-swap lock
//! DIR/tmp/            temporary files, renamed into place once durable
//! ```

mod decide;
mod directory;
mod request;
mod state;

pub use decide::{Accepted, BadRequest, Forbidden, Refusal, Unprocessable, decide};
pub use directory::{AddCheckpointError, Cosigned, Settings, Witness, WitnessError};
pub use request::{AddCheckpointRequest, RequestError, parse_size_body};
pub use state::{CasError, Record, RecordError, StateError, StateStore, TreeHead, origin_hash};

/// `Content-Type` of a 200 answer and of refusals other than 409.
pub use crate::constants::TEXT_CONTENT_TYPE;
/// Version of the settings file format.
pub const SETTINGS_FORMAT: u64 = 1;
/// An error and its sources, joined by ": " (one line for people).
pub use crate::io::error_chain;
