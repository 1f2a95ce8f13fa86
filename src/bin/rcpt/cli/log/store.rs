//! The store a log command names: a directory, or an `s3://BUCKET/PREFIX`
//! location answering at an endpoint; and what to check when a log on
//! object storage is not found.

use crate::cli::UsageError;
use rcpt::storage::Store;
use rcpt::storage::posix::PosixStore;
use std::path::Path;
use std::sync::Arc;

/// The store at `dir`: an `s3://BUCKET/PREFIX` location (answering at
/// `endpoint`, leases of `lease_ttl`), else the directory.
pub(crate) fn store_at(
    dir: &Path,
    endpoint: Option<&str>,
    lease_ttl: std::time::Duration,
) -> anyhow::Result<Arc<dyn Store>> {
    match dir.to_str().filter(|d| d.starts_with("s3://")) {
        Some(location) => s3_store(location, endpoint, lease_ttl),
        None if endpoint.is_some() => Err(UsageError(format!(
            "--endpoint is for logs at s3://BUCKET/PREFIX, not the directory {}",
            dir.display()
        ))
        .into()),
        None => Ok(Arc::new(PosixStore::new(dir))),
    }
}

/// The S3 store at `location` (`s3://BUCKET/PREFIX`).
#[cfg(feature = "s3")]
fn s3_store(
    location: &str,
    endpoint: Option<&str>,
    lease_ttl: std::time::Duration,
) -> anyhow::Result<Arc<dyn Store>> {
    use rcpt::storage::s3::{BlockingClient, LeaseConfig, Location, S3Store, Settings};
    let lease = LeaseConfig::new(lease_ttl).map_err(|e| UsageError(e.to_string()))?;
    let location = Location::parse(location).map_err(|e| UsageError(e.to_string()))?;
    let settings = Settings::from_env(endpoint).map_err(|e| UsageError(e.to_string()))?;
    let client = anyhow::Context::context(
        BlockingClient::new(settings, &location),
        "starting the S3 client",
    )?;
    Ok(Arc::new(S3Store::new(Arc::new(client), location, lease)))
}

#[cfg(not(feature = "s3"))]
fn s3_store(
    location: &str,
    _: Option<&str>,
    _: std::time::Duration,
) -> anyhow::Result<Arc<dyn Store>> {
    Err(UsageError(format!(
        "{location}: this rcpt was built without object-storage support (cargo feature s3)"
    ))
    .into())
}

/// A log error, with what to check when the log is on object storage: a
/// bucket that does not exist reads as one holding no log.
pub(crate) fn s3_hint(dir: &Path, e: rcpt::log::LogError) -> anyhow::Error {
    let on_s3 = dir.to_str().is_some_and(|d| d.starts_with("s3://"));
    if on_s3 && matches!(e, rcpt::log::LogError::NotALog { .. }) {
        return anyhow::anyhow!(
            "{e}; on object storage, also check that the bucket exists and that --endpoint \
             (or AWS_ENDPOINT_URL_S3) names the right store"
        );
    }
    e.into()
}
