//! The one reader and the one writer (issue 20, classes 2 and 3): no file
//! is opened in src/ except through rcpt::io, a FIFO or a device named on
//! the command line is refused at once with exit 2 naming it, and a link
//! planted in a bundle directory is never followed.
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::serve as serve_support;

use serve_support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every code line of `src/` outside test modules (from `#[cfg(test)]`
/// on, fixtures may be made) and comments: (file relative to the crate,
/// line number, line).
fn code_lines() -> Vec<(String, usize, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut out = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (n, line) in code.lines().enumerate() {
            if !line.trim_start().starts_with("//") {
                out.push((rel.clone(), n + 1, line.to_string()));
            }
        }
    }
    out
}

/// Ways of opening or creating a file other than rcpt::io's.
const BYPASSES: &[&str] = &[
    "File::open",
    "File::create",
    "File::options",
    "OpenOptions",
    "fs::read(",
    "fs::read_to_string",
    "fs::write",
    "fs::copy",
    "fs::hard_link",
    "os::unix::fs::symlink",
];

/// The files of the one module that may open files itself: the capped
/// reader and the atomic no-follow writer (src/io/mod.rs and lines.rs open
/// nothing, so they are held to the rule like every other file).
const ALLOWED: &[&str] = &["src/io/read.rs", "src/io/write.rs"];

#[test]
fn no_file_in_src_is_opened_or_created_except_through_rcpt_io() {
    let mut found = Vec::new();
    for (rel, n, line) in code_lines() {
        if ALLOWED.contains(&rel.as_str()) {
            continue;
        }
        for b in BYPASSES {
            if line.contains(b) {
                found.push(format!("{rel}:{n}: {b}: {}", line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "files opened outside rcpt::io (use io::read_path / open_regular / write_atomic / create_new / create_temp_in / open_lock):\n{}",
        found.join("\n")
    );
}

/// Ways of making, removing or renaming a directory (or working relative
/// to a directory handle) other than rcpt::io::Dir's: each follows a link
/// planted at the path, or bypasses the one set of primitives.
const DIR_BYPASSES: &[&str] = &[
    "remove_dir_all",
    "fs::remove_dir(",
    "fs::create_dir(",
    "fs::create_dir_all",
    "DirBuilder",
    "rustix::fs::",
];

/// Where a bypass of [`DIR_BYPASSES`] is allowed, and why.
const DIR_ALLOWED: &[(&str, &str, &str)] = &[
    ("src/io/dir.rs", "", "the directory primitives themselves"),
    (
        "src/io/dir/tree.rs",
        "",
        "the directory primitives themselves: Dir::remove_tree's walk, moved out of dir.rs",
    ),
    (
        "src/io/read.rs",
        "rustix::fs::",
        "opens a file relative to a Dir, O_NOFOLLOW",
    ),
    (
        "src/io/write.rs",
        "DirBuilder",
        "create_temp_dir: mkdir of a new random name, mode 0700",
    ),
    (
        "src/io/write.rs",
        "rustix::fs::",
        "NewFiles::write: a new file created relative to a Dir's handle, O_CREAT | O_EXCL | O_NOFOLLOW",
    ),
    (
        "src/io/batch.rs",
        "rustix::fs::",
        "posix_fadvise on a staged file (a writeback hint) and syncfs of a background batch's file system: no directory made or removed",
    ),
];

/// The directory rule of spec/security.md: no directory is made, removed
/// or renamed in src/ (outside test modules) except through rcpt::io::Dir
/// (O_NOFOLLOW | O_DIRECTORY from the parent's handle, mkdirat, unlinkat,
/// renameat, a removal that never goes through a link), save the listed
/// exceptions.
#[test]
fn no_directory_in_src_is_made_or_removed_except_through_rcpt_io_dir() {
    let mut found = Vec::new();
    for (rel, n, line) in code_lines() {
        for b in DIR_BYPASSES {
            let allowed = DIR_ALLOWED
                .iter()
                .any(|(file, what, _)| *file == rel && (what.is_empty() || what == b));
            if line.contains(b) && !allowed {
                found.push(format!("{rel}:{n}: {b}: {}", line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "directories made or removed outside rcpt::io::Dir (use Dir::create / child_or_create / descend / remove_tree, io::remove_tree_at):\n{}",
        found.join("\n")
    );
}

/// Run `cmd`, failing if it does not end within 20 s (a FIFO waited on).
fn bounded(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("{cmd:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// Exit 2, and the message names `path`.
fn refused_naming(out: &Output, path: &Path, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert!(err.contains(&*path.to_string_lossy()), "{what}: {err}");
}

#[test]
fn fifos_and_devices_named_on_the_command_line_are_refused_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let fifo = tmp.path().join("fifo");
    mkfifo(&fifo);
    let zero = Path::new("/dev/zero");
    let trust = write_trust(tmp.path());
    for bad in [fifo.as_path(), zero] {
        // log serve --trust
        let mut c = Command::new(bin());
        c.args(["log", "serve"])
            .arg(&dir)
            .args(["--listen", "127.0.0.1:0", "--trust"])
            .arg(bad);
        refused_naming(&bounded(c), bad, "serve --trust");
        // log serve --witness-policy
        let mut c = Command::new(bin());
        c.args(["log", "serve"])
            .arg(&dir)
            .args(["--listen", "127.0.0.1:0", "--trust"])
            .arg(&trust);
        c.arg("--witness-policy").arg(bad);
        refused_naming(&bounded(c), bad, "serve --witness-policy");
        // log mirror / log submit --log-key-file
        let mut c = Command::new(bin());
        c.args(["log", "mirror", "http://127.0.0.1:9/"])
            .arg(tmp.path().join("m"));
        c.arg("--log-key-file").arg(bad);
        refused_naming(&bounded(c), bad, "mirror --log-key-file");
        let mut c = Command::new(bin());
        c.args([
            "log",
            "submit",
            "http://127.0.0.1:9/",
            "-",
            "--log-key-file",
        ])
        .arg(bad);
        refused_naming(&bounded(c), bad, "submit --log-key-file");
        // log init --trust
        let mut c = Command::new(bin());
        c.args(["log", "init"]).arg(tmp.path().join("new"));
        c.args(["--origin", ORIGIN, "--key"])
            .arg(tmp.path().join("log.key"));
        c.arg("--trust").arg(bad);
        refused_naming(&bounded(c), bad, "init --trust");
        // verify --trust
        let mut c = Command::new(bin());
        c.args(["verify", "--trust"]).arg(bad).arg(&trust);
        refused_naming(&bounded(c), bad, "verify --trust");
    }
}

#[test]
fn a_link_planted_in_the_bundle_dir_is_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let served = Served::start(&dir, &write_trust(tmp.path()), &["--batch-wait", "1500ms"]);
    let env = tmp.path().join("r.json");
    std::fs::write(&env, envelope(7)).unwrap();
    let inspect = Command::new(bin())
        .args(["receipt", "inspect", "--json"])
        .arg(&env)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    let id = v["receipt_id"]
        .as_str()
        .unwrap()
        .trim_start_matches("blake3:")
        .to_string();
    let bundles = tmp.path().join("bundles");
    std::fs::create_dir(&bundles).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"keep me\n").unwrap();
    let mut child = Command::new(bin())
        .args(["log", "submit", &served.url()])
        .arg(&env)
        .args(["--log-key", &log_verifier().to_string(), "--bundle-dir"])
        .arg(&bundles)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The old writer's temporary name was `<id>.bundle.tmp-<pid>`: plant
    // a link there while the batch waits.
    let planted = bundles.join(format!("{id}.bundle.tmp-{}", child.id()));
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    // And at the bundle's own name (`<index>.bundle.json`; the first entry).
    std::os::unix::fs::symlink(&victim, bundles.join("0.bundle.json")).unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(30));
    assert!(status.success());
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me\n");
    let bundle = bundles.join("0.bundle.json");
    let meta = std::fs::symlink_metadata(&bundle).unwrap();
    assert!(
        meta.file_type().is_file(),
        "the bundle is a regular file, not a link"
    );
    assert!(std::fs::read_to_string(&bundle).unwrap().contains(&id));
    served.stop();
}
