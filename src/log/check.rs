//! check: recompute a log from its entries and compare with what is stored.
//!
//! Streams every entry bundle once, recomputes the leaf hashes, every hash
//! tile (compared byte for byte with the stored tile) and the root, and
//! verifies the latest checkpoint and every kept checkpoint against the
//! tree at its size. Memory: one entry bundle and one open tile per level.

use super::append::{read_bundle, read_hash_tile, tile_width};
use super::tilebuild::{BuiltTile, TileBuilder};
use super::{Log, LogError, fsutil, layout, verify_checkpoint};
use crate::merkle::{self, Frontier, Hash};
use crate::tiles::TILE_WIDTH;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rayon::prelude::*;
use std::path::Path;

/// What a passing check covered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// Entries recomputed (the latest checkpoint size).
    pub size: u64,
    /// Hash tiles compared.
    pub tiles: u64,
    /// Kept checkpoints verified (the latest included).
    pub checkpoints: u64,
    /// Kept checkpoints past the latest size: written by an append that
    /// crashed before publishing, ignored here, removed by the next writer.
    pub unpublished: u64,
    /// The verified root.
    pub root: Hash,
}

/// Call `f(first, entries)` for each entry bundle covering `from..to`, with
/// the entries trimmed to that range and `first` the index of the first.
pub(crate) fn for_each_bundle(
    dir: &Path,
    from: u64,
    to: u64,
    mut f: impl FnMut(u64, &[Vec<u8>]) -> Result<(), LogError>,
) -> Result<(), LogError> {
    if from >= to {
        return Ok(());
    }
    for t in from / TILE_WIDTH..to.div_ceil(TILE_WIDTH) {
        let entries = read_bundle(dir, t, tile_width(t, to))?;
        let skip = from.saturating_sub(t * TILE_WIDTH);
        // skip < 256 and entries holds the tile's width, so get() finds it.
        let trimmed = entries.get(skip as usize..).unwrap_or_default();
        f(t * TILE_WIDTH + skip, trimmed)?;
    }
    Ok(())
}

/// The sizes of the kept checkpoints (`DIR/.rcpt/checkpoints/<size>`), sorted.
pub(crate) fn kept_sizes(dir: &Path) -> Result<Vec<u64>, LogError> {
    let kept = layout::checkpoints(dir);
    let mut sizes = Vec::new();
    for entry in std::fs::read_dir(&kept).map_err(fsutil::io_err(&kept))? {
        let entry = entry.map_err(fsutil::io_err(&kept))?;
        let name = entry.file_name();
        let size = name.to_str().and_then(|n| n.parse::<u64>().ok());
        match size {
            Some(s) if s.to_string() == name.to_string_lossy() => sizes.push(s),
            _ => {
                return Err(LogError::Checkpoint {
                    path: entry.path(),
                    detail: "not a checkpoint name (a tree size in decimal)".to_string(),
                });
            }
        }
    }
    sizes.sort_unstable();
    Ok(sizes)
}

/// Compare a recomputed tile with the stored file.
fn compare_tile(dir: &Path, tile: &BuiltTile) -> Result<(), LogError> {
    let stored = read_hash_tile(dir, tile.level, tile.index, tile.width);
    match stored {
        Ok(hashes) if hashes == tile.hashes => Ok(()),
        Ok(_) => Err(LogError::TileMismatch { path: tile.path() }),
        Err(LogError::Io { source, .. }) => Err(LogError::Tile {
            path: tile.path(),
            detail: source.to_string(),
        }),
        Err(e) => Err(e),
    }
}

/// Verify the kept checkpoint of `size` against the recomputed `root`.
fn check_kept(log: &Log, size: u64, root: &Hash) -> Result<(), LogError> {
    let path = layout::checkpoint_at(log.dir(), size);
    let text = fsutil::read_limited(&path, crate::limits::MAX_NOTE_BYTES)?;
    let cp = verify_checkpoint(&text, log.verifier(), log.origin(), &path)?;
    if cp.size != size {
        return Err(LogError::Checkpoint {
            path,
            detail: format!("holds size {}, but is named {size}", cp.size),
        });
    }
    if cp.root_hash != *root {
        return Err(LogError::RootMismatch {
            path,
            claimed: STANDARD.encode(cp.root_hash),
            computed: STANDARD.encode(root),
        });
    }
    Ok(())
}

/// Recompute the whole log at `dir` and verify it; `progress(done, total)`
/// is called after each entry bundle. The first mismatch is the error.
pub fn check(dir: &Path, mut progress: impl FnMut(u64, u64)) -> Result<CheckReport, LogError> {
    let log = Log::open(dir)?;
    let size = log.size();
    // Kept checkpoints past the latest were never published (a crash
    // between steps 7 and 8 of the protocol); the next writer removes them.
    let (kept, unpublished): (Vec<u64>, Vec<u64>) =
        kept_sizes(dir)?.into_iter().partition(|&s| s <= size);
    let mut kept = kept.into_iter().peekable();
    let mut frontier = Frontier::new();
    let mut builder = TileBuilder::new(0, |_, _, _| Ok::<_, LogError>(Vec::new()))?;
    let (mut tiles, mut checkpoints) = (0u64, 0u64);
    let at = |frontier: &Frontier, kept: &mut std::iter::Peekable<_>| -> Result<u64, LogError> {
        let mut n = 0;
        while let Some(s) = kept.next_if(|&s: &u64| s == frontier.size()) {
            check_kept(&log, s, &frontier.root())?;
            n += 1;
        }
        Ok(n)
    };
    checkpoints += at(&frontier, &mut kept)?;
    for_each_bundle(dir, 0, size, |first, entries| {
        let leaves: Vec<Hash> = entries.par_iter().map(|e| merkle::leaf_hash(e)).collect();
        for leaf in leaves {
            frontier
                .push(leaf, |id, h| builder.node(id, h))
                .map_err(|_| LogError::Full { size })?;
            if kept.peek() == Some(&frontier.size()) {
                checkpoints += at(&frontier, &mut kept)?;
            }
        }
        for tile in builder.take_full() {
            compare_tile(dir, &tile)?;
            tiles += 1;
        }
        progress(first + entries.len() as u64, size);
        Ok(())
    })?;
    for tile in builder.take_partial() {
        compare_tile(dir, &tile)?;
        tiles += 1;
    }
    let root = frontier.root();
    if root != log.root() {
        return Err(LogError::RootMismatch {
            path: layout::checkpoint(dir),
            claimed: STANDARD.encode(log.root()),
            computed: STANDARD.encode(root),
        });
    }
    if let Some(missing) = kept.next() {
        return Err(LogError::Checkpoint {
            path: layout::checkpoint_at(dir, missing),
            detail: "was not reached while recomputing the tree".to_string(),
        });
    }
    Ok(CheckReport {
        size,
        tiles,
        checkpoints,
        unpublished: unpublished.len() as u64,
        root,
    })
}
