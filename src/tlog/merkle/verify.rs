//! Checking RFC 9162 inclusion and consistency proofs (sections 2.1.3.2
//! and 2.1.4.2), with the edge cases of transparency-dev/merkle.

use super::prove::{consistency_plan, inclusion_plan};
use super::{Hash, empty_root, node_hash};
use crate::limits::MAX_PROOF_HASHES;
use subtle::ConstantTimeEq;

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

/// Constant-time equality of two tree hashes.
pub(super) fn hashes_equal(a: &Hash, b: &Hash) -> bool {
    a.ct_eq(b).into()
}

/// Refuse a proof over the hash limit before any work.
pub(super) fn check_proof_len(proof: &[Hash]) -> Result<(), ProofError> {
    if proof.len() > MAX_PROOF_HASHES {
        return Err(ProofError::TooLong {
            len: proof.len(),
            max: MAX_PROOF_HASHES,
        });
    }
    Ok(())
}

/// Shift `fn_` and `sn` right together until `fn_` is odd or zero
/// (RFC 9162 "right-shift fn and sn equally until either LSB(fn) is set or
/// fn is 0").
pub(super) fn shift_to_odd(fn_: &mut u64, sn: &mut u64) {
    if *fn_ == 0 {
        return;
    }
    let shift = fn_.trailing_zeros();
    *fn_ >>= shift;
    *sn >>= shift;
}

/// RFC 9162 section 2.1.3.2: verify an inclusion proof.
///
/// The proof must have exactly the length `index` and `size` imply; then the
/// RFC algorithm runs: `fn = leaf_index`, `sn = tree_size - 1`, and each
/// path element is hashed on the left when `LSB(fn)` is set or `fn == sn`.
pub fn verify_inclusion(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    check_proof_len(proof)?;
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let expected = inclusion_plan(index, size).len();
    if proof.len() != expected {
        return Err(ProofError::WrongLength {
            expected,
            got: proof.len(),
        });
    }
    let (mut fn_, mut sn) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            shift_to_odd(&mut fn_, &mut sn);
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    if sn != 0 || !hashes_equal(&r, root) {
        return Err(ProofError::RootMismatch { index, size });
    }
    Ok(())
}

/// The edge cases of a consistency proof that end before the RFC algorithm:
/// `Some(result)` when decided, `None` when the algorithm must run.
pub(super) fn consistency_edges(
    m: u64,
    n: u64,
    proof: &[Hash],
    root_m: &Hash,
    root_n: &Hash,
) -> Option<Result<(), ProofError>> {
    if m > n {
        return Some(Err(ProofError::SizeOrder { from: m, to: n }));
    }
    if m == n || m == 0 {
        if !proof.is_empty() {
            let got = proof.len();
            return Some(Err(ProofError::EmptyProofRequired {
                from: m,
                to: n,
                got,
            }));
        }
        if m == n && !hashes_equal(root_m, root_n) {
            return Some(Err(ProofError::RootsDiffer { size: m }));
        }
        // The empty tree has one root, MTH({}) = SHA-256().
        if m == 0 && !hashes_equal(root_m, &empty_root()) {
            return Some(Err(ProofError::OldRootMismatch { size: 0 }));
        }
        return Some(Ok(()));
    }
    let expected = consistency_plan(m, n).len();
    if proof.len() != expected {
        return Some(Err(ProofError::WrongLength {
            expected,
            got: proof.len(),
        }));
    }
    None
}

/// RFC 9162 section 2.1.4.2: verify a consistency proof.
///
/// Edge rules first (transparency-dev/merkle): `m > n` is refused; `m == n`
/// needs an empty proof and equal roots; `m == 0` needs an empty proof and
/// `root_m` = MTH({}) (transparency-dev refuses size 0 outright); else
/// the proof must have exactly the length the sizes imply. Then the RFC
/// algorithm: prepend `first_hash` when `first` is a power of two, set
/// `fn = first - 1`, `sn = second - 1`, and fold to both roots.
pub fn verify_consistency(
    m: u64,
    n: u64,
    proof: &[Hash],
    root_m: &Hash,
    root_n: &Hash,
) -> Result<(), ProofError> {
    check_proof_len(proof)?;
    if let Some(decided) = consistency_edges(m, n, proof, root_m, root_n) {
        return decided;
    }
    // Here 0 < m < n and proof.len() is the implied, non-zero length.
    let mut path = proof.iter();
    let (mut fn_, mut sn) = (m - 1, n - 1);
    let first = if m.is_power_of_two() {
        Some(root_m)
    } else {
        path.next()
    };
    let Some(&seed) = first else {
        return Err(ProofError::WrongLength {
            expected: 1,
            got: 0,
        });
    };
    if fn_ & 1 == 1 {
        let shift = fn_.trailing_ones();
        fn_ >>= shift;
        sn >>= shift;
    }
    let (mut fr, mut sr) = (seed, seed);
    for c in path {
        if sn == 0 {
            return Err(ProofError::WrongLength {
                expected: 0,
                got: proof.len(),
            });
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            shift_to_odd(&mut fn_, &mut sn);
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    if !hashes_equal(&fr, root_m) {
        return Err(ProofError::OldRootMismatch { size: m });
    }
    if sn != 0 || !hashes_equal(&sr, root_n) {
        return Err(ProofError::NewRootMismatch { size: n });
    }
    Ok(())
}
