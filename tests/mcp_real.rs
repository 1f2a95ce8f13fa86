//! `rcpt gate mcp` with real parts (spec/gate-mcp.md): the servers
//! `@modelcontextprotocol/server-filesystem` (npm, the 2025-11-25 era
//! only) and `mcp-server-git` (PyPI, both eras), the Python `mcp` SDK as
//! the client (2.3.0: `mode="legacy"` for the initialize handshake,
//! `mode="2026-07-28"` for the modern era). Installed by `.ci/run` into
//! tests/mcp; where they are missing the tests skip visibly
//! (`RCPT_REQUIRE_MCP=1` makes that a failure).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use support::mcp::World;

/// Run the SDK agent in `era` with `steps` through the proxy before
/// `server`: one JSON value per step, then `{"protocol": ...}`.
fn agent(
    w: &World,
    python: &Path,
    era: &str,
    steps: &Value,
    proxy: &[String],
    server: &[String],
) -> Vec<Value> {
    let script = w.dir.join("script.json");
    std::fs::write(&script, steps.to_string()).unwrap();
    let out = Command::new(python)
        .arg(support::mcp::area().join("agent.py"))
        .arg(era)
        .arg(&script)
        .arg("--")
        .arg(support::bin())
        .args(proxy)
        .arg("--")
        .args(server)
        .current_dir(&w.dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "agent: {stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("{l}; stderr: {stderr}")))
        .collect()
}

fn gate_undo(w: &World, receipt: &Path) -> std::process::Output {
    Command::new(support::bin())
        .args(["gate", "undo"])
        .arg(receipt)
        .args(["--key", "gate.key", "--store"])
        .arg(&w.store)
        .arg("--root")
        .arg(&w.work)
        .arg("--log")
        .arg(&w.log)
        .current_dir(&w.dir)
        .output()
        .unwrap()
}

#[test]
fn an_agent_session_through_server_filesystem_in_the_legacy_era() {
    let (Some(fs), Some(python)) = (support::mcp::fs_server(), support::mcp::sdk_python()) else {
        return;
    };
    let w = World::new();
    let server = vec![fs.display().to_string(), w.work.display().to_string()];
    let mut table = w.pin(&server);
    assert_eq!(table["tools"]["read_text_file"]["kind"], "read");
    assert_eq!(table["tools"]["write_file"]["kind"], "step");
    // edit_file changed since it was pinned: the table holds another digest.
    table["tools"]["edit_file"]["def"] = json!(format!("sha256:{}", "0".repeat(64)));
    let policy = w.policy(
        &table,
        &[
            ("write_file", &["/path"]),
            ("edit_file", &["/path"]),
            ("move_file", &["/source", "/destination"]),
        ],
    );
    let a = w.work.join("a.txt");
    std::fs::write(&a, "hello\n").unwrap();
    let outside = w.dir.join("outside.txt");
    let steps = json!([
        {"op": "list"},
        {"op": "call", "tool": "read_text_file", "arguments": {"path": a}},
        {"op": "call", "tool": "write_file", "arguments": {"path": a, "content": "hello, edited\n"}},
        {"op": "call", "tool": "write_file", "arguments": {"path": outside, "content": "x"}},
        {"op": "call", "tool": "edit_file", "arguments": {"path": a, "edits": [{"oldText": "hello", "newText": "bye"}]}},
        {"op": "call", "tool": "move_file", "arguments": {"source": a, "destination": w.work.join("b.txt")}}
    ]);
    let out = agent(
        &w,
        &python,
        "legacy",
        &steps,
        &w.proxy_args(&policy),
        &server,
    );
    let tools = out[0]["tools"].as_array().unwrap();
    assert!(
        tools.contains(&json!("write_file")) && !tools.contains(&json!("edit_file")),
        "{tools:?}"
    );
    assert_eq!(out[1]["text"], "hello\n");
    assert!(out[1]["meta"].get("dev.rcpt/receipt").is_none());
    assert_eq!(
        (
            out[2]["isError"].clone(),
            out[2]["meta"]["dev.rcpt/verdict"].clone()
        ),
        (json!(false), json!("admit"))
    );
    assert_eq!(
        out[3]["meta"]["dev.rcpt/reasons"],
        json!(["files.outside_root"])
    );
    assert_eq!(out[4]["meta"]["dev.rcpt/reasons"], json!(["tool.changed"]));
    assert_eq!(out[5]["meta"]["dev.rcpt/verdict"], "admit");
    assert_eq!(out[6]["protocol"], "2025-11-25");
    assert!(!outside.exists());
    assert_eq!(
        std::fs::read_to_string(w.work.join("b.txt")).unwrap(),
        "hello, edited\n"
    );
    // Every receipt verifies offline; the write and the move are undoable.
    let ids = w.verify_all();
    let ours: Vec<&str> = [2, 3, 4, 5]
        .iter()
        .map(|i| out[*i]["meta"]["dev.rcpt/receipt"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ours);
    let receipts = w.receipts();
    assert_eq!(receipts[3]["reversibility"], true);
    let moved = w.dir.join("move.json");
    std::fs::write(&moved, w.bundles()[3].to_string()).unwrap();
    let undone = gate_undo(&w, &moved);
    assert!(
        undone.status.success(),
        "{}",
        String::from_utf8_lossy(&undone.stderr)
    );
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "hello, edited\n");
    assert!(!w.work.join("b.txt").exists());
    assert_eq!(
        w.verify_all().len(),
        5,
        "the undo's receipt is logged and verifies"
    );
}

#[test]
fn an_agent_session_through_mcp_server_git_in_both_eras() {
    let (Some(git_server), Some(python)) = (support::mcp::git_server(), support::mcp::sdk_python())
    else {
        return;
    };
    let w = World::new();
    let repo = w.work.join("repo");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(&w.work)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q", "repo"]);
    git(&["-C", "repo", "commit", "-q", "--allow-empty", "-m", "init"]);
    let server = vec![
        git_server.display().to_string(),
        "--repository".into(),
        repo.display().to_string(),
    ];
    let table = w.pin(&server);
    assert_eq!(table["tools"]["git_status"]["kind"], "read");
    assert_eq!(table["tools"]["git_add"]["kind"], "step");
    let policy = w.policy(&table, &[]);
    std::fs::write(repo.join("notes.txt"), "n\n").unwrap();
    let r = repo.display().to_string();
    for (era, message) in [("2026-07-28", "modern"), ("legacy", "legacy")] {
        std::fs::write(repo.join("notes.txt"), format!("{message}\n")).unwrap();
        let steps = json!([
            {"op": "call", "tool": "git_status", "arguments": {"repo_path": r}},
            {"op": "call", "tool": "git_add", "arguments": {"repo_path": r, "files": ["notes.txt"]}},
            {"op": "call", "tool": "git_commit", "arguments": {"repo_path": r, "message": message}}
        ]);
        let out = agent(&w, &python, era, &steps, &w.proxy_args(&policy), &server);
        assert!(
            out[0]["text"].as_str().unwrap().contains("notes.txt"),
            "{era}: {}",
            out[0]
        );
        assert_eq!(
            out[1]["meta"]["dev.rcpt/verdict"], "admit",
            "{era}: {}",
            out[1]
        );
        assert_eq!(
            out[2]["meta"]["dev.rcpt/verdict"], "admit",
            "{era}: {}",
            out[2]
        );
        assert_eq!(
            out[3]["protocol"],
            if era == "legacy" {
                "2025-11-25"
            } else {
                "2026-07-28"
            }
        );
        assert!(git(&["-C", "repo", "log", "--format=%s", "-1"]).contains(message));
    }
    // Steps without files are irreversible, and say so; all verify offline.
    assert_eq!(w.verify_all().len(), 4);
    for r in w.receipts() {
        assert_eq!(
            (r["applied"].clone(), r["reversibility"].clone()),
            (json!(true), json!(false)),
            "{r}"
        );
        assert_eq!(r["inverse_delta_id"], Value::Null);
    }
}

/// Run rcpt in the world's directory, asserted successful.
fn rcpt(w: &World, args: &[&str]) {
    let out = Command::new(support::bin())
        .args(args)
        .current_dir(&w.dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn server_filesystem_under_rules_a_denial_and_an_approved_retry() {
    let (Some(fs), Some(python)) = (support::mcp::fs_server(), support::mcp::sdk_python()) else {
        return;
    };
    let w = World::new();
    let server = vec![fs.display().to_string(), w.work.display().to_string()];
    let table = w.pin(&server);
    let policy = w.policy(&table, &[("write_file", &["/path"])]);
    rcpt(
        &w,
        &[
            "key",
            "generate",
            "--name",
            "alice.example",
            "--out",
            "alice",
        ],
    );
    std::fs::write(
        w.dir.join("agent.rego"),
        "package rcpt\n\
         deny contains \"secret\" if { contains(input.arguments.content, \"SECRET\") }\n\
         escalate contains \"config\" if { some f in input.files; endswith(f.path, \".cfg\") }\n",
    )
    .unwrap();
    let mut p: Value = serde_json::from_slice(&std::fs::read(&policy).unwrap()).unwrap();
    p["rules"] = json!("agent.rego");
    let alice = std::fs::read_to_string(w.dir.join("alice.vkey")).unwrap();
    p["approvers"] = json!([alice.trim()]);
    p["approvals_required"] = json!(1);
    std::fs::write(&policy, p.to_string()).unwrap();
    let cfg = w.work.join("a.cfg");
    let secret = w.work.join("s.txt");
    let write_cfg =
        json!({"op": "call", "tool": "write_file", "arguments": {"path": cfg, "content": "on\n"}});
    let steps = json!([
        {"op": "call", "tool": "write_file", "arguments": {"path": secret, "content": "SECRET"}},
        write_cfg
    ]);
    let proxy = w.proxy_args(&policy);
    let out = agent(&w, &python, "legacy", &steps, &proxy, &server);
    assert_eq!(out[0]["meta"]["dev.rcpt/reasons"], json!(["rule.secret"]));
    assert_eq!(
        (
            out[1]["isError"].clone(),
            out[1]["meta"]["dev.rcpt/verdict"].clone()
        ),
        (json!(true), json!("escalate"))
    );
    assert!(!secret.exists() && !cfg.exists());
    // The approver takes the escalation's bundle from the log and approves.
    let esc = out[1]["meta"]["dev.rcpt/receipt"].as_str().unwrap();
    let bundle = w
        .bundles()
        .into_iter()
        .find(|b| b["receipt_id"] == esc)
        .unwrap();
    std::fs::write(w.dir.join("escalated.json"), bundle.to_string()).unwrap();
    let store = w.store.display().to_string();
    rcpt(
        &w,
        &[
            "gate",
            "approve",
            "escalated.json",
            "--key",
            "alice.key",
            "--gate-key-file",
            "gate.vkey",
            "--store",
            &store,
            "-o",
            "approval.json",
        ],
    );
    let out = agent(&w, &python, "legacy", &json!([write_cfg]), &proxy, &server);
    assert_eq!(out[0]["meta"]["dev.rcpt/verdict"], "admit", "{}", out[0]);
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), "on\n");
    assert_eq!(w.verify_all().len(), 3);
}
