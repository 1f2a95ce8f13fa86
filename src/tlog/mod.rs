//! tlog: the transparency-log specifications, independent of what a log
//! holds.
//!
//! - [`merkle`]: RFC 6962 / RFC 9162 hashing, inclusion and consistency
//!   proofs;
//! - [`tiles`]: C2SP tlog-tiles encodings, the object names as types
//!   ([`tiles::path`]) and the reading of stored tiles;
//! - [`note`]: C2SP signed-note and tlog-checkpoint;
//! - [`cosig`]: C2SP tlog-cosignature lines;
//! - [`policy`]: C2SP tlog-policy files and the witness quorum;
//! - [`proof`]: C2SP tlog-proof@v1 files.
//!
//! Boundary: the tlog layer uses only the shared basics (digest, limits,
//! keys, constants, io). It never imports the receipt layer, storage, the
//! log or the network: an entry is bytes here (`tests/layers.rs` enforces it).

pub mod cosig;
pub mod merkle;
pub mod note;
pub mod policy;
pub mod proof;
pub mod tiles;
