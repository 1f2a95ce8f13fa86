//! merkle: RFC 6962 hashing and RFC 9162 proofs. No I/O, no signatures.
//!
//! STUB: interface fixed, body to be written (helper C).

/// A SHA-256 tree hash.
pub type Hash = [u8; 32];

/// SHA-256(0x00 || entry) (RFC 6962 section 2.1).
pub fn leaf_hash(entry: &[u8]) -> Hash {
    let _ = entry;
    todo!()
}

/// SHA-256(0x01 || left || right) (RFC 6962 section 2.1).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let _ = (left, right);
    todo!()
}

/// MTH({}) = SHA-256() (RFC 6962 section 2.1).
pub fn empty_root() -> Hash {
    todo!()
}

/// MTH over a list of leaf hashes (RFC 6962 section 2.1), bottom-up.
pub fn root(leaves: &[Hash]) -> Hash {
    let _ = leaves;
    todo!()
}

/// A complete subtree: the `2^level` leaves starting at `index << level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId {
    /// Height above the leaves (0 = a leaf hash).
    pub level: u8,
    /// Position among the nodes of that level.
    pub index: u64,
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
pub enum ProveError<E> {
    /// The request names leaves or sizes the tree does not have.
    #[error("{0}")]
    OutOfRange(String),
    /// The hash store failed.
    #[error("reading stored hashes: {0}")]
    Read(E),
}

/// Why a proof was refused (RFC 9162 sections 2.1.3.2 and 2.1.4.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// Placeholder until the core lands.
    #[error("not implemented")]
    Unimplemented,
}

/// Root of the tree of `size` leaves from stored hashes (O(log n) reads).
pub fn tree_root<R: HashReader>(size: u64, reader: &R) -> Result<Hash, ProveError<R::Error>> {
    let _ = (size, reader);
    todo!()
}

/// Inclusion proof of leaf `index` in the tree of `size` leaves (RFC 6962 2.1.1).
pub fn prove_inclusion<R: HashReader>(
    index: u64,
    size: u64,
    reader: &R,
) -> Result<Vec<Hash>, ProveError<R::Error>> {
    let _ = (index, size, reader);
    todo!()
}

/// Consistency proof from size `m` to size `n` (RFC 6962 2.1.2).
pub fn prove_consistency<R: HashReader>(
    m: u64,
    n: u64,
    reader: &R,
) -> Result<Vec<Hash>, ProveError<R::Error>> {
    let _ = (m, n, reader);
    todo!()
}

/// RFC 9162 section 2.1.3.2: verify an inclusion proof.
pub fn verify_inclusion(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    let _ = (leaf, index, size, proof, root);
    Err(ProofError::Unimplemented)
}

/// RFC 9162 section 2.1.4.2: verify a consistency proof.
pub fn verify_consistency(
    m: u64,
    n: u64,
    proof: &[Hash],
    root_m: &Hash,
    root_n: &Hash,
) -> Result<(), ProofError> {
    let _ = (m, n, proof, root_m, root_n);
    Err(ProofError::Unimplemented)
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

    /// The frontier of the tree of `size` leaves, from stored hashes.
    pub fn from_reader<R: HashReader>(
        size: u64,
        reader: &R,
    ) -> Result<Frontier, ProveError<R::Error>> {
        let _ = (size, reader);
        todo!()
    }

    /// Number of leaves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Append one leaf hash; `completed` is called for every complete
    /// subtree it finishes (the leaf itself at level 0 first, then upward).
    pub fn push(&mut self, leaf: Hash, completed: impl FnMut(NodeId, &Hash)) {
        let _ = (leaf, completed);
        todo!()
    }

    /// MTH of the current tree.
    pub fn root(&self) -> Hash {
        todo!()
    }
}
