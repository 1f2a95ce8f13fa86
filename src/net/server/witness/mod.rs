//! witness: a witness over HTTP, C2SP tlog-witness v1
//! (spec/witness.md "Witness service").
//!
//! Boundary: transport only. `POST /add-checkpoint` bodies go, size-capped
//! and within a time limit, to [`Witness::add_checkpoint`], which parses,
//! decides, cosigns and commits the per-origin compare-and-swap before it
//! returns; this module maps its result to the status, content type and
//! body tlog-witness names (200, 400, 403, 404, 409 `text/x.tlog.size`,
//! 422). `GET /<origin hash>/checkpoint` serves the latest cosigned
//! checkpoint ("Monitor Retrieval Mechanism"). Anything else is 404, a
//! known path with another method 405.

mod serve;
mod status;

pub use crate::net::server::RequestSink;
pub use serve::{WitnessServeError, WitnessServer};

use crate::limits::MAX_ADD_CHECKPOINT_BYTES;
use std::time::Duration;

/// Largest `add-checkpoint` body read: the parser's own limit
/// (`limits::MAX_ADD_CHECKPOINT_BYTES`: an old line, 63 proof lines, a note).
pub const MAX_WITNESS_BODY_BYTES: usize = MAX_ADD_CHECKPOINT_BYTES;
/// Most open connections; the accept loop waits for one to close beyond it.
pub const MAX_WITNESS_CONNECTIONS: usize = 1024;
/// Time allowed for a request's headers to arrive.
pub const WITNESS_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed for a request body to arrive.
pub const WITNESS_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// The one write path.
pub const ADD_CHECKPOINT_PATH: &str = "/add-checkpoint";
