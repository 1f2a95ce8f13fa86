//! s3: the log on S3-compatible object storage (spec/storage.md).
//!
//! Boundary: [`config`] names a log (`s3://BUCKET/PREFIX`) and reads the
//! endpoint and credentials; [`sigv4`] signs requests (pure, no I/O);
//! [`client`] sends the few requests the log needs (GET, HEAD, PUT with
//! `If-None-Match: *`, PUT with `If-Match`, DELETE, LIST) with deadlines,
//! bounded retries and capped bodies, and [`blocking`] runs them for
//! synchronous callers; [`lease`] keeps one sequencer at a time. Nothing
//! here knows the tlog-tiles layout.

mod answer;
pub mod blocking;
pub mod client;
mod conditional;
pub mod config;
pub mod lease;
mod list;
mod objects;
pub mod sigv4;
pub mod store;

pub use blocking::BlockingClient;
pub use client::{Client, Created, Etag, Meta, Object, S3Error};
pub use conditional::{Current, answer_lost};
pub use config::{ConfigError, Endpoint, Location, Settings};
pub use lease::{FormerHolders, Lease, LeaseConfig, LeaseError, LeaseWatch, LostReason};
pub use store::S3Store;
