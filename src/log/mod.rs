//! log: the durable writer and reader of a tiled transparency log directory.
//!
//! Boundary: this module owns the files of a log directory and the order in
//! which they become durable (`spec/log.md`); it treats entries as opaque
//! bytes (the CLI validates envelopes before handing their entry bytes
//! here), takes hashing and proofs from [`merkle`](crate::merkle), paths and
//! encodings from [`tiles`](crate::tiles), and signed notes from
//! [`note`](crate::note). It never prints and never exits.
//!
//! Layout (DESIGN.md "Log", C2SP tlog-tiles): `DIR/checkpoint`,
//! `DIR/tile/<L>/<N>[.p/<W>]`, `DIR/tile/entries/<N>[.p/<W>]`, and private
//! state under `DIR/.rcpt/` (settings, writer lock, dedup index, every
//! published checkpoint, temporary files).

pub mod admit;
mod append;
mod check;
mod fsutil;
mod index;
pub mod layout;
mod lock;
pub mod tilebuild;

pub use check::{CheckReport, check};

use crate::keys::{NoteVerifier, SigningKey};
use crate::merkle::{self, Hash};
use crate::note::{self, Checkpoint};
use crate::tiles::{TileCache, TileReader};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use fsutil::io_err;
use index::Index;
use layout::Settings;
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a log operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A file-system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The device holding the log is full.
    #[error(
        "no space left on the device holding {path}; free some space and run the \
         append again (the log is unchanged: its checkpoint names only durable files)"
    )]
    NoSpace {
        /// The file being written.
        path: PathBuf,
    },
    /// The log directory is on a read-only file system.
    #[error(
        "{path} is on a read-only file system; appending needs write access to the log \
         directory (remount it read-write, or copy the log)"
    )]
    ReadOnly {
        /// The file or directory that could not be written.
        path: PathBuf,
    },
    /// A file is larger than the limit for its kind.
    #[error("{path} is {len} bytes, over the limit of {max}; it is not a file this log wrote")]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// `init` was given a directory that already holds files.
    #[error("{0} is not empty; init needs an empty or absent directory")]
    NotEmpty(PathBuf),
    /// `init` was given a key file inside the log directory.
    #[error(
        "key file {key} is inside the log directory {dir}, which is served publicly; \
         keep the private key outside it"
    )]
    KeyInsideLog {
        /// The key file.
        key: PathBuf,
        /// The log directory.
        dir: PathBuf,
    },
    /// The settings file is unreadable or malformed.
    #[error("log settings {path}: {detail}; is this a log made by `rcpt log init`?")]
    Settings {
        /// The settings file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// Another writer holds the lock.
    #[error(
        "another rcpt process is writing to {dir} (lock {lock} is held); \
         retry when it finishes, or pass --wait"
    )]
    Locked {
        /// The log directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The signing key given is not the log's key.
    #[error("the signing key is not the key of log {origin} (settings hold {expected})")]
    WrongKey {
        /// The log's origin.
        origin: String,
        /// The verifier key in the settings.
        expected: String,
    },
    /// A checkpoint file is malformed, badly signed, or for another log.
    #[error("checkpoint {path}: {detail}")]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// No checkpoint was published at this size.
    #[error("the log published no checkpoint of size {size} (latest is {latest})")]
    NoCheckpoint {
        /// The size asked for.
        size: u64,
        /// The latest size.
        latest: u64,
    },
    /// A size or index beyond the log.
    #[error("{what} {value} is beyond the log (latest checkpoint size {size})")]
    OutOfRange {
        /// What was asked for ("index", "size").
        what: &'static str,
        /// The value asked for.
        value: u64,
        /// The latest size.
        size: u64,
    },
    /// A tile or entry bundle is missing or malformed.
    #[error("tile {path}: {detail}")]
    Tile {
        /// The tile path, relative to the log directory.
        path: String,
        /// What was wrong.
        detail: String,
    },
    /// A stored tile differs from the one recomputed from the entries.
    #[error("tile {path} differs from the tile recomputed from the entries")]
    TileMismatch {
        /// The tile path, relative to the log directory.
        path: String,
    },
    /// A checkpoint's root is not the root recomputed from the entries.
    #[error("checkpoint {path} has root {claimed}, but the entries give {computed}")]
    RootMismatch {
        /// The checkpoint file.
        path: PathBuf,
        /// Base64 of the signed root.
        claimed: String,
        /// Base64 of the recomputed root.
        computed: String,
    },
    /// A proof could not be made.
    #[error("proof: {0}")]
    Proof(String),
    /// The dedup index failed.
    #[error("dedup index {path}: {detail}")]
    Index {
        /// The index file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// An entry of a batch is empty or over `MAX_ENTRY_BYTES`.
    #[error("entry {position} of the batch is {len} bytes; entries must be 1..={max} bytes")]
    EntrySize {
        /// Position in the batch.
        position: usize,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A batch over `MAX_APPEND_BATCH_ENTRIES` or `MAX_APPEND_BATCH_BYTES`.
    #[error("batch of {count} entries and {bytes} bytes is over the limits; split it")]
    BatchTooLarge {
        /// Entries in the batch.
        count: usize,
        /// Bytes in the batch.
        bytes: usize,
    },
    /// The tree would exceed `MAX_TREE_SIZE`.
    #[error("the log is full ({size} entries)")]
    Full {
        /// Current size.
        size: u64,
    },
    /// A file-writing thread panicked.
    #[error("a file-writing thread stopped unexpectedly; run the append again")]
    WriterThread,
    /// Signing the new checkpoint failed.
    #[error("signing the checkpoint: {0}")]
    Sign(String),
}

/// Where one appended entry landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Its index in the log.
    pub index: u64,
    /// False when the same entry was already logged (its first index is returned).
    pub new: bool,
}

/// A read-only view of a log directory at its latest checkpoint.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    settings: Settings,
    verifier: NoteVerifier,
    size: u64,
    root: Hash,
    checkpoint: String,
    /// The writer's open index; readers list the runs in [`Log::find`].
    index: Option<Index>,
    /// Full hash tiles already expanded for proofs (bounded; full tiles never change).
    tiles: Arc<TileCache>,
}

/// Parse a signed checkpoint note, verify it with the log key, and check
/// its origin (C2SP tlog-checkpoint; DESIGN.md "Log").
pub(crate) fn verify_checkpoint(
    text: &[u8],
    verifier: &NoteVerifier,
    origin: &str,
    path: &Path,
) -> Result<Checkpoint, LogError> {
    let bad = |detail: String| LogError::Checkpoint {
        path: path.to_path_buf(),
        detail,
    };
    let parsed = note::Note::parse(text).map_err(|e| bad(e.to_string()))?;
    match note::check(&parsed, std::slice::from_ref(verifier)) {
        note::NoteCheck::Verified { .. } => {}
        note::NoteCheck::Failed { name, .. } => {
            return Err(bad(format!("signature of {name} does not verify")));
        }
        note::NoteCheck::NotEvaluated => {
            return Err(bad(format!("not signed by the log key {verifier}")));
        }
    }
    let cp = Checkpoint::parse(&parsed.text).map_err(|e| bad(e.to_string()))?;
    if cp.origin != origin {
        return Err(bad(format!(
            "origin {:?} is not the log's {origin:?}",
            cp.origin
        )));
    }
    Ok(cp)
}

/// Sign the checkpoint of `size` leaves with root `root` as the log key.
fn sign_checkpoint(
    origin: &str,
    size: u64,
    root: Hash,
    key: &SigningKey,
) -> Result<String, LogError> {
    let body = Checkpoint {
        origin: origin.to_string(),
        size,
        root_hash: root,
        extensions: Vec::new(),
    };
    note::sign(&body.to_text(), origin, key).map_err(|e| LogError::Sign(e.to_string()))
}

impl Log {
    /// Create a new empty log in `dir` (empty or absent), with its first checkpoint (size 0).
    pub fn init(dir: &Path, origin: &str, key: &SigningKey) -> Result<Log, LogError> {
        Log::create(dir, origin, key, None)
    }

    /// [`Log::init`], recording the absolute path of the key file (which
    /// must lie outside `dir`) so that later appends can find it.
    pub fn create(
        dir: &Path,
        origin: &str,
        key: &SigningKey,
        key_file: Option<&Path>,
    ) -> Result<Log, LogError> {
        Log::create_accepting(dir, origin, key, key_file, None)
    }

    /// [`Log::create`], keeping `accepted` as the log's accepted issuers
    /// (`DIR/.rcpt/trust.json`): appends then refuse an envelope without a
    /// valid signature by the issuer it names ([`admit::admit`]).
    pub fn create_accepting(
        dir: &Path,
        origin: &str,
        key: &SigningKey,
        key_file: Option<&Path>,
        accepted: Option<&admit::AcceptedIssuers>,
    ) -> Result<Log, LogError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let dir = std::fs::canonicalize(dir).map_err(io_err(dir))?;
        let key_file = match key_file {
            Some(k) => {
                let k = std::fs::canonicalize(k).map_err(io_err(k))?;
                if k.starts_with(&dir) {
                    return Err(LogError::KeyInsideLog { key: k, dir });
                }
                Some(k)
            }
            None => None,
        };
        // The key's place is checked first: a key inside is the worse mistake.
        if std::fs::read_dir(&dir)
            .map_err(io_err(&dir))?
            .next()
            .is_some()
        {
            return Err(LogError::NotEmpty(dir));
        }
        let verifier =
            NoteVerifier::new(origin, key.verifying_key()).map_err(|e| LogError::Settings {
                path: layout::settings(&dir),
                detail: format!("origin {origin:?} is not a valid key name: {e}"),
            })?;
        let settings = Settings {
            format: layout::SETTINGS_FORMAT,
            origin: origin.to_string(),
            public_key: STANDARD.encode(key.verifying_key().as_bytes()),
            verifier_key: verifier.to_string(),
            key_file,
        };
        let checkpoint = sign_checkpoint(origin, 0, merkle::empty_root(), key)?;
        let tmp = layout::tmp(&dir);
        for d in [layout::checkpoints(&dir), tmp.clone()] {
            std::fs::create_dir_all(&d).map_err(io_err(&d))?;
        }
        let settings_path = layout::settings(&dir);
        fsutil::write_durable(&tmp, &settings_path, &settings.to_json()?)?;
        if let Some(accepted) = accepted {
            fsutil::write_durable(&tmp, &layout::trust(&dir), &accepted.to_json())?;
        }
        let kept = layout::checkpoint_at(&dir, 0);
        fsutil::write_durable(&tmp, &kept, checkpoint.as_bytes())?;
        fsutil::sync_dirs(&dir, [settings_path.as_path(), kept.as_path()])?;
        // The public checkpoint goes last: its presence marks a complete init.
        publish(&dir, &checkpoint)?;
        Log::open(&dir)
    }

    /// Open an existing log read-only at its latest checkpoint.
    pub fn open(dir: &Path) -> Result<Log, LogError> {
        let settings = Settings::read(dir)?;
        let bad = |detail: String| LogError::Settings {
            path: layout::settings(dir),
            detail,
        };
        let raw = STANDARD
            .decode(&settings.public_key)
            .map_err(|e| bad(format!("public_key: {e}")))?;
        let vk = crate::keys::verifying_key_from_bytes(&raw)
            .map_err(|e| bad(format!("public_key: {e}")))?;
        let verifier =
            NoteVerifier::new(&settings.origin, vk).map_err(|e| bad(format!("origin: {e}")))?;
        let path = layout::checkpoint(dir);
        let text = fsutil::read_limited(&path, crate::limits::MAX_NOTE_BYTES)?;
        let cp = verify_checkpoint(&text, &verifier, &settings.origin, &path)?;
        let checkpoint = String::from_utf8(text).map_err(|e| LogError::Checkpoint {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        Ok(Log {
            dir: dir.to_path_buf(),
            settings,
            verifier,
            size: cp.size,
            root: cp.root_hash,
            checkpoint,
            index: None,
            tiles: Arc::new(TileCache::new()),
        })
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Origin line (and log key name).
    pub fn origin(&self) -> &str {
        &self.settings.origin
    }

    /// The log's checkpoint verifier key.
    pub fn verifier(&self) -> &NoteVerifier {
        &self.verifier
    }

    /// The key file recorded at init, if any.
    pub fn key_file(&self) -> Option<&Path> {
        self.settings.key_file.as_deref()
    }

    /// The issuers this log accepts (`DIR/.rcpt/trust.json`, given at
    /// init), or `None` when it has none (signatures are then not checked).
    pub fn accepted_issuers(&self) -> Result<Option<admit::AcceptedIssuers>, LogError> {
        let path = layout::trust(&self.dir);
        let bytes = match fsutil::read_limited(&path, crate::limits::MAX_KEY_FILE_BYTES) {
            Err(LogError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            other => other?,
        };
        admit::AcceptedIssuers::from_json(&bytes)
            .map(Some)
            .map_err(|e| LogError::Settings {
                path,
                detail: e.to_string(),
            })
    }

    /// Tree size of the latest checkpoint.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Root hash of the latest checkpoint.
    pub fn root(&self) -> Hash {
        self.root
    }

    /// The latest signed checkpoint note text.
    pub fn checkpoint(&self) -> &str {
        &self.checkpoint
    }

    /// Signed checkpoint note published at `size` (kept under `.rcpt/checkpoints/`).
    pub fn checkpoint_at(&self, size: u64) -> Result<String, LogError> {
        if size == self.size {
            return Ok(self.checkpoint.clone());
        }
        self.in_range("size", size, self.size)?;
        let path = layout::checkpoint_at(&self.dir, size);
        let text = match fsutil::read_limited(&path, crate::limits::MAX_NOTE_BYTES) {
            Err(LogError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Err(LogError::NoCheckpoint {
                    size,
                    latest: self.size,
                });
            }
            other => other?,
        };
        let cp = verify_checkpoint(&text, &self.verifier, self.origin(), &path)?;
        if cp.size != size {
            return Err(LogError::Checkpoint {
                path,
                detail: format!("holds size {}, not {size}", cp.size),
            });
        }
        String::from_utf8(text).map_err(|e| LogError::Checkpoint {
            path,
            detail: e.to_string(),
        })
    }

    /// Refuse `value` unless it is at most `max`.
    fn in_range(&self, what: &'static str, value: u64, max: u64) -> Result<(), LogError> {
        if value > max {
            return Err(LogError::OutOfRange {
                what,
                value,
                size: self.size,
            });
        }
        Ok(())
    }

    /// A tile reader of the tree at `size` (at most the latest size).
    fn reader(&self, size: u64) -> TileReader {
        TileReader::with_cache(&self.dir, size, Arc::clone(&self.tiles))
    }

    /// Entry bytes at `index`.
    pub fn entry(&self, index: u64) -> Result<Vec<u8>, LogError> {
        if index >= self.size {
            return Err(LogError::OutOfRange {
                what: "index",
                value: index,
                size: self.size,
            });
        }
        self.reader(self.size)
            .entry(index)
            .map_err(|e| LogError::Tile {
                path: crate::tiles::entries_tile_path(index / crate::tiles::TILE_WIDTH, None),
                detail: e.to_string(),
            })
    }

    /// True when entry `index` (below the checkpoint size) has leaf hash `leaf`.
    fn confirm(&self, index: u64, leaf: &Hash) -> Result<bool, LogError> {
        if index >= self.size {
            return Ok(false);
        }
        Ok(merkle::leaf_hash(&self.entry(index)?) == *leaf)
    }

    /// First index of the entry with this leaf hash, if logged.
    ///
    /// The dedup index is a hint: a hit counts only when confirmed against
    /// the entry. Entries the index does not cover (a writer holds it, or it
    /// is behind) are scanned.
    pub fn find(&self, leaf: &Hash) -> Result<Option<u64>, LogError> {
        let transient;
        let index = match &self.index {
            Some(i) => i,
            None => {
                transient = Index::open(&layout::index(&self.dir), self.size)?;
                &transient
            }
        };
        match self.find_hinted(index, leaf) {
            Ok(found) => Ok(found),
            // A writer may merge runs away while we read them: scan instead.
            Err(LogError::Io { .. } | LogError::Index { .. }) => self.scan(leaf, 0),
            Err(e) => Err(e),
        }
    }

    /// Confirm `index`'s candidates for `leaf`, then scan what it does not cover.
    fn find_hinted(&self, index: &Index, leaf: &Hash) -> Result<Option<u64>, LogError> {
        for (_, i) in index.get_many(std::slice::from_ref(leaf))? {
            if self.confirm(i, leaf)? {
                return Ok(Some(i));
            }
        }
        self.scan(leaf, index.indexed_size().min(self.size))
    }

    /// Look for `leaf` among entries `from..size`, one entry bundle at a time.
    fn scan(&self, leaf: &Hash, from: u64) -> Result<Option<u64>, LogError> {
        let mut found = None;
        check::for_each_bundle(&self.dir, from, self.size, |first, entries| {
            if found.is_none()
                && let Some(k) = entries.iter().position(|e| merkle::leaf_hash(e) == *leaf)
            {
                found = Some(first + k as u64);
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// Inclusion proof of `index` in the tree of `size` leaves.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, LogError> {
        self.in_range("size", size, self.size)?;
        merkle::prove_inclusion(index, size, &self.reader(size))
            .map_err(|e| LogError::Proof(e.to_string()))
    }

    /// Inclusion proofs of many `indexes` in the tree of `size` leaves,
    /// made in parallel (one result per index, in order).
    pub fn inclusion_proofs(&self, indexes: &[u64], size: u64) -> Vec<Result<Vec<Hash>, LogError>> {
        indexes
            .par_iter()
            .map(|&i| self.inclusion_proof(i, size))
            .collect()
    }

    /// Consistency proof from `m` to `n`.
    pub fn consistency_proof(&self, m: u64, n: u64) -> Result<Vec<Hash>, LogError> {
        self.in_range("size", n, self.size)?;
        merkle::prove_consistency(m, n, &self.reader(n)).map_err(|e| LogError::Proof(e.to_string()))
    }
}

/// Publish `checkpoint` as `DIR/checkpoint`: temp file, fsync, rename,
/// fsync the directory (`spec/log.md`, step 8).
fn publish(dir: &Path, checkpoint: &str) -> Result<(), LogError> {
    let path = layout::checkpoint(dir);
    fsutil::write_durable(&layout::tmp(dir), &path, checkpoint.as_bytes())?;
    fsutil::sync_dir(dir)
}

/// Remove kept checkpoints past `size`: an append that crashed between
/// keeping and publishing its checkpoint left them (`spec/log.md`, step 7).
fn remove_unpublished(dir: &Path, size: u64) -> Result<(), LogError> {
    for s in check::kept_sizes(dir)?.into_iter().filter(|&s| s > size) {
        let path = layout::checkpoint_at(dir, s);
        std::fs::remove_file(&path).map_err(io_err(&path))?;
    }
    fsutil::sync_dir(&layout::checkpoints(dir))
}

/// The single writer of a log (holds `DIR/.rcpt/lock`).
#[derive(Debug)]
pub struct LogWriter {
    log: Log,
    key: SigningKey,
    frontier: merkle::Frontier,
    _lock: lock::WriterLock,
}

impl LogWriter {
    /// Take the lock (waiting for another writer when `wait`), repair any
    /// work past the checkpoint, and open for appends.
    pub fn open(dir: &Path, key: &SigningKey, wait: bool) -> Result<LogWriter, LogError> {
        let lock = lock::WriterLock::acquire(dir, wait)?;
        let mut log = Log::open(dir)?;
        if log.verifier.key != key.verifying_key() {
            return Err(LogError::WrongKey {
                origin: log.settings.origin.clone(),
                expected: log.settings.verifier_key.clone(),
            });
        }
        // Repair: temporary files of an interrupted append are dropped;
        // tiles past the checkpoint are rewritten by the next append.
        fsutil::clear_dir(&layout::tmp(dir))?;
        remove_unpublished(dir, log.size)?;
        let frontier = merkle::Frontier::from_reader(log.size, &log.reader(log.size))
            .map_err(|e| LogError::Proof(format!("rebuilding the tree edge: {e}")))?;
        let old_index = layout::old_index(dir);
        if old_index.is_file() {
            std::fs::remove_file(&old_index).map_err(io_err(&old_index))?;
        }
        log.index = Some(Index::open_writer(&layout::index(dir), log.size)?);
        let mut writer = LogWriter {
            log,
            key: key.clone(),
            frontier,
            _lock: lock,
        };
        writer.catch_up_index()?;
        Ok(writer)
    }

    /// The log as it stands after the last append.
    pub fn log(&self) -> &Log {
        &self.log
    }
}
