//! merkle: RFC 6962 hashing and RFC 9162 proofs. No I/O, no signatures.
//!
//! Everything here is a pure function of hashes and sizes. Proof generation
//! never rehashes the log: it reads O(log n) stored hashes of complete
//! subtrees through a [`HashReader`] (tiles on disk, memory, ...) and folds
//! them. Verification follows RFC 9162 sections 2.1.3.2 and 2.1.4.2 with the
//! edge-case rules of transparency-dev/merkle: a proof's length is exactly
//! what the sizes imply, equal sizes need an empty proof and equal roots, a
//! proof from the empty tree is empty. Sizes and indices are `u64`; no input
//! makes any arithmetic here overflow or panic.

mod frontier;
mod verify;

pub use frontier::*;
pub use verify::*;

use crate::constants::{LEAF_HASH_PREFIX, NODE_HASH_PREFIX};
use crate::limits::MAX_TREE_SIZE;
use sha2::{Digest, Sha256};

/// A SHA-256 tree hash.
pub type Hash = [u8; 32];

/// SHA-256(0x00 || entry) (RFC 6962 section 2.1).
pub fn leaf_hash(entry: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([LEAF_HASH_PREFIX]);
    h.update(entry);
    h.finalize().into()
}

/// SHA-256(0x01 || left || right) (RFC 6962 section 2.1).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    // One 65-byte input hashes faster than three updates (fewer copies
    // through the block buffer).
    let mut input = [0u8; 65];
    let (prefix, rest) = input.split_at_mut(1);
    let (l, r) = rest.split_at_mut(32);
    prefix.fill(NODE_HASH_PREFIX);
    l.copy_from_slice(left);
    r.copy_from_slice(right);
    Sha256::digest(input).into()
}

/// MTH({}) = SHA-256() (RFC 6962 section 2.1).
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// A tree hash from a byte slice: "hashes must be 32 bytes".
pub fn hash_from_slice(bytes: &[u8]) -> Result<Hash, ProofError> {
    Hash::try_from(bytes).map_err(|_| ProofError::HashLength { got: bytes.len() })
}

/// MTH over a list of leaf hashes (RFC 6962 section 2.1), bottom-up.
///
/// Pairing neighbours level by level and carrying an odd last node up
/// unchanged gives the same tree as the RFC's split at the largest power of
/// two smaller than n.
pub fn root(leaves: &[Hash]) -> Hash {
    if leaves.is_empty() {
        return empty_root();
    }
    let mut level: Vec<Hash> = leaves.to_vec();
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| match pair {
                [l, r] => node_hash(l, r),
                [single] => *single,
                // chunks(2) yields slices of length 1 or 2 only.
                _ => empty_root(),
            })
            .collect();
    }
    level.first().copied().unwrap_or_else(empty_root)
}

/// A complete subtree: the `2^level` leaves starting at `index << level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    /// Height above the leaves (0 = a leaf hash).
    pub level: u8,
    /// Position among the nodes of that level.
    pub index: u64,
}

impl NodeId {
    /// The first leaf this subtree covers, or `None` beyond `u64`.
    pub fn first_leaf(self) -> Option<u64> {
        self.index
            .checked_shl(u32::from(self.level))
            .filter(|f| f >> self.level == self.index)
    }

    /// One past the last leaf this subtree covers, or `None` beyond `u64`.
    pub fn end_leaf(self) -> Option<u64> {
        let width = 1u64.checked_shl(u32::from(self.level))?;
        self.first_leaf()?.checked_add(width)
    }
}

/// Source of stored complete-subtree hashes (tiles on disk, memory, ...).
pub trait HashReader {
    /// Error of the underlying store.
    type Error;
    /// The hashes of `ids`, in the same order.
    fn read_hashes(&self, ids: &[NodeId]) -> Result<Vec<Hash>, Self::Error>;
}

/// Why proof generation stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProveError<E> {
    /// The leaf index is not in the tree.
    #[error(
        "leaf index {index} is not in a tree of {size} leaves; ask for an index below the size"
    )]
    IndexOutOfRange {
        /// The requested leaf.
        index: u64,
        /// The tree size.
        size: u64,
    },
    /// A consistency proof was asked from a larger tree to a smaller one.
    #[error("no consistency proof from size {from} to smaller size {to}; swap the sizes")]
    SizeOrder {
        /// The older size.
        from: u64,
        /// The newer size.
        to: u64,
    },
    /// The tree is larger than this crate handles.
    #[error("tree size {size} exceeds the limit {max}")]
    TreeTooLarge {
        /// The requested size.
        size: u64,
        /// `limits::MAX_TREE_SIZE`.
        max: u64,
    },
    /// The hash store answered with the wrong number of hashes.
    #[error("hash store returned {got} hashes for {expected} requested; the store is broken")]
    ShortRead {
        /// Hashes requested.
        expected: usize,
        /// Hashes returned.
        got: usize,
    },
    /// The hash store failed.
    #[error("reading stored hashes: {0}")]
    Read(E),
}

/// Why a proof was refused (RFC 9162 sections 2.1.3.2 and 2.1.4.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProofError {
    /// A hash is not 32 bytes long.
    #[error("hash is {got} bytes long, SHA-256 hashes are 32")]
    HashLength {
        /// Its length in bytes.
        got: usize,
    },
    /// The proof has more hashes than any tree this crate accepts needs.
    #[error("proof has {len} hashes, more than the limit {max}")]
    TooLong {
        /// Hashes in the proof.
        len: usize,
        /// `limits::MAX_PROOF_HASHES`.
        max: usize,
    },
    /// The leaf index is not below the tree size.
    #[error("leaf index {index} is not in a tree of {size} leaves")]
    IndexOutOfRange {
        /// The claimed leaf index.
        index: u64,
        /// The claimed tree size.
        size: u64,
    },
    /// The older size is larger than the newer one.
    #[error("consistency from size {from} to smaller size {to}")]
    SizeOrder {
        /// The older size.
        from: u64,
        /// The newer size.
        to: u64,
    },
    /// The proof's length is not the one the sizes imply.
    #[error("proof has {got} hashes, the sizes imply exactly {expected}")]
    WrongLength {
        /// Hashes the sizes imply.
        expected: usize,
        /// Hashes in the proof.
        got: usize,
    },
    /// Equal sizes or an empty older tree need an empty proof.
    #[error("consistency from size {from} to {to} needs an empty proof, got {got} hashes")]
    EmptyProofRequired {
        /// The older size.
        from: u64,
        /// The newer size.
        to: u64,
        /// Hashes in the proof.
        got: usize,
    },
    /// Two trees of one size have different roots.
    #[error("two roots claimed for tree size {size} differ")]
    RootsDiffer {
        /// The common size.
        size: u64,
    },
    /// The inclusion proof leads to another root.
    #[error("inclusion proof of leaf {index} does not reach the root of size {size}")]
    RootMismatch {
        /// The leaf index.
        index: u64,
        /// The tree size.
        size: u64,
    },
    /// The consistency proof does not reach the older root.
    #[error("consistency proof does not reach the root of the older size {size}")]
    OldRootMismatch {
        /// The older size.
        size: u64,
    },
    /// The consistency proof does not reach the newer root.
    #[error("consistency proof does not reach the root of the newer size {size}")]
    NewRootMismatch {
        /// The newer size.
        size: u64,
    },
}

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

/// A leaf range `[start, end)` whose MTH is one proof element.
///
/// Every range the RFC 6962 recursion produces starts at a multiple of the
/// largest power of two not above its length, so it splits into complete
/// subtrees by the binary digits of its length ([`range_nodes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    start: u64,
    end: u64,
}

/// The largest power of two strictly below `len`, for `len >= 2`.
fn split_point(len: u64) -> u64 {
    let bits = 63u32.saturating_sub(len.saturating_sub(1).leading_zeros());
    1u64 << bits
}

/// The ranges of PATH(index, D[0:size]) (RFC 6962 section 2.1.1), in proof
/// order (bottom-up). Needs `index < size`; at most 64 ranges.
fn inclusion_plan(index: u64, size: u64) -> Vec<Range> {
    let (mut lo, mut hi) = (0u64, size);
    // One range per level: at most 64.
    let mut plan = Vec::with_capacity(64);
    // Each step shrinks [lo, hi) to one side of the split; lo <= index < hi.
    while hi - lo > 1 {
        let k = split_point(hi - lo);
        let left = index - lo < k;
        descend(&mut plan, (&mut lo, &mut hi), k, left);
    }
    plan.reverse();
    plan
}

/// One step down the RFC 6962 recursion over `[lo, hi)` split at `k`:
/// into `D[lo:lo+k]` (`left`; the proof then holds MTH of the right part)
/// or into `D[lo+k:hi]` (the proof holds MTH of the left part).
fn descend(plan: &mut Vec<Range>, (lo, hi): (&mut u64, &mut u64), k: u64, left: bool) {
    if left {
        plan.push(Range {
            start: *lo + k,
            end: *hi,
        });
        *hi = *lo + k;
    } else {
        plan.push(Range {
            start: *lo,
            end: *lo + k,
        });
        *lo += k;
    }
}

/// The ranges of PROOF(m, D[0:n]) = SUBPROOF(m, D[0:n], true) (RFC 6962
/// section 2.1.2), in proof order. Empty when `m == 0` or `m >= n`.
fn consistency_plan(m: u64, n: u64) -> Vec<Range> {
    // One range per level, and one more: at most 65.
    let mut plan = Vec::with_capacity(65);
    if m == 0 || m >= n {
        return plan;
    }
    let (mut lo, mut hi, mut m, mut whole) = (0u64, n, m, true);
    // Invariant: 0 < m <= hi - lo.
    loop {
        if m == hi - lo {
            if !whole {
                plan.push(Range { start: lo, end: hi });
            }
            break;
        }
        let k = split_point(hi - lo);
        let left = m <= k;
        descend(&mut plan, (&mut lo, &mut hi), k, left);
        if !left {
            m -= k;
            whole = false;
        }
    }
    plan.reverse();
    plan
}

/// The complete subtrees covering `[start, end)`, left to right: one per
/// binary digit of the length, largest first. Needs `start` aligned to the
/// first (largest) of them, as every RFC 6962 range is.
pub fn range_nodes(start: u64, end: u64) -> Vec<NodeId> {
    let mut nodes = Vec::new();
    let mut at = start;
    let mut rest = end.saturating_sub(start);
    while rest > 0 {
        let level = 63u32.saturating_sub(rest.leading_zeros());
        nodes.push(NodeId {
            level: level as u8,
            index: at >> level,
        });
        at = at.saturating_add(1u64 << level);
        rest -= 1u64 << level;
    }
    nodes
}

/// Fold the hashes of a range's complete subtrees (left to right) into the
/// range's MTH: the smaller right part joins first.
fn fold_right(hashes: &[Hash]) -> Option<Hash> {
    let (last, rest) = hashes.split_last()?;
    Some(
        rest.iter()
            .rev()
            .fold(*last, |acc, left| node_hash(left, &acc)),
    )
}

/// Read every range's subtrees in ONE `read_hashes` call and fold each range.
fn read_ranges<R: HashReader>(
    ranges: &[Range],
    reader: &R,
) -> Result<Vec<Hash>, ProveError<R::Error>> {
    let per_range: Vec<Vec<NodeId>> = ranges.iter().map(|r| range_nodes(r.start, r.end)).collect();
    let ids: Vec<NodeId> = per_range.iter().flatten().copied().collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let hashes = reader.read_hashes(&ids).map_err(ProveError::Read)?;
    if hashes.len() != ids.len() {
        return Err(ProveError::ShortRead {
            expected: ids.len(),
            got: hashes.len(),
        });
    }
    let mut out = Vec::with_capacity(ranges.len());
    let mut at = 0usize;
    for nodes in &per_range {
        let part = hashes.get(at..at + nodes.len()).unwrap_or_default();
        at += nodes.len();
        out.push(fold_right(part).unwrap_or_else(empty_root));
    }
    Ok(out)
}

/// Refuse sizes above `limits::MAX_TREE_SIZE` before any read.
fn check_size<E>(size: u64) -> Result<(), ProveError<E>> {
    if size > MAX_TREE_SIZE {
        return Err(ProveError::TreeTooLarge {
            size,
            max: MAX_TREE_SIZE,
        });
    }
    Ok(())
}

/// Root of the tree of `size` leaves from stored hashes (O(log n) reads).
pub fn tree_root<R: HashReader>(size: u64, reader: &R) -> Result<Hash, ProveError<R::Error>> {
    check_size(size)?;
    if size == 0 {
        return Ok(empty_root());
    }
    let roots = read_ranges(
        &[Range {
            start: 0,
            end: size,
        }],
        reader,
    )?;
    Ok(roots.first().copied().unwrap_or_else(empty_root))
}

/// Inclusion proof of leaf `index` in the tree of `size` leaves (RFC 6962 2.1.1).
///
/// "PATH(m, D[n]) = PATH(m, D[0:k]) : MTH(D[k:n]) for m < k; and
/// PATH(m, D[n]) = PATH(m - k, D[k:n]) : MTH(D[0:k]) for m >= k", where k is
/// the largest power of two smaller than n. Every MTH is folded from stored
/// complete subtrees, all read in one call.
pub fn prove_inclusion<R: HashReader>(
    index: u64,
    size: u64,
    reader: &R,
) -> Result<Vec<Hash>, ProveError<R::Error>> {
    check_size(size)?;
    if index >= size {
        return Err(ProveError::IndexOutOfRange { index, size });
    }
    read_ranges(&inclusion_plan(index, size), reader)
}

/// Consistency proof from size `m` to size `n` (RFC 6962 2.1.2).
///
/// "PROOF(m, D[n]) = SUBPROOF(m, D[n], true)"; empty when `m == n` or
/// `m == 0` (transparency-dev/merkle convention: any tree is consistent with
/// the empty tree).
pub fn prove_consistency<R: HashReader>(
    m: u64,
    n: u64,
    reader: &R,
) -> Result<Vec<Hash>, ProveError<R::Error>> {
    check_size(n)?;
    if m > n {
        return Err(ProveError::SizeOrder { from: m, to: n });
    }
    read_ranges(&consistency_plan(m, n), reader)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn leaves(n: u64) -> Vec<Hash> {
        (0..n).map(|i| leaf_hash(&i.to_be_bytes())).collect()
    }

    #[test]
    fn frontier_matches_root_and_reports_completed_nodes() {
        let ls = leaves(70);
        let mut f = Frontier::new();
        let mut seen = Vec::new();
        for (i, l) in ls.iter().enumerate() {
            f.push(*l, |id, h| seen.push((id, *h))).unwrap();
            assert_eq!(f.root(), root(&ls[..=i]));
        }
        let tree = MemoryTree::new(&ls);
        for (id, h) in &seen {
            assert_eq!(tree.read_hashes(&[*id]).unwrap(), vec![*h]);
        }
        // 70 leaves complete 70 + 35 + 17 + 8 + 4 + 2 + 1 subtrees.
        assert_eq!(seen.len(), 137);
        assert_eq!(Frontier::from_reader(70, &tree).unwrap(), f);
    }

    #[test]
    fn generated_proofs_verify() {
        let ls = leaves(37);
        let tree = MemoryTree::new(&ls);
        for n in 1..=37u64 {
            let rn = tree_root(n, &tree).unwrap();
            assert_eq!(rn, root(&ls[..n as usize]));
            for i in 0..n {
                let p = prove_inclusion(i, n, &tree).unwrap();
                verify_inclusion(&ls[i as usize], i, n, &p, &rn).unwrap();
            }
            for m in 0..=n {
                let p = prove_consistency(m, n, &tree).unwrap();
                let rm = root(&ls[..m as usize]);
                verify_consistency(m, n, &p, &rm, &rn).unwrap();
            }
        }
    }

    /// spec/merkle.md: the proof binds the size only through the root.
    #[test]
    fn inclusion_proof_alone_does_not_bind_the_size() {
        let tree = MemoryTree::new(&leaves(8));
        let root8 = tree_root(8, &tree).unwrap();
        let p = prove_inclusion(5, 8, &tree).unwrap();
        let leaf = tree.read_hashes(&[NodeId { level: 0, index: 5 }]).unwrap()[0];
        verify_inclusion(&leaf, 5, 7, &p, &root8).unwrap();
    }

    #[test]
    fn huge_sizes_do_not_panic() {
        let h = [7u8; 32];
        for (i, n) in [(0, u64::MAX), (u64::MAX - 1, u64::MAX), (1 << 63, u64::MAX)] {
            assert!(verify_inclusion(&h, i, n, &[h; 64], &h).is_err());
            assert!(verify_consistency(i, n, &[h; 3], &h, &h).is_err());
        }
    }
}
