//! codec: hash tiles and entry bundles encoded and decoded (C2SP
//! tlog-tiles "Merkle Tree" and "Log Entries"), and their object names.

use super::{HASH_BYTES, TILE_WIDTH, TileKey, Width};
use crate::limits::MAX_ENTRY_BYTES;
use crate::tlog::merkle::Hash;

/// Why a tile or entry bundle could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TileError {
    /// A tile or bundle could not be read from the store.
    #[error("reading {path}")]
    Read {
        /// The tile path.
        path: String,
        /// The storage error (a `storage::StoreError`).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A tile or bundle that the tree size needs does not exist.
    #[error("{path} is missing; is this a tiled log of at least this size?")]
    Missing {
        /// The tile path (the partial tile when a partial was wanted).
        path: String,
    },
    /// A hash tile file is larger than a full tile.
    #[error("tile {path} is over {max} bytes; the tile is corrupt")]
    TileTooLarge {
        /// The tile path.
        path: String,
        /// [`MAX_HASH_TILE_BYTES`].
        max: usize,
    },
    /// A hash tile file does not hold exactly the hashes its name implies.
    #[error("tile {path} is {got} bytes, expected {expected}; the tile is corrupt")]
    WrongLength {
        /// The file, relative to the log root.
        path: String,
        /// Bytes its width implies.
        expected: usize,
        /// Bytes found.
        got: usize,
    },
    /// An entry bundle is larger than any valid bundle.
    #[error("entry bundle {path} is over {max} bytes; the bundle is corrupt")]
    BundleTooLarge {
        /// The file, relative to the log root.
        path: String,
        /// `limits::MAX_ENTRY_BUNDLE_BYTES`.
        max: usize,
    },
    /// An entry bundle holds another number of entries than its name implies.
    #[error("entry bundle {path} holds {got} entries, expected {expected}")]
    BundleCount {
        /// The file, relative to the log root.
        path: String,
        /// Entries its width implies.
        expected: usize,
        /// Entries decoded.
        got: usize,
    },
    /// A node was asked for that is not a complete subtree of this tree.
    #[error("node at level {level} index {index} is not complete in a tree of {size} leaves")]
    NotInTree {
        /// The node's level.
        level: u8,
        /// The node's index.
        index: u64,
        /// The reader's tree size.
        size: u64,
    },
    /// An entry was asked for beyond the tree size.
    #[error("entry {index} is not in a tree of {size} leaves")]
    EntryOutOfRange {
        /// The entry index.
        index: u64,
        /// The reader's tree size.
        size: u64,
    },
    /// An entry is too large for its uint16 length prefix.
    #[error("entry {position} of the bundle is {len} bytes, over {max}")]
    EntryTooLarge {
        /// Its position in the bundle.
        position: usize,
        /// Its length.
        len: usize,
        /// `limits::MAX_ENTRY_BYTES`.
        max: usize,
    },
    /// A bundle would hold more than 256 entries.
    #[error("entry bundle holds more than {max} entries")]
    TooManyEntries {
        /// `TILE_WIDTH`.
        max: u64,
    },
    /// A bundle ends inside a length prefix or an entry.
    #[error(
        "entry bundle truncated in entry {position} at byte {offset}: {needed} bytes needed, {remaining} left"
    )]
    Truncated {
        /// Position of the incomplete entry.
        position: usize,
        /// Byte offset where it starts.
        offset: usize,
        /// Bytes it needs (prefix or body).
        needed: usize,
        /// Bytes left in the input.
        remaining: usize,
    },
}

/// The index N as C2SP tlog-tiles path elements: "zero-padded 3-digit path
/// elements. All but the last element are prefixed with an x", so 1234067 is
/// `x001/x234/067` and 5 is `005`.
pub fn encode_tile_index(index: u64) -> String {
    crate::tlog::tiles::path::encode_index(index)
}

/// `tile/<L>/<N>[.p/<W>]` with N in the `x001/x234/067` encoding;
/// `width` is `Some(W)` for a partial tile (1..=255; `Some(0)` names the
/// full tile, which is never what a caller means).
pub fn hash_tile_path(level: u8, index: u64, width: Option<u8>) -> String {
    let w = width.and_then(Width::partial).unwrap_or(Width::Full);
    match TileKey::hashes(level, index, w) {
        Some(key) => key.path(),
        None => format!("tile/{level}/{}", encode_tile_index(index)),
    }
}

/// `tile/entries/<N>[.p/<W>]`.
pub fn entries_tile_path(index: u64, width: Option<u8>) -> String {
    let w = width.and_then(Width::partial).unwrap_or(Width::Full);
    TileKey::entries(index, w).path()
}

/// A hash tile's bytes: its hashes concatenated.
pub fn encode_hash_tile(hashes: &[Hash]) -> Vec<u8> {
    hashes.concat()
}

/// Split a hash tile into hashes; `path` names it in errors. A tile of
/// `width` hashes is exactly `32 * width` bytes.
pub fn decode_hash_tile(bytes: &[u8], width: usize, path: &str) -> Result<Vec<Hash>, TileError> {
    let expected = width.saturating_mul(HASH_BYTES);
    if bytes.len() != expected {
        return Err(TileError::WrongLength {
            path: path.to_string(),
            expected,
            got: bytes.len(),
        });
    }
    // chunks_exact(32) yields 32-byte slices only, so try_from cannot fail.
    Ok(bytes
        .chunks_exact(HASH_BYTES)
        .filter_map(|c| Hash::try_from(c).ok())
        .collect())
}

/// An entry bundle: each entry behind its big-endian uint16 length
/// (C2SP tlog-tiles "Log Entries": `uint16 length || entry`, at most 256).
pub fn encode_entry_bundle<'a>(
    entries: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, TileError> {
    let mut out = Vec::new();
    for (position, entry) in entries.into_iter().enumerate() {
        if position as u64 >= TILE_WIDTH {
            return Err(TileError::TooManyEntries { max: TILE_WIDTH });
        }
        let len = u16::try_from(entry.len()).map_err(|_| TileError::EntryTooLarge {
            position,
            len: entry.len(),
            max: MAX_ENTRY_BYTES,
        })?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(entry);
    }
    Ok(out)
}

/// Split an entry bundle into its entries (no trailing bytes allowed).
///
/// Input that ends inside a length prefix or an entry is refused as
/// truncated, and so is a bundle of more than 256 entries.
pub fn decode_entry_bundle(bytes: &[u8]) -> Result<Vec<&[u8]>, TileError> {
    let mut entries = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let position = entries.len();
        if position as u64 >= TILE_WIDTH {
            return Err(TileError::TooManyEntries { max: TILE_WIDTH });
        }
        let offset = bytes.len() - rest.len();
        let truncated = |needed: usize, remaining: usize| TileError::Truncated {
            position,
            offset,
            needed,
            remaining,
        };
        let Some((prefix, body)) = rest.split_first_chunk::<2>() else {
            return Err(truncated(2, rest.len()));
        };
        let len = usize::from(u16::from_be_bytes(*prefix));
        let Some((entry, tail)) = body.split_at_checked(len) else {
            return Err(truncated(len, body.len()));
        };
        entries.push(entry);
        rest = tail;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_encoding() {
        assert_eq!(encode_tile_index(0), "000");
        assert_eq!(encode_tile_index(5), "005");
        assert_eq!(encode_tile_index(999), "999");
        assert_eq!(encode_tile_index(1000), "x001/000");
        assert_eq!(encode_tile_index(1234067), "x001/x234/067");
        assert_eq!(
            hash_tile_path(1, 1234067, Some(8)),
            "tile/1/x001/x234/067.p/8"
        );
        assert_eq!(entries_tile_path(0, None), "tile/entries/000");
    }

    #[test]
    fn bundle_round_trip_and_refusals() {
        let entries: Vec<&[u8]> = vec![b"one", b"", b"three"];
        let bytes = encode_entry_bundle(entries.iter().copied()).unwrap();
        assert_eq!(decode_entry_bundle(&bytes).unwrap(), entries);
        for cut in 1..bytes.len() {
            let truncated = decode_entry_bundle(&bytes[..cut]);
            let boundary = [5usize, 7].contains(&cut);
            assert_eq!(truncated.is_ok(), boundary, "cut at {cut}");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(
            decode_entry_bundle(&trailing),
            Err(TileError::Truncated { .. })
        ));
    }
}
