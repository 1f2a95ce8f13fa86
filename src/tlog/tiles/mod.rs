//! tiles: C2SP tlog-tiles encodings and object names ([`path`]). Pure: no
//! store, no file system, no durability policy. Stored tiles are read and
//! decoded in one place above this layer, `storage::tiles` (its
//! `read_hash_tile`, `read_entry_bundle` and `TileReader`).
//!
//! A tiled log stores its Merkle tree as hash tiles `tile/<L>/<N>[.p/<W>]`
//! (tile level L holds the tree nodes at level 8·L, 256 to a full tile) and
//! its entries as entry bundles `tile/entries/<N>[.p/<W>]` (C2SP tlog-tiles,
//! "Merkle Tree" and "Log Entries"). [`TileReader`] answers
//! [`HashReader`] queries from those files for one tree size, so the proof
//! functions of [`crate::tlog::merkle`] work on any log written in this layout,
//! ours or another implementation's.

mod codec;
pub mod path;

pub use codec::{
    TileError, decode_entry_bundle, decode_hash_tile, encode_entry_bundle, encode_hash_tile,
    encode_tile_index, entries_tile_path, hash_tile_path,
};
pub use path::{Family, PrivateDir, PrivateKey, PublicKey, TileKey, Width};

/// Tile height: each tile spans 8 tree levels.
pub const TILE_HEIGHT: u8 = 8;
/// Full tile width: 2^8 hashes or entries.
pub const TILE_WIDTH: u64 = 256;
/// Bytes of one hash in a hash tile.
pub const HASH_BYTES: usize = 32;
/// Largest hash tile: 256 hashes.
pub const MAX_HASH_TILE_BYTES: usize = TILE_WIDTH as usize * HASH_BYTES;
