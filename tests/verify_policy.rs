//! `rcpt verify --policy FILE` through the command line (spec/witness.md
//! "Verifying with a policy", spec/verify.md): each outcome of the check
//! `checkpoint.witnesses` with its exit status and its place in the human,
//! JSON and JUnit outputs; bad policies are bad invocations; and, end to
//! end, a log's checkpoint cosigned by `rcpt witness cosign` verifies under
//! a 2-of-3 policy only with two cosignatures ("a bundle without quorum
//! fails `rcpt verify --policy`").
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::{Demo, corpus, keypair, rcpt};

/// The witnessed series of the frozen corpus.
fn series() -> PathBuf {
    corpus().join("witnessed")
}

/// A file of the witnessed series.
fn file(rel: &str) -> PathBuf {
    series().join(rel)
}

/// `rcpt verify --trust TRUST --policy POLICY --format json BUNDLE`:
/// (exit status, the bundle's result).
fn verify_json(trust: &Path, policy: &Path, bundle: &Path) -> (i32, Value) {
    let out = rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(trust)
        .arg("--policy")
        .arg(policy)
        .args(["--format", "json"])
        .arg(bundle)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), doc["results"][0].clone())
}

/// The names of the checks in a JSON result, in order.
fn check_names(result: &Value) -> Vec<String> {
    result["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// The check `name` of a JSON result.
fn check<'a>(result: &'a Value, name: &str) -> &'a Value {
    result["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {result}"))
}

/// Verify a bundle of the witnessed series under `witnesses.policy`.
fn witnessed(bundle: &str) -> (i32, Value) {
    verify_json(
        &file("trust.json"),
        &file("witnesses.policy"),
        &file(&format!("bundles/{bundle}")),
    )
}

#[test]
fn quorum_met_verifies_with_the_witness_check_after_the_log_signature() {
    let (code, result) = witnessed("quorum-met.json");
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["outcome"], "verified");
    let names = check_names(&result);
    let sig = names
        .iter()
        .position(|n| n == "checkpoint.signature")
        .unwrap();
    assert_eq!(names[sig + 1], "checkpoint.witnesses", "{names:?}");
    assert_eq!(check(&result, "checkpoint.witnesses")["status"], "pass");
}

#[test]
fn a_bundle_without_quorum_fails_verify_with_policy() {
    let (code, result) = witnessed("quorum-not-met.json");
    assert_eq!(code, 1, "{result}");
    assert_eq!(result["outcome"], "failed");
    let c = check(&result, "checkpoint.witnesses");
    assert_eq!(c["status"], "fail");
    assert_eq!(c["reason"], "checkpoint.quorum");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains("1 of the 3 listed witnesses cosigned (w1)"),
        "{detail}"
    );
    // The same bundle without --policy: no witness check, verified.
    let out = rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(file("trust.json"))
        .args(["--format", "json"])
        .arg(file("bundles/quorum-not-met.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!check_names(&doc["results"][0]).contains(&"checkpoint.witnesses".to_string()));
}

#[test]
fn only_unknown_cosigners_do_not_count() {
    let (code, result) = witnessed("unknown-cosigner-only.json");
    assert_eq!(code, 1);
    assert_eq!(
        check(&result, "checkpoint.witnesses")["reason"],
        "checkpoint.quorum"
    );
    let (code, _) = witnessed("unknown-cosigner-ignored.json");
    assert_eq!(code, 0);
    let (code, _) = witnessed("grease.json");
    assert_eq!(code, 0);
}

#[test]
fn a_listed_witness_bad_or_foreign_cosignature_fails_cosignature() {
    for (bundle, witness) in [
        ("bad-cosignature.json", "witness w3"),
        ("cosignature-other-checkpoint.json", "witness w2"),
        ("cosignature-short.json", "witness w3"),
    ] {
        let (code, result) = witnessed(bundle);
        assert_eq!(code, 1, "{bundle}: {result}");
        let c = check(&result, "checkpoint.witnesses");
        assert_eq!(c["reason"], "checkpoint.cosignature", "{bundle}");
        assert!(
            c["detail"].as_str().unwrap().contains(witness),
            "{bundle}: {c}"
        );
    }
}

#[test]
fn the_line_cap_is_kept_under_a_policy() {
    let (code, _) = witnessed("line-cap-met.json");
    assert_eq!(code, 0);
    let (code, result) = witnessed("line-cap-exceeded.json");
    assert_eq!(code, 1);
    assert_eq!(
        check(&result, "checkpoint.signature")["reason"],
        "checkpoint.malformed"
    );
    // Not run on a note that could not be read: skipped, not a second failure.
    assert_eq!(
        check(&result, "checkpoint.witnesses")["reason"],
        "check.skipped"
    );
}

#[test]
fn a_policy_without_the_bundles_log_is_not_evaluated() {
    let (code, result) = verify_json(
        &file("trust.json"),
        &file("other-log.policy"),
        &file("bundles/quorum-met.json"),
    );
    assert_eq!(code, 3, "{result}");
    assert_eq!(check(&result, "checkpoint.signature")["status"], "pass");
    let c = check(&result, "checkpoint.witnesses");
    assert_eq!(c["status"], "error");
    assert_eq!(c["reason"], "log.untrusted");
}

#[test]
fn tlog_proof_files_are_checked_under_the_policy() {
    let (code, _) = witnessed("tlog-proof-quorum-met.tlog-proof");
    assert_eq!(code, 0);
    let (code, result) = witnessed("tlog-proof-quorum-not-met.tlog-proof");
    assert_eq!(code, 1);
    assert_eq!(
        check(&result, "checkpoint.witnesses")["reason"],
        "checkpoint.quorum"
    );
}

/// The policy's `log` lines are trusted log keys: no --log-key needed.
#[test]
fn the_policy_log_lines_are_trusted_log_keys() {
    let trust: Value = serde_json::from_slice(&std::fs::read(file("trust.json")).unwrap()).unwrap();
    let issuer = format!(
        "{}={}",
        trust["issuers"][0]["name"].as_str().unwrap(),
        trust["issuers"][0]["public_key"].as_str().unwrap()
    );
    let bundle = file("bundles/quorum-met.json");
    rcpt()
        .args(["verify", "--issuer-key", &issuer, "--policy"])
        .arg(file("witnesses.policy"))
        .arg(&bundle)
        .assert()
        .code(0);
    // Without the policy there is no log key at all: a bad invocation.
    rcpt()
        .args(["verify", "--issuer-key", &issuer])
        .arg(&bundle)
        .assert()
        .code(2);
}

#[test]
fn human_and_junit_show_the_witness_check() {
    let run = |format: &str| {
        let out = rcpt()
            .arg("verify")
            .arg("--trust")
            .arg(file("trust.json"))
            .arg("--policy")
            .arg(file("witnesses.policy"))
            .args(["--format", format])
            .arg(file("bundles/quorum-not-met.json"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8(out.stdout).unwrap()
    };
    let human = run("human");
    assert!(
        human.contains("fail checkpoint.witnesses [checkpoint.quorum]: 1 of the 3"),
        "{human}"
    );
    let junit = run("junit");
    assert!(
        junit.contains("checkpoint.witnesses [checkpoint.quorum]"),
        "{junit}"
    );
}

#[test]
fn a_bad_policy_is_a_bad_invocation() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = file("bundles/quorum-met.json");
    let run = |policy: &Path| {
        rcpt()
            .arg("verify")
            .arg("--trust")
            .arg(file("trust.json"))
            .arg("--policy")
            .arg(policy)
            .arg(&bundle)
            .output()
            .unwrap()
    };
    let missing = run(&dir.path().join("absent.policy"));
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--policy"));
    let bad = dir.path().join("bad.policy");
    std::fs::write(&bad, "quorum nobody\n").unwrap();
    let out = run(&bad);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 1"), "{stderr}");
    // --policy and --corpus do not combine (a case names its own policy).
    rcpt()
        .args(["verify", "--corpus"])
        .arg(corpus())
        .arg("--policy")
        .arg(file("witnesses.policy"))
        .assert()
        .code(2);
}

/// End to end with the CLI: a log, three witness keys, a 2-of-3 policy,
/// cosignatures by `rcpt witness cosign` appended to a bundle's checkpoint.
#[test]
fn cosigned_by_rcpt_witnesses_a_bundle_needs_the_quorum() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let demo = Demo::new(dir, "", "example.com/witnessed-log", 3, 3);
    let log_vkey = demo.vkey();
    let logs = dir.join("logs.policy");
    std::fs::write(&logs, format!("log {log_vkey}\nquorum none\n")).unwrap();
    let checkpoint = demo.checkpoint_file("cp3");
    let mut policy = format!("log {log_vkey}\n");
    let mut lines = Vec::new();
    for i in 1..=3 {
        let name = format!("witness.example/w{i}");
        let (key, _) = keypair(dir, &format!("w{i}"), &name);
        let shown = rcpt()
            .args(["key", "show"])
            .arg(&key)
            .args(["--name", &name, "--witness"])
            .output()
            .unwrap();
        let vkey = support::field(&shown.stdout, "witness verifier key");
        policy.push_str(&format!("witness w{i} {vkey}\n"));
        let wdir = dir.join(format!("w{i}"));
        rcpt()
            .args(["witness", "init"])
            .arg(&wdir)
            .args(["--name", &name, "--key"])
            .arg(&key)
            .arg("--policy")
            .arg(&logs)
            .assert()
            .success();
        let out = support::succeeded(
            rcpt()
                .args(["witness", "cosign"])
                .arg(&wdir)
                .args([
                    "--old-size",
                    "0",
                    "--time",
                    &(1_767_139_200 + i).to_string(),
                ])
                .arg(&checkpoint)
                .output()
                .unwrap(),
        );
        lines.push(String::from_utf8(out.stdout).unwrap());
    }
    policy.push_str("group all-witnesses 2 w1 w2 w3\nquorum all-witnesses\n");
    let policy_file = dir.join("witnesses.policy");
    std::fs::write(&policy_file, policy).unwrap();
    let trust = demo.trust_file();
    let bundle = demo.prove(1, 3);
    let with_lines = |name: &str, cosigs: &[&String]| {
        let mut b: Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
        let mut note = b["log"]["checkpoint"].as_str().unwrap().to_string();
        for l in cosigs {
            note.push_str(l);
        }
        b["log"]["checkpoint"] = Value::String(note);
        let path = dir.join(name);
        std::fs::write(&path, b.to_string()).unwrap();
        path
    };
    let two = with_lines("two.json", &[&lines[0], &lines[2]]);
    let (code, result) = verify_json(&trust, &policy_file, &two);
    assert_eq!(code, 0, "{result}");
    let one = with_lines("one.json", &[&lines[1]]);
    let (code, result) = verify_json(&trust, &policy_file, &one);
    assert_eq!(code, 1, "{result}");
    assert_eq!(
        check(&result, "checkpoint.witnesses")["reason"],
        "checkpoint.quorum"
    );
    // The log's signature alone does not meet a quorum of witnesses.
    let (code, _) = verify_json(&trust, &policy_file, &bundle);
    assert_eq!(code, 1);
}

/// `verify --corpus` runs the witnessed series with each case's policy.
#[test]
fn the_corpus_runs_the_witnessed_series_with_its_policies() {
    let out = rcpt()
        .args(["verify", "--corpus"])
        .arg(corpus())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let series = stdout
        .split("== series ")
        .find(|s| s.lines().next().is_some_and(|l| l.ends_with("witnessed")))
        .unwrap_or_else(|| panic!("no witnessed series in:\n{stdout}"));
    assert!(series.contains("bundles/quorum-not-met.json"));
    assert!(series.contains("failed [checkpoint.quorum]"), "{series}");
    assert!(
        series.contains("failed [checkpoint.cosignature]"),
        "{series}"
    );
    assert!(series.contains("as expected, 0 not"), "{series}");
}

/// A case's policy path must stay inside the corpus, and must parse: else
/// the corpus cannot be run (exit 2).
#[test]
fn a_corpus_policy_outside_the_corpus_or_refused_is_a_bad_invocation() {
    for (policy, words) in [
        ("../witnesses.policy", "leaves the corpus"),
        ("keys/log.vkey", "policy keys/log.vkey"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("witnessed");
        std::fs::create_dir_all(dir.join("bundles")).unwrap();
        for f in ["trust.json", "witnesses.policy", "keys/log.vkey"] {
            std::fs::create_dir_all(dir.join(f).parent().unwrap()).unwrap();
            std::fs::copy(file(f), dir.join(f)).unwrap();
        }
        std::fs::copy(
            file("bundles/quorum-met.json"),
            dir.join("bundles/quorum-met.json"),
        )
        .unwrap();
        let manifest = serde_json::json!({"trust": "trust.json", "cases": [{
            "file": "bundles/quorum-met.json", "expect": "verified", "reason": null,
            "gate": {"policy": policy},
        }]});
        std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
        let out = rcpt()
            .args(["verify", "--corpus"])
            .arg(&dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{policy}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(words), "{policy}: {stderr}");
    }
}
