//! walk: the one consistency walk over a log's tiles: prove that a signed
//! tree extends one already checked, extend a tree edge with the entries
//! of the signed tree, and prove that what was walked is the signed tree
//! (RFC 6962 hashing and RFC 9162 proofs from [`crate::tlog::merkle`],
//! tiles read through [`TileReader`]).
//!
//! - [`prove_extends`]: the signed tree `new` extends the tree `old`
//!   already checked: a smaller one is a rollback, the same size with
//!   another root a fork, a larger one needs a consistency proof computed
//!   from the tiles that verifies between the two roots.
//! - [`ConsistencyWalk`]: from a tree edge (the empty tree, or the edge read from
//!   the tiles at an index), entry bundle by entry bundle, each entry's
//!   leaf hash pushed (the completed subtrees reported, for a caller that
//!   rebuilds tiles); then the tree walked must be a prefix of the signed
//!   tree ([`ConsistencyWalk::prove_prefix`]: its root at the signed size, else a
//!   consistency proof from the tiles) or the signed tree itself
//!   ([`ConsistencyWalk::finish`]).
//! - [`prove_leaf`]: a leaf at its index under a root, by an inclusion
//!   proof from the tiles.
//!
//! Nothing read from the tiles is trusted: every hash read takes part in
//! a proof that ends at a signed root, so a source that serves other
//! hashes makes the proof fail, never pass. Work and memory follow what
//! was verified, never a size a peer claims: the edge is at most 63
//! hashes (`limits::MAX_TREE_SIZE`), one entry bundle is held at a time
//! (at most `limits::MAX_ENTRY_BUNDLE_BYTES` read), a proof reads
//! O(log n) hashes (at most `limits::MAX_PROOF_HASHES`), a walk never
//! goes past the signed size, and a claimed size only bounds loops that
//! stop at the first tile the source does not serve.
//!
//! Used by `rcpt log mirror` (`net::client::mirror`), the monitor
//! (`monitor::round`), `rcpt verify --mirror` (`verify::mirror`) and
//! `rcpt log check` (`log::check`); spec/log.md "The consistency walk".

use crate::storage::tiles::TileReader;
use crate::tlog::merkle::{self, Frontier, FrontierError, Hash, NodeId, ProofError, ProveError};
use crate::tlog::tiles::{TILE_WIDTH, TileError};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// A tree known by its size and root hash: a verified checkpoint's, or
/// the one a caller already checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tree {
    /// Number of entries.
    pub size: u64,
    /// Its root hash.
    pub root: Hash,
}

/// Why a walk, or a proof from the tiles, failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalkError {
    /// The signed tree is smaller than the tree already checked.
    #[error("the tree has {new} entries, fewer than the {old} already checked: a rollback")]
    Rollback {
        /// The size already checked.
        old: u64,
        /// The signed size.
        new: u64,
    },
    /// The same size as the tree already checked, another root.
    #[error("another root at the size {size} already checked: a fork")]
    Fork {
        /// The common size.
        size: u64,
    },
    /// The tiles' consistency proof does not verify between the two roots.
    #[error("the tiles prove no consistency from size {old} to {new}")]
    Inconsistent {
        /// The size already checked.
        old: u64,
        /// The signed size.
        new: u64,
        /// The proof the tiles gave (evidence).
        proof: Vec<Hash>,
        /// Why it does not verify.
        #[source]
        source: ProofError,
    },
    /// A hash a proof or the tree edge needs could not be read.
    #[error("the tiles of the tree of size {size}")]
    Tiles {
        /// The tree size read at.
        size: u64,
        /// The cause.
        #[source]
        source: ProveError<TileError>,
    },
    /// An entry bundle could not be read or decoded.
    #[error("entry bundle {bundle} of the tree of size {size}")]
    Bundle {
        /// The bundle index.
        bundle: u64,
        /// The tree size read at.
        size: u64,
        /// The cause.
        #[source]
        source: TileError,
    },
    /// The entries give another root than the signed tree's.
    #[error(
        "the entries give the root {} at size {size}, the signed tree has {}",
        STANDARD.encode(computed), STANDARD.encode(signed)
    )]
    RootMismatch {
        /// The signed size.
        size: u64,
        /// The root of the entries.
        computed: Hash,
        /// The signed root.
        signed: Hash,
    },
    /// The tree of the entries walked is not a prefix of the signed tree.
    #[error(
        "the tree of the entries up to index {end} is not a prefix of the signed tree of size {size}"
    )]
    NotPrefix {
        /// Entries walked.
        end: u64,
        /// The signed size.
        size: u64,
        /// Why the tiles' proof does not verify.
        #[source]
        source: ProofError,
    },
    /// The walk ended before or after the signed size.
    #[error("the walk holds {end} entries, the signed tree {size}")]
    WrongSize {
        /// Entries walked.
        end: u64,
        /// The signed size.
        size: u64,
    },
    /// The leaf is not the one the tree holds at its index.
    #[error("the tree of size {size} does not hold the leaf at index {index}")]
    NotIncluded {
        /// The leaf index.
        index: u64,
        /// The tree size.
        size: u64,
        /// Why the tiles' inclusion proof does not verify.
        #[source]
        source: ProofError,
    },
    /// The tree edge is full (`limits::MAX_TREE_SIZE`).
    #[error(transparent)]
    Full(#[from] FrontierError),
}

/// True when `new` is larger than `old`; false when it is the same tree.
/// A smaller `new` is a rollback, the same size with another root a fork.
pub fn grows(old: Tree, new: Tree) -> Result<bool, WalkError> {
    if new.size < old.size {
        return Err(WalkError::Rollback {
            old: old.size,
            new: new.size,
        });
    }
    if new.size == old.size {
        if new.root != old.root {
            return Err(WalkError::Fork { size: old.size });
        }
        return Ok(false);
    }
    Ok(true)
}

/// Prove from `reader`'s tiles (of a tree at least `new.size` large) that
/// the signed tree `new` extends the tree `old` (see [`grows`]). A tree of
/// size 0 must have the empty root (RFC 9162).
pub fn prove_extends(reader: &TileReader, old: Tree, new: Tree) -> Result<(), WalkError> {
    if !grows(old, new)? {
        return Ok(());
    }
    let proof = merkle::prove_consistency(old.size, new.size, reader).map_err(|source| {
        WalkError::Tiles {
            size: new.size,
            source,
        }
    })?;
    merkle::verify_consistency(old.size, new.size, &proof, &old.root, &new.root).map_err(|source| {
        WalkError::Inconsistent {
            old: old.size,
            new: new.size,
            proof,
            source,
        }
    })
}

/// Prove from `reader`'s tiles that the tree `tree` holds `leaf` at
/// `index` (an inclusion proof read from the tiles, verified at its root).
pub fn prove_leaf(
    reader: &TileReader,
    tree: Tree,
    index: u64,
    leaf: &Hash,
) -> Result<(), WalkError> {
    let proof =
        merkle::prove_inclusion(index, tree.size, reader).map_err(|source| WalkError::Tiles {
            size: tree.size,
            source,
        })?;
    merkle::verify_inclusion(leaf, index, tree.size, &proof, &tree.root).map_err(|source| {
        WalkError::NotIncluded {
            index,
            size: tree.size,
            source,
        }
    })
}

/// One entry bundle of the signed tree: its first index and its entries,
/// as many as the signed tree holds in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    /// Index of its first entry (a multiple of 256).
    pub first: u64,
    /// Its entries.
    pub entries: Vec<Vec<u8>>,
}

impl Bundle {
    /// One past the index of its last entry.
    pub fn end(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    /// Its entries from `index` on (none when `index` is past them).
    pub fn from(&self, index: u64) -> &[Vec<u8>] {
        let skip = usize::try_from(index.saturating_sub(self.first)).unwrap_or(usize::MAX);
        self.entries.get(skip..).unwrap_or_default()
    }
}

/// A walk over the signed tree `signed`: a tree edge from a start size,
/// extended entry by entry up to the signed size, never past it.
#[derive(Debug)]
pub struct ConsistencyWalk {
    reader: TileReader,
    signed: Tree,
    edge: Frontier,
}

impl ConsistencyWalk {
    /// A walk from the empty tree; `reader` reads the signed tree's tiles.
    pub fn new(reader: TileReader, signed: Tree) -> ConsistencyWalk {
        ConsistencyWalk {
            reader,
            signed,
            edge: Frontier::new(),
        }
    }

    /// A walk from `start` entries: the edge is read from the tiles (not
    /// trusted: the end of the walk proves it with the rest).
    pub fn from_tiles(
        reader: TileReader,
        signed: Tree,
        start: u64,
    ) -> Result<ConsistencyWalk, WalkError> {
        if start > signed.size {
            return Err(WalkError::WrongSize {
                end: start,
                size: signed.size,
            });
        }
        let edge = Frontier::from_reader(start, &reader).map_err(|source| WalkError::Tiles {
            size: signed.size,
            source,
        })?;
        Ok(ConsistencyWalk {
            reader,
            signed,
            edge,
        })
    }

    /// Entries walked so far.
    pub fn size(&self) -> u64 {
        self.edge.size()
    }

    /// The root of the entries walked so far.
    pub fn root(&self) -> Hash {
        self.edge.root()
    }

    /// The tree edge of the entries walked so far.
    pub fn edge(&self) -> &Frontier {
        &self.edge
    }

    /// The signed tree.
    pub fn signed(&self) -> Tree {
        self.signed
    }

    /// The entry bundle holding the next entry (the partial one the signed
    /// tree names, or the full one when the partial is gone), or `None`
    /// once the walk is at the signed size.
    pub fn next_bundle(&self) -> Result<Option<Bundle>, WalkError> {
        let next = self.size();
        if next >= self.signed.size {
            return Ok(None);
        }
        let n = next / TILE_WIDTH;
        let entries = self
            .reader
            .entry_bundle(n)
            .map_err(|source| WalkError::Bundle {
                bundle: n,
                size: self.signed.size,
                source,
            })?;
        Ok(Some(Bundle {
            first: n * TILE_WIDTH,
            entries,
        }))
    }

    /// Push one leaf hash; `completed` gets every subtree it completes.
    pub fn push(
        &mut self,
        leaf: Hash,
        completed: impl FnMut(NodeId, &Hash),
    ) -> Result<(), WalkError> {
        if self.size() >= self.signed.size {
            return Err(WalkError::WrongSize {
                end: self.size().saturating_add(1),
                size: self.signed.size,
            });
        }
        Ok(self.edge.push(leaf, completed)?)
    }

    /// Push the leaf hashes of `bundle`'s entries from the walk's size on.
    pub fn push_bundle(
        &mut self,
        bundle: &Bundle,
        mut completed: impl FnMut(NodeId, &Hash),
    ) -> Result<(), WalkError> {
        if bundle.first > self.size() {
            return Err(WalkError::WrongSize {
                end: self.size(),
                size: self.signed.size,
            });
        }
        for entry in bundle.from(self.size()) {
            self.push(merkle::leaf_hash(entry), &mut completed)?;
        }
        Ok(())
    }

    /// The tree walked so far is a prefix of the signed tree: its root at
    /// the signed size, else a consistency proof from the tiles from its
    /// size to the signed size verifies between the two roots.
    pub fn prove_prefix(&self) -> Result<(), WalkError> {
        let (end, size, root) = (self.size(), self.signed.size, self.root());
        if end == size {
            return self.finish().map(|_| ());
        }
        let proof = merkle::prove_consistency(end, size, &self.reader)
            .map_err(|source| WalkError::Tiles { size, source })?;
        merkle::verify_consistency(end, size, &proof, &root, &self.signed.root)
            .map_err(|source| WalkError::NotPrefix { end, size, source })
    }

    /// The walk is the signed tree: all of its entries, and its root.
    pub fn finish(&self) -> Result<Hash, WalkError> {
        let (end, size, root) = (self.size(), self.signed.size, self.root());
        if end != size {
            return Err(WalkError::WrongSize { end, size });
        }
        if root != self.signed.root {
            return Err(WalkError::RootMismatch {
                size,
                computed: root,
                signed: self.signed.root,
            });
        }
        Ok(root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{PublicKey, PublicRead, StoreError, TileKey, Versioned, Width};
    use crate::tlog::merkle::{HashReader, MemoryTree};
    use crate::tlog::tiles::{TILE_HEIGHT, encode_entry_bundle, encode_hash_tile};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    /// The public objects of a log, in memory.
    #[derive(Debug, Default)]
    struct Objects(Mutex<HashMap<String, Vec<u8>>>);

    impl PublicRead for Objects {
        fn describe(&self) -> String {
            "memory".into()
        }
        fn read(&self, key: &PublicKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
            let got = self.0.lock().unwrap().get(&key.path()).cloned();
            match got {
                Some(b) if b.len() > max => Err(StoreError::TooLarge {
                    what: key.path(),
                    max,
                }),
                other => Ok(other),
            }
        }
        fn read_checkpoint(&self, _max: usize) -> Result<Option<Versioned>, StoreError> {
            Ok(None)
        }
    }

    impl Objects {
        fn put(&self, key: TileKey, bytes: Vec<u8>) {
            self.0.lock().unwrap().insert(key.path(), bytes);
        }
        fn edit(&self, path: &str, f: impl FnOnce(&mut Vec<u8>)) {
            f(self.0.lock().unwrap().get_mut(path).unwrap());
        }
    }

    fn entries(n: u64, tag: &str) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("entry {i}{tag}").into_bytes())
            .collect()
    }

    /// The tiles and entry bundles of the tree of `entries`, as a log at
    /// that size stores them, and the tree.
    fn log_of(entries: &[Vec<u8>]) -> (Arc<Objects>, Tree) {
        let n = entries.len() as u64;
        let leaves: Vec<Hash> = entries.iter().map(|e| merkle::leaf_hash(e)).collect();
        let tree = MemoryTree::new(&leaves);
        let objects = Objects::default();
        for t in 0..n.div_ceil(TILE_WIDTH) {
            let width = Width::of(t, n).unwrap();
            let first = (t * TILE_WIDTH) as usize;
            let bundle = entries.get(first..first + width.items()).unwrap();
            let bytes = encode_entry_bundle(bundle.iter().map(Vec::as_slice)).unwrap();
            objects.put(TileKey::entries(t, width), bytes);
        }
        let mut level = 0u8;
        while let Some(count) = n
            .checked_shr(u32::from(level * TILE_HEIGHT))
            .filter(|&c| c > 0)
        {
            for t in 0..count.div_ceil(TILE_WIDTH) {
                let width = Width::of(t, count).unwrap();
                let ids: Vec<NodeId> = (0..width.items() as u64)
                    .map(|k| NodeId {
                        level: level * TILE_HEIGHT,
                        index: t * TILE_WIDTH + k,
                    })
                    .collect();
                let hashes = tree.read_hashes(&ids).unwrap();
                objects.put(
                    TileKey::hashes(level, t, width).unwrap(),
                    encode_hash_tile(&hashes),
                );
            }
            level += 1;
        }
        let root = merkle::tree_root(n, &tree).unwrap();
        (Arc::new(objects), Tree { size: n, root })
    }

    fn reader(objects: &Arc<Objects>, size: u64) -> TileReader {
        TileReader::over(Arc::clone(objects) as Arc<dyn PublicRead>, size, None)
    }

    fn root_of(entries: &[Vec<u8>]) -> Tree {
        log_of(entries).1
    }

    #[test]
    fn a_signed_tree_extends_the_checked_one_or_the_tiles_say_why_not() {
        let all = entries(700, "");
        let (objects, signed) = log_of(&all);
        let r = reader(&objects, signed.size);
        for m in [0, 1, 255, 256, 300, 512, 699, 700] {
            let old = root_of(&all[..m as usize]);
            prove_extends(&r, old, signed).unwrap();
        }
        let old = root_of(&all[..300]);
        assert!(matches!(
            prove_extends(&r, signed, old),
            Err(WalkError::Rollback { old: 700, new: 300 })
        ));
        let fork = root_of(&entries(700, "x"));
        assert!(matches!(
            prove_extends(&r, fork, signed),
            Err(WalkError::Fork { size: 700 })
        ));
        let other = root_of(&entries(300, "x"));
        match prove_extends(&r, other, signed) {
            Err(WalkError::Inconsistent {
                old, new, proof, ..
            }) => {
                assert_eq!((old, new), (300, 700));
                assert!(!proof.is_empty());
            }
            other => panic!("{other:?}"),
        }
        // A size-0 tree has one root.
        let bad_empty = Tree {
            size: 0,
            root: [1; 32],
        };
        assert!(matches!(
            prove_extends(&r, bad_empty, signed),
            Err(WalkError::Inconsistent { .. })
        ));
        // Tiles that lie make the proof fail, never pass.
        objects.edit("tile/0/001", |b| b[100] ^= 1);
        assert!(matches!(
            prove_extends(&r, old, signed),
            Err(WalkError::Inconsistent { .. })
        ));
        // A tile the source does not serve: a read error, not evidence.
        objects.0.lock().unwrap().remove("tile/0/001");
        assert!(matches!(
            prove_extends(&r, old, signed),
            Err(WalkError::Tiles { .. })
        ));
    }

    #[test]
    fn a_walk_from_any_start_ends_at_the_signed_root() {
        let all = entries(600, "");
        let (objects, signed) = log_of(&all);
        for start in [0, 1, 256, 300, 599, 600] {
            let mut walk =
                ConsistencyWalk::from_tiles(reader(&objects, 600), signed, start).unwrap();
            let mut completed = 0u64;
            while let Some(bundle) = walk.next_bundle().unwrap() {
                assert_eq!(bundle.first % TILE_WIDTH, 0);
                walk.push_bundle(&bundle, |_, _| completed += 1).unwrap();
                assert_eq!(walk.size(), bundle.end());
                walk.prove_prefix().unwrap();
            }
            assert_eq!(walk.finish().unwrap(), signed.root, "{start}");
            // A leaf and its parents: 2n - popcount-ish, at least one per entry.
            assert!(completed >= 600 - start, "{start}");
            assert!(walk.push([0; 32], |_, _| {}).is_err());
        }
    }

    #[test]
    fn entries_that_are_not_the_signed_trees_are_found_at_their_bundle() {
        let all = entries(600, "");
        let (objects, signed) = log_of(&all);
        // Entry 300 replaced in the stored bundle: the bundle of 256..512
        // no longer proves a prefix of the signed tree.
        let mut other = all.clone();
        other[300] = b"another entry".to_vec();
        let forged = encode_entry_bundle(other[256..512].iter().map(Vec::as_slice)).unwrap();
        objects.put(TileKey::entries(1, Width::Full), forged);
        let mut walk = ConsistencyWalk::from_tiles(reader(&objects, 600), signed, 0).unwrap();
        let first = walk.next_bundle().unwrap().unwrap();
        walk.push_bundle(&first, |_, _| {}).unwrap();
        walk.prove_prefix().unwrap();
        let second = walk.next_bundle().unwrap().unwrap();
        walk.push_bundle(&second, |_, _| {}).unwrap();
        assert!(matches!(
            walk.prove_prefix(),
            Err(WalkError::NotPrefix {
                end: 512,
                size: 600,
                ..
            })
        ));
        // Walked to the end, the root differs.
        let third = walk.next_bundle().unwrap().unwrap();
        walk.push_bundle(&third, |_, _| {}).unwrap();
        assert!(matches!(
            walk.finish(),
            Err(WalkError::RootMismatch { size: 600, .. })
        ));
        assert!(matches!(
            walk.prove_prefix(),
            Err(WalkError::RootMismatch { .. })
        ));
    }

    #[test]
    fn a_claimed_size_past_the_tiles_stops_at_the_first_missing_one() {
        let all = entries(300, "");
        let (objects, _) = log_of(&all);
        let claimed = Tree {
            size: 1 << 40,
            root: [7; 32],
        };
        // The first bundle is stored and walked; the claimed size wants
        // bundle 1 full, which is not there: the walk stops with a read
        // error, and so do the proof and an edge read at 256 (its tile at
        // the claimed size is the full tile/1/000).
        let mut walk = ConsistencyWalk::new(reader(&objects, claimed.size), claimed);
        let first = walk.next_bundle().unwrap().unwrap();
        assert_eq!(first.entries.len(), 256);
        walk.push_bundle(&first, |_, _| {}).unwrap();
        assert!(matches!(
            walk.next_bundle(),
            Err(WalkError::Bundle { bundle: 1, .. })
        ));
        assert!(matches!(walk.prove_prefix(), Err(WalkError::Tiles { .. })));
        assert!(matches!(
            ConsistencyWalk::from_tiles(reader(&objects, claimed.size), claimed, 256),
            Err(WalkError::Tiles { .. })
        ));
        assert!(matches!(
            ConsistencyWalk::from_tiles(
                reader(&objects, 10),
                Tree {
                    size: 10,
                    root: [0; 32]
                },
                11
            ),
            Err(WalkError::WrongSize { end: 11, size: 10 })
        ));
    }

    #[test]
    fn a_leaf_is_proved_under_a_root_and_lying_tiles_cannot_prove_another() {
        let all = entries(600, "");
        let (objects, signed) = log_of(&all);
        let r = reader(&objects, signed.size);
        for (size, index) in [(600, 0), (600, 599), (300, 299), (300, 256), (1, 0)] {
            let tree = root_of(&all[..size]);
            let leaf = merkle::leaf_hash(&all[index as usize]);
            prove_leaf(&r, tree, index, &leaf).unwrap();
            let wrong = merkle::leaf_hash(b"another entry");
            assert!(matches!(
                prove_leaf(&r, tree, index, &wrong),
                Err(WalkError::NotIncluded { .. })
            ));
        }
        // The level-0 tile made to hold another leaf at 300: its proof no
        // longer reaches the root.
        let tree = root_of(&all[..301]);
        let wrong = merkle::leaf_hash(b"another entry");
        objects.edit("tile/0/001", |b| {
            b[44 * 32..45 * 32].copy_from_slice(&wrong)
        });
        assert!(matches!(
            prove_leaf(&r, tree, 300, &wrong),
            Err(WalkError::NotIncluded { .. })
        ));
    }

    #[test]
    fn a_bundle_gives_its_entries_from_an_index() {
        let b = Bundle {
            first: 256,
            entries: entries(3, ""),
        };
        assert_eq!(b.end(), 259);
        assert_eq!(b.from(0).len(), 3);
        assert_eq!(b.from(257).len(), 2);
        assert!(b.from(259).is_empty());
        assert!(b.from(u64::MAX).is_empty());
    }
}
