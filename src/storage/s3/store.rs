//! store: the log's [`Store`](crate::storage::Store) on an S3 bucket (spec/storage.md "An object
//! store"). Public objects under `PREFIX/` are exactly the tlog-tiles
//! layout; private state lives under `PREFIX/.rcpt/`, the lease at
//! `PREFIX/.rcpt/lease`.
//!
//! | Store call           | requests                                             |
//! |----------------------|------------------------------------------------------|
//! | `create_tiles`       | PUT `If-None-Match: *` each (16 at once); 412: GET, compare |
//! | `replace_checkpoint` | PUT `If-Match: ETAG` (`If-None-Match: *` for the first) |
//! | `read`, `read_private` | GET, capped                                        |
//! | `write_private`      | PUT (a PUT replaces an object whole)                 |
//! | `stage_private` … `install_private` | kept in memory, then one PUT at its name |
//! | `open_private`       | HEAD; small objects one GET, larger ranged GETs      |
//! | `list_tiles`         | LIST per hundred of tile indexes in range            |
//! | `lock`               | the lease ([`super::lease`])                         |
//!
//! Once a lease was taken through this store, every write first checks it
//! and must finish before the lease would run out: a writer that lost its
//! lease gets [`StoreError::LockLost`] on its next write, before any
//! request is sent, and a write still running when the lease runs out is
//! abandoned with the same error.

use crate::storage::{CheckpointStore, PrivateStore, TileStore};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use super::blocking::BlockingClient;
use super::client::{Created, Etag, S3Error};
use super::config::Location;
use super::lease::{FormerHolders, Lease, LeaseConfig, LeaseError, LeaseWatch};
pub use super::objects::MAX_STAGED_BYTES;
use super::objects::{RangedObject, StagedObject, WholeObject};
use crate::storage::{
    Family, PrivateDir, PrivateKey, PublicKey, PublicRead, RandomRead, Staged, StagedWrite,
    StoreError, TileKey, Version, Versioned, WriterLock,
};
use crate::tlog::tiles::path::group_dir;

/// Tiles uploaded at once by `create_tiles`.
pub const CONCURRENT_PUTS: usize = 16;
/// Private objects up to this size are read whole when opened for random access.
pub const READ_WHOLE_BYTES: u64 = 4 * 1024 * 1024;
/// Most keys one `list_tiles` or `list_private` call accepts.
pub const MAX_LISTED_KEYS: usize = 1_000_000;
/// Name of the lease object under `PREFIX/.rcpt/`.
pub const LEASE_NAME: &str = "lease";

/// A log's objects in one bucket under one prefix.
#[derive(Debug)]
pub struct S3Store {
    s3: Arc<BlockingClient>,
    location: Location,
    lease_config: LeaseConfig,
    /// The lease taken through this store, if any: every write checks it.
    fence: Arc<Mutex<Option<LeaseWatch>>>,
    /// Holders of the lease this store had that no longer run: a lease
    /// object naming one is taken back without waiting out a TTL.
    former: FormerHolders,
    /// The leases this store held before the current one, for
    /// [`CheckpointStore::hold_status`] between and across leases.
    past: Arc<Mutex<PastHolds>>,
    /// Staged private objects, by temporary name.
    staging: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    next_stage: AtomicU64,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data, consistent after every statement.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl S3Store {
    /// The store at `location`, reached through `s3`, with leases of `lease_config`.
    pub fn new(s3: Arc<BlockingClient>, location: Location, lease_config: LeaseConfig) -> S3Store {
        S3Store {
            s3,
            location,
            lease_config,
            fence: Arc::new(Mutex::new(None)),
            former: FormerHolders::new(),
            past: Arc::new(Mutex::new(PastHolds::default())),
            staging: Arc::new(Mutex::new(HashMap::new())),
            next_stage: AtomicU64::new(0),
        }
    }

    /// The location.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The key of a public object.
    fn public_key(&self, key: &PublicKey) -> String {
        self.location.key(&key.path())
    }

    /// The key of a private object.
    fn private_key(&self, key: &PrivateKey) -> String {
        self.location.key(&format!(".rcpt/{}", key.path()))
    }

    /// The key of the lease object.
    pub fn lease_key(&self) -> String {
        self.location.key(&format!(".rcpt/{LEASE_NAME}"))
    }

    /// The time a write may take: what is left of the lease taken through
    /// this store (`None`: no lease, no limit); an error once it is lost.
    fn time_left(&self) -> Result<Option<std::time::Duration>, StoreError> {
        match &*locked(&self.fence) {
            Some(watch) => watch
                .remaining()
                .map(Some)
                .map_err(|e| StoreError::LockLost {
                    store: self.describe(),
                    detail: e.to_string(),
                }),
            None => Ok(None),
        }
    }

    /// Runs a write under the lease: it is abandoned (and the writer told
    /// it lost its lease) if it has not finished when the lease would run
    /// out, so no request of a writer outlives its lease on the client
    /// side (spec/storage.md "The lease").
    fn under_lease<T>(
        &self,
        write: impl std::future::Future<Output = Result<T, S3Error>>,
    ) -> Result<Result<T, S3Error>, StoreError> {
        let lost = |store: String| StoreError::LockLost {
            store,
            detail: "a write did not finish before the lease ran out".to_string(),
        };
        match self.time_left()? {
            None => Ok(self.s3.block_on(write)),
            Some(left) => self
                .s3
                .block_on(async { tokio::time::timeout(left, write).await })
                .map_err(|_| lost(self.describe())),
        }
    }

    /// The bytes of object `k` (at most `max`), or `None` if absent.
    fn get_bytes(&self, k: &str, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .s3
            .get(k, max)
            .map_err(|e| self.io(k, e))?
            .map(|o| o.body.to_vec()))
    }

    fn io(&self, what: &str, e: S3Error) -> StoreError {
        match e {
            S3Error::TooLarge { key, max } => StoreError::TooLarge { what: key, max },
            other => StoreError::Io {
                what: format!("{}: {what}", self.describe()),
                source: std::io::Error::other(other),
            },
        }
    }

    /// Every key under `prefix`, relative to the log's prefix.
    fn list_relative(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let base = self.location.key("");
        let keys = self
            .s3
            .list(&format!("{base}{prefix}"), MAX_LISTED_KEYS)
            .map_err(|e| self.io(prefix, e))?;
        Ok(keys
            .into_iter()
            .filter_map(|k| k.strip_prefix(&base).map(str::to_string))
            .collect())
    }
}

impl PublicRead for S3Store {
    fn describe(&self) -> String {
        self.location.to_string()
    }

    fn read(&self, key: &PublicKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        let k = self.public_key(key);
        self.get_bytes(&k, max)
    }

    fn read_checkpoint(&self, max: usize) -> Result<Option<Versioned>, StoreError> {
        let k = self.public_key(&PublicKey::Checkpoint);
        Ok(self
            .s3
            .get(&k, max)
            .map_err(|e| self.io(&k, e))?
            .map(|o| Versioned {
                bytes: o.body.to_vec(),
                version: Version(o.etag.as_str().to_string()),
            }))
    }
}

impl TileStore for S3Store {
    fn create_tiles(&self, objects: &[(TileKey, Vec<u8>)]) -> Result<(), StoreError> {
        for chunk in objects.chunks(CONCURRENT_PUTS) {
            let client = self.s3.client();
            let results = self.under_lease(async {
                let tasks: Vec<_> = chunk
                    .iter()
                    .map(|(tile, bytes)| {
                        let (c, k, b) = (
                            client.clone(),
                            self.public_key(&PublicKey::Tile(*tile)),
                            Bytes::from(bytes.clone()),
                        );
                        tokio::spawn(async move { c.create(&k, b).await })
                    })
                    .collect();
                let mut out = Vec::with_capacity(tasks.len());
                for t in tasks {
                    out.push(t.await);
                }
                Ok::<_, S3Error>(out)
            })?;
            let results = results.map_err(|e| self.io("tiles", e))?;
            for ((tile, _), result) in chunk.iter().zip(results) {
                match result {
                    Ok(Ok(Created::New(_) | Created::Identical(_))) => {}
                    Ok(Err(S3Error::ExistsDifferent { .. })) => {
                        return Err(StoreError::Conflict { key: *tile });
                    }
                    Ok(Err(e)) => return Err(self.io(&tile.path(), e)),
                    Err(_) => return Err(StoreError::Thread),
                }
            }
        }
        Ok(())
    }

    fn list_tiles(&self, family: Family, from: u64, to: u64) -> Result<Vec<TileKey>, StoreError> {
        // One LIST per hundred of indexes: a tile's last path element is its
        // index's last three digits, so `…/<group>/<d>` holds hundred d.
        let mut out = Vec::new();
        let family_dir = match family {
            Family::Hashes(l) => format!("tile/{l}"),
            Family::Entries => "tile/entries".to_string(),
        };
        let mut hundred = from / 100;
        while hundred <= to / 100 {
            let group = group_dir(hundred / 10);
            let dir = if group.is_empty() {
                family_dir.clone()
            } else {
                format!("{family_dir}/{group}")
            };
            for rel in self.list_relative(&format!("{dir}/{}", hundred % 10))? {
                if let Some(PublicKey::Tile(t)) = PublicKey::from_path(&rel)
                    && t.family() == family
                    && (from..=to).contains(&t.index())
                {
                    out.push(t);
                }
            }
            if out.len() > MAX_LISTED_KEYS {
                return Err(self.io(
                    "listing tiles",
                    S3Error::BadListing {
                        prefix: family_dir,
                        detail: format!("more than {MAX_LISTED_KEYS} tiles"),
                    },
                ));
            }
            hundred = match hundred.checked_add(1) {
                Some(h) => h,
                None => break,
            };
        }
        Ok(out)
    }

    fn remove_tiles(&self, keys: &[TileKey]) -> Result<(), StoreError> {
        for tile in keys {
            let k = self.public_key(&PublicKey::Tile(*tile));
            self.under_lease(self.s3.client().delete(&k))?
                .map_err(|e| self.io(&k, e))?;
        }
        Ok(())
    }
}

impl CheckpointStore for S3Store {
    fn is_empty(&self) -> Result<bool, StoreError> {
        let prefix = self.location.key("");
        Ok(!self
            .s3
            .block_on(self.s3.client().any_key(&prefix))
            .map_err(|e| self.io("listing", e))?)
    }

    fn replace_checkpoint(
        &self,
        expected: Option<&Version>,
        bytes: &[u8],
    ) -> Result<Version, StoreError> {
        let k = self.public_key(&PublicKey::Checkpoint);
        let body = Bytes::from(bytes.to_vec());
        let client = self.s3.client();
        let written = match expected {
            None => self
                .under_lease(client.create(&k, body))?
                .map(|c| c.etag().clone()),
            Some(v) => {
                let etag = Etag::from_unquoted(&v.0);
                self.under_lease(client.replace(&k, body, &etag))?
            }
        };
        match written {
            Ok(etag) => Ok(Version(etag.as_str().to_string())),
            Err(S3Error::ExistsDifferent { .. } | S3Error::Conflict { .. }) => {
                Err(StoreError::CheckpointMoved)
            }
            Err(e) => Err(self.io(&k, e)),
        }
    }

    fn lock(&self, wait: bool) -> Result<Box<dyn WriterLock>, StoreError> {
        let key = self.lease_key();
        let lease = self
            .s3
            .block_on(Lease::acquire_after(
                self.s3.client(),
                &key,
                self.lease_config,
                wait,
                &self.former,
            ))
            .map_err(|e| match e {
                LeaseError::Held { .. } => StoreError::Locked {
                    store: self.describe(),
                    lock: key.clone(),
                },
                other => StoreError::Io {
                    what: key.clone(),
                    source: std::io::Error::other(other),
                },
            })?;
        locked(&self.past).close();
        *locked(&self.fence) = Some(lease.watch());
        Ok(Box::new(S3Lock {
            lease: Some(lease),
            s3: self.s3.clone(),
            fence: self.fence.clone(),
            past: self.past.clone(),
            store: self.describe(),
        }))
    }

    fn hold_status(&self) -> Option<crate::storage::HoldStatus> {
        let past = locked(&self.past);
        let status = match &*locked(&self.fence) {
            Some(watch) => watch.status(),
            // Between leases: the last one's, no longer held.
            None => past.last.as_ref()?.status(),
        };
        Some(crate::storage::HoldStatus {
            renewals: status.renewals.saturating_add(past.renewals),
            renewal_failures: status.renewal_failures.saturating_add(past.failures),
            ..status
        })
    }
}

impl PrivateStore for S3Store {
    fn read_private(&self, key: &PrivateKey, max: usize) -> Result<Option<Vec<u8>>, StoreError> {
        // Private state is the writer's: one that lost its lease is told
        // so here, not by a run its successor retired (spec/storage.md).
        self.time_left()?;
        let k = self.private_key(key);
        self.get_bytes(&k, max)
    }

    fn write_private(&self, key: &PrivateKey, bytes: &[u8]) -> Result<(), StoreError> {
        let k = self.private_key(key);
        self.under_lease(
            self.s3
                .client()
                .put_overwrite(&k, Bytes::from(bytes.to_vec())),
        )?
        .map_err(|e| self.io(&k, e))?;
        Ok(())
    }

    fn remove_private(&self, keys: &[PrivateKey]) -> Result<(), StoreError> {
        for key in keys {
            let k = self.private_key(key);
            self.under_lease(self.s3.client().delete(&k))?
                .map_err(|e| self.io(&k, e))?;
        }
        Ok(())
    }

    fn list_private(&self, dir: PrivateDir) -> Result<Vec<PrivateKey>, StoreError> {
        let prefix = format!(".rcpt/{}/", dir.path());
        let names = self
            .list_relative(&prefix)?
            .into_iter()
            .filter_map(|rel| rel.strip_prefix(&prefix).map(str::to_string))
            .collect();
        Ok(PrivateKey::all_in(dir, names))
    }

    fn open_private(&self, key: &PrivateKey) -> Result<Option<Box<dyn RandomRead>>, StoreError> {
        self.time_left()?;
        let k = self.private_key(key);
        let Some(meta) = self.s3.head(&k).map_err(|e| self.io(&k, e))? else {
            return Ok(None);
        };
        if meta.len <= READ_WHOLE_BYTES {
            let cap = usize::try_from(meta.len).unwrap_or(usize::MAX);
            return Ok(self.s3.get(&k, cap).map_err(|e| self.io(&k, e))?.map(|o| {
                Box::new(WholeObject {
                    key: k.clone(),
                    bytes: o.body,
                }) as Box<dyn RandomRead>
            }));
        }
        Ok(Some(Box::new(RangedObject {
            s3: self.s3.clone(),
            key: k,
            len: meta.len,
        })))
    }

    fn stage_private(&self) -> Result<Box<dyn StagedWrite>, StoreError> {
        let n = self.next_stage.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(StagedObject {
            name: format!("stage-{n}"),
            bytes: Vec::new(),
            staging: self.staging.clone(),
        }))
    }

    fn install_private(&self, staged: Staged, key: &PrivateKey) -> Result<(), StoreError> {
        let bytes = locked(&self.staging)
            .remove(&staged.temp)
            .ok_or_else(|| StoreError::BadName(staged.temp.clone()))?;
        self.write_private(key, &bytes)
    }

    fn clear_staging(&self) -> Result<(), StoreError> {
        locked(&self.staging).clear();
        Ok(())
    }
}

/// The leases a store held before: renewals counted over all of them (a
/// counter of the metrics never goes back when a new lease is taken), and
/// the last one, reported as not held until the next is taken.
#[derive(Debug, Default)]
struct PastHolds {
    renewals: u64,
    failures: u64,
    last: Option<LeaseWatch>,
}

impl PastHolds {
    /// A new lease is taken: the last one's counts join the totals.
    fn close(&mut self) {
        if let Some(last) = self.last.take() {
            let status = last.status();
            self.renewals = self.renewals.saturating_add(status.renewals);
            self.failures = self.failures.saturating_add(status.renewal_failures);
        }
    }
}

/// The writer's hold: a lease, released (marked `released` for a standby)
/// when dropped.
struct S3Lock {
    lease: Option<Lease>,
    s3: Arc<BlockingClient>,
    fence: Arc<Mutex<Option<LeaseWatch>>>,
    past: Arc<Mutex<PastHolds>>,
    store: String,
}

impl std::fmt::Debug for S3Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Lock")
            .field("store", &self.store)
            .finish()
    }
}

impl WriterLock for S3Lock {
    fn check(&self) -> Result<(), StoreError> {
        match &self.lease {
            Some(lease) => lease.check().map_err(|e| StoreError::LockLost {
                store: self.store.clone(),
                detail: e.to_string(),
            }),
            None => Ok(()),
        }
    }
}

impl Drop for S3Lock {
    fn drop(&mut self) {
        let mut past = locked(&self.past);
        past.last = locked(&self.fence).take();
        drop(past);
        if let Some(lease) = self.lease.take() {
            // Best effort: if the release fails, the lease expires by itself.
            let _ = self.s3.block_on(lease.release());
        }
    }
}
