#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
//! Cross-checks the `rcpt` binary against an independent Python implementation
//! of the formats in spec/ (tests/independent/rcpt_ref.py: its own DAG-CBOR, RFC 8785,
//! DSSE PAE, RFC 6962/9162 Merkle, C2SP signed notes and tiles; Ed25519 from
//! pyca/cryptography, BLAKE3 from the `blake3` PyPI package).
//!
//! Needs `python3` with `cryptography` and `blake3` importable. Without them
//! each test prints why and passes, unless RCPT_REQUIRE_INDEPENDENT=1 is set
//! (CI sets it), in which case it fails.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn script() -> PathBuf {
    manifest_dir().join("tests/independent/rcpt_ref.py")
}

/// Whether the independent implementation can run here; if not, says why,
/// and panics when RCPT_REQUIRE_INDEPENDENT=1.
fn python_available() -> bool {
    let probe = Command::new("python3")
        .args(["-c", "import cryptography, blake3"])
        .output();
    let why = match probe {
        Ok(o) if o.status.success() => return true,
        Ok(o) => format!(
            "python3 cannot import cryptography and blake3: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("python3 not runnable: {e}"),
    };
    if std::env::var("RCPT_REQUIRE_INDEPENDENT").as_deref() == Ok("1") {
        panic!("RCPT_REQUIRE_INDEPENDENT=1 but {why} (pip install cryptography blake3)");
    }
    support::skip(&format!("independent cross-check: {why}"));
    false
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn rcpt(args: &[&str]) -> Output {
    Command::new(support::bin())
        .args(args)
        .output()
        .expect("run rcpt")
}

/// Runs rcpt and requires success.
fn rcpt_ok(args: &[&str]) -> Output {
    let o = rcpt(args);
    assert!(o.status.success(), "rcpt {args:?} failed: {}", show(&o));
    o
}

fn py(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(script())
        .args(args)
        .output()
        .expect("run python3")
}

/// Runs the reference implementation and requires agreement (exit 0).
fn py_ok(args: &[&str]) -> Output {
    let o = py(args);
    assert!(
        o.status.success(),
        "independent implementation disagrees: rcpt_ref.py {args:?}: {}",
        show(&o)
    );
    eprintln!(
        "{}",
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .unwrap_or("")
    );
    o
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Generates a key and returns its C2SP verifier key line.
fn generate_key(name: &str, prefix: &Path) -> String {
    let o = rcpt_ok(&["key", "generate", "--name", name, "--out", s(prefix)]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    out.split_whitespace()
        .find(|w| w.starts_with(&format!("{name}+")))
        .unwrap_or_else(|| panic!("no verifier key for {name} in: {out}"))
        .to_string()
}

#[test]
fn reference_implementation_selftest_on_external_vectors() {
    if !python_available() {
        return;
    }
    let vectors = manifest_dir().join("tests/vectors");
    py_ok(&["selftest", s(&vectors)]);
}

#[test]
fn issued_envelopes_agree_with_independent_dsse_cbor_jcs() {
    if !python_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("issuer");
    generate_key("gate.example", &key);
    let pubkey = d.join("issuer.pub");
    let keyfile = d.join("issuer.key");
    // shuffled keys, odd whitespace, gratuitous escapes: one value
    let samples = d.join("samples");
    py_ok(&["samples", s(&samples), "--count", "15"]);
    for n in 0..15 {
        let input = samples.join(format!("payload{n}.json"));
        let env = d.join(format!("env{n}.json"));
        rcpt_ok(&[
            "receipt",
            "issue",
            "--key",
            s(&keyfile),
            "-o",
            s(&env),
            s(&input),
        ]);
        let inspect = rcpt_ok(&["receipt", "inspect", "--json", s(&env)]);
        let insp = d.join(format!("inspect{n}.json"));
        std::fs::write(&insp, &inspect.stdout).unwrap();
        py_ok(&["check-envelope", s(&env), s(&pubkey), s(&input), s(&insp)]);
    }
    // the same value from two different JSON texts lands on one envelope payload
    let a = d.join("same-a.json");
    let b = d.join("same-b.json");
    py_ok(&["sample-json", "4", s(&a), "--seed", "100"]);
    py_ok(&["sample-json", "4", s(&b), "--seed", "200"]);
    assert_ne!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let ia = rcpt_ok(&["receipt", "issue", "--key", s(&keyfile), s(&a)]);
    let ib = rcpt_ok(&["receipt", "issue", "--key", s(&keyfile), s(&b)]);
    let pa: serde_json::Value = serde_json::from_slice(&ia.stdout).unwrap();
    let pb: serde_json::Value = serde_json::from_slice(&ib.stdout).unwrap();
    assert_eq!(pa["payload"], pb["payload"], "one value, one payload");
}

fn proofs_entry_from_bundle(bundle: &Path) -> serde_json::Value {
    let b: serde_json::Value = serde_json::from_slice(&std::fs::read(bundle).unwrap()).unwrap();
    serde_json::json!({
        "index": b["log"]["index"],
        "size": b["log"]["tree_size"],
        "inclusion": b["log"]["inclusion"],
    })
}

#[test]
fn log_tiles_checkpoints_and_proofs_agree_with_independent_rfc6962() {
    if !python_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    generate_key("gate.example", &d.join("issuer"));
    let origin = "example.org/rcpt-independent-log";
    let vkey = generate_key(origin, &d.join("logkey"));
    let logkey = d.join("logkey.key");
    let log = d.join("log");
    rcpt_ok(&[
        "log",
        "init",
        s(&log),
        "--origin",
        origin,
        "--key",
        s(&logkey),
    ]);

    // Receipts: mostly issued by rcpt, every fifth by the independent issuer.
    let total = 300usize;
    let samples = d.join("samples");
    let issuer_key = d.join("issuer.key");
    py_ok(&[
        "samples",
        s(&samples),
        "--count",
        &total.to_string(),
        "--key",
        s(&issuer_key),
        "--every",
        "5",
    ]);
    let mut envs = Vec::new();
    for n in 0..total {
        let env = samples.join(format!("env{n}.json"));
        if n % 5 != 4 {
            let input = samples.join(format!("payload{n}.json"));
            rcpt_ok(&[
                "receipt",
                "issue",
                "--key",
                s(&issuer_key),
                "-o",
                s(&env),
                s(&input),
            ]);
        }
        envs.push(env);
    }
    // Several batches, crossing the 256-entry tile boundary; one duplicate.
    let batches = [1usize, 2, 7, 100, 146, 1, 43];
    let mut published = Vec::new();
    let mut start = 0;
    for len in batches {
        let mut args: Vec<String> = vec!["log".into(), "append".into(), s(&log).into()];
        args.push("--key".into());
        args.push(s(&logkey).into());
        args.extend(envs[start..start + len].iter().map(|p| s(p).to_string()));
        if start > 0 {
            args.push(s(&envs[0]).to_string()); // appended twice: keeps index 0
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = rcpt_ok(&refs);
        if start > 0 {
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            let last = out.lines().last().unwrap_or("");
            assert!(
                last.starts_with("0 "),
                "the same envelope appended again must keep index 0, got {last:?}"
            );
        }
        start += len;
        published.push(start);
        py_ok(&["check-log", s(&log), &vkey]);
    }
    assert_eq!(start, total);

    let mut proofs = Vec::new();
    let mut refused = Vec::new();
    let mut latest = Vec::new();
    let mut sizes: Vec<usize> = published.clone();
    sizes.extend([5, 64, 200, 255, 256, 257, 299]);
    sizes.sort_unstable();
    sizes.dedup();
    for &size in &sizes {
        let mut indices = vec![0, size / 2, size - 1];
        indices.extend([1, 3, 100, 255, 256].into_iter().filter(|i| *i < size));
        for idx in indices {
            let b = d.join(format!("bundle-{idx}-{size}.json"));
            let o = rcpt(&[
                "log",
                "prove",
                s(&log),
                "--index",
                &idx.to_string(),
                "--size",
                &size.to_string(),
                "-o",
                s(&b),
            ]);
            if !o.status.success() {
                assert!(
                    !published.contains(&size),
                    "rcpt log prove --index {idx} --size {size} (a published size) failed: {}",
                    show(&o)
                );
                refused.push(format!(
                    "prove --index {idx} --size {size}: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                continue;
            }
            proofs.push(proofs_entry_from_bundle(&b));
            if size == total {
                latest.push(b);
            }
        }
    }
    for (i, &m) in sizes.iter().enumerate() {
        for &n in &sizes[i..] {
            let (m, n) = if m <= n { (m, n) } else { (n, m) };
            let o = rcpt(&[
                "log",
                "consistency",
                s(&log),
                "--from",
                &m.to_string(),
                "--to",
                &n.to_string(),
                "--json",
            ]);
            if !o.status.success() {
                assert!(
                    !(published.contains(&m) && published.contains(&n)),
                    "rcpt log consistency --from {m} --to {n} (published sizes) failed: {}",
                    show(&o)
                );
                refused.push(format!(
                    "consistency --from {m} --to {n}: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                continue;
            }
            let v: serde_json::Value = serde_json::from_slice(&o.stdout)
                .unwrap_or_else(|e| panic!("consistency --json output: {e}: {}", show(&o)));
            assert_eq!(v["from"], m, "consistency from");
            assert_eq!(v["to"], n, "consistency to");
            proofs.push(serde_json::json!({"from": m, "to": n, "consistency": v["proof"]}));
        }
    }
    // bundles at the latest checkpoint verify under the independent verifier
    let issuer_pub = d.join("issuer.pub");
    let mut args = vec![
        "verify",
        "--issuer-pub",
        s(&issuer_pub),
        "--log-vkey",
        &vkey,
        "--expect",
        "0",
    ];
    args.extend(latest.iter().map(|p| s(p)));
    py_ok(&args);
    let pf = d.join("proofs.json");
    std::fs::write(&pf, serde_json::to_vec(&proofs).unwrap()).unwrap();
    py_ok(&["check-log", s(&log), &vkey, "--proofs", s(&pf)]);
    if !refused.is_empty() {
        eprintln!(
            "note: rcpt refused {} proofs at sizes that were never a checkpoint:\n{}",
            refused.len(),
            refused.join("\n")
        );
    }
}

#[test]
fn bundles_written_independently_verify_and_mutants_are_refused() {
    if !python_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("made");
    py_ok(&["make-bundles", s(&out)]);
    let trust = out.join("trust.json");
    let mut wrong = Vec::new();
    let mut bundles: Vec<PathBuf> = std::fs::read_dir(out.join("bundles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    bundles.sort();
    assert!(!bundles.is_empty());
    for b in &bundles {
        let o = rcpt(&["verify", s(b), "--trust", s(&trust)]);
        if o.status.code() != Some(0) {
            wrong.push(format!("{}: expected exit 0\n{}", b.display(), show(&o)));
        }
    }
    let all: Vec<&str> = bundles.iter().map(|p| s(p)).collect();
    let mut args = vec!["verify"];
    args.extend(&all);
    args.extend(["--trust", s(&trust)]);
    let o = rcpt(&args);
    if o.status.code() != Some(0) {
        wrong.push(format!(
            "all bundles at once: expected exit 0\n{}",
            show(&o)
        ));
    }
    let mutants: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("mutants.json")).unwrap()).unwrap();
    for m in mutants.as_array().unwrap() {
        let file = out.join(m["file"].as_str().unwrap());
        let expect = m["expect"].as_i64().unwrap() as i32;
        let o = rcpt(&["verify", s(&file), "--trust", s(&trust)]);
        if o.status.code() != Some(expect) {
            wrong.push(format!(
                "{}: expected exit {expect}\n{}",
                file.display(),
                show(&o)
            ));
        }
    }
    // random JSON- and byte-level mutations of one valid bundle: same exit status
    let kept = dir.path().join("disagreeing");
    let bin = support::bin();
    let o = py(&[
        "differential",
        s(&bin),
        s(&bundles[5]),
        s(&trust),
        "--count",
        "200",
        "--seed",
        "1",
        "--keep",
        s(&kept),
    ]);
    if !o.status.success() {
        wrong.push(format!(
            "random mutations of {}: rcpt verify and the independent verifier disagree\n{}",
            bundles[5].display(),
            show(&o)
        ));
    }
    assert!(
        wrong.is_empty(),
        "rcpt verify disagrees with the independent bundle writer on {} files:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn frozen_corpus_agrees_with_independent_verifier() {
    if !python_available() {
        return;
    }
    let corpus = support::corpus();
    if !corpus.join("manifest.json").exists() {
        eprintln!(
            "skipping: {} does not exist yet",
            corpus.join("manifest.json").display()
        );
        return;
    }
    py_ok(&["verify-corpus", s(&corpus)]);
    // the corpus log, written by rcpt, read by the independent tile reader
    let vkey = std::fs::read_to_string(corpus.join("keys/log.vkey")).unwrap();
    py_ok(&[
        "check-log",
        s(&corpus.join("log")),
        vkey.trim(),
        "--any-payload",
    ]);
}
