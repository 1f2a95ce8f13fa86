//! `rcpt gate mcp` beside direct calls to the same server (issue #36
//! "Bounds"): the scripted server of the tests (tests/mcp/fake_server.py,
//! recording nothing) is called directly and through the proxy, by a raw
//! JSON-RPC client on pipes, one call at a time (latency) and pipelined
//! (throughput). One table:
//!
//! - read: added latency of a read call (p50, p99), bound p99 <= 1 ms;
//! - step: added latency of a step writing one existing file (its
//!   pre-image stored, the decision and the receipt made durable, the
//!   receipt logged to a local log in batches), bound p50 <= 3 ms, p99 <=
//!   10 ms;
//! - steps/s: steps (one file each) with `RCPT_BENCH_MCP_DEPTH` calls in
//!   flight (default 64), bound 1,000/s: answered (the last answer in),
//!   and finished (every receipt also stored and logged: the store's
//!   pending directory empty again), beside the raw limit measured in the
//!   same run, one 1.5 KB file written and fsynced per step, one by one;
//! - memory: the proxy's resident set after 10% and after all of
//!   `RCPT_BENCH_MCP_CALLS` read calls (default 100,000): flat.
//!
//! `RCPT_BENCH_MCP_N` sets the calls of each latency row (default 2,000).
//! Figures hold against the bounds only on an idle machine: the load
//! average is printed first.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

fn env_size(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rcpt() -> PathBuf {
    // benches run from target/release/deps: the binary is beside it.
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    dir.join("rcpt")
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    fn start(mut cmd: Command) -> Peer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut p = Peer {
            child,
            stdin,
            stdout,
        };
        p.call(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}));
        writeln!(
            p.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        p
    }

    /// One message, written whole in one `write` as a real client does
    /// (a `Value` formatted straight into the pipe would be written in
    /// dozens of fragments, each a system call the server side pays for).
    fn send(&mut self, msg: &Value) {
        let line = format!("{msg}\n");
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|_| panic!("{line:?}"))
    }

    fn call(&mut self, msg: &Value) -> Value {
        self.send(msg);
        self.recv()
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    fn close(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

fn call(id: usize, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
}

/// (p50, p99) in ms of `n` sequential calls made by `make`.
fn latency(peer: &mut Peer, n: usize, make: &dyn Fn(usize) -> Value) -> (f64, f64) {
    let mut ms: Vec<f64> = Vec::with_capacity(n);
    for i in 0..n {
        let msg = make(i);
        let t = Instant::now();
        let a = peer.call(&msg);
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(a.get("result").is_some(), "{a}");
    }
    ms.sort_by(f64::total_cmp);
    (ms[n / 2], ms[n * 99 / 100])
}

/// Steps per second from `t` until the proxy's pending directory is
/// empty: every receipt stored and logged.
fn finished(w: &World, n: usize, t: Instant) -> f64 {
    let pending = w.dir.join("store/mcp/pending");
    while std::fs::read_dir(&pending).unwrap().next().is_some() {
        std::thread::sleep(Duration::from_millis(1));
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// The raw limit: files of 1.5 KB written and fsynced, one by one, per
/// second, in the bench's directory.
fn fsyncs_per_second(w: &World) -> f64 {
    let dir = w.dir.join("fsync");
    std::fs::create_dir_all(&dir).unwrap();
    let n = 500;
    let t = Instant::now();
    for i in 0..n {
        let mut f = std::fs::File::create(dir.join(i.to_string())).unwrap();
        f.write_all(&[7u8; 1500]).unwrap();
        f.sync_all().unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// Calls per second with `depth` in flight.
fn throughput(peer: &mut Peer, n: usize, depth: usize, make: &dyn Fn(usize) -> Value) -> f64 {
    let t = Instant::now();
    let mut sent = 0;
    let mut got = 0;
    while got < n {
        while sent < n && sent - got < depth {
            peer.send(&make(sent));
            sent += 1;
        }
        let a = peer.recv();
        assert!(a.get("result").is_some(), "{a}");
        got += 1;
    }
    n as f64 / t.elapsed().as_secs_f64()
}

struct World {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

fn world() -> World {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    let run = |args: &[&str]| {
        assert!(
            Command::new(rcpt())
                .args(args)
                .current_dir(&dir)
                .output()
                .unwrap()
                .status
                .success(),
            "{args:?}"
        )
    };
    run(&[
        "key",
        "generate",
        "--name",
        "gate.example/bench",
        "--out",
        "gate",
    ]);
    run(&[
        "key",
        "generate",
        "--name",
        "log.example/bench",
        "--out",
        "logkey",
    ]);
    run(&[
        "log",
        "init",
        "log",
        "--origin",
        "log.example/bench",
        "--key",
        "logkey.key",
    ]);
    std::fs::create_dir(dir.join("work")).unwrap();
    let obj = json!({"type": "object"});
    let tools = json!([{"name": "read", "inputSchema": obj, "annotations": {"readOnlyHint": true}},
                       {"name": "write", "inputSchema": obj}]);
    std::fs::write(dir.join("tools.json"), tools.to_string()).unwrap();
    World { _tmp: tmp, dir }
}

fn server(w: &World) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/fake_server.py");
    vec![
        "python3".into(),
        script.display().to_string(),
        w.dir.join("tools.json").display().to_string(),
        "-".into(),
    ]
}

fn proxy(w: &World) -> Peer {
    let pin = Command::new(rcpt())
        .args(["gate", "mcp", "pin", "--"])
        .args(server(w))
        .output()
        .unwrap();
    let mut table: Value = serde_json::from_slice(&pin.stdout).unwrap();
    table["tools"]["write"]["files"] = json!(["/path"]);
    let policy = json!({"name": "bench", "substrate": "tool-proxy", "server": {"name": "fake"}, "tools": table["tools"]});
    std::fs::write(w.dir.join("policy.json"), policy.to_string()).unwrap();
    let mut cmd = Command::new(rcpt());
    cmd.current_dir(&w.dir)
        .args([
            "gate",
            "mcp",
            "--policy",
            "policy.json",
            "--key",
            "gate.key",
            "--store",
            "store",
            "--root",
            "work",
            "--log",
            "log",
            "--",
        ])
        .args(server(w));
    Peer::start(cmd)
}

fn direct(w: &World) -> Peer {
    let s = server(w);
    let mut cmd = Command::new(&s[0]);
    cmd.args(&s[1..]);
    Peer::start(cmd)
}

fn main() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let n = env_size("RCPT_BENCH_MCP_N", 2000);
    let depth = env_size("RCPT_BENCH_MCP_DEPTH", 64);
    let calls = env_size("RCPT_BENCH_MCP_CALLS", 100_000);
    let w = world();
    let file = w.dir.join("work/f.txt");
    std::fs::write(&file, "0").unwrap();
    let read = |i: usize| call(i + 1, "read", json!({"path": file}));
    let write = |i: usize| {
        call(
            i + 1,
            "write",
            json!({"path": file, "content": format!("{i}")}),
        )
    };
    let (mut d, mut p) = (direct(&w), proxy(&w));
    p.call(&read(0));
    let (dr, pr) = (latency(&mut d, n, &read), latency(&mut p, n, &read));
    let (dw, pw) = (
        latency(&mut d, n / 2, &write),
        latency(&mut p, n / 2, &write),
    );
    println!(
        "| row | direct p50 ms | direct p99 ms | proxy p50 ms | proxy p99 ms | added p50 ms | added p99 ms | bound |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let row = |name: &str, d: (f64, f64), p: (f64, f64), bound: &str| {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {bound} |",
            d.0,
            d.1,
            p.0,
            p.1,
            p.0 - d.0,
            p.1 - d.1
        );
    };
    row("read call", dr, pr, "added p99 <= 1 ms");
    row("step, one file", dw, pw, "added p50 <= 3 ms, p99 <= 10 ms");
    let n_tp = n * 2;
    let tp_direct = throughput(&mut d, n_tp, depth, &|i| {
        call(
            i + 1_000_000,
            "write",
            json!({"path": file, "content": format!("t{i}")}),
        )
    });
    let start = Instant::now();
    let tp_proxy = throughput(&mut p, n_tp, depth, &|i| {
        call(
            i + 1_000_000,
            "write",
            json!({"path": file, "content": format!("t{i}")}),
        )
    });
    let tp_finished = finished(&w, n_tp, start);
    let raw = fsyncs_per_second(&w);
    println!(
        "steps/s ({n_tp} steps, {depth} in flight): direct {tp_direct:.0}, proxy answered {tp_proxy:.0}, \
         finished (stored and logged) {tp_finished:.0} (bound 1,000); raw limit: {raw:.0} fsyncs/s one by one"
    );
    let mut rss = Vec::new();
    let tenth = (calls / 10).max(1);
    let mut done = 0;
    while done < calls {
        throughput(&mut p, tenth, depth, &|i| {
            call(i + 2_000_000 + done, "read", json!({"path": file}))
        });
        done += tenth;
        rss.push(p.rss_kib());
    }
    println!("proxy RSS KiB after each tenth of {calls} read calls: {rss:?}");
    d.close();
    p.close();
    std::thread::sleep(Duration::from_millis(100));
}
