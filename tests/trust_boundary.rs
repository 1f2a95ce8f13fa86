//! The trust boundary (issue 8, defects 1 to 8): each test is named after
//! the class it closes, and each failed on the code before the fix.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use predicates::prelude::*;
use rcpt::io::{self, FileKind, InputError, OutputError, Source, Target};
use rcpt::reason::Reason;
use rcpt::trust::Trust;
use rcpt::verify::{CheckVerdict, ConsistencyInput, Outcome};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{Demo, bundle_json, corpus, keypair, rcpt, show, verifier};

/// No test here may wait on a FIFO or read a device forever.
const PATIENCE: Duration = Duration::from_secs(20);

fn verify_value(v: &Value) -> rcpt::verify::Report {
    verifier().verify_bytes(&serde_json::to_vec(v).unwrap())
}

/// An object written as the array of its values, in the given field order
/// (what serde's derived readers used to accept for a struct).
fn as_array(v: &Value, fields: &[&str]) -> Value {
    Value::Array(fields.iter().map(|f| v[*f].clone()).collect())
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

// ---- 1. A command-line key is never replaced by a file ----------------------

/// Keys until one's `label` form is a usable file name (no '/').
fn keypair_named_safely(dir: &Path, prefix: &str, name: &str, label: &str) -> (PathBuf, String) {
    for i in 0..64 {
        let p = format!("{prefix}{i}");
        let (_, public) = keypair(dir, &p, name);
        let text = show(&public, name, label);
        if !text.contains('/') {
            return (public, text);
        }
    }
    panic!("no key without '/' in 64 tries");
}

#[test]
fn a_planted_file_never_replaces_a_command_line_log_key() {
    let tmp = tempfile::tempdir().unwrap();
    // The attack needs the trusted key string to be a file name (no '/'):
    // a log whose verifier key is one, and a file of that name planted in
    // the working directory (a CI checkout) holding the attacker's key.
    let demo = loop_demo(tmp.path());
    let bundle = demo.prove(0, 1);
    let trusted = demo.vkey();
    let (_, attacker) = keypair_named_safely(tmp.path(), "evil", "log.example", "verifier key");
    let cwd = tmp.path().join("checkout");
    std::fs::create_dir(&cwd).unwrap();
    std::fs::write(cwd.join(&trusted), format!("{attacker}\n")).unwrap();
    // Before: the file was read instead of the string, and the honest
    // bundle came out not evaluated (log.untrusted), exit 3.
    rcpt()
        .current_dir(&cwd)
        .args(["verify", "--issuer-key", &demo.issuer_vkey()])
        .args(["--log-key", &trusted])
        .arg(&bundle)
        .assert()
        .code(0);
}

/// A demo log whose verifier key string has no '/'.
fn loop_demo(dir: &Path) -> Demo {
    for i in 0..64 {
        let d = dir.join(format!("try{i}"));
        std::fs::create_dir(&d).unwrap();
        let demo = Demo::new(&d, "", "log.example", 1, 1);
        if !demo.vkey().contains('/') {
            return demo;
        }
    }
    panic!("no log key without '/' in 64 tries");
}

#[test]
fn a_planted_file_never_replaces_a_command_line_issuer_key() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = Demo::new(tmp.path(), "", "log.example", 1, 1);
    let bundle = demo.prove(0, 1);
    let cwd = tmp.path().join("checkout");
    std::fs::create_dir(&cwd).unwrap();
    let (evil_pub, _) = keypair_named_safely(tmp.path(), "evil", "x", "public key");
    let evil_pem = std::fs::read(&evil_pub).unwrap();
    // NAME=KEY: the form that binds the payloads' issuer name.
    let trusted = format!("gate.example={}", demo.issuer_b64());
    if !trusted.contains('/') {
        std::fs::write(cwd.join(&trusted), &evil_pem).unwrap();
    }
    rcpt()
        .current_dir(&cwd)
        .args([
            "verify",
            "--issuer-key",
            &trusted,
            "--log-key",
            &demo.vkey(),
        ])
        .arg(&bundle)
        .assert()
        .code(0);
}

#[test]
fn a_file_name_where_a_key_is_expected_is_refused_and_points_at_the_file_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = Demo::new(tmp.path(), "", "log.example", 1, 1);
    let bundle = demo.prove(0, 1);
    rcpt()
        .current_dir(tmp.path())
        .args([
            "verify",
            "--issuer-key",
            "gate.pub",
            "--log-key",
            &demo.vkey(),
        ])
        .arg(&bundle)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--issuer-key-file"));
    let vkey_file = tmp.path().join("log.vkey");
    std::fs::write(&vkey_file, demo.vkey()).unwrap();
    rcpt()
        .current_dir(tmp.path())
        .args([
            "verify",
            "--issuer-key-file",
            "gate.pub",
            "--log-key",
            "log.vkey",
        ])
        .arg(&bundle)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--log-key-file"));
    // A .pub file binds no name (the receipt's issuer must be the key's
    // name): the bundle is authentic but fails the binding, and says so.
    rcpt()
        .current_dir(tmp.path())
        .args([
            "verify",
            "--issuer-key-file",
            "gate.pub",
            "--log-key-file",
            "log.vkey",
        ])
        .arg(&bundle)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("signature.issuer_mismatch"));
    std::fs::write(tmp.path().join("gate.vkey"), demo.issuer_vkey()).unwrap();
    rcpt()
        .current_dir(tmp.path())
        .args([
            "verify",
            "--issuer-key-file",
            "gate.vkey",
            "--log-key-file",
            "log.vkey",
        ])
        .arg(&bundle)
        .assert()
        .code(0);
}

#[test]
fn every_form_key_show_prints_is_accepted_and_a_keyid_is_not_a_key() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = Demo::new(tmp.path(), "", "log.example", 1, 1);
    let bundle = demo.prove(0, 1);
    let vkey = demo.vkey();
    let issuer_forms = [
        format!("gate.example={}", demo.issuer_b64()),
        show(&demo.issuer_pub, "gate.example", "verifier key"),
    ];
    for form in &issuer_forms {
        rcpt()
            .args(["verify", "--issuer-key", form, "--log-key", &vkey])
            .arg(&bundle)
            .assert()
            .code(0);
    }
    // The raw key is accepted as a key, but binds no issuer name.
    rcpt()
        .args([
            "verify",
            "--issuer-key",
            &demo.issuer_b64(),
            "--log-key",
            &vkey,
        ])
        .arg(&bundle)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("without a name"));
    // The trust-file entries `key show` prints make a working trust file.
    let issuer_entry: Value = serde_json::from_str(&show(
        &demo.issuer_pub,
        "gate.example",
        "trust issuer entry",
    ))
    .unwrap();
    let log_entry: Value =
        serde_json::from_str(&show(&demo.log_pub, "log.example", "trust log entry")).unwrap();
    let trust = tmp.path().join("t.json");
    std::fs::write(
        &trust,
        json!({"issuers": [issuer_entry], "logs": [log_entry]}).to_string(),
    )
    .unwrap();
    rcpt()
        .args(["verify", "--trust"])
        .arg(&trust)
        .arg(&bundle)
        .assert()
        .code(0);
    // A verifier key is accepted as a trust file's public_key too.
    let t2 = tmp.path().join("t2.json");
    let vk_issuer = json!({"name": "gate.example", "public_key": issuer_forms[1]});
    std::fs::write(
        &t2,
        json!({"issuers": [vk_issuer], "logs": [log_entry]}).to_string(),
    )
    .unwrap();
    rcpt()
        .args(["verify", "--trust"])
        .arg(&t2)
        .arg(&bundle)
        .assert()
        .code(0);
    // A keyid names a key; it is not one.
    let keyid = show(&demo.issuer_pub, "gate.example", "keyid");
    rcpt()
        .args(["verify", "--issuer-key", &keyid, "--log-key", &vkey])
        .arg(&bundle)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("keyid"));
    // A private key file is refused where a public key is expected.
    rcpt()
        .args(["verify", "--issuer-key-file"])
        .arg(&demo.issuer_key)
        .args(["--log-key", &vkey])
        .arg(&bundle)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("private key"));
}

// ---- 2. JSON: an array is never read where an object is specified ----------

const BUNDLE_FIELDS: [&str; 4] = ["media_type", "receipt_id", "envelope", "log"];
const LOG_FIELDS: [&str; 5] = ["origin", "index", "tree_size", "inclusion", "checkpoint"];
const ENVELOPE_FIELDS: [&str; 3] = ["payload", "payloadType", "signatures"];
const SIGNATURE_FIELDS: [&str; 2] = ["keyid", "sig"];

#[test]
fn json_arrays_for_objects_are_refused_in_bundles_at_every_depth() {
    let good = bundle_json("verdict-admit");
    assert_eq!(verify_value(&good).outcome(), Outcome::Verified);
    let mut cases: Vec<(&str, Value, Reason)> = Vec::new();
    cases.push((
        "bundle",
        as_array(&good, &BUNDLE_FIELDS),
        Reason::BundleMalformed,
    ));
    let mut v = good.clone();
    v["log"] = as_array(&good["log"], &LOG_FIELDS);
    cases.push(("log", v, Reason::BundleMalformed));
    let mut v = good.clone();
    v["envelope"] = as_array(&good["envelope"], &ENVELOPE_FIELDS);
    cases.push(("envelope", v, Reason::EnvelopeMalformed));
    let mut v = good.clone();
    v["envelope"]["signatures"][0] =
        as_array(&good["envelope"]["signatures"][0], &SIGNATURE_FIELDS);
    cases.push(("signature", v, Reason::EnvelopeMalformed));
    for (what, doc, reason) in cases {
        let report = verify_value(&doc);
        assert_eq!(
            report.outcome(),
            Outcome::Failed,
            "{what} as an array: {report:?}"
        );
        assert_eq!(report.primary_reason(), Some(reason), "{what} as an array");
        assert!(
            format!("{report:?}").contains("array where an object is specified"),
            "{what}: {report:?}"
        );
    }
}

#[test]
fn json_arrays_for_objects_are_refused_in_trust_files() {
    let good: Value =
        serde_json::from_slice(&std::fs::read(corpus().join("trust.json")).unwrap()).unwrap();
    assert!(Trust::from_json(good.to_string().as_bytes()).is_ok());
    let mut docs = vec![Value::Array(vec![
        good["issuers"].clone(),
        good["logs"].clone(),
    ])];
    let mut v = good.clone();
    v["issuers"][0] = as_array(&good["issuers"][0], &["name", "public_key"]);
    docs.push(v);
    let mut v = good.clone();
    v["logs"][0] = as_array(&good["logs"][0], &["verifier_key"]);
    docs.push(v);
    docs.push(json!([]));
    for doc in docs {
        // The refusal is the error's cause: the chain is what is printed.
        let err = rcpt::io::error_chain(&Trust::from_json(doc.to_string().as_bytes()).unwrap_err());
        assert!(err.contains("array where an object"), "{doc}: {err}");
    }
}

#[test]
fn json_arrays_for_objects_are_refused_in_consistency_proofs_and_manifests() {
    let cp = b"x\n";
    let good = json!({"from": 1, "to": 1, "proof": []});
    assert!(ConsistencyInput::parse(cp, good.to_string().as_bytes()).is_ok());
    let err = ConsistencyInput::parse(cp, json!([1, 1, []]).to_string().as_bytes()).unwrap_err();
    assert!(err.to_string().contains("array where an object"), "{err}");

    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(corpus().join("trust.json"), tmp.path().join("trust.json")).unwrap();
    let case = json!({"file": "b.json", "expect": "verified", "reason": null, "comment": ""});
    let write =
        |m: &Value| std::fs::write(tmp.path().join("manifest.json"), m.to_string()).unwrap();
    write(&json!({"trust": "trust.json", "cases": [case]}));
    assert!(rcpt::verify::corpus::load(tmp.path()).is_ok());
    for manifest in [
        json!(["trust.json", [case]]),
        json!({"trust": "trust.json", "cases": [["b.json", "verified", null, ""]]}),
    ] {
        write(&manifest);
        let err = rcpt::io::error_chain(&rcpt::verify::corpus::load(tmp.path()).unwrap_err());
        assert!(err.contains("array where an object"), "{manifest}: {err}");
    }
}

#[test]
fn log_append_refuses_an_envelope_written_as_an_array() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = Demo::new(tmp.path(), "", "log.example", 1, 0);
    let env: Value = serde_json::from_slice(&std::fs::read(&demo.envelopes[0]).unwrap()).unwrap();
    let as_arr = as_array(&env, &ENVELOPE_FIELDS);
    let arr_file = tmp.path().join("array.json");
    std::fs::write(&arr_file, as_arr.to_string()).unwrap();
    let mut sig_arr = env.clone();
    sig_arr["signatures"][0] = as_array(&env["signatures"][0], &SIGNATURE_FIELDS);
    let sig_file = tmp.path().join("sig-array.json");
    std::fs::write(&sig_file, sig_arr.to_string()).unwrap();
    for file in [&arr_file, &sig_file] {
        rcpt()
            .args(["log", "append", "--json"])
            .arg(&demo.log)
            .arg(file)
            .assert()
            .code(1)
            .stdout(predicate::str::contains("\"error\":\"envelope.malformed\""));
    }
    // Nothing was appended.
    let cp = rcpt()
        .args(["log", "checkpoint"])
        .arg(&demo.log)
        .assert()
        .success();
    let text = String::from_utf8(cp.get_output().stdout.clone()).unwrap();
    assert_eq!(text.lines().nth(1), Some("0"), "{text}");
}

// ---- 3. One bundle's verdict cannot stand in for another's -----------------

#[test]
fn a_crafted_origin_cannot_poison_the_checkpoint_cache() {
    let good = bundle_json("verdict-admit");
    let origin = good["log"]["origin"].as_str().unwrap().to_string();
    let text = good["log"]["checkpoint"].as_str().unwrap().to_string();
    // Before: the cache key was origin + "\n" + text, so this pair ran
    // together with the good bundle's and its verdict was reused.
    let (first_line, rest) = text.split_once('\n').unwrap();
    let mut crafted = good.clone();
    crafted["log"]["origin"] = Value::String(format!("{origin}\n{first_line}"));
    crafted["log"]["checkpoint"] = Value::String(rest.to_string());
    let verifier = verifier();
    let bad = verifier.verify_bytes(&serde_json::to_vec(&crafted).unwrap());
    assert_eq!(bad.outcome(), Outcome::Failed);
    assert_eq!(bad.primary_reason(), Some(Reason::BundleMalformed));
    let after = verifier.verify_bytes(&serde_json::to_vec(&good).unwrap());
    assert_eq!(after.outcome(), Outcome::Verified, "{after:?}");
}

#[test]
fn origins_a_checkpoint_cannot_carry_are_refused() {
    let good = bundle_json("verdict-admit");
    for origin in ["", "a\nb", "a\rb", "tab\there", "nul\u{0}"] {
        let mut v = good.clone();
        v["log"]["origin"] = Value::String(origin.to_string());
        let report = verify_value(&v);
        assert_eq!(
            report.primary_reason(),
            Some(Reason::BundleMalformed),
            "{origin:?}"
        );
    }
}

// ---- 4. One writer for every output file -----------------------------------

fn issue_to(tmp: &Path, out: &str) -> assert_cmd::assert::Assert {
    let (key, _) = if tmp.join("gate.key").exists() {
        (tmp.join("gate.key"), tmp.join("gate.pub"))
    } else {
        keypair(tmp, "gate", "gate.example")
    };
    let p = tmp.join("p.json");
    std::fs::write(&p, support::demo_payload(0).to_string()).unwrap();
    rcpt()
        .current_dir(tmp)
        .args(["receipt", "issue", "--key"])
        .arg(key)
        .args(["-o", out])
        .arg(p)
        .timeout(PATIENCE)
        .assert()
}

#[test]
fn dash_o_dash_is_standard_output_not_a_file_named_dash() {
    let tmp = tempfile::tempdir().unwrap();
    issue_to(tmp.path(), "-")
        .success()
        .stdout(predicate::str::contains("\"payloadType\""));
    assert!(!tmp.path().join("-").exists());
    // A file literally named '-' is spelled ./-
    issue_to(tmp.path(), "./-").success().stdout("");
    assert!(tmp.path().join("-").is_file());
}

#[test]
fn an_output_symlink_is_never_replaced_nor_written_through_into_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    let link = tmp.path().join("out.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    issue_to(tmp.path(), "out.json")
        .code(1)
        .stderr(predicate::str::contains("symbolic link"));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    // Same through the log's -o.
    let demo = Demo::new(tmp.path(), "l", "log.example", 1, 1);
    rcpt()
        .args(["log", "prove"])
        .arg(&demo.log)
        .args(["--index", "0", "-o"])
        .arg(&link)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("symbolic link"));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
}

#[test]
fn an_output_directory_is_refused_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("d")).unwrap();
    issue_to(tmp.path(), "d")
        .code(1)
        .stderr(predicate::str::contains("is a directory"));
    assert!(tmp.path().join("d").is_dir());
}

#[test]
fn an_output_fifo_is_written_through_not_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("pipe");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    issue_to(tmp.path(), "pipe").success();
    let got = reader.join().unwrap();
    assert!(String::from_utf8(got).unwrap().contains("\"payloadType\""));
    let kind = FileKind::of(&std::fs::symlink_metadata(&fifo).unwrap());
    assert_eq!(kind, FileKind::Fifo);
    // Through a symbolic link to the FIFO too (as /dev/stdout is one).
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    let reader = std::thread::spawn(move || std::fs::read(fifo).unwrap());
    issue_to(tmp.path(), "link").success();
    assert!(!reader.join().unwrap().is_empty());
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn an_atomic_write_that_fails_leaves_no_temporary_file_and_the_target_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    // rename(2) of a file over a non-empty directory fails after the
    // temporary file was written.
    let dir = tmp.path().join("full");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("inside"), "x").unwrap();
    let err = io::write_atomic(&dir, b"data", 0o644).unwrap_err();
    assert!(matches!(err, OutputError::Io { .. }), "{err:?}");
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("full")],
        "left behind: {names:?}"
    );
    // A regular file is replaced whole, and nothing else is left.
    let f = tmp.path().join("f.json");
    std::fs::write(&f, "old").unwrap();
    io::write_output(&Target::Path(f.clone()), b"new", std::io::sink()).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"new");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 2);
}

// ---- 5. Version before schema ----------------------------------------------

#[test]
fn a_future_version_is_not_evaluated_whatever_its_other_fields() {
    let mut extra = support::demo_payload(0);
    extra["version"] = json!(2);
    extra["a_field_v1_lacks"] = json!("x");
    let mut missing = support::demo_payload(0);
    missing["version"] = json!(2);
    missing.as_object_mut().unwrap().remove("policy_id");
    let mut mistyped = support::demo_payload(0);
    mistyped["version"] = json!(3);
    mistyped["issued_at"] = json!("yesterday");
    for p in [extra, missing, mistyped] {
        let err = rcpt::receipt::payload_from_json(p.to_string().as_bytes()).unwrap_err();
        assert_eq!(err.reason_code(), Reason::PayloadVersionUnsupported, "{p}");
        // In a bundle: the schema check is not evaluated, not failed.
        let value = rcpt::receipt::canonical::json::from_json(p.to_string().as_bytes()).unwrap();
        let cbor = rcpt::receipt::canonical::dagcbor::encode(&value);
        let mut b = bundle_json("verdict-admit");
        use base64::Engine as _;
        b["envelope"]["payload"] = json!(base64::engine::general_purpose::STANDARD.encode(&cbor));
        let report = verify_value(&b);
        let schema = report
            .checks
            .iter()
            .find(|c| c.name == "payload.schema")
            .unwrap();
        match &schema.result {
            Err(ne) => assert_eq!(ne.reason, Reason::PayloadVersionUnsupported),
            other => panic!("{p}: payload.schema {other:?}"),
        }
    }
    // Version 1 with an unknown field is still a schema failure.
    let mut v1 = support::demo_payload(0);
    v1["a_field_v1_lacks"] = json!("x");
    let err = rcpt::receipt::payload_from_json(v1.to_string().as_bytes()).unwrap_err();
    assert_eq!(err.reason_code(), Reason::PayloadSchema);
}

// ---- 6. Every input read is capped; FIFOs and devices are refused ---------

#[test]
fn inputs_that_are_fifos_or_devices_are_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    mkfifo(&fifo);
    for path in [fifo.as_path(), Path::new("/dev/zero"), tmp.path()] {
        let err = io::read_path(path, 1024).unwrap_err();
        assert!(
            matches!(err, InputError::NotRegular { .. }),
            "{}: {err:?}",
            path.display()
        );
        assert!(err.is_bad_path());
    }
    // The verifier: a FIFO bundle is not evaluated, never waited on.
    let report = verifier().verify_file(&fifo);
    assert_eq!(report.primary_reason(), Some(Reason::InputUnreadable));
    // Every command: a bad invocation, at once.
    let trust = corpus().join("trust.json");
    let bundle = corpus().join("bundles/verdict-admit.json");
    let runs: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec![
            "verify".as_ref(),
            "--trust".as_ref(),
            trust.as_os_str(),
            fifo.as_os_str(),
        ],
        vec![
            "verify".as_ref(),
            "--trust".as_ref(),
            fifo.as_os_str(),
            bundle.as_os_str(),
        ],
        vec![
            "verify".as_ref(),
            "--trust".as_ref(),
            "/dev/zero".as_ref(),
            bundle.as_os_str(),
        ],
        vec!["receipt".as_ref(), "inspect".as_ref(), fifo.as_os_str()],
        vec!["key".as_ref(), "show".as_ref(), "/dev/zero".as_ref()],
    ];
    for args in runs {
        rcpt().args(&args).timeout(PATIENCE).assert().code(2);
    }
}

#[test]
fn a_corpus_naming_a_device_is_refused_not_read_forever() {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["trust.json", "manifest.json"] {
        std::fs::copy(corpus().join(f), tmp.path().join(f)).unwrap();
    }
    std::fs::create_dir(tmp.path().join("bundles")).unwrap();
    // The manifest itself a link to /dev/zero: refused (before: size 0, then read forever).
    let manifest = tmp.path().join("manifest.json");
    std::fs::rename(&manifest, tmp.path().join("m.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &manifest).unwrap();
    rcpt()
        .args(["verify", "--corpus"])
        .arg(tmp.path())
        .timeout(PATIENCE)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("character device"));
    std::fs::remove_file(&manifest).unwrap();
    std::fs::write(&manifest, r#"{"trust": "trust.json", "cases": []}"#).unwrap();
    // A SHA256SUMS line naming /dev/zero through a link: a mismatch, at once.
    std::os::unix::fs::symlink("/dev/zero", tmp.path().join("zero")).unwrap();
    let sums = format!("{}  zero\n", "0".repeat(64));
    std::fs::write(tmp.path().join("SHA256SUMS"), sums).unwrap();
    rcpt()
        .args(["verify", "--corpus"])
        .arg(tmp.path())
        .timeout(PATIENCE)
        .assert()
        .code(1)
        .stdout(
            predicate::str::contains("CHANGED").and(predicate::str::contains("character device")),
        );
}

#[test]
fn files_are_hashed_as_a_stream_with_a_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("f");
    std::fs::write(&f, vec![7u8; 200_000]).unwrap();
    let d = io::sha256_capped(&f, 200_000).unwrap();
    assert_eq!(d, rcpt::digest::Digest::sha256(&[7u8; 200_000]));
    assert!(matches!(
        io::sha256_capped(&f, 199_999),
        Err(InputError::TooLarge { .. })
    ));
}

#[test]
fn the_capped_reader_reads_at_most_limit_plus_one() {
    let stdin = std::io::repeat(b'x');
    let err = io::read_capped(&Source::Stdin, 1000, stdin).unwrap_err();
    assert!(
        matches!(err, InputError::TooLarge { limit: 1000, .. }),
        "{err:?}"
    );
    let ok = io::read_capped(&Source::Stdin, 3, &b"abc"[..]).unwrap();
    assert_eq!(ok, b"abc");
}

// ---- 7. --since across logs; one proof per tree size ----------------------

#[test]
fn a_since_checkpoint_of_another_trusted_log_fails_origin_mismatch() {
    let tmp = tempfile::tempdir().unwrap();
    let a = Demo::new(tmp.path(), "a", "a.example/log", 3, 3);
    let b = Demo::new(tmp.path(), "b", "b.example/log", 3, 3);
    let bundle = a.prove(0, 3);
    let b_cp = b.checkpoint_file("b.checkpoint");
    let proof = tmp.path().join("p.json");
    std::fs::write(&proof, b.consistency(3, 3)).unwrap();
    rcpt()
        .args(["verify", "--issuer-key", &a.issuer_vkey()])
        .args(["--log-key", &a.vkey(), "--log-key", &b.vkey(), "--since"])
        .arg(&b_cp)
        .arg("--consistency")
        .arg(&proof)
        .arg(&bundle)
        .arg("--format")
        .arg("json")
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "\"reason\":\"consistency.origin_mismatch\"",
        ));
}

#[test]
fn consistency_takes_one_proof_per_tree_size() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = Demo::new(tmp.path(), "", "log.example", 6, 3);
    let old = demo.checkpoint_file("old.checkpoint");
    demo.append(3..4);
    let b4 = demo.prove(1, 4);
    demo.append(4..6);
    let b6 = demo.prove(5, 6);
    let p4 = tmp.path().join("p4.json");
    let p6 = tmp.path().join("p6.json");
    std::fs::write(&p4, demo.consistency(3, 4)).unwrap();
    std::fs::write(&p6, demo.consistency(3, 6)).unwrap();
    let run = |proofs: &[&Path]| {
        let mut cmd = rcpt();
        cmd.args(["verify", "--issuer-key", &demo.issuer_vkey()])
            .args(["--log-key", &demo.vkey(), "--since"])
            .arg(&old);
        for p in proofs {
            cmd.arg("--consistency").arg(p);
        }
        cmd.arg(&b4).arg(&b6).assert()
    };
    // Both sizes, with the flag repeated.
    run(&[&p4, &p6]).code(0);
    // Both in one JSON Lines file (what `>>` of `--json` output makes).
    let lines = tmp.path().join("proofs.jsonl");
    let mut both = demo.consistency(3, 4);
    both.extend(demo.consistency(3, 6));
    std::fs::write(&lines, both).unwrap();
    run(&[&lines]).code(0);
    // One size missing: that bundle fails, naming the command that makes its proof.
    run(&[&p4])
        .code(1)
        .stdout(predicate::str::contains("consistency.size_mismatch"));
    // Two proofs to one size: a bad invocation.
    run(&[&p4, &lines])
        .code(2)
        .stderr(predicate::str::contains("tree size 4"));
}

// ---- 8. JUnit output is XML 1.0 whatever the names and details hold -------

/// A character of XML 1.0's Char production (section 2.2).
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}')
        || c >= '\u{10000}'
}

#[test]
fn junit_is_well_formed_for_every_code_point_class() {
    use rcpt::verify::report::{Format, Renderer};
    use rcpt::verify::{Check, Failure, Report, Summary};
    // One of each class: C0 controls (forbidden but tab, LF, CR), DEL and
    // C1 (allowed), the edges of the surrogate gap, U+FFFE/U+FFFF
    // (forbidden), noncharacters that XML 1.0 allows, the last plane,
    // markup characters.
    let forbidden: Vec<char> = (0u32..0x20)
        .filter(|c| ![0x9, 0xA, 0xD].contains(c))
        .chain([0xFFFE, 0xFFFF])
        .map(|c| char::from_u32(c).unwrap())
        .collect();
    let allowed: Vec<char> = [
        0x9, 0xA, 0xD, 0x7F, 0x80, 0x9F, 0xD7FF, 0xE000, 0xFDD0, 0xFFFD, 0x10000, 0x1FFFE, 0x10FFFF,
    ]
    .iter()
    .map(|c| char::from_u32(*c).unwrap())
    .collect();
    let text: String = forbidden.iter().chain(&allowed).collect::<String>() + "<&>\"'";
    let report = Report {
        receipt_id: None,
        summary: None,
        checks: vec![Check {
            name: "bundle",
            result: Ok(CheckVerdict::Fail(Failure {
                reason: Reason::BundleMalformed,
                detail: text.clone(),
            })),
        }],
    };
    let mut out = Vec::new();
    let mut r = Renderer::new(&mut out, Format::Junit);
    r.begin().unwrap();
    r.bundle(&text, &report).unwrap();
    r.end(&Summary {
        verified: 0,
        failed: 1,
        not_evaluated: 0,
    })
    .unwrap();
    let xml = String::from_utf8(out).unwrap();
    assert!(
        xml.chars().all(is_xml_char),
        "a forbidden character in the document"
    );
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}\n{xml:?}"));
    let case = doc
        .descendants()
        .find(|n| n.has_tag_name("testcase"))
        .unwrap();
    let name = case.attribute("name").unwrap();
    // Forbidden characters are replaced; the rest, tab/LF/CR included, survive.
    let want: String = text
        .chars()
        .map(|c| if is_xml_char(c) { c } else { '\u{FFFD}' })
        .collect();
    assert_eq!(name, want);
    let failure = case
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert!(
        failure.text().unwrap().contains(&want),
        "{:?}",
        failure.text()
    );
}
