//! create: a new empty log (`rcpt log init`), in a directory or an empty
//! store: settings, accepted issuers, the kept checkpoint of size 0, then
//! the public checkpoint, whose presence marks a complete init.

use super::{Log, LogError, SETTINGS_FORMAT, Settings, SettingsError, admit, sign_checkpoint};
use crate::keys::{NoteVerifier, SigningKey};
use crate::storage::posix::PosixStore;
use crate::storage::{PrivateKey, Store};
use crate::tlog::merkle;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::path::Path;
use std::sync::Arc;

/// What `init` writes besides the empty tree.
#[derive(Clone, Copy, Debug, Default)]
pub struct InitOptions<'a> {
    /// The private key file, kept (as an absolute path) so appends find it.
    pub key_file: Option<&'a Path>,
    /// The issuers whose receipts the log accepts (`.rcpt/trust.json`).
    pub accepted: Option<&'a admit::AcceptedIssuers>,
}

impl Log {
    /// Create a new empty log in `dir` (empty or absent), with its first checkpoint (size 0).
    pub fn init(dir: &Path, origin: &str, key: &SigningKey) -> Result<Log, LogError> {
        Log::create_with(dir, origin, key, InitOptions::default())
    }

    /// [`Log::init`], recording the absolute path of the key file (which
    /// must lie outside `dir`) so that later appends can find it.
    pub fn create(
        dir: &Path,
        origin: &str,
        key: &SigningKey,
        key_file: Option<&Path>,
    ) -> Result<Log, LogError> {
        let opts = InitOptions {
            key_file,
            accepted: None,
        };
        Log::create_with(dir, origin, key, opts)
    }

    /// [`Log::init`] in a directory, with a key file (outside `dir`) and
    /// accepted issuers.
    pub fn create_with(
        dir: &Path,
        origin: &str,
        key: &SigningKey,
        opts: InitOptions<'_>,
    ) -> Result<Log, LogError> {
        use crate::storage::posix::io_err as io;
        // The log directory itself never through a link (spec/security.md).
        crate::io::Dir::create(dir, 0o755).map_err(crate::storage::posix::dir_err(dir))?;
        let dir = std::fs::canonicalize(dir).map_err(io(dir))?;
        let key_file = match opts.key_file {
            Some(k) => {
                let k = std::fs::canonicalize(k).map_err(io(k))?;
                // The key's place is checked first: a key inside is the worse mistake.
                if k.starts_with(&dir) {
                    return Err(LogError::KeyInsideLog {
                        key: k.display().to_string(),
                        dir: dir.display().to_string(),
                    });
                }
                Some(k)
            }
            None => None,
        };
        let store = Arc::new(PosixStore::new(&dir));
        Log::init_store(store, origin, key, key_file, opts.accepted)
    }

    /// Create a new empty log in an empty `store`: settings, accepted
    /// issuers and the kept checkpoint of size 0 first, then the public
    /// checkpoint, whose presence marks a complete init.
    pub fn init_store(
        store: Arc<dyn Store>,
        origin: &str,
        key: &SigningKey,
        key_file: Option<std::path::PathBuf>,
        accepted: Option<&admit::AcceptedIssuers>,
    ) -> Result<Log, LogError> {
        let location = store.describe();
        if !store.is_empty()? {
            return Err(LogError::NotEmpty(location));
        }
        let verifier = NoteVerifier::new(origin, key.verifying_key()).map_err(|source| {
            LogError::Settings {
                location: location.clone(),
                source: SettingsError::Origin {
                    origin: origin.to_string(),
                    source,
                },
            }
        })?;
        let settings = Settings {
            format: SETTINGS_FORMAT,
            origin: origin.to_string(),
            public_key: STANDARD.encode(key.verifying_key().as_bytes()),
            verifier_key: verifier.to_string(),
            key_file,
        };
        let checkpoint = sign_checkpoint(origin, 0, merkle::empty_root(), key)?;
        store.write_private(&PrivateKey::Settings, &settings.to_json(&location)?)?;
        if let Some(accepted) = accepted {
            store.write_private(&PrivateKey::Trust, &accepted.to_json())?;
        }
        store.write_private(&PrivateKey::Checkpoint(0), checkpoint.as_bytes())?;
        store.replace_checkpoint(None, checkpoint.as_bytes())?;
        Log::open_store(store, None)
    }
}
