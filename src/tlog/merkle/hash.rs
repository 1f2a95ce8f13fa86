//! hash: RFC 6962 leaf and node hashing, and the root of a list of leaves.

use super::ProofError;
use crate::constants::{LEAF_HASH_PREFIX, NODE_HASH_PREFIX};
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
