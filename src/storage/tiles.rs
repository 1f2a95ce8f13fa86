//! tiles: the one place stored tiles are read and decoded:
//! [`read_hash_tile`], [`read_entry_bundle`] and [`TileReader`], all over a
//! [`PublicRead`] store, in the encodings of [`crate::tlog::tiles`]. No
//! durability policy (that is `log`).

use crate::limits::MAX_ENTRY_BUNDLE_BYTES;
use crate::storage::posix::PosixStore;
use crate::storage::{Family, PublicKey, PublicRead, StoreError, TileKey, Width};
use crate::tlog::merkle::{self, Hash, HashReader, NodeId};
use crate::tlog::tiles::{
    MAX_HASH_TILE_BYTES, TILE_HEIGHT, TILE_WIDTH, TileError, decode_entry_bundle, decode_hash_tile,
};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A stored tile of at most `max` bytes (`Ok(None)`: it does not exist).
fn fetch(store: &dyn PublicRead, key: &TileKey, max: usize) -> Result<Option<Vec<u8>>, TileError> {
    match store.read(&PublicKey::Tile(*key), max) {
        Ok(bytes) => Ok(bytes),
        Err(StoreError::TooLarge { max, .. }) => Err(match key.family() {
            Family::Entries => TileError::BundleTooLarge {
                path: key.path(),
                max,
            },
            Family::Hashes(_) => TileError::TileTooLarge {
                path: key.path(),
                max,
            },
        }),
        Err(source) => Err(TileError::Read {
            path: key.path(),
            source: Box::new(source),
        }),
    }
}

/// The limit of a stored tile's size by family.
fn limit_of(key: &TileKey) -> usize {
    match key.family() {
        Family::Entries => MAX_ENTRY_BUNDLE_BYTES,
        Family::Hashes(_) => MAX_HASH_TILE_BYTES,
    }
}

/// `key`'s bytes, or (when a partial tile is gone: a log MAY delete
/// partial tiles once the full tile exists) the full tile's; returns the
/// key actually read.
fn fetch_or_full(store: &dyn PublicRead, key: &TileKey) -> Result<(Vec<u8>, TileKey), TileError> {
    if let Some(bytes) = fetch(store, key, limit_of(key))? {
        return Ok((bytes, *key));
    }
    let full = TileKey::new(key.family(), key.index(), Width::Full);
    if let Some(full) = full.filter(|f| f != key)
        && let Some(bytes) = fetch(store, &full, limit_of(&full))?
    {
        return Ok((bytes, full));
    }
    Err(TileError::Missing { path: key.path() })
}

/// The hashes of the stored hash tile `key`: exactly as many as its width.
pub fn read_hash_tile(store: &dyn PublicRead, key: &TileKey) -> Result<Vec<Hash>, TileError> {
    let bytes = fetch(store, key, MAX_HASH_TILE_BYTES)?
        .ok_or_else(|| TileError::Missing { path: key.path() })?;
    decode_hash_tile(&bytes, key.width().items(), &key.path())
}

/// The entries of the bytes of entry bundle `key`, decoded: exactly as
/// many as its width.
fn decode_bundle_of<'b>(bytes: &'b [u8], key: &TileKey) -> Result<Vec<&'b [u8]>, TileError> {
    let entries = decode_entry_bundle(bytes)?;
    if entries.len() != key.width().items() {
        return Err(TileError::BundleCount {
            path: key.path(),
            expected: key.width().items(),
            got: entries.len(),
        });
    }
    Ok(entries)
}

/// The entries of the stored entry bundle `key`: exactly as many as its width.
pub fn read_entry_bundle(store: &dyn PublicRead, key: &TileKey) -> Result<Vec<Vec<u8>>, TileError> {
    let bytes = fetch(store, key, MAX_ENTRY_BUNDLE_BYTES)?
        .ok_or_else(|| TileError::Missing { path: key.path() })?;
    let entries = decode_bundle_of(&bytes, key)?;
    Ok(entries.into_iter().map(<[u8]>::to_vec).collect())
}

/// Reads stored hashes and entries from a log's tiles at a given size.
///
/// For a tree of `size` leaves, tile N at tile level L is full when the tree
/// has at least `256·(N+1)` complete level-8L nodes; otherwise it is read
/// as the partial tile `.p/W`, W being the count of those nodes in it. When
/// that partial file is gone (a writer may remove partials once the full
/// tile exists) the full tile is read and its first W hashes used: in an
/// append-only log they are the same hashes. Nothing beyond `size` is read.
#[derive(Clone, Debug)]
pub struct TileReader {
    store: Arc<dyn PublicRead>,
    size: u64,
    cache: Option<Arc<TileCache>>,
}

/// Every node of one full hash tile: `levels[k]` holds the `256 >> k`
/// subtree hashes of height `k` above the tile's stored hashes (k = 0..=8).
#[derive(Debug)]
struct TileNodes {
    levels: Vec<Vec<Hash>>,
}

impl TileNodes {
    /// Expand a tile's hashes into every complete subtree they hold (255
    /// node hashes for a full tile; a partial tile of W hashes has
    /// `W >> k` nodes of height k).
    fn new(hashes: Vec<Hash>) -> TileNodes {
        let mut levels = vec![hashes];
        while let Some(below) = levels.last().filter(|l| l.len() > 1) {
            let up = below
                .chunks_exact(2)
                .map(|p| match p {
                    [l, r] => merkle::node_hash(l, r),
                    // chunks_exact(2) yields pairs only.
                    _ => merkle::empty_root(),
                })
                .collect();
            levels.push(up);
        }
        TileNodes { levels }
    }
}

/// Hash tiles already read and expanded, shared by the readers of one log,
/// keyed by level, index and width: a full tile, and a partial tile of a
/// given width, never change, so a proof that meets one again costs no
/// file read and no hashing. Holds at most `limits::MAX_CACHED_TILES`
/// tiles (16 KiB each); when full it drops its level-0 tiles first (the
/// upper tiles are the ones every proof meets).
#[derive(Debug, Default)]
pub struct TileCache {
    tiles: Mutex<HashMap<(u8, u64, usize), Arc<TileNodes>>>,
}

impl TileCache {
    /// An empty cache.
    pub fn new() -> TileCache {
        TileCache::default()
    }

    fn get(&self, key: (u8, u64, usize)) -> Option<Arc<TileNodes>> {
        self.tiles.lock().ok()?.get(&key).cloned()
    }

    fn insert(&self, key: (u8, u64, usize), nodes: Arc<TileNodes>) {
        let Ok(mut tiles) = self.tiles.lock() else {
            return; // a poisoned cache is simply not used
        };
        if tiles.len() >= crate::limits::MAX_CACHED_TILES {
            tiles.retain(|k, _| k.0 > 0);
            if tiles.len() >= crate::limits::MAX_CACHED_TILES {
                tiles.clear();
            }
        }
        tiles.insert(key, nodes);
    }
}

/// The key of tile `n` of `family` when `items` items of its level exist.
fn tile_at(family: crate::storage::Family, n: u64, items: u64) -> Option<TileKey> {
    TileKey::new(family, n, Width::of(n, items)?)
}

impl TileReader {
    /// A reader of the tree of `size` leaves in the log directory `root`.
    pub fn new(root: &Path, size: u64) -> TileReader {
        TileReader::over(Arc::new(PosixStore::new(root)), size, None)
    }

    /// A reader that keeps the full tiles it expands in `cache` (shared
    /// with other readers of the same directory).
    pub fn with_cache(root: &Path, size: u64, cache: Arc<TileCache>) -> TileReader {
        TileReader::over(Arc::new(PosixStore::new(root)), size, Some(cache))
    }

    /// A reader of the tree of `size` leaves stored in `store`.
    pub fn over(
        store: Arc<dyn PublicRead>,
        size: u64,
        cache: Option<Arc<TileCache>>,
    ) -> TileReader {
        TileReader { store, size, cache }
    }

    /// The tree size this reader serves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The hashes of tile `n` at tile level `level` that this size holds.
    fn hash_tile(&self, level: u8, n: u64) -> Result<Vec<Hash>, TileError> {
        let shift = u32::from(level) * u32::from(TILE_HEIGHT);
        let items = self.size.checked_shr(shift).unwrap_or(0);
        let key = tile_at(Family::Hashes(level), n, items).ok_or(TileError::NotInTree {
            level: level.saturating_mul(TILE_HEIGHT),
            index: n.saturating_mul(TILE_WIDTH),
            size: self.size,
        })?;
        let (bytes, read) = fetch_or_full(&*self.store, &key)?;
        let mut hashes = decode_hash_tile(&bytes, read.width().items(), &read.path())?;
        hashes.truncate(key.width().items());
        Ok(hashes)
    }

    /// Entry `index` of the log, read from its entry bundle.
    pub fn entry(&self, index: u64) -> Result<Vec<u8>, TileError> {
        let out_of_range = TileError::EntryOutOfRange {
            index,
            size: self.size,
        };
        if index >= self.size {
            return Err(out_of_range);
        }
        // index % 256 < the width <= entries.len(), so get() finds it.
        let at = (index % TILE_WIDTH) as usize;
        self.read_bundle(index / TILE_WIDTH, out_of_range, |entries, _| {
            let entry = entries.get(at).ok_or(TileError::EntryOutOfRange {
                index,
                size: self.size,
            })?;
            Ok(entry.to_vec())
        })
    }

    /// The entries of entry bundle `n` that this size holds (its width's
    /// count, in order), read as [`TileReader::entry`] reads one: the
    /// partial bundle, or the full one when the partial is gone.
    pub fn entry_bundle(&self, n: u64) -> Result<Vec<Vec<u8>>, TileError> {
        let out_of_range = TileError::EntryOutOfRange {
            index: n.saturating_mul(TILE_WIDTH),
            size: self.size,
        };
        self.read_bundle(n, out_of_range, |entries, width| {
            Ok(entries
                .into_iter()
                .take(width)
                .map(<[u8]>::to_vec)
                .collect())
        })
    }

    /// Entry bundle `n` as this size names it (`not_in_tree` when it names
    /// none), read (or the full one when the partial is gone), decoded and
    /// its count checked; `f` gets its entries and the width at this size.
    fn read_bundle<T>(
        &self,
        n: u64,
        not_in_tree: TileError,
        f: impl FnOnce(Vec<&[u8]>, usize) -> Result<T, TileError>,
    ) -> Result<T, TileError> {
        let key = tile_at(Family::Entries, n, self.size).ok_or(not_in_tree)?;
        let (bytes, read) = fetch_or_full(&*self.store, &key)?;
        f(decode_bundle_of(&bytes, &read)?, key.width().items())
    }

    /// The expanded nodes of tile `n` at `level`, as this size holds it,
    /// when this reader has a cache (else `None`).
    fn cached_tile(&self, level: u8, n: u64) -> Result<Option<Arc<TileNodes>>, TileError> {
        let Some(cache) = &self.cache else {
            return Ok(None);
        };
        let shift = u32::from(level) * u32::from(TILE_HEIGHT);
        let items = self.size.checked_shr(shift).unwrap_or(0);
        let width = Width::of(n, items).map_or(0, Width::items);
        let key = (level, n, width);
        if let Some(hit) = cache.get(key) {
            return Ok(Some(hit));
        }
        let nodes = Arc::new(TileNodes::new(self.hash_tile(level, n)?));
        cache.insert(key, Arc::clone(&nodes));
        Ok(Some(nodes))
    }

    /// One node from its tile: the hash of the `2^(h mod 8)` stored level-8L
    /// hashes below it, `cache` holding the tiles already read in this call.
    fn node(
        &self,
        id: NodeId,
        cache: &mut HashMap<(u8, u64), Vec<Hash>>,
    ) -> Result<Hash, TileError> {
        let not_in_tree = TileError::NotInTree {
            level: id.level,
            index: id.index,
            size: self.size,
        };
        match id.end_leaf() {
            Some(end) if end <= self.size => {}
            _ => return Err(not_in_tree),
        }
        let tile_level = id.level / TILE_HEIGHT;
        let sub = u32::from(id.level % TILE_HEIGHT);
        // end_leaf() succeeded, so index << level fits and so does index << sub.
        let first = id.index << sub;
        let n = first / TILE_WIDTH;
        let start = (first % TILE_WIDTH) as usize;
        if let Some(nodes) = self.cached_tile(tile_level, n)? {
            let at = nodes
                .levels
                .get(sub as usize)
                .and_then(|l| l.get(start >> sub));
            return at.copied().ok_or(not_in_tree);
        }
        let tile = match cache.entry((tile_level, n)) {
            Entry::Occupied(hit) => hit.into_mut(),
            Entry::Vacant(slot) => slot.insert(self.hash_tile(tile_level, n)?),
        };
        match tile.get(start..start + (1usize << sub)) {
            Some(below) => Ok(merkle::root(below)),
            None => Err(not_in_tree),
        }
    }
}

impl HashReader for TileReader {
    type Error = TileError;

    /// Each node from its tile, every tile file read at most once per call.
    fn read_hashes(&self, ids: &[NodeId]) -> Result<Vec<Hash>, TileError> {
        let mut cache = HashMap::new();
        ids.iter().map(|id| self.node(*id, &mut cache)).collect()
    }
}
