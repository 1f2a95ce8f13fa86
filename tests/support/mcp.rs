//! Support for the tests of `rcpt gate mcp`: a world (keys, a log, a trust
//! file, a work root, a store), the scripted server (tests/mcp/
//! fake_server.py, stdlib Python), the real servers and client the test
//! area installs (tests/mcp: npm's server-filesystem, PyPI's mcp SDK and
//! mcp-server-git), and a raw JSON-RPC client on the proxy's pipes.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// tests/mcp of the repository.
pub fn area() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// Whether CI requires the real MCP parts (then a missing one fails).
pub fn required() -> bool {
    std::env::var_os("RCPT_REQUIRE_MCP").is_some_and(|v| v == "1")
}

/// A real part at `path`, or a visible skip (a failure where CI requires it).
fn part(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "{what} is not installed at {} (npm ci --prefix tests/mcp; python3 -m venv tests/mcp/.venv && \
         tests/mcp/.venv/bin/pip install -r tests/mcp/requirements.txt)",
        path.display()
    );
    assert!(!required(), "RCPT_REQUIRE_MCP=1: {why}");
    super::skip(&why);
    None
}

/// `@modelcontextprotocol/server-filesystem` (npm).
pub fn fs_server() -> Option<PathBuf> {
    part(
        area().join("node_modules/.bin/mcp-server-filesystem"),
        "@modelcontextprotocol/server-filesystem",
    )
}

/// `mcp-server-git` (PyPI).
pub fn git_server() -> Option<PathBuf> {
    part(area().join(".venv/bin/mcp-server-git"), "mcp-server-git")
}

/// The Python with the `mcp` SDK (PyPI).
pub fn sdk_python() -> Option<PathBuf> {
    part(area().join(".venv/bin/python"), "the Python mcp SDK")
}

/// A world for one test.
pub struct World {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub work: PathBuf,
    pub store: PathBuf,
    pub log: PathBuf,
    pub trust: PathBuf,
    pub tools: PathBuf,
    pub received: PathBuf,
}

/// The scripted server's tools.
pub fn fake_tools() -> Value {
    let obj = json!({"type": "object"});
    json!([
        {"name": "read", "description": "read a file", "inputSchema": obj, "annotations": {"readOnlyHint": true}},
        {"name": "write", "description": "write a file", "inputSchema": obj},
        {"name": "slow", "description": "write a file slowly", "inputSchema": obj},
        {"name": "crash", "description": "exit", "inputSchema": obj},
        {"name": "progress", "description": "progress", "inputSchema": obj, "annotations": {"readOnlyHint": true}},
        {"name": "ask", "description": "asks the client", "inputSchema": obj, "annotations": {"readOnlyHint": true}},
        {"name": "garbage", "description": "prints garbage", "inputSchema": obj, "annotations": {"readOnlyHint": true}},
        {"name": "fail", "description": "fails", "inputSchema": obj},
        {"name": "boom", "description": "errors", "inputSchema": obj}
    ])
}

impl World {
    pub fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(tmp.path()).unwrap();
        let run = |args: &[&str]| {
            let out = Command::new(super::bin())
                .args(args)
                .current_dir(&dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&[
            "key",
            "generate",
            "--name",
            "gate.example/agent",
            "--out",
            "gate",
        ]);
        run(&[
            "key",
            "generate",
            "--name",
            "log.example/receipts",
            "--out",
            "logkey",
        ]);
        run(&[
            "trust",
            "new",
            "--issuer",
            "gate.vkey",
            "--log",
            "logkey.vkey",
            "-o",
            "trust.json",
        ]);
        run(&[
            "log",
            "init",
            "log",
            "--origin",
            "log.example/receipts",
            "--key",
            "logkey.key",
            "--trust",
            "trust.json",
        ]);
        let work = dir.join("work");
        std::fs::create_dir(&work).unwrap();
        let tools = dir.join("tools.json");
        std::fs::write(&tools, fake_tools().to_string()).unwrap();
        World {
            store: dir.join("store"),
            log: dir.join("log"),
            trust: dir.join("trust.json"),
            received: dir.join("received.log"),
            work,
            tools,
            dir,
            tmp,
        }
    }

    /// The scripted server's command.
    pub fn fake(&self) -> Vec<String> {
        vec![
            "python3".into(),
            area().join("fake_server.py").display().to_string(),
            self.tools.display().to_string(),
            self.received.display().to_string(),
        ]
    }

    /// What reached the scripted server, one message a line.
    pub fn received(&self) -> Vec<String> {
        std::fs::read_to_string(&self.received)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// `gate mcp pin` of `command`: the table.
    pub fn pin(&self, command: &[String]) -> Value {
        let out = Command::new(super::bin())
            .args(["gate", "mcp", "pin", "--"])
            .args(command)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pin: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// A policy file from a pinned table, with each step tool's pointers.
    pub fn policy(&self, table: &Value, files: &[(&str, &[&str])]) -> PathBuf {
        let mut p = json!({"name": "agent", "substrate": "tool-proxy", "server": {"name": "fake"}});
        p["tools"] = table["tools"].clone();
        for (tool, pointers) in files {
            p["tools"][*tool]["files"] = json!(pointers);
        }
        let path = self.dir.join("policy.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&p).unwrap()).unwrap();
        path
    }

    /// The proxy's arguments before `-- COMMAND` (log included).
    pub fn proxy_args(&self, policy: &Path) -> Vec<String> {
        [
            "gate",
            "mcp",
            "--policy",
            &policy.display().to_string(),
            "--key",
            "gate.key",
            "--store",
            &self.store.display().to_string(),
            "--root",
            &self.work.display().to_string(),
            "--log",
            &self.log.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// Start the proxy before `command`.
    pub fn proxy(&self, policy: &Path, command: &[String]) -> Proxy {
        let mut cmd = Command::new(super::bin());
        cmd.args(self.proxy_args(policy)).arg("--").args(command);
        Proxy::spawn(cmd, &self.dir)
    }

    /// Every entry of the log as a bundle (JSON lines), via `log prove`.
    pub fn bundles(&self) -> Vec<Value> {
        let out = Command::new(super::bin())
            .args(["log", "prove"])
            .arg(&self.log)
            .args(["--all", "-o", "-"])
            .output()
            .unwrap();
        if !out.status.success() {
            return Vec::new();
        }
        out.stdout
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    /// Every bundle of the log verifies offline; their receipt ids.
    pub fn verify_all(&self) -> Vec<String> {
        let bundles = self.bundles();
        let mut input = Vec::new();
        for b in &bundles {
            input.extend_from_slice(b.to_string().as_bytes());
            input.push(b'\n');
        }
        let mut child = Command::new(super::bin())
            .args(["verify", "-", "--trust"])
            .arg(&self.trust)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&input).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "verify: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        bundles
            .iter()
            .map(|b| b["receipt_id"].as_str().unwrap().to_string())
            .collect()
    }

    /// The decoded payload of every receipt in the log, in order.
    pub fn receipts(&self) -> Vec<Value> {
        self.bundles().iter().map(payload_of).collect()
    }
}

/// The payload of a bundle's receipt, as JSON (via `receipt inspect --json`).
pub fn payload_of(bundle: &Value) -> Value {
    let mut child = Command::new(super::bin())
        .args(["receipt", "inspect", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(bundle.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["payload"].clone()
}

/// A raw JSON-RPC client on a child's pipes.
pub struct Proxy {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pub stderr: PathBuf,
}

impl Proxy {
    pub fn spawn(mut cmd: Command, dir: &Path) -> Proxy {
        let stderr = dir.join(format!("proxy-{}.stderr", std::process::id() ^ rand_u32()));
        let mut child = cmd
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Proxy {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        }
    }

    /// The pipe to the proxy's stdin, for a writer of its own.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Send one line as it is.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line from the proxy (raw), within 30 s.
    pub fn recv_raw(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no message from the proxy; stderr: {}", self.stderr_text()))
    }

    /// The next message from the proxy.
    pub fn recv(&self) -> Value {
        serde_json::from_str(&self.recv_raw()).unwrap()
    }

    /// Send a request; its answer (other messages returned too, in order).
    pub fn request(&mut self, id: Value, method: &str, params: Value) -> (Value, Vec<Value>) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&msg.to_string());
        let mut others = Vec::new();
        loop {
            let m = self.recv();
            if m.get("id") == Some(&id) && m.get("method").is_none() {
                return (m, others);
            }
            others.push(m);
        }
    }

    /// The legacy handshake.
    pub fn initialize(&mut self) {
        let (r, _) = self.request(
            json!(0),
            "initialize",
            json!({"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
        );
        assert!(r.get("result").is_some(), "{r}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    /// A tools/call: its answer.
    pub fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.request(
            json!(id),
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
        .0
    }

    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Close the client's side; the exit status and stderr.
    pub fn close(mut self) -> (std::process::ExitStatus, String) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        let err = self.stderr_text();
        (status, err)
    }
}

fn rand_u32() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(1);
    N.fetch_add(1, Ordering::Relaxed)
        .wrapping_mul(2_654_435_761)
}

/// The receipt id in an answer's `_meta`.
pub fn receipt_of(answer: &Value) -> Option<String> {
    answer["result"]["_meta"]["dev.rcpt/receipt"]
        .as_str()
        .map(str::to_string)
}
