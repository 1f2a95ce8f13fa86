//! log: a tiled transparency log: its reader ([`Log`], here), its one
//! writer ([`LogWriter`], `writer.rs`), what it admits (`admit.rs`) and its
//! full check (`check.rs`); every way into it is the intake (`intake/`).
//!
//! Boundary: this module decides what a log's objects hold and in which
//! order they become durable (`spec/log.md`); where the bytes live is a
//! [`Store`](crate::storage::Store)'s business (`spec/storage.md`), and
//! every read and write goes through one. Entries are opaque bytes here
//! ([`admit`] decides which envelopes become entries); hashing and proofs
//! come from [`merkle`](crate::tlog::merkle), tile encodings and tile reads from
//! [`tiles`](crate::tlog::tiles), signed notes from [`note`](crate::tlog::note). It
//! never prints and never exits.
//!
//! Modules depend downward only, with no circle: `writer` and `check` use
//! this reader, `index` (the dedup runs) and `tilebuild` (subtrees into
//! tiles); `step` names the append's steps; `error` and `settings` are
//! leaves. The reader uses `index` (for `find`), never `writer` or `check`.
//! `intake` sits above them all: it uses `admit`, `writer` and `bundle`,
//! and nothing here uses it.

pub mod admit;
mod bundle;
mod check;
mod create;
mod entry;
mod error;
mod index;
pub mod intake;
mod settings;
mod step;
pub mod tilebuild;
mod writer;

pub use check::{CheckReport, check, check_log};
pub use create::InitOptions;
pub use entry::HashedEntry;
pub use error::{CheckpointError, LogError, SettingsError};
pub use settings::{SETTINGS_FORMAT, Settings};
pub use step::Step;
pub use writer::LogWriter;

use crate::keys::{NoteVerifier, SigningKey};
use crate::storage::posix::PosixStore;
use crate::storage::tiles::{TileCache, TileReader};
use crate::storage::{PrivateDir, PrivateKey, Store, TileKey, Version, Width};
use crate::tlog::merkle::{self, Hash};
use crate::tlog::note::{self, Checkpoint};
use crate::tlog::tiles::TILE_WIDTH;
use index::Index;
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;

/// Largest checkpoint note read.
const MAX_CHECKPOINT_BYTES: usize = crate::limits::MAX_NOTE_BYTES;

/// Where one appended entry landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Its index in the log.
    pub index: u64,
    /// False when the same entry was already logged (its first index is returned).
    pub new: bool,
}

/// A log as published: its latest checkpoint, verified, and every proof
/// and entry the public objects give. Readers take no lock: every object
/// the checkpoint names is durable and never changes.
#[derive(Clone, Debug)]
pub struct Log {
    store: Arc<dyn Store>,
    origin: String,
    verifier: NoteVerifier,
    key_file: Option<std::path::PathBuf>,
    size: u64,
    root: Hash,
    checkpoint: String,
    version: Version,
    /// Hash tiles already expanded for proofs (bounded; they never change).
    tiles: Arc<TileCache>,
}

/// A kept or published checkpoint's name in messages.
fn checkpoint_name(kept: Option<u64>) -> String {
    kept.map_or_else(
        || "checkpoint".to_string(),
        |s| PrivateKey::Checkpoint(s).to_string(),
    )
}

/// Parse a signed checkpoint note, verify it with the log key, and check
/// its origin (C2SP tlog-checkpoint; `spec/log.md` "Checkpoint"). `kept`
/// names a kept checkpoint in errors.
pub(crate) fn verify_checkpoint(
    text: &[u8],
    verifier: &NoteVerifier,
    kept: Option<u64>,
) -> Result<Checkpoint, LogError> {
    let bad = |source| LogError::Checkpoint {
        name: checkpoint_name(kept),
        source,
    };
    let parsed = note::Note::parse(text).map_err(|e| bad(CheckpointError::Malformed(e)))?;
    match note::check(&parsed, std::slice::from_ref(verifier)) {
        note::NoteCheck::Verified { .. } => {}
        note::NoteCheck::Failed { name, .. } => {
            return Err(bad(CheckpointError::BadSignature { name }));
        }
        note::NoteCheck::NotEvaluated => {
            let mut signers: Vec<String> =
                parsed.signatures.iter().map(|s| s.name.clone()).collect();
            signers.dedup();
            return Err(bad(CheckpointError::Unsigned {
                key: verifier.to_string(),
                signers,
            }));
        }
    }
    let cp = Checkpoint::parse(&parsed.text).map_err(|e| bad(CheckpointError::Malformed(e)))?;
    if cp.origin != verifier.name {
        return Err(bad(CheckpointError::Origin {
            found: cp.origin,
            expected: verifier.name.clone(),
        }));
    }
    if let Some(size) = kept.filter(|&s| s != cp.size) {
        return Err(bad(CheckpointError::Size {
            found: cp.size,
            expected: size,
        }));
    }
    Ok(cp)
}

/// Sign the checkpoint of `size` leaves with root `root` as the log key.
pub(crate) fn sign_checkpoint(
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
    note::sign(&body.to_text(), origin, key).map_err(LogError::Sign)
}

impl Log {
    /// Open the log in the directory `dir` at its latest checkpoint.
    pub fn open(dir: &Path) -> Result<Log, LogError> {
        Log::open_store(Arc::new(PosixStore::new(dir)), None)
    }

    /// Open the log in `store` at its latest checkpoint, verified with the
    /// key in its settings, or with `log_key` when it has none (a copy of
    /// the public files: `spec/log.md` "Reading a copy"). Both given: they
    /// must agree.
    pub fn open_store(
        store: Arc<dyn Store>,
        log_key: Option<&NoteVerifier>,
    ) -> Result<Log, LogError> {
        let location = store.describe();
        let settings = Settings::read(&*store)?;
        let Some(read) = store.read_checkpoint(MAX_CHECKPOINT_BYTES)? else {
            return Err(LogError::no_log(&*store, location));
        };
        let verifier = match (&settings, log_key) {
            (Some(s), given) => {
                let v = s.verifier(&location)?;
                if let Some(g) = given.filter(|g| **g != v) {
                    return Err(LogError::OtherLogKey {
                        given: g.to_string(),
                        expected: v.to_string(),
                    });
                }
                v
            }
            (None, Some(given)) => given.clone(),
            (None, None) => return Err(LogError::NoLogKey { location }),
        };
        let cp = verify_checkpoint(&read.bytes, &verifier, None)?;
        // A verified note is UTF-8 text (the parser refuses anything else).
        let checkpoint = String::from_utf8_lossy(&read.bytes).into_owned();
        Ok(Log {
            store,
            origin: verifier.name.clone(),
            verifier,
            key_file: settings.and_then(|s| s.key_file),
            size: cp.size,
            root: cp.root_hash,
            checkpoint,
            version: read.version,
            tiles: Arc::new(TileCache::new()),
        })
    }

    /// Where the log is (its directory), for messages.
    pub fn location(&self) -> String {
        self.store.describe()
    }

    /// The store the log lives in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Origin line (and log key name).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The log's checkpoint verifier key.
    pub fn verifier(&self) -> &NoteVerifier {
        &self.verifier
    }

    /// The key file recorded at init, if any.
    pub fn key_file(&self) -> Option<&Path> {
        self.key_file.as_deref()
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

    /// The issuers this log accepts (`.rcpt/trust.json`, given at init),
    /// or `None` when it has none (signatures are then not checked).
    pub fn accepted_issuers(&self) -> Result<Option<admit::AcceptedIssuers>, LogError> {
        let max = crate::limits::MAX_KEY_FILE_BYTES;
        let Some(bytes) = self.store.read_private(&PrivateKey::Trust, max)? else {
            return Ok(None);
        };
        admit::AcceptedIssuers::from_json(&bytes)
            .map(Some)
            .map_err(|source| LogError::Trust {
                location: self.location(),
                source: Box::new(source),
            })
    }

    /// Signed checkpoint note published at `size`: the latest, or one kept
    /// under `.rcpt/checkpoints/`.
    pub fn checkpoint_at(&self, size: u64) -> Result<String, LogError> {
        if size == self.size {
            return Ok(self.checkpoint.clone());
        }
        self.in_range("size", size)?;
        let key = PrivateKey::Checkpoint(size);
        let Some(text) = self.store.read_private(&key, MAX_CHECKPOINT_BYTES)? else {
            return Err(LogError::NoCheckpoint {
                size,
                latest: self.size,
            });
        };
        verify_checkpoint(&text, &self.verifier, Some(size))?;
        Ok(String::from_utf8_lossy(&text).into_owned())
    }

    /// The sizes of the kept checkpoints (`.rcpt/checkpoints/<size>`), sorted.
    pub fn kept_sizes(&self) -> Result<Vec<u64>, LogError> {
        let mut sizes = Vec::new();
        for key in self.store.list_private(PrivateDir::Checkpoints)? {
            match key {
                PrivateKey::Checkpoint(s) => sizes.push(s),
                other => {
                    return Err(LogError::Checkpoint {
                        name: other.to_string(),
                        source: CheckpointError::Name,
                    });
                }
            }
        }
        sizes.sort_unstable();
        Ok(sizes)
    }

    /// Refuse `value` unless it is at most the latest size.
    fn in_range(&self, what: &'static str, value: u64) -> Result<(), LogError> {
        if value > self.size {
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
        let store: Arc<dyn crate::storage::PublicRead> = self.store.clone();
        TileReader::over(store, size, Some(Arc::clone(&self.tiles)))
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
        Ok(self.reader(self.size).entry(index)?)
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
    /// the entry. Entries the index does not cover (a copy without
    /// `.rcpt/`, or an index behind) are scanned.
    pub fn find(&self, leaf: &Hash) -> Result<Option<u64>, LogError> {
        let hinted = Index::open(Arc::clone(&self.store), self.size)
            .and_then(|index| self.find_hinted(&index, leaf));
        match hinted {
            Ok(found) => Ok(found),
            // A writer may merge runs away while we read them: scan instead.
            Err(LogError::Store(_) | LogError::Index { .. }) => self.scan(leaf, 0),
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
        self.for_each_bundle(from, self.size, |first, entries| {
            if found.is_none()
                && let Some(k) = entries.iter().position(|e| merkle::leaf_hash(e) == *leaf)
            {
                found = Some(first + k as u64);
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// Call `f(first, entries)` for each entry bundle covering `from..to`
    /// (`to` at most the latest size), with the entries trimmed to that
    /// range and `first` the index of the first. Reads each bundle of the
    /// tree of `to` leaves once, in order.
    pub fn for_each_bundle(
        &self,
        from: u64,
        to: u64,
        mut f: impl FnMut(u64, &[Vec<u8>]) -> Result<(), LogError>,
    ) -> Result<(), LogError> {
        self.in_range("size", to)?;
        if from >= to {
            return Ok(());
        }
        for t in from / TILE_WIDTH..to.div_ceil(TILE_WIDTH) {
            let Some(width) = Width::of(t, to) else { break };
            let entries = crate::storage::tiles::read_entry_bundle(
                &*self.store,
                &TileKey::entries(t, width),
            )?;
            let skip = from.saturating_sub(t * TILE_WIDTH);
            // skip < 256 and entries holds the tile's width, so get() finds it.
            let trimmed = entries.get(skip as usize..).unwrap_or_default();
            f(t * TILE_WIDTH + skip, trimmed)?;
        }
        Ok(())
    }

    /// Inclusion proof of `index` in the tree of `size` leaves.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, LogError> {
        self.in_range("size", size)?;
        merkle::prove_inclusion(index, size, &self.reader(size)).map_err(proof_error)
    }

    /// Inclusion proofs of many `indexes` in the tree of `size` leaves,
    /// made in parallel (one result per index, in order).
    pub fn inclusion_proofs(&self, indexes: &[u64], size: u64) -> Vec<Result<Vec<Hash>, LogError>> {
        indexes
            .par_iter()
            .map(|&i| self.inclusion_proof(i, size))
            .collect()
    }

    /// The root of the published tree of `size` leaves: the latest, or a
    /// kept checkpoint's (verified).
    pub fn root_at(&self, size: u64) -> Result<Hash, LogError> {
        if size == self.size {
            return Ok(self.root);
        }
        let text = self.checkpoint_at(size)?;
        Ok(verify_checkpoint(text.as_bytes(), &self.verifier, Some(size))?.root_hash)
    }

    /// Call `f(index, entry, proof)` for every index in `range`, with its
    /// inclusion proof in the published tree of `size` leaves: many proofs
    /// at once, each entry bundle and hash tile read once.
    ///
    /// Entry bundles are taken in parallel (`f` runs on several threads,
    /// in no particular order). Within a full tile, the 256 proofs share
    /// their path above the tile: it is read once from the tiles, and the
    /// eight hashes inside the tile are computed from the entries; one
    /// proof per tile is verified against the signed root before any of
    /// its proofs is handed out, so a bundle made from them verifies. A
    /// partial tile's proofs are made one by one ([`Log::inclusion_proof`]).
    pub fn prove_range<E>(
        &self,
        range: std::ops::Range<u64>,
        size: u64,
        f: impl Fn(u64, &[u8], Vec<Hash>) -> Result<(), E> + Sync,
    ) -> Result<(), E>
    where
        E: From<LogError> + Send,
    {
        let root = self.root_at(size)?;
        if range.end > size {
            return Err(LogError::OutOfRange {
                what: "index",
                value: range.end.saturating_sub(1),
                size,
            }
            .into());
        }
        let tiles: Vec<u64> = (range.start / TILE_WIDTH..range.end.div_ceil(TILE_WIDTH)).collect();
        tiles
            .par_iter()
            .try_for_each(|&t| self.prove_tile(t, &range, size, &root, &f))
    }

    /// [`Log::prove_range`] for the indexes of entry bundle `t`.
    fn prove_tile<E: From<LogError>>(
        &self,
        t: u64,
        range: &std::ops::Range<u64>,
        size: u64,
        root: &Hash,
        f: &(impl Fn(u64, &[u8], Vec<Hash>) -> Result<(), E> + Sync),
    ) -> Result<(), E> {
        let first = t * TILE_WIDTH;
        let Some(width) = Width::of(t, size) else {
            return Ok(());
        };
        let key = TileKey::entries(t, width);
        let entries =
            crate::storage::tiles::read_entry_bundle(&*self.store, &key).map_err(LogError::from)?;
        let (lo, hi) = (
            range.start.max(first),
            range.end.min(first + entries.len() as u64),
        );
        let at = |i: u64| {
            entries
                .get((i - first) as usize)
                .map_or(&[][..], Vec::as_slice)
        };
        if width != Width::Full {
            for i in lo..hi {
                f(i, at(i), self.inclusion_proof(i, size)?)?;
            }
            return Ok(());
        }
        // The tile's subtree, level by level (256 leaves up to its root).
        let mut levels = vec![
            entries
                .iter()
                .map(|e| merkle::leaf_hash(e))
                .collect::<Vec<_>>(),
        ];
        while let Some(below) = levels.last().filter(|l| l.len() > 1) {
            let up = below.chunks_exact(2).map(|p| match p {
                [l, r] => merkle::node_hash(l, r),
                _ => merkle::empty_root(), // chunks_exact(2) yields pairs only
            });
            levels.push(up.collect());
        }
        let upper = self
            .inclusion_proof(first, size)?
            .split_off(usize::from(crate::tlog::tiles::TILE_HEIGHT));
        let proof_of = |i: u64| -> Vec<Hash> {
            let k = (i - first) as usize;
            let inner = levels.iter().take(8).enumerate();
            let inner = inner.filter_map(|(h, level)| level.get((k >> h) ^ 1).copied());
            inner.chain(upper.iter().copied()).collect()
        };
        let leaf = levels
            .first()
            .and_then(|l| l.first())
            .copied()
            .unwrap_or_default();
        merkle::verify_inclusion(&leaf, first, size, &proof_of(first), root).map_err(|_| {
            LogError::TileMismatch {
                path: crate::tlog::tiles::hash_tile_path(0, t, None),
            }
        })?;
        for i in lo..hi {
            f(i, at(i), proof_of(i))?;
        }
        Ok(())
    }

    /// Consistency proof from `m` to `n`.
    pub fn consistency_proof(&self, m: u64, n: u64) -> Result<Vec<Hash>, LogError> {
        self.in_range("size", n)?;
        merkle::prove_consistency(m, n, &self.reader(n)).map_err(proof_error)
    }
}

/// A tile read failure keeps its own error (and its cause); the rest are
/// proof errors.
fn proof_error(e: merkle::ProveError<crate::tlog::tiles::TileError>) -> LogError {
    match e {
        merkle::ProveError::Read(t) => LogError::Tile(t),
        other => LogError::Proof(other),
    }
}
