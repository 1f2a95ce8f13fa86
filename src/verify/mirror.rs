//! mirror: `rcpt verify --mirror DIR`, a verifier with memory (spec/verify.md
//! "Against a mirror").
//!
//! DIR is a log or a mirror directory (`rcpt log mirror` keeps one, checked
//! by consistency on every update). Its checkpoint is verified under the
//! trusted log key of its origin and its tiles must give that root; then,
//! for each bundle of that origin, through the consistency walk
//! ([`crate::storage::walk`]): a consistency proof from the bundle's tree
//! to DIR's signed tree, computed from DIR's tiles, must verify between the
//! bundle's root and DIR's (else a fork: failed `consistency.fork`), and an
//! inclusion proof from DIR's tiles must put the bundle's entry at its
//! index under that root. Every hash read from DIR takes part in a proof
//! that ends at DIR's signed root, so a DIR whose tiles were changed after
//! it was mirrored cannot make a forked bundle pass. A bundle of a larger
//! tree than DIR's is not evaluated (`consistency.mirror_behind`). Reads
//! files only, through the one tile reader ([`TileReader`]); no socket.

use super::{CheckResult, CheckVerdict, Failure, NotEvaluated, Reason};
use crate::limits::{MAX_MIRROR_ROOTS, MAX_NOTE_BYTES};
use crate::receipt::dsse::Envelope;
use crate::storage::PublicRead;
use crate::storage::posix::PosixStore;
use crate::storage::tiles::{TileCache, TileReader};
use crate::storage::walk::{self, ConsistencyWalk, Tree, WalkError};
use crate::tlog::merkle::{self, Hash};
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
    /// The mirror's signed tree.
    signed: Tree,
    reader: TileReader,
    /// Roots proved consistent with the signed tree, by tree size
    /// (bundles share few sizes; at most [`MAX_MIRROR_ROOTS`] kept, the
    /// rest proved each time).
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
    /// The mirror's checkpoint is not a checkpoint note.
    #[error("the mirror {}: checkpoint", dir.display())]
    Checkpoint {
        /// The directory.
        dir: PathBuf,
        /// What is wrong.
        #[source]
        source: crate::tlog::note::NoteError,
    },
    /// The mirror's tiles do not give its checkpoint's tree.
    #[error("the mirror {}: its tiles", dir.display())]
    Tiles {
        /// The directory.
        dir: PathBuf,
        /// What the walk found.
        #[source]
        source: Box<WalkError>,
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
        let bad_note = |source| MirrorError::Checkpoint {
            dir: dir.to_path_buf(),
            source,
        };
        let note = Note::parse(&text.bytes).map_err(bad_note)?;
        let cp = Checkpoint::parse(&note.text).map_err(bad_note)?;
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
        let signed = Tree {
            size: cp.size,
            root: cp.root_hash,
        };
        // The tree edge the tiles give at the mirror's size has its root.
        ConsistencyWalk::from_tiles(reader.clone(), signed, signed.size)
            .and_then(|walk| walk.finish())
            .map_err(|e| MirrorError::Tiles {
                dir: dir.to_path_buf(),
                source: Box::new(e),
            })?;
        Ok(Mirror {
            dir: dir.to_path_buf(),
            origin: cp.origin,
            signed,
            reader,
            roots: Mutex::new(HashMap::from([(signed.size, signed.root)])),
        })
    }

    /// The mirrored log's origin.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The mirrored size.
    pub fn size(&self) -> u64 {
        self.signed.size
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
        let held = self.signed.size;
        if size > held {
            return Err(NotEvaluated {
                reason: Reason::ConsistencyMirrorBehind,
                detail: format!(
                    "the bundle's tree has {size} entries, the mirror {} only {held}: update it \
                     with `rcpt log mirror`",
                    self.dir.display(),
                ),
            });
        }
        let tree = Tree { size, root: *root };
        match self.prove_tree(tree) {
            Ok(()) => {}
            Err(WalkError::Fork { .. } | WalkError::Inconsistent { .. }) => {
                return fork(format!(
                    "the mirror {} proves another tree at size {size}: the log showed this \
                     bundle a different history",
                    self.dir.display()
                ));
            }
            Err(e) => return Err(unreadable(self.tiles_error(size, &e))),
        }
        let Some(env) = envelope else {
            return Ok(CheckVerdict::Pass);
        };
        let leaf = merkle::leaf_hash(&env.to_entry());
        match walk::prove_leaf(&self.reader, tree, index, &leaf) {
            Ok(()) => Ok(CheckVerdict::Pass),
            Err(WalkError::NotIncluded { .. }) => fork(format!(
                "the mirror {} holds another entry at index {index}",
                self.dir.display()
            )),
            Err(e) => Err(unreadable(self.tiles_error(size, &e))),
        }
    }

    /// What a read of the mirror's tiles at `size` could not do.
    fn tiles_error(&self, size: u64, e: &WalkError) -> String {
        format!(
            "the mirror's tiles at size {size}: {}",
            crate::io::error_chain(e)
        )
    }

    /// Prove from the mirror's tiles that `tree` is a prefix of its signed
    /// tree (the consistency walk, `storage::walk::prove_extends`); a size
    /// proved once is remembered with its root.
    fn prove_tree(&self, tree: Tree) -> Result<(), WalkError> {
        let known = self
            .roots
            .lock()
            .ok()
            .and_then(|r| r.get(&tree.size).copied());
        if let Some(root) = known {
            return walk::grows(
                Tree {
                    size: tree.size,
                    root,
                },
                tree,
            )
            .map(|_| ());
        }
        walk::prove_extends(&self.reader, tree, self.signed)?;
        if let Ok(mut roots) = self.roots.lock()
            && roots.len() < MAX_MIRROR_ROOTS
        {
            roots.insert(tree.size, tree.root);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A checkpoint that is not a note: the note's error is the cause,
    /// typed, and the chain says it after the mirror (#33 item 6).
    #[test]
    fn a_mirror_whose_checkpoint_is_not_a_note_keeps_the_note_error() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("checkpoint"), b"not a note").unwrap();
        let e = Mirror::open(tmp.path(), &Trust::default()).unwrap_err();
        assert!(matches!(e, MirrorError::Checkpoint { .. }), "{e:?}");
        let cause = std::error::Error::source(&e).unwrap();
        assert!(cause.is::<crate::tlog::note::NoteError>(), "{cause:?}");
        let chain = crate::io::error_chain(&e);
        assert!(
            chain.starts_with(&format!(
                "the mirror {}: checkpoint: ",
                tmp.path().display()
            )),
            "{chain}"
        );
    }
}
