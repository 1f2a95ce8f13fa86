//! check: recompute a log from its entries and compare with every object
//! it keeps (`spec/log.md`, "Check").
//!
//! Streams every entry bundle once, recomputes the leaf hashes, every hash
//! tile (compared byte for byte with the stored tile) and the root, and
//! verifies the latest checkpoint. Each kept checkpoint is verified against
//! the tree when the recomputation reaches its size, and so are the
//! partial tiles and the partial entry bundle kept for that size (what
//! `prove --size` reads). Memory: one entry bundle and one open tile per
//! level.

use super::error::{CheckpointError, LogError};
use super::tilebuild::{BuiltTile, TileBuilder};
use super::{Log, verify_checkpoint};
use crate::storage::walk::{ConsistencyWalk, Tree, WalkError};
use crate::storage::{PrivateKey, PublicKey, TileKey, Width};
use crate::tlog::merkle::{self, Frontier, Hash};
use crate::tlog::tiles::{self, MAX_HASH_TILE_BYTES, TILE_WIDTH};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rayon::prelude::*;
use std::path::Path;

/// What a passing check covered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Entries recomputed (the latest checkpoint size).
    pub size: u64,
    /// Hash tiles of the latest tree compared.
    pub tiles: u64,
    /// Kept checkpoints verified (the latest included).
    pub checkpoints: u64,
    /// Partial tiles and entry bundles kept for earlier sizes, compared.
    pub kept_tiles: u64,
    /// Kept checkpoints past the latest size: written by an append that
    /// crashed before publishing, not part of the log, removed by the next
    /// writer.
    pub unpublished: u64,
    /// Their sizes.
    pub unpublished_sizes: Vec<u64>,
    /// The verified root.
    pub root: Hash,
}

/// Compare a recomputed tile with the stored one.
fn compare_tile(log: &Log, tile: &BuiltTile) -> Result<(), LogError> {
    match crate::storage::tiles::read_hash_tile(&**log.store(), &tile.key) {
        Ok(hashes) if hashes == tile.hashes => Ok(()),
        Ok(_) => Err(LogError::TileMismatch { path: tile.path() }),
        Err(e) => Err(e.into()),
    }
}

/// The stored bytes of a tile kept for size `size`, as `expected` or not.
fn compare_kept(log: &Log, key: &TileKey, expected: &[u8], size: u64) -> Result<(), LogError> {
    let max = expected.len().max(MAX_HASH_TILE_BYTES);
    let stored = log.store().read(&PublicKey::Tile(*key), max);
    let problem = match stored {
        Ok(Some(bytes)) if bytes == expected => return Ok(()),
        Ok(None) => "is missing from",
        Ok(Some(_)) | Err(crate::storage::StoreError::TooLarge { .. }) => "differs from",
        Err(e) => return Err(e.into()),
    };
    Err(LogError::KeptMismatch {
        path: key.path(),
        size,
        problem,
    })
}

/// Verify the kept checkpoint of `size` against the recomputed `root`.
fn check_kept_checkpoint(log: &Log, size: u64, root: &Hash) -> Result<(), LogError> {
    let key = PrivateKey::Checkpoint(size);
    let text = log
        .store()
        .read_private(&key, crate::limits::MAX_NOTE_BYTES)?
        .ok_or_else(|| LogError::NoCheckpoint {
            size,
            latest: log.size(),
        })?;
    let cp = verify_checkpoint(&text, log.verifier(), Some(size))?;
    if cp.root_hash != *root {
        return Err(LogError::RootMismatch {
            name: key.to_string(),
            claimed: STANDARD.encode(cp.root_hash),
            computed: STANDARD.encode(root),
        });
    }
    Ok(())
}

/// The kept checkpoints and their tiles, checked as the recomputation
/// reaches each size.
struct Kept<'a> {
    log: &'a Log,
    sizes: std::iter::Peekable<std::vec::IntoIter<u64>>,
    checkpoints: u64,
    tiles: u64,
}

impl Kept<'_> {
    /// The next kept size still to reach.
    fn next(&mut self) -> Option<u64> {
        self.sizes.peek().copied()
    }

    /// At a kept size: its checkpoint, its partial hash tiles (the open
    /// tiles of `builder`), and its partial entry bundle (the first
    /// entries of `bundle`, entry bundle `t`).
    fn reached(
        &mut self,
        frontier: &Frontier,
        builder: &TileBuilder,
        bundle: Option<(u64, &[Vec<u8>])>,
    ) -> Result<(), LogError> {
        let size = frontier.size();
        while self.sizes.next_if_eq(&size).is_some() {
            check_kept_checkpoint(self.log, size, &frontier.root())?;
            self.checkpoints += 1;
            if size == self.log.size() {
                continue; // the latest tree's tiles are compared in full
            }
            for tile in builder.partial_tiles() {
                compare_kept(self.log, &tile.key, &tile.bytes(), size)?;
                self.tiles += 1;
            }
            let width = u8::try_from(size % TILE_WIDTH)
                .ok()
                .and_then(Width::partial);
            if let (Some(width), Some((t, entries))) = (width, bundle) {
                let head = entries.get(..width.items()).unwrap_or_default();
                let bytes = tiles::encode_entry_bundle(head.iter().map(Vec::as_slice))?;
                compare_kept(self.log, &TileKey::entries(t, width), &bytes, size)?;
                self.tiles += 1;
            }
        }
        Ok(())
    }
}

/// The log's error for a step of the walk that failed: pushing a leaf
/// fails only when the tree is full or past the checkpoint's size,
/// finishing only when the entries give another size or root.
fn walk_error(e: WalkError) -> LogError {
    match e {
        WalkError::Full(full) => LogError::Full(full),
        WalkError::RootMismatch {
            computed, signed, ..
        } => LogError::RootMismatch {
            name: "checkpoint".to_string(),
            claimed: STANDARD.encode(signed),
            computed: STANDARD.encode(computed),
        },
        WalkError::Tiles { source, .. } => LogError::Proof(source),
        WalkError::Bundle { source, .. } => LogError::Tile(source),
        WalkError::WrongSize { end, size } if end > size => LogError::OutOfRange {
            what: "entry",
            value: end - 1,
            size,
        },
        _ => LogError::Checkpoint {
            name: "checkpoint".to_string(),
            source: CheckpointError::Unreached,
        },
    }
}

/// Recompute the whole log at `dir` and verify it; `progress(done, total)`
/// is called after each entry bundle. The first mismatch is the error.
pub fn check(dir: &Path, progress: impl FnMut(u64, u64)) -> Result<CheckReport, LogError> {
    check_log(&Log::open(dir)?, progress)
}

/// [`check`] of an open log (a directory, a copy of its public files, or
/// any store).
pub fn check_log(log: &Log, mut progress: impl FnMut(u64, u64)) -> Result<CheckReport, LogError> {
    let size = log.size();
    // Kept checkpoints past the latest were never published (a crash
    // between Keep and Publish); the next writer removes them.
    let (kept, unpublished): (Vec<u64>, Vec<u64>) =
        log.kept_sizes()?.into_iter().partition(|&s| s <= size);
    let mut kept = Kept {
        log,
        sizes: kept.into_iter().peekable(),
        checkpoints: 0,
        tiles: 0,
    };
    // The consistency walk from the empty tree to the latest checkpoint.
    let signed = Tree {
        size,
        root: log.root(),
    };
    let mut walk = ConsistencyWalk::new(log.reader(size), signed);
    let mut builder = TileBuilder::new(0, |_| Ok::<_, LogError>(Vec::new()))?;
    let mut tiles = 0u64;
    kept.reached(walk.edge(), &builder, None)?;
    log.for_each_bundle(0, size, |first, entries| {
        let leaves: Vec<Hash> = entries.par_iter().map(|e| merkle::leaf_hash(e)).collect();
        for leaf in leaves {
            walk.push(leaf, |id, h| builder.node(id, h))
                .map_err(walk_error)?;
            if kept.next() == Some(walk.size()) {
                kept.reached(walk.edge(), &builder, Some((first / TILE_WIDTH, entries)))?;
            }
        }
        for tile in builder.take_full() {
            compare_tile(log, &tile)?;
            tiles += 1;
        }
        progress(first + entries.len() as u64, size);
        Ok(())
    })?;
    for tile in builder.take_partial() {
        compare_tile(log, &tile)?;
        tiles += 1;
    }
    let root = walk.finish().map_err(walk_error)?;
    if let Some(missing) = kept.next() {
        return Err(LogError::Checkpoint {
            name: PrivateKey::Checkpoint(missing).to_string(),
            source: CheckpointError::Unreached,
        });
    }
    Ok(CheckReport {
        size,
        tiles,
        checkpoints: kept.checkpoints,
        kept_tiles: kept.tiles,
        unpublished: unpublished.len() as u64,
        unpublished_sizes: unpublished,
        root,
    })
}
