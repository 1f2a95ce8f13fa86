//! The README's "Publishing a log" walkthrough, run as a script (issue
//! 25): the block after the `<!-- publishing walkthrough: ... -->`
//! marker, with `rcpt` on PATH, in a fresh directory. It serves a log,
//! submits and verifies, reads `/metrics` and the status page with curl,
//! mirrors and verifies offline, and stops the service; the script's own
//! commands assert each step (bash -euo pipefail), and the metric lines it
//! prints are checked here.
#![cfg(feature = "net")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

#[test]
fn the_readme_publishing_walkthrough_runs_as_written() {
    let script = support::readme::block_after(
        "<!-- publishing walkthrough: tests/ops_readme.rs runs the next block -->",
    );
    for needed in [
        "rcpt log serve ./log",
        "/metrics",
        "$URL/\"",
        "rcpt log mirror",
        "rcpt verify",
    ] {
        assert!(script.contains(needed), "{needed}: {script}");
    }
    let has_curl = std::process::Command::new("curl")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_curl {
        support::skip("no curl on PATH: the walkthrough reads /metrics with curl");
        return;
    }
    let (stdout, stderr, status) = support::readme::run_script(&script);
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // The lines the README shows as the metrics' output.
    for line in [
        "rcpt_add_answers_total{status=\"200\",reason=\"ok\"} 1",
        "rcpt_queue_depth 0",
        "rcpt_tree_size 1",
        "<dd id=\"tree-size\">1</dd>",
    ] {
        assert!(stdout.lines().any(|l| l == line), "{line}\n{stdout}");
    }
    // The histogram's buckets: 17 bounds and +Inf.
    assert!(stdout.lines().any(|l| l == "18"), "{stdout}");
    // "0 blake3:…" from log submit.
    assert!(
        stdout.lines().any(|l| l.starts_with("0 blake3:")),
        "{stdout}"
    );
}
