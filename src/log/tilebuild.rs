//! tilebuild: turn the stream of completed subtrees reported by
//! [`Frontier::push`](crate::merkle::Frontier::push) into C2SP tlog-tiles
//! hash tiles. Used by the writer (tiles to store) and by `check` (tiles to
//! compare). No I/O: the caller seeds the partial tiles and stores or
//! compares what comes out.
//!
//! C2SP tlog-tiles: "a tile at level L ... contains hashes of tree level
//! 8L": a level-`8L` node `i` sits in tile `(L, i / 256)` at position
//! `i % 256`.

use crate::merkle::{Hash, NodeId};
use crate::tiles::{TILE_HEIGHT, TILE_WIDTH};

/// One hash tile ready to store or compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltTile {
    /// Tile level L (tree level 8L).
    pub level: u8,
    /// Tile index N.
    pub index: u64,
    /// `None` for a full tile, `Some(W)` for a partial tile of W hashes.
    pub width: Option<u8>,
    /// The hashes, left to right.
    pub hashes: Vec<Hash>,
}

impl BuiltTile {
    /// `tile/<L>/<N>[.p/<W>]`.
    pub fn path(&self) -> String {
        crate::tiles::hash_tile_path(self.level, self.index, self.width)
    }

    /// Concatenated hashes: the tile file's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.hashes.concat()
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
    /// `partial(L)` (the existing hashes of the partial tile of level L,
    /// asked for each level where the tree has nodes).
    pub fn new<E>(
        size: u64,
        mut partial: impl FnMut(u8, u64, u8) -> Result<Vec<Hash>, E>,
    ) -> Result<TileBuilder, E> {
        let mut levels = Vec::new();
        let mut level: u8 = 0;
        while let Some(count) = size.checked_shr(u32::from(level) * u32::from(TILE_HEIGHT)) {
            if count == 0 {
                break;
            }
            let index = count / TILE_WIDTH;
            // count % 256 < 256, so the cast is exact.
            let width = (count % TILE_WIDTH) as u8;
            let hashes = if width > 0 {
                partial(level, index, width)?
            } else {
                Vec::new()
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
            self.full.push(BuiltTile {
                level,
                index: open.index,
                width: None,
                hashes: std::mem::take(&mut open.hashes),
            });
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
            if open.dirty && !open.hashes.is_empty() {
                out.push(BuiltTile {
                    // Tree levels fit in u8 (at most 64 / 8 tile levels).
                    level: level as u8,
                    index: open.index,
                    width: Some(open.hashes.len() as u8),
                    hashes: open.hashes.clone(),
                });
                open.dirty = false;
            }
        }
        out
    }
}
