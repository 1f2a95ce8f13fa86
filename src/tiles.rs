//! tiles: C2SP tlog-tiles paths and encodings, and a read-only hash reader
//! over a tiled log directory. No durability policy (that is `log`).
//!
//! STUB: interface fixed, body to be written (helper C).

use crate::merkle::{Hash, HashReader, NodeId};
use std::path::{Path, PathBuf};

/// Tile height: each tile spans 8 tree levels.
pub const TILE_HEIGHT: u8 = 8;
/// Full tile width: 2^8 hashes or entries.
pub const TILE_WIDTH: u64 = 256;

/// Why a tile or entry bundle could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TileError {
    /// Placeholder until tiles land.
    #[error("not implemented")]
    Unimplemented,
}

/// `tile/<L>/<N>[.p/<W>]` with N in the `x001/x234/067` encoding;
/// `width` is `Some(W)` for a partial tile (1..=255).
pub fn hash_tile_path(level: u8, index: u64, width: Option<u8>) -> String {
    let _ = (level, index, width);
    todo!()
}

/// `tile/entries/<N>[.p/<W>]`.
pub fn entries_tile_path(index: u64, width: Option<u8>) -> String {
    let _ = (index, width);
    todo!()
}

/// An entry bundle: each entry behind its big-endian uint16 length.
pub fn encode_entry_bundle<'a>(
    entries: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, TileError> {
    let _ = entries;
    todo!()
}

/// Split an entry bundle into its entries (no trailing bytes allowed).
pub fn decode_entry_bundle(bytes: &[u8]) -> Result<Vec<&[u8]>, TileError> {
    let _ = bytes;
    todo!()
}

/// Reads stored hashes from the tiles of a log directory at a given size.
#[derive(Clone, Debug)]
pub struct TileReader {
    root: PathBuf,
    size: u64,
}

impl TileReader {
    /// A reader of the tree of `size` leaves under `root`.
    pub fn new(root: &Path, size: u64) -> TileReader {
        TileReader {
            root: root.to_path_buf(),
            size,
        }
    }

    /// Entry `index` of the log, read from its entry bundle.
    pub fn entry(&self, index: u64) -> Result<Vec<u8>, TileError> {
        let _ = (index, &self.root, self.size);
        todo!()
    }
}

impl HashReader for TileReader {
    type Error = TileError;
    fn read_hashes(&self, ids: &[NodeId]) -> Result<Vec<Hash>, TileError> {
        let _ = ids;
        todo!()
    }
}
