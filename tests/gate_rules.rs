//! The gate's rules (spec/gate.md "Rules"): a Rego module evaluated by
//! `rcpt gate rules` exactly as `gate check` does, in a confined child
//! process. Each hostile module is refused at load (exit 2, before it
//! runs) or bounded at run (exit 3, no verdict): never a hang, a network
//! call, a crash of rcpt, a deny or an admit.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::net::TcpListener;
use std::process::Output;
use std::time::{Duration, Instant};

/// The input of a small change: a workflow edit and a 2 MB file.
const INPUT: &str = r#"{"substrate": "git", "issuer": "gate.example/ci", "now": 1700000000,
  "base": "0000000000000000000000000000000000000000", "patch": false,
  "files": [{"path": ".github/workflows/ci.yml", "status": "modified",
             "digest": "blake3:0000000000000000000000000000000000000000000000000000000000000000",
             "mode": "100644", "size": 120},
            {"path": "assets/big.bin", "status": "added",
             "digest": "blake3:0000000000000000000000000000000000000000000000000000000000000000",
             "mode": "100644", "size": 2000000}]}"#;

/// Run `rcpt gate rules` on `module` against [`INPUT`]: its output and
/// how long it took.
fn rules(module: &str) -> (Output, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("gate.rego");
    std::fs::write(&m, module).unwrap();
    let i = dir.path().join("input.json");
    std::fs::write(&i, INPUT).unwrap();
    let start = Instant::now();
    let out = std::process::Command::new(support::rcpt_bin())
        .args(["gate", "rules"])
        .arg(&m)
        .arg("--input")
        .arg(&i)
        .current_dir(dir.path())
        .output()
        .unwrap();
    (out, start.elapsed())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Refused at load: exit 2, the reason named, nothing evaluated.
fn assert_refused(module: &str, why: &str) {
    let (out, took) = rules(module);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert!(err.contains("are refused") && err.contains(why), "{err}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// Bounded at run: exit 3 (no verdict), within the deadline, the bound named.
fn assert_bounded(module: &str, why: &[&str]) {
    let (out, took) = rules(module);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert!(
        err.contains("not evaluated") && why.iter().any(|w| err.contains(w)),
        "{err}"
    );
    // The parent's deadline (5 s) plus the start of the process.
    let limit = rcpt::gate::rules::RULES_DEADLINE + Duration::from_secs(3);
    assert!(took < limit, "{took:?}");
}

#[test]
fn a_module_gives_its_two_sets_of_reasons() {
    let module = r#"package rcpt

escalate contains "workflow.changed" if {
    some f in input.files
    startswith(f.path, ".github/workflows/")
}

deny contains "file.too_large" if {
    some f in input.files
    f.size > 1048576
}

deny contains "never" if { input.now < 0 }
"#;
    let (out, _) = rules(module);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc,
        serde_json::json!({"deny": ["file.too_large"], "escalate": ["workflow.changed"]})
    );
    // A declared set nothing matched is empty; an undeclared one too.
    let (out, _) = rules("package rcpt\ndeny contains \"a\" if { false }\n");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc, serde_json::json!({"deny": [], "escalate": []}));
}

#[test]
fn unbounded_recursion_is_bounded_at_run_and_never_crashes_rcpt() {
    // A function calling itself overflows the evaluator's stack: that
    // child dies, the gate says no verdict.
    assert_bounded(
        "package rcpt\nf(x) := y if { y := f(x) }\ndeny contains x if { x := f(1) }\n",
        &["overflowed its stack"],
    );
    // Mutual recursion of functions and of rules.
    assert_bounded(
        "package rcpt\nf(x) := y if { y := g(x) }\ng(x) := y if { y := f(x) }\n\
         deny contains x if { x := f(1) }\n",
        &["overflowed its stack"],
    );
    assert_bounded(
        "package rcpt\na if b\nb if a\ndeny contains \"x\" if a\n",
        &["overflowed its stack", "recursion"],
    );
}

#[test]
fn huge_sets_and_comprehensions_are_bounded_at_run() {
    // 10^8 numbers: the evaluator's address space limit stops it.
    assert_bounded(
        "package rcpt\nn := numbers.range(1, 100000000)\ndeny contains \"x\" if { count(n) > 5 }\n",
        &["memory allocation", "ended without an answer"],
    );
    // 10^8 iterations: the instruction budget or the timer stops it.
    assert_bounded(
        "package rcpt\nr := numbers.range(1, 10000)\ns := count([1 | some a in r; some b in r])\n\
         deny contains \"x\" if { s > 5 }\n",
        &["instruction limit", "time limit"],
    );
    // A string doubled 40 times.
    let mut module = String::from("package rcpt\ns0 := \"xx\"\n");
    for i in 1..=40 {
        module.push_str(&format!("s{i} := concat(\"\", [s{p}, s{p}])\n", p = i - 1));
    }
    module.push_str("deny contains \"x\" if { count(s40) > 5 }\n");
    assert_bounded(&module, &["memory allocation", "ended without an answer"]);
}

#[test]
fn builtins_that_reach_outside_are_refused_at_load() {
    // http.send: refused before anything runs; nothing connects.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    assert_refused(
        &format!(
            "package rcpt\ndeny contains x if {{ x := http.send({{\"method\": \"get\", \
             \"url\": \"{url}\"}}).body }}\n"
        ),
        "http.send",
    );
    assert!(
        listener.accept().is_err(),
        "the evaluator connected to {url}"
    );
    assert_refused(
        "package rcpt\ndeny contains x if { x := sprintf(\"%d\", [time.now_ns()]) }\n",
        "time.now_ns",
    );
    assert_refused(
        "package rcpt\ndeny contains x if { x := opa.runtime().env.HOME }\n",
        "opa.runtime",
    );
    assert_refused(
        "package rcpt\ndeny contains x if { x := sprintf(\"%d\", [rand.intn(\"a\", 10)]) }\n",
        "rand.intn",
    );
    assert_refused(
        "package rcpt\ndeny contains x if { x := uuid.rfc4122(\"a\") }\n",
        "uuid.rfc4122",
    );
}

#[test]
fn files_and_the_environment_are_not_there_to_read() {
    // No builtin reads a file, and the evaluator gets no data document and
    // no environment: a module reaching for them finds nothing (an
    // undefined value, so no reason), never the file.
    let module = r#"package rcpt
deny contains "read.passwd" if { data.files["/etc/passwd"] }
deny contains "read.env" if { data.env.HOME }
deny contains "read.input" if { input.secret }
"#;
    let (out, _) = rules(module);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc, serde_json::json!({"deny": [], "escalate": []}));
}

#[test]
fn malformed_reasons_and_sets_are_no_verdict() {
    for (module, why) in [
        ("package rcpt\ndeny contains 5 if { true }\n", "not a text"),
        (
            "package rcpt\ndeny contains \"Not A Reason\" if { true }\n",
            "not a reason",
        ),
        (
            "package rcpt\nescalate contains \"a/b\" if { true }\n",
            "not a reason",
        ),
        ("package rcpt\ndeny := \"a\"\n", "not a set"),
        (
            "package rcpt\ndeny contains x if { some x in numbers.range(1, 100); true }\n",
            "not a text",
        ),
    ] {
        assert_bounded(module, &[why]);
    }
    let long = format!(
        "package rcpt\ndeny contains \"{}\" if {{ true }}\n",
        "a".repeat(65)
    );
    assert_bounded(&long, &["not a reason"]);
    let many =
        "package rcpt\ndeny contains sprintf(\"r%d\", [n]) if { some n in numbers.range(1, 65) }\n";
    assert_bounded(many, &["over 64"]);
}

#[test]
fn modules_that_are_not_gate_rules_are_refused() {
    assert_refused(
        "package other\ndeny contains \"a\" if { true }\n",
        "package rcpt",
    );
    assert_refused("package rcpt\nallow if { true }\n", "neither");
    assert_refused("package rcpt\ndeny contains \"a\" if {\n", "rules.rego");
    assert_refused("this is not rego", "rules.rego");
}

#[test]
fn a_missing_module_is_a_bad_invocation() {
    let out = std::process::Command::new(support::rcpt_bin())
        .args(["gate", "rules", "/nonexistent/gate.rego", "--input", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("gate.rego"));
}
