//! Shared by the tests that need a real S3 server (radosgw, started by
//! `.ci/radosgw/start.sh`): the settings from its env file's variables, a
//! fresh prefix per test, and the skip rule.

use std::sync::atomic::{AtomicU32, Ordering};

use rcpt::storage::s3::config::{Location, Settings};
use rcpt::storage::s3::sigv4::Credentials;
use rcpt::storage::s3::{BlockingClient, Endpoint};

/// The S3 server to test against, or `None` (the test then returns early,
/// after saying why on stderr). With `RCPT_REQUIRE_S3=1` (CI) a missing
/// server fails the test instead.
pub fn server() -> Option<(Settings, String)> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let Some(endpoint) = var("RCPT_S3_ENDPOINT") else {
        if var("RCPT_REQUIRE_S3").as_deref() == Some("1") {
            panic!(
                "RCPT_REQUIRE_S3=1 but RCPT_S3_ENDPOINT is not set: start radosgw with .ci/radosgw/start.sh and source its env file"
            );
        }
        super::skip(
            "no S3 server: RCPT_S3_ENDPOINT is not set (start radosgw with .ci/radosgw/start.sh, then source /tmp/rcpt-radosgw/env)",
        );
        return None;
    };
    let settings = Settings {
        endpoint: Endpoint::parse(&endpoint).expect("RCPT_S3_ENDPOINT"),
        region: var("AWS_REGION").unwrap_or_else(|| "us-east-1".into()),
        credentials: Credentials {
            access_key_id: var("AWS_ACCESS_KEY_ID").expect("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY").expect("AWS_SECRET_ACCESS_KEY"),
            session_token: var("AWS_SESSION_TOKEN"),
        },
    };
    let bucket = var("RCPT_S3_BUCKET").expect("RCPT_S3_BUCKET");
    Some((settings, bucket))
}

/// A location no other test (or earlier run) uses: `s3://BUCKET/t/NAME-PID-NANOS-N`.
pub fn fresh_location(bucket: &str, name: &str) -> Location {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    Location::parse(&format!(
        "s3://{bucket}/t/{name}-{}-{nanos}-{n}",
        std::process::id()
    ))
    .unwrap()
}

/// A blocking client and a fresh location, or `None` when there is no server.
pub fn setup(name: &str) -> Option<(BlockingClient, Location)> {
    let (settings, bucket) = server()?;
    let location = fresh_location(&bucket, name);
    Some((BlockingClient::new(settings, &location).unwrap(), location))
}

/// A log on the test S3 server as the S3 tests drive it through the
/// binary: its `s3://` location, the endpoint, its trust file and log key.
pub struct S3Log {
    /// `s3://BUCKET/PREFIX`.
    pub log: String,
    /// The S3 endpoint URL.
    pub endpoint: String,
    /// The trust file of accepted issuers.
    pub trust: std::path::PathBuf,
    /// The log's private key file.
    pub key: std::path::PathBuf,
}

impl S3Log {
    /// `rcpt log SUB LOG --endpoint URL` (more arguments follow).
    pub fn rcpt(&self, sub: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(super::bin());
        cmd.args([
            "log",
            sub,
            self.log.as_str(),
            "--endpoint",
            self.endpoint.as_str(),
        ]);
        cmd
    }
}
