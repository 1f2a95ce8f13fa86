//! monitor: who watches the log (`rcpt log monitor`, spec/monitor.md).
//!
//! A round reads a log's checkpoint from a source (a directory, an object
//! store, a URL: any [`PublicRead`]), verifies it under the log key (and,
//! with a policy, its witness quorum), proves it consistent with the one
//! kept in the state directory from the source's tiles, then reads every
//! new entry bundle by bundle: each bundle's leaf hashes are pushed onto
//! the tree's edge and the tree they give is proven a prefix of the signed
//! one *before* any of its entries is reported; then each entry is
//! decoded, its signatures checked against the watched keys, and matched
//! against the watch list ([`Watch`]). Events go to a [`Sink`] (the CLI
//! prints them and runs the hook) before the state covering them is saved
//! ([`state`]): delivery is at least once, and nothing is skipped.
//!
//! Work and memory follow what was verified: the only things sized by the
//! checkpoint's claimed tree size are loops that stop at the first tile the
//! source cannot serve; one entry bundle is held at a time.
//!
//! Boundary: no printing, no process; the hook and the output are the
//! binary's. Uses `log` (checkpoint verification), `storage::tiles` (the
//! one tile reader), `tlog` (proofs, notes, policy), `receipt` (the
//! envelope and payload checks) and `trust`.

pub mod alarms;
mod entry;
mod error;
mod event;
#[cfg(feature = "net")]
pub mod http;
mod round;
mod sink;
pub mod state;
mod watch;

pub use alarms::{Ack, AckError, Alarm};
pub use error::MonitorError;
pub use event::{Event, EventKind, event_id};
pub use round::{Monitor, RoundReport};
pub use sink::{Sink, SinkError};
pub use state::{StateDir, StateError};
pub use watch::{Watch, WatchError};

/// During a scan, the state is saved after an entry bundle once this long
/// has passed since the last save (and after every bundle when the sink
/// runs a hook, [`Sink::hooked`]); always at the end of a round, at a stop
/// and before an error returns. A monitor killed repeats at most the events
/// since the last save: about this long of scanning, or one bundle.
pub const STATE_SAVE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);
