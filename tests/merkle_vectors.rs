//! External RFC 6962 / RFC 9162 vectors against `rcpt::tlog::merkle`:
//! every transparency-dev/merkle inclusion and consistency file (the harness
//! walks the directories and asserts the count), and the real Argon2020 CT
//! proofs. See tests/vectors/tlog/README.md for their origin.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use rcpt::tlog::merkle::{
    self, Hash, MemoryTree, ProofError, hash_from_slice, leaf_hash, prove_consistency,
    prove_inclusion, verify_consistency, verify_inclusion,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

const TLOG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/tlog");

/// Every `.json` file under `dir`, sorted, recursively.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            assert_eq!(
                path.extension().unwrap(),
                "json",
                "unexpected file {path:?}"
            );
            out.push(path);
        }
    }
    out.sort();
    out
}

fn load(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn bytes(v: &Value) -> Vec<u8> {
    B64.decode(v.as_str().unwrap()).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// A field as a 32-byte hash, refused like any verifier input would be.
fn hash(v: &Value) -> Result<Hash, ProofError> {
    hash_from_slice(&bytes(v))
}

/// A proof; Go writes an empty (nil) proof as `null`.
fn hashes(v: &Value) -> Result<Vec<Hash>, ProofError> {
    if v.is_null() {
        return Ok(Vec::new());
    }
    v.as_array().unwrap().iter().map(hash).collect()
}

/// The 8 leaves of transparency-dev/merkle `testonly/constants.go`.
fn td_leaves() -> Vec<Hash> {
    [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
    .iter()
    .map(|h| {
        let raw: Vec<u8> = (0..h.len() / 2)
            .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        leaf_hash(&raw)
    })
    .collect()
}

fn run_inclusion(v: &Value) -> Result<(), ProofError> {
    let (leaf, root, proof) = (
        hash(&v["leafHash"])?,
        hash(&v["root"])?,
        hashes(&v["proof"])?,
    );
    verify_inclusion(&leaf, u(&v["leafIdx"]), u(&v["treeSize"]), &proof, &root)
}

fn run_consistency(v: &Value) -> Result<(), ProofError> {
    let (r1, r2, proof) = (hash(&v["root1"])?, hash(&v["root2"])?, hashes(&v["proof"])?);
    verify_consistency(u(&v["size1"]), u(&v["size2"]), &proof, &r1, &r2)
}

/// Where we knowingly disagree with the vector's `wantErr`, and the exact
/// refusal we give instead. transparency-dev/merkle compares roots of equal
/// sizes as byte strings of any length; rcpt hashes are 32 bytes, so a
/// 12-byte "root" is refused before any comparison.
const DIVERGENCES: &[(&str, ProofError)] = &[(
    "consistency/additional/sizes-are-equal-one-and-proof-is-empty.json",
    ProofError::HashLength { got: 12 },
)];

/// Regenerate a valid vector's proof from the 8-leaf tree and compare.
fn regenerate(kind: &str, v: &Value, tree: &MemoryTree) -> bool {
    let (proof, size) = if kind == "inclusion" {
        let size = u(&v["treeSize"]);
        (size <= 8)
            .then(|| prove_inclusion(u(&v["leafIdx"]), size, tree))
            .map(|p| (p, size))
    } else {
        let size = u(&v["size2"]);
        (size <= 8)
            .then(|| prove_consistency(u(&v["size1"]), size, tree))
            .map(|p| (p, size))
    }
    .unzip();
    let (Some(proof), Some(_)) = (proof, size) else {
        return false;
    };
    assert_eq!(
        proof.unwrap(),
        hashes(&v["proof"]).unwrap(),
        "regenerated proof differs"
    );
    true
}

#[test]
fn transparency_dev_merkle_all_196() {
    let base = Path::new(TLOG).join("transparency-dev-merkle/testdata");
    let tree = MemoryTree::new(&td_leaves());
    let (mut ran, mut regenerated, mut refused, mut diverged) = (0, 0, 0, 0);
    for kind in ["inclusion", "consistency"] {
        for path in walk(&base.join(kind)) {
            let rel = path
                .strip_prefix(&base)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            let v = load(&path);
            let got = if kind == "inclusion" {
                run_inclusion(&v)
            } else {
                run_consistency(&v)
            };
            ran += 1;
            if let Some((_, want)) = DIVERGENCES.iter().find(|(f, _)| *f == rel) {
                assert_eq!(got.as_ref().err(), Some(want), "{rel}");
                diverged += 1;
                continue;
            }
            let want_err = v["wantErr"].as_bool().unwrap();
            assert_eq!(got.is_err(), want_err, "{rel}: {:?} ({})", got, v["desc"]);
            refused += usize::from(want_err);
            if !want_err && regenerate(kind, &v, &tree) {
                regenerated += 1;
            }
        }
    }
    assert_eq!(
        ran, 196,
        "transparency-dev/merkle inclusion + consistency files"
    );
    assert_eq!(diverged, DIVERGENCES.len());
    // 184 files want an error; the 11 other valid ones (all of size <= 8)
    // are also regenerated from the 8-leaf tree and compared hash by hash.
    assert_eq!((refused, regenerated), (184, 11));
}

fn argon(name: &str) -> Value {
    load(&Path::new(TLOG).join("ct-argon2020-real").join(name))
}

const ARGON_SIZE: u64 = 961_984_011;
const ARGON_OLD_SIZE: u64 = 3_654_490;
/// Root of Argon2020 at size 3,654,490 (golang.org/x/mod sumdb/tlog ct_test.go).
const ARGON_OLD_ROOT: &str = "AuIZ5V6sDUj1vn3Y1K85oOaQ7y+FJJKtyRTl1edIKBQ=";
const ARGON_INCL: &str = "get-proof-by-hash-tree-size-961984011-hash-nCs3mfIydh9x4CKyQ-2Bu2xtmpxmFggA5MLymHwNQSlLg-3D.json";
const ARGON_CONS: &str = "get-sth-consistency-first-3654490-second-961984011.json";

#[test]
fn argon2020_directory_is_fully_used() {
    let names: Vec<String> = std::fs::read_dir(Path::new(TLOG).join("ct-argon2020-real"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    let used = [
        "get-sth.json",
        "get-entries-start-10000-end-10000.json",
        ARGON_INCL,
        ARGON_CONS,
    ];
    assert_eq!(names.len(), used.len());
    assert!(used.iter().all(|u| names.iter().any(|n| n == u)));
}

fn argon_root() -> Hash {
    let sth = argon("get-sth.json");
    assert_eq!(u(&sth["tree_size"]), ARGON_SIZE);
    hash(&sth["sha256_root_hash"]).unwrap()
}

#[test]
fn argon2020_inclusion_of_leaf_10000() {
    let entries = argon("get-entries-start-10000-end-10000.json");
    let leaf = leaf_hash(&bytes(&entries["entries"][0]["leaf_input"]));
    assert_eq!(
        B64.encode(leaf),
        "nCs3mfIydh9x4CKyQ+u2xtmpxmFggA5MLymHwNQSlLg="
    );
    let resp = argon(ARGON_INCL);
    let index = u(&resp["leaf_index"]);
    let proof = hashes(&resp["audit_path"]).unwrap();
    let root = argon_root();
    assert_eq!(proof.len(), 30);
    verify_inclusion(&leaf, index, ARGON_SIZE, &proof, &root).unwrap();
    // Every single-bit change of a path hash, a neighbour index, a shorter or
    // longer path: refused.
    for i in 0..proof.len() {
        let mut bad = proof.clone();
        bad[i][i % 32] ^= 1;
        let err = verify_inclusion(&leaf, index, ARGON_SIZE, &bad, &root).unwrap_err();
        assert!(matches!(err, ProofError::RootMismatch { .. }));
    }
    assert!(matches!(
        verify_inclusion(&leaf, index + 1, ARGON_SIZE, &proof, &root),
        Err(ProofError::RootMismatch { .. })
    ));
    let err = verify_inclusion(&leaf, index, ARGON_SIZE, &proof[1..], &root).unwrap_err();
    assert_eq!(
        err,
        ProofError::WrongLength {
            expected: 30,
            got: 29
        }
    );
    let mut longer = proof.clone();
    longer.push(root);
    assert!(matches!(
        verify_inclusion(&leaf, index, ARGON_SIZE, &longer, &root),
        Err(ProofError::WrongLength { .. })
    ));
}

#[test]
fn argon2020_consistency_from_3654490() {
    let resp = argon(ARGON_CONS);
    let proof = hashes(&resp["consistency"]).unwrap();
    let old = hash_from_slice(&B64.decode(ARGON_OLD_ROOT).unwrap()).unwrap();
    let new = argon_root();
    assert_eq!(proof.len(), 30);
    verify_consistency(ARGON_OLD_SIZE, ARGON_SIZE, &proof, &old, &new).unwrap();
    for i in 0..proof.len() {
        let mut bad = proof.clone();
        bad[i][31 - i % 32] ^= 0x80;
        // A flipped bit moves the old root, the new one, or both.
        assert!(matches!(
            verify_consistency(ARGON_OLD_SIZE, ARGON_SIZE, &bad, &old, &new),
            Err(ProofError::OldRootMismatch { .. } | ProofError::NewRootMismatch { .. })
        ));
    }
    let err = verify_consistency(ARGON_OLD_SIZE, ARGON_SIZE, &proof, &new, &new).unwrap_err();
    assert_eq!(
        err,
        ProofError::OldRootMismatch {
            size: ARGON_OLD_SIZE
        }
    );
    let err = verify_consistency(ARGON_OLD_SIZE, ARGON_SIZE, &proof, &old, &old).unwrap_err();
    assert_eq!(err, ProofError::NewRootMismatch { size: ARGON_SIZE });
    assert_eq!(
        verify_consistency(ARGON_OLD_SIZE, ARGON_SIZE, &proof[..29], &old, &new),
        Err(ProofError::WrongLength {
            expected: 30,
            got: 29
        })
    );
    assert_eq!(
        verify_consistency(ARGON_OLD_SIZE + 1, ARGON_SIZE, &proof, &old, &new),
        Err(ProofError::WrongLength {
            expected: 31,
            got: 30
        })
    );
}

#[test]
fn empty_tree_root_is_sha256_of_nothing() {
    // RFC 6962 2.1: MTH({}) = SHA-256().
    assert_eq!(
        B64.encode(merkle::empty_root()),
        "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    );
}
