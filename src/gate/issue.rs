//! issue: who signs a gate receipt ([`Signer`], the key's name by
//! [`issuer_name`]), and signing it only once its schema, invariants and
//! size are checked ([`sign`], [`issue`]).

use super::error::GateError;
use super::store::GateStore;
use crate::digest::Digest;
use crate::keys::{KeyError, NoteVerifier, SigningKey};
use crate::receipt::canonical::dagcbor;
use crate::receipt::dsse::Envelope;
use crate::receipt::{Receipt, ValidPayload, payload_from_cbor};
use std::path::{Path, PathBuf};

/// Who signs a receipt, and when.
#[derive(Clone, Copy)]
pub struct Signer<'a> {
    /// The gate key.
    pub key: &'a SigningKey,
    /// Its name (the receipt's issuer).
    pub issuer: &'a str,
    /// `issued_at`.
    pub now: i64,
}

impl std::fmt::Debug for Signer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("issuer", &self.issuer)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// A receipt encoded, checked (schema, the five invariants, size) and signed.
#[derive(Debug)]
pub struct Signed {
    /// The payload and its id.
    pub valid: ValidPayload,
    /// The DSSE envelope.
    pub envelope: Envelope,
}

/// Encode, check and sign `receipt`: a receipt that breaks an invariant
/// (such as `reversibility` true with a null inverse) is never signed.
pub fn sign(receipt: &Receipt, key: &SigningKey) -> Result<Signed, GateError> {
    let bytes = dagcbor::encode(&receipt.to_value());
    let valid = payload_from_cbor(&bytes)?;
    let envelope = Envelope::sign(
        crate::constants::RECEIPT_PAYLOAD_TYPE,
        valid.bytes.clone(),
        key,
    );
    Ok(Signed { valid, envelope })
}

/// Encode, check (schema, invariants, size) and sign `receipt`; remember in
/// `store` that it rests on `record`.
pub fn issue(
    receipt: &Receipt,
    key: &SigningKey,
    store: &GateStore,
    record: &Digest,
) -> Result<(ValidPayload, Envelope), GateError> {
    let Signed { valid, envelope } = sign(receipt, key)?;
    store.link_receipt(&valid.id, record)?;
    Ok((valid, envelope))
}

/// Why the gate key has no usable name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IssuerError {
    /// No `.vkey` and no `--issuer`.
    #[error(
        "the gate key has no name: put its verifier key line NAME+HASH+KEY beside it as {0} \
         (the `verifier key:` line of `rcpt key show --name NAME GATE.pub`), \
         or pass --issuer NAME"
    )]
    Unnamed(PathBuf),
    /// `--issuer` differs from the `.vkey`'s name.
    #[error("--issuer {given:?} does not match the name {vkey:?} in {path}")]
    Mismatch {
        /// The flag.
        given: String,
        /// The `.vkey`'s name.
        vkey: String,
        /// The `.vkey`.
        path: PathBuf,
    },
    /// The `.vkey` is for another key.
    #[error("{0} is the verifier key of another key than the gate key")]
    OtherKey(PathBuf),
    /// The `.vkey` cannot be read.
    #[error("reading {path}")]
    Vkey {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// `--issuer` is not a valid key name.
    #[error("--issuer {0:?}: a key name is non-empty, without spaces or '+'")]
    BadName(String),
}

/// The issuer name of the gate key at `key_path`: the name in the `.vkey`
/// beside it (same prefix), or `given`, which must then match that `.vkey`.
pub fn issuer_name(
    key_path: &Path,
    key: &SigningKey,
    given: Option<&str>,
) -> Result<String, IssuerError> {
    let vkey_path = key_path.with_extension("vkey");
    let vkey = match crate::keys::read_key_file(&vkey_path) {
        Ok(text) => Some(
            NoteVerifier::parse(&text).map_err(|source| IssuerError::Vkey {
                path: vkey_path.clone(),
                source,
            })?,
        ),
        Err(KeyError::File(e)) if e.is_bad_path() && !vkey_path.exists() => None,
        Err(source) => {
            return Err(IssuerError::Vkey {
                path: vkey_path,
                source,
            });
        }
    };
    match (vkey, given) {
        (Some(v), _) if v.key != key.verifying_key() => Err(IssuerError::OtherKey(vkey_path)),
        (Some(v), Some(g)) if v.name != g => Err(IssuerError::Mismatch {
            given: g.to_string(),
            vkey: v.name,
            path: vkey_path,
        }),
        (Some(v), _) => Ok(v.name),
        (None, Some(g)) if crate::keys::is_valid_key_name(g) => Ok(g.to_string()),
        (None, Some(g)) => Err(IssuerError::BadName(g.to_string())),
        (None, None) => Err(IssuerError::Unnamed(vkey_path)),
    }
}
