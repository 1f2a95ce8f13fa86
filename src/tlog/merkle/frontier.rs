//! The frontier a writer extends (the right edge of the tree) and an
//! in-memory tree for tests and tools.

use super::prove::{check_size, fold_right, read_exactly};
use super::{Hash, HashReader, NodeId, ProveError, empty_root, node_hash, range_nodes};
use crate::limits::MAX_TREE_SIZE;

/// Why a leaf could not be appended to a [`Frontier`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrontierError {
    /// The tree already holds `limits::MAX_TREE_SIZE` leaves.
    #[error("tree is full at {size} leaves; start a new log")]
    Full {
        /// The current size.
        size: u64,
    },
}

/// The right edge of a tree: the roots of its maximal complete subtrees, left
/// to right. Appending a leaf completes subtrees, which are reported so a
/// writer can store them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frontier {
    size: u64,
    nodes: Vec<Hash>,
}

impl Frontier {
    /// The frontier of an empty tree.
    pub fn new() -> Frontier {
        Frontier::default()
    }

    /// The frontier of the tree of `size` leaves, from stored hashes: one
    /// read of the complete subtrees covering `[0, size)`.
    pub fn from_reader<R: HashReader>(
        size: u64,
        reader: &R,
    ) -> Result<Frontier, ProveError<R::Error>> {
        check_size(size)?;
        let ids = range_nodes(0, size);
        if ids.is_empty() {
            return Ok(Frontier::new());
        }
        let nodes = read_exactly(reader, &ids)?;
        Ok(Frontier { size, nodes })
    }

    /// Number of leaves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The roots of the maximal complete subtrees, left to right (largest
    /// first), with their ids.
    pub fn nodes(&self) -> Vec<(NodeId, Hash)> {
        range_nodes(0, self.size)
            .into_iter()
            .zip(self.nodes.iter().copied())
            .collect()
    }

    /// Append one leaf hash; `completed` is called for every complete
    /// subtree it finishes (the leaf itself at level 0 first, then upward).
    ///
    /// Refused once the tree holds `limits::MAX_TREE_SIZE` leaves.
    pub fn push(
        &mut self,
        leaf: Hash,
        mut completed: impl FnMut(NodeId, &Hash),
    ) -> Result<(), FrontierError> {
        if self.size >= MAX_TREE_SIZE {
            return Err(FrontierError::Full { size: self.size });
        }
        let mut hash = leaf;
        let mut level = 0u8;
        completed(
            NodeId {
                level,
                index: self.size,
            },
            &hash,
        );
        // Each set low bit of the old size is a left sibling waiting on the edge.
        while (self.size >> level) & 1 == 1 {
            let Some(left) = self.nodes.pop() else { break };
            hash = node_hash(&left, &hash);
            level += 1;
            completed(
                NodeId {
                    level,
                    index: self.size >> level,
                },
                &hash,
            );
        }
        self.nodes.push(hash);
        self.size += 1;
        Ok(())
    }

    /// MTH of the current tree.
    pub fn root(&self) -> Hash {
        fold_right(&self.nodes).unwrap_or_else(empty_root)
    }
}

/// Every complete subtree hash of a tree held in memory: a [`HashReader`]
/// for tests, small logs and building tiles.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryTree {
    /// `levels[h]` holds the level-h complete subtree hashes, left to right.
    levels: Vec<Vec<Hash>>,
}

/// A [`MemoryTree`] was asked for a subtree it does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no complete subtree at level {} index {} in this tree", .0.level, .0.index)]
pub struct MissingNode(pub NodeId);

impl MemoryTree {
    /// The tree over `leaves` (leaf hashes), every complete subtree stored.
    pub fn new(leaves: &[Hash]) -> MemoryTree {
        let mut tree = MemoryTree::default();
        for leaf in leaves {
            tree.push(*leaf);
        }
        tree
    }

    /// Append one leaf hash, storing every subtree it completes.
    pub fn push(&mut self, leaf: Hash) {
        let mut carry = leaf;
        let mut level = 0usize;
        loop {
            if self.levels.len() <= level {
                self.levels.push(Vec::new());
            }
            let Some(row) = self.levels.get_mut(level) else {
                return;
            };
            row.push(carry);
            // A new even-length row means its last two hashes completed a parent.
            match row.as_slice() {
                [.., l, r] if row.len() % 2 == 0 => carry = node_hash(l, r),
                _ => return,
            }
            level += 1;
        }
    }

    /// Number of leaves.
    pub fn size(&self) -> u64 {
        self.levels.first().map_or(0, |row| row.len() as u64)
    }
}

impl HashReader for MemoryTree {
    type Error = MissingNode;
    fn read_hashes(&self, ids: &[NodeId]) -> Result<Vec<Hash>, MissingNode> {
        ids.iter()
            .map(|id| {
                let row = self.levels.get(usize::from(id.level));
                let index = usize::try_from(id.index).ok();
                row.zip(index)
                    .and_then(|(row, i)| row.get(i))
                    .copied()
                    .ok_or(MissingNode(*id))
            })
            .collect()
    }
}
