//! keys: Ed25519 keys, keyids, PEM files and C2SP signed-note verifier keys.
//!
//! STUB: interface fixed, body to be written (helper B).

pub use ed25519_dalek::{SigningKey, VerifyingKey};

/// Why a key could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Placeholder until keys land.
    #[error("not implemented")]
    Unimplemented,
}

/// A fresh key from the operating system's randomness.
pub fn generate() -> Result<SigningKey, KeyError> {
    todo!()
}

/// keyid: lowercase hex SHA-256 of the raw 32-byte public key (a hint only).
pub fn keyid(key: &VerifyingKey) -> String {
    let _ = key;
    todo!()
}

/// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as openssl writes for Ed25519.
pub fn signing_key_to_pem(key: &SigningKey) -> String {
    let _ = key;
    todo!()
}

/// Read a PKCS#8 PEM private key.
pub fn signing_key_from_pem(pem: &str) -> Result<SigningKey, KeyError> {
    let _ = pem;
    todo!()
}

/// SPKI PEM (`-----BEGIN PUBLIC KEY-----`), as openssl writes for Ed25519.
pub fn verifying_key_to_pem(key: &VerifyingKey) -> String {
    let _ = key;
    todo!()
}

/// Read a public key: SPKI PEM, or base64 of the raw 32 bytes. Weak
/// (small-order) and non-canonical keys are refused.
pub fn verifying_key_from_text(text: &str) -> Result<VerifyingKey, KeyError> {
    let _ = text;
    todo!()
}

/// Raw 32 bytes to a public key, refusing weak and non-canonical keys.
pub fn verifying_key_from_bytes(bytes: &[u8]) -> Result<VerifyingKey, KeyError> {
    let _ = bytes;
    todo!()
}

/// A C2SP signed-note Ed25519 verifier key: `NAME+<8 hex>+<base64(0x01||pub)>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteVerifier {
    /// Key name (for a log: its origin).
    pub name: String,
    /// First 4 bytes of SHA-256(name || 0x0A || 0x01 || pub).
    pub key_hash: [u8; 4],
    /// The public key.
    pub key: VerifyingKey,
}

impl NoteVerifier {
    /// Verifier for `key` under `name`.
    pub fn new(name: &str, key: VerifyingKey) -> Result<NoteVerifier, KeyError> {
        let _ = (name, key);
        todo!()
    }

    /// Parse a verifier key string (split on the first two `+` only).
    pub fn parse(text: &str) -> Result<NoteVerifier, KeyError> {
        let _ = text;
        todo!()
    }
}

impl std::fmt::Display for NoteVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let _ = f;
        todo!()
    }
}
