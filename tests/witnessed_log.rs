//! `rcpt log serve --witness-policy`: three real `rcpt witness serve`
//! processes and a 2-of-3 quorum. Submissions are answered only once a
//! quorum cosigned the checkpoint that holds them; one witness down still
//! publishes, two down holds everything back until one returns; a witness
//! whose cosignatures do not verify under the policy key does not count;
//! a second log with the same key and origin but other entries (a fork)
//! cannot get the same witnesses to cosign; and the cosigned checkpoint is
//! stored in the log (offline `log prove` bundles pass `verify --policy`,
//! a restart publishes it, one killed before the quorum re-witnesses).
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::serve as serve_support;
use support::witness as witness_support;

use rcpt::tlog::cosig::CosigStatus;
use rcpt::tlog::note::{Checkpoint, Note};
use rcpt::tlog::policy::TlogPolicy;
use serve_support::{ORIGIN, Served, envelope, init_log, log_key, raw, write_trust};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;
use witness_support::{WitnessProc, init_witness, logs_policy, witness_key};

/// How long a held-back submission is watched for an answer it must not get.
const HELD_BACK: Duration = Duration::from_secs(3);

struct World {
    dirs: Vec<PathBuf>,
    witnesses: Vec<Option<WitnessProc>>,
    addrs: Vec<SocketAddr>,
    policy_text: String,
    policy: PathBuf,
}

impl World {
    /// Three witnesses of the served log, started; the log's policy names
    /// them with a 2-of-3 quorum. With `lying`, the policy names witness
    /// w3 with a key other than the one it signs with.
    fn new(tmp: &Path, lying: bool) -> World {
        let mut dirs = Vec::new();
        let mut witnesses = Vec::new();
        let mut addrs = Vec::new();
        let mut policy_text = String::new();
        for (i, name) in ["w1", "w2", "w3"].into_iter().enumerate() {
            let seed = 51 + i as u8;
            let (dir, mut vkey) = init_witness(tmp, name, seed, &logs_policy(ORIGIN, &log_key()));
            if lying && name == "w3" {
                let wrong = rcpt::tlog::cosig::WitnessVerifier::new(
                    &format!("witness.example/{name}"),
                    witness_key(99).verifying_key(),
                )
                .unwrap();
                vkey = wrong.to_string();
            }
            let w = WitnessProc::start(&dir, "127.0.0.1:0");
            policy_text.push_str(&format!("witness {name} {vkey} {}\n", w.url()));
            addrs.push(w.addr);
            dirs.push(dir);
            witnesses.push(Some(w));
        }
        policy_text.push_str("group g 2 w1 w2 w3\nquorum g\n");
        let policy = tmp.join("log.policy");
        std::fs::write(&policy, &policy_text).unwrap();
        World {
            dirs,
            witnesses,
            addrs,
            policy_text,
            policy,
        }
    }

    fn stop(&mut self, i: usize) {
        if let Some(mut w) = self.witnesses[i].take() {
            w.kill();
        }
    }

    /// Restart witness `i` on its old address (the policy's URL).
    fn restart(&mut self, i: usize) {
        let addr = self.addrs[i].to_string();
        self.witnesses[i] = Some(WitnessProc::start(&self.dirs[i], &addr));
    }

    fn serve(&self, dir: &Path, trust: &Path) -> Served {
        let policy = self.policy.to_str().unwrap();
        Served::start(
            dir,
            trust,
            &["--witness-policy", policy, "--batch-wait", "0ms"],
        )
    }
}

/// The published checkpoint: its size and how many listed witnesses'
/// cosignatures verify (every cosignature line present must verify).
fn published(log: &Served, policy_text: &str) -> (u64, usize) {
    let r = raw(log.addr, "GET", "/checkpoint", &[], b"");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let note = Note::parse(&r.body).unwrap();
    let policy = TlogPolicy::parse(policy_text.as_bytes()).unwrap();
    let eval = policy.evaluate(&note).unwrap();
    assert!(eval.failed_witnesses().is_empty(), "{eval:?}");
    let verified = eval
        .witnesses
        .iter()
        .filter(|s| matches!(s, CosigStatus::Verified { .. }))
        .count();
    let cp = Checkpoint::parse(&note.text).unwrap();
    assert_eq!(cp.origin, ORIGIN);
    // The log's own signature is there too.
    assert!(matches!(
        rcpt::tlog::note::check(&note, &[serve_support::log_verifier()]),
        rcpt::tlog::note::NoteCheck::Verified { .. }
    ));
    (cp.size, verified)
}

/// Submit and wait for the answer: 200 with the tree size.
fn submit(log: &Served, n: u64) -> u64 {
    let r = raw(log.addr, "POST", "/add", &[], envelope(n).as_bytes());
    let text = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(r.status, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["tree_size"].as_u64().unwrap()
}

/// A submission sent now, whose answer is read later.
struct Pending(TcpStream);

fn submit_later(log: &Served, n: u64) -> Pending {
    let mut s = TcpStream::connect(log.addr).unwrap();
    let body = envelope(n);
    let req = format!(
        "POST /add HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    Pending(s)
}

impl Pending {
    /// Nothing arrives within `HELD_BACK`.
    fn assert_unanswered(&mut self) {
        self.0.set_read_timeout(Some(HELD_BACK)).unwrap();
        let mut byte = [0u8; 1];
        match self.0.read(&mut byte) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            other => panic!("the submission was answered before a quorum: {other:?}"),
        }
    }

    /// The answer's status line.
    fn answer(mut self) -> String {
        self.0
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut all = Vec::new();
        self.0.read_to_end(&mut all).unwrap();
        String::from_utf8_lossy(&all).into_owned()
    }
}

#[test]
fn two_of_three_witnesses_publish_and_two_down_hold_everything_back() {
    let tmp = tempfile::tempdir().unwrap();
    let mut world = World::new(tmp.path(), false);
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let log = world.serve(&dir, &trust);

    // All three up: every answer comes after a publication with >= 2 cosignatures.
    for n in 1..=3 {
        let size = submit(&log, n);
        let (published_size, cosigned) = published(&log, &world.policy_text);
        assert!(published_size >= size);
        assert!(cosigned >= 2, "{cosigned} cosignatures");
    }

    // One witness down: still published.
    world.stop(2);
    let size = submit(&log, 4);
    let (published_size, cosigned) = published(&log, &world.policy_text);
    assert_eq!((published_size, cosigned), (size, 2));

    // Two down: the submission is not answered, the checkpoint stays.
    world.stop(1);
    let mut pending = submit_later(&log, 5);
    pending.assert_unanswered();
    assert_eq!(published(&log, &world.policy_text).0, size);
    let stderr = std::fs::read_to_string(&log.stderr).unwrap();
    assert!(
        stderr.contains(r#""witness":"w2""#) && stderr.contains(r#""outcome":"unreachable""#),
        "{stderr}"
    );
    assert!(stderr.contains(r#""event":"quorum_not_met""#), "{stderr}");

    // One comes back: the held submission is answered, the checkpoint advances.
    world.restart(1);
    let answer = pending.answer();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (published_size, cosigned) = published(&log, &world.policy_text);
    assert_eq!((published_size, cosigned), (size + 1, 2));

    // A bundle asked for carries the cosigned checkpoint.
    let r = raw(
        log.addr,
        "POST",
        "/add",
        &[&format!("Accept: {}", rcpt::constants::BUNDLE_MEDIA_TYPE)],
        envelope(6).as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let bundle: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let cp = bundle["log"]["checkpoint"].as_str().unwrap();
    assert_eq!(cp.matches('\u{2014}').count(), 3, "{cp}");
    // ... and verifies offline (the cosignature lines are other keys' to the verifier).
    let file = tmp.path().join("witnessed.bundle.json");
    std::fs::write(&file, &r.body).unwrap();
    let out = std::process::Command::new(serve_support::bin())
        .arg("verify")
        .arg("--trust")
        .arg(&trust)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    serve_support::log_check(&dir);
}

#[test]
fn a_witness_whose_cosignature_fails_the_policy_key_does_not_count() {
    let tmp = tempfile::tempdir().unwrap();
    let mut world = World::new(tmp.path(), true);
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let log = world.serve(&dir, &trust);

    // w1 and w2 make the quorum; w3's lines are not published.
    let size = submit(&log, 1);
    assert_eq!(published(&log, &world.policy_text), (size, 2));
    let r = raw(log.addr, "GET", "/checkpoint", &[], b"");
    let text = String::from_utf8(r.body).unwrap();
    assert!(!text.contains("witness.example/w3"), "{text}");

    // w2 down: w1 and the lying w3 are not a quorum.
    world.stop(1);
    let mut pending = submit_later(&log, 2);
    pending.assert_unanswered();
    assert_eq!(published(&log, &world.policy_text).0, size);
    let stderr = std::fs::read_to_string(&log.stderr).unwrap();
    assert!(
        stderr.contains(r#""witness":"w3""#) && stderr.contains("no cosignature by the policy key"),
        "{stderr}"
    );
    world.restart(1);
    assert!(pending.answer().starts_with("HTTP/1.1 200"));
    assert_eq!(published(&log, &world.policy_text), (size + 1, 2));
}

#[test]
fn a_fork_with_the_same_key_and_origin_gets_no_cosignature() {
    let tmp = tempfile::tempdir().unwrap();
    let world = World::new(tmp.path(), false);
    let trust = write_trust(tmp.path());
    // Log A: three entries, witnessed.
    let a = init_log(tmp.path(), "log-a");
    let served = world.serve(&a, &trust);
    for n in 1..=3 {
        submit(&served, n);
    }
    let (size_a, _) = published(&served, &world.policy_text);
    served.stop();

    // Log B: same key and origin, five other entries, appended offline.
    let b = init_log(tmp.path(), "log-b");
    let mut files = Vec::new();
    for n in 100..105u64 {
        let f = tmp.path().join(format!("e{n}.json"));
        std::fs::write(&f, envelope(n)).unwrap();
        files.push(f);
    }
    let st = std::process::Command::new(serve_support::bin())
        .args(["log", "append"])
        .arg(&b)
        .args(&files)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let served_b = world.serve(&b, &trust);
    // Nothing is published, and a submission is held back.
    let r = raw(served_b.addr, "GET", "/checkpoint", &[], b"");
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    let mut pending = submit_later(&served_b, 200);
    pending.assert_unanswered();
    let stderr = std::fs::read_to_string(&served_b.stderr).unwrap();
    assert!(stderr.contains("HTTP 422"), "{stderr}");
    assert!(!stderr.contains(r#""outcome":"cosigned""#), "{stderr}");
    // Every witness still holds a checkpoint of log A (the quorum's two at
    // its last size; a third may have been left a step behind), none of B.
    let hash = rcpt::witness::origin_hash(ORIGIN);
    let root = |ns: &[u64], size: u64| {
        let leaves: Vec<_> = ns
            .iter()
            .map(|n| rcpt::tlog::merkle::leaf_hash(&serve_support::entry_of(&envelope(*n))))
            .collect();
        rcpt::tlog::merkle::tree_root(size, &rcpt::tlog::merkle::MemoryTree::new(&leaves)).unwrap()
    };
    let mut at_last = 0;
    for w in world.witnesses.iter().flatten() {
        let r = raw(w.addr, "GET", &format!("/{hash}/checkpoint"), &[], b"");
        let held = Note::parse(&r.body).unwrap();
        let cp = Checkpoint::parse(&held.text).unwrap();
        assert!(cp.size >= 1 && cp.size <= size_a, "{cp:?}");
        assert_eq!(cp.root_hash, root(&[1, 2, 3], cp.size));
        assert_ne!(cp.root_hash, root(&[100, 101, 102, 103, 104], cp.size));
        at_last += usize::from(cp.size == size_a);
    }
    assert!(at_last >= 2);
    // SIGTERM while witnessing is stuck: the service still stops.
    assert!(served_b.stop().success());
    let answer = pending.answer();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("not_witnessed"), "{answer}");
}

/// How many listed witnesses' cosignatures in `note` verify (every line
/// of a listed witness must verify), and its tree size.
fn cosigned_by(note: &[u8], policy_text: &str) -> (u64, usize) {
    let note = Note::parse(note).unwrap();
    let eval = TlogPolicy::parse(policy_text.as_bytes())
        .unwrap()
        .evaluate(&note)
        .unwrap();
    assert!(eval.failed_witnesses().is_empty(), "{eval:?}");
    let n = eval
        .witnesses
        .iter()
        .filter(|s| matches!(s, CosigStatus::Verified { .. }))
        .count();
    (Checkpoint::parse(&note.text).unwrap().size, n)
}

/// `rcpt ARGS...`: exit code, stdout and stderr.
fn rcpt(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(serve_support::bin())
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `rcpt log prove DIR --index I` to a file, then `rcpt verify --policy`.
fn prove_and_verify(dir: &Path, index: u64, trust: &Path, policy: &Path) -> (Option<i32>, String) {
    let bundle = dir.with_extension(format!("{index}.bundle.json"));
    let i = index.to_string();
    let (code, _, err) = rcpt(&[
        "log".as_ref(),
        "prove".as_ref(),
        dir.as_os_str(),
        "--index".as_ref(),
        i.as_ref(),
        "-o".as_ref(),
        bundle.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = rcpt(&[
        "verify".as_ref(),
        "--trust".as_ref(),
        trust.as_os_str(),
        "--policy".as_ref(),
        policy.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        bundle.as_os_str(),
    ]);
    (code, format!("{out}{err}"))
}

/// The cosigned checkpoint is the log's stored checkpoint: `log prove`
/// bundles made from the directory pass `verify --policy`, `log check`
/// passes, and a restarted service publishes it without asking the
/// witnesses again; a checkpoint appended offline (signed by the log
/// alone) is witnessed at the next start and stored cosigned.
#[test]
fn the_cosigned_checkpoint_is_stored_in_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let mut world = World::new(tmp.path(), false);
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    // The verifier's policy: the witnesses' quorum, and the log listed.
    let verify_policy = tmp.path().join("verify.policy");
    let verify_text = format!(
        "log {}\n{}",
        serve_support::log_verifier(),
        world.policy_text
    );
    std::fs::write(&verify_policy, &verify_text).unwrap();

    let log = world.serve(&dir, &trust);
    let mut size = 0;
    for n in 1..=3 {
        size = submit(&log, n);
    }
    // The checkpoint in the directory is the published one, cosigned.
    let stored = std::fs::read(dir.join("checkpoint")).unwrap();
    let served = raw(log.addr, "GET", "/checkpoint", &[], b"").body;
    assert_eq!(stored, served);
    let (stored_size, cosigned) = cosigned_by(&stored, &verify_text);
    assert_eq!(stored_size, size);
    assert!(cosigned >= 2, "{}", String::from_utf8_lossy(&stored));
    // `log checkpoint` gives it; its kept copy is cosigned too.
    let (code, out, err) = rcpt(&["log".as_ref(), "checkpoint".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.as_bytes(), &stored[..]);
    let kept = std::fs::read(dir.join(format!(".rcpt/checkpoints/{size}"))).unwrap();
    assert_eq!(kept, stored);

    // Offline bundles from the directory pass the policy, each index.
    for index in 0..size {
        let (code, out) = prove_and_verify(&dir, index, &trust, &verify_policy);
        assert_eq!(code, Some(0), "{out}");
        assert!(out.contains("checkpoint.witnesses"), "{out}");
    }
    serve_support::log_check(&dir);

    // A policy that also needs a fourth witness is not met: the check is
    // real, not a count of lines.
    let w4 = rcpt::tlog::cosig::WitnessVerifier::new(
        "witness.example/w4",
        witness_key(60).verifying_key(),
    )
    .unwrap();
    let strict = tmp.path().join("strict.policy");
    let strict_text = verify_text.replace(
        "group g 2 w1 w2 w3",
        &format!("witness w4 {w4}\ngroup g 4 w1 w2 w3 w4"),
    );
    std::fs::write(&strict, &strict_text).unwrap();
    let (code, out) = prove_and_verify(&dir, 0, &trust, &strict);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("checkpoint.quorum"), "{out}");

    // Restart with every witness down: the stored cosigned checkpoint is
    // published at once.
    assert!(log.stop().success());
    for i in 0..3 {
        world.stop(i);
    }
    let log = world.serve(&dir, &trust);
    let r = raw(log.addr, "GET", "/checkpoint", &[], b"");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body, stored);

    // Witnesses back: the next append is witnessed (the old sizes learnt
    // again from their 409s) and stored cosigned.
    for i in 0..3 {
        world.restart(i);
    }
    let next = submit(&log, 4);
    assert_eq!(next, size + 1);
    let (s, c) = published(&log, &world.policy_text);
    assert_eq!(s, next);
    assert!(c >= 2);
    let stored = std::fs::read(dir.join("checkpoint")).unwrap();
    assert_eq!(cosigned_by(&stored, &verify_text).0, next);
    assert!(cosigned_by(&stored, &verify_text).1 >= 2);
    let stderr = log.stderr.clone();
    assert!(log.stop().success());
    let stderr = std::fs::read_to_string(stderr).unwrap();
    assert!(stderr.contains(r#""from_store":true"#), "{stderr}");
    assert!(stderr.contains(r#""stored":true"#), "{stderr}");

    // An offline append stores a checkpoint signed by the log alone, which
    // fails the policy; the next start witnesses it and stores it cosigned.
    let files: Vec<PathBuf> = (10..12u64)
        .map(|n| {
            let f = tmp.path().join(format!("offline{n}.json"));
            std::fs::write(&f, envelope(n)).unwrap();
            f
        })
        .collect();
    let mut args: Vec<&std::ffi::OsStr> = vec!["log".as_ref(), "append".as_ref(), dir.as_os_str()];
    args.extend(files.iter().map(|f| f.as_os_str()));
    let (code, _, err) = rcpt(&args);
    assert_eq!(code, Some(0), "{err}");
    let (code, out) = prove_and_verify(&dir, next, &trust, &verify_policy);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("checkpoint.quorum"), "{out}");
    // A mirror taken now holds that log-only checkpoint.
    let mirror = tmp.path().join("mirror");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&dir)
        .arg(&mirror)
        .status()
        .unwrap();
    assert!(copied.success());
    let log = world.serve(&dir, &trust);
    // Published once witnessed (503 until then).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while raw(log.addr, "GET", "/checkpoint", &[], b"").status != 200 {
        assert!(std::time::Instant::now() < deadline, "never published");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (s, c) = published(&log, &world.policy_text);
    assert_eq!(s, next + 2);
    assert!(c >= 2);
    let (code, out) = prove_and_verify(&dir, next, &trust, &verify_policy);
    assert_eq!(code, Some(0), "{out}");
    serve_support::log_check(&dir);

    // The mirror at the same size takes the cosigned note (more signatures,
    // same tree) and then proves bundles that pass the policy; a second run
    // changes nothing.
    let url = format!("http://{}/", log.addr);
    let vkey = serve_support::log_verifier().to_string();
    for _ in 0..2 {
        let (code, _, err) = rcpt(&[
            "log".as_ref(),
            "mirror".as_ref(),
            url.as_ref(),
            mirror.as_os_str(),
            "--log-key".as_ref(),
            vkey.as_ref(),
        ]);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            std::fs::read(mirror.join("checkpoint")).unwrap(),
            std::fs::read(dir.join("checkpoint")).unwrap()
        );
    }
    let (code, out) = prove_and_verify(&mirror, next, &trust, &verify_policy);
    assert_eq!(code, Some(0), "{out}");
    serve_support::log_check(&mirror);
}

/// The window (spec/witness.md "What is persisted"): with the witnesses
/// down, an append's checkpoint is in the directory signed by the log
/// alone while the service still serves the last cosigned one; killed
/// there, the service restarts, gets that checkpoint witnessed, stores it
/// cosigned, and only then publishes it. The held entry is in the log.
#[test]
fn a_service_killed_before_the_quorum_witnesses_the_stored_checkpoint_at_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let mut world = World::new(tmp.path(), false);
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let log = world.serve(&dir, &trust);
    let size = submit(&log, 1);
    let witnessed = std::fs::read(dir.join("checkpoint")).unwrap();
    assert!(cosigned_by(&witnessed, &world.policy_text).1 >= 2);

    for i in 0..3 {
        world.stop(i);
    }
    let mut pending = submit_later(&log, 2);
    // The append is durable and its checkpoint stored, the log's alone.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let alone = loop {
        let text = std::fs::read(dir.join("checkpoint")).unwrap();
        if cosigned_by(&text, &world.policy_text).0 == size + 1 {
            break text;
        }
        assert!(std::time::Instant::now() < deadline, "never appended");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(cosigned_by(&alone, &world.policy_text).1, 0);
    // The service still serves the last cosigned checkpoint.
    let r = raw(log.addr, "GET", "/checkpoint", &[], b"");
    assert_eq!(r.body, witnessed);
    pending.assert_unanswered();
    log.kill();

    for i in 0..3 {
        world.restart(i);
    }
    let log = world.serve(&dir, &trust);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while raw(log.addr, "GET", "/checkpoint", &[], b"").status != 200 {
        assert!(std::time::Instant::now() < deadline, "never published");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (s, c) = published(&log, &world.policy_text);
    assert_eq!(s, size + 1);
    assert!(c >= 2);
    let stored = std::fs::read(dir.join("checkpoint")).unwrap();
    assert_eq!(cosigned_by(&stored, &world.policy_text), (size + 1, c));
    // The held entry is logged: sent again, dedup gives its index.
    let r = raw(log.addr, "POST", "/add", &[], envelope(2).as_bytes());
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["index"].as_u64(), Some(size));
    assert!(log.stop().success());
    serve_support::log_check(&dir);
}

/// A policy whose quorum the witnesses with a URL cannot meet, or one that
/// does not parse, is a bad invocation (exit 2), before anything is served.
#[test]
fn a_witness_policy_that_cannot_be_met_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let vkey = |seed: u8| {
        rcpt::tlog::cosig::WitnessVerifier::new(
            &format!("witness.example/{seed}"),
            witness_key(seed).verifying_key(),
        )
        .unwrap()
        .to_string()
    };
    let cases = [
        // Only one of the two needed has a URL.
        format!(
            "witness a {} http://127.0.0.1:9\nwitness b {}\ngroup g 2 a b\nquorum g\n",
            vkey(1),
            vkey(2)
        ),
        // An https URL: this build has no TLS.
        format!("witness a {} https://127.0.0.1:9\nquorum a\n", vkey(1)),
        // Not a policy.
        "quorum nobody\n".to_string(),
    ];
    for (i, text) in cases.iter().enumerate() {
        let policy = tmp.path().join(format!("bad{i}.policy"));
        std::fs::write(&policy, text).unwrap();
        let out = std::process::Command::new(serve_support::bin())
            .args(["log", "serve"])
            .arg(&dir)
            .args(["--listen", "127.0.0.1:0", "--trust"])
            .arg(&trust)
            .arg("--witness-policy")
            .arg(&policy)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains("--policy"), "{stderr}");
        assert!(out.stdout.is_empty(), "{text}");
    }
}

/// Issue #25 item 3: witnesses beyond the quorum. With all three up, the
/// published checkpoint carries all three cosignatures (the grace period),
/// so a reader whose policy is 3-of-3 verifies a 2-of-3 log; with one
/// down, the log still publishes (2) and that reader refuses; the witness
/// back is brought up to date on the next checkpoint.
#[test]
fn witnesses_beyond_the_quorum_are_published_and_a_stricter_reader_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let mut world = World::new(tmp.path(), false);
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let log = world.serve(&dir, &trust);
    let strict = world.policy_text.replace("group g 2 ", "group g 3 ");
    let strict_ok = |log: &Served| {
        let r = raw(log.addr, "GET", "/checkpoint", &[], b"");
        let note = Note::parse(&r.body).unwrap();
        TlogPolicy::parse(strict.as_bytes())
            .unwrap()
            .evaluate(&note)
            .unwrap()
            .quorum_met
    };
    for n in 1..=2 {
        let size = submit(&log, n);
        assert_eq!(published(&log, &world.policy_text), (size, 3));
        assert!(strict_ok(&log), "a 3-of-3 reader verifies while all are up");
    }
    world.stop(2);
    let size = submit(&log, 3);
    assert_eq!(published(&log, &world.policy_text), (size, 2));
    assert!(
        !strict_ok(&log),
        "a 3-of-3 reader refuses with one witness down"
    );
    world.restart(2);
    let size = submit(&log, 4);
    assert_eq!(published(&log, &world.policy_text), (size, 3));
    assert!(strict_ok(&log));
}
