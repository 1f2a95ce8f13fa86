//! payload_checks: the checks of a bundle's payload (canonical DAG-CBOR,
//! schema, invariants, receipt id), as free functions the
//! [`super::Verifier`] calls (spec/verify.md "Checks").

use super::checks::{PayloadState, fail, name, pass, skip};
use super::{Check, CheckResult, CheckVerdict, NotEvaluated, Reason};
use crate::digest::Digest;
use crate::limits::MAX_PAYLOAD_BYTES;
use crate::receipt::canonical::dagcbor;
use crate::receipt::{Invariant, Receipt, SchemaError};

/// The checks that need a receipt payload, in report order.
pub(super) fn payload_chain() -> Vec<&'static str> {
    let mut names = vec![
        name::SIGNATURE,
        name::PAYLOAD_CANONICAL,
        name::PAYLOAD_SCHEMA,
    ];
    names.extend(Invariant::ALL.iter().map(|i| i.check_name()));
    names.push(name::RECEIPT_ID);
    names
}

/// Canonical decode, schema, and each invariant, each its own check.
pub(super) fn payload_checks(payload: &[u8], checks: &mut Vec<Check>) -> PayloadState {
    if payload.len() > MAX_PAYLOAD_BYTES {
        let detail = format!(
            "payload is {} bytes, over the limit of {MAX_PAYLOAD_BYTES}",
            payload.len()
        );
        return not_canonical(checks, Reason::PayloadTooLarge, detail);
    }
    let value = match dagcbor::decode_ref(payload) {
        Ok(v) => v,
        Err(e) => return not_canonical(checks, e.reason_code(), format!("payload: {e}")),
    };
    checks.push(pass(name::PAYLOAD_CANONICAL));
    let receipt = match Receipt::from_ref(&value) {
        Ok(r) => r,
        Err(e) => {
            let (result, state) = match &e {
                SchemaError::UnsupportedVersion(_) => (
                    Err(NotEvaluated {
                        reason: e.reason_code(),
                        detail: e.to_string(),
                    }),
                    PayloadState::Unsupported,
                ),
                _ => (
                    fail(e.reason_code(), e.to_string()),
                    PayloadState::Unread(name::PAYLOAD_SCHEMA),
                ),
            };
            checks.push(Check {
                name: name::PAYLOAD_SCHEMA,
                result,
            });
            skip_invariants(checks, name::PAYLOAD_SCHEMA);
            return state;
        }
    };
    checks.push(pass(name::PAYLOAD_SCHEMA));
    for invariant in Invariant::ALL {
        let result = match receipt.check(invariant) {
            Ok(()) => Ok(CheckVerdict::Pass),
            Err(v) => fail(invariant.reason_code(), v.detail),
        };
        checks.push(Check {
            name: invariant.check_name(),
            result,
        });
    }
    PayloadState::Decoded(Box::new(receipt))
}

/// The payload is not canonical DAG-CBOR (or too large to read): that
/// check fails with `reason` and `detail`; the schema and invariants are
/// not run.
fn not_canonical(checks: &mut Vec<Check>, reason: Reason, detail: String) -> PayloadState {
    checks.push(Check {
        name: name::PAYLOAD_CANONICAL,
        result: fail(reason, detail),
    });
    skip(checks, name::PAYLOAD_SCHEMA, name::PAYLOAD_CANONICAL);
    skip_invariants(checks, name::PAYLOAD_CANONICAL);
    PayloadState::Unread(name::PAYLOAD_CANONICAL)
}

/// Mark every invariant check as not run because `cause` did not pass.
fn skip_invariants(checks: &mut Vec<Check>, cause: &str) {
    for invariant in Invariant::ALL {
        skip(checks, invariant.check_name(), cause);
    }
}

/// The claimed id must parse and equal BLAKE3 of the payload bytes.
pub(super) fn receipt_id_check(claimed: &str, id: &Digest) -> CheckResult {
    match claimed.parse::<Digest>() {
        Ok(c) if c == *id => Ok(CheckVerdict::Pass),
        Ok(_) => fail(
            Reason::ReceiptIdMismatch,
            format!("bundle claims receipt id {claimed}, but the payload's id is {id}"),
        ),
        Err(e) => fail(
            Reason::ReceiptIdMalformed,
            format!("receipt_id \"{claimed}\": {e}"),
        ),
    }
}
