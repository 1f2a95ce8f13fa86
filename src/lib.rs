//! rcpt: signed receipts that anyone can check offline.
//!
//! A gate decides on a proposed change and issues a *receipt*: one value
//! whose canonical DAG-CBOR bytes give its identity (BLAKE3), signed with
//! Ed25519 in a DSSE envelope. A *log* batches receipts into an RFC 6962
//! Merkle tree stored as C2SP tiles and publishes signed checkpoints. The
//! *verifier* re-checks a receipt with the network off: signature, log
//! inclusion, identifier consistency, append-only consistency.
//!
//! # Layers
//!
//! Each layer uses only the layers above it in this list; `tests/layers.rs`
//! fails when a `use` crosses the other way (spec/architecture.md).
//!
//! 1. **Shared basics**: [`constants`], [`digest`], [`io`] (the one reader
//!    and the one atomic writer), [`keys`], [`limits`], [`reason`],
//!    [`strictjson`], [`text`] (peer text escaped for printing).
//! 2. **The receipt** ([`receipt`]: the payload model, `canonical`, `dsse`,
//!    `require`) and, beside it and independent of it, **the tlog specs**
//!    ([`tlog`]: merkle, tiles, note, cosig, policy, proof).
//! 3. **Where they meet**: [`bundle`], [`trust`], [`fresh`] (a read set
//!    re-read from a file system or git repository).
//! 4. **Storage** ([`storage`]: the traits, a directory, S3, the tile reader).
//! 5. **The log and the witness** ([`log`], every way in through
//!    [`log::intake`]; [`witness`]), then
//!    [`verify`] and the issuing [`gate`], then the network ([`net`]).
//!
//! The `rcpt` binary (`src/bin/rcpt/`) is the only place that prints or
//! exits; the library never imports it.
//!
//! Data flows: bytes → `receipt::canonical` value → [`receipt`] →
//! `receipt::dsse` envelope → log entry → `tlog::merkle` tree →
//! `tlog::tiles` / [`log`] → `tlog::note` checkpoint → [`bundle`] →
//! [`verify`] outcome.

#![forbid(unsafe_code)]
// No function of the library over 80 lines (clippy.toml sets the threshold).
#![deny(clippy::too_many_lines)]

pub mod bundle;
pub mod constants;
pub mod digest;
pub mod fresh;
pub mod gate;
pub mod io;
pub mod keys;
pub mod limits;
pub mod log;
pub mod mcp;
pub mod monitor;
#[cfg(feature = "net")]
pub mod net;
pub mod reason;
pub mod receipt;
pub mod storage;
pub mod strictjson;
pub mod text;
pub mod tlog;
pub mod trust;
pub mod verify;
pub mod witness;
