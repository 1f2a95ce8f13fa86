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

/// An intake error of a command that takes no `--endpoint` (the gate's
/// `--log`): no endpoint is said with the variables the endpoint comes
/// from, never with a flag the command does not take (a bad invocation,
/// exit 2, as the error it replaces).
pub(crate) fn endpoint_from_env(e: rcpt::log::intake::IntakeError) -> anyhow::Error {
    #[cfg(feature = "s3")]
    if let rcpt::log::intake::IntakeError::ObjectStorage(cause) = &e
        && let Some(rcpt::storage::s3::ConfigError::NoEndpoint) = cause.downcast_ref()
    {
        use rcpt::storage::s3::config::{ENV_ENDPOINT, ENV_ENDPOINT_S3};
        return crate::cli::UsageError(format!(
            "no object-storage endpoint: set {ENV_ENDPOINT_S3} or {ENV_ENDPOINT} (--log takes \
             the endpoint from the environment)"
        ))
        .into();
    }
    e.into()
}
