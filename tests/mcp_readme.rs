//! The README's "Gating an agent's tool calls": the walkthrough block run
//! as a script with the real `mcp-server-filesystem` (tests/mcp, npm) on
//! PATH, and the agent configuration snippet checked: valid JSON whose
//! `rcpt` arguments the command line accepts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::readme::{block_after, run_script};

#[test]
fn the_agent_walkthrough_runs_as_written() {
    let Some(server) = support::mcp::fs_server() else {
        return;
    };
    if std::process::Command::new("jq")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            !support::mcp::required(),
            "RCPT_REQUIRE_MCP=1: jq is missing"
        );
        support::skip("jq is not installed (the walkthrough merges the pinned table with it)");
        return;
    }
    let script = block_after("<!-- agent walkthrough: tests/mcp_readme.rs runs the next block -->");
    let path = format!(
        "export PATH=\"{}:$PATH\"\n",
        server.parent().unwrap().display()
    );
    let (out, err, status) = run_script(&format!("{path}{script}"));
    assert!(status.success(), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("2 verified, 0 failed, 0 not evaluated"),
        "{out}"
    );
    assert!(
        out.contains("1 verified, 0 failed, 0 not evaluated"),
        "the undo's receipt: {out}"
    );
}

#[test]
fn the_agent_configuration_names_a_command_line_rcpt_accepts() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let after = readme
        .split_once("<!-- agent config: tests/mcp_readme.rs checks the next block -->")
        .unwrap()
        .1;
    let json = after
        .split_once("```json\n")
        .unwrap()
        .1
        .split_once("\n```")
        .unwrap()
        .0;
    let config: serde_json::Value = serde_json::from_str(json).unwrap();
    let server = &config["mcpServers"]["filesystem"];
    assert_eq!(server["command"], "rcpt");
    let args: Vec<&str> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let sep = args.iter().position(|a| *a == "--").unwrap();
    assert_eq!(&args[sep + 1..sep + 3], &["npx", "-y"]);
    // The flags parse: the run stops at the missing policy file (exit 2,
    // naming it), not at the command line.
    let out = std::process::Command::new(support::bin())
        .args(&args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("/home/me/agent.json"), "{err}");
}
