//! The gate through the command line (spec/gate.md): a receipt that is
//! authentic but denied, escalated, unapplied, mis-attributed, too old or
//! stale fails the gate it should fail; an admitted fresh one passes; what
//! cannot be checked is not evaluated (exit 3), and `--not-evaluated` maps
//! only the exit status.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use serde_json::{Value, json};
use std::path::Path;
use support::gate::git_trimmed as git;
use support::{World, d, payload, rcpt};

const ISSUER: &str = "gate.example/ci";
const T: i64 = 1_795_000_000;

/// `rcpt verify --trust TRUST --format json ARGS BUNDLE`: (exit, result).
fn verify(w: &World, bundle: &Path, args: &[&str]) -> (i32, Value) {
    let out = rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(&w.trust)
        .args(["--format", "json"])
        .args(args)
        .arg(bundle)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(doc["format_version"], 1);
    (out.status.code().unwrap(), doc["results"][0].clone())
}

/// The status of check `name` in a JSON result.
fn check<'a>(result: &'a Value, name: &str) -> Option<&'a Value> {
    result["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
}

fn with(mut p: Value, changes: Value) -> Value {
    for (k, v) in changes.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

#[test]
fn verdict_requirement_met_not_met_and_not_checkable() {
    let mut w = World::new(ISSUER);
    let admit = w.receipt(&payload(ISSUER, T));
    let deny = w.receipt(&with(
        payload(ISSUER, T),
        json!({"verdict": {"deny": {"reasons": ["window closed"]}}, "applied": false}),
    ));
    let escalate = w.receipt(&with(
        payload(ISSUER, T),
        json!({"verdict": {"escalate": {"ticket": "OPS-1"}}, "applied": false}),
    ));
    // Without a requirement a deny receipt is only authentic: verified.
    let (code, r) = verify(&w, &deny, &[]);
    assert_eq!((code, r["outcome"].as_str()), (0, Some("verified")));
    assert!(
        check(&r, "policy.verdict").is_none(),
        "present only when asked"
    );
    assert_eq!(r["payload"]["verdict"], "deny");

    let (code, r) = verify(&w, &admit, &["--require-verdict", "admit"]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(check(&r, "policy.verdict").unwrap()["status"], "pass");
    for bundle in [&deny, &escalate] {
        let (code, r) = verify(&w, bundle, &["--require-verdict", "admit"]);
        assert_eq!(code, 1, "{r}");
        assert_eq!(r["reason"], "policy.verdict");
    }
    // Any of several arms.
    let (code, _) = verify(
        &w,
        &escalate,
        &[
            "--require-verdict",
            "admit",
            "--require-verdict",
            "escalate",
        ],
    );
    assert_eq!(code, 0);
    // Not checkable: the payload is not readable as v1 (a damaged envelope).
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&admit).unwrap()).unwrap();
    doc["envelope"]["payload"] = json!("!!");
    let broken = w.dir().join("broken.json");
    std::fs::write(&broken, doc.to_string()).unwrap();
    let (code, r) = verify(&w, &broken, &["--require-verdict", "admit"]);
    assert_eq!(code, 1, "the envelope failure decides: {r}");
    let c = check(&r, "policy.verdict").unwrap();
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("error"), Some("check.skipped"))
    );
}

#[test]
fn issuer_change_policy_and_applied_requirements() {
    let mut w = World::new(ISSUER);
    let b = w.receipt(&with(
        payload(ISSUER, T),
        json!({"applied": false, "verdict": {"escalate": {"ticket": "T"}}}),
    ));
    let cases: [(&[&str], i32, Option<&str>); 8] = [
        (&["--issuer", ISSUER], 0, None),
        (&["--issuer", "other.example"], 1, Some("policy.issuer")),
        (&["--change-id", &d("change")], 0, None),
        (
            &["--change-id", &d("another change")],
            1,
            Some("policy.change_id"),
        ),
        (
            &[
                "--policy-id",
                &d("policy v0"),
                "--policy-id",
                &d("policy v1"),
            ],
            0,
            None,
        ),
        (
            &["--policy-id", &d("policy v0")],
            1,
            Some("policy.policy_id"),
        ),
        (&["--applied", "false"], 0, None),
        (&["--applied", "true"], 1, Some("policy.applied")),
    ];
    for (args, want, reason) in cases {
        let (code, r) = verify(&w, &b, args);
        assert_eq!(code, want, "{args:?}: {r}");
        assert_eq!(r["reason"].as_str(), reason, "{args:?}");
    }
    // Bad requirement values are bad invocations.
    for args in [
        &["--change-id", "blake3:00"][..],
        &["--require-verdict", "maybe"],
        &["--applied", "perhaps"],
        &["--max-age", "1.5h"],
    ] {
        rcpt()
            .arg("verify")
            .arg("--trust")
            .arg(&w.trust)
            .args(args)
            .arg(&b)
            .assert()
            .code(2);
    }
}

#[test]
fn age_requirement_with_a_fixed_clock() {
    let mut w = World::new(ISSUER);
    let b = w.receipt(&payload(ISSUER, T));
    let now = |t: i64| t.to_string();
    let (code, _) = verify(&w, &b, &["--max-age", "1h", "--now", &now(T + 3600)]);
    assert_eq!(code, 0);
    let (code, r) = verify(&w, &b, &["--max-age", "1h", "--now", &now(T + 3601)]);
    assert_eq!((code, r["reason"].as_str()), (1, Some("policy.age")));
    // Issued more than 300 s in the future: refused too.
    let (code, r) = verify(&w, &b, &["--max-age", "7d", "--now", &now(T - 301)]);
    assert_eq!((code, r["reason"].as_str()), (1, Some("policy.age")));
    let (code, _) = verify(&w, &b, &["--max-age", "7d", "--now", &now(T - 300)]);
    assert_eq!(code, 0);
}

#[test]
fn issuer_binding_is_always_on() {
    let mut w = World::new(ISSUER);
    // Signed by the trusted key of gate.example/ci, claiming another issuer.
    let forged = w.receipt(&payload("bank.example/prod", T));
    let (code, r) = verify(&w, &forged, &[]);
    assert_eq!(
        (code, r["reason"].as_str()),
        (1, Some("signature.issuer_mismatch")),
        "{r}"
    );
    let detail = check(&r, "signature").unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.contains("bank.example/prod") && detail.contains(ISSUER),
        "{detail}"
    );

    let honest = w.receipt(&payload(ISSUER, T));
    let run = |args: &[&str], bundle: &Path| {
        rcpt()
            .arg("verify")
            .args(["--log-key", &w.log_vkey, "--format", "json"])
            .args(args)
            .arg(bundle)
            .output()
            .unwrap()
    };
    // An unnamed key binds no name: the output says so.
    let out = run(&["--issuer-key", &w.issuer_public], &honest);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("signature.issuer_mismatch") && text.contains("without a name"),
        "{text}"
    );
    // NAME=KEY binds the name.
    let named = format!("{ISSUER}={}", w.issuer_public);
    assert_eq!(
        run(&["--issuer-key", &named], &honest).status.code(),
        Some(0)
    );
    assert_eq!(
        run(&["--issuer-key", &named], &forged).status.code(),
        Some(1)
    );
    let wrong = format!("other.example={}", w.issuer_public);
    assert_eq!(
        run(&["--issuer-key", &wrong], &honest).status.code(),
        Some(1)
    );
    // A bad name is a bad invocation.
    let bad = format!("has space={}", w.issuer_public);
    assert_eq!(run(&["--issuer-key", &bad], &honest).status.code(), Some(2));
}

#[test]
fn trust_file_requirements_and_flag_override() {
    let mut w = World::new(ISSUER);
    let deny = w.receipt(&with(
        payload(ISSUER, T),
        json!({"verdict": {"deny": {"reasons": ["no"]}}, "applied": false}),
    ));
    w.write_trust(Some(json!({"verdict": ["admit"], "applied": false})));
    let (code, r) = verify(&w, &deny, &[]);
    assert_eq!(
        (code, r["reason"].as_str()),
        (1, Some("policy.verdict")),
        "{r}"
    );
    assert_eq!(check(&r, "policy.applied").unwrap()["status"], "pass");
    // The flag replaces the file's value for its key only.
    let (code, r) = verify(&w, &deny, &["--require-verdict", "deny"]);
    assert_eq!(code, 0, "{r}");
    assert!(check(&r, "policy.applied").is_some());
    // A malformed require object is a bad invocation.
    w.write_trust(Some(json!({"verdict": "admit"})));
    rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(&w.trust)
        .arg(&deny)
        .assert()
        .code(2);
    w.write_trust(Some(json!({"max_age": 10})));
    rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(&w.trust)
        .arg(&deny)
        .assert()
        .code(2);
}

/// The gate's round trip: `receipt read-set` makes the read set, the log
/// takes the receipt, `verify --fresh` agrees until a ref moves or a file
/// changes.
#[test]
fn fresh_read_set_round_trip_on_a_real_repository() {
    let mut w = World::new(ISSUER);
    let repo = w.dir().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("Cargo.lock"), "lock v1\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "one"]);
    let read_set = rcpt()
        .args(["receipt", "read-set", "--root"])
        .arg(&repo)
        .args(["Cargo.lock", "refs/heads/main"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let read_set: Value = serde_json::from_slice(&read_set).unwrap();
    assert_eq!(read_set[0]["resource"], "Cargo.lock");
    let b = w.receipt(&with(payload(ISSUER, T), json!({"read_set": read_set})));
    let root = repo.to_str().unwrap();
    let gate = [
        "--require-verdict",
        "admit",
        "--change-id",
        &d("change"),
        "--fresh",
        root,
    ];
    let (code, r) = verify(&w, &b, &gate);
    assert_eq!(code, 0, "{r}");
    assert_eq!(check(&r, "policy.fresh").unwrap()["status"], "pass");

    // The ref moves: stale.
    std::fs::write(repo.join("other"), "x").unwrap();
    git(&repo, &["add", "other"]);
    git(&repo, &["commit", "-q", "-m", "two"]);
    let (code, r) = verify(&w, &b, &gate);
    assert_eq!(
        (code, r["reason"].as_str()),
        (1, Some("policy.fresh")),
        "{r}"
    );
    assert!(
        check(&r, "policy.fresh").unwrap()["detail"]
            .as_str()
            .unwrap()
            .contains("refs/heads/main")
    );
    git(&repo, &["reset", "-q", "--hard", "HEAD~1"]);
    assert_eq!(verify(&w, &b, &gate).0, 0, "back where it was: fresh again");

    // A file changes: stale; it vanishes: stale.
    std::fs::write(repo.join("Cargo.lock"), "lock v2\n").unwrap();
    assert_eq!(verify(&w, &b, &gate).1["reason"], "policy.fresh");
    std::fs::remove_file(repo.join("Cargo.lock")).unwrap();
    assert_eq!(verify(&w, &b, &gate).1["reason"], "policy.fresh");
    // --fresh must name a directory.
    rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(&w.trust)
        .args(["--fresh", "/nonexistent/root"])
        .arg(&b)
        .assert()
        .code(2);
}

#[test]
fn fresh_escapes_and_unsupported_substrates() {
    let mut w = World::new(ISSUER);
    let root = w.dir().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(w.dir().join("outside"), "secret").unwrap();
    std::os::unix::fs::symlink(w.dir().join("outside"), root.join("link")).unwrap();
    let item = |res: &str| json!([{"resource": res, "digest": rcpt::digest::Digest::blake3(b"secret").to_string()}]);
    let fs = |res: &str| {
        with(
            payload(ISSUER, T),
            json!({"substrate": "filesystem", "read_set": item(res)}),
        )
    };
    let r_root = root.to_str().unwrap().to_string();
    for res in ["link", "../outside"] {
        let b = w.receipt(&fs(res));
        let (code, r) = verify(&w, &b, &["--fresh", &r_root]);
        assert_eq!(
            (code, r["reason"].as_str()),
            (1, Some("policy.fresh")),
            "{res}: {r}"
        );
    }
    // A substrate without a freshness rule: not evaluated, exit 3, and
    // --not-evaluated maps only the exit status.
    let pg = w.receipt(&with(
        payload(ISSUER, T),
        json!({"substrate": "postgresql", "read_set": item("public.accounts")}),
    ));
    let (code, r) = verify(&w, &pg, &["--fresh", &r_root]);
    assert_eq!((code, r["outcome"].as_str()), (3, Some("error")));
    assert_eq!(r["reason"], "policy.fresh_unsupported");
    for (policy, want) in [("fail", 1), ("pass", 0), ("error", 3)] {
        let (code, r) = verify(&w, &pg, &["--fresh", &r_root, "--not-evaluated", policy]);
        assert_eq!(code, want, "{policy}");
        assert_eq!(r["outcome"], "error", "the outcome itself never changes");
    }
    // A failure is never turned into a pass.
    let b = w.receipt(&fs("link"));
    let (code, _) = verify(&w, &b, &["--fresh", &r_root, "--not-evaluated", "pass"]);
    assert_eq!(code, 1);
}

#[test]
fn json_carries_the_payload_summary_and_junit_names_the_requirement() {
    let mut w = World::new(ISSUER);
    let b = w.receipt(&with(
        payload(ISSUER, T),
        json!({"verdict": {"deny": {"reasons": ["no"]}}, "applied": false}),
    ));
    let (_, r) = verify(&w, &b, &[]);
    assert_eq!(
        r["payload"],
        json!({"issuer": ISSUER, "issued_at": T, "substrate": "git", "change_id": d("change"),
               "policy_id": d("policy v1"), "verdict": "deny", "applied": false,
               "reasons": ["no"], "reversibility": null})
    );
    let out = rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(&w.trust)
        .args(["--format", "junit", "--require-verdict", "admit"])
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let xml = String::from_utf8(out.stdout).unwrap();
    assert!(xml.contains("type=\"policy.verdict\""), "{xml}");
    assert!(
        xml.contains("message=\"policy.verdict: verdict is &quot;deny&quot;"),
        "{xml}"
    );
}
