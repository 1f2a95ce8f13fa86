//! dagcbor: strict canonical DAG-CBOR for the receipt data model.
//!
//! STUB: interface fixed, body to be written (helper A).

use super::Value;

/// Why bytes were refused by the strict decoder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Placeholder until the codec lands.
    #[error("not implemented")]
    Unimplemented,
}

impl DecodeError {
    /// Stable reason code: `payload.non_canonical` for well-formed CBOR that
    /// is not in canonical form, `payload.malformed` otherwise.
    pub fn reason_code(&self) -> &'static str {
        "payload.malformed"
    }
}

/// Canonical DAG-CBOR encoding of `value`.
pub fn encode(value: &Value) -> Vec<u8> {
    let _ = value;
    todo!()
}

/// Decode canonical bytes only; anything else is refused.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    let _ = bytes;
    Err(DecodeError::Unimplemented)
}
