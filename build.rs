//! Build script: what `rcpt --version` says besides the version, the
//! commit built and the cargo features enabled. The commit comes from
//! `$RCPT_COMMIT` when set (a packager's build), else from `git` when this
//! source tree is itself a git work tree; from a tarball without `.git` it
//! is "unknown commit". Nothing here uses the network.

use std::path::Path;
use std::process::Command;

/// `git ARGS` in the manifest directory: its trimmed output, if it ran.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// The commit of this source tree, if it is the top of a git work tree
/// (not a tarball unpacked inside some other repository).
fn commit(dir: &Path) -> Option<String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    let same = std::fs::canonicalize(&top).ok()? == std::fs::canonicalize(dir).ok()?;
    if !same {
        return None;
    }
    // Rebuild when HEAD moves: the HEAD file and the ref it names.
    for name in ["HEAD", "packed-refs"] {
        if let Some(path) = git(dir, &["rev-parse", "--git-path", name]) {
            println!("cargo:rerun-if-changed={}", dir.join(path).display());
        }
    }
    if let Some(reference) = git(dir, &["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(dir, &["rev-parse", "--git-path", &reference])
    {
        println!("cargo:rerun-if-changed={}", dir.join(path).display());
    }
    git(dir, &["rev-parse", "--short=12", "HEAD"]).map(|c| format!("commit {c}"))
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RCPT_COMMIT");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let commit = std::env::var("RCPT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .map(|c| format!("commit {}", c.trim()))
        .or_else(|| commit(Path::new(&dir)))
        .unwrap_or_else(|| "unknown commit".to_string());
    let features: Vec<&str> = ["cli", "net", "s3"]
        .into_iter()
        .filter(|f| std::env::var_os(format!("CARGO_FEATURE_{}", f.to_uppercase())).is_some())
        .collect();
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(", ")
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=RCPT_LONG_VERSION={version} ({commit}; features: {features})");
}
