//! C2SP tlog-tiles against `rcpt::tlog::tiles`: a log written by Tessera (its
//! checkpoints, tiles, entry bundles and the proofs derived from them), path
//! encoding examples from the spec, and tiles written here at sizes that
//! need tile levels 0..2, partial tiles and the full-tile fallback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use rcpt::storage::tiles::TileReader;
use rcpt::tlog::merkle::{
    self, Hash, HashReader, MemoryTree, NodeId, leaf_hash, prove_consistency, prove_inclusion,
    tree_root,
};
use rcpt::tlog::tiles::{
    TileError, decode_entry_bundle, encode_entry_bundle, encode_hash_tile, entries_tile_path,
    hash_tile_path,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

const TESSERA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/vectors/tlog/tessera-posix-testlog"
);

fn log_dir() -> PathBuf {
    Path::new(TESSERA).join("testdata/log")
}

fn b64_hash(v: &Value) -> Hash {
    merkle::hash_from_slice(&B64.decode(v.as_str().unwrap()).unwrap()).unwrap()
}

fn proof(v: &Value) -> Vec<Hash> {
    v.as_array().unwrap().iter().map(b64_hash).collect()
}

/// Size and root from a checkpoint body (C2SP tlog-checkpoint lines 2, 3).
fn checkpoint(text: &str) -> (u64, Hash) {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("example.com/log/testdata"));
    let size = lines.next().unwrap().parse().unwrap();
    let root = B64.decode(lines.next().unwrap()).unwrap();
    (size, merkle::hash_from_slice(&root).unwrap())
}

#[test]
fn tessera_checkpoint_roots_from_tiles() {
    let mut seen = 0;
    for entry in std::fs::read_dir(log_dir()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if !name.starts_with("checkpoint") {
            continue;
        }
        let (size, root) = checkpoint(&std::fs::read_to_string(log_dir().join(&name)).unwrap());
        if let Some(n) = name.strip_prefix("checkpoint.") {
            assert_eq!(n.parse::<u64>().unwrap(), size, "{name}");
        }
        let reader = TileReader::new(&log_dir(), size);
        assert_eq!(tree_root(size, &reader).unwrap(), root, "{name}");
        seen += 1;
    }
    assert_eq!(seen, 17, "checkpoint.0..=15 and checkpoint");
}

#[test]
fn tessera_entries_match_bundles_and_level0_tiles() {
    let derived: Value = serde_json::from_slice(
        &std::fs::read(Path::new(TESSERA).join("derived-proofs.json")).unwrap(),
    )
    .unwrap();
    let entries = derived["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 15);
    for size in 1..=15u64 {
        let reader = TileReader::new(&log_dir(), size);
        for (i, want) in entries.iter().take(size as usize).enumerate() {
            let got = reader.entry(i as u64).unwrap();
            assert_eq!(got, B64.decode(want.as_str().unwrap()).unwrap());
            let stored = reader
                .read_hashes(&[NodeId {
                    level: 0,
                    index: i as u64,
                }])
                .unwrap();
            assert_eq!(stored, vec![leaf_hash(&got)]);
        }
        assert!(matches!(
            reader.entry(size),
            Err(TileError::EntryOutOfRange { .. })
        ));
    }
}

#[test]
fn tessera_proofs_equal_derived_proofs() {
    let derived: Value = serde_json::from_slice(
        &std::fs::read(Path::new(TESSERA).join("derived-proofs.json")).unwrap(),
    )
    .unwrap();
    let u = |v: &Value| v.as_u64().unwrap();
    let mut ran = 0;
    for v in derived["inclusion"].as_array().unwrap() {
        let (index, size) = (u(&v["leafIdx"]), u(&v["treeSize"]));
        let reader = TileReader::new(&log_dir(), size);
        assert_eq!(
            prove_inclusion(index, size, &reader).unwrap(),
            proof(&v["proof"])
        );
        assert_eq!(
            leaf_hash(&reader.entry(index).unwrap()),
            b64_hash(&v["leafHash"])
        );
        let root = b64_hash(&v["root"]);
        merkle::verify_inclusion(
            &b64_hash(&v["leafHash"]),
            index,
            size,
            &proof(&v["proof"]),
            &root,
        )
        .unwrap();
        ran += 1;
    }
    for v in derived["consistency"].as_array().unwrap() {
        let (m, n) = (u(&v["size1"]), u(&v["size2"]));
        let reader = TileReader::new(&log_dir(), n);
        assert_eq!(
            prove_consistency(m, n, &reader).unwrap(),
            proof(&v["proof"])
        );
        let (r1, r2) = (b64_hash(&v["root1"]), b64_hash(&v["root2"]));
        merkle::verify_consistency(m, n, &proof(&v["proof"]), &r1, &r2).unwrap();
        ran += 1;
    }
    assert_eq!(ran, 240, "120 inclusion + 120 consistency");
}

#[test]
fn path_encoding_from_the_spec() {
    // C2SP tlog-tiles: "the index 1234067 is encoded as x001/x234/067".
    assert_eq!(hash_tile_path(0, 1234067, None), "tile/0/x001/x234/067");
    assert_eq!(
        hash_tile_path(1, 1234067, Some(8)),
        "tile/1/x001/x234/067.p/8"
    );
    assert_eq!(
        entries_tile_path(1234067, None),
        "tile/entries/x001/x234/067"
    );
    assert_eq!(entries_tile_path(0, Some(1)), "tile/entries/000.p/1");
    assert_eq!(hash_tile_path(2, 0, Some(255)), "tile/2/000.p/255");
    assert_eq!(hash_tile_path(0, 999, None), "tile/0/999");
    assert_eq!(hash_tile_path(0, 1000, None), "tile/0/x001/000");
    assert_eq!(hash_tile_path(3, 1_000_000, None), "tile/3/x001/x000/000");
    assert_eq!(
        hash_tile_path(0, u64::MAX, None),
        "tile/0/x018/x446/x744/x073/x709/x551/615"
    );
}

#[test]
fn entry_bundle_round_trip_and_refusals() {
    let big = vec![7u8; 65535];
    let entries: Vec<&[u8]> = vec![b"a", &big, b"", b"last"];
    let bytes = encode_entry_bundle(entries.iter().copied()).unwrap();
    assert_eq!(&bytes[..3], &[0, 1, b'a']);
    assert_eq!(decode_entry_bundle(&bytes).unwrap(), entries);
    // Truncated inside the length prefix and inside the entry.
    for cut in [1usize, 4, 3 + 2 + 65534, bytes.len() - 1] {
        let err = decode_entry_bundle(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(err, TileError::Truncated { .. }),
            "cut {cut}: {err}"
        );
    }
    // Trailing bytes after the last entry.
    for tail in [&[0u8][..], &[0, 9], &[1, 0, 0]] {
        let mut long = bytes.clone();
        long.extend_from_slice(tail);
        assert!(matches!(
            decode_entry_bundle(&long),
            Err(TileError::Truncated { .. })
        ));
    }
    let too_big = vec![0u8; 65536];
    let err = encode_entry_bundle([&too_big[..]]).unwrap_err();
    assert!(matches!(
        err,
        TileError::EntryTooLarge {
            position: 0,
            len: 65536,
            ..
        }
    ));
    let many: Vec<&[u8]> = vec![b"x"; 257];
    assert!(matches!(
        encode_entry_bundle(many.iter().copied()),
        Err(TileError::TooManyEntries { .. })
    ));
    assert!(encode_entry_bundle(many[..256].iter().copied()).is_ok());
    let many_bytes: Vec<u8> = [0u8, 0].repeat(257);
    assert!(matches!(
        decode_entry_bundle(&many_bytes),
        Err(TileError::TooManyEntries { .. })
    ));
}

/// Write the hash tiles a tree of `size` leaves has (C2SP tlog-tiles: tile
/// level L holds the nodes at tree level 8L), partial tiles as `.p/W`.
fn write_tiles(dir: &Path, tree: &MemoryTree, size: u64) {
    for level in 0u8..4 {
        let count = size >> (8 * u32::from(level));
        let mut n = 0;
        while n * 256 < count {
            let width = (count - n * 256).min(256);
            let ids: Vec<NodeId> = (n * 256..n * 256 + width)
                .map(|i| NodeId {
                    level: 8 * level,
                    index: i,
                })
                .collect();
            let hashes = tree.read_hashes(&ids).unwrap();
            let partial = (width < 256).then_some(width as u8);
            let path = dir.join(hash_tile_path(level, n, partial));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, encode_hash_tile(&hashes)).unwrap();
            n += 1;
        }
    }
}

#[test]
fn own_tiles_three_levels_every_size_grown() {
    let dir = tempfile::tempdir().unwrap();
    let total = 65536 + 300;
    let leaves: Vec<Hash> = (0..total)
        .map(|i: u64| leaf_hash(&i.to_le_bytes()))
        .collect();
    let tree = MemoryTree::new(&leaves);
    // A log growing through these sizes keeps every partial tile it wrote.
    let sizes = [1u64, 255, 256, 257, 4000, 65535, 65536, 65536 + 300];
    for &s in &sizes {
        write_tiles(dir.path(), &tree, s);
    }
    for &n in &sizes {
        let reader = TileReader::new(dir.path(), n);
        assert_eq!(
            tree_root(n, &reader).unwrap(),
            merkle::root(&leaves[..n as usize])
        );
        for i in [0, n / 3, n / 2, n - 1] {
            assert_eq!(
                prove_inclusion(i, n, &reader).unwrap(),
                prove_inclusion(i, n, &tree).unwrap()
            );
        }
        for &m in sizes.iter().filter(|&&m| m <= n) {
            assert_eq!(
                prove_consistency(m, n, &reader).unwrap(),
                prove_consistency(m, n, &tree).unwrap()
            );
        }
        // Nothing beyond the size is served.
        let beyond = NodeId { level: 0, index: n };
        assert!(matches!(
            reader.read_hashes(&[beyond]),
            Err(TileError::NotInTree { .. })
        ));
    }
}

#[test]
fn partial_tile_gone_falls_back_to_full_tile_and_bad_lengths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let leaves: Vec<Hash> = (0..300u64).map(|i| leaf_hash(&i.to_be_bytes())).collect();
    let tree = MemoryTree::new(&leaves);
    write_tiles(dir.path(), &tree, 300);
    // Size 100 wants tile/0/000.p/100, which was never written: the full
    // tile's first 100 hashes serve.
    let reader = TileReader::new(dir.path(), 100);
    assert_eq!(
        tree_root(100, &reader).unwrap(),
        merkle::root(&leaves[..100])
    );
    // A partial tile of the wrong length is refused.
    let p = dir.path().join(hash_tile_path(0, 1, Some(44)));
    std::fs::write(&p, vec![0u8; 43 * 32]).unwrap();
    let err = tree_root(300, &TileReader::new(dir.path(), 300)).unwrap_err();
    assert!(err.to_string().contains("tile/0/001.p/44"), "{err}");
    // Neither the partial nor the full tile: a read error naming the partial.
    std::fs::remove_file(&p).unwrap();
    let err = tree_root(300, &TileReader::new(dir.path(), 300)).unwrap_err();
    assert!(err.to_string().contains("tile/0/001.p/44"), "{err}");
}
