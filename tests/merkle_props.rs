//! Properties of `rcpt::tlog::merkle` against a direct transcription of the
//! recursive RFC 6962 section 2.1 definitions (MTH, PATH, PROOF, SUBPROOF):
//! every 0 <= m < n <= 300 and every index < n, generated proofs equal the
//! RFC's and verify; mutated proofs are refused; arbitrary u64 sizes,
//! indices and proof lengths never panic the verifiers.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use proptest::prelude::*;
use rcpt::tlog::merkle::{
    Frontier, Hash, MemoryTree, ProofError, leaf_hash, node_hash, prove_consistency,
    prove_inclusion, tree_root, verify_consistency, verify_inclusion,
};
use std::collections::HashMap;

const N: usize = 300;

/// The RFC 6962 definitions over leaf hashes D, MTH memoised by range.
struct Rfc<'a> {
    d: &'a [Hash],
    memo: HashMap<(usize, usize), Hash>,
}

/// "k is the largest power of two smaller than n".
fn k_of(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

impl Rfc<'_> {
    /// MTH(D[lo:hi]) for hi - lo >= 1.
    fn mth(&mut self, lo: usize, hi: usize) -> Hash {
        if hi - lo == 1 {
            return self.d[lo];
        }
        if let Some(h) = self.memo.get(&(lo, hi)) {
            return *h;
        }
        let k = k_of(hi - lo);
        let h = node_hash(&self.mth(lo, lo + k), &self.mth(lo + k, hi));
        self.memo.insert((lo, hi), h);
        h
    }

    /// PATH(m, D[lo:hi]).
    fn path(&mut self, m: usize, lo: usize, hi: usize) -> Vec<Hash> {
        if hi - lo == 1 {
            return Vec::new();
        }
        let k = k_of(hi - lo);
        if m < k {
            let mut p = self.path(m, lo, lo + k);
            p.push(self.mth(lo + k, hi));
            p
        } else {
            let mut p = self.path(m - k, lo + k, hi);
            p.push(self.mth(lo, lo + k));
            p
        }
    }

    /// SUBPROOF(m, D[lo:hi], b).
    fn subproof(&mut self, m: usize, lo: usize, hi: usize, b: bool) -> Vec<Hash> {
        if m == hi - lo {
            return if b {
                Vec::new()
            } else {
                vec![self.mth(lo, hi)]
            };
        }
        let k = k_of(hi - lo);
        if m <= k {
            let mut p = self.subproof(m, lo, lo + k, b);
            p.push(self.mth(lo + k, hi));
            p
        } else {
            let mut p = self.subproof(m - k, lo + k, hi, false);
            p.push(self.mth(lo, lo + k));
            p
        }
    }
}

fn leaves(n: usize) -> Vec<Hash> {
    (0..n as u64).map(|i| leaf_hash(&i.to_le_bytes())).collect()
}

#[test]
fn every_proof_up_to_300_equals_the_rfc_and_verifies() {
    let d = leaves(N);
    let tree = MemoryTree::new(&d);
    let mut rfc = Rfc {
        d: &d,
        memo: HashMap::new(),
    };
    let mut frontier = Frontier::new();
    let (mut inclusions, mut consistencies) = (0, 0);
    for n in 1..=N {
        frontier.push(d[n - 1], |_, _| {}).unwrap();
        let root_n = rfc.mth(0, n);
        assert_eq!(tree_root(n as u64, &tree).unwrap(), root_n);
        assert_eq!(frontier.root(), root_n);
        for (i, leaf) in d.iter().enumerate().take(n) {
            let proof = prove_inclusion(i as u64, n as u64, &tree).unwrap();
            assert_eq!(proof, rfc.path(i, 0, n), "PATH({i}, D[{n}])");
            verify_inclusion(leaf, i as u64, n as u64, &proof, &root_n).unwrap();
            inclusions += 1;
        }
        for m in 1..n {
            let proof = prove_consistency(m as u64, n as u64, &tree).unwrap();
            assert_eq!(proof, rfc.subproof(m, 0, n, true), "PROOF({m}, D[{n}])");
            let root_m = rfc.mth(0, m);
            verify_consistency(m as u64, n as u64, &proof, &root_m, &root_n).unwrap();
            consistencies += 1;
        }
        // From the empty tree: the empty proof.
        assert!(prove_consistency(0, n as u64, &tree).unwrap().is_empty());
    }
    assert_eq!(
        (inclusions, consistencies),
        (N * (N + 1) / 2, N * (N - 1) / 2)
    );
}

/// One way of breaking a valid proof.
#[derive(Clone, Debug)]
enum Mutation {
    FlipBit { hash: usize, bit: usize },
    Drop { at: usize },
    Insert { at: usize, byte: u8 },
    FlipClaim { bit: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0..256usize).prop_map(|(hash, bit)| Mutation::FlipBit { hash, bit }),
        any::<usize>().prop_map(|at| Mutation::Drop { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert { at, byte }),
        (0..256usize).prop_map(|bit| Mutation::FlipClaim { bit }),
    ]
}

/// Apply to a proof, or to the claimed leaf/old root (`claim`).
fn mutate(proof: &mut Vec<Hash>, claim: &mut Hash, m: &Mutation) -> bool {
    match *m {
        Mutation::FlipBit { hash, bit } if !proof.is_empty() => {
            let i = hash % proof.len();
            proof[i][bit / 8] ^= 1 << (bit % 8);
        }
        Mutation::Drop { at } if !proof.is_empty() => {
            proof.remove(at % proof.len());
        }
        Mutation::Insert { at, byte } => proof.insert(at % (proof.len() + 1), [byte; 32]),
        Mutation::FlipClaim { bit } => claim[bit / 8] ^= 1 << (bit % 8),
        _ => return false,
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn mutated_inclusion_proofs_are_refused(n in 1..200usize, i in any::<usize>(), mu in mutation()) {
        let d = leaves(n);
        let tree = MemoryTree::new(&d);
        let i = i % n;
        let root = tree_root(n as u64, &tree).unwrap();
        let mut proof = prove_inclusion(i as u64, n as u64, &tree).unwrap();
        let mut leaf = d[i];
        if mutate(&mut proof, &mut leaf, &mu) {
            prop_assert!(verify_inclusion(&leaf, i as u64, n as u64, &proof, &root).is_err());
        }
    }

    #[test]
    fn other_index_is_refused(n in 2..200usize, i in any::<usize>(), j in any::<usize>()) {
        let d = leaves(n);
        let tree = MemoryTree::new(&d);
        let (i, j) = (i % n, j % n);
        prop_assume!(i != j);
        let root = tree_root(n as u64, &tree).unwrap();
        let proof = prove_inclusion(i as u64, n as u64, &tree).unwrap();
        prop_assert!(verify_inclusion(&d[i], j as u64, n as u64, &proof, &root).is_err());
    }

    #[test]
    fn mutated_consistency_proofs_are_refused(n in 2..200usize, m in any::<usize>(), mu in mutation()) {
        let d = leaves(n);
        let tree = MemoryTree::new(&d);
        let m = 1 + m % (n - 1);
        let root_n = tree_root(n as u64, &tree).unwrap();
        let mut root_m = tree_root(m as u64, &tree).unwrap();
        let mut proof = prove_consistency(m as u64, n as u64, &tree).unwrap();
        if mutate(&mut proof, &mut root_m, &mu) {
            prop_assert!(verify_consistency(m as u64, n as u64, &proof, &root_m, &root_n).is_err());
        }
    }

    /// Arbitrary u64 sizes, indices and proof lengths: an answer, never a panic.
    #[test]
    fn verifiers_never_panic(a in any::<u64>(), b in any::<u64>(), len in 0..80usize, fill in any::<u8>()) {
        let proof = vec![[fill; 32]; len];
        let h = [fill ^ 1; 32];
        let r = verify_inclusion(&h, a, b, &proof, &h);
        if len > 63 {
            let too_long = matches!(r, Err(ProofError::TooLong { .. }));
            prop_assert!(too_long);
        }
        let _ = verify_inclusion(&h, a % b.max(1), b, &proof, &h);
        let _ = verify_consistency(a, b, &proof, &h, &h);
        let _ = verify_consistency(a.min(b), a.max(b), &proof, &h, &h);
    }
}
