//! append: integrate a batch of entries and publish it durably, in the
//! order of `spec/log.md` ("The append protocol"): dedup, hash, push,
//! write every touched tile, make them durable, commit the index, keep the
//! checkpoint, publish the checkpoint.

use super::fsutil;
use super::index::Index;
use super::tilebuild::TileBuilder;
use super::{Appended, LogError, LogWriter, layout, publish, sign_checkpoint};
use crate::limits::{MAX_APPEND_BATCH_BYTES, MAX_APPEND_BATCH_ENTRIES, MAX_ENTRY_BYTES};
use crate::merkle::{self, Hash};
use crate::tiles::{self, TILE_WIDTH};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Largest entry bundle file: 256 entries, each behind a 2-byte length.
pub(crate) const MAX_BUNDLE_FILE_BYTES: usize = TILE_WIDTH as usize * (2 + MAX_ENTRY_BYTES);
/// Largest hash tile file: 256 hashes.
pub(crate) const MAX_HASH_TILE_BYTES: usize = TILE_WIDTH as usize * 32;

/// Refuse a batch over the limits, or an empty or oversized entry, before any work.
fn check_batch(entries: &[Vec<u8>]) -> Result<(), LogError> {
    let bytes: usize = entries.iter().map(Vec::len).sum();
    if entries.len() > MAX_APPEND_BATCH_ENTRIES || bytes > MAX_APPEND_BATCH_BYTES {
        return Err(LogError::BatchTooLarge {
            count: entries.len(),
            bytes,
        });
    }
    if let Some((position, e)) = entries
        .iter()
        .enumerate()
        .find(|(_, e)| e.is_empty() || e.len() > MAX_ENTRY_BYTES)
    {
        return Err(LogError::EntrySize {
            position,
            len: e.len(),
            max: MAX_ENTRY_BYTES,
        });
    }
    Ok(())
}

/// Read the stored partial hash tile `(level, index)` of `width` hashes.
pub(crate) fn read_hash_tile(
    dir: &Path,
    level: u8,
    index: u64,
    width: Option<u8>,
) -> Result<Vec<Hash>, LogError> {
    let rel = tiles::hash_tile_path(level, index, width);
    let bytes = fsutil::read_limited(&dir.join(&rel), MAX_HASH_TILE_BYTES)?;
    let want = width.map_or(TILE_WIDTH as usize, usize::from);
    if bytes.len() != want * 32 {
        return Err(LogError::Tile {
            path: rel,
            detail: format!("{} bytes, expected {}", bytes.len(), want * 32),
        });
    }
    Ok(bytes
        .chunks_exact(32)
        .map(|c| {
            let mut h = [0u8; 32];
            h.copy_from_slice(c);
            h
        })
        .collect())
}

/// Read the stored entry bundle `index` of `width` entries (`None`: full).
pub(crate) fn read_bundle(
    dir: &Path,
    index: u64,
    width: Option<u8>,
) -> Result<Vec<Vec<u8>>, LogError> {
    let rel = tiles::entries_tile_path(index, width);
    let bytes = fsutil::read_limited(&dir.join(&rel), MAX_BUNDLE_FILE_BYTES)?;
    let entries = tiles::decode_entry_bundle(&bytes).map_err(|e| LogError::Tile {
        path: rel.clone(),
        detail: e.to_string(),
    })?;
    let want = width.map_or(TILE_WIDTH as usize, usize::from);
    if entries.len() != want {
        return Err(LogError::Tile {
            path: rel,
            detail: format!("{} entries, expected {want}", entries.len()),
        });
    }
    Ok(entries.into_iter().map(<[u8]>::to_vec).collect())
}

/// Width of tile `t` in a tree of `count` nodes at its level (`None`: full).
pub(crate) fn tile_width(t: u64, count: u64) -> Option<u8> {
    let w = count.saturating_sub(t * TILE_WIDTH).min(TILE_WIDTH);
    // w < 256 in this branch, so the cast is exact.
    (w < TILE_WIDTH).then_some(w as u8)
}

/// The entry bundles touched by appending `new` (entries `old..`) to a
/// log of `old` entries: the first one completes the stored partial bundle.
fn entry_bundles(dir: &Path, old: u64, new: &[&[u8]]) -> Result<Vec<(PathBuf, Vec<u8>)>, LogError> {
    let end = old + new.len() as u64;
    let first = old / TILE_WIDTH;
    let prefix = match tile_width(first, old) {
        Some(w) if w > 0 => read_bundle(dir, first, Some(w))?,
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for t in first..end.div_ceil(TILE_WIDTH) {
        let lo = (t * TILE_WIDTH).max(old) - old;
        let hi = ((t + 1) * TILE_WIDTH).min(end) - old;
        // lo <= hi <= new.len() by construction; get() keeps it panic-free.
        let fresh = new.get(lo as usize..hi as usize).unwrap_or_default();
        let old_part = if t == first { prefix.as_slice() } else { &[] };
        let all = old_part
            .iter()
            .map(Vec::as_slice)
            .chain(fresh.iter().copied());
        let bytes = tiles::encode_entry_bundle(all).map_err(|e| LogError::Tile {
            path: tiles::entries_tile_path(t, None),
            detail: e.to_string(),
        })?;
        let rel = tiles::entries_tile_path(t, tile_width(t, end));
        out.push((dir.join(rel), bytes));
    }
    Ok(out)
}

impl LogWriter {
    /// Append a batch of entries durably, publish the new checkpoint, then return.
    ///
    /// Each entry gets its index: a new one, or the first index of the same
    /// entry bytes already logged (or earlier in this batch). A batch of
    /// only duplicates publishes nothing.
    pub fn append(&mut self, entries: &[Vec<u8>]) -> Result<Vec<Appended>, LogError> {
        check_batch(entries)?;
        let leaves: Vec<Hash> = entries.par_iter().map(|e| merkle::leaf_hash(e)).collect();
        let hints = self.index()?.get_many(&leaves)?;
        let old = self.log.size;
        let mut seen: HashMap<Hash, u64> = HashMap::new();
        let mut results = Vec::with_capacity(entries.len());
        let mut fresh: Vec<&[u8]> = Vec::new();
        let mut fresh_leaves: Vec<Hash> = Vec::new();
        let mut h = 0;
        for (pos, (entry, leaf)) in entries.iter().zip(&leaves).enumerate() {
            // The hints of this position (sorted by position, then index).
            let from = h;
            while hints.get(h).is_some_and(|c| c.0 == pos) {
                h += 1;
            }
            if let Some(&index) = seen.get(leaf) {
                results.push(Appended { index, new: false });
                continue;
            }
            if let Some(index) = self.confirmed(hints.get(from..h).unwrap_or_default(), leaf)? {
                results.push(Appended { index, new: false });
                continue;
            }
            let index = old + fresh.len() as u64;
            seen.insert(*leaf, index);
            fresh.push(entry);
            fresh_leaves.push(*leaf);
            results.push(Appended { index, new: true });
        }
        if !fresh.is_empty() {
            self.integrate(&fresh, &fresh_leaves)?;
        }
        Ok(results)
    }

    /// The first hint `(position, index)` the log confirms for `leaf`.
    fn confirmed(&self, hints: &[(usize, u64)], leaf: &Hash) -> Result<Option<u64>, LogError> {
        for &(_, index) in hints {
            if self.log.confirm(index, leaf)? {
                return Ok(Some(index));
            }
        }
        Ok(None)
    }

    /// The writer's index (always open in a writer).
    fn index(&self) -> Result<&Index, LogError> {
        self.log.index.as_ref().ok_or_else(|| self.no_index())
    }

    /// The writer's index, mutably.
    fn index_mut(&mut self) -> Result<&mut Index, LogError> {
        let err = self.no_index();
        self.log.index.as_mut().ok_or(err)
    }

    fn no_index(&self) -> LogError {
        LogError::Index {
            path: layout::index(&self.log.dir),
            detail: "not open".to_string(),
        }
    }

    /// Steps 3 to 9 of the protocol for the new entries `fresh` with leaf
    /// hashes `leaves` (indexes `old..`).
    fn integrate(&mut self, fresh: &[&[u8]], leaves: &[Hash]) -> Result<(), LogError> {
        let dir = self.log.dir.clone();
        let tmp = layout::tmp(&dir);
        let old = self.log.size;
        let mut frontier = self.frontier.clone();
        let mut builder = TileBuilder::new(old, |l, i, w| read_hash_tile(&dir, l, i, Some(w)))?;
        for leaf in leaves {
            frontier
                .push(*leaf, |id, h| builder.node(id, h))
                .map_err(|_| LogError::Full { size: old })?;
        }
        let new = frontier.size();
        let mut files = entry_bundles(&dir, old, fresh)?;
        let tiles = builder
            .take_full()
            .into_iter()
            .chain(builder.take_partial());
        files.extend(tiles.map(|t| (dir.join(t.path()), t.bytes())));
        // Steps 4-6: every touched tile durable under its final name, and
        // (at the same time) the index run of the new leaves.
        let index = self.index()?;
        let (written, prepared) = std::thread::scope(|s| {
            let run = s.spawn(|| index.prepare(&tmp, old, leaves));
            let written = fsutil::write_all_durable(&dir, &tmp, &files);
            (written, run.join().unwrap_or(Err(LogError::WriterThread)))
        });
        written?;
        let prepared = prepared?;
        drop(files);
        index.install(&prepared)?;
        // Steps 7-8: keep, then publish, the new checkpoint.
        let root = frontier.root();
        let checkpoint = sign_checkpoint(self.log.origin(), new, root, &self.key)?;
        let kept = layout::checkpoint_at(&dir, new);
        fsutil::write_durable(&tmp, &kept, checkpoint.as_bytes())?;
        fsutil::sync_dir(&layout::checkpoints(&dir))?;
        publish(&dir, &checkpoint)?;
        self.log.size = new;
        self.log.root = root;
        self.log.checkpoint = checkpoint;
        self.frontier = frontier;
        // The runs the new one absorbed are no longer needed.
        self.index_mut()?.retire(prepared)
    }

    /// Bring a lost or stale dedup index up to the checkpoint, from the
    /// entries (the index is never ahead of the truth it is checked against).
    pub(super) fn catch_up_index(&mut self) -> Result<(), LogError> {
        let size = self.log.size;
        let from = self.index()?.indexed_size();
        if from >= size {
            return Ok(());
        }
        let mut pending: Vec<Hash> = Vec::new();
        let mut pending_first = from;
        let dir = self.log.dir.clone();
        super::check::for_each_bundle(&dir, from, size, |first, entries| {
            let leaves: Vec<Hash> = entries.par_iter().map(|e| merkle::leaf_hash(e)).collect();
            pending.extend(leaves);
            if pending.len() >= MAX_APPEND_BATCH_ENTRIES {
                self.add_run(pending_first, &std::mem::take(&mut pending))?;
                pending_first = first + entries.len() as u64;
            }
            Ok(())
        })?;
        if pending.is_empty() {
            return Ok(());
        }
        self.add_run(pending_first, &pending)
    }

    /// Add the run of `leaves` (indexes `first..`, all published) to the index.
    fn add_run(&mut self, first: u64, leaves: &[Hash]) -> Result<(), LogError> {
        let tmp = layout::tmp(&self.log.dir);
        let prepared = self.index()?.prepare(&tmp, first, leaves)?;
        self.index()?.install(&prepared)?;
        self.index_mut()?.retire(prepared)
    }
}
