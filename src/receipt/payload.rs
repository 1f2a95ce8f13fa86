//! payload: the two paths that make a payload trustworthy,
//! [`payload_from_json`] (issuing) and [`payload_from_cbor`] (verifying,
//! logging), and why a payload was refused (spec/receipt.md).

use super::{InvariantViolation, Receipt, SchemaError};
use crate::digest::Digest;
use crate::limits::MAX_PAYLOAD_BYTES;
use crate::reason::Reason;
use crate::receipt::canonical::{Value, ValueRef, dagcbor, identity};

/// A payload that passed every issuing check.
#[derive(Clone, Debug)]
pub struct ValidPayload {
    /// Canonical DAG-CBOR bytes.
    pub bytes: Vec<u8>,
    /// The decoded value.
    pub value: Value,
    /// The typed receipt.
    pub receipt: Receipt,
    /// `blake3:` identity of `bytes`.
    pub id: Digest,
}

/// Why a payload was refused, with a stable reason code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// The JSON text could not be read as a data-model value.
    #[error("payload JSON: {0}")]
    Json(#[from] crate::receipt::canonical::json::JsonError),
    /// The CBOR bytes are not canonical DAG-CBOR of the data model.
    #[error("payload CBOR: {0}")]
    Cbor(#[from] crate::receipt::canonical::dagcbor::DecodeError),
    /// Over `MAX_PAYLOAD_BYTES` once encoded.
    #[error("payload is {0} bytes, over the limit of {max}", max = crate::limits::MAX_PAYLOAD_BYTES)]
    TooLarge(usize),
    /// Schema error.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// First broken invariant (all are listed in `violations`).
    #[error("{}", .0.first().map(|v| v.to_string()).unwrap_or_default())]
    Invariants(Vec<InvariantViolation>),
}

impl PayloadError {
    /// Stable reason code of this refusal: `payload.malformed` (JSON that is
    /// not a data-model value, CBOR outside the data model),
    /// `payload.too_large` (over [`MAX_PAYLOAD_BYTES`]), `payload.non_canonical`, `payload.schema`,
    /// `payload.version_unsupported`, or the first broken invariant's code.
    pub fn reason_code(&self) -> Reason {
        match self {
            PayloadError::Json(_) => Reason::PayloadMalformed,
            PayloadError::TooLarge(_) => Reason::PayloadTooLarge,
            PayloadError::Cbor(e) => e.reason_code(),
            PayloadError::Schema(e) => e.reason_code(),
            PayloadError::Invariants(v) => v
                .first()
                .map_or(Reason::PayloadMalformed, |v| v.invariant.reason_code()),
        }
    }
}

/// Issuing path: JSON text -> value -> receipt -> invariants -> canonical bytes.
///
/// The bytes are the canonical DAG-CBOR of the value read, so any key order
/// or whitespace of the JSON gives the same bytes and the same id.
pub fn payload_from_json(json: &[u8]) -> Result<ValidPayload, PayloadError> {
    let value = crate::receipt::canonical::json::from_json(json)?;
    let receipt = checked(&value.borrow())?;
    let bytes = dagcbor::encode(&value);
    if bytes.len() > MAX_PAYLOAD_BYTES {
        return Err(PayloadError::TooLarge(bytes.len()));
    }
    let id = identity(&bytes);
    Ok(ValidPayload {
        bytes,
        value,
        receipt,
        id,
    })
}

/// Verifying/logging path: strict decode -> receipt -> invariants.
///
/// The id is BLAKE3 over the bytes as received; the strict decoder has
/// already refused every byte string that is not the canonical form.
pub fn payload_from_cbor(bytes: &[u8]) -> Result<ValidPayload, PayloadError> {
    let (value, receipt) = read_cbor(bytes)?;
    Ok(ValidPayload {
        bytes: bytes.to_vec(),
        value: value.to_value(),
        receipt,
        id: identity(bytes),
    })
}

/// [`payload_from_cbor`] without the copies: the checked receipt and its
/// id, decoded from a value borrowed from `bytes` ([`dagcbor::decode_ref`]).
pub fn receipt_from_cbor(bytes: &[u8]) -> Result<(Receipt, Digest), PayloadError> {
    let (_, receipt) = read_cbor(bytes)?;
    Ok((receipt, identity(bytes)))
}

/// Size limit, strict decode (borrowed), schema and invariants.
fn read_cbor(bytes: &[u8]) -> Result<(ValueRef<'_>, Receipt), PayloadError> {
    if bytes.len() > MAX_PAYLOAD_BYTES {
        return Err(PayloadError::TooLarge(bytes.len()));
    }
    let value = dagcbor::decode_ref(bytes)?;
    let receipt = checked(&value)?;
    Ok((value, receipt))
}

/// Schema, then every invariant.
fn checked(value: &ValueRef<'_>) -> Result<Receipt, PayloadError> {
    let receipt = Receipt::from_ref(value)?;
    let violations = receipt.violations();
    if violations.is_empty() {
        Ok(receipt)
    } else {
        Err(PayloadError::Invariants(violations))
    }
}
