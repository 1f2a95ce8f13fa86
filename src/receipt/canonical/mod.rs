//! canonical: the receipt data model and its two encodings.
//!
//! One value ([`Value`]), two byte forms: canonical DAG-CBOR
//! ([`dagcbor`], the identity) and RFC 8785 JSON ([`jcs`], the interop
//! digest). JSON input is read by [`json`]. No I/O, no signatures.

pub mod dagcbor;
pub mod jcs;
pub mod json;
mod value;

pub use value::{MAX_SAFE_INTEGER, Value, ValueRef};

use crate::digest::Digest;

/// Receipt identity: `blake3:` over the canonical DAG-CBOR bytes as received.
pub fn identity(cbor_bytes: &[u8]) -> Digest {
    Digest::blake3(cbor_bytes)
}
