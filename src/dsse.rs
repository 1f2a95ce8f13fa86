//! dsse: the DSSE envelope, PAE, Ed25519 signing and the trust rule for
//! envelope signatures; and the envelope's DAG-CBOR log-entry form.
//!
//! STUB: interface fixed, body to be written (helper B).

use crate::keys::{SigningKey, VerifyingKey};

/// One DSSE signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// keyid hint; the empty string when absent.
    pub keyid: String,
    /// Raw signature bytes (64 for Ed25519; other lengths kept so they can be reported).
    pub sig: Vec<u8>,
}

/// A DSSE envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub payload_type: String,
    pub payload: Vec<u8>,
    pub signatures: Vec<Signature>,
}

/// Why an envelope was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// Placeholder until DSSE lands.
    #[error("not implemented")]
    Unimplemented,
}

/// PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let _ = (payload_type, payload);
    todo!()
}

impl Envelope {
    /// Sign `payload` under `payload_type` with one key (keyid filled in).
    pub fn sign(payload_type: &str, payload: Vec<u8>, key: &SigningKey) -> Envelope {
        let _ = (payload_type, payload, key);
        todo!()
    }

    /// Parse envelope JSON: size limit, duplicate keys refused, standard or
    /// URL-safe base64, unknown fields ignored.
    pub fn from_json(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
        let _ = bytes;
        todo!()
    }

    /// Envelope JSON with standard padded base64.
    pub fn to_json(&self) -> String {
        todo!()
    }

    /// The log entry: DAG-CBOR of `{"payload": bytes, "payload_type": text,
    /// "signatures": [{"keyid": text, "sig": bytes}]}`.
    pub fn to_entry(&self) -> Vec<u8> {
        todo!()
    }

    /// Parse a log entry (strict DAG-CBOR).
    pub fn from_entry(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
        let _ = bytes;
        todo!()
    }
}

/// The outcome of the envelope-signature check (DESIGN.md "Verifier").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignatureCheck {
    /// At least one trusted key verified and none attributed to a trusted key failed.
    Verified {
        /// keyids of the trusted keys that verified.
        keyids: Vec<String>,
    },
    /// A signature whose keyid names a trusted key did not verify under it.
    Failed {
        /// Position of the failing signature in the envelope.
        index: usize,
        /// Its keyid.
        keyid: String,
    },
    /// Nothing verified and nothing failed: no trusted key applies.
    NotEvaluated,
}

/// Apply the trust rule to every signature of `envelope` (strict Ed25519 over PAE).
pub fn check_signatures(envelope: &Envelope, trusted: &[VerifyingKey]) -> SignatureCheck {
    let _ = (envelope, trusted);
    todo!()
}
