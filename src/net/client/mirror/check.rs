//! The check of a run's fetched files before anything enters the public
//! tree (steps 1 and 2 of the module documentation of `mirror`).

use super::error::MirrorError;
use super::stage::{Union, read_new};
use crate::limits::MAX_ENTRY_BUNDLE_BYTES;
use crate::log::tilebuild::TileBuilder;
use crate::storage::tiles::TileReader;
use crate::storage::walk::{self, ConsistencyWalk, Tree, WalkError};
use crate::storage::{PublicKey, PublicRead, TileKey, Width};
use crate::tlog::merkle::Hash;
use crate::tlog::tiles::{self, MAX_HASH_TILE_BYTES, TILE_WIDTH};
use std::sync::Arc;

/// Steps 1 and 2 of the module comment, on the files fetched for the tree
/// of `n` leaves extending the mirrored tree of `m`: the consistency walk
/// (`storage::walk`) over the staged and mirrored tiles, with the hash
/// tiles it completes rebuilt and compared.
pub(super) fn check_new(
    union: Arc<Union>,
    m: u64,
    n: u64,
    old_root: &Hash,
    new_root: &Hash,
) -> Result<(), MirrorError> {
    let old = Tree {
        size: m,
        root: *old_root,
    };
    let new = Tree {
        size: n,
        root: *new_root,
    };
    let reader = TileReader::over(Arc::clone(&union) as Arc<dyn PublicRead>, n, None);
    walk::prove_extends(&reader, old, new).map_err(|e| walk_error(m, n, e))?;
    let public: Arc<dyn PublicRead> = Arc::clone(&union.public) as Arc<dyn PublicRead>;
    let mut walk = ConsistencyWalk::from_tiles(reader, new, m).map_err(|e| walk_error(m, n, e))?;
    let mut builder = TileBuilder::new(m, |key: &TileKey| {
        let bytes = public
            .read(&PublicKey::Tile(*key), MAX_HASH_TILE_BYTES)?
            .ok_or_else(|| MirrorError::Mismatch(format!("the mirror lacks {key}")))?;
        tiles::decode_hash_tile(&bytes, key.width().items(), &key.path())
            .map_err(|source| MirrorError::LocalTile { key: *key, source })
    })?;
    let old_partial = old_partial_entries(&*public, m)?;
    while let Some(bundle) = walk.next_bundle().map_err(|e| walk_error(m, n, e))? {
        kept_unchanged(&bundle, &old_partial, (m, n))?;
        walk.push_bundle(&bundle, |id, h| builder.node(id, h))
            .map_err(|e| walk_error(m, n, e))?;
        for tile in builder.take_full() {
            compare(&union, &tile.key, &tile.bytes())?;
        }
    }
    for tile in builder.take_partial() {
        compare(&union, &tile.key, &tile.bytes())?;
    }
    walk.finish().map_err(|e| walk_error(m, n, e))?;
    Ok(())
}

/// The entries of `bundle` before the mirrored size `m` must be the ones
/// the mirror holds (`old_partial`): the walk hashes only the new ones.
fn kept_unchanged(
    bundle: &walk::Bundle,
    old_partial: &[Vec<u8>],
    (m, n): (u64, u64),
) -> Result<(), MirrorError> {
    if bundle.first >= m {
        return Ok(());
    }
    let fetched = bundle
        .entries
        .iter()
        .map(Some)
        .chain(std::iter::repeat(None));
    match old_partial
        .iter()
        .zip(fetched)
        .position(|(o, f)| f != Some(o))
    {
        None => Ok(()),
        Some(k) => Err(MirrorError::Rewritten {
            old: m,
            new: n,
            detail: format!(
                "entry {} differs from the mirrored one",
                bundle.first + k as u64
            ),
        }),
    }
}

/// What a failed step of the walk means for a mirror run: a log whose
/// tiles prove no consistency with the mirrored tree rewrote its history;
/// anything else is files that do not match its checkpoint.
fn walk_error(m: u64, n: u64, e: WalkError) -> MirrorError {
    match e {
        WalkError::Inconsistent { source, .. } => MirrorError::Rewritten {
            old: m,
            new: n,
            detail: source.to_string(),
        },
        other => MirrorError::Mismatch(crate::io::error_chain(&other)),
    }
}

/// The entries of the mirrored partial bundle at size `m` (none when `m`
/// ends a full bundle).
fn old_partial_entries(public: &dyn PublicRead, m: u64) -> Result<Vec<Vec<u8>>, MirrorError> {
    let Some(width @ Width::Partial(_)) = Width::of(m / TILE_WIDTH, m) else {
        return Ok(Vec::new());
    };
    let key = TileKey::entries(m / TILE_WIDTH, width);
    let bytes = public
        .read(&PublicKey::Tile(key), MAX_ENTRY_BUNDLE_BYTES)?
        .ok_or_else(|| MirrorError::Mismatch(format!("the mirror lacks {key}")))?;
    let entries = tiles::decode_entry_bundle(&bytes)
        .map_err(|source| MirrorError::LocalTile { key, source })?;
    Ok(entries.into_iter().map(<[u8]>::to_vec).collect())
}

/// A rebuilt tile must equal the fetched one, byte for byte.
fn compare(union: &Union, key: &TileKey, built: &[u8]) -> Result<(), MirrorError> {
    if read_new(union, key)? != built {
        return Err(MirrorError::Mismatch(format!(
            "tile {key} is not the tile the entries give"
        )));
    }
    Ok(())
}
