//! blocking: the [`Client`]'s calls for synchronous code (the log's storage
//! trait, the command line), each run to completion on a small runtime the
//! wrapper owns. Call it from plain threads or `spawn_blocking`, never from
//! inside an async task (tokio refuses to block a runtime thread).

use std::future::Future;

use bytes::Bytes;

use super::client::{Client, Created, Etag, Meta, Object, S3Error};
use super::config::{Location, Settings};

/// Worker threads of the wrapper's runtime: they drive the connections
/// while a call blocks; requests of one call may run concurrently.
pub const RUNTIME_WORKERS: usize = 2;

/// A [`Client`] and the runtime its calls run on.
#[derive(Debug)]
pub struct BlockingClient {
    runtime: tokio::runtime::Runtime,
    client: Client,
}

impl BlockingClient {
    /// A client for `location`'s bucket, with its own runtime.
    pub fn new(settings: Settings, location: &Location) -> std::io::Result<BlockingClient> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_WORKERS)
            .thread_name("rcpt-s3")
            .enable_all()
            .build()?;
        // The pool's connection tasks are spawned on the runtime current at
        // the first request, which block_on makes ours.
        let client = Client::new(settings, location);
        Ok(BlockingClient { runtime, client })
    }

    /// The async client, for running several requests at once in [`Self::block_on`].
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs `future` on the wrapper's runtime to completion.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// See [`Client::get`].
    pub fn get(&self, key: &str, max: usize) -> Result<Option<Object>, S3Error> {
        self.block_on(self.client.get(key, max))
    }

    /// See [`Client::head`].
    pub fn head(&self, key: &str) -> Result<Option<Meta>, S3Error> {
        self.block_on(self.client.head(key))
    }

    /// See [`Client::create`].
    pub fn create(&self, key: &str, body: Bytes) -> Result<Created, S3Error> {
        self.block_on(self.client.create(key, body))
    }

    /// See [`Client::replace`].
    pub fn replace(&self, key: &str, body: Bytes, expected: &Etag) -> Result<Etag, S3Error> {
        self.block_on(self.client.replace(key, body, expected))
    }

    /// See [`Client::put_overwrite`].
    pub fn put_overwrite(&self, key: &str, body: Bytes) -> Result<Etag, S3Error> {
        self.block_on(self.client.put_overwrite(key, body))
    }

    /// See [`Client::delete`].
    pub fn delete(&self, key: &str) -> Result<(), S3Error> {
        self.block_on(self.client.delete(key))
    }

    /// See [`Client::list`].
    pub fn list(&self, prefix: &str, max_keys: usize) -> Result<Vec<String>, S3Error> {
        self.block_on(self.client.list(prefix, max_keys))
    }
}
