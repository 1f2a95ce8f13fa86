//! trust: the keys a verifier trusts, and nothing else.
//!
//! Issuer keys verify envelope signatures; log keys (C2SP signed-note
//! verifier keys) verify checkpoints. A log key applies to a bundle when its
//! name equals the bundle's origin (spec/verify.md "Checkpoint rule"). The trust file:
//!
//! ```json
//! {"issuers": [{"name": "gate-a", "public_key": "<base64 of the raw 32 bytes>"},
//!              {"verifier_key": "gate-b+5e6f7a8b+AQ..."}],
//!  "logs": [{"verifier_key": "log.example+1a2b3c4d+AQ..."}]}
//! ```
//!
//! An issuer entry is either a name and a public key or a verifier key
//! (which carries its name); `rcpt trust new` writes the second form.

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
    #[error("trust file is not valid")]
    Json(#[source] strictjson::StrictJsonError),
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
    /// An issuer entry has neither or both of its two forms.
    #[error(
        "issuer {index}: give either {{\"verifier_key\": \"NAME+HASH+KEY\"}} or \
         {{\"name\": ..., \"public_key\": ...}}"
    )]
    IssuerForm {
        /// Position in `issuers`.
        index: usize,
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
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    public_key: Option<String>,
    #[serde(default)]
    verifier_key: Option<String>,
}

impl IssuerEntry {
    /// The entry's name and key, by whichever form it has.
    fn into_issuer(self, index: usize) -> Result<Issuer, TrustError> {
        let (name, key) = match (self.name, self.public_key, self.verifier_key) {
            (Some(name), Some(public_key), None) => {
                let key = keys::parse_public_key(&public_key)
                    .map(|parsed| parsed.key)
                    .map_err(|source| TrustError::IssuerKey {
                        index,
                        name: name.clone(),
                        source,
                    })?;
                (name, key)
            }
            (None, None, Some(text)) => {
                let v = NoteVerifier::parse(&text).map_err(|source| TrustError::IssuerKey {
                    index,
                    name: text.clone(),
                    source,
                })?;
                (v.name, v.key)
            }
            _ => return Err(TrustError::IssuerForm { index }),
        };
        Ok(Issuer {
            name: Some(name),
            key,
        })
    }
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
        let file: TrustFile =
            strictjson::from_slice(bytes, MAX_JSON_DEPTH).map_err(TrustError::Json)?;
        let mut trust = Trust::default();
        for (index, entry) in file.issuers.into_iter().enumerate() {
            trust.issuers.push(entry.into_issuer(index)?);
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

    /// The trust-file JSON of these keys: issuers as verifier keys (an
    /// unnamed issuer key cannot be written: it has no entry form), then
    /// the logs. `require` is not written.
    pub fn to_json(&self) -> Result<String, KeyError> {
        let mut issuers = Vec::with_capacity(self.issuers.len());
        for issuer in &self.issuers {
            let Some(name) = &issuer.name else {
                return Err(KeyError::Unnamed {
                    what: "a trust file's issuer entry",
                    example: "gate.example/ci",
                });
            };
            let vkey = NoteVerifier::new(name, issuer.key)?;
            issuers.push(serde_json::json!({"verifier_key": vkey.to_string()}));
        }
        let logs: Vec<serde_json::Value> = self
            .logs
            .iter()
            .map(|v| serde_json::json!({"verifier_key": v.to_string()}))
            .collect();
        let doc = serde_json::json!({"issuers": issuers, "logs": logs});
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        Ok(text)
    }

    /// Add a log key, skipping exact duplicates.
    pub fn add_log(&mut self, verifier: NoteVerifier) {
        if !self.logs.contains(&verifier) {
            self.logs.push(verifier);
        }
    }
}
