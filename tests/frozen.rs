//! The frozen receipt corpus holds: no file changed, every case comes out as
//! its manifest says, and the corpus covers what the issue requires.
//!
//! These tests read the committed bytes; nothing here regenerates them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcpt::digest::{Digest, to_hex};
use rcpt::trust::Trust;
use rcpt::verify::{Outcome, Verifier};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/frozen-receipts")
}

/// Every file under `dir`, relative, sorted.
fn walk(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type().unwrap().is_dir() {
            walk(&entry.path(), &format!("{name}/"), out);
        } else {
            out.insert(name);
        }
    }
}

fn manifest() -> Value {
    serde_json::from_slice(&std::fs::read(corpus().join("manifest.json")).unwrap()).unwrap()
}

#[test]
fn no_frozen_file_changed_added_or_removed() {
    let dir = corpus();
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    let mut listed = BTreeMap::new();
    for line in sums.lines() {
        let (hex, file) = line.split_once("  ").expect("sha256sum line");
        listed.insert(file.to_string(), hex.to_string());
    }
    let mut present = BTreeSet::new();
    walk(&dir, "", &mut present);
    present.remove("SHA256SUMS");
    let listed_names: BTreeSet<String> = listed.keys().cloned().collect();
    assert_eq!(
        present, listed_names,
        "files on disk differ from SHA256SUMS"
    );
    for (file, hex) in &listed {
        let actual = to_hex(&Digest::sha256(&std::fs::read(dir.join(file)).unwrap()).bytes);
        assert_eq!(
            &actual, hex,
            "frozen file {file} changed: frozen files are never rewritten"
        );
    }
    assert!(listed.len() > 100, "{} files", listed.len());
}

#[test]
fn every_bundle_is_a_case_and_every_case_matches() {
    let dir = corpus();
    let m = manifest();
    let trust = Trust::from_json(&std::fs::read(dir.join("trust.json")).unwrap()).unwrap();
    let verifier = Verifier::new(trust, None).unwrap();
    let cases = m["cases"].as_array().unwrap();
    assert!(
        cases.len() >= 60,
        "at least 60 cases, found {}",
        cases.len()
    );
    let mut files = BTreeSet::new();
    walk(&dir.join("bundles"), "bundles/", &mut files);
    let in_manifest: BTreeSet<String> = cases
        .iter()
        .map(|c| c["file"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        files, in_manifest,
        "every bundle file is a manifest case, and only those"
    );
    let mut counts = BTreeMap::new();
    for case in cases {
        let file = case["file"].as_str().unwrap();
        let report = verifier.verify_file(&dir.join(file));
        let outcome = report.outcome();
        *counts.entry(outcome.as_str()).or_insert(0) += 1;
        assert_eq!(
            outcome.as_str(),
            case["expect"].as_str().unwrap(),
            "{file}: {report:?}"
        );
        assert_eq!(
            report.primary_reason().map(|r| r.as_str()),
            case["reason"].as_str(),
            "{file}: {report:?}"
        );
    }
    println!("frozen corpus: {} cases {counts:?}", cases.len());
    for outcome in [Outcome::Verified, Outcome::Failed, Outcome::NotEvaluated] {
        assert!(
            counts.contains_key(outcome.as_str()),
            "no {} case",
            outcome.as_str()
        );
    }
}

#[test]
fn corpus_covers_every_verdict_replay_invariant_and_log_size() {
    let m = manifest();
    let cases: BTreeMap<String, (String, Option<String>)> = m["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let file = c["file"]
                .as_str()
                .unwrap()
                .trim_start_matches("bundles/")
                .trim_end_matches(".json");
            (
                file.to_string(),
                (
                    c["expect"].as_str().unwrap().to_string(),
                    c["reason"].as_str().map(String::from),
                ),
            )
        })
        .collect();
    let verified = |name: &str| {
        assert_eq!(
            cases.get(name).map(|c| c.0.as_str()),
            Some("verified"),
            "{name} must be a verified case"
        );
    };
    for name in [
        "verdict-admit",
        "verdict-deny",
        "verdict-escalate",
        "replay-llm_originated",
        "replay-unknown",
        "checkpoint-grease",
    ] {
        verified(name);
    }
    let stages = ["deterministic", "llm", "unknown"];
    for p in stages {
        for e in stages.iter().filter(|e| **e != p) {
            verified(&format!("replay-mixed-{p}-{e}"));
        }
    }
    for size in [1, 2, 3, 7, 8, 9] {
        assert!(
            cases
                .keys()
                .any(|k| k.starts_with(&format!("size-{size}-index-"))),
            "no log of size {size}"
        );
    }
    assert!(
        cases.keys().any(|k| k
            .strip_prefix("size-")
            .and_then(|r| r.split('-').next())
            .and_then(|s| s.parse::<u64>().ok())
            .is_some_and(|s| s > 1000)),
        "no log over 1,000 entries"
    );
    let reasons: BTreeSet<&str> = cases.values().filter_map(|c| c.1.as_deref()).collect();
    for reason in [
        "invariant.reversibility",
        "invariant.verdict",
        "invariant.applied",
        "invariant.read_set",
        "invariant.replay",
        "payload.non_canonical",
        "payload.malformed",
        "payload.schema",
        "receipt_id.mismatch",
        "signature.invalid",
        "signature.untrusted",
        "log.untrusted",
        "inclusion.invalid",
        "checkpoint.signature_invalid",
        "checkpoint.size_mismatch",
        "bundle.malformed",
    ] {
        assert!(reasons.contains(reason), "no case with reason {reason}");
    }
    assert_eq!(
        cases.get("invariant-reversibility-true-null-inverse"),
        Some(&(
            "failed".to_string(),
            Some("invariant.reversibility".to_string())
        ))
    );
}
