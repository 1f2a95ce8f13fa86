//! settings: the private settings of a log (`.rcpt/settings.json`):
//! origin, public key, verifier key, and the key file given at init.

use super::error::{LogError, SettingsError};
use crate::keys::NoteVerifier;
use crate::storage::{PrivateKey, Store};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::path::PathBuf;

/// Version of the settings file format.
pub const SETTINGS_FORMAT: u64 = 1;

/// The private settings of a log (`DIR/.rcpt/settings.json`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Settings format version ([`SETTINGS_FORMAT`]).
    pub format: u64,
    /// Checkpoint origin line, also the log key's name.
    pub origin: String,
    /// Standard base64 of the raw 32-byte Ed25519 public key.
    pub public_key: String,
    /// The C2SP signed-note verifier key of the log.
    pub verifier_key: String,
    /// Absolute path of the private key file given at init, if any.
    pub key_file: Option<PathBuf>,
}

impl Settings {
    /// The settings of the log in `store`, or `None` when it has none (a
    /// copy of the public files).
    pub fn read(store: &dyn Store) -> Result<Option<Settings>, LogError> {
        let bad = |source| LogError::Settings {
            location: store.describe(),
            source,
        };
        let Some(bytes) =
            store.read_private(&PrivateKey::Settings, crate::limits::MAX_KEY_FILE_BYTES)?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| bad(SettingsError::Json(e)))
    }

    /// The log's checkpoint verifier, from its public key and origin.
    pub fn verifier(&self, location: &str) -> Result<NoteVerifier, LogError> {
        let bad = |source| LogError::Settings {
            location: location.to_string(),
            source,
        };
        let raw = STANDARD
            .decode(&self.public_key)
            .map_err(|e| bad(SettingsError::Base64(e)))?;
        let vk = crate::keys::verifying_key_from_bytes(&raw)
            .map_err(|e| bad(SettingsError::PublicKey(e)))?;
        NoteVerifier::new(&self.origin, vk).map_err(|source| {
            bad(SettingsError::Origin {
                origin: self.origin.clone(),
                source,
            })
        })
    }

    /// The settings as pretty JSON text (a key file path that is not
    /// UTF-8 cannot be written).
    pub fn to_json(&self, location: &str) -> Result<Vec<u8>, LogError> {
        let mut out = serde_json::to_vec_pretty(self).map_err(|e| LogError::Settings {
            location: location.to_string(),
            source: SettingsError::Json(e),
        })?;
        out.push(b'\n');
        Ok(out)
    }
}
