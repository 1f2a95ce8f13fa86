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

#[test]
fn the_sdk_client_over_streamable_http_is_gated_in_both_eras() {
    let Some(python) = support::mcp::sdk_python() else {
        return;
    };
    let w = World::new();
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
    let _server = Killed(
        Command::new(&python)
            .arg(&script)
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for(port);
    let mut args = w.proxy_args(&w.dir.join("policy.json"));
    args.extend([
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--upstream".into(),
        format!("http://127.0.0.1:{port}/mcp"),
    ]);
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
    let file = w.work.join("h.txt");
    let steps = json!([
        {"op": "list"},
        {"op": "call", "tool": "write_file", "arguments": {"path": file, "content": "x"}},
        {"op": "call", "tool": "write_file", "arguments": {"path": w.dir.join("out.txt"), "content": "x"}},
        {"op": "call", "tool": "read_file", "arguments": {"path": file}}
    ]);
    std::fs::write(w.dir.join("script.json"), steps.to_string()).unwrap();
    for era in ["legacy", "2026-07-28"] {
        let out = Command::new(&python)
            .arg(support::mcp::area().join("agent.py"))
            .args([era, "script.json", "--", &format!("http://{addr}/mcp")])
            .current_dir(&w.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{era}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
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
    let pid = rustix::process::Pid::from_raw(proxy.0.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert!(proxy.0.wait().unwrap().success());
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
