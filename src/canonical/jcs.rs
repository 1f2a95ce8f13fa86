//! jcs: RFC 8785 JSON canonicalisation of a receipt value, and the
//! `sha256:` interop digest over it.
//!
//! STUB: interface fixed, body to be written (helper A).

use super::Value;
use crate::digest::Digest;

/// RFC 8785 bytes of `value`. Byte strings have no JSON form: `None`.
pub fn canonical_json(value: &Value) -> Option<Vec<u8>> {
    let _ = value;
    todo!()
}

/// `sha256:` over the RFC 8785 bytes: printed for JSON ecosystems, never identity.
pub fn interop_digest(value: &Value) -> Option<Digest> {
    canonical_json(value).map(|b| Digest::sha256(&b))
}
