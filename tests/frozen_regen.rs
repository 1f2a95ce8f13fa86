//! The committed generator still writes the committed corpus: running
//! `examples/gen_frozen.rs` into an empty directory reproduces every file of
//! `fixtures/frozen-receipts/` byte for byte, and no file more or less.
//!
//! tests/frozen.rs proves the committed files did not change; this test
//! proves they are still what the generator says, so a new series can be
//! added to the generator without disturbing the existing one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Every file under `dir` with its bytes, keyed by relative path with '/'.
/// A subdirectory holding its own SHA256SUMS is another series: left out.
fn files(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Vec<u8>>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap();
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type().unwrap().is_dir() {
            if !entry.path().join("SHA256SUMS").exists() {
                files(&entry.path(), &format!("{name}/"), out);
            }
        } else {
            out.insert(name, std::fs::read(entry.path()).unwrap());
        }
    }
}

/// Where two byte strings first differ (the shorter length if one is a prefix).
fn first_difference(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

/// Every series of the generator, with the subdirectory it writes ("" for the root).
const SERIES: [(&str, &str); 3] = [("v1", ""), ("gate", "gate"), ("witnessed", "witnessed")];

#[test]
fn regenerating_the_frozen_corpus_reproduces_every_committed_file() {
    for (name, subdir) in SERIES {
        regenerate_series(name, subdir);
    }
}

fn regenerate_series(series: &str, subdir: &str) {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("frozen-receipts");
    let run = Command::new(env!("CARGO"))
        .args([
            "run",
            "--release",
            "--quiet",
            "--example",
            "gen_frozen",
            "--",
            "--series",
            series,
        ])
        .arg(&root)
        .current_dir(manifest_dir)
        .output()
        .expect("run cargo");
    let out = root.join(subdir);
    assert!(
        run.status.success(),
        "gen_frozen failed ({}):\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );

    let mut generated = BTreeMap::new();
    files(&out, "", &mut generated);
    let mut committed = BTreeMap::new();
    files(
        &manifest_dir.join("fixtures/frozen-receipts").join(subdir),
        "",
        &mut committed,
    );
    assert!(
        committed.len() > 20,
        "{series}: {} committed files",
        committed.len()
    );

    let mut problems = Vec::new();
    for name in committed.keys().filter(|n| !generated.contains_key(*n)) {
        problems.push(format!("{name}: committed, not generated"));
    }
    for name in generated.keys().filter(|n| !committed.contains_key(*n)) {
        problems.push(format!("{name}: generated, not committed"));
    }
    for (name, want) in &committed {
        if let Some(got) = generated.get(name)
            && got != want
        {
            problems.push(format!(
                "{name}: differs from byte {} (generated {} bytes, committed {})",
                first_difference(got, want),
                got.len(),
                want.len()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "regenerated series {series} differs from fixtures/frozen-receipts/{subdir} in {} file(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
