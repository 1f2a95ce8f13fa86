//! admit: which envelopes a log accepts, decided in one place for every
//! way in (`rcpt log append`, the HTTP `POST /add`).
//!
//! Boundary: envelope JSON bytes and the log's accepted issuers in; the
//! entry bytes to append (with the receipt id and what was checked) or a
//! typed [`Refusal`] out. No I/O. The rule (`spec/log.md`, "Entries" and
//! "Accepted issuers"):
//!
//! 1. the envelope parses (DSSE JSON, within the limits);
//! 2. its `payloadType` is the receipt type;
//! 3. with accepted issuers: no signature whose keyid names an accepted
//!    key fails, and at least one verifies under an accepted key
//!    (`dsse::check_signatures`, strict Ed25519 over PAE);
//! 4. the payload is a canonical version-1 receipt keeping every invariant;
//! 5. with accepted issuers: one verified key belongs to an accepted issuer
//!    whose name equals the receipt's `issuer`;
//! 6. the log entry fits the entry limit.
//!
//! Signatures are checked before the payload is decoded, so an unsigned or
//! forged envelope costs no payload parsing when issuers are configured.

use crate::constants::RECEIPT_PAYLOAD_TYPE;
use crate::limits::MAX_ENTRY_BYTES;
use crate::reason::Reason;
use crate::receipt::dsse::{self, Envelope, EnvelopeError, SignatureCheck};
use crate::receipt::{self, PayloadError};
use crate::trust::{Issuer, Trust, TrustError};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The issuers whose receipts a log accepts: at least one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptedIssuers {
    issuers: Vec<Issuer>,
    /// The issuers' keys with their keyids, in the order of `issuers`.
    keys: dsse::TrustedKeys,
}

/// Why a set of accepted issuers could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AcceptedError {
    /// The trust file is not valid.
    #[error("accepted issuers")]
    Trust(#[source] TrustError),
    /// The trust file lists no issuer, so the log would accept nothing.
    #[error(
        "the trust file lists no issuers; a log with accepted issuers needs at least one \
         (\"issuers\": [{{\"name\": ..., \"public_key\": ...}}])"
    )]
    NoIssuers,
}

impl AcceptedIssuers {
    /// The issuers of a trust file (its `logs` are not used here).
    pub fn from_trust(trust: &Trust) -> Result<AcceptedIssuers, AcceptedError> {
        if trust.issuers.is_empty() {
            return Err(AcceptedError::NoIssuers);
        }
        Ok(AcceptedIssuers {
            issuers: trust.issuers.clone(),
            keys: dsse::TrustedKeys::new(&trust.issuer_keys()),
        })
    }

    /// Parse a trust file (`trust::Trust::from_json`) and keep its issuers.
    pub fn from_json(bytes: &[u8]) -> Result<AcceptedIssuers, AcceptedError> {
        let trust = Trust::from_json(bytes).map_err(AcceptedError::Trust)?;
        AcceptedIssuers::from_trust(&trust)
    }

    /// The issuers as a trust file: `{"issuers": [{"name", "public_key"}]}`,
    /// the form a log keeps under `.rcpt/`.
    pub fn to_json(&self) -> Vec<u8> {
        let issuers: Vec<serde_json::Value> = self
            .issuers
            .iter()
            .map(|i| {
                serde_json::json!({
                    "name": i.name,
                    "public_key": STANDARD.encode(i.key.as_bytes()),
                })
            })
            .collect();
        let mut out = serde_json::json!({ "issuers": issuers }).to_string();
        out.push('\n');
        out.into_bytes()
    }

    /// The accepted issuers, in file order.
    pub fn issuers(&self) -> &[Issuer] {
        &self.issuers
    }

    /// Names of the accepted issuers holding the key with this keyid.
    fn names_of(&self, id: &str) -> impl Iterator<Item = &str> {
        self.issuers
            .iter()
            .zip(self.keys.keyids())
            .filter(move |(_, k)| *k == id)
            .filter_map(|(i, _)| i.name.as_deref())
    }
}

/// What was checked of an admitted envelope's signatures.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signatures {
    /// A signature verified under a key of the accepted issuer named by
    /// the receipt.
    Verified {
        /// keyids of the accepted keys that verified.
        keyids: Vec<String>,
    },
    /// The log has no accepted issuers: signatures were not checked.
    NotChecked,
}

impl Signatures {
    /// `verified` or `not_checked`, as the CLI and the HTTP API report it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Signatures::Verified { .. } => "verified",
            Signatures::NotChecked => "not_checked",
        }
    }
}

/// An envelope the log accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// The log entry: the envelope's DAG-CBOR form (`spec/log.md` "Entries").
    pub entry: Vec<u8>,
    /// `blake3:` identity of the receipt payload.
    pub receipt_id: String,
    /// The receipt's `issuer` field.
    pub issuer: String,
    /// What was checked of the signatures.
    pub signatures: Signatures,
}

/// How a refusal should be answered: a malformed request, one too large,
/// or one whose signer the log does not accept (HTTP 400, 413, 403).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalClass {
    /// The envelope is malformed or not a valid receipt.
    Invalid,
    /// The envelope or its entry is over a size limit.
    TooLarge,
    /// No valid signature by an accepted issuer of that name.
    NotAccepted,
}

/// Why an envelope was refused. [`Refusal::reason`] is the stable code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The envelope JSON is malformed or over a limit.
    #[error(transparent)]
    Envelope(EnvelopeError),
    /// The payload type is not the receipt type.
    #[error("payloadType is {found:?}, not {RECEIPT_PAYLOAD_TYPE:?}")]
    PayloadType {
        /// The payload type found.
        found: String,
    },
    /// The payload is not a canonical version-1 receipt keeping every invariant.
    #[error(transparent)]
    Payload(PayloadError),
    /// The log entry is over `limits::MAX_ENTRY_BYTES`.
    #[error("log entry is {len} bytes, over {MAX_ENTRY_BYTES}")]
    EntryTooLarge {
        /// Its length.
        len: usize,
    },
    /// A signature whose keyid names an accepted key does not verify under it.
    #[error("signature {index} (keyid {keyid}) does not verify under the accepted key it names")]
    SignatureFailed {
        /// Position of the signature in the envelope.
        index: usize,
        /// Its keyid.
        keyid: String,
    },
    /// Signed by accepted issuers, none of them the one the receipt names.
    #[error(
        "the receipt names issuer {issuer:?}, but its valid signatures are by the accepted \
         issuer(s) {signers}; the log accepts a receipt only under its own issuer's key"
    )]
    IssuerMismatch {
        /// The receipt's `issuer`.
        issuer: String,
        /// The accepted issuers whose keys verified, comma-separated.
        signers: String,
    },
    /// No signature verifies under any accepted issuer's key.
    #[error(
        "no signature verifies under an accepted issuer's key; the log accepts receipts \
         signed by the issuers of its trust file"
    )]
    NotAccepted,
}

impl Refusal {
    /// The stable reason code (`spec/reasons.md`); the signature codes are
    /// the verifier's (`signature.*`).
    pub fn reason(&self) -> Reason {
        match self {
            Refusal::Envelope(e) => e.reason_code(),
            Refusal::PayloadType { .. } => Reason::EnvelopePayloadTypeUnsupported,
            Refusal::Payload(e) => e.reason_code(),
            Refusal::EntryTooLarge { .. } => Reason::EntryTooLarge,
            Refusal::SignatureFailed { .. } => Reason::SignatureInvalid,
            Refusal::IssuerMismatch { .. } => Reason::SignatureIssuerMismatch,
            Refusal::NotAccepted => Reason::SignatureUntrusted,
        }
    }

    /// How to answer it (400, 413 or 403 over HTTP).
    pub fn class(&self) -> RefusalClass {
        match self {
            Refusal::Envelope(EnvelopeError::TooLarge { .. }) | Refusal::EntryTooLarge { .. } => {
                RefusalClass::TooLarge
            }
            Refusal::SignatureFailed { .. }
            | Refusal::IssuerMismatch { .. }
            | Refusal::NotAccepted => RefusalClass::NotAccepted,
            _ => RefusalClass::Invalid,
        }
    }
}

/// Decide whether the log accepts `envelope_json` (the rule in the module
/// doc). `accepted` is `None` when the log has no accepted issuers: then
/// signatures are not checked, and [`Admitted::signatures`] says so.
pub fn admit(
    envelope_json: &[u8],
    accepted: Option<&AcceptedIssuers>,
) -> Result<Admitted, Refusal> {
    let env = Envelope::from_json(envelope_json).map_err(Refusal::Envelope)?;
    if env.payload_type != RECEIPT_PAYLOAD_TYPE {
        return Err(Refusal::PayloadType {
            found: env.payload_type,
        });
    }
    let verified = match accepted {
        Some(a) => Some(verified_keyids(&env, a)?),
        None => None,
    };
    let (receipt, id) = receipt::receipt_from_cbor(&env.payload).map_err(Refusal::Payload)?;
    let issuer = receipt.issuer;
    let signatures = match (accepted, verified) {
        (Some(a), Some(keyids)) => issuer_signed(a, keyids, &issuer)?,
        _ => Signatures::NotChecked,
    };
    let entry = env.to_entry();
    if entry.len() > MAX_ENTRY_BYTES {
        return Err(Refusal::EntryTooLarge { len: entry.len() });
    }
    Ok(Admitted {
        entry,
        receipt_id: id.to_string(),
        issuer,
        signatures,
    })
}

/// Step 3: the keyids of accepted keys that verified (at least one), or
/// the refusal.
fn verified_keyids(env: &Envelope, accepted: &AcceptedIssuers) -> Result<Vec<String>, Refusal> {
    match accepted.keys.check(env) {
        SignatureCheck::Verified { keyids } => Ok(keyids),
        SignatureCheck::Failed { index, keyid } => Err(Refusal::SignatureFailed { index, keyid }),
        SignatureCheck::NotEvaluated => Err(Refusal::NotAccepted),
    }
}

/// Step 5: keep the verified keys held by an issuer named `issuer`.
fn issuer_signed(
    accepted: &AcceptedIssuers,
    keyids: Vec<String>,
    issuer: &str,
) -> Result<Signatures, Refusal> {
    let (own, other): (Vec<String>, Vec<String>) = keyids
        .into_iter()
        .partition(|id| accepted.names_of(id).any(|n| n == issuer));
    if own.is_empty() {
        let mut signers: Vec<&str> = other.iter().flat_map(|id| accepted.names_of(id)).collect();
        signers.sort_unstable();
        signers.dedup();
        return Err(Refusal::IssuerMismatch {
            issuer: issuer.to_string(),
            signers: signers.join(", "),
        });
    }
    Ok(Signatures::Verified { keyids: own })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{SigningKey, keyid};

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    /// A valid receipt envelope by `issuer`, signed with `signer`.
    fn envelope(issuer: &str, signer: &SigningKey) -> Envelope {
        let json = format!(
            r#"{{"version":1,"issuer":"{issuer}","issued_at":1,"substrate":"git",
            "change_id":"blake3:{h}","inverse_delta_id":null,"reversibility":null,"read_set":[],
            "precondition":null,"policy_id":"sha256:{h}","verdict":{{"deny":{{"reasons":["r"]}}}},
            "applied":false,"replay":{{"class":"unknown"}}}}"#,
            h = "ab".repeat(32)
        );
        let payload = receipt::payload_from_json(json.as_bytes()).unwrap();
        Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload.bytes, signer)
    }

    fn accepted(list: &[(&str, &SigningKey)]) -> AcceptedIssuers {
        let issuers: Vec<serde_json::Value> = list
            .iter()
            .map(|(name, k)| {
                serde_json::json!({"name": name,
                    "public_key": STANDARD.encode(k.verifying_key().as_bytes())})
            })
            .collect();
        let json = serde_json::json!({ "issuers": issuers }).to_string();
        AcceptedIssuers::from_json(json.as_bytes()).unwrap()
    }

    #[test]
    fn without_issuers_signatures_are_not_checked() {
        let env = envelope("gate-a", &key(1));
        let a = admit(env.to_json().as_bytes(), None).unwrap();
        assert_eq!(a.signatures, Signatures::NotChecked);
        assert_eq!(a.entry, env.to_entry());
        assert_eq!(a.issuer, "gate-a");
        assert!(a.receipt_id.starts_with("blake3:"));
    }

    #[test]
    fn the_issuer_named_must_have_signed() {
        let (ka, kb) = (key(1), key(2));
        let trust = accepted(&[("gate-a", &ka), ("gate-b", &kb)]);
        // Signed by the issuer it names: admitted.
        let ok = admit(envelope("gate-a", &ka).to_json().as_bytes(), Some(&trust)).unwrap();
        assert_eq!(
            ok.signatures,
            Signatures::Verified {
                keyids: vec![keyid(&ka.verifying_key())]
            }
        );
        // Signed by another accepted issuer: mismatch.
        let err = admit(envelope("gate-a", &kb).to_json().as_bytes(), Some(&trust)).unwrap_err();
        assert_eq!(err.reason(), "signature.issuer_mismatch");
        assert_eq!(err.class(), RefusalClass::NotAccepted);
        assert!(err.to_string().contains("gate-b"), "{err}");
        // Signed by a key the log does not accept.
        let err = admit(
            envelope("gate-a", &key(9)).to_json().as_bytes(),
            Some(&trust),
        )
        .unwrap_err();
        assert_eq!(err.reason(), Reason::SignatureUntrusted);
        // A forged signature under an accepted keyid fails.
        let mut forged = envelope("gate-a", &ka);
        forged.signatures[0].sig[0] ^= 1;
        let err = admit(forged.to_json().as_bytes(), Some(&trust)).unwrap_err();
        assert_eq!(err.reason(), Reason::SignatureInvalid);
        // The same forgery is appended when the log has no accepted issuers.
        assert_eq!(
            admit(forged.to_json().as_bytes(), None).unwrap().signatures,
            Signatures::NotChecked
        );
    }

    #[test]
    fn refusals_keep_the_append_codes() {
        let err = admit(b"{\"nope\":1}", None).unwrap_err();
        assert_eq!(
            (err.reason(), err.class()),
            (Reason::EnvelopeMalformed, RefusalClass::Invalid)
        );
        let other = Envelope::sign("text/plain", b"x".to_vec(), &key(1));
        let err = admit(other.to_json().as_bytes(), None).unwrap_err();
        assert_eq!(err.reason(), Reason::EnvelopePayloadTypeUnsupported);
        let bad = Envelope::sign(RECEIPT_PAYLOAD_TYPE, vec![0xff], &key(1));
        let err = admit(bad.to_json().as_bytes(), None).unwrap_err();
        assert!(
            err.reason().as_str().starts_with("payload."),
            "{}",
            err.reason()
        );
        let big = vec![b' '; crate::limits::MAX_ENVELOPE_BYTES + 1];
        let err = admit(&big, None).unwrap_err();
        assert_eq!(
            (err.reason(), err.class()),
            (Reason::EnvelopeTooLarge, RefusalClass::TooLarge)
        );
    }

    #[test]
    fn accepted_issuers_round_trip_and_need_one() {
        let trust = accepted(&[("gate-a", &key(1))]);
        assert_eq!(AcceptedIssuers::from_json(&trust.to_json()).unwrap(), trust);
        assert!(matches!(
            AcceptedIssuers::from_json(br#"{"issuers": []}"#),
            Err(AcceptedError::NoIssuers)
        ));
        assert!(matches!(
            AcceptedIssuers::from_json(b"not json"),
            Err(AcceptedError::Trust(_))
        ));
    }
}
