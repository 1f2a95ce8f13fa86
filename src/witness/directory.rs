//! directory: an open witness directory (settings, key, the logs it
//! witnesses, its state) and [`Witness::add_checkpoint`], which decides,
//! signs a `cosignature/v1` and commits the new state by compare-and-swap
//! (spec/witness.md).

use super::decide::{BadRequest, Refusal, decide};
use super::{AddCheckpointRequest, CasError, SETTINGS_FORMAT, StateError, StateStore, origin_hash};
use crate::keys::{NoteVerifier, SigningKey};
use crate::limits::{MAX_KEY_FILE_BYTES, MAX_POLICY_BYTES, MAX_WITNESS_CAS_RETRIES};
use crate::tlog::cosig::{self, CosigError, WitnessVerifier};
use crate::tlog::note::{self, Checkpoint};
use crate::tlog::policy::{TlogPolicy, TlogPolicyError};
use std::path::{Path, PathBuf};

/// A checkpoint the witness cosigned (a 200 answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cosigned {
    /// The checkpoint body.
    pub checkpoint: Checkpoint,
    /// The cosignature's timestamp.
    pub timestamp: u64,
    /// The answer body: the witness's cosignature line(s), each ending in a newline.
    pub lines: String,
    /// The checkpoint as now recorded: body, verified log lines, cosignature.
    pub note: String,
}

/// Why `add-checkpoint` did not cosign.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AddCheckpointError {
    /// A refusal the protocol names (400, 403, 404, 409, 422).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Signing failed (a zero or out-of-range clock): a server error.
    #[error("cannot cosign")]
    Sign(#[from] CosigError),
    /// The state could not be read or written: a server error.
    #[error(transparent)]
    State(#[from] StateError),
}

impl AddCheckpointError {
    /// The HTTP status: the refusal's, or 500 for a server-side failure.
    pub fn status(&self) -> u16 {
        match self {
            AddCheckpointError::Refused(r) => r.status(),
            _ => 500,
        }
    }
}

/// Why a witness directory could not be created or opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WitnessError {
    /// A file-system operation failed.
    #[error("{}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `init` was given a directory that already holds files.
    #[error("{} is not empty; witness init needs an empty or absent directory", .0.display())]
    NotEmpty(PathBuf),
    /// The settings file is unreadable or inconsistent.
    #[error("witness settings {}: {detail}", path.display())]
    Settings {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The policy file does not parse.
    #[error("policy {}", path.display())]
    Policy {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: TlogPolicyError,
    },
    /// The policy lists no log.
    #[error("policy {} lists no log: a witness needs at least one `log <vkey>` line", .0.display())]
    NoLogs(PathBuf),
    /// A file over its size limit.
    #[error("{} is larger than {limit} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        limit: usize,
    },
    /// The key name or key is not usable for a witness.
    #[error(transparent)]
    Key(#[from] CosigError),
    /// The key given is not the witness's key.
    #[error("the key given is not this witness's key (expected {expected})")]
    WrongKey {
        /// The witness's verifier key.
        expected: String,
    },
    /// No key given and none recorded.
    #[error("no key file recorded for this witness; pass the key")]
    NoKey,
    /// The state store failed.
    #[error(transparent)]
    State(#[from] StateError),
}

/// The private settings of a witness (`DIR/settings.json`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Settings format version ([`SETTINGS_FORMAT`]).
    pub format: u64,
    /// The witness's key name (on its cosignature lines).
    pub name: String,
    /// The witness verifier key (type 0x04).
    pub verifier_key: String,
    /// Absolute path of the private key file given at init, if any.
    pub key_file: Option<PathBuf>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WitnessError + '_ {
    move |source| WitnessError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Read a whole regular file of at most `limit` bytes (the crate's one
/// capped reader, [`crate::io::read_path`]: never a FIFO or a device).
fn read_limited(path: &Path, limit: usize) -> Result<Vec<u8>, WitnessError> {
    use crate::io::InputError;
    crate::io::read_path(path, limit).map_err(|e| match e {
        InputError::TooLarge { .. } => WitnessError::TooLarge {
            path: path.to_path_buf(),
            limit,
        },
        InputError::Open { source, .. } | InputError::Read { source, .. } => io(path)(source),
        InputError::NotFound { .. } => io(path)(std::io::ErrorKind::NotFound.into()),
        other => io(path)(std::io::Error::other(other)),
    })
}

/// Write a new file durably with the crate's one atomic writer (an
/// unpredictable temporary name created `O_EXCL | O_NOFOLLOW` in `tmp/`,
/// fsync, rename, directory fsync).
fn write_new(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), WitnessError> {
    let dest = dir.join(name);
    crate::io::write_atomic_via(&dir.join("tmp"), &dest, bytes, crate::io::OUTPUT_FILE_MODE)
        .map_err(|e| match e {
            crate::io::OutputError::Io { path, source, .. } => io(&path)(source),
            other => io(&dest)(std::io::Error::other(other)),
        })
}

/// Parse a policy for a witness: it must list at least one log.
fn witness_policy(path: &Path, bytes: &[u8]) -> Result<TlogPolicy, WitnessError> {
    let policy = TlogPolicy::parse(bytes).map_err(|source| WitnessError::Policy {
        path: path.to_path_buf(),
        source,
    })?;
    if policy.logs.is_empty() {
        return Err(WitnessError::NoLogs(path.to_path_buf()));
    }
    Ok(policy)
}

/// An open witness: its key, the logs it witnesses and its state.
#[derive(Debug)]
pub struct Witness {
    dir: PathBuf,
    settings: Settings,
    key: SigningKey,
    verifier: WitnessVerifier,
    logs: Vec<NoteVerifier>,
    store: StateStore,
}

impl Witness {
    /// Create a witness in `dir` (empty or absent): name, key (its file's
    /// absolute path recorded when given), and the policy text whose `log`
    /// lines are the logs to witness (witness and quorum lines are unused).
    pub fn init(
        dir: &Path,
        name: &str,
        key: &SigningKey,
        key_file: Option<&Path>,
        policy: &[u8],
    ) -> Result<Witness, WitnessError> {
        let verifier = WitnessVerifier::new(name, key.verifying_key())?;
        witness_policy(Path::new("policy"), policy)?;
        // The witness's directory itself never through a link (spec/security.md).
        let dir_io = |e: crate::io::DirError| WitnessError::Io {
            path: e.path().to_path_buf(),
            source: e.into_io(),
        };
        let opened = crate::io::Dir::create(dir, 0o755).map_err(dir_io)?;
        if !opened.names().map_err(dir_io)?.is_empty() {
            return Err(WitnessError::NotEmpty(
                std::fs::canonicalize(dir).map_err(io(dir))?,
            ));
        }
        let dir = std::fs::canonicalize(dir).map_err(io(dir))?;
        let key_file = match key_file {
            Some(k) => Some(std::fs::canonicalize(k).map_err(io(k))?),
            None => None,
        };
        let settings = Settings {
            format: SETTINGS_FORMAT,
            name: name.to_owned(),
            verifier_key: verifier.to_string(),
            key_file,
        };
        let mut json =
            serde_json::to_vec_pretty(&settings).map_err(|e| WitnessError::Settings {
                path: dir.join("settings.json"),
                detail: e.to_string(),
            })?;
        json.push(b'\n');
        StateStore::open(&dir.join("state"), &dir.join("tmp"))?;
        write_new(&dir, "policy", policy)?;
        // settings.json last: its presence marks a complete init.
        write_new(&dir, "settings.json", &json)?;
        crate::io::sync_dir(&dir).map_err(io(&dir))?;
        Witness::open_with_key(&dir, key.clone())
    }

    /// Open the witness in `dir`, reading its key from the recorded file.
    pub fn open(dir: &Path) -> Result<Witness, WitnessError> {
        let settings = read_settings(dir)?;
        let path = settings.key_file.clone().ok_or(WitnessError::NoKey)?;
        let pem = crate::keys::read_key_file(&path).map_err(|e| WitnessError::Settings {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        let key = crate::keys::signing_key_from_pem(&pem).map_err(|e| WitnessError::Settings {
            path,
            detail: e.to_string(),
        })?;
        Witness::open_with_key(dir, key)
    }

    /// Open the witness in `dir` with `key`, which must be its key.
    pub fn open_with_key(dir: &Path, key: SigningKey) -> Result<Witness, WitnessError> {
        let settings = read_settings(dir)?;
        let verifier = WitnessVerifier::new(&settings.name, key.verifying_key())?;
        if verifier.to_string() != settings.verifier_key {
            return Err(WitnessError::WrongKey {
                expected: settings.verifier_key,
            });
        }
        let policy_path = dir.join("policy");
        let policy = witness_policy(&policy_path, &read_limited(&policy_path, MAX_POLICY_BYTES)?)?;
        let store = StateStore::open(&dir.join("state"), &dir.join("tmp"))?;
        Ok(Witness {
            dir: dir.to_path_buf(),
            settings,
            key,
            verifier,
            logs: policy.logs.into_iter().map(|l| l.verifier).collect(),
            store,
        })
    }

    /// The witness directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The witness's key name.
    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// The witness verifier key (type 0x04).
    pub fn verifier(&self) -> &WitnessVerifier {
        &self.verifier
    }

    /// The log keys witnessed.
    pub fn logs(&self) -> &[NoteVerifier] {
        &self.logs
    }

    /// The state store.
    pub fn store(&self) -> &StateStore {
        &self.store
    }

    /// tlog-witness `add-checkpoint`: parse `body`, decide, cosign at
    /// `now` (POSIX seconds), and durably record the new checkpoint before
    /// returning the cosignature lines.
    pub fn add_checkpoint(&self, body: &[u8], now: u64) -> Result<Cosigned, AddCheckpointError> {
        let request = AddCheckpointRequest::parse(body)
            .map_err(BadRequest::from)
            .map_err(Refusal::from)?;
        self.cosign(&request, now)
    }

    /// [`Witness::add_checkpoint`] for a parsed request.
    ///
    /// Read the record, [`decide`], sign, then compare-and-swap against the
    /// record read: if another request changed it meanwhile, decide again
    /// from the new record (which then usually answers 409).
    pub fn cosign(
        &self,
        request: &AddCheckpointRequest,
        now: u64,
    ) -> Result<Cosigned, AddCheckpointError> {
        let origin = &request.checkpoint.origin;
        for _ in 0..MAX_WITNESS_CAS_RETRIES {
            let head = self.store.load(origin)?.map(|r| r.head);
            let accepted = decide(&self.logs, head.as_ref(), request)?;
            let lines = cosig::sign(&request.note.text, &self.settings.name, &self.key, now)?;
            let mut note = format!("{}\n", request.note.text);
            for line in &accepted.log_signatures {
                note.push_str(&line.to_line());
            }
            note.push_str(&lines);
            // What is recorded must be a note its readers accept: refused
            // here (400), never a failed record write (500).
            if let Err(e) = note::Note::parse(note.as_bytes()) {
                return Err(Refusal::from(BadRequest::Unrecordable(e)).into());
            }
            match self.store.compare_and_swap(origin, head.as_ref(), &note) {
                Ok(()) => {
                    return Ok(Cosigned {
                        checkpoint: accepted.checkpoint,
                        timestamp: now,
                        lines,
                        note,
                    });
                }
                Err(CasError::Conflict { .. }) => continue,
                Err(CasError::State(e)) => return Err(e.into()),
            }
        }
        Err(StateError::Contended(origin.clone(), MAX_WITNESS_CAS_RETRIES).into())
    }

    /// The latest cosigned checkpoint of the origin whose tlog-witness
    /// "origin hash" (lowercase hex SHA-256) is `hash`, if any.
    pub fn checkpoint_by_origin_hash(&self, hash: &str) -> Result<Option<String>, StateError> {
        let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if hash.len() != 64 || !hash.chars().all(hex) {
            return Ok(None);
        }
        let origins = self.logs.iter().map(|l| l.name.as_str());
        match origins.into_iter().find(|o| origin_hash(o) == hash) {
            Some(origin) => Ok(self.store.load(origin)?.map(|r| r.note)),
            None => Ok(None),
        }
    }
}

/// Read `DIR/settings.json`.
fn read_settings(dir: &Path) -> Result<Settings, WitnessError> {
    let path = dir.join("settings.json");
    let bytes = read_limited(&path, MAX_KEY_FILE_BYTES)?;
    let settings: Settings =
        serde_json::from_slice(&bytes).map_err(|e| WitnessError::Settings {
            path: path.clone(),
            detail: e.to_string(),
        })?;
    if settings.format != SETTINGS_FORMAT {
        return Err(WitnessError::Settings {
            path,
            detail: format!("format {} is not {SETTINGS_FORMAT}", settings.format),
        });
    }
    Ok(settings)
}
