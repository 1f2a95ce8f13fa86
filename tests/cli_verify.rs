//! `rcpt verify` as a user meets it: exit statuses, output formats, the
//! corpus runner, consistency with --since, and running with no network.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use predicates::prelude::*;
use std::path::{Path, PathBuf};
use support::{bundle_path, corpus, rcpt, show};

fn bundle(name: &str) -> String {
    bundle_path(name).display().to_string()
}

/// `rcpt verify --trust corpus/trust.json ARGS...`
fn verify(args: &[&str]) -> assert_cmd::assert::Assert {
    let trust = corpus().join("trust.json");
    rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(trust)
        .args(args)
        .assert()
}

#[test]
fn corpus_matches_its_manifest() {
    rcpt()
        .args(["verify", "--corpus"])
        .arg(corpus())
        .assert()
        .code(0)
        .stdout(
            predicate::str::contains("0 not")
                .and(predicate::str::contains("0 changed"))
                // issue 34 defect 2: three frozen expectations superseded,
                // applied from the errata file beside the corpus and said so.
                .and(predicate::str::contains(
                    "3 expectations superseded by errata",
                ))
                .and(predicate::str::contains(
                    "bundles/signature-untrusted-only.json",
                ))
                .and(predicate::str::contains(
                    "failed [signature.impersonation] (erratum: supersedes error \
                     [signature.untrusted])",
                )),
        );
}

#[test]
fn corpus_with_a_changed_file_fails() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&corpus(), tmp.path());
    let victim = tmp.path().join("bundles/verdict-admit.json");
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes.push(b'\n');
    std::fs::write(&victim, bytes).unwrap();
    rcpt()
        .args(["verify", "--corpus"])
        .arg(tmp.path())
        .arg("--errata")
        .arg(corpus().with_file_name("frozen-receipts.errata.json"))
        .assert()
        .code(1)
        .stdout(
            predicate::str::contains("CHANGED   bundles/verdict-admit.json")
                .and(predicate::str::contains("MISMATCH").not()),
        );
}

/// An errata file that no longer describes the corpus (its `supersedes`
/// is not what the frozen manifest says, or it names no case) refuses the
/// run: exit 2, nothing applied silently.
#[test]
fn corpus_with_drifted_errata_is_a_bad_invocation() {
    let tmp = tempfile::tempdir().unwrap();
    let good = corpus().with_file_name("frozen-receipts.errata.json");
    let text = std::fs::read_to_string(&good).unwrap();
    let drifted = tmp.path().join("drifted.errata.json");
    std::fs::write(
        &drifted,
        text.replacen(
            r#""supersedes": {"expect": "error", "reason": "signature.untrusted"}"#,
            r#""supersedes": {"expect": "failed", "reason": "signature.invalid"}"#,
            1,
        ),
    )
    .unwrap();
    rcpt()
        .args(["verify", "--corpus"])
        .arg(corpus())
        .arg("--errata")
        .arg(&drifted)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "supersedes failed [signature.invalid], but the root manifest says error \
             [signature.untrusted]",
        ));
    let dangling = tmp.path().join("dangling.errata.json");
    std::fs::write(
        &dangling,
        text.replacen(
            "bundles/signature-untrusted-only.json",
            "bundles/no-such-case.json",
            1,
        ),
    )
    .unwrap();
    rcpt()
        .args(["verify", "--corpus"])
        .arg(corpus())
        .arg("--errata")
        .arg(&dangling)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "erratum for bundles/no-such-case.json names no case",
        ));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dst = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dst);
        } else {
            std::fs::copy(entry.path(), dst).unwrap();
        }
    }
}

#[test]
fn exit_status_zero_one_three() {
    verify(&[&bundle("verdict-admit"), &bundle("verdict-deny")])
        .code(0)
        .stdout(predicate::str::contains(
            "2 verified, 0 failed, 0 not evaluated",
        ));
    verify(&[
        &bundle("verdict-admit"),
        &bundle("inclusion-truncated"),
        &bundle("log-unknown-origin"),
    ])
    .code(1)
    .stdout(predicate::str::contains("[inclusion.invalid]"));
    verify(&[&bundle("verdict-admit"), &bundle("log-unknown-origin")])
        .code(3)
        .stdout(predicate::str::contains(
            "not evaluated checkpoint.signature [log.untrusted]",
        ));
    // A forgery of the trusted issuer's name fails (issue 34 defect 2).
    verify(&[
        &bundle("verdict-admit"),
        &bundle("signature-untrusted-only"),
    ])
    .code(1)
    .stdout(predicate::str::contains(
        "fail signature [signature.impersonation]",
    ));
    // A bundle path that names no file (an unmatched glob) is a bad
    // invocation, reported before any output.
    verify(&["/nonexistent/bundle.json"])
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("/nonexistent/bundle.json"));
}

#[test]
fn bad_invocations_exit_two() {
    // No trusted issuer key at all.
    let log_key = std::fs::read_to_string(corpus().join("keys/log.vkey")).unwrap();
    rcpt()
        .args([
            "verify",
            "--log-key",
            log_key.trim(),
            &bundle("verdict-admit"),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no trusted issuer key"));
    // No trusted log key at all.
    rcpt()
        .args(["verify", "--issuer-key-file"])
        .arg(corpus().join("keys/issuer.pub"))
        .arg(bundle("verdict-admit"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no trusted log key"));
    // --since without --consistency, no bundles, a missing trust file.
    verify(&["--since", "x", &bundle("verdict-admit")]).code(2);
    rcpt().arg("verify").assert().code(2);
    rcpt()
        .args([
            "verify",
            "--trust",
            "/nonexistent/trust.json",
            &bundle("verdict-admit"),
        ])
        .assert()
        .code(2);
}

#[test]
fn keys_on_the_command_line_instead_of_a_trust_file() {
    let log_key = corpus().join("keys/log.vkey");
    // The frozen issuer's key under its name (the receipts' issuer).
    let issuer = show(
        &corpus().join("keys/issuer.pub"),
        "gate.example/frozen",
        "verifier key",
    );
    rcpt()
        .args(["verify", "--issuer-key", &issuer])
        .arg("--log-key-file")
        .arg(&log_key)
        .arg(bundle("verdict-escalate"))
        .assert()
        .code(0);
    // The verifier key given as a string works the same.
    let text = std::fs::read_to_string(&log_key).unwrap();
    rcpt()
        .args(["verify", "--issuer-key", &issuer])
        .args(["--log-key", text.trim(), &bundle("verdict-escalate")])
        .assert()
        .code(0);
    // The .pub file alone binds no name: authentic, but not for this issuer.
    rcpt()
        .args(["verify", "--issuer-key-file"])
        .arg(corpus().join("keys/issuer.pub"))
        .args(["--log-key", text.trim(), &bundle("verdict-escalate")])
        .assert()
        .code(1);
    // Trusting only the untrusted issuer turns the good bundle into "not evaluated".
    rcpt()
        .args(["verify", "--issuer-key-file"])
        .arg(corpus().join("keys/untrusted-issuer.pub"))
        .args(["--log-key", text.trim(), &bundle("verdict-escalate")])
        .assert()
        .code(3);
}

/// The log's own key given as an issuer key is named as the log's key
/// (bad invocation), by the key or by its name, in whichever order the
/// flags come; not a verification result.
#[test]
fn the_logs_key_given_as_an_issuer_key_is_named_as_the_logs() {
    let log_key = corpus().join("keys/log.vkey");
    let text = std::fs::read_to_string(&log_key).unwrap();
    let origin = text.split('+').next().unwrap().to_string();
    let issuer = show(
        &corpus().join("keys/issuer.pub"),
        "gate.example/frozen",
        "verifier key",
    );
    // The issuer's key under the log's name: a log key by its name.
    let named_as_log = show(&corpus().join("keys/issuer.pub"), &origin, "verifier key");
    for issuer_args in [
        vec![
            "--issuer-key-file".to_string(),
            log_key.display().to_string(),
        ],
        vec!["--issuer-key".to_string(), text.trim().to_string()],
        vec!["--issuer-key".to_string(), named_as_log],
    ] {
        let out = rcpt()
            .arg("verify")
            .args(&issuer_args)
            .args(["--issuer-key", &issuer])
            .arg("--log-key-file")
            .arg(&log_key)
            .arg(bundle("verdict-escalate"))
            .assert()
            .code(2);
        let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        assert!(
            err.contains(&format!("is the log's key ({origin}), not an issuer's")),
            "{issuer_args:?}: {err}"
        );
    }
}

/// `verify DIR` reads the bundles of DIR and skips, saying so, the files
/// whose names say they are not bundles (a trust file beside them); named
/// on the command line, such a file is read as a bundle (and fails).
#[test]
fn a_directory_skips_what_its_names_say_is_not_a_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bundles");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(bundle("verdict-escalate"), dir.join("a.json")).unwrap();
    let trust = corpus().join("trust.json");
    for name in ["trust.json", "ci.trust.json", "gate.json", "x.watch.json"] {
        std::fs::copy(&trust, dir.join(name)).unwrap();
    }
    let out = rcpt()
        .args(["verify", "--trust"])
        .arg(&trust)
        .arg(&dir)
        .assert()
        .code(0);
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stdout.contains("1 verified, 0 failed"), "{stdout}");
    for name in ["trust.json", "ci.trust.json", "gate.json", "x.watch.json"] {
        assert!(
            stderr.contains(&format!("skipped {}", dir.join(name).display())),
            "{name}: {stderr}"
        );
    }
    assert!(
        stderr.contains("a trust file by its name, not a bundle"),
        "{stderr}"
    );
    // Named, it is read: a trust file is not a bundle.
    rcpt()
        .args(["verify", "--trust"])
        .arg(&trust)
        .arg(dir.join("trust.json"))
        .assert()
        .code(1);
    // A directory of nothing but such files: nothing to verify.
    std::fs::remove_file(dir.join("a.json")).unwrap();
    rcpt()
        .args(["verify", "--trust"])
        .arg(&trust)
        .arg(&dir)
        .assert()
        .code(2);
}

#[test]
fn json_format_lists_every_check() {
    let out = verify(&[
        "--format",
        "json",
        &bundle("verdict-admit"),
        &bundle("invariant-applied-deny"),
    ])
    .code(1)
    .get_output()
    .stdout
    .clone();
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        doc["summary"],
        serde_json::json!({"verified": 1, "failed": 1, "error": 0})
    );
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["outcome"], "verified");
    let names: Vec<&str> = results[0]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in [
        "signature",
        "payload.canonical",
        "payload.schema",
        "invariant.replay",
        "receipt_id",
        "checkpoint.signature",
        "checkpoint.match",
        "inclusion",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(
        results[0]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] == "pass")
    );
    assert_eq!(results[1]["outcome"], "failed");
    let failed: Vec<_> = results[1]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .collect();
    assert_eq!(failed.len(), 1, "only the invariant fails: {failed:?}");
    assert_eq!(failed[0]["reason"], "invariant.applied");
}

#[test]
fn junit_format_has_one_testcase_per_bundle() {
    let out = verify(&[
        "--format",
        "junit",
        &bundle("verdict-admit"),
        &bundle("receipt-id-mismatch"),
        &bundle("payload-version-2"),
    ])
    .code(1)
    .get_output()
    .stdout
    .clone();
    let xml = String::from_utf8(out).unwrap();
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
    assert!(
        xml.contains("tests=\"3\" failures=\"1\" errors=\"1\""),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 3);
    assert!(xml.contains("<failure type=\"receipt_id.mismatch\""));
    assert!(xml.contains("<error type=\"payload.version_unsupported\""));
    assert!(xml.trim_end().ends_with("</testsuites>"));
}

/// Build a log with the CLI: returns (dir, log key file, origin).
fn cli_log(tmp: &Path, origin: &str, receipts: &[PathBuf], key_name: &str) -> PathBuf {
    let dir = tmp.join(format!("log-{key_name}"));
    let key = tmp.join(key_name);
    if !key.with_extension("key").exists() {
        rcpt()
            .args(["key", "generate", "--name", origin, "--out"])
            .arg(&key)
            .assert()
            .success();
    }
    rcpt()
        .args(["log", "init"])
        .arg(&dir)
        .args(["--origin", origin, "--key"])
        .arg(key.with_extension("key"))
        .assert()
        .success();
    for r in receipts {
        rcpt()
            .args(["log", "append"])
            .arg(&dir)
            .arg(r)
            .assert()
            .success();
    }
    dir
}

/// Issue `n` receipts signed by a fresh key; returns (issuer pub, envelopes).
fn issue(tmp: &Path, n: usize) -> (PathBuf, Vec<PathBuf>) {
    let key = tmp.join("gate");
    rcpt()
        .args(["key", "generate", "--name", "gate", "--out"])
        .arg(&key)
        .assert()
        .success();
    let mut out = Vec::new();
    for i in 0..n {
        let payload = tmp.join(format!("p{i}.json"));
        let d = |s: &str| rcpt::digest::Digest::blake3(format!("{s}{i}").as_bytes()).to_string();
        let j = serde_json::json!({
            "version": 1, "issuer": "gate", "issued_at": 1_795_000_000 + i, "substrate": "git",
            "change_id": d("c"), "inverse_delta_id": null, "reversibility": null, "read_set": [],
            "precondition": null, "policy_id": d("p"), "verdict": {"escalate": {"ticket": format!("T-{i}")}},
            "applied": false, "replay": {"class": "unknown"}
        });
        std::fs::write(&payload, j.to_string()).unwrap();
        let env = tmp.join(format!("r{i}.json"));
        rcpt()
            .args(["receipt", "issue", "--key"])
            .arg(key.with_extension("key"))
            .arg("-o")
            .arg(&env)
            .arg(&payload)
            .assert()
            .success();
        out.push(env);
    }
    (key.with_extension("pub"), out)
}

#[test]
fn since_accepts_an_extension_and_refuses_a_fork() {
    let tmp = tempfile::tempdir().unwrap();
    let (issuer_pub, envs) = issue(tmp.path(), 6);
    let origin = "test.example/since";
    let dir = cli_log(tmp.path(), origin, &envs[..3], "logkey");
    let old = tmp.path().join("old.checkpoint");
    let cp = rcpt()
        .args(["log", "checkpoint"])
        .arg(&dir)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    std::fs::write(&old, cp).unwrap();
    for r in &envs[3..] {
        rcpt()
            .args(["log", "append"])
            .arg(&dir)
            .arg(r)
            .assert()
            .success();
    }
    let proof = consistency_file(&dir, 3, 6, &tmp.path().join("proof.json"));
    let b = prove_file(&dir, 4, &tmp.path().join("b.json"));
    let vkey = show(&tmp.path().join("logkey.pub"), origin, "verifier key");
    let issuer = show(&issuer_pub, "gate", "verifier key");
    let run = |since: &Path, proof: &Path, bundle: &Path| {
        rcpt()
            .args(["verify", "--issuer-key", &issuer])
            .args(["--log-key", &vkey, "--since"])
            .arg(since)
            .arg("--consistency")
            .arg(proof)
            .arg(bundle)
            .assert()
    };
    run(&old, &proof, &b).code(0);
    // A fork: the same key and origin, another history of the same first size.
    let forked = tmp.path().join("log-fork");
    rcpt()
        .args(["log", "init"])
        .arg(&forked)
        .args(["--origin", origin, "--key"])
        .arg(tmp.path().join("logkey.key"))
        .assert()
        .success();
    for r in [&envs[1], &envs[0], &envs[2], &envs[3], &envs[4], &envs[5]] {
        rcpt()
            .args(["log", "append"])
            .arg(&forked)
            .arg(r)
            .assert()
            .success();
    }
    let fb = prove_file(&forked, 4, &tmp.path().join("fb.json"));
    let fp = consistency_file(&forked, 3, 6, &tmp.path().join("fproof.json"));
    // The forked bundle verifies on its own, but does not extend the old checkpoint.
    run(&old, &fp, &fb)
        .code(1)
        .stdout(predicate::str::contains("[consistency.invalid]"));
    // A proof between other sizes is refused for what it is.
    let p2 = consistency_file(&dir, 2, 6, &tmp.path().join("proof2.json"));
    run(&old, &p2, &b)
        .code(1)
        .stdout(predicate::str::contains("[consistency.size_mismatch]"));
}

/// `rcpt log consistency DIR --from M --to N --json` written to `out`.
fn consistency_file(dir: &Path, from: u64, to: u64, out: &Path) -> PathBuf {
    std::fs::write(out, support::consistency_json(dir, from, to)).unwrap();
    out.to_path_buf()
}

/// `rcpt log prove DIR --index I -o out`.
fn prove_file(dir: &Path, index: u64, out: &Path) -> PathBuf {
    rcpt()
        .args(["log", "prove"])
        .arg(dir)
        .args(["--index", &index.to_string(), "-o"])
        .arg(out)
        .assert()
        .success();
    out.to_path_buf()
}

/// True when `unshare -rn true` works here (user namespaces allowed).
fn unshare_works() -> bool {
    std::process::Command::new("unshare")
        .args(["-rn", "true"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn verifies_with_no_network_at_all() {
    if !unshare_works() {
        support::skip(
            "`unshare -rn` is missing or not permitted here; the offline test needs a network namespace",
        );
        return;
    }
    // Inside a new network namespace there is no interface but a down loopback.
    let status = std::process::Command::new("unshare")
        .args(["-rn", "sh", "-c", "ip -o link show 2>/dev/null | grep -v ' lo:' | grep -q . && exit 9; exec \"$0\" verify --corpus \"$1\""])
        .arg(support::bin())
        .arg(corpus())
        .status()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "rcpt verify --corpus inside `unshare -rn`"
    );
}

#[test]
fn opens_no_socket_and_reads_only_its_inputs() {
    let strace_works = std::process::Command::new("strace")
        .args(["-qq", "-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !strace_works {
        support::skip("strace is missing or not permitted here");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("trace");
    let status = std::process::Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=%network,open,openat,openat2",
            "-o",
        ])
        .arg(&trace)
        .arg(support::bin())
        .args(["verify", "--corpus"])
        .arg(corpus())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let text = std::fs::read_to_string(&trace).unwrap();
    let network: Vec<&str> = text
        .lines()
        .filter(|l| {
            ["socket(", "connect(", "bind(", "sendto(", "recvfrom("]
                .iter()
                .any(|s| l.contains(s))
        })
        .collect();
    assert!(network.is_empty(), "network system calls: {network:?}");
    // Every path opened is an input, or what the loader and the thread pool read.
    let allowed = [
        "/etc/ld.so.cache",
        "/lib/",
        "/usr/lib/",
        "/lib64/",
        "/proc/self/",
        "/sys/fs/cgroup/",
        "/sys/devices/system/cpu",
    ];
    let corpus_dir = corpus().display().to_string();
    let mut opened = 0;
    for line in text.lines() {
        // Failed opens (the loader probing LD_LIBRARY_PATH) read nothing.
        let succeeded = line.contains("open") && !line.contains("= -1 ");
        let Some(path) = line.split('"').nth(1).filter(|_| succeeded) else {
            continue;
        };
        opened += 1;
        assert!(
            path.starts_with(&corpus_dir) || allowed.iter().any(|a| path.starts_with(a)),
            "opened a file that is not an input: {path}"
        );
    }
    assert!(
        opened > 100,
        "the trace saw {opened} opens: every bundle is opened"
    );
}
