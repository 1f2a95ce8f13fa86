//! `rcpt gate mcp --listen --upstream` (Streamable HTTP, spec/gate-mcp.md):
//! the Python SDK's client through the proxy to a server built with the
//! same SDK (tests/mcp/http_server.py), in both eras; the Origin check,
//! the body deciding over the Mcp-Method header, and the same gating as
//! on stdio, every receipt verified offline.
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use serde_json::json;
use std::io::{Read as _, Write as _};
use std::process::{Child, Command, Stdio};
use support::mcp::World;

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for(port: u16) {
    for _ in 0..300 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("nothing listens on {port}");
}

/// A raw HTTP/1.1 POST: (status, body).
fn post(addr: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    (
        status,
        out.split_once("\r\n\r\n")
            .map(|x| x.1.to_string())
            .unwrap_or_default(),
    )
}

/// The SDK's server on Streamable HTTP at a free port, with the policy
/// written (write_file a step on `/path`): the server, its python and the
/// upstream URL.
fn http_server(w: &World) -> Option<(Killed, std::path::PathBuf, String)> {
    let python = support::mcp::sdk_python()?;
    let script = support::mcp::area()
        .join("http_server.py")
        .display()
        .to_string();
    let table = w.pin(&[python.display().to_string(), script.clone(), "stdio".into()]);
    let mut policy =
        json!({"name": "http", "substrate": "tool-proxy", "server": {"name": "files"}});
    policy["tools"] = table["tools"].clone();
    policy["tools"]["write_file"]["files"] = json!(["/path"]);
    std::fs::write(w.dir.join("policy.json"), policy.to_string()).unwrap();
    let port = free_port();
    let server = Killed(
        Command::new(&python)
            .arg(&script)
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(port);
    Some((server, python, format!("http://127.0.0.1:{port}/mcp")))
}

/// The proxy on Streamable HTTP before `upstream`, with `extra` arguments:
/// the proxy and the address it listens on.
fn http_proxy(w: &World, upstream: &str, extra: &[&str]) -> (Killed, String) {
    let mut args = w.proxy_args(&w.dir.join("policy.json"));
    args.extend([
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--upstream".into(),
        upstream.to_string(),
    ]);
    args.extend(extra.iter().map(|a| a.to_string()));
    let mut proxy = Killed(
        Command::new(support::bin())
            .args(&args)
            .current_dir(&w.dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr = support::listening(&mut proxy.0, None).to_string();
    (proxy, addr)
}

/// The SDK agent's lines for `steps`, through the proxy at `addr`.
fn agent(
    w: &World,
    python: &std::path::Path,
    era: &str,
    addr: &str,
    steps: &serde_json::Value,
) -> Vec<serde_json::Value> {
    std::fs::write(w.dir.join("script.json"), steps.to_string()).unwrap();
    let out = Command::new(python)
        .arg(support::mcp::area().join("agent.py"))
        .args([era, "script.json", "--", &format!("http://{addr}/mcp")])
        .current_dir(&w.dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{era}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// SIGTERM: the proxy stops serving, stores and logs every receipt, and
/// (recording) writes its contract; it exits 0.
fn terminate(mut proxy: Killed) {
    let pid = rustix::process::Pid::from_raw(proxy.0.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert!(proxy.0.wait().unwrap().success());
}

/// `--contracts` and `--record` over Streamable HTTP gate as on stdio: a
/// deploy (read the config, write the release) demonstrated and recorded,
/// then replayed exactly (admitted), and replayed without the read or
/// with another argument (denied with the contract's reasons).
#[test]
fn a_contract_recorded_and_enforced_over_streamable_http() {
    let w = World::new();
    let Some((_server, python, upstream)) = http_server(&w) else {
        return;
    };
    let contracts = w.dir.join("contracts");
    let c = contracts.display().to_string();
    let config = w.work.join("config.txt");
    std::fs::write(&config, "replicas=3\n").unwrap();
    let release = w.work.join("release.txt");
    let read = json!({"op": "call", "tool": "read_file", "arguments": {"path": config}});
    let write = |content: &str| json!({"op": "call", "tool": "write_file", "arguments": {"path": release, "content": content}});
    let (proxy, addr) = http_proxy(&w, &upstream, &["--contracts", &c, "--record", "deploy"]);
    let lines = agent(&w, &python, "legacy", &addr, &json!([read, write("v1")]));
    assert_eq!(lines[1]["meta"]["dev.rcpt/verdict"], "admit", "{lines:?}");
    terminate(proxy);
    let contract: serde_json::Value =
        serde_json::from_slice(&std::fs::read(contracts.join("deploy.json")).unwrap()).unwrap();
    assert_eq!(contract["calls"].as_array().unwrap().len(), 1, "{contract}");
    let (proxy, addr) = http_proxy(&w, &upstream, &["--contracts", &c]);
    let lines = agent(
        &w,
        &python,
        "2026-07-28",
        &addr,
        &json!([read, write("v1"), write("v1"), read, write("v2")]),
    );
    assert_eq!(lines[1]["meta"]["dev.rcpt/verdict"], "admit", "{lines:?}");
    for (i, reason) in [(2, "contract.read_spent"), (4, "contract.arguments")] {
        assert_eq!(lines[i]["isError"], true, "{lines:?}");
        assert_eq!(
            lines[i]["meta"]["dev.rcpt/reasons"],
            json!([reason]),
            "{lines:?}"
        );
    }
    terminate(proxy);
    assert_eq!(std::fs::read_to_string(&release).unwrap(), "v1");
    assert_eq!(
        w.verify_all().len(),
        4,
        "a recorded write, a replay, two refusals"
    );
}

#[test]
fn the_sdk_client_over_streamable_http_is_gated_in_both_eras() {
    let w = World::new();
    let Some((_server, python, upstream)) = http_server(&w) else {
        return;
    };
    let (proxy, addr) = http_proxy(&w, &upstream, &[]);
    let file = w.work.join("h.txt");
    let steps = json!([
        {"op": "list"},
        {"op": "call", "tool": "write_file", "arguments": {"path": file, "content": "x"}},
        {"op": "call", "tool": "write_file", "arguments": {"path": w.dir.join("out.txt"), "content": "x"}},
        {"op": "call", "tool": "read_file", "arguments": {"path": file}}
    ]);
    for era in ["legacy", "2026-07-28"] {
        let lines = agent(&w, &python, era, &addr, &steps);
        assert_eq!(
            lines[1]["meta"]["dev.rcpt/verdict"], "admit",
            "{era}: {:?}",
            lines
        );
        assert_eq!(
            lines[2]["meta"]["dev.rcpt/reasons"],
            json!(["files.outside_root"]),
            "{era}"
        );
        assert_eq!(lines[3]["text"], "x", "{era}");
        assert_eq!(
            lines[4]["protocol"],
            if era == "legacy" {
                "2025-11-25"
            } else {
                "2026-07-28"
            }
        );
    }
    assert!(!w.dir.join("out.txt").exists());
    // Another Origin is refused; the body decides, a header that differs is refused.
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{}}}"#;
    let (status, _) = post(&addr, &[("Origin", "http://evil.example")], call);
    assert_eq!(status, 403);
    let (status, body) = post(
        &addr,
        &[
            ("Mcp-Method", "tools/list"),
            ("MCP-Protocol-Version", "2026-07-28"),
        ],
        call,
    );
    assert_eq!(status, 400);
    assert!(body.contains("-32020"), "{body}");
    // SIGTERM: the proxy stops serving and every receipt is stored and logged.
    terminate(proxy);
    assert_eq!(
        w.verify_all().len(),
        4,
        "two admitted writes and two refusals"
    );
    assert_eq!(
        std::fs::read_dir(w.store.join("mcp/pending"))
            .unwrap()
            .count(),
        0
    );
}
