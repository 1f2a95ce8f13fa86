//! intake: the one library path from envelopes to durable, published log
//! entries and, on request, their bundles. Every way into a log goes
//! through it: `rcpt log append`, `rcpt log serve`'s `POST /add`, the
//! gate's `--log`, and the tool-call proxy's receipts.
//!
//! Boundary: a log's [`Location`] (a directory, `s3://BUCKET/PREFIX`; a
//! service's URL is refused here: it is submitted to by `net`) or its
//! [`Store`](crate::storage::Store) in; envelope JSON in; out, for each
//! envelope its index (or a typed [`Refusal`](crate::log::admit::Refusal)),
//! returned only once its entry and the checkpoint naming it are durable
//! and published, and its bundle from [`Published::bundle`] (built by
//! `log::bundle`, the one place). The intake owns admission
//! (`log::admit`), batching (`batch.rs`), the one writer and its
//! reopening after a failure (`keeper.rs`), and publication
//! (`publish.rs`): a witnessed log's checkpoint is cosigned through the
//! [`Witness`] trait, which the network layer implements; this module
//! never uses `net`. It never prints and never exits: errors are
//! [`IntakeError`]s that keep their causes.
//!
//! Engines: `location.rs` (naming a log, opening its store), `open.rs`
//! (the [`Intake`], its key and accepted issuers), `append.rs`
//! (admission, the durable append, an all-or-nothing batch), `batch.rs`
//! (a stream in durable batches, outcomes in input order), `publish.rs`
//! (the checkpoint published, witnessing), `keeper.rs` (the writer kept),
//! `error.rs`.

mod append;
mod batch;
mod error;
mod keeper;
mod location;
mod open;
mod publish;

pub use append::Logged;
pub use batch::{ADMIT_CHUNK, Offered, Outcome};
pub use error::{IntakeError, NotCosigned};
pub use keeper::{HOLD_CHECK_INTERVAL, REOPEN_FIRST_DELAY, REOPEN_MAX_DELAY, Reopen, Tended};
pub use location::{DEFAULT_LEASE_TTL, Location, StoreSettings};
pub use open::{Intake, KeyChoice, Options, open_log, probe, read_log_key};
pub use publish::{Cosigned, Published, Witness, Witnessed, log_signed_only};
