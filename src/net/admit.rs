//! admit: decide whether one submitted DSSE envelope may enter the log.
//!
//! The same checks, in the same order and with the same reason codes, as
//! `rcpt log append` (spec/log.md "Entries"): the envelope parses strictly,
//! its payload type is the receipt type, the payload is canonical DAG-CBOR
//! keeping every invariant, the entry fits. Then, because a service accepts
//! envelopes from the network, the signature: at least one signature must
//! verify (strict Ed25519 over PAE) under an accepted issuer key whose name
//! equals the payload's `issuer` (spec/service.md "Accepted issuers").
//!
//! (The log's own admission function is moving into `rcpt::log`; this one
//! is its twin until the two are unified, and `tests/serve.rs` checks that
//! `log append` and `POST /add` refuse the same inputs with the same codes.)

use crate::dsse::{self, Envelope, EnvelopeError, SignatureCheck};
use crate::keys::keyid;
use crate::limits::MAX_ENTRY_BYTES;
use crate::trust::Issuer;

/// An envelope that may enter the log.
#[derive(Clone, Debug)]
pub struct Admitted {
    /// The parsed envelope.
    pub envelope: Envelope,
    /// Its log entry bytes (DAG-CBOR of the envelope).
    pub entry: Vec<u8>,
    /// `blake3:` identity of the payload.
    pub receipt_id: String,
}

/// Why an envelope was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The envelope itself is refused (HTTP 400).
    #[error("{reason}: {detail}")]
    Invalid {
        /// Stable reason code (as `rcpt log append --json` prints).
        reason: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// No accepted issuer signed it under its own name (HTTP 403).
    #[error("{reason}: {detail}")]
    NotAccepted {
        /// Stable reason code.
        reason: &'static str,
        /// What was wrong.
        detail: String,
    },
}

impl Refusal {
    fn invalid(reason: &'static str, detail: impl std::fmt::Display) -> Refusal {
        Refusal::Invalid {
            reason,
            detail: detail.to_string(),
        }
    }

    /// The stable reason code.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Invalid { reason, .. } | Refusal::NotAccepted { reason, .. } => reason,
        }
    }

    /// The human detail.
    pub fn detail(&self) -> &str {
        match self {
            Refusal::Invalid { detail, .. } | Refusal::NotAccepted { detail, .. } => detail,
        }
    }
}

/// The reason code of an envelope that does not parse (as `log append`).
fn envelope_reason(e: &EnvelopeError) -> &'static str {
    match e {
        EnvelopeError::TooLarge { .. } => "envelope_too_large",
        EnvelopeError::TooManySignatures { .. } => "too_many_signatures",
        EnvelopeError::NoSignatures => "no_signatures",
        _ => "malformed_envelope",
    }
}

/// Admit `json` (one DSSE envelope) for a log accepting `accepted` issuers.
pub fn admit(json: &[u8], accepted: &[Issuer]) -> Result<Admitted, Refusal> {
    let envelope =
        Envelope::from_json(json).map_err(|e| Refusal::invalid(envelope_reason(&e), &e))?;
    if envelope.payload_type != crate::constants::RECEIPT_PAYLOAD_TYPE {
        let detail = format!(
            "payloadType is {:?}, not {:?}",
            envelope.payload_type,
            crate::constants::RECEIPT_PAYLOAD_TYPE
        );
        return Err(Refusal::invalid("wrong_payload_type", detail));
    }
    let payload = crate::receipt::payload_from_cbor(&envelope.payload)
        .map_err(|e| Refusal::invalid(e.reason_code(), &e))?;
    let entry = envelope.to_entry();
    if entry.len() > MAX_ENTRY_BYTES {
        let detail = format!("log entry is {} bytes, over {MAX_ENTRY_BYTES}", entry.len());
        return Err(Refusal::invalid("entry_too_large", detail));
    }
    check_issuer(&envelope, &payload.receipt.issuer, accepted)?;
    Ok(Admitted {
        envelope,
        entry,
        receipt_id: payload.id.to_string(),
    })
}

/// At least one signature by an accepted key named `issuer`; a signature
/// attributed (by keyid) to an accepted key that does not verify is refused.
fn check_issuer(envelope: &Envelope, issuer: &str, accepted: &[Issuer]) -> Result<(), Refusal> {
    let keys: Vec<_> = accepted.iter().map(|i| i.key).collect();
    match dsse::check_signatures(envelope, &keys) {
        SignatureCheck::Failed { index, keyid } => Err(Refusal::invalid(
            "signature.invalid",
            format!("signature {index} (keyid {keyid}) does not verify under the accepted key it names"),
        )),
        SignatureCheck::NotEvaluated => Err(Refusal::NotAccepted {
            reason: "issuer.not_accepted",
            detail: "no signature verifies under an accepted issuer key".to_string(),
        }),
        SignatureCheck::Verified { keyids } => {
            let named = accepted
                .iter()
                .any(|i| i.name == issuer && keyids.contains(&keyid(&i.key)));
            if named {
                return Ok(());
            }
            let signers: Vec<&str> = accepted
                .iter()
                .filter(|i| keyids.contains(&keyid(&i.key)))
                .map(|i| i.name.as_str())
                .collect();
            Err(Refusal::NotAccepted {
                reason: "issuer.mismatch",
                detail: format!(
                    "signed by accepted issuer {signers:?}, but the receipt names issuer {issuer:?}"
                ),
            })
        }
    }
}
