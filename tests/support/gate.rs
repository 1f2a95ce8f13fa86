//! Test support for `rcpt gate`: a real git repository made with the system
//! `git`, a gate key with its `.vkey`, a log and a trust file (through
//! [`super::World`]), and runners for `gate` and `verify`.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use super::{World, line_value, rcpt_bin};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The gate's issuer name in these tests.
pub const GATE: &str = "gate.example/ci";

/// Run `git ARGS` in `dir` (deterministic identity, no signing, no hooks from
/// the user's config); its stdout, asserting success.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

/// A `git` command in `dir` with a fixed identity, the user's and the
/// system's config not read.
pub fn git_cmd(dir: &Path) -> Command {
    let mut cmd = git_cmd_with_config(dir);
    cmd.env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    cmd
}

/// A `git` command in `dir` with a fixed identity, branch `main` and no
/// signing (on top of the user's config, which is still read).
pub fn git_cmd_with_config(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ]);
    cmd
}

/// `git ARGS` in `dir` ([`git_cmd_with_config`]); its output, whatever the status.
pub fn git_out(dir: &Path, args: &[&str]) -> Output {
    git_cmd_with_config(dir)
        .args(args)
        .output()
        .expect("git runs")
}

/// `git ARGS` in `dir` ([`git_out`]); its stdout trimmed, asserting success.
pub fn git_trimmed(dir: &Path, args: &[&str]) -> String {
    let out = git_out(dir, args);
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A repository, a gate key (named by its `.vkey`), a log, a trust file,
/// a private temporary directory and a cache directory (the home of the
/// gate's clean copies), both outside the repository.
pub struct Gate {
    /// Keys, log, trust file (outside the repository).
    pub world: World,
    /// The repository's work tree.
    pub repo: PathBuf,
    /// TMPDIR of the gate: empty again after every run.
    pub tmp: PathBuf,
    /// XDG_CACHE_HOME of the gate: the clean copies live under
    /// `rcpt/clean/<key>/`.
    pub cache: PathBuf,
    /// The gate key.
    pub key: PathBuf,
}

impl Gate {
    /// A repository whose first commit holds `files` (path, content).
    pub fn new(files: &[(&str, &str)]) -> Gate {
        let world = World::new(GATE);
        let repo = world.dir().join("repo");
        let tmp = world.dir().join("tmp");
        let cache = world.dir().join("cache");
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        git(&repo, &["init", "-q"]);
        let gate = Gate {
            key: world.dir().join("issuer.key"),
            world,
            repo,
            tmp,
            cache,
        };
        for (path, content) in files {
            gate.write(path, content);
        }
        git(&gate.repo, &["add", "-A"]);
        git(&gate.repo, &["commit", "-q", "-m", "one"]);
        let shown = Command::new(rcpt_bin())
            .args(["key", "show", "--name", GATE])
            .arg(gate.world.dir().join("issuer.pub"))
            .output()
            .unwrap();
        let vkey = line_value(&String::from_utf8(shown.stdout).unwrap(), "verifier key");
        std::fs::write(gate.key.with_extension("vkey"), format!("{vkey}\n")).unwrap();
        gate
    }

    /// Write `content` at `path` in the work tree (parents made; `.sh`
    /// files executable).
    pub fn write(&self, path: &str, content: &str) {
        let p = self.repo.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        if path.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    /// Write a policy file (outside the repository); its path.
    pub fn policy(&self, checks: &[(&str, &[&str], u64)], reads: &[&str]) -> PathBuf {
        let checks: Vec<serde_json::Value> = checks
            .iter()
            .map(|(name, run, t)| serde_json::json!({"name": name, "run": run, "timeout_s": t}))
            .collect();
        let doc = serde_json::json!({"name": "ci", "checks": checks, "reads": reads});
        let path = self.world.dir().join("policy.json");
        std::fs::write(&path, doc.to_string()).unwrap();
        path
    }

    /// `rcpt ARGS` in the work tree with the gate's TMPDIR and XDG_CACHE_HOME.
    pub fn rcpt(&self) -> Command {
        let mut cmd = Command::new(rcpt_bin());
        cmd.current_dir(&self.repo)
            .env("TMPDIR", &self.tmp)
            .env("XDG_CACHE_HOME", &self.cache);
        cmd
    }

    /// `rcpt gate check --policy P --key KEY --log LOG -o OUT ARGS`.
    pub fn check(&self, policy: &Path, out: &Path, args: &[&str]) -> Output {
        self.rcpt()
            .args(["gate", "check", "--policy"])
            .arg(policy)
            .arg("--key")
            .arg(&self.key)
            .arg("--log")
            .arg(&self.world.log)
            .arg("-o")
            .arg(out)
            .args(args)
            .output()
            .unwrap()
    }

    /// `rcpt gate id ARGS`, asserting success.
    pub fn id(&self, args: &[&str]) -> String {
        let out = super::succeeded(
            self.rcpt()
                .args(["gate", "id"])
                .args(args)
                .output()
                .unwrap(),
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// `rcpt gate id --json ARGS`: the change record.
    pub fn record(&self, args: &[&str]) -> serde_json::Value {
        let out = super::succeeded(
            self.rcpt()
                .args(["gate", "id", "--json"])
                .args(args)
                .output()
                .unwrap(),
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `rcpt verify --trust T ARGS BUNDLE` in the work tree.
    pub fn verify(&self, bundle: &Path, args: &[&str]) -> Output {
        self.rcpt()
            .arg("verify")
            .arg("--trust")
            .arg(&self.world.trust)
            .args(args)
            .arg(bundle)
            .output()
            .unwrap()
    }

    /// A patch (`git diff --binary -M` of the staged result) of what
    /// `edit` does to the work tree, which is then put back as it was
    /// (HEAD, nothing untracked). Written outside the repository.
    pub fn patch_of(&self, name: &str, edit: impl FnOnce(&Gate)) -> PathBuf {
        edit(self);
        git(&self.repo, &["add", "-A"]);
        let out = git_cmd(&self.repo)
            .args(["diff", "--cached", "--binary", "-M", "HEAD"])
            .output()
            .unwrap();
        assert!(out.status.success());
        git(&self.repo, &["reset", "-q", "--hard", "HEAD"]);
        git(&self.repo, &["clean", "-fdq"]);
        let path = self.world.dir().join(name);
        std::fs::write(&path, &out.stdout).unwrap();
        path
    }

    /// `rcpt gate apply PATCH --policy P --key KEY -o OUT ARGS`.
    pub fn apply(&self, patch: &Path, policy: &Path, out: &Path, args: &[&str]) -> Output {
        self.rcpt()
            .args(["gate", "apply"])
            .arg(patch)
            .arg("--policy")
            .arg(policy)
            .arg("--key")
            .arg(&self.key)
            .arg("-o")
            .arg(out)
            .args(args)
            .output()
            .unwrap()
    }

    /// `rcpt gate undo RECEIPT --key KEY -o OUT ARGS`.
    pub fn undo(&self, receipt: &Path, out: &Path, args: &[&str]) -> Output {
        self.rcpt()
            .args(["gate", "undo"])
            .arg(receipt)
            .arg("--key")
            .arg(&self.key)
            .arg("-o")
            .arg(out)
            .args(args)
            .output()
            .unwrap()
    }

    /// Every file of the work tree (not `.git`): path, bytes, executable.
    pub fn files(&self) -> Vec<(String, Vec<u8>, bool)> {
        use std::os::unix::fs::PermissionsExt;
        let mut out = Vec::new();
        let mut stack = vec![self.repo.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.file_name().is_some_and(|n| n == ".git") {
                    continue;
                }
                let meta = std::fs::symlink_metadata(&p).unwrap();
                if meta.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(&self.repo).unwrap().display().to_string();
                    let exec = meta.permissions().mode() & 0o111 != 0;
                    out.push((rel, std::fs::read(&p).unwrap(), exec));
                }
            }
        }
        out.sort();
        out
    }

    /// What is left in the gate's TMPDIR, and the run directories left in
    /// the home of the clean copies (each run removes its own).
    pub fn leftovers(&self) -> Vec<String> {
        let mut left: Vec<String> = std::fs::read_dir(&self.tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.extend(self.runs().iter().map(|p| p.display().to_string()));
        left
    }

    /// The repository directories under the home of the clean copies
    /// (`XDG_CACHE_HOME/rcpt/clean/<key>/`).
    pub fn homes(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.cache.join("rcpt/clean")) {
            Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The run directories (`run-*`) now in the home: one per gate run in
    /// progress.
    pub fn runs(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for home in self.homes() {
            for e in std::fs::read_dir(&home).unwrap() {
                let p = e.unwrap().path();
                if p.file_name().unwrap().to_string_lossy().starts_with("run-") {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The parked clean copy (`<home>/<key>/tree/<name>`), asserting there
    /// is exactly one.
    pub fn parked(&self) -> PathBuf {
        let homes = self.homes();
        assert_eq!(homes.len(), 1, "one repository home: {homes:?}");
        let copies: Vec<PathBuf> = std::fs::read_dir(homes[0].join("tree"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(copies.len(), 1, "one parked copy: {copies:?}");
        copies[0].clone()
    }

    /// The worktrees git knows of.
    pub fn worktrees(&self) -> usize {
        git(&self.repo, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count()
    }
}

/// Exit code, stdout and stderr of an output, for messages.
pub fn shown(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
