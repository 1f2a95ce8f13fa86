//! witness: a C2SP tlog-witness v1 witness, without the HTTP.
//!
//! Boundary: a witness directory (settings, the policy of logs it
//! witnesses, per-origin state), the `add-checkpoint` decision as a pure
//! function of (known logs, stored tree head, request) ([`decide`]), and
//! [`Witness::add_checkpoint`], which parses a request body, decides, signs
//! a `cosignature/v1` and commits the new state by compare-and-swap before
//! returning. An HTTP server only maps the result to a response
//! ([`Refusal::status`], [`Refusal::content_type`], [`Refusal::body`]).
//! Layout and rules: `spec/witness.md`.
//!
//! ```text
//! DIR/settings.json   name, public key, verifier key, key file path
//! DIR/policy          tlog-policy file: its `log` lines are the logs witnessed
//! DIR/state/<hex SHA-256(origin)>        latest cosigned checkpoint of that origin
//! DIR/state/<hex SHA-256(origin)>.lock   its compare-and-swap lock
//! DIR/tmp/            temporary files, renamed into place once durable
//! ```

mod request;
mod state;

pub use request::{AddCheckpointRequest, RequestError, parse_size_body};
pub use state::{CasError, Record, StateError, StateStore, TreeHead, origin_hash};

use crate::constants::TLOG_SIZE_CONTENT_TYPE;
use crate::keys::{NoteVerifier, SigningKey};
use crate::limits::{MAX_KEY_FILE_BYTES, MAX_POLICY_BYTES, MAX_WITNESS_CAS_RETRIES};
use crate::tlog::cosig::{self, CosigError, WitnessVerifier};
use crate::tlog::merkle::{self, ProofError};
use crate::tlog::note::{self, Checkpoint, NoteCheck, NoteSignature};
use crate::tlog::policy::{TlogPolicy, TlogPolicyError};
use std::path::{Path, PathBuf};

/// `Content-Type` of a 200 answer and of refusals other than 409.
pub use crate::constants::TEXT_CONTENT_TYPE;
/// Version of the settings file format.
pub const SETTINGS_FORMAT: u64 = 1;

/// What [`decide`] found acceptable: the checkpoint may be cosigned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The checkpoint body.
    pub checkpoint: Checkpoint,
    /// The log signature lines that verified (kept with the state).
    pub log_signatures: Vec<NoteSignature>,
}

/// A 400 Bad Request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    /// The body does not parse.
    #[error(transparent)]
    Malformed(#[from] RequestError),
    /// "The old size MUST be equal to or lower than the checkpoint size."
    #[error("old size {old} is larger than the checkpoint size {size}")]
    OldSizeAboveCheckpoint {
        /// The old size.
        old: u64,
        /// The checkpoint size.
        size: u64,
    },
    /// The checkpoint with this witness's cosignature appended would not be
    /// a note a reader accepts (over the C2SP size or signature-line limits).
    #[error("the checkpoint with this witness's cosignature would not be a valid note")]
    Unrecordable(#[source] crate::tlog::note::NoteError),
}

/// A 403 Forbidden: the checkpoint is not validly signed by a known log key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Forbidden {
    /// No signature line by a trusted key of the origin.
    #[error("no signature by a known key of log {origin}")]
    NotSigned {
        /// The origin.
        origin: String,
    },
    /// A line with a trusted key's name and key hash did not verify.
    #[error("signature of known log key {name}+{} does not verify", crate::digest::to_hex(.key_hash))]
    BadSignature {
        /// Key name.
        name: String,
        /// Key hash.
        key_hash: [u8; 4],
    },
}

/// A 422 Unprocessable Entity: the checkpoint is not consistent with the
/// witness's record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unprocessable {
    /// "A checkpoint of size zero MUST have the root hash of the empty tree".
    #[error("a checkpoint of size 0 must have the empty tree's root hash")]
    EmptyTreeRoot,
    /// "If the old size is zero, the consistency proof MUST be empty".
    #[error("old size is 0 but the request carries {0} proof line(s); send none")]
    ProofNotEmpty(usize),
    /// The consistency proof does not verify, or equal sizes with other roots.
    #[error("not consistent with the cosigned checkpoint of size {old}")]
    Inconsistent {
        /// The witness's size.
        old: u64,
        /// Why the proof failed.
        #[source]
        source: ProofError,
    },
}

/// Every refusal tlog-witness v1 names for `add-checkpoint`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// 400: malformed request, or old size above the checkpoint size.
    #[error("bad request")]
    BadRequest(#[from] BadRequest),
    /// 403: not signed by a known key of the origin, or a known key's bad signature.
    #[error("forbidden")]
    Forbidden(#[from] Forbidden),
    /// 404: the origin is not a log this witness witnesses.
    #[error("unknown log origin {origin:?}")]
    UnknownOrigin {
        /// The origin.
        origin: String,
    },
    /// 409: the old size is not the size the witness last cosigned.
    #[error("conflict: the witness last cosigned size {size} of this log")]
    Conflict {
        /// The size of the latest cosigned checkpoint (0: never cosigned).
        size: u64,
    },
    /// 422: not consistent with the witness's record.
    #[error("unprocessable")]
    Unprocessable(#[from] Unprocessable),
}

impl Refusal {
    /// The HTTP status tlog-witness assigns.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::BadRequest(_) => 400,
            Refusal::Forbidden(_) => 403,
            Refusal::UnknownOrigin { .. } => 404,
            Refusal::Conflict { .. } => 409,
            Refusal::Unprocessable(_) => 422,
        }
    }

    /// `text/x.tlog.size` for 409, else plain text.
    pub fn content_type(&self) -> &'static str {
        match self {
            Refusal::Conflict { .. } => TLOG_SIZE_CONTENT_TYPE,
            _ => TEXT_CONTENT_TYPE,
        }
    }

    /// 409: "the tree size of the latest cosigned checkpoint in decimal,
    /// followed by a newline"; otherwise the reason, for people.
    pub fn body(&self) -> String {
        match self {
            Refusal::Conflict { size } => format!("{size}\n"),
            other => format!("{}\n", error_chain(other)),
        }
    }
}

/// An error and its sources, joined by ": " (one line for people).
pub use crate::io::error_chain;

/// The tlog-witness v1 `add-checkpoint` checks, in the order the spec
/// gives them, over the witness's `logs` (all of them; those named after
/// the origin apply), its record for the origin (`None`: never cosigned)
/// and a parsed request. Pure: no I/O, no clock, no key.
pub fn decide(
    logs: &[NoteVerifier],
    state: Option<&TreeHead>,
    request: &AddCheckpointRequest,
) -> Result<Accepted, Refusal> {
    let cp = &request.checkpoint;
    let known: Vec<NoteVerifier> = logs
        .iter()
        .filter(|l| l.name == cp.origin)
        .cloned()
        .collect();
    // "If the checkpoint origin is unknown, the witness MUST respond with 404".
    if known.is_empty() {
        return Err(Refusal::UnknownOrigin {
            origin: cp.origin.clone(),
        });
    }
    // 403 when no trusted signature, or a trusted key's signature fails;
    // signatures of unknown keys are ignored.
    match note::check(&request.note, &known) {
        NoteCheck::Verified { .. } => {}
        NoteCheck::Failed { name, key_hash } => {
            return Err(Forbidden::BadSignature { name, key_hash }.into());
        }
        NoteCheck::NotEvaluated => {
            let origin = cp.origin.clone();
            return Err(Forbidden::NotSigned { origin }.into());
        }
    }
    let old = request.old_size;
    if old > cp.size {
        return Err(BadRequest::OldSizeAboveCheckpoint { old, size: cp.size }.into());
    }
    let (size, root) = state.map_or((0, merkle::empty_root()), |h| (h.size, h.root));
    if old != size {
        return Err(Refusal::Conflict { size });
    }
    consistent(old, &root, request)?;
    // One line per known key: a note may repeat a valid line (C2SP
    // signed-note allows it), the record keeps it once.
    let mut log_signatures: Vec<NoteSignature> = Vec::new();
    for l in &request.note.signatures {
        let is_known = known
            .iter()
            .any(|k| k.name == l.name && k.key_hash == l.key_hash);
        let seen = log_signatures
            .iter()
            .any(|s| s.name == l.name && s.key_hash == l.key_hash);
        if is_known && !seen {
            log_signatures.push(l.clone());
        }
    }
    Ok(Accepted {
        checkpoint: cp.clone(),
        log_signatures,
    })
}

/// The 422 checks: empty-tree root, empty proof from size 0, and the
/// RFC 6962 consistency proof from the recorded (`old`, `root`) (equal
/// sizes need equal roots).
fn consistent(
    old: u64,
    root: &merkle::Hash,
    request: &AddCheckpointRequest,
) -> Result<(), Unprocessable> {
    let cp = &request.checkpoint;
    if cp.size == 0 && cp.root_hash != merkle::empty_root() {
        return Err(Unprocessable::EmptyTreeRoot);
    }
    if old == 0 && !request.proof.is_empty() {
        return Err(Unprocessable::ProofNotEmpty(request.proof.len()));
    }
    merkle::verify_consistency(old, cp.size, &request.proof, root, &cp.root_hash)
        .map_err(|source| Unprocessable::Inconsistent { old, source })
}

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
