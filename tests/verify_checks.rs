//! The fixed list of checks a report names (spec/verify.md, "Checks";
//! spec/gate.md for the requirement checks): every bundle that reads
//! reports the same fifteen names in the same order whatever its outcome,
//! `consistency` after them with `--since`, then the requirement checks
//! asked for; a bundle that does not read reports `bundle` alone. Pinned
//! here as literals, and held against the spec's tables and
//! `Invariant::ALL`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use rcpt::receipt::Invariant;
use rcpt::receipt::require::{Requirements, VerdictArm};
use rcpt::verify::{CheckVerdict, ConsistencyInput, Gate, Report, Verifier};
use support::{bundle_json, corpus, verifier};

/// The checks of a bundle that reads, in report order, without `--since`
/// and without requirements.
const CHECKS: [&str; 15] = [
    "bundle",
    "envelope",
    "payload_type",
    "signature",
    "payload.canonical",
    "payload.schema",
    "invariant.reversibility",
    "invariant.verdict",
    "invariant.applied",
    "invariant.read_set",
    "invariant.replay",
    "receipt_id",
    "checkpoint.signature",
    "checkpoint.match",
    "inclusion",
];

/// The requirement checks, in report order, when every one is asked.
const POLICY_CHECKS: [&str; 7] = [
    "policy.verdict",
    "policy.issuer",
    "policy.change_id",
    "policy.policy_id",
    "policy.applied",
    "policy.age",
    "policy.fresh",
];

fn names(report: &Report) -> Vec<&'static str> {
    report.checks.iter().map(|c| c.name).collect()
}

/// Every corpus bundle, as (file name, report) from `verifier`.
fn corpus_reports(verifier: &Verifier) -> Vec<(String, Report)> {
    let mut out: Vec<(String, Report)> = std::fs::read_dir(corpus().join("bundles"))
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, verifier.verify_file(&path))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The backquoted names in column `col` of the markdown table rows of
/// `file`, each once, in order of first mention.
fn spec_table_names(file: &str, col: usize) -> Vec<String> {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
        .unwrap();
    let mut out = Vec::new();
    for line in text.lines() {
        // An escaped `\|` is inside a cell, not a column break.
        let line = line.replace("\\|", "/");
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| a | b |` splits into ["", "a", "b", ""].
        if cells.len() < col + 2 || !cells[0].is_empty() {
            continue;
        }
        let cell = cells[col + 1];
        for (i, part) in cell.split('`').enumerate() {
            // Names in order of first mention (later tables repeat some).
            if i % 2 == 1 && !out.iter().any(|n| n == part) {
                out.push(part.to_owned());
            }
        }
    }
    out
}

#[test]
fn the_invariant_checks_are_the_five_invariants_in_order() {
    let from_enum: Vec<&str> = Invariant::ALL.iter().map(|i| i.check_name()).collect();
    assert_eq!(from_enum, CHECKS[6..11]);
}

#[test]
fn the_spec_tables_list_the_pinned_names_in_order() {
    // spec/verify.md "Checks": column 2 of the numbered rows.
    let verify: Vec<String> = spec_table_names("spec/verify.md", 1)
        .into_iter()
        .filter(|n| CHECKS.contains(&n.as_str()) || n == "consistency")
        .collect();
    let mut want: Vec<&str> = CHECKS.to_vec();
    want.push("consistency");
    assert_eq!(verify, want);
    // spec/gate.md: the check-name column of the requirements table.
    let gate: Vec<String> = spec_table_names("spec/gate.md", 2)
        .into_iter()
        .filter(|n| n.starts_with("policy.") && POLICY_CHECKS.contains(&n.as_str()))
        .collect();
    assert_eq!(gate, POLICY_CHECKS);
}

#[test]
fn a_gateless_verify_reports_exactly_the_fixed_checks_for_every_bundle_that_reads() {
    let reports = corpus_reports(&verifier());
    assert!(reports.len() > 90, "{} corpus bundles", reports.len());
    let mut read = 0;
    for (file, report) in &reports {
        let got = names(report);
        if got == ["bundle"] {
            // A bundle that does not read: nothing else has an input.
            assert!(
                !matches!(report.checks[0].result, Ok(CheckVerdict::Pass)),
                "{file}: a lone bundle check must not pass"
            );
            continue;
        }
        assert_eq!(got, CHECKS, "{file}");
        read += 1;
    }
    // Failed, verified and not-evaluated bundles alike (the corpus has all).
    assert!(read > 80, "{read} bundles read");
}

#[test]
fn a_since_adds_consistency_after_inclusion() {
    let bundle = bundle_json("verdict-admit");
    let checkpoint = bundle["log"]["checkpoint"].as_str().unwrap();
    let size = bundle["log"]["tree_size"].as_u64().unwrap();
    let proof = format!(r#"{{"from": {size}, "to": {size}, "proof": []}}"#);
    let since = ConsistencyInput::parse(checkpoint.as_bytes(), proof.as_bytes()).unwrap();
    let trust = std::fs::read(corpus().join("trust.json")).unwrap();
    let verifier =
        Verifier::new(rcpt::trust::Trust::from_json(&trust).unwrap(), Some(since)).unwrap();
    let report = verifier.verify_bytes(&serde_json::to_vec(&bundle).unwrap());
    let mut want = CHECKS.to_vec();
    want.push("consistency");
    assert_eq!(names(&report), want);
}

#[test]
fn asked_requirements_follow_in_their_fixed_order() {
    let tmp = tempfile::tempdir().unwrap();
    let all = Requirements {
        verdict: Some(vec![VerdictArm::Admit]),
        issuer: Some(vec!["gate.example/frozen".to_owned()]),
        change_id: Some(support::d("change").parse().unwrap()),
        policy_id: Some(vec![support::d("policy v1").parse().unwrap()]),
        applied: Some(true),
        max_age_s: Some(86_400),
    };
    let gate = |requirements: Requirements, fresh: bool| Gate {
        requirements,
        fresh: fresh.then(|| tmp.path().to_path_buf()),
        now: Some(1_795_000_000),
    };
    let bundle = std::fs::read(support::bundle_path("verdict-admit")).unwrap();

    // All of them, freshness too: the seven, after the fixed checks.
    let report = verifier()
        .with_gate(gate(all.clone(), true))
        .verify_bytes(&bundle);
    let mut want = CHECKS.to_vec();
    want.extend(POLICY_CHECKS);
    assert_eq!(names(&report), want);

    // Only some: they keep their relative order.
    let some = Requirements {
        max_age_s: all.max_age_s,
        verdict: all.verdict.clone(),
        ..Requirements::default()
    };
    let report = verifier()
        .with_gate(gate(some, false))
        .verify_bytes(&bundle);
    let mut want = CHECKS.to_vec();
    want.extend(["policy.verdict", "policy.age"]);
    assert_eq!(names(&report), want);

    // None asked: exactly the fixed checks.
    let report = verifier()
        .with_gate(gate(Requirements::default(), false))
        .verify_bytes(&bundle);
    assert_eq!(names(&report), CHECKS);
}

/// With a policy, `checkpoint.witnesses` comes right after
/// `checkpoint.signature` for every bundle that reads; the rest of the
/// list is unchanged. Under `quorum none` and the corpus log (the policy
/// adds nothing to demand), every outcome is what it was without it.
#[test]
fn a_policy_adds_checkpoint_witnesses_after_the_checkpoint_signature() {
    let vkey = std::fs::read_to_string(corpus().join("keys/log.vkey")).unwrap();
    let policy = rcpt::tlog::policy::TlogPolicy::parse(
        format!("log {}\nquorum none\n", vkey.trim()).as_bytes(),
    )
    .unwrap();
    let plain = corpus_reports(&verifier());
    let with = corpus_reports(&verifier().with_policy(policy));
    let mut want = CHECKS.to_vec();
    want.insert(13, "checkpoint.witnesses");
    for ((file, before), (_, after)) in plain.iter().zip(&with) {
        assert_eq!(after.outcome(), before.outcome(), "{file}");
        if names(before) != ["bundle"] {
            assert_eq!(names(after), want, "{file}");
        }
    }
}
