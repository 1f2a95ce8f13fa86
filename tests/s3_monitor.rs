//! `rcpt log monitor s3://BUCKET/PREFIX` on radosgw (issue 22): the log's
//! public files in object storage, read through the S3 store. The same
//! scene as `tests/monitor.rs` (every entry event, in order), resume from
//! the saved state after new entries, and a rollback named with its
//! evidence. Skipped, visibly, when `RCPT_S3_ENDPOINT` is not set.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::monitor::*;
use support::s3 as s3_support;

use bytes::Bytes;
use rcpt::storage::s3::{BlockingClient, Location};
use std::path::Path;

/// Every public file of the directory log `dir` (not `.rcpt/`), put at
/// its path under the location's prefix: what `log mirror` into S3 would
/// publish, here copied as it is (the monitor must not trust it anyway).
fn publish(s3: &BlockingClient, location: &Location, dir: &Path) {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.file_name().is_some_and(|n| n == ".rcpt") {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files);
    // The checkpoint last, as a writer publishes.
    files.sort_by_key(|p| p == Path::new("checkpoint"));
    for rel in files {
        let bytes = std::fs::read(dir.join(&rel)).unwrap();
        s3.put_overwrite(&location.key(rel.to_str().unwrap()), Bytes::from(bytes))
            .unwrap();
    }
}

#[test]
fn monitor_on_object_storage_reports_every_event_resumes_and_names_a_rollback() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let endpoint = settings.endpoint.url();
    let location = s3_support::fresh_location(&bucket, "monitor");
    let s3 = BlockingClient::new(settings, &location).unwrap();
    let source = format!("s3://{}/{}", location.bucket, location.prefix);
    let s = scene();
    publish(&s3, &location, &s.log);
    let state = s.tmp.path().join("state");
    let vk = vkey();
    let w = s.watch.to_str().unwrap();
    let args = [
        "--endpoint",
        endpoint.as_str(),
        "--log-key",
        vk.as_str(),
        "--watch",
        w,
    ];

    let run = monitor(&source, &state, &args);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.names(), SCENE_EVENTS, "{run:?}");
    assert_eq!(run.indexes(), [0, 1, 2, 3, 4, 5, 7]);
    assert_eq!(saved_next(&state), 8);

    // New entries: only they are read, from the saved state.
    let snapshot = s.tmp.path().join("at-8");
    copy_log(&s.log, &snapshot);
    append(&s.log, &entries(100, 2, "gate-b", &key(3)));
    publish(&s3, &location, &s.log);
    let more = monitor(&source, &state, &args);
    assert_eq!(more.code, 1, "{more:?}");
    assert_eq!(more.indexes(), [8, 9], "{more:?}");
    // The scene's four alarms are still open, listed after the round.
    assert_eq!(more.open_ids().len(), 4, "{more:?}");
    assert!(
        more.names().iter().all(|n| n == "receipt.unauthorized"),
        "{more:?}"
    );
    assert_eq!(saved_next(&state), 10);

    // The store goes back to the 8-entry checkpoint: a rollback, state kept.
    s3.put_overwrite(
        &location.key("checkpoint"),
        Bytes::from(std::fs::read(snapshot.join("checkpoint")).unwrap()),
    )
    .unwrap();
    let back = monitor(&source, &state, &args);
    assert_eq!(
        (back.code, back.names()),
        (1, vec!["log.rollback".to_string()]),
        "{back:?}"
    );
    assert_eq!(saved_next(&state), 10);

    // --endpoint with a directory is a bad invocation.
    let bad = monitor(s.log.to_str().unwrap(), &state, &args);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("--endpoint is for a log at s3://"),
        "{}",
        bad.stderr
    );
}
