//! lease: one sequencer at a time on a bucket, by conditional writes to one
//! lease object (spec/storage.md "The lease").
//!
//! - **Take** (`claim`): `If-None-Match: *` when there is no lease
//!   object; `If-Match` on its ETag when it says `released`, when it names
//!   one of this process's [`FormerHolders`] (no one renews it: taken as
//!   soon as none of that holder's writes can still land), or when a
//!   contender has seen the same ETag unchanged for longer than the TTL
//!   (the holder stopped renewing).
//! - **Renew** (`held`): every `ttl / 4` (contenders look every
//!   `ttl / 8`), `If-Match` on the holder's last ETag, with a body that
//!   always differs (its `seq` grows with every write sent, answered or
//!   not), so the ETag always moves and a late answer is never mistaken
//!   for a new one.
//! - **Expire**: the holder counts its lease valid until the instant it
//!   *sent* its last successful renewal plus `ttl - margin`; a contender
//!   takes over only after it *read* one ETag and then saw no change for
//!   `ttl + margin`. Sending precedes the server applying, which precedes
//!   the contender's read, so the holder's time runs out first, on any two
//!   monotonic clocks whose rates differ by less than the margin (a tenth
//!   of the TTL). No wall clocks are compared.
//! - **Lose**: a holder whose renewal is refused by another holder's write,
//!   or that could not renew before its time ran out, is lost for good:
//!   [`Lease::check`] fails from then on, and the writer stops.
//! - **Release**: marks the object `released`; a refusal or a lost answer
//!   is settled by reading the object back (a renewal of ours answered
//!   late moved the ETag: release over it).
//!
//! The lease is the first fence; the checkpoint's `If-Match` is the second:
//! a writer paused past its lease (a stopped process) still cannot publish
//! over a checkpoint its successor wrote.

mod claim;
mod held;
mod record;

pub use held::{Lease, LeaseWatch};
pub use record::{
    DEFAULT_TTL, FORMER_HOLDERS_KEPT, FormerHolders, LEASE_FORMAT, LeaseConfig, LeaseError,
    LostReason, MAX_LEASE_BYTES, MAX_TTL, MIN_POLL, MIN_TTL, RELEASE_ROUNDS,
};
