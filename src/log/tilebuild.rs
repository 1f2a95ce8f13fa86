//! tilebuild: turn the stream of completed subtrees reported by
//! [`Frontier::push`](crate::tlog::merkle::Frontier::push) into C2SP tlog-tiles
//! hash tiles. Used by the writer (tiles to store) and by `check` (tiles to
//! compare). No I/O: the caller seeds the partial tiles and stores or
//! compares what comes out.
//!
//! C2SP tlog-tiles: "a tile at level L ... contains hashes of tree level
//! 8L": a level-`8L` node `i` sits in tile `(L, i / 256)` at position
//! `i % 256`.

use crate::storage::{TileKey, Width};
use crate::tlog::merkle::{Hash, NodeId};
use crate::tlog::tiles::{TILE_HEIGHT, TILE_WIDTH};

/// One hash tile ready to store or compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltTile {
    /// Its name: level, index, full or partial width.
    pub key: TileKey,
    /// The hashes, left to right.
    pub hashes: Vec<Hash>,
}

impl BuiltTile {
    /// A tile at `level` (at most 31: a tree level fits in a byte), or
    /// `None` for an empty one.
    fn new(level: u8, index: u64, hashes: Vec<Hash>) -> Option<BuiltTile> {
        let width = match u8::try_from(hashes.len()) {
            Ok(w) => Width::partial(w)?,
            Err(_) => Width::Full,
        };
        Some(BuiltTile {
            key: TileKey::hashes(level, index, width)?,
            hashes,
        })
    }

    /// `tile/<L>/<N>[.p/<W>]`.
    pub fn path(&self) -> String {
        self.key.path()
    }

    /// Concatenated hashes: the tile file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        crate::tlog::tiles::encode_hash_tile(&self.hashes)
    }
}

/// The open (not yet full) tile of one level.
#[derive(Clone, Debug, Default)]
struct Level {
    index: u64,
    hashes: Vec<Hash>,
    dirty: bool,
}

/// Collects completed level-`8L` nodes into tiles.
#[derive(Clone, Debug, Default)]
pub struct TileBuilder {
    levels: Vec<Level>,
    full: Vec<BuiltTile>,
}

impl TileBuilder {
    /// A builder for a tree of `size` leaves whose open tiles hold
    /// `partial(key)` (the stored hashes of the partial tile `key` of each
    /// level where the tree has nodes).
    pub fn new<E>(
        size: u64,
        mut partial: impl FnMut(&TileKey) -> Result<Vec<Hash>, E>,
    ) -> Result<TileBuilder, E> {
        let mut levels = Vec::new();
        let mut level: u8 = 0;
        while let Some(count) = size.checked_shr(u32::from(level) * u32::from(TILE_HEIGHT)) {
            if count == 0 {
                break;
            }
            let index = count / TILE_WIDTH;
            // count % 256 < 256, so the cast is exact.
            let width = Width::partial((count % TILE_WIDTH) as u8);
            let hashes = match width.and_then(|w| TileKey::hashes(level, index, w)) {
                Some(key) => partial(&key)?,
                None => Vec::new(),
            };
            levels.push(Level {
                index,
                hashes,
                dirty: false,
            });
            level += 1;
        }
        Ok(TileBuilder {
            levels,
            full: Vec::new(),
        })
    }

    /// Record one completed subtree; only levels that are multiples of 8 matter.
    pub fn node(&mut self, id: NodeId, hash: &Hash) {
        if !id.level.is_multiple_of(TILE_HEIGHT) {
            return;
        }
        let level = id.level / TILE_HEIGHT;
        while self.levels.len() <= usize::from(level) {
            self.levels.push(Level::default());
        }
        let Some(open) = self.levels.get_mut(usize::from(level)) else {
            return; // unreachable: the loop above made the level
        };
        open.hashes.push(*hash);
        open.dirty = true;
        if open.hashes.len() as u64 == TILE_WIDTH {
            let hashes = std::mem::take(&mut open.hashes);
            // level = tree level / 8 <= 31, so the tile has a name.
            self.full.extend(BuiltTile::new(level, open.index, hashes));
            open.index += 1;
            open.dirty = false;
        }
    }

    /// Take the full tiles completed so far.
    pub fn take_full(&mut self) -> Vec<BuiltTile> {
        std::mem::take(&mut self.full)
    }

    /// The partial tiles that received new hashes since the builder was made.
    pub fn take_partial(&mut self) -> Vec<BuiltTile> {
        let mut out = Vec::new();
        for (level, open) in self.levels.iter_mut().enumerate() {
            if open.dirty {
                // At most 32 levels (tree levels fit in a byte), so the cast is exact.
                out.extend(BuiltTile::new(level as u8, open.index, open.hashes.clone()));
                open.dirty = false;
            }
        }
        out
    }

    /// Every open (partial) tile as it stands, changed or not: the partial
    /// tiles of the tree at its current size.
    pub fn partial_tiles(&self) -> Vec<BuiltTile> {
        self.levels
            .iter()
            .enumerate()
            .filter_map(|(level, open)| {
                BuiltTile::new(level as u8, open.index, open.hashes.clone())
            })
            .collect()
    }
}
