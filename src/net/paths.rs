//! paths: the strict parser of the three public URL path shapes of a tiled
//! log (C2SP tlog-tiles), and nothing else.
//!
//! ```text
//! /checkpoint
//! /tile/<L>/<N>[.p/<W>]          L: 0..=63, decimal, no leading zeros
//! /tile/entries/<N>[.p/<W>]      W: 1..=255, decimal, no leading zeros
//! ```
//!
//! `<N>` is the tlog-tiles index encoding: zero-padded 3-digit elements, all
//! but the last prefixed with `x` (`x001/x234/067`). Only the canonical
//! encoding is accepted: a path is parsed into a [`PublicPath`] and then
//! refused unless re-encoding that value gives back the same text, byte for
//! byte. So `..`, `.`, `//`, percent-encoding, a trailing slash, leading
//! zeros, `x000/005`, and every other spelling of a file name fall out as
//! "not a public path" without a rule of their own, and the file opened is
//! always built from the parsed value, never from the request text.

use crate::tiles::{TILE_WIDTH, encode_tile_index};

/// Highest tile level a path may name (C2SP tlog-tiles: "between 0 and 63").
pub const MAX_TILE_LEVEL: u8 = 63;
/// Most `/`-separated elements in an index: u64 needs 7 groups of 3 digits.
const MAX_INDEX_ELEMENTS: usize = 7;
/// Longest request path looked at (the longest valid one is well under it).
pub const MAX_PATH_BYTES: usize = 128;

/// Which stream of tiles a tile path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileKind {
    /// `tile/<L>/...`: hashes of tree level 8·L.
    Hash(u8),
    /// `tile/entries/...`: entry bundles.
    Entries,
}

/// One public object of a tiled log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PublicPath {
    /// `checkpoint`.
    Checkpoint,
    /// A hash tile or entry bundle: `width` is `None` for a full tile.
    Tile {
        /// Hash level or entries.
        kind: TileKind,
        /// Tile index N.
        index: u64,
        /// Partial width W (1..=255), or `None` for a full tile.
        width: Option<u8>,
    },
}

impl PublicPath {
    /// Parse a URL path (with its leading `/`). `None` for anything that is
    /// not exactly the canonical spelling of a public object.
    pub fn from_url_path(path: &str) -> Option<PublicPath> {
        if path.len() > MAX_PATH_BYTES {
            return None;
        }
        let rel = path.strip_prefix('/')?;
        let parsed = PublicPath::parse_relative(rel)?;
        (parsed.relative() == rel).then_some(parsed)
    }

    /// The path relative to the log root (`checkpoint`, `tile/0/x001/002.p/5`).
    pub fn relative(&self) -> String {
        match *self {
            PublicPath::Checkpoint => "checkpoint".to_string(),
            PublicPath::Tile {
                kind: TileKind::Hash(level),
                index,
                width,
            } => crate::tiles::hash_tile_path(level, index, width),
            PublicPath::Tile {
                kind: TileKind::Entries,
                index,
                width,
            } => crate::tiles::entries_tile_path(index, width),
        }
    }

    /// The shape of `rel`, leniently: canonicity is checked by the caller
    /// through the round trip.
    fn parse_relative(rel: &str) -> Option<PublicPath> {
        if rel == "checkpoint" {
            return Some(PublicPath::Checkpoint);
        }
        let rest = rel.strip_prefix("tile/")?;
        let (level, rest) = rest.split_once('/')?;
        let kind = if level == "entries" {
            TileKind::Entries
        } else {
            let l = parse_decimal(level, u64::from(MAX_TILE_LEVEL))?;
            TileKind::Hash(u8::try_from(l).ok()?)
        };
        let (index_text, width) = match rest.split_once(".p/") {
            Some((i, w)) => {
                let w = parse_decimal(w, TILE_WIDTH - 1)?;
                (i, Some(u8::try_from(w).ok().filter(|&w| w > 0)?))
            }
            None => (rest, None),
        };
        Some(PublicPath::Tile {
            kind,
            index: parse_index(index_text)?,
            width,
        })
    }

    /// True when every hash or entry this object holds lies inside the tree
    /// of `size` leaves (the published checkpoint): only such objects are
    /// ever served (spec/service.md "Read API").
    pub fn within(&self, size: u64) -> bool {
        let PublicPath::Tile { kind, index, width } = *self else {
            return true;
        };
        let level = match kind {
            TileKind::Hash(l) => l,
            TileKind::Entries => 0,
        };
        // Nodes of tree level 8·L that the tree holds.
        let Some(count) = size.checked_shr(8 * u32::from(level)) else {
            return false;
        };
        let items = width.map_or(TILE_WIDTH, u64::from);
        index
            .checked_mul(TILE_WIDTH)
            .and_then(|start| start.checked_add(items))
            .is_some_and(|end| end <= count)
    }

    /// True for a full tile (immutable once published).
    pub fn is_full_tile(&self) -> bool {
        matches!(self, PublicPath::Tile { width: None, .. })
    }
}

/// Decimal digits only, at most `max`; canonicity is left to the round trip.
fn parse_decimal(text: &str, max: u64) -> Option<u64> {
    if text.is_empty() || text.len() > 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u64>().ok().filter(|&v| v <= max)
}

/// `x001/x234/067` to 1234067: each element three digits, all but the last
/// prefixed with `x`.
fn parse_index(text: &str) -> Option<u64> {
    let elements: Vec<&str> = text.split('/').collect();
    if elements.is_empty() || elements.len() > MAX_INDEX_ELEMENTS {
        return None;
    }
    let last = elements.len() - 1;
    let mut value: u64 = 0;
    for (i, element) in elements.iter().enumerate() {
        let digits = if i < last {
            element.strip_prefix('x')?
        } else {
            element
        };
        if digits.len() != 3 {
            return None;
        }
        let group = parse_decimal(digits, 999)?;
        value = value.checked_mul(1000)?.checked_add(group)?;
    }
    // Round-trip guard of its own, so a caller using only the index is safe too.
    (encode_tile_index(value) == text).then_some(value)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn tile(kind: TileKind, index: u64, width: Option<u8>) -> Option<PublicPath> {
        Some(PublicPath::Tile { kind, index, width })
    }

    #[test]
    fn the_three_shapes_parse() {
        let p = PublicPath::from_url_path;
        assert_eq!(p("/checkpoint"), Some(PublicPath::Checkpoint));
        assert_eq!(p("/tile/0/000"), tile(TileKind::Hash(0), 0, None));
        assert_eq!(
            p("/tile/1/x001/x234/067.p/8"),
            tile(TileKind::Hash(1), 1_234_067, Some(8))
        );
        assert_eq!(
            p("/tile/entries/x001/000"),
            tile(TileKind::Entries, 1000, None)
        );
        assert_eq!(
            p("/tile/entries/005.p/255"),
            tile(TileKind::Entries, 5, Some(255))
        );
        assert_eq!(p("/tile/63/000"), tile(TileKind::Hash(63), 0, None));
    }

    #[test]
    fn every_other_spelling_is_refused() {
        for bad in [
            "",
            "/",
            "checkpoint",
            "/checkpoint/",
            "//checkpoint",
            "/Checkpoint",
            "/checkpoint.",
            "/./checkpoint",
            "/tile/../checkpoint",
            "/tile/0/../0/000",
            "/tile/0/000/",
            "/tile/0//000",
            "/tile/00/000",
            "/tile/01/000",
            "/tile/64/000",
            "/tile/-1/000",
            "/tile/+1/000",
            "/tile/0/5",
            "/tile/0/0005",
            "/tile/0/x000/005",
            "/tile/0/x1/000",
            "/tile/0/001/002",
            "/tile/0/x001",
            "/tile/0/000.p/0",
            "/tile/0/000.p/256",
            "/tile/0/000.p/08",
            "/tile/0/000.p/",
            "/tile/0/000.p",
            "/tile/0/000.p/1/2",
            "/tile/entries/000.p/1.p/2",
            "/tile/%30/000",
            "/tile/0/%30%30%30",
            "/tile/0/000%2ep/1",
            "/tile%2f0/000",
            "/.rcpt/settings.json",
            "/.rcpt/lock",
            "/tile",
            "/tile/",
            "/tile/0",
            "/tile/0/",
            "/tile/entries",
            "/tile/entries/",
            "/tile/0/x018/x446/x744/x073/x709/x551/616",
            "/tile/0/x001/x002/x003/x004/x005/x006/x007/007",
            "/tile/0/000 ",
            "/tile/0/ 000",
            "/tile/0/000?x",
            "/tile/0/000#x",
            "/tile/０/000",
            "/etc/passwd",
            "/tile/0/000\0",
            "/tile/0/000\\",
            "/tile\\0\\000",
        ] {
            assert_eq!(PublicPath::from_url_path(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_largest_index_round_trips() {
        let text = format!("/tile/0/{}", encode_tile_index(u64::MAX));
        assert_eq!(
            PublicPath::from_url_path(&text),
            tile(TileKind::Hash(0), u64::MAX, None)
        );
    }

    #[test]
    fn within_the_published_size() {
        let full0 = PublicPath::from_url_path("/tile/0/001").unwrap();
        assert!(!full0.within(511));
        assert!(full0.within(512));
        let part0 = PublicPath::from_url_path("/tile/entries/001.p/3").unwrap();
        assert!(!part0.within(258));
        assert!(part0.within(259));
        let full1 = PublicPath::from_url_path("/tile/1/000").unwrap();
        assert!(!full1.within(65_535));
        assert!(full1.within(65_536));
        let part1 = PublicPath::from_url_path("/tile/1/000.p/1").unwrap();
        assert!(!part1.within(255));
        assert!(part1.within(256));
        let huge = PublicPath::from_url_path(&format!("/tile/0/{}", encode_tile_index(u64::MAX)));
        assert!(!huge.unwrap().within(u64::MAX));
        assert!(PublicPath::Checkpoint.within(0));
    }
}
