//! Crash trials of `rcpt gate mcp` (spec/gate-mcp.md "Crash safety"): the
//! proxy and its server are SIGKILLed together at calibrated random moments
//! during a stream of step calls, many times. Then the proxy is started
//! again on the same store and log. Every step that reached the server
//! (the server records every line before it acts) must have exactly one
//! receipt in the log, whose `applied` is what the disk says; no receipt is
//! issued twice; no pending step is left; the log checks and every object
//! of the store re-hashes to its name.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::{Duration, Instant};
use support::mcp::{Proxy, World};

/// Trials; each kills once.
const TRIALS: u64 = 24;
/// Calls in each trial's stream (more than are answered before the kill).
const STREAM: usize = 40;

fn start(w: &World, policy: &std::path::Path) -> Proxy {
    let mut cmd = Command::new(support::bin());
    cmd.args(w.proxy_args(policy)).arg("--").args(w.fake());
    // Its own process group: the kill takes the server too, as a crash of
    // the machine would (no orphan writes after the restart read the disk).
    cmd.process_group(0);
    Proxy::spawn(cmd, &w.dir)
}

fn call(n: usize, trial: u64, w: &World) -> Value {
    let path = w.work.join(format!("t{trial}-{n}.txt"));
    json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
           "params": {"name": "write", "arguments": {"path": path, "content": format!("{trial}/{n}")}}})
}

/// Mean seconds of one step call, through the proxy, on this machine now.
fn calibrate(w: &World, policy: &std::path::Path) -> f64 {
    let mut p = start(w, policy);
    p.initialize();
    let t = Instant::now();
    for n in 1..=20 {
        p.send(&call(n, 999, w).to_string());
        let a = p.recv();
        assert!(a["result"]["_meta"]["dev.rcpt/receipt"].is_string(), "{a}");
    }
    let per = t.elapsed().as_secs_f64() / 20.0;
    p.close();
    per
}

fn kill_group(p: &Proxy) {
    let pid = rustix::process::Pid::from_raw(p.child.id() as i32).unwrap();
    rustix::process::kill_process_group(pid, rustix::process::Signal::KILL).unwrap();
}

/// The change_id of a write call as the proxy computes it.
fn change_id(arguments: &Value, def: &str) -> String {
    let args = rcpt::mcp::table::jcs_sha256(arguments).unwrap();
    let def: rcpt::digest::Digest = def.parse().unwrap();
    rcpt::mcp::step::change_id("fake", "write", Some(&def), &args).to_string()
}

#[test]
fn sigkill_at_any_moment_leaves_every_forwarded_step_with_exactly_one_receipt() {
    let w = World::new();
    let table = w.pin(&w.fake());
    let def = table["tools"]["write"]["def"].as_str().unwrap().to_string();
    let policy = w.policy(&table, &[("write", &["/path"])]);
    let per_call = calibrate(&w, &policy);
    eprintln!("calibrated: {:.2} ms a step call", per_call * 1000.0);
    let mut rng = support::Rng(0x5eed_1234_abcd_0001);
    for trial in 0..TRIALS {
        std::fs::remove_file(&w.received).ok();
        let mut p = start(&w, &policy);
        p.initialize();
        // Let the proxy's own tools/list settle with a first call.
        p.send(&call(0, trial, &w).to_string());
        p.recv();
        let wait = Duration::from_secs_f64(per_call * (rng.next() % 8_000) as f64 / 1_000.0);
        let writer = {
            let lines: Vec<String> = (1..STREAM)
                .map(|n| call(n, trial, &w).to_string())
                .collect();
            let mut stdin = p.take_stdin();
            std::thread::spawn(move || {
                // Pipelined: the stream is written at once, as a busy agent would.
                if let Some(s) = stdin.as_mut() {
                    use std::io::Write as _;
                    for l in lines {
                        if s.write_all(l.as_bytes())
                            .and_then(|()| s.write_all(b"\n"))
                            .is_err()
                        {
                            return;
                        }
                    }
                }
                std::thread::sleep(Duration::from_secs(30));
            })
        };
        std::thread::sleep(wait);
        kill_group(&p);
        let _ = p.child.wait();
        drop(writer);
        let pending = std::fs::read_dir(w.store.join("mcp/pending")).map_or(0, |d| d.count());
        // Restart: the proxy finishes what the dead one left, then ends.
        let restart = start(&w, &policy);
        let (status, err) = restart.close();
        assert!(status.success(), "restart {trial}: {err}");
        let reached = check_trial(&w, trial, &def);
        eprintln!(
            "trial {trial}: killed after {:.1} ms; {reached} steps had reached the server; \
             {pending} were pending at the restart",
            wait.as_secs_f64() * 1000.0
        );
    }
    check_store_and_log(&w);
}

/// Every write that reached the server has exactly one receipt, `applied`
/// as the disk says; no change has two.
fn check_trial(w: &World, trial: u64, def: &str) -> usize {
    let mut by_change: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in w.receipts() {
        by_change
            .entry(r["change_id"].as_str().unwrap().to_string())
            .or_default()
            .push(r);
    }
    for (c, rs) in &by_change {
        assert_eq!(
            rs.len(),
            1,
            "trial {trial}: change {c} has {} receipts",
            rs.len()
        );
    }
    let mut reached = 0;
    for line in w.received() {
        let m: Value = serde_json::from_str(&line).unwrap();
        if m["params"]["name"] != "write" {
            continue;
        }
        reached += 1;
        let args = &m["params"]["arguments"];
        let id = change_id(args, def);
        let rs = by_change.get(&id).unwrap_or_else(|| {
            panic!("trial {trial}: the step {args} reached the server but has no receipt")
        });
        let written = std::path::Path::new(args["path"].as_str().unwrap()).exists();
        assert_eq!(
            rs[0]["applied"], written,
            "trial {trial}: {args}: applied vs the disk"
        );
    }
    let pending = w.store.join("mcp/pending");
    let left: Vec<_> = std::fs::read_dir(&pending)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "trial {trial}: pending steps left: {left:?}"
    );
    reached
}

fn check_store_and_log(w: &World) {
    let out = Command::new(support::bin())
        .args(["log", "check"])
        .arg(&w.log)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "log check: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut objects = 0;
    for fan in std::fs::read_dir(w.store.join("objects"))
        .unwrap()
        .flatten()
    {
        for o in std::fs::read_dir(fan.path()).unwrap().flatten() {
            let name = format!(
                "{}{}",
                fan.file_name().to_string_lossy(),
                o.file_name().to_string_lossy()
            );
            let bytes = std::fs::read(o.path()).unwrap();
            assert_eq!(
                blake3::hash(&bytes).to_hex().as_str(),
                name,
                "store object {name}"
            );
            objects += 1;
        }
    }
    assert!(objects > 0);
    w.verify_all();
}

/// A world whose file `kept.txt` holds `old`, and a proxy killed while a
/// slow step on it was forwarded: (the world, its policy, the file).
fn crashed_while_forwarded(old: &[u8]) -> (World, std::path::PathBuf, std::path::PathBuf) {
    let w = World::new();
    let table = w.pin(&w.fake());
    let policy = w.policy(&table, &[("slow", &["/path"])]);
    let f = w.work.join("kept.txt");
    std::fs::write(&f, old).unwrap();
    kill_while_forwarded(&w, &policy, &f);
    (w, policy, f)
}

/// Start a proxy, send a slow step on `f` the server holds, and kill the
/// proxy with its server once the step has reached the server: one
/// decided step is left pending.
fn kill_while_forwarded(w: &World, policy: &std::path::Path, f: &std::path::Path) {
    let mut p = start(w, policy);
    p.initialize();
    let args = json!({"path": f, "content": "new", "ms": 60_000});
    p.send(
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "slow", "arguments": args}})
        .to_string(),
    );
    // Decided and forwarded: the server has the call, which it holds.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !w.received().iter().any(|l| l.contains("\"slow\"")) {
        assert!(
            Instant::now() < deadline,
            "the step never reached the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_group(&p);
    let _ = p.child.wait();
    assert_eq!(
        std::fs::read_dir(w.store.join("mcp/pending"))
            .unwrap()
            .count(),
        1
    );
}

/// A small pre-image rides in the step's own pending file: a proxy killed
/// after forwarding leaves it there, and recovery's receipt has the
/// inverse, its pre-image now stored as an object.
#[test]
fn a_carried_preimage_survives_a_crash_and_the_receipt_keeps_its_inverse() {
    let old = b"the content before\n";
    let (w, policy, _) = crashed_while_forwarded(old);
    let hex = rcpt::digest::to_hex(&rcpt::digest::Digest::blake3(old).bytes);
    let object = w.store.join("objects").join(&hex[..2]).join(&hex[2..]);
    assert!(
        !object.exists(),
        "carried in the pending file, not stored yet"
    );
    let restart = start(&w, &policy);
    let (status, err) = restart.close();
    assert!(status.success(), "restart: {err}");
    let receipts = w.receipts();
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert!(
        !receipts[0]["inverse_delta_id"].is_null(),
        "{}",
        receipts[0]
    );
    assert_eq!(std::fs::read(&object).unwrap(), old);
    check_store_and_log(&w);
}

/// A step's large pre-images (over what its pending file carries) and its
/// decision are made durable in one phase: a crash between them leaves a
/// decision whose pre-image is missing. That commit never ended, so the
/// call was never forwarded; recovery issues the step's receipt without an
/// inverse (a net that is not there is never claimed) and says why.
#[test]
fn a_decision_left_without_its_preimage_is_recovered_without_an_inverse() {
    let old = vec![b'x'; rcpt::mcp::ledger::MAX_CARRIED_PREIMAGE_BYTES + 1];
    let (w, policy, f) = crashed_while_forwarded(&old);
    // Its pre-image, as if the commit had not ended.
    let hex = rcpt::digest::to_hex(&rcpt::digest::Digest::blake3(&old).bytes);
    std::fs::remove_file(w.store.join("objects").join(&hex[..2]).join(&hex[2..])).unwrap();
    let restart = start(&w, &policy);
    let (status, err) = restart.close();
    assert!(status.success(), "restart: {err}");
    let receipts = w.receipts();
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    let r = &receipts[0];
    assert!(r["inverse_delta_id"].is_null(), "{r}");
    assert_eq!(r["applied"], false, "{r}");
    // The stored evidence says why.
    let id: rcpt::digest::Digest = w.bundles()[0]["receipt_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let store = rcpt::gate::store::GateStore::open(&w.store).unwrap();
    let record = store
        .receipt_record(&id)
        .unwrap()
        .expect("the receipt's record");
    let text = format!("{:?}", store.get_record(&record).unwrap());
    assert!(
        text.contains("a pre-image is missing") && text.contains("never forwarded"),
        "{text}"
    );
    assert_eq!(std::fs::read(&f).unwrap(), old);
    check_store_and_log(&w);
}
