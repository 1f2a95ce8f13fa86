//! Cross-checks the witness formats against an independent Python
//! implementation written from the C2SP texts
//! (tests/independent/witness_ref.py; Ed25519 from pyca/cryptography):
//! cosignature/v1 lines byte for byte, `rcpt witness cosign` output,
//! tlog-policy parsing and quorum evaluation over a corpus and its
//! line-level mutants, the add-checkpoint status of every outcome and of
//! byte-level mutants of valid requests, and `rcpt log prove --format
//! tlog-proof` files.
//!
//! Needs `python3` with `cryptography`. Without it each test prints why and
//! passes, unless RCPT_REQUIRE_INDEPENDENT=1 is set (CI), which fails it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::tlog::cosig::{self, CosigStatus, WitnessVerifier};
use rcpt::tlog::merkle::{self, Hash, MemoryTree};
use rcpt::tlog::note::{self, Checkpoint, Note};
use rcpt::tlog::policy::{LogStatus, TlogPolicy};
use rcpt::witness::{AddCheckpointRequest, TreeHead, decide};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/independent/witness_ref.py")
}

fn python_available() -> bool {
    let probe = Command::new("python3")
        .args(["-c", "import cryptography"])
        .output();
    let why = match probe {
        Ok(o) if o.status.success() => return true,
        Ok(o) => format!(
            "python3 cannot import cryptography: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("python3 not runnable: {e}"),
    };
    if std::env::var("RCPT_REQUIRE_INDEPENDENT").as_deref() == Ok("1") {
        panic!("RCPT_REQUIRE_INDEPENDENT=1 but {why} (pip install cryptography)");
    }
    support::skip(&format!("independent cross-check: {why}"));
    false
}

/// Run the reference; its stdout as JSON.
fn py(args: &[&str]) -> Value {
    let o = Command::new("python3")
        .arg(script())
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "witness_ref.py {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn seed(n: u32) -> [u8; 32] {
    let mut s = [0x42u8; 32];
    s[..4].copy_from_slice(&n.to_be_bytes());
    s
}

fn key(n: u32) -> SigningKey {
    SigningKey::from_bytes(&seed(n))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn cosignature_lines_agree_byte_for_byte() {
    if !python_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let names = [
        "w.example",
        "witness.example.com/w1",
        "oid/1.3.6.1.4.1",
        "t\u{e9}moin.example/\u{2603}",
    ];
    let stamps = [1u64, 1_679_315_147, 1 << 32, (1 << 63) - 1];
    let mut n = 0;
    for (i, name) in names.iter().enumerate() {
        for (j, ts) in stamps.iter().enumerate() {
            let cp = Checkpoint {
                origin: format!("example.com/log{i}"),
                size: (i * 1000 + j) as u64,
                root_hash: [(i * 4 + j) as u8; 32],
                extensions: (0..j).map(|e| format!("ext {e} \u{e9}")).collect(),
            };
            let body = cp.to_text();
            let path = tmp.path().join(format!("body{n}"));
            std::fs::write(&path, &body).unwrap();
            let k = key(n);
            let theirs = py(&[
                "cosign",
                &hex(&seed(n)),
                name,
                &ts.to_string(),
                path.to_str().unwrap(),
            ]);
            let w = WitnessVerifier::new(name, k.verifying_key()).unwrap();
            assert_eq!(theirs["vkey"], w.to_string());
            assert_eq!(theirs["key_id"], hex(&w.key_id));
            assert_eq!(
                theirs["line"],
                cosig::sign(&body, name, &k, *ts).unwrap(),
                "{name} {ts}"
            );
            n += 1;
        }
    }
    eprintln!("{n} cosignature lines agree");
}

#[test]
fn rcpt_witness_cosign_output_verifies_independently() {
    if !python_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = |n: &str| tmp.path().join(n);
    let log_key = key(900);
    let log = NoteVerifier::new("example.com/ind", log_key.verifying_key()).unwrap();
    std::fs::write(p("w.key"), rcpt::keys::signing_key_to_pem(&key(901))).unwrap();
    std::fs::write(p("logs"), format!("log {log}\nquorum none\n")).unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(support::bin()).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let out = run(&[
        "witness",
        "init",
        p("w").to_str().unwrap(),
        "--name",
        "ind.example/w",
        "--key",
        p("w.key").to_str().unwrap(),
        "--policy",
        p("logs").to_str().unwrap(),
    ]);
    let vkey = out
        .lines()
        .find_map(|l| l.strip_prefix("witness verifier key: "))
        .unwrap()
        .to_owned();
    let body = Checkpoint {
        origin: "example.com/ind".into(),
        size: 0,
        root_hash: merkle::empty_root(),
        extensions: vec![],
    }
    .to_text();
    let cp = note::sign(&body, "example.com/ind", &log_key).unwrap();
    std::fs::write(p("cp"), &cp).unwrap();
    let lines = run(&[
        "witness",
        "cosign",
        p("w").to_str().unwrap(),
        "--old-size",
        "0",
        "--time",
        "1767139200",
        p("cp").to_str().unwrap(),
    ]);
    std::fs::write(p("cosigned"), format!("{cp}{lines}")).unwrap();
    let theirs = py(&["check", p("cosigned").to_str().unwrap(), &vkey]);
    assert_eq!(
        theirs,
        json!([{"status": "verified", "timestamp": 1767139200}])
    );
}

// ---- tlog-policy -----------------------------------------------------------

fn lvkey(n: u32, name: &str) -> String {
    NoteVerifier::new(name, key(n).verifying_key())
        .unwrap()
        .to_string()
}

fn wvkey(n: u32) -> String {
    WitnessVerifier::new(&format!("w{n}.example"), key(n).verifying_key())
        .unwrap()
        .to_string()
}

const ORIGIN: &str = "example.com/policy-log";

/// Policies: the hand-written cases, and line-level mutants of the valid ones.
fn policy_corpus() -> Vec<Vec<u8>> {
    let log = lvkey(1, ORIGIN);
    let (a, b, c, d) = (wvkey(11), wvkey(12), wvkey(13), wvkey(14));
    let base = format!("log {log}\nwitness A {a}\nwitness B {b}\nwitness C {c}\n");
    let mut valid = vec![
        format!("{base}group G 2 A B C\nquorum G\n"),
        format!("{base}group G any A B\ngroup H all G C\nquorum H\n"),
        format!(
            "# c\n\t{base}  \nwitness D {d} https://d.example/\ngroup X 1 A B\ngroup Y any C D\ngroup Z all X Y\nquorum Z\n"
        ),
        format!("{base}quorum A\n"),
        format!("{base}quorum none\n"),
        "quorum none\n".to_owned(),
    ];
    let mut corpus: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"quorum none".to_vec(),
        b"quorum none\r\n".to_vec(),
        format!("{base}group G 0 A\nquorum G\n").into_bytes(),
        format!("{base}group G 4 A B C\nquorum G\n").into_bytes(),
        format!("{base}group G 02 A B C\nquorum G\n").into_bytes(),
        format!("{base}group G any A A\nquorum G\n").into_bytes(),
        format!("{base}group G any A\ngroup H any A B\nquorum G\n").into_bytes(),
        format!("{base}group G any none\nquorum G\n").into_bytes(),
        format!("{base}quorum G\ngroup G any A\n").into_bytes(),
        format!("{base}witness none {d}\nquorum none\n").into_bytes(),
        format!("{base}witness A {d}\nquorum none\n").into_bytes(),
        format!("{base}witness D {a}\nquorum none\n").into_bytes(),
        format!("{base}log {log}\nquorum none\n").into_bytes(),
        format!("log {a}\nquorum none\n").into_bytes(),
        format!("witness A {log}\nquorum none\n").into_bytes(),
        format!("{base}quorum none\nquorum none\n").into_bytes(),
        format!("{base}Quorum none\n").into_bytes(),
        [
            format!("witness \u{212a} {a}\nwitness K {b}\ngroup g all K ").as_bytes(),
            &[0xe2, 0x84, 0xaa],
            b"\nquorum g\n",
        ]
        .concat(),
        [
            b"witness ".as_slice(),
            &[0xff],
            format!(" {a}\nquorum ").as_bytes(),
            &[0xff, b'\n'],
        ]
        .concat(),
        [b"quorum none\n# ".as_slice(), &[0x7f], b"\n"].concat(),
    ];
    // Mutants of each valid policy: drop, repeat, or move each line;
    // rename a name; bump a threshold.
    for v in &valid {
        let lines: Vec<&str> = v.lines().collect();
        for i in 0..lines.len() {
            let mut drop = lines.clone();
            drop.remove(i);
            let mut dup = lines.clone();
            dup.insert(i, lines[i]);
            let mut last = lines.clone();
            let l = last.remove(i);
            last.push(l);
            for m in [drop, dup, last] {
                corpus.push(format!("{}\n", m.join("\n")).into_bytes());
            }
        }
        corpus.push(v.replacen(" B", " Q", 1).into_bytes());
        corpus.push(v.replacen(" 2 ", " 3 ", 1).into_bytes());
        corpus.push(v.replacen(" all ", " 2 ", 1).into_bytes());
    }
    corpus.extend(valid.drain(..).map(String::into_bytes));
    corpus
}

/// Notes to evaluate under each valid policy.
fn notes() -> Vec<String> {
    let body = Checkpoint {
        origin: ORIGIN.into(),
        size: 5,
        root_hash: [5; 32],
        extensions: vec![],
    }
    .to_text();
    let other_body = Checkpoint {
        origin: ORIGIN.into(),
        size: 6,
        root_hash: [5; 32],
        extensions: vec![],
    }
    .to_text();
    let logged = note::sign(&body, ORIGIN, &key(1)).unwrap();
    let co = |n: u32, b: &str| {
        cosig::sign(b, &format!("w{n}.example"), &key(n), 1_000 + u64::from(n)).unwrap()
    };
    let mut bad_log = Note::parse(logged.as_bytes()).unwrap();
    bad_log.signatures[0].sig[0] ^= 1;
    let mut raw = bad_log.signatures[0].key_hash.to_vec();
    raw.extend_from_slice(&bad_log.signatures[0].sig);
    let bad_log = format!(
        "{body}\n\u{2014} {ORIGIN} {}\n{}",
        STANDARD.encode(raw),
        co(11, &body)
    );
    let other_origin = Checkpoint {
        origin: "example.com/else".into(),
        size: 5,
        root_hash: [5; 32],
        extensions: vec![],
    }
    .to_text();
    vec![
        logged.clone(),
        format!("{logged}{}", co(11, &body)),
        format!("{logged}{}{}", co(11, &body), co(13, &body)),
        format!(
            "{logged}{}{}{}",
            co(11, &body),
            co(12, &body),
            co(14, &body)
        ),
        format!("{logged}{}{}", co(12, &body), co(13, &other_body)),
        format!(
            "{logged}{}{}{}",
            co(11, &body),
            co(12, &body),
            co(99, &body)
        ),
        bad_log,
        format!(
            "{}{}",
            note::sign(&body, ORIGIN, &key(2)).unwrap(),
            co(11, &body)
        ),
        format!(
            "{}{}",
            note::sign(&other_origin, "example.com/else", &key(1)).unwrap(),
            co(11, &other_origin)
        ),
    ]
}

/// Our evaluation in the reference's JSON shape.
fn ours(p: &TlogPolicy, text: &str) -> Value {
    let note = Note::parse(text.as_bytes()).unwrap();
    let e = p.evaluate(&note).unwrap();
    let log = match e.log {
        LogStatus::Verified { .. } => "verified",
        LogStatus::Failed { .. } => "failed",
        LogStatus::NotSigned => "not-signed",
        LogStatus::UnknownOrigin => "unknown-origin",
    };
    let ws: Vec<Value> = e
        .witnesses
        .iter()
        .map(|s| match s {
            CosigStatus::Verified { timestamp } => {
                json!({"status": "verified", "timestamp": timestamp})
            }
            CosigStatus::Failed(_) => json!({"status": "failed"}),
            CosigStatus::Absent => json!({"status": "absent"}),
        })
        .collect();
    json!({"log": log, "witnesses": ws, "quorum_met": e.quorum_met})
}

#[test]
fn policies_and_quorum_evaluations_agree() {
    if !python_available() {
        return;
    }
    let corpus = policy_corpus();
    let notes = notes();
    let cases: Vec<Value> = corpus
        .iter()
        .map(|p| json!({"policy_b64": STANDARD.encode(p), "notes": notes}))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("cases.json");
    std::fs::write(&path, serde_json::to_vec(&cases).unwrap()).unwrap();
    let theirs = py(&["policies", path.to_str().unwrap()]);
    let (mut accepted, mut refused, mut evaluations) = (0, 0, 0);
    for (i, text) in corpus.iter().enumerate() {
        let t = &theirs[i];
        let shown = String::from_utf8_lossy(text);
        match TlogPolicy::parse(text) {
            Ok(p) => {
                assert_eq!(
                    t["ok"], true,
                    "rcpt accepts, reference refuses ({}):\n{shown}",
                    t["why"]
                );
                assert_eq!(
                    t["counts"],
                    json!([p.logs.len(), p.witnesses.len(), p.groups.len()]),
                    "{shown}"
                );
                for (j, n) in notes.iter().enumerate() {
                    assert_eq!(
                        t["evaluations"][j],
                        ours(&p, n),
                        "policy:\n{shown}\nnote {j}:\n{n}"
                    );
                    evaluations += 1;
                }
                accepted += 1;
            }
            Err(e) => {
                assert_eq!(
                    t["ok"], false,
                    "rcpt refuses ({e}), reference accepts:\n{shown}"
                );
                refused += 1;
            }
        }
    }
    eprintln!(
        "{accepted} policies accepted, {refused} refused, {evaluations} evaluations: all agree"
    );
    assert!(accepted >= 20 && refused >= 20, "{accepted} {refused}");
}

// ---- add-checkpoint ----------------------------------------------------------

fn signed_cp(t: &MemoryTree, size: u64, origin: &str, k: &SigningKey) -> String {
    let body = Checkpoint {
        origin: origin.into(),
        size,
        root_hash: merkle::tree_root(size, t).unwrap(),
        extensions: vec![],
    };
    note::sign(&body.to_text(), origin, k).unwrap()
}

fn req(old: u64, proof: &[Hash], cp: &str) -> String {
    AddCheckpointRequest::to_body(old, proof, cp)
}

#[test]
fn add_checkpoint_statuses_agree_including_mutants() {
    if !python_available() {
        return;
    }
    let leaves: Vec<Hash> = (0..20u32)
        .map(|i| merkle::leaf_hash(&i.to_le_bytes()))
        .collect();
    let t = MemoryTree::new(&leaves);
    let fork: Vec<Hash> = (0..20u32)
        .map(|i| merkle::leaf_hash(&(i + u32::from(i >= 6) * 100).to_le_bytes()))
        .collect();
    let f = MemoryTree::new(&fork);
    let lk = key(1);
    let logs = [NoteVerifier::new(ORIGIN, lk.verifying_key()).unwrap()];
    let cp = |n: u64| signed_cp(&t, n, ORIGIN, &lk);
    let proof = |m: u64, n: u64| merkle::prove_consistency(m, n, &t).unwrap();
    let head = |n: u64| TreeHead {
        size: n,
        root: merkle::tree_root(n, &t).unwrap(),
    };
    let zero_bad = {
        let b = Checkpoint {
            origin: ORIGIN.into(),
            size: 0,
            root_hash: [1; 32],
            extensions: vec![],
        };
        note::sign(&b.to_text(), ORIGIN, &lk).unwrap()
    };
    let mut cases: Vec<(Option<TreeHead>, String)> = vec![
        (None, req(0, &[], &cp(7))),
        (None, req(0, &[], &signed_cp(&t, 0, ORIGIN, &lk))),
        (Some(head(7)), req(7, &proof(7, 13), &cp(13))),
        (Some(head(8)), req(8, &proof(8, 16), &cp(16))),
        (Some(head(13)), req(13, &[], &cp(13))),
        (Some(head(7)), req(13, &[], &cp(7))),
        (Some(head(7)), req(5, &proof(5, 13), &cp(13))),
        (None, req(3, &proof(3, 13), &cp(13))),
        (None, req(0, &[], &zero_bad)),
        (None, req(0, &proof(3, 13), &cp(13))),
        (
            Some(head(13)),
            req(13, &[], &signed_cp(&f, 13, ORIGIN, &lk)),
        ),
        (
            Some(head(7)),
            req(
                7,
                &merkle::prove_consistency(7, 13, &f).unwrap(),
                &signed_cp(&f, 13, ORIGIN, &lk),
            ),
        ),
        (
            None,
            req(0, &[], &signed_cp(&t, 7, "example.com/else", &lk)),
        ),
        (None, req(0, &[], &signed_cp(&t, 7, ORIGIN, &key(2)))),
        (None, "old 0\n".to_owned()),
        (None, format!("old 00\n\n{}", cp(7))),
        (
            Some(head(7)),
            req(7, &[proof(7, 13), proof(7, 13)].concat(), &cp(13)),
        ),
    ];
    // Byte-level mutants of valid requests: flip a bit, drop a byte, double a newline.
    let seeds: Vec<(Option<TreeHead>, String)> = cases[..5].to_vec();
    for (state, body) in &seeds {
        let b = body.as_bytes();
        for i in 0..60usize {
            let at = (i * 7919 + 13) % b.len();
            let mut flip = b.to_vec();
            flip[at] ^= 1 << (i % 8);
            let mut drop = b.to_vec();
            drop.remove(at);
            let mut nl = b.to_vec();
            nl.insert(at, b'\n');
            for m in [flip, drop, nl] {
                cases.push((*state, String::from_utf8_lossy(&m).into_owned()));
            }
        }
    }
    let json_cases: Vec<Value> = cases
        .iter()
        .map(|(s, body)| {
            json!({
                "logs": logs.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "state": s.map(|h| json!([h.size, STANDARD.encode(h.root)])),
                "body": body,
            })
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("decide.json");
    std::fs::write(&path, serde_json::to_vec(&json_cases).unwrap()).unwrap();
    let theirs = py(&["decide", path.to_str().unwrap()]);
    let mut seen = std::collections::BTreeMap::new();
    for (i, (state, body)) in cases.iter().enumerate() {
        let status = match AddCheckpointRequest::parse(body.as_bytes()) {
            Err(_) => 400,
            Ok(r) => decide(&logs, state.as_ref(), &r).map_or_else(|e| e.status(), |_| 200),
        };
        assert_eq!(
            theirs[i], status,
            "case {i}: state {state:?}, body:\n{body}"
        );
        *seen.entry(status).or_insert(0) += 1;
    }
    eprintln!(
        "{} add-checkpoint cases agree; statuses {seen:?}",
        cases.len()
    );
    for s in [200, 400, 403, 404, 409, 422] {
        assert!(seen.contains_key(&s), "no case answered {s}");
    }
}

// ---- tlog-proof --------------------------------------------------------------

#[test]
fn tlog_proofs_from_rcpt_verify_independently() {
    if !python_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("log.key"), rcpt::keys::signing_key_to_pem(&key(3))).unwrap();
    let o = Command::new(support::bin())
        .args([
            "log",
            "init",
            dir.join("log").to_str().unwrap(),
            "--origin",
            ORIGIN,
            "--key",
            dir.join("log.key").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let vkey = NoteVerifier::new(ORIGIN, key(3).verifying_key())
        .unwrap()
        .to_string();
    let issuer = SigningKey::from_bytes(&[3; 32]);
    let files: Vec<PathBuf> = (0..7u64)
        .map(|n| {
            let json = format!(
                r#"{{"version":1,"issuer":"t","issued_at":{n},"substrate":"git","change_id":"blake3:{h}","inverse_delta_id":null,"reversibility":null,"read_set":[],"precondition":null,"policy_id":"sha256:{h}","verdict":{{"deny":{{"reasons":["r"]}}}},"applied":false,"replay":{{"class":"unknown"}}}}"#,
                h = "ef".repeat(32)
            );
            let payload = rcpt::receipt::payload_from_json(json.as_bytes()).unwrap();
            let env = rcpt::receipt::dsse::Envelope::sign(rcpt::constants::RECEIPT_PAYLOAD_TYPE, payload.bytes, &issuer);
            let p = dir.join(format!("r{n}.json"));
            std::fs::write(&p, env.to_json()).unwrap();
            p
        })
        .collect();
    let o = Command::new(support::bin())
        .args(["log", "append", dir.join("log").to_str().unwrap()])
        .args(&files)
        .output()
        .unwrap();
    assert!(o.status.success());
    for i in 0..7u64 {
        let path = dir.join(format!("p{i}.tlog-proof"));
        let o = Command::new(support::bin())
            .args([
                "log",
                "prove",
                dir.join("log").to_str().unwrap(),
                "--index",
                &i.to_string(),
                "--format",
                "tlog-proof",
                "-o",
                path.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(o.status.success());
        let theirs = py(&["tlog-proof", path.to_str().unwrap(), &vkey]);
        assert_eq!(
            theirs,
            json!({"origin": ORIGIN, "size": 7, "index": i, "log_signature": "pass", "inclusion": true})
        );
        // A proof claiming the neighbour's index does not verify there.
        let text = std::fs::read_to_string(&path).unwrap();
        let moved = text.replace(
            &format!("\nindex {i}\n"),
            &format!("\nindex {}\n", (i + 1) % 7),
        );
        std::fs::write(&path, moved).unwrap();
        assert_eq!(
            py(&["tlog-proof", path.to_str().unwrap(), &vkey])["inclusion"],
            false
        );
    }
}
