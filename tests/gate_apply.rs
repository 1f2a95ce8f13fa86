//! `rcpt gate apply` and `rcpt gate undo` on real git repositories made
//! with the system `git` (spec/gate.md "The apply protocol"): text and
//! binary files, creations, deletions, renames and mode changes; deny
//! writes nothing; a patch that does not apply is not a verdict; the
//! compare and swap refuses a concurrent edit; undo, and undo of the undo;
//! crash trials (SIGKILL after every durable write step, then the next
//! `gate` command recovers); the store's limits; the TraceFold defect
//! (reversible with a null inverse) never signed; the README walkthrough.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::gate as gate_support;

use gate_support::{Gate, git, shown};
use std::path::{Path, PathBuf};

/// A project whose "test" passes when `value.txt` holds `good`, with a
/// binary file, a file to rename, one to delete, one whose mode changes.
fn project() -> Gate {
    let g = Gate::new(&[
        ("value.txt", "bad\n"),
        (
            "test.sh",
            "#!/bin/sh\necho testing\ngrep -q good value.txt\n",
        ),
        ("README", "a project\n"),
        ("old/name.txt", "renamed content\nline two\nline three\n"),
        ("gone.txt", "to be deleted\n"),
        ("tool", "#!/bin/sh\necho tool\n"),
    ]);
    std::fs::write(g.repo.join("image.bin"), [0u8, 1, 2, 255, 0, 7, 9, 0, 13]).unwrap();
    git(&g.repo, &["add", "-A"]);
    git(&g.repo, &["commit", "-q", "-m", "binary"]);
    g
}

fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn policy(g: &Gate) -> PathBuf {
    g.policy(&[("test", &["./test.sh"], 30)], &[])
}

/// Every kind of file change in one patch.
fn big_patch(g: &Gate) -> PathBuf {
    g.patch_of("all.patch", |g| {
        g.write("value.txt", "good\n");
        g.write("new/dir/created.txt", "created\n");
        std::fs::remove_file(g.repo.join("gone.txt")).unwrap();
        std::fs::create_dir_all(g.repo.join("new")).unwrap();
        std::fs::rename(g.repo.join("old/name.txt"), g.repo.join("new/name.txt")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(g.repo.join("tool"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::write(g.repo.join("image.bin"), [9u8, 0, 0, 1, 255, 254, 0]).unwrap();
    })
}

fn payload(path: &Path) -> serde_json::Value {
    let text = std::fs::read(path).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&text).unwrap();
    let env = if doc.get("envelope").is_some() {
        doc["envelope"].clone()
    } else {
        doc
    };
    let envelope = rcpt::receipt::dsse::Envelope::from_json(env.to_string().as_bytes()).unwrap();
    let (receipt, _) = rcpt::receipt::receipt_from_cbor(&envelope.payload).unwrap();
    let value = receipt.to_value();
    serde_json::from_str(&rcpt::receipt::canonical::json::to_json(&value).to_string()).unwrap()
}

#[test]
fn admit_applies_every_kind_of_change_and_undo_restores_it_then_undo_of_undo() {
    let g = project();
    let patch = big_patch(&g);
    let before = g.files();
    let receipt = g.world.dir().join("apply.json");
    let log = g.world.log.display().to_string();
    let out = g.apply(&patch, &policy(&g), &receipt, &["--log", &log]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    let after = g.files();
    assert_ne!(before, after);
    let find =
        |files: &[(String, Vec<u8>, bool)], p: &str| files.iter().find(|f| f.0 == p).cloned();
    assert_eq!(find(&after, "value.txt").unwrap().1, b"good\n");
    assert_eq!(find(&after, "new/dir/created.txt").unwrap().1, b"created\n");
    assert!(find(&after, "gone.txt").is_none());
    assert!(find(&after, "old/name.txt").is_none());
    assert!(
        !g.repo.join("old").exists(),
        "an emptied directory is removed"
    );
    assert_eq!(
        find(&after, "new/name.txt").unwrap().1,
        b"renamed content\nline two\nline three\n"
    );
    assert!(find(&after, "tool").unwrap().2, "mode change applied");
    assert_eq!(
        find(&after, "image.bin").unwrap().1,
        [9u8, 0, 0, 1, 255, 254, 0]
    );
    let p = payload(&receipt);
    assert_eq!(p["applied"], true);
    assert_eq!(p["reversibility"], true);
    assert!(
        p["inverse_delta_id"]
            .as_str()
            .unwrap()
            .starts_with("blake3:")
    );
    // The receipt verifies, and is fresh on the tree it left.
    let ok = g.verify(&receipt, &["--require-verdict", "admit", "--fresh", "."]);
    assert_eq!(code(&ok), 0, "{}", shown(&ok));
    // The user's index and HEAD are untouched by apply: git sees a change.
    assert!(!git(&g.repo, &["status", "--porcelain"]).is_empty());
    assert!(g.leftovers().is_empty() && g.worktrees() == 1);
    // Undo: every file back, modes included.
    let undone = g.world.dir().join("undo.json");
    let out = g.undo(&receipt, &undone, &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert_eq!(g.files(), before);
    let u = payload(&undone);
    assert_eq!(u["applied"], true);
    assert_eq!(u["reversibility"], true);
    assert_ne!(u["inverse_delta_id"], p["inverse_delta_id"]);
    // Undo the undo: the applied state again.
    let redone = g.world.dir().join("redo.json");
    let out = g.undo(&undone, &redone, &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert_eq!(g.files(), after);
    // gate show prints the evidence of each.
    for r in [&receipt, &undone] {
        let show = g.rcpt().args(["gate", "show"]).arg(r).output().unwrap();
        assert_eq!(code(&show), 0, "{}", shown(&show));
    }
}

#[test]
fn the_change_id_is_the_gate_id_of_the_tree_it_leaves() {
    let g = project();
    let patch = g.patch_of("v.patch", |g| g.write("value.txt", "good\n"));
    let receipt = g.world.dir().join("apply.json");
    let log = g.world.log.display().to_string();
    let out = g.apply(&patch, &policy(&g), &receipt, &["--log", &log]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    let id = g.id(&[]);
    assert_eq!(payload(&receipt)["change_id"], id.as_str());
    let ok = g.verify(
        &receipt,
        &[
            "--require-verdict",
            "admit",
            "--change-id",
            &id,
            "--fresh",
            ".",
        ],
    );
    assert_eq!(code(&ok), 0, "{}", shown(&ok));
}

#[test]
fn deny_writes_nothing_and_gets_a_receipt() {
    let g = project();
    let patch = g.patch_of("bad.patch", |g| g.write("value.txt", "worse\n"));
    let before = g.files();
    let receipt = g.world.dir().join("deny.json");
    let out = g.apply(&patch, &policy(&g), &receipt, &[]);
    assert_eq!(code(&out), 1, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("deny (check.test.failed)"));
    assert_eq!(g.files(), before);
    let p = payload(&receipt);
    assert_eq!(p["applied"], false);
    assert_eq!(p["reversibility"], true);
    // A deny receipt cannot be undone.
    let out = g.undo(&receipt, &g.world.dir().join("u.json"), &[]);
    assert_eq!(code(&out), 1, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("applied false"));
    assert_eq!(g.files(), before);
}

#[test]
fn a_patch_that_does_not_apply_is_not_a_verdict() {
    let g = project();
    let patch = g.patch_of("v.patch", |g| g.write("value.txt", "good\n"));
    g.write("value.txt", "something else\n");
    let before = g.files();
    let receipt = g.world.dir().join("none.json");
    let out = g.apply(&patch, &policy(&g), &receipt, &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not apply"));
    assert!(!receipt.exists());
    assert_eq!(g.files(), before);
    // A binary diff without its bytes: refused clearly, not a verdict.
    let nobytes = g.world.dir().join("nobytes.patch");
    std::fs::write(
        &nobytes,
        "diff --git a/image.bin b/image.bin\nindex 1111111..2222222 100644\n\
         Binary files a/image.bin and b/image.bin differ\n",
    )
    .unwrap();
    let out = g.apply(&nobytes, &policy(&g), &receipt, &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("binary"),
        "{}",
        shown(&out)
    );
    assert_eq!(g.files(), before);
    // Not a patch at all.
    let junk = g.world.dir().join("junk.patch");
    std::fs::write(&junk, "hello\n").unwrap();
    let out = g.apply(&junk, &policy(&g), &receipt, &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert_eq!(g.files(), before);
}

#[test]
fn a_patch_creating_a_symlink_is_refused() {
    let g = project();
    let patch = g.patch_of("link.patch", |g| {
        std::os::unix::fs::symlink("README", g.repo.join("link")).unwrap();
    });
    let before = g.files();
    let out = g.apply(&patch, &policy(&g), &g.world.dir().join("r.json"), &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("link"),
        "{}",
        shown(&out)
    );
    assert_eq!(g.files(), before);
}

#[test]
fn an_edit_between_the_read_and_the_write_makes_the_compare_and_swap_refuse() {
    let g = project();
    let patch = g.patch_of("v.patch", |g| {
        g.write("value.txt", "good\n");
        g.write("README", "a better project\n");
    });
    // The check (run in the clean copy) edits the user's README meanwhile.
    let readme = g.repo.join("README");
    let script = format!("./test.sh && echo concurrent > '{}'", readme.display());
    let p = g.policy(&[("test", &["sh", "-c", &script], 30)], &[]);
    let receipt = g.world.dir().join("r.json");
    let out = g.apply(&patch, &p, &receipt, &[]);
    assert_eq!(code(&out), 1, "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("README") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(std::fs::read(g.repo.join("value.txt")).unwrap(), b"bad\n");
    assert_eq!(std::fs::read(&readme).unwrap(), b"concurrent\n");
    assert!(!g.repo.join(".git/rcpt/store/journal").exists());
}

#[test]
fn undo_refuses_a_moved_file_and_a_foreign_receipt() {
    let g = project();
    let patch = big_patch(&g);
    let receipt = g.world.dir().join("apply.json");
    assert_eq!(code(&g.apply(&patch, &policy(&g), &receipt, &[])), 0);
    g.write("new/dir/created.txt", "edited after\n");
    let after = g.files();
    let out = g.undo(&receipt, &g.world.dir().join("u.json"), &[]);
    assert_eq!(code(&out), 1, "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("new/dir/created.txt") && err.contains("nothing was written"),
        "{err}"
    );
    // A refusal reads as an error, and says "nothing was written" once.
    assert!(err.starts_with("rcpt: error: "), "{err}");
    assert_eq!(err.matches("nothing was written").count(), 1, "{err}");
    assert_eq!(g.files(), after);
    // Under another key: not this gate's receipt.
    let other = g.world.dir().join("other.key");
    let made = g
        .rcpt()
        .args(["key", "generate", "--name", "gate.example/other", "--out"])
        .arg(g.world.dir().join("other"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", shown(&made));
    let out = g
        .rcpt()
        .args(["gate", "undo"])
        .arg(&receipt)
        .arg("--key")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not signed by this gate key"), "{err}");
    assert!(err.starts_with("rcpt: error: "), "{err}");
    assert_eq!(g.files(), after);
}

/// Undoing a receipt whose change was undone already says so (asked
/// twice more), and writes nothing.
#[test]
fn undo_of_an_undone_change_says_already_undone() {
    let g = project();
    let patch = big_patch(&g);
    let before = g.files();
    let receipt = g.world.dir().join("apply.json");
    assert_eq!(code(&g.apply(&patch, &policy(&g), &receipt, &[])), 0);
    let out = g.undo(&receipt, &g.world.dir().join("u1.json"), &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert_eq!(g.files(), before);
    for attempt in ["u2.json", "u3.json"] {
        let out = g.undo(&receipt, &g.world.dir().join(attempt), &[]);
        assert_eq!(code(&out), 1, "{}", shown(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("rcpt: error: "), "{err}");
        assert!(err.contains("already undone"), "{err}");
        assert_eq!(err.matches("nothing was written").count(), 1, "{err}");
        assert_eq!(g.files(), before);
    }
}

/// A file that is no patch at all (text, empty, random bytes) is no
/// verdict, said plainly: git's hints about git's own flags are not
/// passed on (rcpt has no such flags).
#[test]
fn a_non_patch_is_said_so_without_gits_flag_hints() {
    let g = project();
    let before = g.files();
    for (name, bytes) in [
        ("text.patch", b"this is not a patch\n".to_vec()),
        ("empty.patch", Vec::new()),
        ("noise.patch", (0..=255u8).cycle().take(4096).collect()),
    ] {
        let patch = g.world.dir().join(name);
        std::fs::write(&patch, bytes).unwrap();
        let out = g.apply(&patch, &policy(&g), &g.world.dir().join("r.json"), &[]);
        assert_eq!(code(&out), 3, "{}", shown(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not a patch"), "{name}: {err}");
        assert!(!err.contains("--"), "{name}: {err}");
        assert_eq!(g.files(), before);
    }
}

/// An apply interrupted by a crash is recovered once by the next apply,
/// under its lock, and the recovery is reported (issue 33: it ran twice
/// and its result was never read).
#[test]
fn the_next_apply_recovers_an_interrupted_one_once_and_says_so() {
    let g = project();
    let patch = big_patch(&g);
    let before = g.files();
    let receipt = g.world.dir().join("apply.json");
    let out = g
        .rcpt()
        .env("RCPT_GATE_CRASH_AFTER", "3")
        .args(["gate", "apply"])
        .arg(&patch)
        .arg("--policy")
        .arg(policy(&g))
        .arg("--key")
        .arg(&g.key)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), None, "killed: {}", shown(&out));
    assert!(g.repo.join(".git/rcpt/store/journal").exists());
    let out = g.apply(&patch, &policy(&g), &receipt, &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("recovered an interrupted gate apply: rolled back")
            .count(),
        1,
        "{err}"
    );
    assert_ne!(g.files(), before, "the second apply wrote its change");
    assert!(!g.repo.join(".git/rcpt/store/journal").exists());
}

/// The number of durable write steps of an apply or undo of `n` files:
/// the journal, each file, the receipt pointer, the journal removed.
fn steps(n: usize) -> u32 {
    n as u32 + 3
}

/// SIGKILL after each write step `k`; the next gate command recovers and
/// says so; every file is all before (k before the commit point) or all
/// after.
#[test]
fn crash_trials_over_every_write_step_of_apply_and_undo() {
    let files = 7; // the touched paths of big_patch
    for k in 1..=steps(files) {
        let g = project();
        let patch = big_patch(&g);
        let before = g.files();
        let receipt = g.world.dir().join("apply.json");
        let out = g
            .rcpt()
            .env("RCPT_GATE_CRASH_AFTER", k.to_string())
            .args(["gate", "apply"])
            .arg(&patch)
            .arg("--policy")
            .arg(policy(&g))
            .arg("--key")
            .arg(&g.key)
            .arg("-o")
            .arg(&receipt)
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "step {k}: {}", shown(&out));
        assert!(g.repo.join(".git/rcpt/store/journal").exists() || k == steps(files));
        let id = g.rcpt().args(["gate", "id"]).output().unwrap();
        assert!(id.status.success(), "{}", shown(&id));
        let err = String::from_utf8_lossy(&id.stderr);
        let committed = k >= steps(files) - 1;
        if k < steps(files) {
            let word = if committed {
                "rolled forward"
            } else {
                "rolled back"
            };
            assert!(err.contains(word), "step {k}: {err}");
        }
        assert!(!g.repo.join(".git/rcpt/store/journal").exists());
        let now = g.files();
        if committed {
            assert_ne!(now, before, "step {k}");
            // All after: the same as an uninterrupted apply.
            let h = project();
            let hp = big_patch(&h);
            assert_eq!(
                code(&h.apply(&hp, &policy(&h), &h.world.dir().join("x.json"), &[])),
                0
            );
            assert_eq!(now, h.files(), "step {k}");
        } else {
            assert_eq!(now, before, "step {k}: not all before");
        }
    }
}

#[test]
fn crash_trials_of_undo() {
    let files = 7;
    for k in 1..=steps(files) {
        let g = project();
        let patch = big_patch(&g);
        let before = g.files();
        let receipt = g.world.dir().join("apply.json");
        assert_eq!(code(&g.apply(&patch, &policy(&g), &receipt, &[])), 0);
        let after = g.files();
        let out = g
            .rcpt()
            .env("RCPT_GATE_CRASH_AFTER", k.to_string())
            .args(["gate", "undo"])
            .arg(&receipt)
            .arg("--key")
            .arg(&g.key)
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "step {k}: {}", shown(&out));
        let id = g.rcpt().args(["gate", "id"]).output().unwrap();
        assert!(id.status.success(), "{}", shown(&id));
        let now = g.files();
        if k >= steps(files) - 1 {
            assert_eq!(now, before, "undo step {k}: not all after");
        } else {
            assert_eq!(now, after, "undo step {k}: not all before");
            // The receipt can still be undone.
            let out = g.undo(&receipt, &g.world.dir().join("u.json"), &[]);
            assert_eq!(code(&out), 0, "{}", shown(&out));
            assert_eq!(g.files(), before);
        }
    }
}

#[test]
fn a_pre_image_over_the_limit_is_refused_or_irreversible_when_allowed() {
    let g = project();
    let big = vec![b'x'; rcpt::limits::MAX_GATE_PREIMAGE_BYTES + 1];
    std::fs::write(g.repo.join("big.dat"), &big).unwrap();
    git(&g.repo, &["add", "big.dat"]);
    git(&g.repo, &["commit", "-q", "-m", "big"]);
    let patch = g.patch_of("big.patch", |g| {
        std::fs::remove_file(g.repo.join("big.dat")).unwrap();
        g.write("value.txt", "good\n");
    });
    let store = g.repo.join(".git/rcpt/store/objects");
    let before = g.files();
    let receipt = g.world.dir().join("r.json");
    let out = g.apply(&patch, &policy(&g), &receipt, &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MAX_GATE_PREIMAGE_BYTES") && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!receipt.exists());
    assert_eq!(g.files(), before);
    let objects = |d: &Path| std::fs::read_dir(d).map_or(0, |r| r.count());
    assert_eq!(objects(&store), 0, "nothing stored either");
    // Allowed by the policy: applied, reversibility false, no inverse.
    let doc = serde_json::json!({"name": "ci", "checks": [{"name": "test", "run": ["./test.sh"], "timeout_s": 30}],
                                 "reads": [], "allow_irreversible": true});
    let p = g.world.dir().join("irreversible.json");
    std::fs::write(&p, doc.to_string()).unwrap();
    let log = g.world.log.display().to_string();
    let out = g.apply(&patch, &p, &receipt, &["--log", &log]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reversibility false"));
    assert!(!g.repo.join("big.dat").exists());
    let pl = payload(&receipt);
    assert_eq!(pl["reversibility"], false);
    assert_eq!(pl["inverse_delta_id"], serde_json::Value::Null);
    // The receipt verifies, and says so to whoever reads it.
    let v = g.verify(
        &receipt,
        &["--require-verdict", "admit", "--applied", "true"],
    );
    assert_eq!(code(&v), 0, "{}", shown(&v));
    assert!(
        String::from_utf8_lossy(&v.stdout)
            .contains("note: applied irreversibly (reversibility false, no inverse stored)"),
        "{}",
        shown(&v)
    );
    let shown_fields = g
        .rcpt()
        .args(["receipt", "inspect"])
        .arg(&receipt)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown_fields.stdout).to_string();
    assert!(
        text.contains("reversibility") && text.contains("false"),
        "{text}"
    );
    // It cannot be undone.
    let out = g.undo(&receipt, &g.world.dir().join("u.json"), &[]);
    assert_eq!(code(&out), 1, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reversibility false"));
}

#[test]
fn the_store_limit_refuses_before_anything_is_written() {
    let max = rcpt::limits::MAX_GATE_STORE_BYTES;
    assert!(rcpt::gate::apply::store_limits(&[("a".into(), 10)], max - 10).is_ok());
    let err = rcpt::gate::apply::store_limits(&[("a".into(), 10)], max - 9).unwrap_err();
    assert!(err.to_string().contains("MAX_GATE_STORE_BYTES"), "{err}");
}

/// The frozen corpus keeps a signed receipt with `reversibility` true and
/// a null inverse (TraceFold's defect). The gate's one signing path refuses
/// to sign it.
#[test]
fn the_tracefold_defect_is_never_signed_by_the_gate() {
    use rcpt::digest::Digest;
    use rcpt::receipt::{Receipt, Replay, Substrate, Verdict};
    let d = Digest::blake3(b"x");
    let receipt = Receipt {
        issuer: "gate.example/ci".into(),
        issued_at: 1,
        substrate: Substrate::Git,
        change_id: d,
        inverse_delta_id: None,
        reversibility: Some(true),
        read_set: vec![],
        precondition: Some(d),
        policy_id: d,
        verdict: Verdict::Admit { proof: d },
        applied: true,
        replay: Replay::DeterministicReplay,
    };
    let key = rcpt::keys::SigningKey::from_bytes(&[7u8; 32]);
    let err = rcpt::gate::sign(&receipt, &key).unwrap_err();
    assert!(format!("{err:#}").contains("receipt"), "{err:#}");
    let mut chain = String::new();
    let mut e: Option<&dyn std::error::Error> = Some(&err);
    while let Some(x) = e {
        chain.push_str(&x.to_string());
        e = x.source();
    }
    assert!(chain.contains("reversib"), "{chain}");
    // And every receipt `gate apply` issues pairs the two fields.
    let g = project();
    let patch = g.patch_of("v.patch", |g| g.write("value.txt", "good\n"));
    let r = g.world.dir().join("r.json");
    assert_eq!(code(&g.apply(&patch, &policy(&g), &r, &[])), 0);
    let p = payload(&r);
    assert_eq!(p["reversibility"] == true, !p["inverse_delta_id"].is_null());
}

/// The README's apply walkthrough, run as a script (bash -euo pipefail,
/// `rcpt` on PATH) in a fresh directory.
#[test]
fn the_readme_apply_walkthrough_runs_as_written() {
    let script = support::readme::block_after(
        "<!-- gate apply walkthrough: tests/gate_apply.rs runs the next block -->",
    );
    assert!(script.contains("rcpt gate apply") && script.contains("rcpt gate undo"));
    let (stdout, err, status) = support::readme::run_script(&script);
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{err}"
    );
    assert!(
        err.contains("verdict: admit") && err.contains("applied: true"),
        "{err}"
    );
    assert!(err.contains("verdict: deny (check.test.failed)"), "{err}");
}

/// Issue 23 "Speed": the clean copy is parked between runs and
/// brought back to the base with `reset --hard` + `clean -ffdx`, verified
/// clean. What a previous run's check left (an edited tracked file, an
/// untracked file, an ignored directory, a mode change) is gone at the
/// next run, a file nobody touched is not rewritten (same inode), and git
/// knows of no extra worktree between runs.
#[test]
fn the_parked_clean_worktree_is_faithful_and_reused() {
    use std::os::unix::fs::MetadataExt;
    let g = project();
    g.write(".gitignore", "ignored/\n");
    git(&g.repo, &["add", ".gitignore"]);
    git(&g.repo, &["commit", "-q", "-m", "ignore"]);
    g.write("value.txt", "good\n");
    let dirty = "./test.sh && echo dirt > README && echo x > untracked.txt \
                 && mkdir -p ignored && echo y > ignored/f && chmod +x gone.txt";
    let p = g.policy(&[("dirty", &["sh", "-c", dirty], 30)], &[]);
    let out = g.check(&p, &g.world.dir().join("1.json"), &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    let parked = g.parked();
    assert!(
        parked.join("untracked.txt").exists(),
        "parked as the check left it"
    );
    assert_eq!(g.worktrees(), 1);
    let inode = std::fs::metadata(parked.join("tool")).unwrap().ino();
    let clean = "./test.sh && grep -qx 'a project' README && test ! -e untracked.txt \
                 && test ! -e ignored && test ! -x gone.txt";
    let p = g.policy(&[("clean", &["sh", "-c", clean], 30)], &[]);
    let out = g.check(&p, &g.world.dir().join("2.json"), &[]);
    assert_eq!(
        code(&out),
        0,
        "the reused tree was not clean: {}",
        shown(&out)
    );
    assert_eq!(std::fs::metadata(parked.join("tool")).unwrap().ino(), inode);
    assert!(g.leftovers().is_empty() && g.worktrees() == 1);
    // A new commit as base: only what differs is checked out.
    git(&g.repo, &["commit", "-q", "-am", "good"]);
    g.write("README", "a project\n");
    let p = g.policy(&[("test", &["./test.sh"], 30)], &[]);
    let out = g.check(&p, &g.world.dir().join("3.json"), &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert_eq!(std::fs::metadata(parked.join("tool")).unwrap().ino(), inode);
}

#[test]
fn a_format_patch_email_applies() {
    let g = project();
    git(&g.repo, &["checkout", "-q", "-b", "side"]);
    g.write("value.txt", "good\n");
    g.write("docs/added.md", "# added\n");
    git(&g.repo, &["add", "-A"]);
    git(&g.repo, &["commit", "-q", "-m", "make it good"]);
    let mail = gate_support::git_cmd(&g.repo)
        .args(["format-patch", "-1", "--stdout", "--binary"])
        .output()
        .unwrap();
    assert!(mail.status.success());
    git(&g.repo, &["checkout", "-q", "main"]);
    let patch = g.world.dir().join("0001.patch");
    std::fs::write(&patch, &mail.stdout).unwrap();
    assert!(String::from_utf8_lossy(&mail.stdout).starts_with("From "));
    let out = g.apply(&patch, &policy(&g), &g.world.dir().join("r.json"), &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert_eq!(
        std::fs::read(g.repo.join("docs/added.md")).unwrap(),
        b"# added\n"
    );
}

#[test]
fn a_patch_touching_an_ignored_file_the_clean_copy_lacks_is_refused() {
    let g = project();
    g.write(".gitignore", "local.cfg\n");
    git(&g.repo, &["add", ".gitignore"]);
    git(&g.repo, &["commit", "-q", "-m", "ignore"]);
    g.write("local.cfg", "mine\n");
    let patch = g.world.dir().join("cfg.patch");
    std::fs::write(
        &patch,
        "diff --git a/local.cfg b/local.cfg\nnew file mode 100644\n--- /dev/null\n\
         +++ b/local.cfg\n@@ -0,0 +1 @@\n+theirs\n",
    )
    .unwrap();
    let out = g.apply(&patch, &policy(&g), &g.world.dir().join("r.json"), &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("local.cfg"),
        "{}",
        shown(&out)
    );
    assert_eq!(std::fs::read(g.repo.join("local.cfg")).unwrap(), b"mine\n");
}

/// Like the log's crash trials: SIGKILL at a seeded random moment of an
/// apply (and then of an undo), whatever it was doing; the next gate
/// command leaves every file all before or all after.
#[test]
fn sigkill_at_a_random_moment_leaves_all_before_or_all_after() {
    let mut rng = support::Rng(0x5eed_9a7e);
    // Calibrate: how long an uninterrupted apply takes here.
    let (reference, full_run) = {
        let h = project();
        let hp = big_patch(&h);
        let before = h.files();
        let t = std::time::Instant::now();
        assert_eq!(
            code(&h.apply(&hp, &policy(&h), &h.world.dir().join("x.json"), &[])),
            0
        );
        let full = t.elapsed().as_micros() as u64;
        ((before, h.files()), full.max(1))
    };
    let (mut before_seen, mut after_seen) = (0, 0);
    for trial in 0..12 {
        let g = project();
        let patch = big_patch(&g);
        let started = std::time::Instant::now();
        let mut child = g
            .rcpt()
            .args(["gate", "apply"])
            .arg(&patch)
            .arg("--policy")
            .arg(policy(&g))
            .arg("--key")
            .arg(&g.key)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(
            rng.next() % (full_run * 11 / 10),
        ));
        let _ = child.kill();
        let _ = child.wait();
        let id = g.rcpt().args(["gate", "id"]).output().unwrap();
        assert!(id.status.success(), "{}", shown(&id));
        let now = g.files();
        if now == reference.0 {
            before_seen += 1;
        } else {
            assert_eq!(
                now,
                reference.1,
                "trial {trial} after {:?}",
                started.elapsed()
            );
            after_seen += 1;
        }
    }
    eprintln!("{before_seen} all before, {after_seen} all after");
}

#[test]
fn a_missing_patch_file_is_a_bad_invocation() {
    let g = project();
    let out = g.apply(
        &g.world.dir().join("no-such.patch"),
        &policy(&g),
        &g.world.dir().join("r.json"),
        &[],
    );
    assert_eq!(code(&out), 2, "{}", shown(&out));
}

#[test]
fn undo_refuses_when_a_pre_image_is_missing_from_the_store() {
    let g = project();
    let patch = g.patch_of("v.patch", |g| g.write("value.txt", "good\n"));
    let receipt = g.world.dir().join("r.json");
    assert_eq!(code(&g.apply(&patch, &policy(&g), &receipt, &[])), 0);
    // The pre-image of value.txt ("bad\n") is an object of the store.
    let hex = rcpt::digest::to_hex(&rcpt::digest::Digest::blake3(b"bad\n").bytes);
    let object = g
        .repo
        .join(".git/rcpt/store/objects")
        .join(&hex[..2])
        .join(&hex[2..]);
    assert!(object.exists());
    std::fs::write(&object, b"corrupted").unwrap();
    let after = g.files();
    let out = g.undo(&receipt, &g.world.dir().join("u.json"), &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("corrupt"),
        "{}",
        shown(&out)
    );
    assert_eq!(g.files(), after);
    std::fs::remove_file(&object).unwrap();
    let out = g.undo(&receipt, &g.world.dir().join("u.json"), &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert_eq!(g.files(), after);
}

#[test]
fn a_second_apply_while_one_is_running_is_refused() {
    let g = project();
    let patch = g.patch_of("v.patch", |g| g.write("value.txt", "good\n"));
    // The first apply's check waits until the second apply is done.
    let release = g.world.dir().join("release");
    let wait = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; ./test.sh",
        release.display()
    );
    let slow = g.policy(&[("slow", &["sh", "-c", &wait], 60)], &[]);
    let first = g
        .rcpt()
        .args(["gate", "apply"])
        .arg(&patch)
        .arg("--policy")
        .arg(&slow)
        .arg("--key")
        .arg(&g.key)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while g.runs().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no clean copy appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = g.apply(&patch, &policy(&g), &g.world.dir().join("2.json"), &[]);
    assert_eq!(code(&second), 3, "{}", shown(&second));
    assert!(String::from_utf8_lossy(&second.stderr).contains("is using the store"));
    std::fs::write(&release, b"").unwrap();
    let first = first.wait_with_output().unwrap();
    assert_eq!(code(&first), 0, "{}", shown(&first));
    assert_eq!(std::fs::read(g.repo.join("value.txt")).unwrap(), b"good\n");
}
