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
mod hash;
mod prove;
mod verify;

pub use frontier::{Frontier, FrontierError, MemoryTree, MissingNode};
pub use hash::{Hash, empty_root, hash_from_slice, leaf_hash, node_hash, root};
pub use prove::{
    HashReader, NodeId, ProveError, prove_consistency, prove_inclusion, range_nodes, tree_root,
};
pub use verify::{ProofError, verify_consistency, verify_inclusion};

#[cfg(test)]
mod tests {
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
