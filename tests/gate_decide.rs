//! The decision on real git repositories (spec/gate.md "Rules", "The
//! combination", "Escalation", "Approval"): every verdict arm reachable
//! from `rcpt gate check` and `gate apply`, approvals that count and the
//! ones that do not, each saying why.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use support::gate::{Gate, git, shown};

/// Escalate a workflow change, deny a file over 1 MiB, escalate an
/// executable file, deny a deletion.
const RULES: &str = r#"package rcpt

escalate contains "workflow.changed" if {
    some f in input.files
    startswith(f.path, ".github/workflows/")
}

escalate contains "exec.added" if {
    some f in input.files
    f.mode == "100755"
    f.status == "added"
}

deny contains "file.too_large" if {
    some f in input.files
    f.size > 1048576
}

deny contains "file.deleted" if {
    some f in input.files
    f.status == "deleted"
    f.size == null
}

deny contains "patch.on_friday" if {
    input.patch
    input.now < 0
}
"#;

struct Setup {
    g: Gate,
    policy: PathBuf,
    /// Where the checks leave a line each time they run.
    marker: PathBuf,
}

impl Setup {
    fn dir(&self) -> &Path {
        self.g.world.dir()
    }

    fn key(&self, who: &str) -> PathBuf {
        self.dir().join(format!("{who}.key"))
    }

    fn out(&self, name: &str) -> PathBuf {
        self.dir().join(name)
    }

    /// `gate check` with this policy (no log), the envelope at `out`.
    fn check(&self, out: &str, args: &[&str]) -> Output {
        self.g
            .rcpt()
            .args(["gate", "check", "--policy"])
            .arg(&self.policy)
            .arg("--key")
            .arg(&self.g.key)
            .arg("-o")
            .arg(self.out(out))
            .args(args)
            .output()
            .unwrap()
    }

    /// `gate approve RECEIPT --key WHO.key --gate-key-file gate.vkey -o OUT ARGS`.
    fn approve(&self, receipt: &str, who: &str, out: &str, args: &[&str]) -> Output {
        self.g
            .rcpt()
            .args(["gate", "approve"])
            .arg(self.out(receipt))
            .arg("--key")
            .arg(self.key(who))
            .arg("--gate-key-file")
            .arg(self.g.key.with_extension("vkey"))
            .arg("-o")
            .arg(self.out(out))
            .args(args)
            .output()
            .unwrap()
    }

    /// `gate check` into `again.json`, with `--store STORE` and an
    /// `--approval` for each of `files`.
    fn check_with(&self, store: &Path, files: &[&str]) -> Output {
        let mut args = vec!["--store".to_string(), store.display().to_string()];
        for f in files {
            args.push("--approval".into());
            args.push(self.out(f).display().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.check("again.json", &args)
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.marker)
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// Write the policy with `approvers` (names of keys made here) and
    /// `required`, and `extra` fields.
    fn write_policy(&self, approvers: &[&str], required: usize, extra: serde_json::Value) {
        let vkeys: Vec<String> = approvers
            .iter()
            .map(|a| {
                std::fs::read_to_string(self.dir().join(format!("{a}.vkey")))
                    .unwrap()
                    .trim()
                    .to_string()
            })
            .collect();
        let run = format!("echo ran >> '{}' && ./test.sh", self.marker.display());
        let mut doc = serde_json::json!({
            "name": "ci",
            "checks": [{"name": "test", "run": ["sh", "-c", run], "timeout_s": 60}],
            "reads": [],
            "rules": "gate.rego",
        });
        if !approvers.is_empty() {
            doc["approvers"] = serde_json::json!(vkeys);
            doc["approvals_required"] = serde_json::json!(required);
        }
        for (k, v) in extra.as_object().unwrap() {
            doc[k] = v.clone();
        }
        std::fs::write(&self.policy, doc.to_string()).unwrap();
    }
}

fn setup() -> Setup {
    let g = Gate::new(&[
        ("test.sh", "#!/bin/sh\ngrep -q '^ok' status.txt\n"),
        ("status.txt", "ok\n"),
        (".github/workflows/ci.yml", "on: push\n"),
        ("README", "hello\n"),
    ]);
    for who in ["alice", "bob", "mallory"] {
        let out = support::rcpt()
            .args(["key", "generate", "--name", &format!("{who}.example")])
            .arg("--out")
            .arg(g.world.dir().join(who))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", shown(&out));
    }
    std::fs::write(g.world.dir().join("gate.rego"), RULES).unwrap();
    let s = Setup {
        policy: g.world.dir().join("gate.json"),
        marker: g.world.dir().join("marker"),
        g,
    };
    s.write_policy(&["alice", "bob"], 1, serde_json::json!({}));
    s
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The payload of an envelope file, as JSON.
fn payload(path: &Path) -> serde_json::Value {
    let env: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let out = support::rcpt()
        .args(["receipt", "inspect", "--format", "json"])
        .arg(path)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(env["payload"].is_string());
    doc["payload"].clone()
}

#[test]
fn every_verdict_arm_is_reachable_from_gate_check() {
    let s = setup();
    // Admit: no rule says anything, the check passes.
    s.g.write("README", "hello again\n");
    let out = s.check("admit.json", &[]);
    assert_eq!(code(&out), Some(0), "{}", shown(&out));
    assert!(
        err(&out).contains("rules: deny [] escalate []"),
        "{}",
        err(&out)
    );
    assert!(payload(&s.out("admit.json"))["verdict"]["admit"].is_object());
    assert_eq!(s.runs(), 1);

    // Deny by a rule: the checks do not run.
    s.g.write("big.bin", &"x".repeat(2 * 1024 * 1024));
    let out = s.check("big.json", &[]);
    assert_eq!(code(&out), Some(1), "{}", shown(&out));
    let p = payload(&s.out("big.json"));
    assert_eq!(
        p["verdict"],
        serde_json::json!({"deny": {"reasons": ["rule.file.too_large"]}})
    );
    assert_eq!(s.runs(), 1, "a rule denial must skip the checks");
    std::fs::remove_file(s.g.repo.join("big.bin")).unwrap();

    // Escalate: a workflow change, the check passing. Exit 4, nothing
    // applied, the approve command printed.
    s.g.write(".github/workflows/ci.yml", "on: [push, pull_request]\n");
    let out = s.check("esc.json", &[]);
    assert_eq!(code(&out), Some(4), "{}", shown(&out));
    let p = payload(&s.out("esc.json"));
    assert!(
        p["verdict"]["escalate"]["ticket"]
            .as_str()
            .unwrap()
            .starts_with("blake3:")
    );
    assert_eq!(p["applied"], false);
    assert!(err(&out).contains("rcpt gate approve"), "{}", err(&out));
    assert!(
        err(&out).contains("alice.example, bob.example"),
        "{}",
        err(&out)
    );
    assert_eq!(s.runs(), 2);

    // Deny by a check absorbs the rules' escalation.
    s.g.write("status.txt", "broken\n");
    let out = s.check("fail.json", &[]);
    assert_eq!(code(&out), Some(1), "{}", shown(&out));
    let p = payload(&s.out("fail.json"));
    assert_eq!(
        p["verdict"],
        serde_json::json!({"deny": {"reasons": ["check.test.failed"]}})
    );

    // Deny by a rule absorbs both.
    s.g.write("big.bin", &"x".repeat(2 * 1024 * 1024));
    let out = s.check("both.json", &[]);
    assert_eq!(code(&out), Some(1), "{}", shown(&out));
    assert_eq!(
        payload(&s.out("both.json"))["verdict"],
        serde_json::json!({"deny": {"reasons": ["rule.file.too_large"]}})
    );
}

#[test]
fn no_verdict_and_bad_rules_issue_nothing() {
    let s = setup();
    s.g.write("README", "changed\n");
    // A rule that cannot be evaluated: no receipt, exit 3.
    std::fs::write(
        s.dir().join("gate.rego"),
        "package rcpt\ndeny contains x if { some x in numbers.range(1, 3) }\n",
    )
    .unwrap();
    let out = s.check("none.json", &[]);
    assert_eq!(code(&out), Some(3), "{}", shown(&out));
    assert!(err(&out).contains("not a text"), "{}", err(&out));
    assert!(!s.out("none.json").exists());
    assert_eq!(s.runs(), 0, "no check runs when the rules gave no result");
    // A module refused as written: a bad invocation, exit 2.
    std::fs::write(
        s.dir().join("gate.rego"),
        "package other\ndeny contains \"a\" if { true }\n",
    )
    .unwrap();
    let out = s.check("bad.json", &[]);
    assert_eq!(code(&out), Some(2), "{}", shown(&out));
    assert!(err(&out).contains("package rcpt"), "{}", err(&out));
    // A missing module: the policy is refused.
    std::fs::remove_file(s.dir().join("gate.rego")).unwrap();
    let out = s.check("gone.json", &[]);
    assert_eq!(code(&out), Some(2), "{}", shown(&out));
    assert!(!s.out("gone.json").exists());
}

#[test]
fn the_policy_id_covers_the_module_bytes_not_its_name() {
    let s = setup();
    s.g.write("README", "x\n");
    let id = |out: &Output| support::line_value(&err(out), "policy_id");
    let first = id(&s.check("a.json", &[]));
    std::fs::rename(s.dir().join("gate.rego"), s.dir().join("renamed.rego")).unwrap();
    s.write_policy(
        &["alice", "bob"],
        1,
        serde_json::json!({"rules": "renamed.rego"}),
    );
    assert_eq!(
        id(&s.check("b.json", &[])),
        first,
        "a renamed module is the same policy"
    );
    let mut edited = RULES.to_string();
    edited.push_str("\n# a comment is another module\n");
    std::fs::write(s.dir().join("renamed.rego"), edited).unwrap();
    assert_ne!(id(&s.check("c.json", &[])), first);
}

#[test]
fn an_approval_admits_and_the_evidence_names_it() {
    let s = setup();
    s.g.write(".github/workflows/ci.yml", "on: [push]\njobs: {}\n");
    assert_eq!(code(&s.check("esc.json", &[])), Some(4));
    // Alice approves, in the repository: the approval is kept in its store.
    let out = s.approve("esc.json", "alice", "ok.json", &[]);
    assert_eq!(code(&out), Some(0), "{}", shown(&out));
    let p = payload(&s.out("ok.json"));
    assert_eq!(p["issuer"], "alice.example");
    assert_eq!(p["applied"], false);
    let esc = payload(&s.out("esc.json"));
    assert_eq!(p["change_id"], esc["change_id"]);
    assert_eq!(p["read_set"], esc["read_set"]);
    assert_eq!(p["precondition"], esc["verdict"]["escalate"]["ticket"]);
    // The next check finds it in the store and admits.
    let out = s.check("admit.json", &[]);
    assert_eq!(code(&out), Some(0), "{}", shown(&out));
    assert!(
        err(&out).contains("counts, by alice.example"),
        "{}",
        err(&out)
    );
    let shown_out =
        s.g.rcpt()
            .args(["gate", "show"])
            .arg(s.out("admit.json"))
            .output()
            .unwrap();
    assert_eq!(code(&shown_out), Some(0), "{}", shown(&shown_out));
    let text = String::from_utf8_lossy(&shown_out.stdout).into_owned();
    assert!(text.contains("approved by alice.example"), "{text}");
    assert!(
        text.contains("rules: deny [] escalate [workflow.changed]"),
        "{text}"
    );
    // gate show of the approval: its record, re-hashed.
    let a =
        s.g.rcpt()
            .args(["gate", "show"])
            .arg(s.out("ok.json"))
            .output()
            .unwrap();
    let text = String::from_utf8_lossy(&a.stdout).into_owned();
    assert!(
        text.contains("approval of: ") && text.contains("ok: every object"),
        "{text}"
    );

    // Elsewhere (a fresh store, as a new CI runner has), given by file.
    let fresh = s.dir().join("fresh-store");
    let store = fresh.to_str().unwrap();
    let out = s.check("again.json", &["--store", store]);
    assert_eq!(code(&out), Some(4), "without the approval: {}", shown(&out));
    let ok = s.out("ok.json");
    let out = s.check(
        "again.json",
        &["--store", store, "--approval", ok.to_str().unwrap()],
    );
    assert_eq!(code(&out), Some(0), "{}", shown(&out));
}

#[test]
fn approvals_that_do_not_count_say_why() {
    let s = setup();
    s.g.write(".gitignore", "local.cfg\n");
    git(&s.g.repo, &["add", ".gitignore"]);
    git(&s.g.repo, &["commit", "-q", "-m", "ignore"]);
    s.g.write("local.cfg", "one\n");
    s.write_policy(
        &["alice", "bob"],
        1,
        serde_json::json!({"reads": ["local.cfg"]}),
    );
    s.g.write(".github/workflows/ci.yml", "on: [push]\n");
    let none = s.dir().join("no-store");
    let store = ["--store", none.to_str().unwrap()];
    assert_eq!(code(&s.check("esc.json", &store)), Some(4));
    let mine = s.dir().join("approver-store");
    let mine = ["--store", mine.to_str().unwrap()];
    // Forged: signed by a key the policy does not name.
    assert_eq!(
        code(&s.approve("esc.json", "mallory", "forged.json", &mine)),
        Some(0)
    );
    // Stale: approved, then a read moves.
    assert_eq!(
        code(&s.approve("esc.json", "alice", "alice.json", &mine)),
        Some(0)
    );
    let with = |files: &[&str]| s.check_with(&none, files);
    let out = with(&["forged.json"]);
    assert_eq!(code(&out), Some(4), "{}", shown(&out));
    assert!(
        err(&out).contains("not signed by any of the policy's approvers"),
        "{}",
        err(&out)
    );
    s.g.write("local.cfg", "two\n");
    let out = with(&["alice.json"]);
    assert_eq!(code(&out), Some(4), "{}", shown(&out));
    assert!(
        err(&out).contains("stale: local.cfg changed"),
        "{}",
        err(&out)
    );
    s.g.write("local.cfg", "one\n");
    assert_eq!(
        code(&with(&["alice.json"])),
        Some(0),
        "fresh again, it counts"
    );

    // Wrong change: the workflow edited again after the approval.
    s.g.write(".github/workflows/ci.yml", "on: [push, tag]\n");
    let out = with(&["alice.json"]);
    assert_eq!(code(&out), Some(4), "{}", shown(&out));
    assert!(
        err(&out).contains("approves another change"),
        "{}",
        err(&out)
    );
    s.g.write(".github/workflows/ci.yml", "on: [push]\n");

    // Wrong ticket: the same change, but the rules now escalate for more.
    let mut more = RULES.to_string();
    more.push_str("escalate contains \"any.change\" if { count(input.files) > 0 }\n");
    std::fs::write(s.dir().join("gate.rego"), more).unwrap();
    let out = with(&["alice.json"]);
    assert_eq!(code(&out), Some(4), "{}", shown(&out));
    assert!(
        err(&out).contains("its ticket is not this escalation's"),
        "{}",
        err(&out)
    );
}

#[test]
fn two_approvers_must_be_distinct_and_a_refusal_denies() {
    let s = setup();
    s.write_policy(&["alice", "bob"], 2, serde_json::json!({}));
    s.g.write(".github/workflows/ci.yml", "on: [push]\n");
    let none = s.dir().join("no-store");
    let store = ["--store", none.to_str().unwrap()];
    assert_eq!(code(&s.check("esc.json", &store)), Some(4));
    let elsewhere = s.dir().join("approver-store");
    let mine = ["--store", elsewhere.to_str().unwrap()];
    assert_eq!(
        code(&s.approve("esc.json", "alice", "a1.json", &mine)),
        Some(0)
    );
    // A second approval by the same key (issued a second later).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(
        code(&s.approve("esc.json", "alice", "a2.json", &mine)),
        Some(0)
    );
    let with = |files: &[&str]| s.check_with(&none, files);
    let out = with(&["a1.json", "a2.json"]);
    assert_eq!(code(&out), Some(4), "{}", shown(&out));
    assert!(
        err(&out).contains("approver alice.example is already counted"),
        "{}",
        err(&out)
    );
    assert!(err(&out).contains("2 approval(s) needed"), "{}", err(&out));
    assert_eq!(
        code(&s.approve("esc.json", "bob", "b.json", &mine)),
        Some(0)
    );
    let out = with(&["a1.json", "a2.json", "b.json"]);
    assert_eq!(code(&out), Some(0), "{}", shown(&out));
    // Bob refuses instead: denied, whatever else was approved.
    let out = s.approve(
        "esc.json",
        "bob",
        "no.json",
        &["--deny", "--reason", "needs.review"],
    );
    assert_eq!(code(&out), Some(0), "{}", shown(&out));
    let p = payload(&s.out("no.json"));
    assert_eq!(
        p["verdict"],
        serde_json::json!({"deny": {"reasons": ["approval.reason.needs.review", "approval.refused"]}})
    );
    let out = with(&["a1.json", "b.json", "no.json"]);
    assert_eq!(code(&out), Some(1), "{}", shown(&out));
    assert!(
        err(&out).contains("refused by bob.example"),
        "{}",
        err(&out)
    );
    assert_eq!(
        payload(&s.out("again.json"))["verdict"],
        serde_json::json!({"deny": {"reasons": ["approval.refused"]}})
    );
    // A reason that is not a code is a bad invocation.
    let out = s.approve(
        "esc.json",
        "bob",
        "x.json",
        &["--deny", "--reason", "Not OK"],
    );
    assert_eq!(code(&out), Some(2), "{}", shown(&out));
}

#[test]
fn approve_refuses_what_is_not_an_escalation_by_the_gate() {
    let s = setup();
    s.g.write("README", "x\n");
    assert_eq!(code(&s.check("admit.json", &[])), Some(0));
    let out = s.approve("admit.json", "alice", "ok.json", &[]);
    assert_eq!(code(&out), Some(1), "{}", shown(&out));
    assert!(err(&out).contains("not an escalation"), "{}", err(&out));
    s.g.write(".github/workflows/ci.yml", "x\n");
    assert_eq!(code(&s.check("esc.json", &[])), Some(4));
    // Checked against another key than the gate's.
    let out =
        s.g.rcpt()
            .args(["gate", "approve"])
            .arg(s.out("esc.json"))
            .arg("--key")
            .arg(s.key("alice"))
            .arg("--gate-key-file")
            .arg(s.dir().join("mallory.vkey"))
            .output()
            .unwrap();
    assert_eq!(code(&out), Some(1), "{}", shown(&out));
    assert!(
        err(&out).contains("not signed by the gate key"),
        "{}",
        err(&out)
    );
    assert!(!s.out("ok.json").exists());
}

#[test]
fn gate_apply_escalates_writes_nothing_then_applies_once_approved() {
    let s = setup();
    let patch = s.g.patch_of("wf.patch", |g| {
        g.write(".github/workflows/ci.yml", "on: [push, release]\n");
    });
    let before = s.g.files();
    let apply = |out: &str, args: &[&str]| s.g.apply(&patch, &s.policy, &s.out(out), args);
    let out = apply("esc.json", &[]);
    assert_eq!(code(&out), Some(4), "{}", shown(&out));
    assert_eq!(s.g.files(), before, "an escalation writes nothing");
    let p = payload(&s.out("esc.json"));
    assert_eq!(p["applied"], false);
    assert!(err(&out).contains("rcpt gate approve"), "{}", err(&out));
    assert_eq!(code(&s.approve("esc.json", "bob", "ok.json", &[])), Some(0));
    let out = apply("applied.json", &[]);
    assert_eq!(code(&out), Some(0), "{}", shown(&out));
    assert_eq!(payload(&s.out("applied.json"))["applied"], true);
    let wf = std::fs::read_to_string(s.g.repo.join(".github/workflows/ci.yml")).unwrap();
    assert_eq!(wf, "on: [push, release]\n");
    // A patch a rule denies: deny, the checks not run, nothing written.
    let runs = s.runs();
    let del = s.g.patch_of("del.patch", |g| {
        std::fs::remove_file(g.repo.join("README")).unwrap();
    });
    let before = s.g.files();
    let out = s.g.apply(&del, &s.policy, &s.out("del.json"), &[]);
    assert_eq!(code(&out), Some(1), "{}", shown(&out));
    assert_eq!(
        payload(&s.out("del.json"))["verdict"],
        serde_json::json!({"deny": {"reasons": ["rule.file.deleted"]}})
    );
    assert_eq!(s.g.files(), before);
    assert_eq!(s.runs(), runs);
}

#[test]
fn the_rules_see_the_changes_files_modes_and_sizes() {
    let s = setup();
    s.g.write("tool.sh", "#!/bin/sh\n");
    let out = s.check("exec.json", &[]);
    assert_eq!(code(&out), Some(4), "{}", shown(&out));
    assert!(err(&out).contains("escalate [exec.added]"), "{}", err(&out));
    std::fs::remove_file(s.g.repo.join("tool.sh")).unwrap();
    std::fs::remove_file(s.g.repo.join("README")).unwrap();
    let out = s.check("del.json", &[]);
    assert_eq!(code(&out), Some(1), "{}", shown(&out));
    assert!(err(&out).contains("deny [file.deleted]"), "{}", err(&out));
}

#[test]
fn verify_tells_an_escalation_and_an_approval_for_what_they_are() {
    let s = setup();
    s.g.write(".github/workflows/ci.yml", "on: [push]\n");
    assert_eq!(code(&s.check("esc.json", &[])), Some(4));
    assert_eq!(
        code(&s.approve("esc.json", "alice", "ok.json", &[])),
        Some(0)
    );
    let inspect = |f: &str| {
        let out = support::rcpt()
            .args(["receipt", "inspect"])
            .arg(s.out(f))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(inspect("esc.json").contains("decision:       escalated (ticket blake3:"));
    assert!(inspect("ok.json").contains("decision:       approval by alice.example"));
}

/// The README's rules walkthrough, run as a script (bash -euo pipefail,
/// `rcpt` on PATH) in a fresh directory: a rule denial, an escalation, an
/// approval by a second key, the re-check admitting, the deploy job's
/// verify passing; a forged approval not counting.
#[test]
fn the_readme_rules_walkthrough_runs_as_written() {
    let script = support::readme::block_after(
        "<!-- rules walkthrough: tests/gate_decide.rs runs the next block -->",
    );
    assert!(script.contains("rcpt gate approve") && script.contains("gate.rego"));
    let (stdout, err, status) = support::readme::run_script(&script);
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{err}"
    );
    for want in [
        "verdict: deny (rule.file.too_large)",
        "verdict: escalate (ticket blake3:",
        "counts, by alice.example",
        "verdict: admit",
        "does not count: not signed by any of the policy's approvers",
    ] {
        assert!(err.contains(want), "{want}\n{err}");
    }
    assert!(stdout.contains("VERIFIED"), "{stdout}");
}
