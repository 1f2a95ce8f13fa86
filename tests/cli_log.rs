//! `rcpt log` as a user runs it: init, append (files and JSON Lines, with
//! refused envelopes and duplicates), checkpoint, prove, consistency, check,
//! and the lock message.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use assert_cmd::Command;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::keys::SigningKey;
use rcpt::receipt::dsse::Envelope;
use rcpt::tlog::merkle::{leaf_hash, verify_consistency, verify_inclusion};
use rcpt::tlog::note::{Checkpoint, Note};
use std::path::{Path, PathBuf};
use support::rcpt;

const ORIGIN: &str = "example.com/cli-log";

fn issuer() -> SigningKey {
    SigningKey::from_bytes(&[3u8; 32])
}

/// A valid signed receipt envelope (JSON), distinct for each `n`.
pub fn envelope(n: u64) -> String {
    let payload = support::deny_payload(n, "test", "ab");
    support::signed_envelope(&payload, &issuer())
}

/// A fresh log in a temp dir; its key file sits beside it.
fn init(tmp: &Path) -> PathBuf {
    let key = tmp.join("log.key");
    let log_key = SigningKey::from_bytes(&[5u8; 32]);
    std::fs::write(&key, rcpt::keys::signing_key_to_pem(&log_key)).unwrap();
    let dir = tmp.join("log");
    let out = rcpt()
        .args(["log", "init"])
        .arg(&dir)
        .args(["--origin", ORIGIN, "--key"])
        .arg(&key)
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains(&format!("{ORIGIN}+")), "{text}");
    dir
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(cmd.assert().get_output().stdout.clone()).unwrap()
}

#[test]
fn append_files_and_stdin_then_prove_and_check() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init(tmp.path());
    let files: Vec<PathBuf> = (0..3)
        .map(|n| {
            let p = tmp.path().join(format!("r{n}.json"));
            std::fs::write(&p, envelope(n)).unwrap();
            p
        })
        .collect();
    let out = rcpt()
        .args(["log", "append"])
        .arg(&dir)
        .args(&files)
        .assert()
        .success();
    let lines: Vec<String> = String::from_utf8(out.get_output().stdout.clone())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 3);
    for (i, line) in lines.iter().enumerate() {
        assert!(line.starts_with(&format!("{i} blake3:")), "{line}");
    }
    // JSON Lines on stdin: a duplicate of r1, two new, a refused line.
    let stdin = format!(
        "{}\n\n{}\n{{\"nope\":1}}\n{}\n",
        envelope(1),
        envelope(10),
        envelope(11)
    );
    let out = rcpt()
        .args(["log", "append", "--json"])
        .arg(&dir)
        .arg("-")
        .write_stdin(stdin)
        .assert()
        .code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert_eq!(
        (rows[0]["index"].as_u64(), rows[0]["new"].as_bool()),
        (Some(1), Some(false))
    );
    assert_eq!(rows[1]["index"], 3);
    assert_eq!(rows[1]["file"], "-:3");
    assert_eq!(rows[2]["error"], "envelope.malformed");
    assert_eq!(rows[3]["index"], 4);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("refused -:4: envelope.malformed"), "{err}");

    // The checkpoint names size 5; a bundle proves entry 3 against it.
    let cp_text = stdout(rcpt().args(["log", "checkpoint"]).arg(&dir));
    let cp = Checkpoint::parse(&Note::parse(cp_text.as_bytes()).unwrap().text).unwrap();
    assert_eq!((cp.origin.as_str(), cp.size), (ORIGIN, 5));
    let bundle_path = tmp.path().join("b.json");
    rcpt()
        .args(["log", "prove"])
        .arg(&dir)
        .args(["--index", "3", "-o"])
        .arg(&bundle_path)
        .assert()
        .success();
    let bundle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&bundle_path).unwrap()).unwrap();
    assert_eq!(bundle["log"]["index"], 3);
    assert_eq!(bundle["log"]["tree_size"], 5);
    assert_eq!(bundle["log"]["checkpoint"].as_str(), Some(cp_text.as_str()));
    let proof: Vec<[u8; 32]> = bundle["log"]["inclusion"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            STANDARD
                .decode(h.as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap()
        })
        .collect();
    let entry = Envelope::from_json(envelope(10).as_bytes())
        .unwrap()
        .to_entry();
    verify_inclusion(&leaf_hash(&entry), 3, 5, &proof, &cp.root_hash).unwrap();
    // --receipt finds the same index; --size 3 proves against an old checkpoint.
    let by_receipt = tmp.path().join("b2.json");
    rcpt()
        .args(["log", "prove"])
        .arg(&dir)
        .arg("--receipt")
        .arg(&files[2])
        .args(["--size", "3", "-o"])
        .arg(&by_receipt)
        .assert()
        .success();
    let b2: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&by_receipt).unwrap()).unwrap();
    assert_eq!(
        (b2["log"]["index"].as_u64(), b2["log"]["tree_size"].as_u64()),
        (Some(2), Some(3))
    );
    let cp3_text = b2["log"]["checkpoint"].as_str().unwrap();
    let cp3 = Checkpoint::parse(&Note::parse(cp3_text.as_bytes()).unwrap().text).unwrap();

    // Consistency 3 -> 5 verifies between the two signed roots.
    let c = stdout(
        rcpt()
            .args(["log", "consistency"])
            .arg(&dir)
            .args(["--from", "3", "--json"]),
    );
    let c: serde_json::Value = serde_json::from_str(&c).unwrap();
    assert_eq!((c["from"].as_u64(), c["to"].as_u64()), (Some(3), Some(5)));
    let proof: Vec<[u8; 32]> = c["proof"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            STANDARD
                .decode(h.as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap()
        })
        .collect();
    verify_consistency(3, 5, &proof, &cp3.root_hash, &cp.root_hash).unwrap();

    let ok = stdout(rcpt().args(["log", "check"]).arg(&dir));
    assert!(ok.starts_with("ok: 5 entries"), "{ok}");
}

#[test]
fn check_fails_naming_the_broken_tile() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init(tmp.path());
    let f = tmp.path().join("r.json");
    std::fs::write(&f, envelope(1)).unwrap();
    rcpt()
        .args(["log", "append"])
        .arg(&dir)
        .arg(&f)
        .assert()
        .success();
    std::fs::write(dir.join("tile/0/000.p/1"), [0u8; 32]).unwrap();
    let out = rcpt().args(["log", "check"]).arg(&dir).assert().code(1);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("tile tile/0/000.p/1 differs"), "{err}");
}

#[test]
fn a_second_writer_is_told_about_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init(tmp.path());
    let held = rcpt::log::LogWriter::open(&dir, &SigningKey::from_bytes(&[5u8; 32]), false);
    let _held = held.unwrap();
    let f = tmp.path().join("r.json");
    std::fs::write(&f, envelope(1)).unwrap();
    let out = rcpt()
        .args(["log", "append"])
        .arg(&dir)
        .arg(&f)
        .assert()
        .code(1);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("another rcpt process is writing to"), "{err}");
    assert!(err.contains("--wait"), "{err}");
}

#[test]
fn init_refuses_a_key_inside_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    std::fs::create_dir(&dir).unwrap();
    let key = tmp.path().join("log.key");
    std::fs::write(&key, rcpt::keys::signing_key_to_pem(&issuer())).unwrap();
    rcpt()
        .args(["log", "init"])
        .arg(&dir)
        .args(["--origin", "o", "--key"])
        .arg(&key)
        .assert()
        .success();
    let dir2 = tmp.path().join("log2");
    std::fs::create_dir(&dir2).unwrap();
    let inside = dir2.join("k.key");
    std::fs::copy(&key, &inside).unwrap();
    let out = rcpt()
        .args(["log", "init"])
        .arg(&dir2)
        .args(["--origin", "o", "--key"])
        .arg(&inside)
        .assert()
        .code(1);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("inside the log directory"), "{err}");
}

/// Regression (found by the independent reference): `prove --size` and
/// `consistency` at a size the log never published failed with a tile
/// read error, or succeeded for one command and not the other. Both now
/// refuse an unpublished size, naming it, and work at published ones.
#[test]
fn prove_and_consistency_refuse_unpublished_sizes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init(tmp.path());
    for batch in [0..2u64, 2..5] {
        let files: Vec<PathBuf> = batch
            .map(|n| {
                let path = tmp.path().join(format!("e{n}.json"));
                std::fs::write(&path, envelope(n)).unwrap();
                path
            })
            .collect();
        rcpt()
            .args(["log", "append"])
            .arg(&dir)
            .args(&files)
            .assert()
            .success();
    }
    // Published sizes: 0, 2, 5.
    let unpublished = "the log published no checkpoint of size 4 (latest is 5)";
    rcpt()
        .args(["log", "prove"])
        .arg(&dir)
        .args(["--index", "1", "--size", "4"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(unpublished));
    for (from, to) in [("1", "5"), ("2", "4")] {
        rcpt()
            .args(["log", "consistency"])
            .arg(&dir)
            .args(["--from", from, "--to", to, "--json"])
            .assert()
            .code(1)
            .stderr(predicates::str::contains("published no checkpoint of size"));
    }
    rcpt()
        .args(["log", "prove"])
        .arg(&dir)
        .args(["--index", "1", "--size", "2"])
        .assert()
        .success();
    rcpt()
        .args(["log", "consistency"])
        .arg(&dir)
        .args(["--from", "2", "--to", "5", "--json"])
        .assert()
        .success();
}

/// A trust file accepting `issuer()` under the name "test" (the issuer
/// `envelope` writes into its receipts).
fn trust_file(tmp: &Path, name: &str) -> PathBuf {
    let path = tmp.join(format!("trust-{name}.json"));
    let key = STANDARD.encode(issuer().verifying_key().as_bytes());
    let json = format!(r#"{{"issuers": [{{"name": "{name}", "public_key": "{key}"}}]}}"#);
    std::fs::write(&path, json).unwrap();
    path
}

/// Regression (issue 8, defect 10): a forged envelope was appended. A log
/// with accepted issuers (given at init, or to append) refuses envelopes
/// without a valid signature by the issuer they name; a log without says
/// that signatures were not checked.
#[test]
fn accepted_issuers_refuse_forged_and_foreign_envelopes() {
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("log.key");
    support::write_key(&key, 5);
    let dir = tmp.path().join("log");
    let init_out = stdout(
        rcpt()
            .args(["log", "init"])
            .arg(&dir)
            .args(["--origin", ORIGIN, "--key"])
            .arg(&key)
            .arg("--trust")
            .arg(trust_file(tmp.path(), "test")),
    );
    assert!(init_out.contains("accepted issuers: test"), "{init_out}");
    let good = envelope(1);
    let mut forged: serde_json::Value = serde_json::from_str(&envelope(2)).unwrap();
    let sig = forged["signatures"][0]["sig"].as_str().unwrap().to_string();
    let mut raw = STANDARD.decode(sig).unwrap();
    raw[0] ^= 1;
    forged["signatures"][0]["sig"] = STANDARD.encode(raw).into();
    let payload = Envelope::from_json(envelope(3).as_bytes()).unwrap().payload;
    let foreign = Envelope::sign(
        RECEIPT_PAYLOAD_TYPE,
        payload,
        &SigningKey::from_bytes(&[8u8; 32]),
    )
    .to_json();
    let stdin = format!("{good}\n{forged}\n{foreign}\n");
    let out = rcpt()
        .args(["log", "append", "--json"])
        .arg(&dir)
        .arg("-")
        .write_stdin(stdin)
        .assert()
        .code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(
        (rows[0]["index"].as_u64(), rows[0]["signature"].as_str()),
        (Some(0), Some("verified"))
    );
    assert_eq!(rows[1]["error"], "signature.invalid");
    assert_eq!(rows[2]["error"], "signature.untrusted");
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(!err.contains("not checked"), "{err}");
    let cp = stdout(rcpt().args(["log", "checkpoint"]).arg(&dir));
    assert!(cp.lines().nth(1) == Some("1"), "{cp}");

    // A log without accepted issuers: the forgery goes in, and the output says so.
    std::fs::create_dir(tmp.path().join("plain")).unwrap();
    let plain = init(&tmp.path().join("plain"));
    let out = rcpt()
        .args(["log", "append", "--json"])
        .arg(&plain)
        .arg("-")
        .write_stdin(format!("{forged}\n"))
        .assert()
        .success();
    let row: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(row["signature"], "not_checked");
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("signatures are not checked"), "{err}");
    // The same log with --trust naming another issuer: a mismatch.
    let out = rcpt()
        .args(["log", "append", "--json", "--trust"])
        .arg(trust_file(tmp.path(), "someone-else"))
        .arg(&plain)
        .arg("-")
        .write_stdin(format!("{good}\n"))
        .assert()
        .code(1);
    let row: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(row["error"], "signature.issuer_mismatch");
}

/// Copy a directory tree, leaving out `.rcpt/` (what a mirror or a static
/// copy of a log holds).
fn copy_public(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == ".rcpt" {
            continue;
        }
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_public(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// Issue 11 (part): `prove`, `consistency`, `check` and `checkpoint` work
/// on a log's public files alone (a mirror or a copy, no `.rcpt/`), given
/// the log key; without it they say what to pass.
#[test]
fn a_copy_of_the_public_files_is_read_with_the_log_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init(tmp.path());
    let files: Vec<PathBuf> = (0..5)
        .map(|n| {
            let p = tmp.path().join(format!("c{n}.json"));
            std::fs::write(&p, envelope(100 + n)).unwrap();
            p
        })
        .collect();
    for batch in [&files[..3], &files[3..]] {
        rcpt()
            .args(["log", "append"])
            .arg(&dir)
            .args(batch)
            .assert()
            .success();
    }
    let copy = tmp.path().join("copy");
    copy_public(&dir, &copy);
    let vkey =
        rcpt::keys::NoteVerifier::new(ORIGIN, SigningKey::from_bytes(&[5u8; 32]).verifying_key())
            .unwrap()
            .to_string();
    // Without the key: one clear message.
    let out = rcpt().args(["log", "check"]).arg(&copy).assert().code(1);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("--log-key") && err.contains("settings.json"),
        "{err}"
    );
    // With it: the same answers as the log itself.
    let ok = stdout(rcpt().args(["log", "check", "--log-key", &vkey]).arg(&copy));
    assert!(ok.starts_with("ok: 5 entries"), "{ok}");
    for args in [
        vec!["prove", "--index", "3"],
        vec!["checkpoint"],
        vec!["consistency", "--from", "5", "--json"],
    ] {
        let original = stdout(rcpt().arg("log").args(&args).arg(&dir));
        let mirrored = stdout(
            rcpt()
                .arg("log")
                .args(&args)
                .args(["--log-key", &vkey])
                .arg(&copy),
        );
        assert_eq!(original, mirrored, "{args:?}");
        // The key from its file reads the copy the same way.
        let vkey_file = tmp.path().join("log.vkey.copy");
        std::fs::write(&vkey_file, format!("{vkey}\n")).unwrap();
        let from_file = stdout(
            rcpt()
                .arg("log")
                .args(&args)
                .arg("--log-key-file")
                .arg(&vkey_file)
                .arg(&copy),
        );
        assert_eq!(original, from_file, "{args:?} --log-key-file");
    }
    let by_receipt = stdout(
        rcpt()
            .args(["log", "prove", "--log-key", &vkey, "--receipt"])
            .arg(&files[4])
            .arg(&copy),
    );
    let bundle: serde_json::Value = serde_json::from_str(&by_receipt).unwrap();
    assert_eq!(bundle["log"]["index"], 4, "{by_receipt}");
    // A copy keeps no earlier checkpoints: only the latest size is provable.
    rcpt()
        .args(["log", "consistency", "--from", "3", "--log-key", &vkey])
        .arg(&copy)
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "published no checkpoint of size 3",
        ));
    // Another key: the checkpoint does not verify; on the log itself, the
    // key must be the one its settings hold.
    let other = rcpt::keys::NoteVerifier::new(ORIGIN, issuer().verifying_key())
        .unwrap()
        .to_string();
    rcpt()
        .args(["log", "check", "--log-key", &other])
        .arg(&copy)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("not signed by the log key"));
    rcpt()
        .args(["log", "check", "--log-key", &other])
        .arg(&dir)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("is not the key of this log"));
    // A copy takes no appends.
    rcpt()
        .args(["log", "append", "--key"])
        .arg(tmp.path().join("log.key"))
        .arg(&copy)
        .arg(&files[0])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("not appended to"));
    assert!(!copy.join(".rcpt").exists());
}

/// A directory that is not a log says so once, names `rcpt log init`, and
/// does not repeat an OS error, in every log command; one that does not
/// exist is a bad invocation (exit 2), like every other missing input.
#[test]
fn a_directory_that_is_not_a_log_says_so_once() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("r.json");
    std::fs::write(&f, envelope(1)).unwrap();
    let key = tmp.path().join("k.key");
    std::fs::write(&key, rcpt::keys::signing_key_to_pem(&issuer())).unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"hello").unwrap();
    for dir in [tmp.path().join("absent"), empty, other] {
        let absent = !dir.exists();
        let dir = dir.to_str().unwrap();
        let key = key.to_str().unwrap();
        let f = f.to_str().unwrap();
        for args in [
            vec!["check", dir],
            vec!["checkpoint", dir],
            vec!["prove", dir, "--index", "0"],
            vec!["consistency", dir, "--from", "0"],
            vec!["append", dir, "--key", key, f],
        ] {
            let out = rcpt()
                .arg("log")
                .args(&args)
                .assert()
                .code(if absent { 2 } else { 1 });
            let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
            let says = if absent {
                "no such directory"
            } else {
                "is not a log"
            };
            assert!(err.contains(says), "{args:?}: {err}");
            assert_eq!(err.matches("rcpt log init").count(), 1, "{args:?}: {err}");
            assert!(
                !err.contains("os error") && !err.contains("No such file"),
                "{err}"
            );
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        }
    }
}

/// `prove --all` / `--range A..B` write one bundle per entry into an empty
/// directory, each the same bytes `prove --index` prints.
#[test]
fn prove_all_writes_one_bundle_per_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init(tmp.path());
    let files: Vec<PathBuf> = (0..300)
        .map(|n| {
            let p = tmp.path().join(format!("a{n}.json"));
            std::fs::write(&p, envelope(1000 + n)).unwrap();
            p
        })
        .collect();
    for batch in [&files[..260], &files[260..]] {
        rcpt()
            .args(["log", "append"])
            .arg(&dir)
            .args(batch)
            .assert()
            .success();
    }
    let all = tmp.path().join("all");
    rcpt()
        .args(["log", "prove", "--all", "--out-dir"])
        .arg(&all)
        .arg(&dir)
        .assert()
        .success()
        .stdout(predicates::str::contains("wrote 300 bundles"));
    assert_eq!(std::fs::read_dir(&all).unwrap().count(), 300);
    for i in [0u64, 1, 255, 256, 259, 299] {
        let one = stdout(
            rcpt()
                .args(["log", "prove", "--index", &i.to_string()])
                .arg(&dir),
        );
        let file = std::fs::read_to_string(all.join(format!("{i}.bundle.json"))).unwrap();
        assert_eq!(file, one, "bundle {i}");
    }
    // A range at an earlier published size.
    let some = tmp.path().join("some");
    rcpt()
        .args([
            "log",
            "prove",
            "--range",
            "250..258",
            "--size",
            "260",
            "--out-dir",
        ])
        .arg(&some)
        .arg(&dir)
        .assert()
        .success();
    let mut names: Vec<String> = std::fs::read_dir(&some)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 8);
    let b: serde_json::Value =
        serde_json::from_slice(&std::fs::read(some.join("257.bundle.json")).unwrap()).unwrap();
    assert_eq!(
        (b["log"]["index"].as_u64(), b["log"]["tree_size"].as_u64()),
        (Some(257), Some(260))
    );
    // The same for C2SP tlog-proof files.
    let tlog = tmp.path().join("tlog");
    rcpt()
        .args([
            "log",
            "prove",
            "--range",
            "254..258",
            "--format",
            "tlog-proof",
            "--out-dir",
        ])
        .arg(&tlog)
        .arg(&dir)
        .assert()
        .success();
    for i in 254u64..258 {
        let one = stdout(
            rcpt()
                .args([
                    "log",
                    "prove",
                    "--format",
                    "tlog-proof",
                    "--index",
                    &i.to_string(),
                ])
                .arg(&dir),
        );
        let file = std::fs::read_to_string(tlog.join(format!("{i}.tlog-proof"))).unwrap();
        assert_eq!(file, one, "tlog-proof {i}");
    }
    // Not into a directory that holds files; not past the size.
    rcpt()
        .args(["log", "prove", "--all", "--out-dir"])
        .arg(&some)
        .arg(&dir)
        .assert()
        .code(2);
    rcpt()
        .args(["log", "prove", "--range", "0..301", "--out-dir"])
        .arg(tmp.path().join("past"))
        .arg(&dir)
        .assert()
        .code(2);
    // Not through a link at the directory's name: nothing is written
    // where it points.
    let target = tmp.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    rcpt()
        .args(["log", "prove", "--all", "--out-dir"])
        .arg(&link)
        .arg(&dir)
        .assert()
        .failure()
        .stderr(predicates::str::contains("symbolic link"));
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
}

/// Standard input is read and admitted a chunk (4,096 lines) at a time
/// while a batch is gathered, the next chunk read while the last is
/// admitted: across chunk and batch boundaries every line is still
/// reported once, in input order, a refusal at its own line, the admitted
/// envelopes numbered in their order, and a repeat given the first index.
#[test]
fn append_stdin_reports_in_order_across_chunks_and_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init(tmp.path());
    let mut input = String::new();
    let mut expected: Vec<Option<(u64, bool)>> = Vec::new();
    let mut next = 0u64;
    for i in 0..9_000u64 {
        if i % 1_000 == 999 {
            input.push_str("{\"not\": \"an envelope\"}\n");
            expected.push(None);
        } else if i == 5_000 {
            input.push_str(&envelope(0));
            input.push('\n');
            expected.push(Some((0, false)));
        } else {
            input.push_str(&envelope(i));
            input.push('\n');
            expected.push(Some((next, true)));
            next += 1;
        }
    }
    let out = rcpt()
        .args(["log", "append"])
        .arg(&dir)
        .args(["--key"])
        .arg(tmp.path().join("log.key"))
        .args(["--json", "--batch", "5000", "-"])
        .write_stdin(input)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let lines: Vec<serde_json::Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), expected.len());
    for (i, (line, want)) in lines.iter().zip(&expected).enumerate() {
        assert_eq!(line["file"], format!("-:{}", i + 1), "{line}");
        match want {
            Some((index, new)) => {
                assert_eq!(line["index"], *index, "{line}");
                assert_eq!(line["new"], *new, "{line}");
            }
            None => assert!(line["error"].is_string(), "{line}"),
        }
    }
    let log = rcpt::log::Log::open(&dir).unwrap();
    assert_eq!(log.size(), next);
}
