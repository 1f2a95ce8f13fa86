//! The README's walkthrough, run as a script: the block after the
//! `<!-- walkthrough: ... -->` marker, with `rcpt` on PATH as the binary
//! under test, in a fresh temporary directory.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::path::Path;
use support::readme::{block_after, run_script};

/// The first ```sh block after the walkthrough marker.
fn walkthrough() -> String {
    block_after("<!-- walkthrough: tests/readme_walkthrough.rs runs the next block -->")
}

/// The gating walkthrough: an admitted fresh receipt passes the gate, then
/// a ref moves and the same command fails with `policy.fresh` (the script
/// itself asserts the exit status 1 and the reason).
#[test]
fn the_readme_gating_walkthrough_runs_as_written() {
    let script =
        block_after("<!-- gating walkthrough: tests/readme_walkthrough.rs runs the next block -->");
    assert!(script.contains("--fresh repo"), "{script}");
    let (stdout, stderr, status) = run_script(&script);
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(
        stdout
            .matches("1 verified, 0 failed, 0 not evaluated")
            .count(),
        1,
        "the fresh receipt passed once: {stdout}"
    );
}

/// The gate walkthrough ("Receipts from real work"): `rcpt gate check`
/// admits a change, its bundle passes `verify --change-id $(rcpt gate id)
/// --fresh .`, an edit makes it fail `policy.fresh`, a failing test gets an
/// authentic deny (the script asserts each exit status).
#[test]
fn the_readme_gate_walkthrough_runs_as_written() {
    let script =
        block_after("<!-- gate walkthrough: tests/readme_walkthrough.rs runs the next block -->");
    assert!(script.contains("rcpt gate check"), "{script}");
    let (stdout, stderr, status) = run_script(&script);
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("verdict: admit"), "{stderr}");
    assert!(
        stderr.contains("verdict: deny (check.test.failed)"),
        "{stderr}"
    );
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    let script = walkthrough();
    assert!(script.contains("rcpt verify"), "{script}");
    let (stdout, stderr, status) = run_script(&script);
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // Both verifications passed: the bundle, then the second with --since.
    assert_eq!(
        stdout
            .matches("1 verified, 0 failed, 0 not evaluated")
            .count(),
        2,
        "{stdout}"
    );
    // The script left the crate untouched: it ran in its own directory.
    assert!(
        !Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("gate.key")
            .exists()
    );
}

/// The witnessing walkthrough: three `rcpt witness serve` processes, a log
/// served with a 2-of-3 witness policy; a submission's bundle passes
/// `rcpt verify --policy`, and with one witness stopped a bundle proved
/// offline from the log directory passes the 2-of-3 policy and fails a
/// 3-of-3 one with exit 1 (the script itself asserts these).
#[cfg(feature = "net")]
#[test]
fn the_readme_witnessing_walkthrough_runs_as_written() {
    let script = block_after(
        "<!-- witnessing walkthrough: tests/readme_walkthrough.rs runs the next block -->",
    );
    assert!(script.contains("--policy log.policy"), "{script}");
    assert!(script.contains("rcpt witness serve"), "{script}");
    assert!(script.contains("--policy verify.policy"), "{script}");
    assert!(script.contains("rcpt log prove ./log"), "{script}");
    let (stdout, stderr, status) = run_script(&script);
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // One line per submitted receipt: "<index> <receipt id>".
    let logged: Vec<&str> = stdout
        .lines()
        .filter(|l| {
            l.split_once(' ')
                .is_some_and(|(i, id)| i.parse::<u64>().is_ok() && id.starts_with("blake3:"))
        })
        .collect();
    assert_eq!(logged.len(), 2, "{stdout}");
    assert!(
        logged[0].starts_with("0 ") && logged[1].starts_with("1 "),
        "{stdout}"
    );
}

/// The object-storage walkthrough ("Running on object storage"): a log in
/// a bucket of the radosgw named by `RCPT_S3_ENDPOINT` (with
/// `RCPT_S3_BUCKET` and the AWS_* credentials, as `.ci/radosgw/start.sh`
/// writes them), served with a standby that takes over when the serving
/// one is killed, then mirrored. Skipped, with the reason on stderr, when
/// no endpoint is set (a failure instead under `RCPT_REQUIRE_S3=1`).
#[cfg(feature = "s3")]
#[test]
fn the_readme_object_storage_walkthrough_runs_as_written() {
    let set = |n: &str| std::env::var(n).is_ok_and(|v| !v.is_empty());
    if !set("RCPT_S3_ENDPOINT") {
        assert!(
            std::env::var("RCPT_REQUIRE_S3").as_deref() != Ok("1"),
            "RCPT_REQUIRE_S3=1 but RCPT_S3_ENDPOINT is not set"
        );
        eprintln!(
            "skipped: RCPT_S3_ENDPOINT is not set (start radosgw with .ci/radosgw/start.sh, then source /tmp/rcpt-radosgw/env)"
        );
        return;
    }
    let script = block_after(
        "<!-- object storage walkthrough: tests/readme_walkthrough.rs runs the next block",
    );
    assert!(script.contains("s3://$RCPT_S3_BUCKET/"), "{script}");
    assert!(script.contains("kill -KILL"), "{script}");
    let (stdout, stderr, status) = run_script(&script);
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // The first bundle, then the two served ones (one per sequencer).
    assert!(
        stdout.contains("1 verified, 0 failed, 0 not evaluated"),
        "{stdout}"
    );
    assert!(
        stdout.contains("2 verified, 0 failed, 0 not evaluated"),
        "{stdout}"
    );
    assert!(stdout.contains("mirrored 3 entries (was 0)"), "{stdout}");
}

/// The monitoring walkthrough ("Watching a log"): a served log watched for
/// the gate's name, an impersonating receipt caught by the next round (exit
/// 1, the hook's record), a re-run still red until the alarm is
/// acknowledged by its id, then a bundle verified against a mirror (the
/// script itself asserts these).
#[cfg(feature = "net")]
#[test]
fn the_readme_monitor_walkthrough_runs_as_written() {
    let script = block_after(
        "<!-- monitor walkthrough: tests/readme_walkthrough.rs runs the next block -->",
    );
    assert!(script.contains("rcpt log monitor"), "{script}");
    assert!(script.contains("--mirror mirror/"), "{script}");
    let (stdout, stderr, status) = run_script(&script);
    assert!(
        status.success(),
        "exit {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("1 verified, 0 failed, 0 not evaluated"),
        "{stdout}"
    );
}
