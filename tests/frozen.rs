//! The frozen receipt corpus holds: no file changed, every case comes out as
//! its manifest says, and the corpus covers what the issue requires.
//!
//! These tests read the committed bytes; nothing here regenerates them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use rcpt::digest::{Digest, to_hex};
use rcpt::trust::Trust;
use rcpt::verify::{Outcome, Verifier};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use support::corpus;

/// Every file under `dir`, relative, sorted.
fn walk(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type().unwrap().is_dir() {
            // A subdirectory with its own SHA256SUMS is a series, frozen on its own.
            if !entry.path().join("SHA256SUMS").exists() {
                walk(&entry.path(), &format!("{name}/"), out);
            }
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

/// Every series (a subdirectory with its own manifest and SHA256SUMS) holds
/// like the root: no file changed, added or removed, every case as its
/// manifest says (with the gating flags the manifest gives it).
#[test]
fn every_series_is_frozen_and_matches_its_manifest() {
    let series = rcpt::verify::corpus::series(&corpus()).unwrap();
    let names: Vec<String> = series
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"gate".to_string()), "series: {names:?}");
    assert!(
        names.contains(&"witnessed".to_string()),
        "series: {names:?}"
    );
    for dir in &series {
        let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
        let listed: BTreeSet<String> = sums
            .lines()
            .map(|l| l.split_once("  ").unwrap().1.to_string())
            .collect();
        let mut present = BTreeSet::new();
        walk(dir, "", &mut present);
        present.remove("SHA256SUMS");
        assert_eq!(
            present,
            listed,
            "{}: files differ from SHA256SUMS",
            dir.display()
        );
        let (mismatches, checked) = rcpt::verify::corpus::check_sums(dir).unwrap();
        assert!(mismatches.is_empty(), "{}: {mismatches:?}", dir.display());
        assert_eq!(checked, listed.len());
        let (manifest, trust) = rcpt::verify::corpus::load(dir).unwrap();
        let verifier = Verifier::new(trust.clone(), None).unwrap();
        for case in &manifest.cases {
            let r = rcpt::verify::corpus::run_case(dir, &trust, &verifier, case);
            assert!(
                r.matched,
                "{}/{}: expected {:?} {:?}, got {:?} {:?}",
                dir.display(),
                case.file,
                case.expect,
                case.reason,
                r.report.outcome(),
                r.report.primary_reason()
            );
        }
    }
}

/// The gate series covers issuer binding, every requirement met and not
/// met, a requirement that cannot be checked, and a stale read set; and
/// its gating flags decide: without them the same bundles verify.
#[test]
fn gate_series_covers_every_requirement_and_its_flags_decide() {
    let dir = corpus().join("gate");
    let (manifest, trust) = rcpt::verify::corpus::load(&dir).unwrap();
    let reasons: BTreeSet<&str> = manifest
        .cases
        .iter()
        .filter_map(|c| c.reason.map(|r| r.as_str()))
        .collect();
    for reason in [
        "signature.issuer_mismatch",
        "policy.verdict",
        "policy.issuer",
        "policy.change_id",
        "policy.policy_id",
        "policy.applied",
        "policy.age",
        "policy.fresh",
        "policy.fresh_unsupported",
        "payload.version_unsupported",
    ] {
        assert!(reasons.contains(reason), "gate series has no {reason} case");
    }
    let plain = Verifier::new(trust, None).unwrap();
    for case in manifest.cases.iter().filter(|c| c.gate.is_some()) {
        let ungated = plain.verify_file(&dir.join(&case.file)).outcome();
        if case
            .reason
            .is_some_and(|r| r.as_str().starts_with("policy."))
        {
            assert_eq!(
                ungated,
                Outcome::Verified,
                "{}: the gate decides",
                case.file
            );
        }
    }
}

/// The witnessed series covers each `--policy` outcome (spec/witness.md
/// "Verifying with a policy"); its policy decides (without it the bundles
/// whose quorum or cosignature fails verify), and `checkpoint.witnesses`
/// is reported right after `checkpoint.signature` exactly when a policy is
/// given.
#[test]
fn witnessed_series_covers_each_policy_outcome_and_the_policy_decides() {
    let dir = corpus().join("witnessed");
    let (manifest, trust) = rcpt::verify::corpus::load(&dir).unwrap();
    let expect: BTreeMap<&str, (&str, Option<&str>)> = manifest
        .cases
        .iter()
        .map(|c| {
            (
                c.file.as_str(),
                (c.expect.as_str(), c.reason.map(|r| r.as_str())),
            )
        })
        .collect();
    for (file, want) in [
        ("bundles/quorum-met.json", ("verified", None)),
        (
            "bundles/quorum-not-met.json",
            ("failed", Some("checkpoint.quorum")),
        ),
        (
            "bundles/bad-cosignature.json",
            ("failed", Some("checkpoint.cosignature")),
        ),
        (
            "bundles/cosignature-other-checkpoint.json",
            ("failed", Some("checkpoint.cosignature")),
        ),
        ("bundles/grease.json", ("verified", None)),
        (
            "bundles/unknown-cosigner-only.json",
            ("failed", Some("checkpoint.quorum")),
        ),
        ("bundles/unknown-cosigner-ignored.json", ("verified", None)),
        ("bundles/line-cap-met.json", ("verified", None)),
        (
            "bundles/line-cap-exceeded.json",
            ("failed", Some("checkpoint.malformed")),
        ),
        (
            "bundles/log-not-in-policy.json",
            ("error", Some("log.untrusted")),
        ),
        (
            "bundles/tlog-proof-quorum-not-met.tlog-proof",
            ("failed", Some("checkpoint.quorum")),
        ),
    ] {
        assert_eq!(expect.get(file), Some(&want), "witnessed series: {file}");
    }
    let plain = Verifier::new(trust.clone(), None).unwrap();
    for case in &manifest.cases {
        let with_policy = case.gate.as_ref().is_some_and(|g| g.policy.is_some());
        let report = rcpt::verify::corpus::run_case(&dir, &trust, &plain, case).report;
        let names: Vec<&str> = report.checks.iter().map(|c| c.name).collect();
        let at = names.iter().position(|n| *n == "checkpoint.witnesses");
        if with_policy {
            let sig = names.iter().position(|n| *n == "checkpoint.signature");
            assert_eq!(at, sig.map(|s| s + 1), "{}: {names:?}", case.file);
        } else {
            assert_eq!(at, None, "{}: no policy, no witness check", case.file);
        }
        let reason = case.reason.map(|r| r.as_str());
        if matches!(reason, Some("checkpoint.quorum" | "checkpoint.cosignature")) {
            let ungated = plain.verify_file(&dir.join(&case.file)).outcome();
            assert_eq!(
                ungated,
                Outcome::Verified,
                "{}: the policy decides",
                case.file
            );
        }
    }
}
