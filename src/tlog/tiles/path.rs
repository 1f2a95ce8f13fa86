//! key: the names of a log's objects, as types.
//!
//! A [`PublicKey`] can name only what C2SP tlog-tiles serves: `checkpoint`,
//! `tile/<L>/<N>[.p/<W>]` and `tile/entries/<N>[.p/<W>]`. Its parser,
//! [`PublicKey::from_path`], accepts exactly the canonical spelling of
//! those names, so an HTTP server that maps a URL path through it can
//! serve nothing else (no `..`, no percent-encoding, no leading `/`, no
//! `x000` prefix, no leading zeros, widths 1..=255, levels 0..=63).
//! A [`PrivateKey`] names the state a writer keeps beside them (under
//! `.rcpt/`), which is never served; the two types do not convert.
//!
//! C2SP tlog-tiles: "`<N>` ... MUST be a non-negative integer encoded into
//! zero-padded 3-digit path elements. All but the last path element MUST
//! begin with an `x`"; "`<W>` is ... a decimal ASCII integer between 1 and
//! 255, with no additional leading zeroes"; "`<L>` ... MUST be a decimal
//! ASCII integer between 0 and 63, with no additional leading zeroes".

use std::fmt;
use std::num::NonZeroU8;

/// Highest tile level C2SP tlog-tiles allows.
pub const MAX_TILE_LEVEL: u8 = 63;
/// Most 3-digit groups of a `u64` tile index (`u64::MAX` has 20 digits).
const MAX_INDEX_GROUPS: usize = 7;

/// Which tiles: the hash tiles of one level, or the entry bundles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// Hash tiles at tile level L (tree level 8L), 0..=63.
    Hashes(u8),
    /// Entry bundles (`tile/entries/`), indexed like level 0.
    Entries,
}

impl Family {
    /// The tile level whose indexes this family follows (entries: 0).
    pub fn level(self) -> u8 {
        match self {
            Family::Hashes(l) => l,
            Family::Entries => 0,
        }
    }

    /// The path prefix, `tile/<L>` or `tile/entries`.
    fn prefix(self) -> String {
        match self {
            Family::Hashes(l) => format!("tile/{l}"),
            Family::Entries => "tile/entries".to_string(),
        }
    }
}

/// A full tile, or a partial one of 1..=255 items.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Width {
    /// Partial: this many items (1..=255), `.p/<W>`.
    Partial(NonZeroU8),
    /// Full: 256 items.
    Full,
}

impl Width {
    /// The width of tile `index` when `items` items of its level exist:
    /// `None` when the tile holds none of them (an empty tile has no name).
    pub fn of(index: u64, items: u64) -> Option<Width> {
        let before = index.checked_mul(256)?;
        let held = items.checked_sub(before)?.min(256);
        match u8::try_from(held).ok() {
            None => Some(Width::Full),
            Some(w) => NonZeroU8::new(w).map(Width::Partial),
        }
    }

    /// A partial width; `None` for 0.
    pub fn partial(width: u8) -> Option<Width> {
        NonZeroU8::new(width).map(Width::Partial)
    }

    /// Items in a tile of this width (1..=256).
    pub fn items(self) -> usize {
        match self {
            Width::Partial(w) => usize::from(w.get()),
            Width::Full => 256,
        }
    }

    /// `Some(W)` for a partial tile, `None` for a full one.
    pub fn partial_width(self) -> Option<u8> {
        match self {
            Width::Partial(w) => Some(w.get()),
            Width::Full => None,
        }
    }
}

/// One immutable public object: a hash tile or an entry bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileKey {
    family: Family,
    index: u64,
    width: Width,
}

impl TileKey {
    /// Hash tile `index` at tile `level` (0..=63, else `None`).
    pub fn hashes(level: u8, index: u64, width: Width) -> Option<TileKey> {
        (level <= MAX_TILE_LEVEL).then_some(TileKey {
            family: Family::Hashes(level),
            index,
            width,
        })
    }

    /// Entry bundle `index`.
    pub fn entries(index: u64, width: Width) -> TileKey {
        TileKey {
            family: Family::Entries,
            index,
            width,
        }
    }

    /// Tile `index` of `family` with `width` (levels over 63: `None`).
    pub fn new(family: Family, index: u64, width: Width) -> Option<TileKey> {
        match family {
            Family::Hashes(l) => TileKey::hashes(l, index, width),
            Family::Entries => Some(TileKey::entries(index, width)),
        }
    }

    /// Which tiles this is one of.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The tile index N.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Full or partial.
    pub fn width(&self) -> Width {
        self.width
    }

    /// The path, `tile/<L>/<N>[.p/<W>]` or `tile/entries/<N>[.p/<W>]`.
    pub fn path(&self) -> String {
        let mut p = format!("{}/{}", self.family.prefix(), encode_index(self.index));
        if let Width::Partial(w) = self.width {
            p.push_str(&format!(".p/{w}"));
        }
        p
    }

    /// Parse the part after `tile/`.
    fn parse(rest: &str) -> Option<TileKey> {
        let (first, rest) = rest.split_once('/')?;
        let family = match first {
            "entries" => Family::Entries,
            l => Family::Hashes(
                parse_decimal(l, 0, MAX_TILE_LEVEL.into())?
                    .try_into()
                    .ok()?,
            ),
        };
        let (index, width) = match rest.split_once(".p/") {
            Some((n, w)) => (
                n,
                Width::partial(parse_decimal(w, 1, 255)?.try_into().ok()?)?,
            ),
            None => (rest, Width::Full),
        };
        TileKey::new(family, decode_index(index)?, width)
    }
}

impl fmt::Display for TileKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path())
    }
}

/// The name of a public object: what a log serves, and nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PublicKey {
    /// `checkpoint`: the latest signed checkpoint (replaced by compare-and-swap).
    Checkpoint,
    /// A hash tile or an entry bundle (written once, never changed).
    Tile(TileKey),
}

impl PublicKey {
    /// The key a canonical path names, or `None` for any other string.
    ///
    /// Accepted: `checkpoint`; `tile/<L>/<N>[.p/<W>]` with L in 0..=63;
    /// `tile/entries/<N>[.p/<W>]`; N in `x001/x234/067` form with no
    /// `x000` first element and a value that fits 64 bits; W in 1..=255;
    /// decimals without leading zeros. Nothing else: no leading or doubled
    /// `/`, no `.` or `..` element, no percent-encoding, no other byte.
    pub fn from_path(path: &str) -> Option<PublicKey> {
        if path == "checkpoint" {
            return Some(PublicKey::Checkpoint);
        }
        TileKey::parse(path.strip_prefix("tile/")?).map(PublicKey::Tile)
    }

    /// The canonical path.
    pub fn path(&self) -> String {
        match self {
            PublicKey::Checkpoint => "checkpoint".to_string(),
            PublicKey::Tile(t) => t.path(),
        }
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path())
    }
}

/// A directory of private objects that is listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrivateDir {
    /// `.rcpt/checkpoints/`: every checkpoint the log published, by size.
    Checkpoints,
    /// `.rcpt/dedup/`: the dedup index runs.
    Dedup,
}

impl PrivateDir {
    /// The directory's path under `.rcpt/`.
    pub fn path(self) -> &'static str {
        match self {
            PrivateDir::Checkpoints => "checkpoints",
            PrivateDir::Dedup => "dedup",
        }
    }
}

/// The name of a private object (under `.rcpt/`, never served).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PrivateKey {
    /// `settings.json`: origin, public key, verifier key, key file.
    Settings,
    /// `trust.json`: the issuers whose receipts the log accepts.
    Trust,
    /// `checkpoints/<size>`: the checkpoint published at this size.
    Checkpoint(u64),
    /// `dedup/<first>-<end>`: the dedup run of leaves `[first, end)`.
    DedupRun {
        /// First leaf.
        first: u64,
        /// One past the last leaf.
        end: u64,
    },
    /// `index`: the dedup index of early versions (removed when seen).
    LegacyIndex,
    /// Any other file in a listed directory (damaged or foreign; removed
    /// by the writer). The name is one path element, never `.` or `..`.
    Other(PrivateDir, String),
}

impl PrivateKey {
    /// The keys of the names listed in `dir`, in name order; names that
    /// are no key of `dir` are passed over.
    pub fn all_in(dir: PrivateDir, mut names: Vec<String>) -> Vec<PrivateKey> {
        names.sort();
        names
            .iter()
            .filter_map(|n| PrivateKey::in_dir(dir, n))
            .collect()
    }

    /// The key of the name `name` listed in `dir`.
    pub fn in_dir(dir: PrivateDir, name: &str) -> Option<PrivateKey> {
        if !crate::io::is_plain_name(std::ffi::OsStr::new(name)) {
            return None;
        }
        let parsed = match dir {
            PrivateDir::Checkpoints => parse_decimal(name, 0, u64::MAX).map(PrivateKey::Checkpoint),
            PrivateDir::Dedup => name.split_once('-').and_then(|(a, b)| {
                let (first, end) = (
                    parse_decimal(a, 0, u64::MAX)?,
                    parse_decimal(b, 1, u64::MAX)?,
                );
                (first < end).then_some(PrivateKey::DedupRun { first, end })
            }),
        };
        Some(parsed.unwrap_or_else(|| PrivateKey::Other(dir, name.to_string())))
    }

    /// The path under `.rcpt/`.
    pub fn path(&self) -> String {
        match self {
            PrivateKey::Settings => "settings.json".to_string(),
            PrivateKey::Trust => "trust.json".to_string(),
            PrivateKey::Checkpoint(size) => format!("checkpoints/{size}"),
            PrivateKey::DedupRun { first, end } => format!("dedup/{first}-{end}"),
            PrivateKey::LegacyIndex => "index".to_string(),
            PrivateKey::Other(dir, name) => format!("{}/{name}", dir.path()),
        }
    }
}

impl fmt::Display for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, ".rcpt/{}", self.path())
    }
}

/// `index` as tlog-tiles path elements: 1234067 is `x001/x234/067`.
pub fn encode_index(index: u64) -> String {
    let mut groups = Vec::new();
    let mut n = index;
    loop {
        groups.push(n % 1000);
        n /= 1000;
        if n == 0 {
            break;
        }
    }
    let mut out = String::new();
    for (i, g) in groups.iter().rev().enumerate() {
        if i + 1 < groups.len() {
            out.push_str(&format!("x{g:03}/"));
        } else {
            out.push_str(&format!("{g:03}"));
        }
    }
    out
}

/// The directory of the tiles of index group `group` (indexes
/// `1000 * group ..`): `""` for group 0, else every element of
/// `encode_index(group)` `x`-prefixed (`x001/x234`).
pub fn group_dir(group: u64) -> String {
    if group == 0 {
        return String::new();
    }
    encode_index(group)
        .split('/')
        .map(|e| {
            if e.starts_with('x') {
                e.to_string()
            } else {
                format!("x{e}")
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The index of canonical path elements, or `None`.
fn decode_index(text: &str) -> Option<u64> {
    let groups: Vec<&str> = text.split('/').collect();
    let (last, init) = groups.split_last()?;
    if groups.len() > MAX_INDEX_GROUPS {
        return None;
    }
    let mut value: u64 = 0;
    for (i, g) in init.iter().enumerate() {
        let d = three_digits(g.strip_prefix('x')?)?;
        if i == 0 && d == 0 {
            return None; // `x000/...` is not the canonical spelling
        }
        value = value.checked_mul(1000)?.checked_add(d)?;
    }
    value.checked_mul(1000)?.checked_add(three_digits(last)?)
}

/// Exactly three ASCII digits.
fn three_digits(s: &str) -> Option<u64> {
    (s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// A canonical decimal (no sign, no leading zero) within `lo..=hi`.
fn parse_decimal(s: &str, lo: u64, hi: u64) -> Option<u64> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    let v: u64 = if canonical {
        s.parse().ok()?
    } else {
        return None;
    };
    (lo..=hi).contains(&v).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_paths_round_trip() {
        for path in [
            "checkpoint",
            "tile/0/000",
            "tile/0/005.p/1",
            "tile/63/999.p/255",
            "tile/entries/x001/x234/067",
            "tile/entries/x001/000.p/44",
            "tile/1/x018/x446/x744/x073/x709/x551/615",
        ] {
            let key = PublicKey::from_path(path).unwrap_or_else(|| panic!("{path}"));
            assert_eq!(key.path(), path);
        }
        let key = PublicKey::from_path("tile/1/x018/x446/x744/x073/x709/x551/615").unwrap();
        assert!(matches!(key, PublicKey::Tile(t) if t.index() == u64::MAX));
        assert_eq!(encode_index(1_234_067), "x001/x234/067");
    }

    #[test]
    fn every_other_spelling_is_refused() {
        for path in [
            "",
            "/checkpoint",
            "checkpoint/",
            "./checkpoint",
            "tile/0/../0/000",
            "tile/0/000/",
            "/tile/0/000",
            "tile//0/000",
            "tile/0//000",
            "tile/00/000",
            "tile/64/000",
            "tile/-1/000",
            "tile/+1/000",
            "tile/0/00",
            "tile/0/0000",
            "tile/0/x000/001",
            "tile/0/001/x002",
            "tile/0/x1/001",
            "tile/0/x001",
            "tile/0/%30%30%30",
            "tile/0/000.p/0",
            "tile/0/000.p/256",
            "tile/0/000.p/01",
            "tile/0/000.p/",
            "tile/0/000.p/5/",
            "tile/0/000.q/5",
            "tile/entries/000.p/1.p/1",
            "tile/entries",
            "tile/entries/",
            "tile/1/x018/x446/x744/x073/x709/x551/616",
            "tile/0/x001/x018/x446/x744/x073/x709/x551/615",
            ".rcpt/settings.json",
            "tile/0/000\0",
            "tile/0/０００",
        ] {
            assert_eq!(PublicKey::from_path(path), None, "{path:?}");
        }
    }

    #[test]
    fn widths_follow_the_item_count() {
        assert_eq!(Width::of(0, 0), None);
        assert_eq!(Width::of(0, 1), Width::partial(1));
        assert_eq!(Width::of(0, 256), Some(Width::Full));
        assert_eq!(Width::of(1, 256), None);
        assert_eq!(Width::of(1, 300), Width::partial(44));
        assert_eq!(Width::of(u64::MAX, u64::MAX), None);
        assert!(TileKey::hashes(64, 0, Width::Full).is_none());
    }

    #[test]
    fn private_names_are_single_elements() {
        let d = PrivateDir::Dedup;
        assert_eq!(
            PrivateKey::in_dir(d, "0-20"),
            Some(PrivateKey::DedupRun { first: 0, end: 20 })
        );
        assert_eq!(
            PrivateKey::in_dir(d, "20-20"),
            Some(PrivateKey::Other(d, "20-20".into()))
        );
        assert_eq!(
            PrivateKey::in_dir(PrivateDir::Checkpoints, "007"),
            Some(PrivateKey::Other(PrivateDir::Checkpoints, "007".into()))
        );
        for bad in ["", ".", "..", "a/b"] {
            assert_eq!(PrivateKey::in_dir(d, bad), None);
        }
        assert_eq!(PrivateKey::Checkpoint(5).to_string(), ".rcpt/checkpoints/5");
    }
}
