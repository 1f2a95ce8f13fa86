//! http: a tlog-tiles log over HTTP as a [`PublicRead`] source, through
//! the one client of [`crate::net::client`] (feature `net`). Each read runs
//! to completion on a small runtime this source owns; call it from plain
//! threads, never from inside an async task.

use crate::net::client::{Client, ClientError};
use crate::storage::{PublicKey, PublicRead, StoreError, Version, Versioned};

/// A log at an `http://` base URL.
#[derive(Debug)]
pub struct HttpSource {
    runtime: tokio::runtime::Runtime,
    client: Client,
}

impl HttpSource {
    /// A source for `base` (`http://HOST[:PORT][/PREFIX]`).
    pub fn new(base: &str) -> Result<HttpSource, ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClientError::Url {
                url: base.chars().take(200).collect(),
                detail: format!("starting the HTTP runtime: {e}"),
            })?;
        // The client's pool spawns its connection tasks on the runtime
        // current at the first request, which block_on makes this one.
        let client = Client::new(base)?;
        Ok(HttpSource { runtime, client })
    }
}

fn store_error(e: ClientError) -> StoreError {
    match e {
        ClientError::TooLarge { url, max } => StoreError::TooLarge { what: url, max },
        other => StoreError::Io {
            what: "the log over HTTP".to_string(),
            source: std::io::Error::other(other),
        },
    }
}

impl PublicRead for HttpSource {
    fn describe(&self) -> String {
        self.client.base().to_string()
    }

    fn read(&self, key: &PublicKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        let got = self
            .runtime
            .block_on(self.client.get(&key.path(), max))
            .map_err(store_error)?;
        Ok(got.map(|b| b.to_vec()))
    }

    fn read_checkpoint(&self, max: usize) -> Result<Option<Versioned>, StoreError> {
        use sha2::Digest as _;
        Ok(self.read(&PublicKey::Checkpoint, max)?.map(|bytes| {
            let version = Version(crate::digest::to_hex(&sha2::Sha256::digest(&bytes)));
            Versioned { bytes, version }
        }))
    }
}
