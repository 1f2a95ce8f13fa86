//! The frozen receipt corpus holds: no file changed, every case comes out as
//! its manifest says, and the corpus covers what the issue requires.
//!
//! These tests read the committed bytes; nothing here regenerates them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use rcpt::digest::{Digest, to_hex};
use rcpt::trust::Trust;
use rcpt::verify::errata::{Errata, Erratum, Expectation};
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

/// The errata file beside the corpus (never inside it: the frozen
/// directory holds exactly what SHA256SUMS lists).
fn errata_path() -> std::path::PathBuf {
    rcpt::verify::errata::default_path(&corpus()).unwrap()
}

fn errata() -> Errata {
    Errata::load(&errata_path()).unwrap()
}

/// (outcome, reason) each root case is expected to have now: the frozen
/// manifest's, or the erratum's that supersedes it.
fn expected_now() -> BTreeMap<String, (String, Option<String>)> {
    let errata = errata();
    let mut out = BTreeMap::new();
    for c in manifest()["cases"].as_array().unwrap() {
        let file = c["file"].as_str().unwrap().to_string();
        let mut want = (
            c["expect"].as_str().unwrap().to_string(),
            c["reason"].as_str().map(String::from),
        );
        if let Some(e) = errata.of_series(None).find(|e| e.case == file) {
            want = (
                e.now.expect.as_str().to_string(),
                e.now.reason.map(|r| r.as_str().to_string()),
            );
        }
        out.insert(file, want);
    }
    out
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
    for (file, (expect, reason)) in expected_now() {
        let report = verifier.verify_file(&dir.join(&file));
        let outcome = report.outcome();
        *counts.entry(outcome.as_str()).or_insert(0) += 1;
        assert_eq!(outcome.as_str(), expect, "{file}: {report:?}");
        assert_eq!(
            report.primary_reason().map(|r| r.as_str()),
            reason.as_deref(),
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
    let cases: BTreeMap<String, (String, Option<String>)> = expected_now()
        .into_iter()
        .map(|(file, want)| {
            let name = file
                .trim_start_matches("bundles/")
                .trim_end_matches(".json")
                .to_string();
            (name, want)
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
        // A receipt of a name nobody trusts (`signature.untrusted`) has no
        // frozen case since issue 34 defect 2 made the frozen one an
        // impersonation: tests/verify_forgery.rs covers it.
        "signature.impersonation",
        "log.untrusted",
        "log.impersonation",
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
    let parts = rcpt::verify::corpus::load_parts(&corpus(), &errata()).unwrap();
    for part in parts.iter().filter(|p| p.series.is_some()) {
        let dir = &part.dir;
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
        let (manifest, trust) = (&part.manifest, &part.trust);
        let verifier = Verifier::new(trust.clone(), None).unwrap();
        for case in &manifest.cases {
            let r = rcpt::verify::corpus::run_case(dir, trust, &verifier, case);
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

/// Every erratum names a real case of the frozen corpus, supersedes
/// exactly what its frozen manifest says (so it cannot drift from the
/// corpus it corrects), states what the verifier says now, and the errata
/// file lives outside the frozen directory.
#[test]
fn every_erratum_names_a_real_case_and_supersedes_its_frozen_expectation() {
    let path = errata_path();
    assert!(!path.starts_with(corpus()), "{}", path.display());
    let errata = errata();
    assert!(!errata.errata.is_empty());
    let series = rcpt::verify::corpus::series(&corpus()).unwrap();
    for e in &errata.errata {
        let dir = match &e.series {
            None => corpus(),
            Some(name) => series
                .iter()
                .find(|p| p.file_name().is_some_and(|n| n == name.as_str()))
                .unwrap_or_else(|| panic!("erratum names no series {name}"))
                .clone(),
        };
        let (manifest, trust) = rcpt::verify::corpus::load(&dir).unwrap();
        let case = manifest
            .cases
            .iter()
            .find(|c| c.file == e.case)
            .unwrap_or_else(|| panic!("erratum names no case {}", e.case));
        assert_eq!(Expectation::of(case), e.supersedes, "{}", e.case);
        assert!(e.why.starts_with("issue "), "{}: {}", e.case, e.why);
        let verifier = Verifier::new(trust.clone(), None).unwrap();
        let report = rcpt::verify::corpus::run_case(&dir, &trust, &verifier, case).report;
        let got = Expectation {
            expect: report.outcome(),
            reason: report.primary_reason(),
        };
        assert_eq!(got, e.now, "{}: the erratum states what holds now", e.case);
    }
    // Issue 34 defect 2: exactly these three, each a forgery that fails.
    let named: BTreeSet<&str> = errata.errata.iter().map(|e| e.case.as_str()).collect();
    assert_eq!(
        named,
        BTreeSet::from([
            "bundles/signature-untrusted-only.json",
            "bundles/envelope-empty-keyid-bad-signature.json",
            "bundles/checkpoint-other-key-same-name.json",
        ])
    );
}

/// An erratum that drifted (supersedes what the manifest does not say),
/// names no case, names no series, or repeats a case is refused: the
/// run never applies it silently.
#[test]
fn a_drifted_or_dangling_erratum_is_refused() {
    let good = errata();
    let first = good.errata[0].clone();
    let refused = |errata: Vec<Erratum>, want: &str| {
        let e = Errata {
            errata,
            path: "test.errata.json".into(),
        };
        let err = rcpt::verify::corpus::load_parts(&corpus(), &e).unwrap_err();
        assert!(err.to_string().contains(want), "{err}");
    };
    let mut drifted = first.clone();
    drifted.supersedes = Expectation {
        expect: Outcome::Verified,
        reason: None,
    };
    refused(
        vec![drifted],
        "but the root manifest says error [signature.untrusted]",
    );
    let mut dangling = first.clone();
    dangling.case = "bundles/no-such-case.json".into();
    refused(vec![dangling], "names no case");
    let mut elsewhere = first.clone();
    elsewhere.series = Some("gate".into());
    refused(vec![elsewhere], "names no case of the series \"gate\"");
    let mut nowhere = first.clone();
    nowhere.series = Some("no-such-series".into());
    refused(
        vec![nowhere],
        "series the corpus does not have: no-such-series",
    );
    // A second erratum for one case is refused when the file is read.
    let tmp = tempfile::tempdir().unwrap();
    let twice = tmp.path().join("twice.errata.json");
    let text = std::fs::read_to_string(errata_path()).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    let one = doc["errata"][0].clone();
    doc["errata"].as_array_mut().unwrap().push(one);
    std::fs::write(&twice, doc.to_string()).unwrap();
    let err = Errata::load(&twice).unwrap_err();
    assert!(err.to_string().contains("a second erratum"), "{err}");
    // Applied, the good errata supersede exactly three root cases.
    let parts = rcpt::verify::corpus::load_parts(&corpus(), &good).unwrap();
    let superseded: Vec<(Option<String>, usize)> = parts
        .iter()
        .map(|p| (p.series.clone(), p.superseded))
        .collect();
    assert_eq!(
        superseded.iter().map(|p| p.1).sum::<usize>(),
        3,
        "{superseded:?}"
    );
    assert_eq!(parts[0].superseded, 3);
}
