//! The consistency walk (`storage::walk`, spec/log.md "The consistency
//! walk") as its users meet it: nothing read from a log's tiles is taken
//! on trust. `rcpt verify --mirror` used to recompute the root at a
//! bundle's size from the mirror's lower tiles, which the mirror's signed
//! root does not cover: a mirror whose level-0 tile was changed after it
//! was mirrored made a forked bundle verify. It now proves the bundle's
//! tree a prefix of the mirror's signed tree and its entry included, both
//! from the tiles to the signed root.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::monitor as support_monitor;

use serde_json::json;
use std::path::Path;
use support_monitor::*;

/// `rcpt verify BUNDLE --trust TRUST --mirror MIRROR --format json`.
fn verify(bundle: &Path, trust: &Path, mirror: &Path) -> (i32, String) {
    let out = std::process::Command::new(support::bin())
        .arg("verify")
        .arg(bundle)
        .arg("--trust")
        .arg(trust)
        .arg("--mirror")
        .arg(mirror)
        .args(["--format", "json"])
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn a_mirror_whose_lower_tiles_were_changed_cannot_make_a_fork_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let signer = key(1);
    // Log A: 512 entries. Log B, same log key and origin: A's first 256
    // entries, then 44 others: a fork at size 300.
    let a_entries = entries(0, 512, "gate-a", &signer);
    let a = log_with(t, "a", &a_entries);
    let mut b_entries = a_entries[..256].to_vec();
    b_entries.extend(entries(10_000, 44, "gate-a", &signer));
    let b = log_with(t, "b", &b_entries);
    let fork = t.join("fork.json");
    support::prove_at(&b, 280, 300, &fork);
    let trust = t.join("trust.json");
    std::fs::write(
        &trust,
        json!({"issuers": [{"name": "gate-a", "public_key": b64(&signer)}],
               "logs": [{"verifier_key": vkey()}]})
        .to_string(),
    )
    .unwrap();
    // The mirror is A; the forked bundle fails against it.
    let mirror = t.join("mirror");
    copy_log(&a, &mirror);
    let (code, out) = verify(&fork, &trust, &mirror);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("consistency.fork"), "{out}");
    // Now the mirror's level-0 tile of entries 256..511 is made to hold
    // B's leaf hashes for 256..299. Its checkpoint, its upper tile and so
    // the root its edge gives are A's, unchanged: the mirror still opens.
    let b_leaves = std::fs::read(b.join("tile/0/001.p/44")).unwrap();
    let tile = mirror.join("tile/0/001");
    let mut bytes = std::fs::read(&tile).unwrap();
    bytes[..b_leaves.len()].copy_from_slice(&b_leaves);
    std::fs::write(&tile, bytes).unwrap();
    let (code, out) = verify(&fork, &trust, &mirror);
    assert_eq!(code, 1, "a changed mirror made a fork pass: {out}");
    assert!(out.contains("consistency.fork"), "{out}");
    assert!(out.contains("\"outcome\":\"failed\""), "{out}");
    // A's own bundle at the mirror's size still verifies where the
    // tiles it needs are A's (entry 3, under the first tile).
    let same = t.join("same.json");
    support::prove_at(&a, 3, 512, &same);
    let (code, out) = verify(&same, &trust, &mirror);
    assert_eq!(code, 0, "{out}");
}
