//! location: the one way a log is named on a command line or in a
//! configuration, and the one way its store is opened: a directory, an
//! object-storage prefix `s3://BUCKET/PREFIX` (endpoint and credentials
//! from the arguments and the environment, `spec/storage.md`), or a log
//! service's `http(s)://` URL, which is submitted to (by `net`, in the
//! binary) and never opened here.

use super::IntakeError;
use crate::storage::Store;
use crate::storage::posix::PosixStore;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where a log is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// A directory.
    Dir(PathBuf),
    /// An object-storage prefix, `s3://BUCKET/PREFIX`.
    ObjectStorage(String),
    /// A log service, `http://` or `https://`.
    Service(String),
}

/// How an `s3://` location's store is reached.
#[derive(Clone, Debug)]
pub struct StoreSettings<'a> {
    /// The endpoint given on the command line (else the environment's).
    pub endpoint: Option<&'a str>,
    /// How long a writer's lease lives without renewal.
    pub lease_ttl: Duration,
}

/// The lease of a writer whose command gives none (`--lease-ttl`'s default).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

impl Default for StoreSettings<'_> {
    fn default() -> Self {
        StoreSettings {
            endpoint: None,
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }
}

impl Location {
    /// The location a text names: `s3://` and `http(s)://` by their
    /// scheme, anything else a directory.
    pub fn parse(text: &str) -> Location {
        if text.starts_with("s3://") {
            Location::ObjectStorage(text.to_string())
        } else if text.starts_with("http://") || text.starts_with("https://") {
            Location::Service(text.to_string())
        } else {
            Location::Dir(PathBuf::from(text))
        }
    }

    /// [`Location::parse`] of a path given as one (a non-UTF-8 path is a directory).
    pub fn of_path(path: &Path) -> Location {
        match path.to_str() {
            Some(text) => Location::parse(text),
            None => Location::Dir(path.to_path_buf()),
        }
    }

    /// True for a log service's URL.
    pub fn is_service(&self) -> bool {
        matches!(self, Location::Service(_))
    }

    /// The store the log lives in. A service's URL is refused: it is
    /// submitted to, not opened.
    pub fn store(&self, settings: &StoreSettings<'_>) -> Result<Arc<dyn Store>, IntakeError> {
        match self {
            Location::Dir(dir) => match settings.endpoint {
                Some(_) => Err(IntakeError::EndpointForDirectory {
                    dir: dir.display().to_string(),
                }),
                None => Ok(Arc::new(PosixStore::new(dir))),
            },
            Location::ObjectStorage(location) => object_store(location, settings),
            Location::Service(url) => Err(IntakeError::Service { url: url.clone() }),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Dir(dir) => write!(f, "{}", dir.display()),
            Location::ObjectStorage(s) | Location::Service(s) => f.write_str(s),
        }
    }
}

/// The S3 store at `location` (`s3://BUCKET/PREFIX`).
#[cfg(feature = "s3")]
fn object_store(
    location: &str,
    settings: &StoreSettings<'_>,
) -> Result<Arc<dyn Store>, IntakeError> {
    use crate::storage::s3::{self, BlockingClient, LeaseConfig, S3Store};
    let lease = LeaseConfig::new(settings.lease_ttl)
        .map_err(|e| IntakeError::ObjectStorage(Box::new(e)))?;
    let parsed =
        s3::Location::parse(location).map_err(|e| IntakeError::ObjectStorage(Box::new(e)))?;
    let config = s3::Settings::from_env(settings.endpoint)
        .map_err(|e| IntakeError::ObjectStorage(Box::new(e)))?;
    let client = BlockingClient::new(config, &parsed).map_err(|source| IntakeError::S3Client {
        location: location.to_string(),
        source,
    })?;
    Ok(Arc::new(S3Store::new(Arc::new(client), parsed, lease)))
}

/// Without object-storage support, an `s3://` location is refused.
#[cfg(not(feature = "s3"))]
fn object_store(location: &str, _: &StoreSettings<'_>) -> Result<Arc<dyn Store>, IntakeError> {
    Err(IntakeError::NoObjectStorage {
        location: location.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_told_by_their_scheme() {
        assert_eq!(Location::parse("log/"), Location::Dir("log/".into()));
        assert!(matches!(
            Location::parse("s3://b/p"),
            Location::ObjectStorage(_)
        ));
        assert!(Location::parse("https://log.example").is_service());
        let url = Location::parse("http://127.0.0.1:1");
        let refused = url.store(&StoreSettings::default()).err().unwrap();
        assert!(refused.is_bad_invocation());
        let dir = Location::parse("log/");
        let with_endpoint = StoreSettings {
            endpoint: Some("http://127.0.0.1:1"),
            ..StoreSettings::default()
        };
        assert!(dir.store(&with_endpoint).err().unwrap().is_bad_invocation());
    }
}
