//! `rcpt log … s3://BUCKET/PREFIX --endpoint URL` against radosgw: init,
//! append, checkpoint, prove, consistency and check on object storage, the
//! same commands as on a directory; and the usage errors. Skipped, with the
//! reason on stderr, when `RCPT_S3_ENDPOINT` is not set (the usage-error
//! tests always run).
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::s3 as s3_support;

use assert_cmd::Command;
use rcpt::keys::SigningKey;

const ORIGIN: &str = "example.com/s3-cli";

/// A valid signed receipt envelope (JSON), distinct for each `n`.
fn envelope(n: u64) -> String {
    let payload = support::deny_payload(n, "test", "ab");
    support::signed_envelope(&payload, &SigningKey::from_bytes(&[3u8; 32]))
}

fn rcpt() -> Command {
    let mut c = support::rcpt();
    // The endpoint comes from the flag in these tests, never from the environment.
    c.env_remove("AWS_ENDPOINT_URL")
        .env_remove("AWS_ENDPOINT_URL_S3");
    c
}

#[test]
fn a_log_on_s3_from_the_command_line() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let endpoint = settings.endpoint.url();
    let location = s3_support::fresh_location(&bucket, "cli");
    let log = format!("s3://{}/{}", location.bucket, location.prefix);
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("log.key");
    support::write_key(&key, 5);

    let out = rcpt()
        .args([
            "log",
            "init",
            &log,
            "--endpoint",
            &endpoint,
            "--origin",
            ORIGIN,
            "--key",
        ])
        .arg(&key)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains(&format!("at {log}")), "{text}");

    // Two appends, so sizes 1 and 3 are published.
    let mut text = String::new();
    for range in [0..1, 1..3] {
        let lines: String = range.map(|n| envelope(n) + "\n").collect();
        let out = rcpt()
            .args([
                "log",
                "append",
                &log,
                "--endpoint",
                &endpoint,
                "--json",
                "-",
            ])
            .write_stdin(lines)
            .assert()
            .success();
        text.push_str(&String::from_utf8_lossy(&out.get_output().stdout));
    }
    for i in 0..3 {
        assert!(text.contains(&format!("\"index\":{i}")), "{text}");
    }

    let out = rcpt()
        .args(["log", "checkpoint", &log, "--endpoint", &endpoint])
        .assert()
        .success();
    let checkpoint = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        checkpoint.starts_with(&format!("{ORIGIN}\n3\n")),
        "{checkpoint}"
    );

    let bundle = tmp.path().join("r1.bundle.json");
    rcpt()
        .args([
            "log",
            "prove",
            &log,
            "--endpoint",
            &endpoint,
            "--index",
            "1",
            "-o",
        ])
        .arg(&bundle)
        .assert()
        .success();
    let bundle_text = std::fs::read_to_string(&bundle).unwrap();
    assert!(
        bundle_text.contains("\"index\":1") || bundle_text.contains("\"index\": 1"),
        "{bundle_text}"
    );

    rcpt()
        .args([
            "log",
            "consistency",
            &log,
            "--endpoint",
            &endpoint,
            "--from",
            "1",
            "--json",
        ])
        .assert()
        .success();
    rcpt()
        .args(["log", "check", &log, "--endpoint", &endpoint])
        .assert()
        .success();
}

#[test]
fn usage_errors_name_what_is_missing() {
    // No endpoint anywhere.
    let out = rcpt()
        .args(["log", "check", "s3://some-bucket/log"])
        .env("AWS_ACCESS_KEY_ID", "AK")
        .env("AWS_SECRET_ACCESS_KEY", "SK")
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("--endpoint"), "{err}");
    // No credentials.
    let out = rcpt()
        .args([
            "log",
            "check",
            "s3://some-bucket/log",
            "--endpoint",
            "http://127.0.0.1:1",
        ])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("AWS_ACCESS_KEY_ID"), "{err}");
    // A bad location.
    let out = rcpt()
        .args([
            "log",
            "check",
            "s3://Bad_Bucket/log",
            "--endpoint",
            "http://127.0.0.1:1",
        ])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("bucket name"), "{err}");
    // --endpoint with a directory.
    let tmp = tempfile::tempdir().unwrap();
    let out = rcpt()
        .args(["log", "check"])
        .arg(tmp.path())
        .args(["--endpoint", "http://127.0.0.1:1"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("s3://"), "{err}");
}
