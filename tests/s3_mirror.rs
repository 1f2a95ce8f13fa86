//! `rcpt log mirror URL s3://BUCKET/PREFIX`: a served log (a directory)
//! mirrored into object storage (radosgw), checked, brought up to date as
//! the log grows; every public object equals the log's own file; proofs
//! are made from the S3 mirror; a mirror of another log is refused there.
//! Skipped, with the reason on stderr, when `RCPT_S3_ENDPOINT` is not set.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use support::s3 as s3_support;
mod support;
use support::serve as serve_support;

use std::process::Command;

use serve_support::*;

#[test]
fn mirror_into_s3_copies_checks_and_follows_appends() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let location = s3_support::fresh_location(&bucket, "mirror");
    let dest = format!("s3://{}/{}", location.bucket, location.prefix);
    let endpoint = settings.endpoint.url();
    let s3 = rcpt::storage::s3::BlockingClient::new(settings, &location).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_log(tmp.path(), "log");
    let trust = write_trust(tmp.path());
    let served = Served::start(&dir, &trust, &["--batch-wait", "5ms", "--batch-max", "40"]);
    let url = served.url();
    let rcpt = |args: &[&str]| {
        Command::new(bin())
            .args(["log"])
            .args(args)
            .args(["--endpoint", &endpoint])
            .output()
            .unwrap()
    };
    let vkey = log_verifier().to_string();
    let mirror = || rcpt(&["mirror", &url, &dest, "--log-key", &vkey]);
    let ok = |out: &std::process::Output| {
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    submit_all(&url, 0..300, 32);
    let text = ok(&mirror());
    assert!(text.contains("mirrored 300 entries (was 0)"), "{text}");
    ok(&rcpt(&["check", &dest]));
    let same_files = || {
        // Every full tile is mirrored; a partial one only at the mirrored
        // size (the log keeps those of earlier sizes too). Each is the log's file.
        let mut objects = 0;
        for f in tile_files(&dir) {
            match s3.get(&location.key(&f), 1 << 20).unwrap() {
                Some(o) => {
                    assert!(
                        o.body == std::fs::read(dir.join(&f)).unwrap(),
                        "{f} differs"
                    );
                    objects += 1;
                }
                None => assert!(f.contains(".p/"), "{f} was not mirrored"),
            }
        }
        assert!(objects > 0);
        let cp = s3
            .get(&location.key("checkpoint"), 1 << 16)
            .unwrap()
            .unwrap();
        assert_eq!(
            cp.body.to_vec(),
            std::fs::read(dir.join("checkpoint")).unwrap()
        );
    };
    same_files();

    // Up to date: nothing fetched. Then the log grows, and the mirror follows.
    assert!(ok(&mirror()).contains("up to date: 300 entries"));
    submit_all(&url, 300..700, 32);
    let text = ok(&mirror());
    assert!(text.contains("mirrored 700 entries (was 300)"), "{text}");
    ok(&rcpt(&["check", &dest]));
    same_files();
    // A consistency proof across the two mirrored sizes, from the mirror alone.
    let out = ok(&rcpt(&["consistency", &dest, "--from", "300", "--json"]));
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["from"], 300);
    assert_eq!(j["to"], 700);

    // Another log, with another key, is not mirrored over this one.
    let other_tmp = tempfile::tempdir().unwrap();
    let other_key = other_tmp.path().join("other.key");
    support::write_key(&other_key, 77);
    let other_dir = other_tmp.path().join("other");
    let st = Command::new(bin())
        .args(["log", "init"])
        .arg(&other_dir)
        .args(["--origin", ORIGIN, "--key"])
        .arg(&other_key)
        .output()
        .unwrap();
    ok(&st);
    let other = Served::start(&other_dir, &trust, &["--batch-wait", "5ms"]);
    submit_all(&other.url(), 0..5, 32);
    let other_vkey = rcpt::keys::NoteVerifier::new(
        ORIGIN,
        rcpt::keys::SigningKey::from_bytes(&[77u8; 32]).verifying_key(),
    )
    .unwrap()
    .to_string();
    let refused = rcpt(&["mirror", &other.url(), &dest, "--log-key", &other_vkey]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    same_files();
    assert!(other.stop().success());
    assert!(served.stop().success());

    // --endpoint with a directory destination is a usage error.
    let out = rcpt(&[
        "mirror",
        &url,
        tmp.path().join("d").to_str().unwrap(),
        "--log-key",
        &vkey,
    ]);
    assert_eq!(out.status.code(), Some(2));
}
