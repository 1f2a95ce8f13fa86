//! The README's walkthroughs as scripts: the block after a marker, run
//! with bash in a fresh directory with `rcpt` on PATH (shared by
//! `readme_walkthrough`, `ops_readme` and `gate_apply`).

use std::process::Command;

/// The first ```sh block after `marker` in README.md.
pub fn block_after(marker: &str) -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let after = readme
        .split_once(marker)
        .unwrap_or_else(|| panic!("the README has no marker {marker:?}"))
        .1;
    let block = after
        .split_once("```sh\n")
        .expect("a sh block after the marker")
        .1;
    block
        .split_once("\n```")
        .expect("the block ends")
        .0
        .to_string()
}

/// Run `script` with bash (-euo pipefail) in a fresh directory, `rcpt` on
/// PATH, TMPDIR inside that directory and XDG_CACHE_HOME (the home of the
/// gate's clean copies) in another: (stdout, stderr, status).
pub fn run_script(script: &str) -> (String, String, std::process::ExitStatus) {
    let bin = super::rcpt_bin();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let tmp = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(tmp.path())
        .env("PATH", path)
        .env("TMPDIR", tmp.path())
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status,
    )
}
