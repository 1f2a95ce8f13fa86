//! Contracts from a demonstrated run (spec/gate-mcp.md "Contracts from a
//! demonstrated run"), against the scripted server (tests/mcp/
//! fake_server.py): a deploy demonstrated (read the config, write the
//! release file), then replayed exactly, with one argument changed,
//! without re-reading, with one read for two steps, after the config
//! changed, and rebound; every receipt verifies offline.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;
use support::mcp::{Proxy, World, receipt_of};

struct Deploy {
    w: World,
    policy: PathBuf,
    contracts: PathBuf,
    config: PathBuf,
    release: PathBuf,
}

fn deploy() -> Deploy {
    let w = World::new();
    let table = w.pin(&w.fake());
    std::fs::remove_file(&w.received).ok();
    let policy = w.policy(&table, &[("write", &["/path"])]);
    let config = w.work.join("config");
    std::fs::write(&config, "target=prod\n").unwrap();
    Deploy {
        contracts: w.dir.join("contracts"),
        release: w.work.join("release"),
        policy,
        config,
        w,
    }
}

impl Deploy {
    /// A proxy with `--contracts` and the extra arguments.
    fn proxy(&self, extra: &[&str]) -> Proxy {
        let mut cmd = Command::new(support::bin());
        cmd.args(self.w.proxy_args(&self.policy))
            .arg("--contracts")
            .arg(&self.contracts)
            .args(extra)
            .arg("--")
            .args(self.w.fake());
        let mut p = Proxy::spawn(cmd, &self.w.dir);
        p.initialize();
        p
    }

    fn read(&self, p: &mut Proxy, id: u64) {
        let r = p.call(id, "read", json!({"path": self.config}));
        assert!(r["result"]["isError"] != json!(true), "{r}");
    }

    fn write(&self, p: &mut Proxy, id: u64, content: &str) -> Value {
        p.call(
            id,
            "write",
            json!({"path": self.release, "content": content}),
        )
    }

    fn demonstrate(&self, extra: &[&str]) -> String {
        let mut args = vec!["--record", "deploy"];
        args.extend_from_slice(extra);
        let mut p = self.proxy(&args);
        self.read(&mut p, 1);
        let a = self.write(&mut p, 2, "v1\n");
        assert!(receipt_of(&a).is_some(), "{a}");
        let (status, err) = p.close();
        assert!(status.success(), "{err}");
        assert!(err.contains("contract deploy v"), "{err}");
        err
    }

    fn contract(&self) -> Value {
        let text = std::fs::read_to_string(self.contracts.join("deploy.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn verb(&self, args: &[&str]) -> String {
        let out = Command::new(support::bin())
            .args(["gate", "contract"])
            .args(args)
            .arg("--contracts")
            .arg(&self.contracts)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// A refusal's reasons, and its text.
fn refused(answer: &Value) -> (Vec<String>, String) {
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let reasons = result["_meta"]["dev.rcpt/reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let text = result["content"][0]["text"].as_str().unwrap().to_string();
    (reasons, text)
}

fn admitted(answer: &Value) -> String {
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        answer["result"]["_meta"]["dev.rcpt/verdict"], "admit",
        "{answer}"
    );
    receipt_of(answer).unwrap()
}

/// The receipt of `id` among the log's, decoded.
fn receipt(w: &World, id: &str) -> Value {
    let bundles = w.bundles();
    let b = bundles
        .iter()
        .find(|b| b["receipt_id"] == id)
        .unwrap_or_else(|| panic!("{id} not in the log"));
    support::mcp::payload_of(b)
}

fn writes(w: &World) -> usize {
    w.received()
        .iter()
        .filter(|l| l.contains("\"name\":\"write\""))
        .count()
}

#[test]
fn a_demonstrated_deploy_gates_its_replays() {
    let d = deploy();
    d.demonstrate(&[]);
    let c = d.contract();
    assert_eq!(c["version"], 1);
    assert_eq!(c["status"], "proven");
    assert_eq!(c["calls"].as_array().unwrap().len(), 1);
    assert_eq!(
        c["calls"][0]["arguments"],
        json!({"path": d.release, "content": "v1\n"})
    );
    assert_eq!(c["calls"][0]["reads"][0]["tool"], "read");
    assert!(!d.contracts.join("deploy.recording").exists());
    let listed = d.verb(&["list"]);
    assert!(listed.contains("deploy v1 bound proven"), "{listed}");
    let sent = writes(&d.w);

    // Replayed exactly, after reading the config again: admitted. A second
    // write on the same read: spent.
    let mut p = d.proxy(&[]);
    d.read(&mut p, 1);
    let ok = admitted(&d.write(&mut p, 2, "v1\n"));
    let (reasons, text) = refused(&d.write(&mut p, 3, "v1\n"));
    assert_eq!(reasons, ["contract.read_spent"]);
    assert!(
        text.contains("contract deploy v1") && text.contains("spent"),
        "{text}"
    );
    // One argument changed (after a fresh read): denied, the field named.
    d.read(&mut p, 4);
    let (reasons, text) = refused(&d.write(&mut p, 5, "v2\n"));
    assert_eq!(reasons, ["contract.arguments"]);
    assert!(
        text.contains("/content") && text.contains("v1\\n") && text.contains("v2\\n"),
        "{text}"
    );
    p.close();
    // Without re-reading (a new session): denied.
    let mut p = d.proxy(&[]);
    let (reasons, text) = refused(&d.write(&mut p, 1, "v1\n"));
    assert_eq!(reasons, ["contract.read_missing"]);
    assert!(text.contains("none was made"), "{text}");
    p.close();
    // Only the admitted replay reached the server.
    assert_eq!(writes(&d.w), sent + 1);

    // The receipts verify offline; the admit's read set holds the read.
    let ids = d.w.verify_all();
    assert!(ids.contains(&ok));
    let r = receipt(&d.w, &ok);
    let resources: Vec<&str> = r["read_set"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["resource"].as_str().unwrap())
        .collect();
    assert!(
        resources.iter().any(|s| s.starts_with("mcp:read/sha256:")),
        "{resources:?}"
    );
    assert!(resources.contains(&d.release.display().to_string().as_str()));
    let denies: Vec<Value> =
        d.w.receipts()
            .into_iter()
            .filter(|r| r["verdict"]["deny"].is_object())
            .map(|r| r["verdict"]["deny"]["reasons"].clone())
            .collect();
    for want in [
        "contract.read_spent",
        "contract.arguments",
        "contract.read_missing",
    ] {
        assert!(denies.contains(&json!([want])), "{want}: {denies:?}");
    }
    // The demonstration (no contract enforced) has the policy's policy_id;
    // every replay's covers the policy and the contract.
    let all = d.w.receipts();
    let (demo, replays) = all.split_first().unwrap();
    assert_eq!(replays.len(), 4);
    assert!(
        replays
            .iter()
            .all(|r| r["policy_id"] == replays[0]["policy_id"])
    );
    assert_ne!(demo["policy_id"], replays[0]["policy_id"]);
}

#[test]
fn a_changed_config_makes_the_contract_unproven_until_a_rebind() {
    let d = deploy();
    d.demonstrate(&[]);
    std::fs::write(&d.config, "target=staging\n").unwrap();
    let mut p = d.proxy(&[]);
    d.read(&mut p, 1);
    let first = d.write(&mut p, 2, "v1\n");
    let (reasons, text) = refused(&first);
    assert_eq!(reasons, ["contract.unproven"]);
    assert!(text.contains("unproven"), "{text}");
    p.close();
    assert_eq!(d.contract()["status"], "unproven");
    // Even with the config back, its steps are refused.
    std::fs::write(&d.config, "target=prod\n").unwrap();
    let mut p = d.proxy(&[]);
    d.read(&mut p, 1);
    let second = d.write(&mut p, 2, "v1\n");
    let (reasons, text) = refused(&second);
    assert_eq!(reasons, ["contract.unproven"]);
    assert!(text.contains("rebind"), "{text}");
    p.close();
    // A recording cannot replace it without a rebind.
    let mut cmd = Command::new(support::bin());
    cmd.args(d.w.proxy_args(&d.policy))
        .arg("--contracts")
        .arg(&d.contracts)
        .args(["--record", "deploy", "--"])
        .args(d.w.fake());
    let out = cmd
        .current_dir(&d.w.dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rebind"));
    // Rebind, re-demonstrate with the new config: version 2, proven.
    std::fs::write(&d.config, "target=staging\n").unwrap();
    let said = d.verb(&["rebind", "deploy"]);
    assert!(said.contains("rebind asked"), "{said}");
    d.demonstrate(&[]);
    let c = d.contract();
    assert_eq!(
        (c["version"].as_i64(), c["status"].as_str()),
        (Some(2), Some("proven"))
    );
    let mut p = d.proxy(&[]);
    d.read(&mut p, 1);
    admitted(&d.write(&mut p, 2, "v1\n"));
    p.close();
    // Both refusals are deny receipts in the log (one, when both were
    // issued within the same second: the same receipt), verified offline.
    let ids = d.w.verify_all();
    for answer in [&first, &second] {
        let id = answer["result"]["_meta"]["dev.rcpt/receipt"]
            .as_str()
            .unwrap();
        assert!(ids.iter().any(|i| i == id), "{id} not logged");
        let r = receipt(&d.w, id);
        assert_eq!(
            r["verdict"]["deny"]["reasons"],
            json!(["contract.unproven"])
        );
    }
}

#[test]
fn unbind_cancel_and_show() {
    let d = deploy();
    d.demonstrate(&[]);
    let shown = d.verb(&["show", "deploy"]);
    assert!(shown.contains("\"format\": \"rcpt.contract/1\""), "{shown}");
    d.verb(&["unbind", "deploy"]);
    // Unbound: not enforced.
    let mut p = d.proxy(&[]);
    admitted(&d.write(&mut p, 1, "other\n"));
    p.close();
    // A recording cancelled writes nothing.
    d.verb(&["rebind", "deploy"]);
    let mut p = d.proxy(&["--record", "deploy"]);
    d.read(&mut p, 1);
    admitted(&d.write(&mut p, 2, "v9\n"));
    let said = d.verb(&["cancel", "deploy"]);
    assert!(said.contains("cancelled"), "{said}");
    let (status, err) = p.close();
    assert!(status.success(), "{err}");
    assert!(err.contains("cancelled"), "{err}");
    assert_eq!(d.contract()["version"], 1);
}

#[test]
fn a_contract_learned_from_the_store_gates_like_a_recorded_one() {
    let d = deploy();
    // A session with --contracts (none yet): its steps' reads are kept.
    let mut p = d.proxy(&[]);
    d.read(&mut p, 1);
    admitted(&d.write(&mut p, 2, "v0\n"));
    d.read(&mut p, 3);
    admitted(&d.write(&mut p, 4, "v1\n"));
    p.close();
    let store = d.w.store.display().to_string();
    let said = d.verb(&["learn", "deploy", "--last", "1", "--store", &store]);
    assert!(said.contains("took the last 1 steps"), "{said}");
    assert!(said.contains("after 1 reads"), "{said}");
    let c = d.contract();
    assert_eq!(c["calls"].as_array().unwrap().len(), 1);
    assert_eq!(
        c["calls"][0]["arguments"],
        json!({"path": d.release, "content": "v1\n"})
    );
    // K out of range, and a second learn without a rebind, are refused.
    let out = Command::new(support::bin())
        .args([
            "gate", "contract", "learn", "x", "--last", "101", "--store", &store,
        ])
        .arg("--contracts")
        .arg(&d.contracts)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = Command::new(support::bin())
        .args([
            "gate", "contract", "learn", "deploy", "--last", "2", "--store", &store,
        ])
        .arg("--contracts")
        .arg(&d.contracts)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rebind"));
    // It gates: the learned call replayed after a read is admitted; the
    // earlier one (not taken) is not.
    let mut p = d.proxy(&[]);
    d.read(&mut p, 1);
    admitted(&d.write(&mut p, 2, "v1\n"));
    d.read(&mut p, 3);
    let (reasons, _) = refused(&d.write(&mut p, 4, "v0\n"));
    assert_eq!(reasons, ["contract.arguments"]);
    p.close();
    d.w.verify_all();
}

/// The Python SDK agent (tests/mcp/agent.py) in the legacy era with
/// `steps`, through the proxy before `server`: one value a step.
fn sdk_agent(
    w: &World,
    python: &std::path::Path,
    steps: &Value,
    proxy: &[String],
    server: &[String],
) -> Vec<Value> {
    let script = w.dir.join("script.json");
    std::fs::write(&script, steps.to_string()).unwrap();
    let out = Command::new(python)
        .arg(support::mcp::area().join("agent.py"))
        .arg("legacy")
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

#[test]
fn a_deploy_through_server_filesystem_and_the_sdk_client() {
    let (Some(fs), Some(python)) = (support::mcp::fs_server(), support::mcp::sdk_python()) else {
        return;
    };
    let w = World::new();
    let server = vec![fs.display().to_string(), w.work.display().to_string()];
    let table = w.pin(&server);
    let policy = w.policy(&table, &[("write_file", &["/path"])]);
    let contracts = w.dir.join("contracts");
    let config = w.work.join("config");
    let release = w.work.join("release");
    std::fs::write(&config, "target=prod\n").unwrap();
    let proxy = |extra: &[&str]| {
        let mut a = w.proxy_args(&policy);
        a.push("--contracts".into());
        a.push(contracts.display().to_string());
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let read = json!({"op": "call", "tool": "read_text_file", "arguments": {"path": config}});
    let write = |content: &str| json!({"op": "call", "tool": "write_file", "arguments": {"path": release, "content": content}});
    // Demonstrated.
    let out = sdk_agent(
        &w,
        &python,
        &json!([read, write("v1\n")]),
        &proxy(&["--record", "deploy"]),
        &server,
    );
    assert_eq!(out[1]["meta"]["dev.rcpt/verdict"], "admit", "{out:?}");
    let c: Value =
        serde_json::from_slice(&std::fs::read(contracts.join("deploy.json")).unwrap()).unwrap();
    assert_eq!(c["calls"][0]["tool"], "write_file");
    assert_eq!(c["calls"][0]["reads"][0]["tool"], "read_text_file");
    // Replayed: exact (admitted), the same read again (spent), an argument
    // changed after a fresh read, and a write with no read at all.
    let out = sdk_agent(
        &w,
        &python,
        &json!([read, write("v1\n"), write("v1\n"), read, write("v2\n")]),
        &proxy(&[]),
        &server,
    );
    let verdict = |o: &Value| o["meta"]["dev.rcpt/verdict"].clone();
    let reasons = |o: &Value| o["meta"]["dev.rcpt/reasons"].clone();
    assert_eq!(verdict(&out[1]), "admit", "{out:?}");
    assert_eq!(reasons(&out[2]), json!(["contract.read_spent"]));
    assert_eq!(out[2]["isError"], true);
    assert!(
        out[2]["text"]
            .as_str()
            .unwrap()
            .contains("contract deploy v1")
    );
    assert_eq!(reasons(&out[4]), json!(["contract.arguments"]));
    assert_eq!(std::fs::read_to_string(&release).unwrap(), "v1\n");
    // The config changed: the replay is refused and the contract unproven.
    std::fs::write(&config, "target=staging\n").unwrap();
    let out = sdk_agent(
        &w,
        &python,
        &json!([read, write("v1\n")]),
        &proxy(&[]),
        &server,
    );
    assert_eq!(reasons(&out[1]), json!(["contract.unproven"]));
    let c: Value =
        serde_json::from_slice(&std::fs::read(contracts.join("deploy.json")).unwrap()).unwrap();
    assert_eq!(c["status"], "unproven");
    // Every receipt verifies offline.
    let ids = w.verify_all();
    let refused_id = out[1]["meta"]["dev.rcpt/receipt"].as_str().unwrap();
    assert!(ids.iter().any(|i| i == refused_id));
    assert!(ids.len() >= 5, "{ids:?}");
}

#[test]
fn the_readme_contract_walkthrough_runs_as_written() {
    let Some(server) = support::mcp::fs_server() else {
        return;
    };
    if Command::new("jq").arg("--version").output().is_err() {
        assert!(
            !support::mcp::required(),
            "RCPT_REQUIRE_MCP=1: jq is missing"
        );
        support::skip("jq is not installed (the walkthrough writes the policy with it)");
        return;
    }
    let script = support::readme::block_after(
        "<!-- contract walkthrough: tests/mcp_contract.rs runs the next block -->",
    );
    let path = format!(
        "export PATH=\"{}:$PATH\"\n",
        server.parent().unwrap().display()
    );
    let (out, err, status) = support::readme::run_script(&format!("{path}{script}"));
    assert!(status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("deploy v1 bound proven"), "{out}");
    assert!(
        out.contains("5 verified, 0 failed, 0 not evaluated"),
        "{out}"
    );
}
