//! prove: inclusion and consistency proofs (and a tree's root) read from
//! O(log n) stored complete-subtree hashes through a [`HashReader`], folded,
//! never rehashing the log (RFC 9162 2.1.3.1, 2.1.4.1).

use super::{Hash, empty_root, node_hash};
use crate::limits::MAX_TREE_SIZE;

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

/// A leaf range `[start, end)` whose MTH is one proof element.
///
/// Every range the RFC 6962 recursion produces starts at a multiple of the
/// largest power of two not above its length, so it splits into complete
/// subtrees by the binary digits of its length ([`range_nodes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Range {
    pub(super) start: u64,
    pub(super) end: u64,
}

/// The largest power of two strictly below `len`, for `len >= 2`.
fn split_point(len: u64) -> u64 {
    let bits = 63u32.saturating_sub(len.saturating_sub(1).leading_zeros());
    1u64 << bits
}

/// The ranges of PATH(index, D[0:size]) (RFC 6962 section 2.1.1), in proof
/// order (bottom-up). Needs `index < size`; at most 64 ranges.
pub(super) fn inclusion_plan(index: u64, size: u64) -> Vec<Range> {
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
pub(super) fn consistency_plan(m: u64, n: u64) -> Vec<Range> {
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
pub(super) fn fold_right(hashes: &[Hash]) -> Option<Hash> {
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
    let hashes = read_exactly(reader, &ids)?;
    let mut out = Vec::with_capacity(ranges.len());
    let mut at = 0usize;
    for nodes in &per_range {
        let part = hashes.get(at..at + nodes.len()).unwrap_or_default();
        at += nodes.len();
        out.push(fold_right(part).unwrap_or_else(empty_root));
    }
    Ok(out)
}

/// The hashes of `ids` from one `read_hashes` call; a reader that answers
/// with fewer (or more) than asked is refused.
pub(super) fn read_exactly<R: HashReader>(
    reader: &R,
    ids: &[NodeId],
) -> Result<Vec<Hash>, ProveError<R::Error>> {
    let hashes = reader.read_hashes(ids).map_err(ProveError::Read)?;
    if hashes.len() != ids.len() {
        return Err(ProveError::ShortRead {
            expected: ids.len(),
            got: hashes.len(),
        });
    }
    Ok(hashes)
}

/// Refuse sizes above `limits::MAX_TREE_SIZE` before any read.
pub(super) fn check_size<E>(size: u64) -> Result<(), ProveError<E>> {
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
