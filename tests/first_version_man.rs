//! `rcpt --version` (the commit and the features, "unknown commit" from a
//! tree without .git) and the man pages (an EXIT STATUS section, examples
//! set without filling so no command is wrapped) (issue 21, item 10).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::path::Path;
use std::process::Command;
use support::rcpt;

fn stdout(args: &[&str]) -> String {
    let out = rcpt().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn version_names_the_commit_and_the_features() {
    let text = stdout(&["--version"]);
    let rest = text
        .strip_prefix(&format!("rcpt {} (", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("{text}"));
    let (commit, features) = rest
        .split_once("; features: ")
        .unwrap_or_else(|| panic!("{text}"));
    // Built from this work tree: its HEAD (when git is here to say it).
    let head = Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ])
        .output();
    match head {
        Ok(out) if out.status.success() => {
            let head = String::from_utf8(out.stdout).unwrap();
            assert_eq!(commit, format!("commit {}", head.trim()), "{text}");
        }
        _ => support::skip("git absent: the commit is not compared"),
    }
    let mut expected = vec!["cli"];
    if cfg!(feature = "net") {
        expected.push("net");
    }
    if cfg!(feature = "s3") {
        expected.push("s3");
    }
    assert_eq!(features, format!("{})\n", expected.join(", ")), "{text}");
    assert_eq!(stdout(&["-V"]), text);
}

/// The build script, compiled and run on its own for a source tree with
/// no .git (a tarball): it says "unknown commit", and `$RCPT_COMMIT` wins.
#[test]
fn the_build_script_says_unknown_commit_without_git_and_takes_rcpt_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("build-script");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let status = Command::new(rustc)
        .args(["--edition", "2024", "-o"])
        .arg(&exe)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("build.rs"))
        .status()
        .unwrap();
    assert!(status.success());
    let tree = tmp.path().join("rcpt-0.1.0");
    std::fs::create_dir(&tree).unwrap();
    let run = |commit: Option<&str>| {
        let mut cmd = Command::new(&exe);
        cmd.env("CARGO_MANIFEST_DIR", &tree)
            .env("CARGO_PKG_VERSION", "0.1.0")
            .env("CARGO_FEATURE_CLI", "1")
            .env_remove("CARGO_FEATURE_NET")
            .env_remove("CARGO_FEATURE_S3")
            // No repository above the tarball's directory either.
            .env("GIT_CEILING_DIRECTORIES", tmp.path());
        match commit {
            Some(c) => cmd.env("RCPT_COMMIT", c),
            None => cmd.env_remove("RCPT_COMMIT"),
        };
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(None);
    assert!(
        text.contains("cargo:rustc-env=RCPT_LONG_VERSION=0.1.0 (unknown commit; features: cli)\n"),
        "{text}"
    );
    let text = run(Some("abc123def456"));
    assert!(
        text.contains("RCPT_LONG_VERSION=0.1.0 (commit abc123def456; features: cli)\n"),
        "{text}"
    );
}

/// Every command path of `rcpt` (from `--help` listings), top down.
fn command_paths() -> Vec<Vec<String>> {
    let mut paths = vec![Vec::new()];
    let mut i = 0;
    while i < paths.len() {
        let path: Vec<String> = paths[i].clone();
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = stdout(&args);
        if let Some((_, commands)) = help.split_once("Commands:\n") {
            for line in commands.lines().take_while(|l| l.starts_with("  ")) {
                let name = line.split_whitespace().next().unwrap();
                if name != "help" {
                    let mut sub = path.clone();
                    sub.push(name.to_string());
                    paths.push(sub);
                }
            }
        }
        i += 1;
    }
    paths
}

#[test]
fn every_man_page_has_exit_status_and_unwrapped_examples() {
    let paths = command_paths();
    assert!(paths.len() > 20, "{paths:?}");
    for path in &paths {
        let mut args = vec!["man"];
        args.extend(path.iter().map(String::as_str));
        let page = stdout(&args);
        assert!(page.contains("\n.SH \"EXIT STATUS\"\n"), "{path:?}");
        assert!(!page.contains(".SH EXTRA"), "{path:?}");
        // Each example of --help is one line of the page, between .nf and .fi.
        let mut help_args: Vec<&str> = path.iter().map(String::as_str).collect();
        help_args.push("--help");
        let help = stdout(&help_args);
        let Some((_, examples)) = help.split_once("Example") else {
            continue;
        };
        let (_, block) = page
            .split_once(".SH EXAMPLES\n.RS 4\n.nf\n")
            .unwrap_or_else(|| panic!("{path:?}: no EXAMPLES block set without filling:\n{page}"));
        let (block, _) = block.split_once(".fi\n").unwrap();
        for line in examples.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let roff = line
                .strip_prefix("  ")
                .unwrap_or(line)
                .replace('\\', "\\e")
                .replace('-', "\\-");
            assert!(
                block.lines().any(|l| l == roff),
                "{path:?}: {roff:?} not in\n{block}"
            );
        }
    }
}

#[test]
fn a_man_page_read_by_man_keeps_each_example_on_its_line() {
    let Ok(out) = Command::new("man").arg("--version").output() else {
        return support::skip("man absent: the page is not rendered");
    };
    if !out.status.success() {
        return support::skip("man does not run here");
    }
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("rcpt-verify.1");
    std::fs::write(&page, stdout(&["man", "verify"])).unwrap();
    let out = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANWIDTH", "80")
        .env("MAN_KEEP_FORMATTING", "0")
        .env("PAGER", "cat")
        .output()
        .unwrap();
    // Overstrike (bold: `X\bX`, underline: `_\bX`) taken out.
    let mut text = String::new();
    for c in String::from_utf8_lossy(&out.stdout).chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    assert!(text.contains("EXIT STATUS"), "{text}");
    let long = "rcpt verify --trust trust.json --require-verdict admit --change-id \"$CHANGE\" --max-age 24h --fresh . bundle.json";
    assert!(
        text.lines().any(|l| l.trim() == long),
        "the longest example is one line, not wrapped:\n{text}"
    );
}
