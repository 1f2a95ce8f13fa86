//! `rcpt witness` and the witness-related key and log commands as a user
//! runs them: witness keys, init, offline cosign against a real log (with
//! the proofs `rcpt log consistency` prints), concurrent cosign processes
//! for one old size, SIGKILLed cosign processes, and `log prove --format
//! tlog-proof`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use assert_cmd::Command;
use rcpt::keys::SigningKey;
use rcpt::receipt::dsse::Envelope;
use rcpt::tlog::cosig::{self, CosigStatus, WitnessVerifier};
use rcpt::tlog::merkle::{self, Hash, MemoryTree};
use rcpt::tlog::note::{self, Checkpoint, Note};
use rcpt::tlog::proof::TlogProof;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use support::{rcpt, rcpt_bin, write_key};

const ORIGIN: &str = "example.com/witnessed";
const NAME: &str = "witness.example/w1";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn out(cmd: &mut Command) -> String {
    String::from_utf8(cmd.assert().success().get_output().stdout.clone()).unwrap()
}

/// A valid receipt envelope, distinct for each `n`.
fn envelope(n: u64) -> String {
    let payload = support::deny_payload(n, "test", "cd");
    support::signed_envelope(&payload, &SigningKey::from_bytes(&[3; 32]))
}

struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    log: PathBuf,
    witness: PathBuf,
    log_vkey: String,
    witness_vkey: WitnessVerifier,
}

/// A log (key seed 5) and a witness of it (key seed 7).
fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let log = root.join("log");
    write_key(&root.join("log.key"), 5);
    let text = out(rcpt()
        .args(["log", "init", s(&log), "--origin", ORIGIN, "--key"])
        .arg(root.join("log.key")));
    let log_vkey = text
        .split_whitespace()
        .find(|w| w.starts_with(&format!("{ORIGIN}+")))
        .unwrap()
        .to_owned();
    std::fs::write(
        root.join("logs.policy"),
        format!("# logs witnessed\nlog {log_vkey}\nquorum none\n"),
    )
    .unwrap();
    let wkey = write_key(&root.join("w.key"), 7);
    let witness = root.join("witness");
    let text = out(rcpt()
        .args(["witness", "init", s(&witness), "--name", NAME, "--key"])
        .arg(root.join("w.key"))
        .arg("--policy")
        .arg(root.join("logs.policy")));
    let witness_vkey = WitnessVerifier::new(NAME, wkey.verifying_key()).unwrap();
    assert!(
        text.contains(&format!("witness verifier key: {witness_vkey}\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("witnessing log {ORIGIN}\n")),
        "{text}"
    );
    Setup {
        _tmp: tmp,
        root,
        log,
        witness,
        log_vkey,
        witness_vkey,
    }
}

fn append(st: &Setup, from: u64, to: u64) {
    let files: Vec<PathBuf> = (from..to)
        .map(|n| {
            let p = st.root.join(format!("r{n}.json"));
            std::fs::write(&p, envelope(n)).unwrap();
            p
        })
        .collect();
    rcpt()
        .args(["log", "append", s(&st.log)])
        .args(&files)
        .assert()
        .success();
}

fn latest_checkpoint(st: &Setup, name: &str) -> PathBuf {
    let text = out(rcpt().args(["log", "checkpoint", s(&st.log)]));
    let p = st.root.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn cosign_cmd(st: &Setup, old: u64, proof: Option<&Path>, cp: &Path) -> Command {
    let mut c = rcpt();
    c.args([
        "witness",
        "cosign",
        s(&st.witness),
        "--old-size",
        &old.to_string(),
    ]);
    if let Some(p) = proof {
        c.arg("--proof").arg(p);
    }
    c.arg(cp);
    c
}

fn assert_cosigns(st: &Setup, cp: &Path, lines: &str) -> u64 {
    let text = format!("{}{lines}", std::fs::read_to_string(cp).unwrap());
    let note = Note::parse(text.as_bytes()).unwrap();
    match &cosig::check(&note, std::slice::from_ref(&st.witness_vkey))[..] {
        [CosigStatus::Verified { timestamp }] => *timestamp,
        other => panic!("{other:?}"),
    }
}

#[test]
fn key_commands_print_witness_vkeys() {
    let tmp = tempfile::tempdir().unwrap();
    let k = write_key(&tmp.path().join("k.key"), 9);
    let want = WitnessVerifier::new(NAME, k.verifying_key())
        .unwrap()
        .to_string();
    let text = out(rcpt().args([
        "key",
        "show",
        s(&tmp.path().join("k.key")),
        "--name",
        NAME,
        "--witness",
    ]));
    assert!(
        text.contains(&format!("witness verifier key: {want}\n")),
        "{text}"
    );
    assert!(!text.contains("\nverifier key:"), "{text}");
    // --witness needs --name: bad invocation.
    rcpt()
        .args(["key", "show", s(&tmp.path().join("k.key")), "--witness"])
        .assert()
        .code(2);
    let text = out(rcpt().args([
        "key",
        "generate",
        "--name",
        NAME,
        "--witness",
        "--out",
        s(&tmp.path().join("g")),
    ]));
    let vkey = text
        .lines()
        .find_map(|l| l.strip_prefix("witness verifier key: "))
        .unwrap();
    let pem = std::fs::read_to_string(tmp.path().join("g.key")).unwrap();
    let g = rcpt::keys::signing_key_from_pem(&pem).unwrap();
    assert_eq!(
        vkey,
        WitnessVerifier::new(NAME, g.verifying_key())
            .unwrap()
            .to_string()
    );
    // The witness key (0x04) and the log key (0x01) of one key differ.
    let log_line = text
        .lines()
        .find_map(|l| l.strip_prefix("verifier key: "))
        .unwrap();
    assert_ne!(log_line.split('+').nth(1), vkey.split('+').nth(1));
}

#[test]
fn cosign_a_real_log_offline_step_by_step() {
    let st = setup();
    append(&st, 0, 3);
    let cp3 = latest_checkpoint(&st, "cp3");
    // First contact: old size 0, no proof.
    let lines = out(cosign_cmd(&st, 0, None, &cp3).args(["--time", "1700000000"]));
    assert_eq!(lines.lines().count(), 1);
    assert_eq!(assert_cosigns(&st, &cp3, &lines), 1_700_000_000);
    // The log grows; the proof from 3 as `rcpt log consistency` prints it.
    append(&st, 3, 10);
    let cp10 = latest_checkpoint(&st, "cp10");
    let proof = st.root.join("proof-3-10");
    std::fs::write(
        &proof,
        out(rcpt().args(["log", "consistency", s(&st.log), "--from", "3"])),
    )
    .unwrap();
    let lines = out(&mut cosign_cmd(&st, 3, Some(&proof), &cp10));
    assert_cosigns(&st, &cp10, &lines);
    // Again from 3: the witness is at 10 now (409), and says what to do.
    let o = cosign_cmd(&st, 3, Some(&proof), &cp10).assert().code(1);
    let err = String::from_utf8_lossy(&o.get_output().stderr).into_owned();
    assert!(
        err.contains("409") && err.contains("--old-size 10"),
        "{err}"
    );
    // The JSON form of the proof works too; its `from` must be --old-size.
    append(&st, 10, 12);
    let cp12 = latest_checkpoint(&st, "cp12");
    let json = st.root.join("proof.json");
    std::fs::write(
        &json,
        out(rcpt().args(["log", "consistency", s(&st.log), "--from", "10", "--json"])),
    )
    .unwrap();
    cosign_cmd(&st, 9, Some(&json), &cp12).assert().code(2);
    let lines = out(&mut cosign_cmd(&st, 10, Some(&json), &cp12));
    assert_cosigns(&st, &cp12, &lines);
    // A wrong proof is 422; a checkpoint of another log is 404.
    std::fs::write(
        &proof,
        out(rcpt().args([
            "log",
            "consistency",
            s(&st.log),
            "--from",
            "3",
            "--to",
            "12",
        ])),
    )
    .unwrap();
    let o = cosign_cmd(&st, 12, Some(&proof), &cp12).assert().code(1);
    assert!(String::from_utf8_lossy(&o.get_output().stderr).contains("422"));
    let other = st.root.join("other");
    let body = Checkpoint {
        origin: "example.com/other".into(),
        size: 0,
        root_hash: merkle::empty_root(),
        extensions: vec![],
    };
    std::fs::write(
        &other,
        note::sign(
            &body.to_text(),
            "example.com/other",
            &SigningKey::from_bytes(&[5; 32]),
        )
        .unwrap(),
    )
    .unwrap();
    let o = cosign_cmd(&st, 0, None, &other).assert().code(1);
    assert!(String::from_utf8_lossy(&o.get_output().stderr).contains("404"));
    // The key may be given explicitly (an air-gapped key on removable media).
    let moved = st.root.join("usb-w.key");
    std::fs::rename(st.root.join("w.key"), &moved).unwrap();
    cosign_cmd(&st, 12, None, &cp12).assert().code(1);
    out(cosign_cmd(&st, 12, None, &cp12).arg("--key").arg(&moved));
    // The wrong key is refused.
    let wrong = st.root.join("wrong.key");
    write_key(&wrong, 8);
    cosign_cmd(&st, 12, None, &cp12)
        .arg("--key")
        .arg(&wrong)
        .assert()
        .code(1);
    let _ = &st.log_vkey;
}

#[test]
fn init_refusals() {
    let st = setup();
    // Not empty.
    let o = rcpt()
        .args(["witness", "init", s(&st.witness), "--name", NAME, "--key"])
        .arg(st.root.join("w.key"))
        .arg("--policy")
        .arg(st.root.join("logs.policy"))
        .assert()
        .code(1);
    assert!(String::from_utf8_lossy(&o.get_output().stderr).contains("not empty"));
    // A policy without a log line.
    std::fs::write(st.root.join("empty.policy"), "quorum none\n").unwrap();
    let o = rcpt()
        .args([
            "witness",
            "init",
            s(&st.root.join("w2")),
            "--name",
            NAME,
            "--key",
        ])
        .arg(st.root.join("w.key"))
        .arg("--policy")
        .arg(st.root.join("empty.policy"))
        .assert()
        .code(1);
    assert!(String::from_utf8_lossy(&o.get_output().stderr).contains("lists no log"));
    // A name with a space: bad invocation.
    rcpt()
        .args([
            "witness",
            "init",
            s(&st.root.join("w3")),
            "--name",
            "a b",
            "--key",
        ])
        .arg(st.root.join("w.key"))
        .arg("--policy")
        .arg(st.root.join("logs.policy"))
        .assert()
        .code(2);
    // A policy that is a FIFO (no writer: a read would wait forever) or
    // over the size limit: refused at once, through the crate's one capped
    // reader.
    let fifo = st.root.join("fifo.policy");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let big = st.root.join("big.policy");
    std::fs::write(&big, "#".repeat(rcpt::limits::MAX_POLICY_BYTES + 1)).unwrap();
    // A path that is not a regular file is a bad invocation (2), as for
    // every input of the CLI; a file too large is refused (1).
    for (policy, says, code) in [
        (&fifo, "not a regular file", 2),
        (&big, "over the limit", 1),
    ] {
        let o = rcpt()
            .args([
                "witness",
                "init",
                s(&st.root.join("w4")),
                "--name",
                NAME,
                "--key",
            ])
            .arg(st.root.join("w.key"))
            .arg("--policy")
            .arg(policy)
            .timeout(std::time::Duration::from_secs(60))
            .assert()
            .code(code);
        let err = String::from_utf8_lossy(&o.get_output().stderr).into_owned();
        assert!(err.contains(says), "{err}");
        assert!(!st.root.join("w4").join("settings.json").exists());
    }
}

/// Checkpoints of a 64-leaf tree signed by the setup's log key, as files.
fn synthetic(st: &Setup) -> (MemoryTree, Vec<PathBuf>) {
    let leaves: Vec<Hash> = (0..64u32)
        .map(|i| merkle::leaf_hash(&i.to_be_bytes()))
        .collect();
    let t = MemoryTree::new(&leaves);
    let files = (0..=64u64)
        .map(|n| {
            let body = Checkpoint {
                origin: ORIGIN.into(),
                size: n,
                root_hash: merkle::tree_root(n, &t).unwrap(),
                extensions: vec![],
            };
            let p = st.root.join(format!("syn{n}"));
            std::fs::write(
                &p,
                note::sign(&body.to_text(), ORIGIN, &SigningKey::from_bytes(&[5; 32])).unwrap(),
            )
            .unwrap();
            p
        })
        .collect();
    (t, files)
}

fn proof_file(st: &Setup, t: &MemoryTree, m: u64, n: u64) -> PathBuf {
    let p = st.root.join(format!("proof-{m}-{n}"));
    let text: String = merkle::prove_consistency(m, n, t)
        .unwrap()
        .iter()
        .map(|h| {
            use base64::Engine as _;
            format!("{}\n", base64::engine::general_purpose::STANDARD.encode(h))
        })
        .collect();
    std::fs::write(&p, text).unwrap();
    p
}

fn recorded_size(st: &Setup) -> Option<u64> {
    let path = st
        .witness
        .join("state")
        .join(rcpt::witness::origin_hash(ORIGIN));
    let text = std::fs::read_to_string(path).ok()?;
    let note = Note::parse(text.as_bytes()).expect("a whole record");
    Some(Checkpoint::parse(&note.text).unwrap().size)
}

#[test]
fn concurrent_cosign_processes_from_one_old_size_succeed_once() {
    let st = setup();
    let (t, files) = synthetic(&st);
    let bin = rcpt_bin();
    let mut old = 0u64;
    for round in 0..5u64 {
        let children: Vec<(u64, std::process::Child)> = (1..=6u64)
            .map(|k| {
                let size = old + k + round;
                let mut c = std::process::Command::new(&bin);
                c.args([
                    "witness",
                    "cosign",
                    s(&st.witness),
                    "--old-size",
                    &old.to_string(),
                ]);
                if old > 0 {
                    c.arg("--proof").arg(proof_file(&st, &t, old, size));
                }
                c.arg(&files[size as usize])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                (size, c.spawn().unwrap())
            })
            .collect();
        let mut winners = Vec::new();
        for (size, child) in children {
            let o = child.wait_with_output().unwrap();
            match o.status.code() {
                Some(0) => winners.push(size),
                Some(1) => assert!(String::from_utf8_lossy(&o.stderr).contains("409"), "{o:?}"),
                other => panic!("{other:?}: {o:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        assert_eq!(recorded_size(&st), Some(winners[0]));
        old = winners[0];
    }
}

#[test]
fn killed_cosign_processes_never_leave_a_torn_or_older_record() {
    let st = setup();
    let (t, files) = synthetic(&st);
    let bin = rcpt_bin();
    let mut recorded: Option<u64> = None;
    let mut advanced = 0;
    for trial in 0..40u64 {
        let old = recorded.unwrap_or(0);
        let size = (old + 1).min(64);
        let mut c = std::process::Command::new(&bin);
        c.args([
            "witness",
            "cosign",
            s(&st.witness),
            "--old-size",
            &old.to_string(),
        ]);
        if old > 0 {
            c.arg("--proof").arg(proof_file(&st, &t, old, size));
        }
        let mut child = c
            .arg(&files[size as usize])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill at a different instant each trial (0 to 7.8 ms after spawn).
        std::thread::sleep(std::time::Duration::from_micros((trial * 197) % 8000));
        let _ = child.kill();
        let _ = child.wait();
        // The record is absent, or a whole checkpoint, never smaller than before.
        let now = recorded_size(&st);
        assert!(now >= recorded, "trial {trial}: {now:?} < {recorded:?}");
        assert!(
            now == recorded || now == Some(size),
            "trial {trial}: {now:?}"
        );
        advanced += usize::from(now != recorded);
        recorded = now;
    }
    // Whatever was killed, the witness still works from what it recorded.
    let old = recorded.unwrap_or(0);
    let mut c = cosign_cmd(
        &st,
        old,
        (old > 0).then(|| proof_file(&st, &t, old, 64)).as_deref(),
        &files[64],
    );
    c.assert().success();
    assert_eq!(recorded_size(&st), Some(64));
    eprintln!("{advanced} of 40 killed cosign processes had recorded their checkpoint");
}

#[test]
fn log_prove_writes_a_tlog_proof() {
    let st = setup();
    append(&st, 0, 5);
    let path = st.root.join("r2.tlog-proof");
    rcpt()
        .args([
            "log",
            "prove",
            s(&st.log),
            "--index",
            "2",
            "--format",
            "tlog-proof",
            "-o",
            s(&path),
        ])
        .assert()
        .success();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("c2sp.org/tlog-proof@v1\nextra "), "{text}");
    let p = TlogProof::parse(text.as_bytes()).unwrap();
    assert_eq!(p.to_text(), text);
    assert_eq!(p.index, 2);
    // `extra` is the log entry: the envelope, whose leaf hash the proof includes.
    let env = Envelope::from_entry(p.extra.as_deref().unwrap()).unwrap();
    assert_eq!(env, Envelope::from_json(envelope(2).as_bytes()).unwrap());
    merkle::verify_inclusion(
        &p.extra_leaf_hash().unwrap(),
        2,
        p.body.size,
        &p.inclusion,
        &p.body.root_hash,
    )
    .unwrap();
    let log = rcpt::keys::NoteVerifier::parse(&st.log_vkey).unwrap();
    assert!(matches!(
        note::check(&p.note, &[log]),
        note::NoteCheck::Verified { .. }
    ));
    // To stdout, at an earlier size, by receipt.
    let text = out(rcpt().args([
        "log",
        "prove",
        s(&st.log),
        "--receipt",
        s(&st.root.join("r1.json")),
        "--format",
        "tlog-proof",
    ]));
    assert_eq!(TlogProof::parse(text.as_bytes()).unwrap().index, 1);
    rcpt()
        .args([
            "log",
            "prove",
            s(&st.log),
            "--index",
            "0",
            "--format",
            "nope",
        ])
        .assert()
        .code(2);
}

#[test]
fn verify_reads_tlog_proofs_with_the_checks_of_bundles() {
    let st = setup();
    append(&st, 0, 4);
    let issuer = SigningKey::from_bytes(&[3; 32]).verifying_key();
    let trust = st.root.join("trust.json");
    std::fs::write(
        &trust,
        serde_json::json!({
            "issuers": [{"name": "test", "public_key": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, issuer.as_bytes())}],
            "logs": [{"verifier_key": st.log_vkey}],
        })
        .to_string(),
    )
    .unwrap();
    let proof = st.root.join("p.tlog-proof");
    let bundle = st.root.join("p.json");
    out(rcpt().args([
        "log",
        "prove",
        s(&st.log),
        "--index",
        "3",
        "--format",
        "tlog-proof",
        "-o",
        s(&proof),
    ]));
    out(rcpt().args(["log", "prove", s(&st.log), "--index", "3", "-o", s(&bundle)]));
    let verify = |file: &Path| {
        let o = rcpt()
            .args(["verify", "--trust", s(&trust), "--format", "json"])
            .arg(file)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (o.status.code().unwrap(), v["results"][0].clone())
    };
    // The same checks, in the same order, with the same outcome as the bundle.
    let (code, p) = verify(&proof);
    let (bcode, b) = verify(&bundle);
    assert_eq!((code, bcode), (0, 0), "{p}");
    assert_eq!(p["checks"], b["checks"]);
    assert_eq!(p["receipt_id"], b["receipt_id"]);
    let text = std::fs::read_to_string(&proof).unwrap();
    let variant = |name: &str, t: String| {
        let f = st.root.join(name);
        std::fs::write(&f, t).unwrap();
        verify(&f)
    };
    let reason = |r: &serde_json::Value| {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["status"] != "pass")
            .map(|c| c["reason"].clone())
    };
    // Another index: the inclusion check fails.
    let (code, r) = variant(
        "moved.tlog-proof",
        text.replace("\nindex 3\n", "\nindex 2\n"),
    );
    assert_eq!((code, reason(&r)), (1, Some("inclusion.invalid".into())));
    // No extra, or an extra that is not a log entry: a malformed bundle.
    let no_extra: String = text
        .lines()
        .filter(|l| !l.starts_with("extra "))
        .map(|l| format!("{l}\n"))
        .collect();
    let (code, r) = variant("noextra.tlog-proof", no_extra);
    assert_eq!((code, reason(&r)), (1, Some("bundle.malformed".into())));
    let extra_line = text.lines().nth(1).unwrap().to_owned();
    let (code, r) = variant("junk.tlog-proof", text.replace(&extra_line, "extra eA=="));
    assert_eq!((code, reason(&r)), (1, Some("bundle.malformed".into())));
    // Another version: not evaluated.
    let (code, r) = variant("v2.tlog-proof", text.replacen("@v1", "@v2", 1));
    assert_eq!((code, reason(&r)), (3, Some("bundle.unsupported".into())));
    // A checkpoint of the trusted origin re-signed by another key: a forgery,
    // failed (log.impersonation, issue 34 defect 2), as for bundles.
    let parsed = TlogProof::parse(text.as_bytes()).unwrap();
    let resigned = note::sign(
        &parsed.note.text,
        ORIGIN,
        &SigningKey::from_bytes(&[66; 32]),
    )
    .unwrap();
    let other =
        TlogProof::new(parsed.extra.clone(), 3, parsed.inclusion.clone(), &resigned).unwrap();
    let (code, r) = variant("resigned.tlog-proof", other.to_text());
    assert_eq!(reason(&r), Some("log.impersonation".into()));
    let (bcode, br) = {
        let mut b: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&bundle).unwrap()).unwrap();
        b["log"]["checkpoint"] = resigned.into();
        variant("resigned.json", b.to_string())
    };
    assert_eq!(reason(&br), Some("log.impersonation".into()));
    assert_eq!((code, bcode), (1, 1));
}
