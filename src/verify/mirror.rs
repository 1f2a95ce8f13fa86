//! mirror: `rcpt verify --mirror DIR`, a verifier with memory (spec/verify.md
//! "Against a mirror").
//!
//! DIR is a log or a mirror directory (`rcpt log mirror` keeps one, checked
//! by consistency on every update). Its checkpoint is verified under the
//! trusted log key of its origin and its tiles must give that root; then,
//! for each bundle of that origin, the root DIR's tiles give at the
//! bundle's tree size must be the bundle's checkpoint root (else a fork:
//! failed `consistency.fork`), and DIR must hold the bundle's entry at its
//! index (its leaf hash in DIR's tiles, which the root authenticates, is
//! the hash of the bundle's entry). A bundle of a larger tree than DIR's is not evaluated
//! (`consistency.mirror_behind`). Reads files only, through the one tile
//! reader ([`TileReader`]); no socket.

use super::{CheckResult, CheckVerdict, Failure, NotEvaluated, Reason};
use crate::limits::{MAX_MIRROR_ROOTS, MAX_NOTE_BYTES};
use crate::receipt::dsse::Envelope;
use crate::storage::PublicRead;
use crate::storage::posix::PosixStore;
use crate::storage::tiles::{TileCache, TileReader};
use crate::tlog::merkle::{self, Hash, HashReader as _, NodeId};
use crate::tlog::note::{self, Checkpoint, Note, NoteCheck};
use crate::trust::Trust;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A mirror's checked view of its log.
#[derive(Debug)]
pub struct Mirror {
    dir: PathBuf,
    origin: String,
    size: u64,
    reader: TileReader,
    /// Roots the tiles gave, by tree size (bundles share few sizes; at most
    /// [`MAX_MIRROR_ROOTS`] kept, the rest computed each time).
    roots: Mutex<HashMap<u64, Hash>>,
}

/// Why a mirror could not be used (a bad invocation).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MirrorError {
    /// The checkpoint could not be read.
    #[error("the mirror {}: reading its checkpoint", dir.display())]
    Read {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        #[source]
        source: crate::storage::StoreError,
    },
    /// The mirror's checkpoint or tiles are not a trusted log's.
    #[error("the mirror {}: {detail}", dir.display())]
    Invalid {
        /// The directory.
        dir: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

impl Mirror {
    /// Open the mirror in `dir`: its checkpoint must verify under a log key
    /// of `trust` named by its origin, and its tiles must give its root.
    pub fn open(dir: &Path, trust: &Trust) -> Result<Mirror, MirrorError> {
        let invalid = |detail: String| MirrorError::Invalid {
            dir: dir.to_path_buf(),
            detail,
        };
        let store = Arc::new(PosixStore::new(dir));
        let text = store
            .read_checkpoint(MAX_NOTE_BYTES)
            .map_err(|source| MirrorError::Read {
                dir: dir.to_path_buf(),
                source,
            })?
            .ok_or_else(|| invalid("no checkpoint: not a log or mirror directory".into()))?;
        let note = Note::parse(&text.bytes).map_err(|e| invalid(format!("checkpoint: {e}")))?;
        let cp = Checkpoint::parse(&note.text).map_err(|e| invalid(format!("checkpoint: {e}")))?;
        let keys = trust.log_keys_for(&cp.origin);
        if keys.is_empty() {
            return Err(invalid(format!(
                "no trusted log key for its origin {:?}",
                cp.origin
            )));
        }
        if !matches!(note::check(&note, &keys), NoteCheck::Verified { .. }) {
            return Err(invalid(format!(
                "its checkpoint does not verify under the trusted key of {:?}",
                cp.origin
            )));
        }
        let reader = TileReader::over(store, cp.size, Some(Arc::new(TileCache::new())));
        let root = merkle::tree_root(cp.size, &reader)
            .map_err(|e| invalid(format!("its tiles at size {}: {e}", cp.size)))?;
        if root != cp.root_hash {
            return Err(invalid(format!(
                "its tiles do not give its checkpoint's root at size {}",
                cp.size
            )));
        }
        Ok(Mirror {
            dir: dir.to_path_buf(),
            origin: cp.origin,
            size: cp.size,
            reader,
            roots: Mutex::new(HashMap::from([(cp.size, root)])),
        })
    }

    /// The mirrored log's origin.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The mirrored size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The bundle's tree (`size`, `root`) and entry (`index`, the envelope)
    /// against the mirror.
    pub(crate) fn check(
        &self,
        index: u64,
        size: u64,
        root: &Hash,
        envelope: Option<&Envelope>,
    ) -> CheckResult {
        let fork = |detail: String| {
            Ok(CheckVerdict::Fail(Failure {
                reason: Reason::ConsistencyFork,
                detail,
            }))
        };
        let unreadable = |detail: String| NotEvaluated {
            reason: Reason::InputUnreadable,
            detail,
        };
        if size > self.size {
            return Err(NotEvaluated {
                reason: Reason::ConsistencyMirrorBehind,
                detail: format!(
                    "the bundle's tree has {size} entries, the mirror {} only {}: update it \
                     with `rcpt log mirror`",
                    self.dir.display(),
                    self.size
                ),
            });
        }
        let at = self
            .root_at(size)
            .map_err(|e| unreadable(format!("the mirror's tiles at size {size}: {e}")))?;
        if at != *root {
            return fork(format!(
                "the mirror {} gives another root at size {size}: the log showed this bundle \
                 a different history",
                self.dir.display()
            ));
        }
        if let Some(env) = envelope {
            let leaf = NodeId { level: 0, index };
            let held = self
                .reader
                .read_hashes(&[leaf])
                .map_err(|e| unreadable(format!("the mirror's leaf hash {index}: {e}")))?;
            if held.first() != Some(&merkle::leaf_hash(&env.to_entry())) {
                return fork(format!(
                    "the mirror {} holds another entry at index {index}",
                    self.dir.display()
                ));
            }
        }
        Ok(CheckVerdict::Pass)
    }

    /// The root of the mirror's tree at `size` (at most its own size).
    fn root_at(
        &self,
        size: u64,
    ) -> Result<Hash, merkle::ProveError<crate::tlog::tiles::TileError>> {
        let known = self.roots.lock().ok().and_then(|r| r.get(&size).copied());
        if let Some(root) = known {
            return Ok(root);
        }
        let root = merkle::tree_root(size, &self.reader)?;
        if let Ok(mut roots) = self.roots.lock()
            && roots.len() < MAX_MIRROR_ROOTS
        {
            roots.insert(size, root);
        }
        Ok(root)
    }
}
