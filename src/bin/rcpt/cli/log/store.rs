//! The store a log command names: a directory, or an `s3://BUCKET/PREFIX`
//! location answering at an endpoint; and what to check when a log on
//! object storage is not found.

use rcpt::log::intake::{Location, StoreSettings};
use rcpt::storage::Store;
use std::path::Path;
use std::sync::Arc;

/// The store at `dir`: an `s3://BUCKET/PREFIX` location (answering at
/// `endpoint`, leases of `lease_ttl`), else the directory; the one way
/// a log's store is opened (`rcpt::log::intake::Location`).
pub(crate) fn store_at(
    dir: &Path,
    endpoint: Option<&str>,
    lease_ttl: std::time::Duration,
) -> anyhow::Result<Arc<dyn Store>> {
    let settings = StoreSettings {
        endpoint,
        lease_ttl,
    };
    Ok(Location::of_path(dir).store(&settings)?)
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
