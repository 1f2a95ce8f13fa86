//! layout: where each file of a log directory lives, and the private
//! settings file. Public files follow C2SP tlog-tiles (`checkpoint`,
//! `tile/...`); private state lives under `DIR/.rcpt/` and is never served.

use super::LogError;
use super::fsutil;
use std::path::{Path, PathBuf};

/// Private state directory, relative to the log directory.
pub const PRIVATE_DIR: &str = ".rcpt";
/// Version of the settings file format.
pub const SETTINGS_FORMAT: u64 = 1;

/// `DIR/checkpoint`: the latest signed checkpoint (C2SP tlog-tiles).
pub fn checkpoint(dir: &Path) -> PathBuf {
    dir.join("checkpoint")
}

/// `DIR/.rcpt/`.
pub fn private(dir: &Path) -> PathBuf {
    dir.join(PRIVATE_DIR)
}

/// `DIR/.rcpt/settings.json`.
pub fn settings(dir: &Path) -> PathBuf {
    private(dir).join("settings.json")
}

/// `DIR/.rcpt/trust.json`: the issuers whose receipts the log accepts.
pub fn trust(dir: &Path) -> PathBuf {
    private(dir).join("trust.json")
}

/// `DIR/.rcpt/lock`: held exclusively by the one writer.
pub fn lock(dir: &Path) -> PathBuf {
    private(dir).join("lock")
}

/// `DIR/.rcpt/dedup/`: the dedup index, sorted runs of (leaf-hash key,
/// index). (Logs written before it used a redb file `DIR/.rcpt/index`;
/// the writer removes that file and rebuilds the runs from the entries.)
pub fn index(dir: &Path) -> PathBuf {
    private(dir).join("dedup")
}

/// `DIR/.rcpt/index`: the redb dedup index of earlier versions (removed on open).
pub fn old_index(dir: &Path) -> PathBuf {
    private(dir).join("index")
}

/// `DIR/.rcpt/tmp/`: temporary files, renamed into place once durable.
pub fn tmp(dir: &Path) -> PathBuf {
    private(dir).join("tmp")
}

/// `DIR/.rcpt/checkpoints/`: every checkpoint the log published.
pub fn checkpoints(dir: &Path) -> PathBuf {
    private(dir).join("checkpoints")
}

/// `DIR/.rcpt/checkpoints/<size>`.
pub fn checkpoint_at(dir: &Path, size: u64) -> PathBuf {
    checkpoints(dir).join(size.to_string())
}

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
    /// Read and parse the settings of the log at `dir`.
    pub fn read(dir: &Path) -> Result<Settings, LogError> {
        let path = settings(dir);
        let bytes = fsutil::read_limited(&path, crate::limits::MAX_KEY_FILE_BYTES)?;
        serde_json::from_slice(&bytes).map_err(|e| LogError::Settings {
            path,
            detail: e.to_string(),
        })
    }

    /// The settings as pretty JSON text.
    pub fn to_json(&self) -> Result<Vec<u8>, LogError> {
        let mut out = serde_json::to_vec_pretty(self).map_err(|e| LogError::Settings {
            path: PathBuf::from("settings.json"),
            detail: e.to_string(),
        })?;
        out.push(b'\n');
        Ok(out)
    }
}
