//! trust: the keys a verifier trusts, and nothing else.
//!
//! Issuer keys verify envelope signatures; log keys (C2SP signed-note
//! verifier keys) verify checkpoints. A log key applies to a bundle when its
//! name equals the bundle's origin (spec/verify.md "Checkpoint rule"). The trust file:
//!
//! ```json
//! {"issuers": [{"name": "gate-a", "public_key": "<base64 of the raw 32 bytes>"}],
//!  "logs": [{"verifier_key": "log.example+1a2b3c4d+AQ..."}]}
//! ```

use crate::keys::{self, KeyError, NoteVerifier, VerifyingKey};
use crate::limits::{MAX_JSON_DEPTH, MAX_KEY_FILE_BYTES};
use crate::receipt::require::{RequireError, RequireFile, Requirements};
use crate::strictjson;
use serde::Deserialize;

/// A trusted issuer key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issuer {
    /// The issuer name this key may sign for: a receipt verified under it
    /// must carry this `issuer` (spec/gate.md "Issuer binding"). `None`
    /// for a key given without a name, which binds no name.
    pub name: Option<String>,
    /// The Ed25519 public key.
    pub key: VerifyingKey,
}

/// Everything the verifier trusts.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    /// Trusted issuer keys.
    pub issuers: Vec<Issuer>,
    /// Trusted log (checkpoint) keys.
    pub logs: Vec<NoteVerifier>,
    /// The trust file's `"require"` object (spec/gate.md), empty when absent.
    pub require: Requirements,
}

/// Why a trust file or key was refused.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// Over [`MAX_KEY_FILE_BYTES`].
    #[error("trust file is {0} bytes, over the limit of {MAX_KEY_FILE_BYTES}")]
    TooLarge(usize),
    /// Not the trust-file JSON shape.
    #[error("trust file is not valid: {0}")]
    Json(String),
    /// An issuer's `public_key` is not a usable Ed25519 key.
    #[error("issuer {index} (\"{name}\"): {source}")]
    IssuerKey {
        /// Position in `issuers`.
        index: usize,
        /// Its name.
        name: String,
        /// What is wrong with the key.
        #[source]
        source: KeyError,
    },
    /// A log's `verifier_key` is not a valid signed-note verifier key.
    #[error("log {index} (\"{text}\"): {source}")]
    LogKey {
        /// Position in `logs`.
        index: usize,
        /// The string given.
        text: String,
        /// What is wrong with it.
        #[source]
        source: KeyError,
    },
    /// The `"require"` object holds a value that is not a requirement.
    #[error("\"require\": {0}")]
    Require(#[source] RequireError),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    #[serde(default)]
    issuers: Vec<IssuerEntry>,
    #[serde(default)]
    logs: Vec<LogEntry>,
    #[serde(default)]
    require: Option<RequireFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IssuerEntry {
    name: String,
    public_key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogEntry {
    verifier_key: String,
}

impl Trust {
    /// Parse a trust file (strict JSON: no duplicate keys, no unknown fields).
    pub fn from_json(bytes: &[u8]) -> Result<Trust, TrustError> {
        if bytes.len() > MAX_KEY_FILE_BYTES {
            return Err(TrustError::TooLarge(bytes.len()));
        }
        let file: TrustFile = strictjson::from_slice(bytes, MAX_JSON_DEPTH)
            .map_err(|e| TrustError::Json(e.to_string()))?;
        let mut trust = Trust::default();
        for (index, entry) in file.issuers.into_iter().enumerate() {
            let key = keys::parse_public_key(&entry.public_key)
                .map(|parsed| parsed.key)
                .map_err(|source| TrustError::IssuerKey {
                    index,
                    name: entry.name.clone(),
                    source,
                })?;
            trust.issuers.push(Issuer {
                name: Some(entry.name),
                key,
            });
        }
        for (index, entry) in file.logs.into_iter().enumerate() {
            let verifier = NoteVerifier::parse(entry.verifier_key.trim()).map_err(|source| {
                TrustError::LogKey {
                    index,
                    text: entry.verifier_key.clone(),
                    source,
                }
            })?;
            trust.logs.push(verifier);
        }
        if let Some(require) = file.require {
            trust.require = require.into_requirements().map_err(TrustError::Require)?;
        }
        Ok(trust)
    }

    /// The issuer public keys, for the envelope signature check.
    pub fn issuer_keys(&self) -> Vec<VerifyingKey> {
        self.issuers.iter().map(|i| i.key).collect()
    }

    /// The log keys that apply to a bundle of `origin`: those named `origin`.
    pub fn log_keys_for(&self, origin: &str) -> Vec<NoteVerifier> {
        self.logs
            .iter()
            .filter(|v| v.name == origin)
            .cloned()
            .collect()
    }

    /// Add an issuer key that signs for `name`, skipping exact duplicates
    /// (the same key under the same name).
    pub fn add_issuer(&mut self, name: &str, key: VerifyingKey) {
        self.push_issuer(Issuer {
            name: Some(name.to_string()),
            key,
        });
    }

    /// Add an issuer key without a name: signatures under it are
    /// authentic but bind no issuer name, so a receipt verified only
    /// under it fails `signature.issuer_mismatch`.
    pub fn add_unnamed_issuer(&mut self, key: VerifyingKey) {
        self.push_issuer(Issuer { name: None, key });
    }

    fn push_issuer(&mut self, issuer: Issuer) {
        if !self.issuers.contains(&issuer) {
            self.issuers.push(issuer);
        }
    }

    /// Add a log key, skipping exact duplicates.
    pub fn add_log(&mut self, verifier: NoteVerifier) {
        if !self.logs.contains(&verifier) {
            self.logs.push(verifier);
        }
    }
}
