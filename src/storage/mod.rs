//! storage: where a log's bytes live, behind one interface.
//!
//! Boundary: every read and write of a log's tiles, entry bundles,
//! checkpoint and private state goes through [`Store`] (or, for a source
//! that only serves public objects, [`PublicRead`]). The log decides what
//! to write and in which order (`spec/log.md`); a store decides only how
//! bytes become durable where it keeps them. Nothing here knows what a
//! hash or a checkpoint means. The contract every implementation keeps is
//! `spec/storage.md`, and [`contract`] tests it through the trait, so a
//! second backend runs the same tests.
//!
//! Implementations: [`posix::PosixStore`], a directory (the first, and the
//! model: temporary file, fsync, rename, fsync the directory);
//! [`PublicOnly`], any [`PublicRead`] (a mirror's HTTP source, a copy of the
//! public files) as a read-only store with no private state. An object
//! store is one more: its immutable writes are `If-None-Match: *` PUTs,
//! its checkpoint replacement an `If-Match` PUT on the ETag, its private
//! objects live under `PREFIX/.rcpt/`.

pub mod contract;
mod durable;
mod error;
pub mod posix;
#[cfg(feature = "s3")]
pub mod s3;
pub mod tiles;
mod traits;
pub mod walk;

pub use crate::tlog::tiles::path::{Family, PrivateDir, PrivateKey, PublicKey, TileKey, Width};
pub use error::StoreError;
pub use traits::{
    CheckpointStore, HoldStatus, PrivateStore, PublicRead, RandomRead, Staged, StagedWrite, Store,
    TileStore, Version, Versioned, WriterLock,
};
