//! rcpt: signed receipts that anyone can check offline.
//!
//! A gate decides on a proposed change and issues a *receipt*: one value
//! whose canonical DAG-CBOR bytes give its identity (BLAKE3), signed with
//! Ed25519 in a DSSE envelope. A *log* batches receipts into an RFC 6962
//! Merkle tree stored as C2SP tiles and publishes signed checkpoints. The
//! *verifier* re-checks a receipt with the network off: signature, log
//! inclusion, identifier consistency, append-only consistency.
//!
//! Data flows top to bottom through the modules:
//! bytes → [`canonical`] value → [`receipt`] → [`dsse`] envelope → log
//! entry → [`merkle`] tree → [`tiles`] / [`log`] → [`note`] checkpoint →
//! [`bundle`] → [`verify`] outcome.
//!
//! Witnesses (C2SP): [`cosig`] signs and checks `cosignature/v1` lines,
//! [`policy`] reads tlog-policy files and weighs a cosigned checkpoint
//! against the quorum, [`witness`] decides and records `add-checkpoint`
//! requests, [`tlogproof`] reads and writes tlog-proof@v1 files.
//!
//! The library never prints and never exits: it returns typed results, and
//! the `rcpt` binary decides what a person sees and the exit status.

#![forbid(unsafe_code)]

pub mod bundle;
pub mod canonical;
pub mod constants;
pub mod cosig;
pub mod digest;
pub mod dsse;
pub mod gate;
pub mod io;
pub mod keys;
pub mod limits;
pub mod log;
pub mod merkle;
#[cfg(feature = "net")]
pub mod net;
pub mod note;
pub mod policy;
pub mod reason;
pub mod receipt;
#[cfg(feature = "s3")]
pub mod s3;
pub mod storage;
pub mod strictjson;
pub mod tiles;
pub mod tlogproof;
pub mod trust;
pub mod verify;
pub mod witness;
