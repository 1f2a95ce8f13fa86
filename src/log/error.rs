//! error: why a log operation failed, one variant per distinct failure,
//! each keeping its cause as a `#[source]` (never flattened to text).

use crate::keys::KeyError;
use crate::storage::StoreError;
use crate::tlog::merkle::{FrontierError, ProveError};
use crate::tlog::note::NoteError;
use crate::tlog::tiles::TileError;

/// Why a log operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The store failed (I/O, a full or read-only disk, the lock, a conflict).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A tile or entry bundle is missing or malformed.
    #[error(transparent)]
    Tile(#[from] TileError),
    /// The directory (or store) holds no log.
    #[error(
        "{location} is not a log (it has no checkpoint); make one with \
         `rcpt log init {location} --origin ORIGIN --key LOG.key`"
    )]
    NotALog {
        /// The directory or store.
        location: String,
    },
    /// The directory named as the log does not exist (a bad invocation,
    /// like any other missing input).
    #[error(
        "{location}: no such directory (a log is made with `rcpt log init {location} --origin \
         ORIGIN --key LOG.key`)"
    )]
    NoSuchDirectory {
        /// The directory.
        location: String,
    },
    /// The log's public files are there, its settings are not (a copy or a
    /// mirror), and no log key was given.
    #[error(
        "{location} has a checkpoint but no .rcpt/settings.json (a copy of a log's public \
         files?); pass the log's verifier key with --log-key to read it"
    )]
    NoLogKey {
        /// The directory or store.
        location: String,
    },
    /// A copy of a log's public files (no `.rcpt/`) takes no appends.
    #[error(
        "{location} holds a log's public files but not its private state (.rcpt/): it can be \
         read (with --log-key), not appended to; append to the log itself"
    )]
    NotWritable {
        /// The directory or store.
        location: String,
    },
    /// The log key given is not the one in the log's settings.
    #[error("the log key {given} is not the key of this log ({expected})")]
    OtherLogKey {
        /// The verifier key given.
        given: String,
        /// The verifier key in the settings.
        expected: String,
    },
    /// Another writer holds the lock.
    #[error(
        "another rcpt process is writing to {dir} (lock {lock} is held); \
         retry when it finishes, or pass --wait"
    )]
    Locked {
        /// The log directory (or store).
        dir: String,
        /// The lock (file or object).
        lock: String,
    },
    /// `init` was given a store that already holds files.
    #[error("{0} is not empty; init needs an empty or absent directory")]
    NotEmpty(String),
    /// `init` was given a key file inside the log directory.
    #[error(
        "key file {key} is inside the log directory {dir}, which is served publicly; \
         keep the private key outside it"
    )]
    KeyInsideLog {
        /// The key file.
        key: String,
        /// The log directory.
        dir: String,
    },
    /// The settings are unreadable or malformed.
    #[error(
        "log settings .rcpt/settings.json of {location}; is this a log made by `rcpt log init`?"
    )]
    Settings {
        /// The directory or store.
        location: String,
        /// What was wrong.
        #[source]
        source: SettingsError,
    },
    /// The accepted issuers (`.rcpt/trust.json`) are unreadable or malformed.
    #[error("accepted issuers .rcpt/trust.json of {location}")]
    Trust {
        /// The directory or store.
        location: String,
        /// What was wrong.
        #[source]
        source: Box<super::admit::AcceptedError>,
    },
    /// The signing key given is not the log's key.
    #[error("the signing key is not the key of log {origin} (settings hold {expected})")]
    WrongKey {
        /// The log's origin.
        origin: String,
        /// The verifier key in the settings.
        expected: String,
    },
    /// A checkpoint is malformed, badly signed, or for another log.
    #[error("{}", checkpoint_label(name))]
    Checkpoint {
        /// `checkpoint` or `.rcpt/checkpoints/<size>`.
        name: String,
        /// What was wrong.
        #[source]
        source: CheckpointError,
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
    /// A stored tile differs from the one recomputed from the entries.
    #[error("tile {path} differs from the tile recomputed from the entries")]
    TileMismatch {
        /// The tile path.
        path: String,
    },
    /// A tile kept for an earlier published size differs from the tree at
    /// that size, or is missing.
    #[error("{path}, kept for the checkpoint of size {size}, {problem} the tree at that size")]
    KeptMismatch {
        /// The tile or entry bundle path.
        path: String,
        /// The published size it belongs to.
        size: u64,
        /// "differs from" or "is missing from".
        problem: &'static str,
    },
    /// A checkpoint's root is not the root recomputed from the entries.
    #[error("checkpoint {name} has root {claimed}, but the entries give {computed}")]
    RootMismatch {
        /// `checkpoint` or `.rcpt/checkpoints/<size>`.
        name: String,
        /// Base64 of the signed root.
        claimed: String,
        /// Base64 of the recomputed root.
        computed: String,
    },
    /// A logged entry is not an envelope (a log this rcpt did not write?).
    #[error("decoding entry {index}")]
    EntryDecode {
        /// The entry's index.
        index: u64,
        /// Why it is not an envelope.
        #[source]
        source: crate::receipt::dsse::EntryError,
    },
    /// A logged envelope holds no valid receipt.
    #[error("entry {index} holds no valid receipt")]
    EntryPayload {
        /// The entry's index.
        index: u64,
        /// Why the payload was refused.
        #[source]
        source: crate::receipt::PayloadError,
    },
    /// A proof could not be made.
    #[error("proof")]
    Proof(#[source] ProveError<TileError>),
    /// A dedup index run is damaged.
    #[error("dedup index {run}: {detail}; remove the file to rebuild it")]
    Index {
        /// The run.
        run: String,
        /// What is wrong with it.
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
    #[error("the log is full")]
    Full(#[source] FrontierError),
    /// Signing the new checkpoint failed.
    #[error("signing the checkpoint")]
    Sign(#[source] NoteError),
    /// The writer stopped for good: another writer published, or its lock
    /// was lost. Open a new writer (which re-reads the truth).
    #[error("this writer has stopped ({reason}); open the log again")]
    Stopped {
        /// Why.
        reason: &'static str,
    },
}

/// Why the settings file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The file is absent although the checkpoint is there.
    #[error("missing")]
    Missing,
    /// Not the settings JSON.
    #[error("not valid settings JSON")]
    Json(#[source] serde_json::Error),
    /// The public key is not a usable Ed25519 key.
    #[error("public_key")]
    PublicKey(#[source] KeyError),
    /// The public key is not base64.
    #[error("public_key is not base64")]
    Base64(#[source] base64::DecodeError),
    /// The origin is not a valid key name.
    #[error("origin {origin:?} is not a valid key name")]
    Origin {
        /// The origin.
        origin: String,
        /// Why.
        #[source]
        source: KeyError,
    },
}

/// " (it is signed by A, B)", or nothing for a note with no signatures.
fn signed_by(signers: &[String]) -> String {
    if signers.is_empty() {
        return String::new();
    }
    format!(" (it is signed by {})", signers.join(", "))
}

/// How a checkpoint is named in a message: the published one as "the
/// checkpoint", a kept one by its path.
fn checkpoint_label(name: &str) -> String {
    if name == "checkpoint" {
        "the checkpoint".to_string()
    } else {
        format!("checkpoint {name}")
    }
}

/// Why a checkpoint was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Not a signed note, or not a checkpoint body.
    #[error("is malformed")]
    Malformed(#[source] NoteError),
    /// A signature by the log key's name does not verify.
    #[error("has a signature by {name} that does not verify")]
    BadSignature {
        /// The signer name.
        name: String,
    },
    /// No signature by the log key.
    #[error("is not signed by the log key {key}{}", signed_by(signers))]
    Unsigned {
        /// The log's verifier key.
        key: String,
        /// The names on the note's signature lines (what did sign it).
        signers: Vec<String>,
    },
    /// Another log's checkpoint.
    #[error("has origin {found:?}, not the log's {expected:?}")]
    Origin {
        /// The origin found.
        found: String,
        /// The log's origin.
        expected: String,
    },
    /// A kept checkpoint whose size is not its name.
    #[error("holds size {found}, but is kept as size {expected}")]
    Size {
        /// The size inside.
        found: u64,
        /// The size it is kept as.
        expected: u64,
    },
    /// A file in `.rcpt/checkpoints/` that is not a tree size.
    #[error("is not a checkpoint name (a tree size in decimal)")]
    Name,
    /// A kept checkpoint the tree never reached.
    #[error("was not reached while recomputing the tree")]
    Unreached,
    /// A note offered as the latest checkpoint with more signatures
    /// whose body is not the latest checkpoint's.
    #[error("is not the latest checkpoint (another tree size or root)")]
    NotLatest,
}

impl LogError {
    /// No checkpoint at `location`: no such directory when the store knows
    /// it is not there, else "not a log".
    pub(crate) fn no_log(store: &dyn crate::storage::PublicRead, location: String) -> LogError {
        if store.exists() {
            LogError::NotALog { location }
        } else {
            LogError::NoSuchDirectory { location }
        }
    }

    /// True when the error is a bad invocation (the named log directory
    /// does not exist).
    pub fn is_bad_path(&self) -> bool {
        matches!(self, LogError::NoSuchDirectory { .. })
    }
}
