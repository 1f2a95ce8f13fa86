//! Replays the committed fuzz corpus (fuzz/corpus/<target>/) through the
//! same checks the fuzz targets run (fuzz/checks.rs, included by path), so
//! CI keeps every seed and every input the fuzzer found, without libFuzzer.
//! Each target must have at least one input; every file is run, none is
//! skipped. Crashes the fuzzer found are also named regression tests below.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// Every file of fuzz/corpus/<target>/, sorted.
fn corpus_files(target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join("corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in &files {
        assert!(
            f.is_file(),
            "{} is not a file: nothing may be skipped",
            f.display()
        );
    }
    files
}

/// Run every corpus file of `target`; returns how many ran.
fn replay(target: &str) -> usize {
    let files = corpus_files(target);
    for f in &files {
        let data = std::fs::read(f).unwrap();
        let ran = std::panic::catch_unwind(|| checks::run(target, &data));
        match ran {
            Ok(known) => assert!(known, "no check named {target}"),
            Err(_) => panic!("{target}: corpus input {} fails its check", f.display()),
        }
    }
    assert!(!files.is_empty(), "fuzz/corpus/{target} holds no input");
    files.len()
}

macro_rules! replay_tests {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            let n = replay(stringify!($name));
            eprintln!("{}: replayed {n} inputs", stringify!($name));
        }
    )*};
}

replay_tests!(
    dagcbor,
    receipt_json,
    dsse_envelope,
    bundle,
    note_checkpoint,
    merkle_inclusion,
    merkle_consistency,
    tiles,
    trust,
    tlog_policy,
    cosignature,
    add_checkpoint,
    tlog_proof,
);

/// The target list, the fuzz_targets/ files and the corpus directories agree,
/// so no target can lack a replay.
#[test]
fn every_target_is_replayed() {
    let names = |sub: &str, strip: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(fuzz_dir().join(sub))
            .unwrap()
            .map(|e| {
                e.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .trim_end_matches(strip)
                    .to_owned()
            })
            .collect();
        v.sort();
        v
    };
    let mut targets: Vec<String> = checks::TARGETS.iter().map(|s| s.to_string()).collect();
    targets.sort();
    assert_eq!(names("fuzz_targets", ".rs"), targets);
    assert_eq!(names("corpus", ""), targets);
    let total: usize = checks::TARGETS.iter().map(|t| corpus_files(t).len()).sum();
    assert!(total >= checks::TARGETS.len());
}

/// The independent RFC 6962 folds in checks.rs are themselves checked: a
/// real proof verifies, and the m == n == 0 edge (found by the first smoke
/// run: equal roots and the empty root are both required) is modelled.
#[test]
fn merkle_models_accept_real_proofs_and_edges() {
    for mode_input in [[1u8, 6, 3, 0], [1, 63, 40, 0], [1, 0, 0, 0]] {
        checks::merkle_inclusion(&mode_input);
        checks::merkle_consistency(&mode_input);
    }
    // m = n = 0 with an arbitrary old root: verify refuses, the model too.
    let mut raw = vec![0u8];
    raw.extend_from_slice(&[0; 16]);
    raw.push(1);
    raw.extend_from_slice(&[7; 64]);
    checks::merkle_consistency(&raw);
}
