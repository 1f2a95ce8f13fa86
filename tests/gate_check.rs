//! `rcpt gate` on real git repositories made with the system `git`
//! (spec/gate.md): the change's identity, the CI loop (admit → verify
//! --fresh; one more edit or commit → policy.fresh fails), deny receipts,
//! clean mode, refusals, timeouts that kill the process group, interrupts,
//! and the user's index, HEAD, refs and objects left untouched.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::gate as gate_support;

use gate_support::{Gate, git, git_cmd, shown};

/// A project whose "test" passes when `value.txt` holds `good`.
fn project() -> Gate {
    Gate::new(&[
        ("value.txt", "bad\n"),
        (
            "test.sh",
            "#!/bin/sh\necho testing\ngrep -q good value.txt\n",
        ),
        ("README", "a project\n"),
    ])
}

fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap()
}

#[test]
fn the_ci_loop_admit_verifies_fresh_until_the_project_moves() {
    let g = project();
    let policy = g.policy(&[("test", &["./test.sh"], 30)], &["README"]);
    g.write("value.txt", "good\n");
    let bundle = g.world.dir().join("admit.json");
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("verdict: admit"));
    let id = g.id(&[]);
    let gate = [
        "--require-verdict",
        "admit",
        "--change-id",
        &id,
        "--fresh",
        ".",
    ];
    let ok = g.verify(&bundle, &gate);
    assert_eq!(code(&ok), 0, "{}", shown(&ok));
    // The payload says what the gate did.
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let payload = receipt_payload(&doc);
    assert_eq!(payload["applied"], false);
    assert_eq!(payload["substrate"], "git");
    assert_eq!(payload["change_id"], id.as_str());
    let resources: Vec<&str> = payload["read_set"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["resource"].as_str().unwrap())
        .collect();
    assert_eq!(resources, ["HEAD", "README", "value.txt"]);
    // `gate show` prints the evidence, re-hashed.
    let show = g
        .rcpt()
        .args(["gate", "show"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert_eq!(code(&show), 0, "{}", shown(&show));
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("check test: [\"./test.sh\"] exit 0"),
        "{text}"
    );
    assert!(text.contains("testing"), "{text}");
    // An edited file: stale.
    g.write("README", "edited\n");
    let stale = g.verify(&bundle, &["--require-verdict", "admit", "--fresh", "."]);
    assert_eq!(code(&stale), 1, "{}", shown(&stale));
    assert!(String::from_utf8_lossy(&stale.stdout).contains("policy.fresh"));
    g.write("README", "a project\n");
    assert_eq!(code(&g.verify(&bundle, &gate)), 0);
    // One more commit: the same bytes, but HEAD moved.
    git(&g.repo, &["commit", "-q", "-am", "two"]);
    let moved = g.verify(&bundle, &["--require-verdict", "admit", "--fresh", "."]);
    assert_eq!(code(&moved), 1, "{}", shown(&moved));
    let text = String::from_utf8_lossy(&moved.stdout);
    assert!(
        text.contains("policy.fresh") && text.contains("HEAD"),
        "{text}"
    );
    assert!(g.leftovers().is_empty() && g.worktrees() == 1);
}

/// The payload of a bundle, decoded with `rcpt receipt inspect --json`.
fn receipt_payload(bundle: &serde_json::Value) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("env.json");
    std::fs::write(&env, bundle["envelope"].to_string()).unwrap();
    let out = std::process::Command::new(support::rcpt_bin())
        .args(["receipt", "inspect", "--json"])
        .arg(&env)
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["payload"].clone()
}

#[test]
fn failing_tests_get_an_authentic_deny_that_fails_require_admit() {
    let g = project();
    let marker = g.world.dir().join("second-ran");
    let touch = format!("touch {}", marker.display());
    let policy = g.policy(
        &[
            ("test", &["./test.sh"], 30),
            ("second", &["sh", "-c", &touch], 30),
        ],
        &[],
    );
    g.write("value.txt", "still bad\n");
    let bundle = g.world.dir().join("deny.json");
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 1, "{}", shown(&out));
    // Stopped at the first failure.
    assert!(!marker.exists());
    let authentic = g.verify(&bundle, &[]);
    assert_eq!(code(&authentic), 0, "{}", shown(&authentic));
    let gated = g.verify(&bundle, &["--require-verdict", "admit"]);
    assert_eq!(code(&gated), 1);
    assert!(String::from_utf8_lossy(&gated.stdout).contains("policy.verdict"));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let payload = receipt_payload(&doc);
    assert_eq!(
        payload["verdict"],
        serde_json::json!({"deny": {"reasons": ["check.test.failed"]}})
    );
    let show = g
        .rcpt()
        .args(["gate", "show"])
        .arg(&bundle)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("check test: [\"./test.sh\"] exit 1"),
        "{text}"
    );
    assert!(!text.contains("check second"), "{text}");
}

#[test]
fn clean_mode_an_ignored_file_the_change_lacks_cannot_make_the_check_pass() {
    let g = Gate::new(&[
        (".gitignore", "data.txt\n"),
        ("test.sh", "#!/bin/sh\ntest -f data.txt\n"),
    ]);
    let policy = g.policy(&[("test", &["./test.sh"], 30)], &[]);
    g.write("data.txt", "needed\n");
    // In the user's tree the test passes ...
    let direct = git_cmd(&g.repo).arg("status").output().unwrap();
    assert!(direct.status.success());
    assert!(
        std::process::Command::new("./test.sh")
            .current_dir(&g.repo)
            .status()
            .unwrap()
            .success()
    );
    // ... but the change does not hold data.txt: the clean copy fails.
    assert_eq!(g.record(&[])["files"], serde_json::json!([]));
    let bundle = g.world.dir().join("b.json");
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 1, "{}", shown(&out));
    // An untracked (not ignored) file is part of the change and is copied in.
    std::fs::write(g.repo.join(".gitignore"), "").unwrap();
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
}

/// A mode-only change (`chmod +x`) changes what runs: it is a change with
/// its own identity, `modified` with the same digest and another mode.
#[cfg(unix)]
#[test]
fn a_mode_only_change_has_its_own_change_id() {
    use std::os::unix::fs::PermissionsExt;
    let g = Gate::new(&[("deploy", "echo deploy\n")]);
    let clean = g.id(&[]);
    std::fs::set_permissions(
        g.repo.join("deploy"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let record = g.record(&[]);
    let files = record["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{record}");
    assert_eq!(files[0]["status"], "modified");
    assert_eq!(files[0]["mode"], "100755");
    let executable = g.id(&[]);
    assert_ne!(executable, clean);
    // Back to 0644 with other bytes vs the same bytes: the mode tells them apart.
    g.write("deploy", "echo deploy now\n");
    let exec_edit = g.id(&[]);
    std::fs::set_permissions(
        g.repo.join("deploy"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let plain_edit = g.id(&[]);
    assert_ne!(exec_edit, plain_edit);
    assert_eq!(g.record(&[])["files"][0]["mode"], "100644");
}

#[test]
fn the_change_words_renames_deletions_and_a_base() {
    let g = Gate::new(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")]);
    assert_eq!(g.record(&[])["files"], serde_json::json!([]));
    let clean = g.id(&[]);
    git(&g.repo, &["mv", "a.txt", "moved.txt"]); // staged: a rename
    std::fs::rename(g.repo.join("b.txt"), g.repo.join("b2.txt")).unwrap(); // not staged
    std::fs::remove_file(g.repo.join("c.txt")).unwrap();
    let files = g.record(&[])["files"].clone();
    let words: Vec<(String, String, bool)> = files
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["status"].as_str().unwrap().to_string(),
                f["digest"].is_null(),
            )
        })
        .collect();
    let want = [
        ("a.txt", "deleted", true),
        ("b.txt", "deleted", true),
        ("b2.txt", "added", false),
        ("c.txt", "deleted", true),
        ("moved.txt", "renamed", false),
    ];
    let want: Vec<(String, String, bool)> = want
        .iter()
        .map(|(p, s, n)| (p.to_string(), s.to_string(), *n))
        .collect();
    assert_eq!(words, want);
    assert_ne!(g.id(&[]), clean);
    // Against an older base, the last commit's files are part of the change.
    git(&g.repo, &["add", "-A"]);
    git(&g.repo, &["commit", "-q", "-m", "two"]);
    assert_eq!(g.record(&[])["files"], serde_json::json!([]));
    let against_one = g.record(&["--base", "HEAD~1"]);
    let paths: Vec<&str> = against_one["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.txt", "b.txt", "b2.txt", "c.txt", "moved.txt"]);
    let base = git(&g.repo, &["rev-parse", "HEAD~1"]);
    assert_eq!(against_one["base"], base.as_str());
    // A base that is no commit is a bad invocation.
    let bad = g
        .rcpt()
        .args(["gate", "id", "--base", "nope"])
        .output()
        .unwrap();
    assert_eq!(code(&bad), 2, "{}", shown(&bad));
}

#[test]
fn refusals_not_a_repository_mid_merge_mid_rebase_submodule() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(support::rcpt_bin())
        .args(["gate", "id"])
        .current_dir(dir.path())
        .env("GIT_CEILING_DIRECTORIES", dir.path().parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not inside a git work tree"));

    // A merge with a conflict.
    let g = Gate::new(&[("f.txt", "base\n")]);
    git(&g.repo, &["checkout", "-q", "-b", "other"]);
    g.write("f.txt", "other\n");
    git(&g.repo, &["commit", "-q", "-am", "other"]);
    git(&g.repo, &["checkout", "-q", "main"]);
    g.write("f.txt", "main\n");
    git(&g.repo, &["commit", "-q", "-am", "main"]);
    let merge = git_cmd(&g.repo)
        .args(["merge", "-q", "other"])
        .output()
        .unwrap();
    assert!(!merge.status.success());
    let out = g.rcpt().args(["gate", "id"]).output().unwrap();
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a merge"));
    git(&g.repo, &["merge", "--abort"]);
    assert_eq!(g.record(&[])["files"], serde_json::json!([]));

    // A rebase with a conflict.
    let rebase = git_cmd(&g.repo)
        .args(["rebase", "-q", "other"])
        .output()
        .unwrap();
    assert!(!rebase.status.success());
    let out = g.rcpt().args(["gate", "id"]).output().unwrap();
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a rebase"));
    git(&g.repo, &["rebase", "--abort"]);

    // A submodule whose commit changed.
    let sub = Gate::new(&[("s.txt", "s\n")]);
    git_cmd(&g.repo)
        .args(["-c", "protocol.file.allow=always", "submodule", "add", "-q"])
        .arg(&sub.repo)
        .arg("sub")
        .status()
        .unwrap();
    git(&g.repo, &["commit", "-q", "-m", "with a submodule"]);
    assert_eq!(g.record(&[])["files"], serde_json::json!([]));
    let inner = g.repo.join("sub");
    std::fs::write(inner.join("s.txt"), "moved\n").unwrap();
    git(&inner, &["commit", "-q", "-am", "inner"]);
    let out = g.rcpt().args(["gate", "id"]).output().unwrap();
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("submodule"));
}

#[test]
fn a_timeout_kills_the_process_group_and_gives_no_receipt() {
    let g = project();
    let pid_file = g.world.dir().join("child.pid");
    let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
    let policy = g.policy(&[("slow", &["sh", "-c", &script], 1)], &[]);
    let bundle = g.world.dir().join("none.json");
    let start = std::time::Instant::now();
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    assert!(String::from_utf8_lossy(&out.stderr).contains("timed out after 1 s"));
    assert!(!bundle.exists(), "no receipt");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    assert!(
        !alive(&pid),
        "the background child {pid} was killed with its group"
    );
    assert!(g.leftovers().is_empty(), "{:?}", g.leftovers());
    assert_eq!(g.worktrees(), 1);
}

#[test]
fn a_check_that_ends_leaves_nothing_running_not_even_an_orphan() {
    let g = project();
    let pid_file = g.world.dir().join("orphan.pid");
    // The subshell ends at once: its sleep is an orphan still in the group.
    let script = format!("(sleep 300 & echo $! > {}); exit 0", pid_file.display());
    let policy = g.policy(&[("quick", &["sh", "-c", &script], 60)], &[]);
    let bundle = g.world.dir().join("admit.json");
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    assert!(bundle.exists(), "admitted");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    assert!(!alive(&pid), "the orphan {pid} was killed and reaped");
    assert!(g.leftovers().is_empty(), "{:?}", g.leftovers());
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.contains(") Z "),
        Err(_) => false,
    }
}

#[test]
fn a_check_that_cannot_start_is_not_evaluated() {
    let g = project();
    let policy = g.policy(&[("test", &["no-such-program-rcpt"], 10)], &[]);
    let bundle = g.world.dir().join("none.json");
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
    assert!(!bundle.exists());
    assert!(g.leftovers().is_empty());
}

#[test]
fn sigint_kills_the_check_and_removes_the_clean_worktree() {
    let g = project();
    let policy = g.policy(&[("slow", &["sleep", "300"], 600)], &[]);
    let bundle = g.world.dir().join("none.json");
    let child = g
        .rcpt()
        .args(["gate", "check", "--policy"])
        .arg(&policy)
        .arg("--key")
        .arg(&g.key)
        .arg("-o")
        .arg(&bundle)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the clean copy, then interrupt.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while g.runs().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no clean copy appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let pid = child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
    assert!(!bundle.exists());
    assert!(g.leftovers().is_empty(), "{:?}", g.leftovers());
    assert_eq!(g.worktrees(), 1);
}

#[test]
fn the_users_index_head_refs_and_objects_are_untouched() {
    let g = project();
    g.write("value.txt", "good\n");
    g.write("new.txt", "new\n");
    git(&g.repo, &["add", "new.txt"]);
    // Leave the index's stat data stale, so a `git status` would refresh it.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    g.write("README", "a project\n");
    let git_dir = g.repo.join(".git");
    let keep = |name: &str| {
        let p = git_dir.join(name);
        (name.to_string(), std::fs::read(&p).unwrap_or_default())
    };
    let before = (
        keep("index"),
        keep("HEAD"),
        support::snapshot(&git_dir.join("refs")),
        support::snapshot(&git_dir.join("objects")),
        git(
            &g.repo,
            &["--no-optional-locks", "status", "--porcelain=v2"],
        ),
    );
    let policy = g.policy(&[("test", &["./test.sh"], 30)], &[]);
    let bundle = g.world.dir().join("b.json");
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    let after = (
        keep("index"),
        keep("HEAD"),
        support::snapshot(&git_dir.join("refs")),
        support::snapshot(&git_dir.join("objects")),
        git(
            &g.repo,
            &["--no-optional-locks", "status", "--porcelain=v2"],
        ),
    );
    assert!(before.0 == after.0, "index changed");
    assert!(before.1 == after.1, "HEAD changed");
    assert!(before.2 == after.2, "refs changed");
    assert!(before.3 == after.3, "objects changed");
    assert_eq!(before.4, after.4);
    assert!(
        !git_dir.join("worktrees").exists()
            || support::snapshot(&git_dir.join("worktrees")).is_empty()
    );
    assert!(g.leftovers().is_empty());
}

#[test]
fn the_issuer_name_comes_from_the_vkey_or_issuer() {
    let g = project();
    let policy = g.policy(&[("test", &["true"], 10)], &[]);
    let bundle = g.world.dir().join("b.json");
    let out = g.check(&policy, &bundle, &["--issuer", "someone-else"]);
    assert_eq!(code(&out), 2, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not match"));
    std::fs::remove_file(g.key.with_extension("vkey")).unwrap();
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 2, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no name"));
    let out = g.check(&policy, &bundle, &["--issuer", gate_support::GATE]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
}

#[test]
fn gate_show_refuses_a_corrupt_store_object() {
    let g = project();
    g.write("value.txt", "good\n");
    let policy = g.policy(&[("test", &["./test.sh"], 30)], &[]);
    let bundle = g.world.dir().join("b.json");
    let store = g.world.dir().join("store");
    let out = g.check(&policy, &bundle, &["--store", store.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", shown(&out));
    let show = |g: &Gate| {
        g.rcpt()
            .args(["gate", "show", "--store"])
            .arg(&store)
            .arg(&bundle)
            .output()
            .unwrap()
    };
    assert_eq!(code(&show(&g)), 0);
    // The test's stdout is one of the objects: change one byte of every object.
    for (path, mut bytes) in support::snapshot(&store.join("objects")) {
        if let Some(b) = bytes.first_mut() {
            *b ^= 1;
            std::fs::write(&path, &bytes).unwrap();
        }
    }
    let out = show(&g);
    assert_eq!(code(&out), 1, "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("corrupt"),
        "{}",
        shown(&out)
    );
}

#[test]
fn head_is_a_freshness_resource_attached_or_detached() {
    let g = project();
    let read_set = |g: &Gate| {
        let out = g
            .rcpt()
            .args(["receipt", "read-set", "--root", ".", "HEAD"])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", shown(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        doc[0]["digest"].as_str().unwrap().to_string()
    };
    let oid = git(&g.repo, &["rev-parse", "HEAD"]);
    let want = rcpt::digest::Digest::blake3(oid.as_bytes()).to_string();
    assert_eq!(read_set(&g), want);
    git(&g.repo, &["checkout", "-q", "--detach"]);
    assert_eq!(read_set(&g), want);
    git(&g.repo, &["commit", "-q", "--allow-empty", "-m", "two"]);
    assert_ne!(read_set(&g), want);
}

#[test]
fn a_change_too_large_for_one_receipt_is_refused_before_any_check_runs() {
    let g = project();
    for i in 0..700 {
        g.write(&format!("many/file-number-{i:04}.txt"), "x\n");
    }
    let marker = g.world.dir().join("ran");
    let touch = format!("touch {}", marker.display());
    let policy = g.policy(&[("test", &["sh", "-c", &touch], 10)], &[]);
    let bundle = g.world.dir().join("none.json");
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("gate a smaller change"));
    assert!(!marker.exists() && !bundle.exists());
    assert!(g.leftovers().is_empty());
}

#[test]
fn a_check_killed_by_a_signal_or_writing_too_much_is_not_evaluated() {
    let g = project();
    let bundle = g.world.dir().join("none.json");
    let policy = g.policy(&[("test", &["sh", "-c", "kill -9 $$"], 10)], &[]);
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("killed by signal 9"));
    let over = rcpt::limits::MAX_CHECK_OUTPUT_BYTES + 1024 * 1024;
    let flood = format!("head -c {over} /dev/zero; sleep 300");
    let policy = g.policy(&[("test", &["sh", "-c", &flood], 120)], &[]);
    let out = g.check(&policy, &bundle, &[]);
    assert_eq!(code(&out), 3, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bytes of output; stopped"));
    assert!(!bundle.exists());
    assert!(g.leftovers().is_empty());
}

#[test]
fn a_policy_over_its_limit_or_with_an_unknown_field_is_a_bad_invocation() {
    let g = project();
    let bundle = g.world.dir().join("none.json");
    let big = g.world.dir().join("big.json");
    let pad = " ".repeat(rcpt::limits::MAX_GATE_POLICY_BYTES);
    std::fs::write(&big, format!("{pad}{{}}")).unwrap();
    let out = g.check(&big, &bundle, &[]);
    assert_eq!(code(&out), 2, "{}", shown(&out));
    let limit = rcpt::limits::MAX_GATE_POLICY_BYTES.to_string();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&limit),
        "{}",
        shown(&out)
    );
    let odd = g.world.dir().join("odd.json");
    std::fs::write(&odd, r#"{"name":"ci","checks":[],"reads":[],"shell":true}"#).unwrap();
    let out = g.check(&odd, &bundle, &[]);
    assert_eq!(code(&out), 2, "{}", shown(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field \"shell\""));
    assert!(!bundle.exists());
}
