//! store: the gate's content-addressed store (spec/gate.md "The store").
//!
//! ```text
//! STORE/objects/<2 hex>/<62 hex>   bytes whose BLAKE3 is the 64 hex digits
//! STORE/receipts/<64 hex>          "blake3:<evidence id>\n" for a receipt id
//! STORE/tmp/                       temporary files of atomic writes
//! STORE/approvals/<ticket hex>/<receipt hex>   an approval's envelope, under the ticket it approves
//! ```
//!
//! Outputs of checks, evidence records (canonical DAG-CBOR), and (for `gate
//! apply`) pre-images and inverse records are objects. Every write goes
//! through [`crate::io::write_atomic_via`] (exclusive, no-follow temporary
//! file in `tmp/`, synced, renamed); every read is capped and re-hashed, so
//! a corrupt or swapped object is refused, never returned. The default
//! location is `.git/rcpt/store` of the repository's common directory,
//! never the project's own objects, index or refs.

use crate::digest::{Algorithm, Digest, to_hex};
use crate::io::{Batch, Dir, DirError, InputError, OutputError};
use crate::limits::{MAX_STORE_OBJECT_BYTES, MAX_STORE_RECORD_BYTES};
use crate::receipt::canonical::{Value, dagcbor};
use std::path::{Path, PathBuf};

/// Age under which a temporary file of `tmp/` may be a write in flight.
const TMP_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Most approvals kept under one ticket that are read back.
pub const MAX_STORED_APPROVALS: usize = 64;

/// Mode of stored objects and pointers (before the umask).
const OBJECT_MODE: u32 = 0o644;

/// Mode of the store's directories (before the umask).
const STORE_DIR_MODE: u32 = 0o755;

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A directory of the store could not be made.
    #[error("cannot create the store directory {path}")]
    Create {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Writing an object failed.
    #[error("writing to the store")]
    Write(#[source] OutputError),
    /// Reading an object failed (missing, unreadable, over the limit).
    #[error("reading {digest} from the store")]
    Read {
        /// The object.
        digest: Digest,
        /// Why.
        #[source]
        source: InputError,
    },
    /// The object's bytes do not hash to its name.
    #[error("store object {digest} is corrupt: its bytes hash to {found}")]
    Corrupt {
        /// The name.
        digest: Digest,
        /// What the bytes hash to.
        found: Digest,
    },
    /// An object that should be a record is not canonical DAG-CBOR.
    #[error("store object {digest} is not a record")]
    NotARecord {
        /// The object.
        digest: Digest,
        /// Why.
        #[source]
        source: dagcbor::DecodeError,
    },
    /// A receipt pointer is not a digest.
    #[error("store pointer {path} is corrupt")]
    BadPointer {
        /// The file.
        path: PathBuf,
    },
    /// Only BLAKE3 names objects.
    #[error("{0} is not a blake3 digest; store objects are named by BLAKE3")]
    NotBlake3(Digest),
    /// A directory holds more entries than may be read.
    #[error("{path} holds over {max} entries")]
    TooMany {
        /// The directory.
        path: PathBuf,
        /// The most read.
        max: usize,
    },
    /// A directory of the store is a link, not a directory, or unusable.
    #[error(transparent)]
    Dir(#[from] DirError),
}

/// The default store of `tree`: `<git common dir>/rcpt/store`.
pub fn default_dir(tree: &crate::gate::git::WorkTree) -> PathBuf {
    tree.common_dir.join("rcpt").join("store")
}

/// A gate store at a directory.
#[derive(Clone, Debug)]
pub struct GateStore {
    dir: PathBuf,
}

impl GateStore {
    /// Open (creating if needed) the store at `dir`, emptying `tmp/`.
    /// `dir` and every directory in it are opened without following a link
    /// ([`Dir`]): a link in place of `objects/`, `receipts/` or `tmp/` (or
    /// of `dir` itself) is refused with [`StoreError::Dir`], naming it.
    pub fn open(dir: &Path) -> Result<GateStore, StoreError> {
        let root = Dir::create(dir, STORE_DIR_MODE)?;
        for sub in ["objects", "receipts"] {
            root.child_or_create(sub, STORE_DIR_MODE)?;
        }
        // Leftovers of an interrupted write: never objects (a rename is the
        // only way in), so removing them loses nothing. A temporary file
        // lives for one atomic write; one younger than a minute may be
        // another gate process's write in flight, and is left. Removed on
        // the handle of `tmp/`: a link in it is removed, never followed.
        let tmp = root.child_or_create("tmp", STORE_DIR_MODE)?;
        let now = std::time::SystemTime::now();
        let old = |name: &std::ffi::OsStr| {
            tmp.modified(name)
                .ok()
                .flatten()
                .is_some_and(|t| now.duration_since(t).is_ok_and(|age| age >= TMP_GRACE))
        };
        tmp.remove_entries(|name, _| old(name))?;
        Ok(GateStore {
            dir: dir.to_path_buf(),
        })
    }

    /// The subdirectory `name` of the store, opened without following a link.
    fn sub(&self, name: &str) -> Result<Dir, StoreError> {
        Ok(Dir::open(&self.dir)?.child(name)?)
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes the store's objects take (their file sizes), read now; the
    /// fan-out directories are opened without following a link.
    pub fn size(&self) -> Result<u64, StoreError> {
        let objects = self.sub("objects")?;
        let mut total = 0u64;
        for fan in objects.names()? {
            let Some(fan) = objects.try_child(&fan)? else {
                continue;
            };
            for name in fan.names()? {
                let path = fan.join(&name);
                if let Ok(m) = std::fs::symlink_metadata(&path) {
                    total = total.saturating_add(m.len());
                }
            }
        }
        Ok(total)
    }

    /// The fan-out directory and file name of object `digest`.
    fn object_name(digest: &Digest) -> Result<(String, String), StoreError> {
        if digest.algorithm != Algorithm::Blake3 {
            return Err(StoreError::NotBlake3(*digest));
        }
        let hex = to_hex(&digest.bytes);
        let (a, b) = hex.split_at(2);
        Ok((a.to_string(), b.to_string()))
    }

    /// Store `bytes`; their BLAKE3 digest names them. Storing what is
    /// already there (and intact) writes nothing.
    pub fn put(&self, bytes: &[u8]) -> Result<Digest, StoreError> {
        let mut batch = Batch::new();
        let digest = self.put_in(&mut batch, bytes)?;
        batch.commit().map_err(StoreError::Write)?;
        Ok(digest)
    }

    /// [`GateStore::put`] staged in `batch`: durable when the batch is
    /// committed (one sync for a burst of objects, `io::Batch`).
    pub fn put_in(&self, batch: &mut Batch, bytes: &[u8]) -> Result<Digest, StoreError> {
        let digest = Digest::blake3(bytes);
        if self.get(&digest).is_ok() {
            return Ok(digest);
        }
        let (a, b) = Self::object_name(&digest)?;
        let fan = self.sub("objects")?.child_or_create(&a, STORE_DIR_MODE)?;
        let tmp = self.sub("tmp")?;
        batch
            .write_atomic_via(tmp.path(), &fan.join(&b), bytes, OBJECT_MODE)
            .map_err(StoreError::Write)?;
        Ok(digest)
    }

    /// The bytes of object `digest`, re-hashed.
    pub fn get(&self, digest: &Digest) -> Result<Vec<u8>, StoreError> {
        self.get_capped(digest, MAX_STORE_OBJECT_BYTES)
    }

    fn get_capped(&self, digest: &Digest, limit: usize) -> Result<Vec<u8>, StoreError> {
        let (a, b) = Self::object_name(digest)?;
        let read = |source| StoreError::Read {
            digest: *digest,
            source,
        };
        let fan = match self.sub("objects")?.child(&a) {
            Ok(fan) => fan,
            Err(e) if e.is_not_found() => {
                let path = self.dir.join("objects").join(&a).join(&b);
                return Err(read(InputError::NotFound { path }));
            }
            Err(e) => return Err(e.into()),
        };
        let bytes = crate::io::read_at(&fan, &b, limit).map_err(read)?;
        let found = Digest::blake3(&bytes);
        if found != *digest {
            return Err(StoreError::Corrupt {
                digest: *digest,
                found,
            });
        }
        Ok(bytes)
    }

    /// Store a record as canonical DAG-CBOR; its digest is its identity.
    pub fn put_record(&self, value: &Value) -> Result<Digest, StoreError> {
        self.put(&dagcbor::encode(value))
    }

    /// [`GateStore::put_record`] staged in `batch`.
    pub fn put_record_in(&self, batch: &mut Batch, value: &Value) -> Result<Digest, StoreError> {
        self.put_in(batch, &dagcbor::encode(value))
    }

    /// The record `digest`, re-hashed and strictly decoded.
    pub fn get_record(&self, digest: &Digest) -> Result<Value, StoreError> {
        let bytes = self.get_capped(digest, MAX_STORE_RECORD_BYTES)?;
        dagcbor::decode(&bytes).map_err(|source| StoreError::NotARecord {
            digest: *digest,
            source,
        })
    }

    /// Remember that receipt `receipt_id` rests on record `record`.
    pub fn link_receipt(&self, receipt_id: &Digest, record: &Digest) -> Result<(), StoreError> {
        let mut batch = Batch::new();
        self.link_receipt_in(&mut batch, receipt_id, record)?;
        batch.commit().map_err(StoreError::Write)
    }

    /// [`GateStore::link_receipt`] staged in `batch`; the caller puts a
    /// [`Batch::barrier`] between the objects and their links.
    pub fn link_receipt_in(
        &self,
        batch: &mut Batch,
        receipt_id: &Digest,
        record: &Digest,
    ) -> Result<(), StoreError> {
        let text = format!("{record}\n");
        let (receipts, tmp) = (self.sub("receipts")?, self.sub("tmp")?);
        batch
            .write_atomic_via(
                tmp.path(),
                &receipts.join(to_hex(&receipt_id.bytes)),
                text.as_bytes(),
                OBJECT_MODE,
            )
            .map_err(StoreError::Write)
    }

    /// The records the receipts of this store rest on (at most `max`
    /// receipts; an error beyond), in no order.
    pub fn receipt_records(&self, max: usize) -> Result<Vec<Digest>, StoreError> {
        let receipts = self.sub("receipts")?;
        let names = receipts.names()?;
        if names.len() > max {
            return Err(StoreError::TooMany {
                path: self.dir.join("receipts"),
                max,
            });
        }
        let mut out = Vec::with_capacity(names.len());
        for name in names.iter().filter_map(|n| n.to_str()) {
            let bytes =
                crate::io::read_at(&receipts, name, 256).map_err(|source| StoreError::Read {
                    digest: Digest::blake3(name.as_bytes()),
                    source,
                })?;
            let text = String::from_utf8_lossy(&bytes);
            let record = text
                .trim_end()
                .parse()
                .map_err(|_| StoreError::BadPointer {
                    path: receipts.join(name),
                })?;
            out.push(record);
        }
        Ok(out)
    }

    /// The record a receipt rests on, if this store issued it.
    pub fn receipt_record(&self, receipt_id: &Digest) -> Result<Option<Digest>, StoreError> {
        let receipts = self.sub("receipts")?;
        let name = to_hex(&receipt_id.bytes);
        let text = match crate::io::read_at(&receipts, &name, 256).and_then(|b| {
            String::from_utf8(b).map_err(|_| InputError::NotUtf8 {
                source_name: receipts.join(&name).display().to_string(),
            })
        }) {
            Ok(t) => t,
            Err(InputError::NotFound { .. }) => return Ok(None),
            Err(source) => {
                return Err(StoreError::Read {
                    digest: *receipt_id,
                    source,
                });
            }
        };
        text.trim_end()
            .parse()
            .map(Some)
            .map_err(|_| StoreError::BadPointer {
                path: receipts.join(&name),
            })
    }

    /// The journal file's path (spec/gate.md "The apply protocol"), in a
    /// store directory opened without following a link.
    pub fn journal_path(&self) -> Result<PathBuf, StoreError> {
        Ok(Dir::open(&self.dir)?.join("journal"))
    }

    /// The temporary directory of the atomic writes, checked not a link.
    pub fn tmp_dir(&self) -> Result<PathBuf, StoreError> {
        Ok(self.sub("tmp")?.path().to_path_buf())
    }
}

impl GateStore {
    /// `approvals/<ticket hex>/` of the store, opened without following a
    /// link; created (with `approvals/`) when `create`, else `None` when
    /// it does not exist.
    fn approvals_dir(&self, ticket: &Digest, create: bool) -> Result<Option<Dir>, StoreError> {
        let root = Dir::open(&self.dir)?;
        let name = to_hex(&ticket.bytes);
        if create {
            let approvals = root.child_or_create("approvals", STORE_DIR_MODE)?;
            return Ok(Some(approvals.child_or_create(&name, STORE_DIR_MODE)?));
        }
        match root.try_child("approvals")? {
            Some(approvals) => Ok(approvals.try_child(&name)?),
            None => Ok(None),
        }
    }

    /// Keep the envelope (JSON) of approval receipt `receipt_id` under the
    /// ticket it approves, where `gate check|apply` (and the tool proxy)
    /// of this store find it.
    pub fn put_approval(
        &self,
        ticket: &Digest,
        receipt_id: &Digest,
        envelope: &[u8],
    ) -> Result<(), StoreError> {
        let Some(dir) = self.approvals_dir(ticket, true)? else {
            return Ok(());
        };
        crate::io::write_atomic_via(
            &self.tmp_dir()?,
            &dir.join(to_hex(&receipt_id.bytes)),
            envelope,
            OBJECT_MODE,
        )
        .map_err(StoreError::Write)
    }

    /// The envelopes kept under `ticket` (by receipt id, at most
    /// [`MAX_STORED_APPROVALS`]); none when there is no such directory.
    /// Each is read on the handle of its directory: a link is refused.
    pub fn approvals(&self, ticket: &Digest) -> Result<Vec<Vec<u8>>, StoreError> {
        let Some(dir) = self.approvals_dir(ticket, false)? else {
            return Ok(Vec::new());
        };
        let mut names: Vec<String> = dir
            .names()?
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .filter(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()))
            .collect();
        names.sort();
        names.truncate(MAX_STORED_APPROVALS);
        names
            .iter()
            .map(|name| {
                crate::io::read_at(&dir, name, crate::limits::MAX_ENVELOPE_BYTES).map_err(
                    |source| StoreError::Read {
                        digest: *ticket,
                        source,
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl GateStore {
        /// The file of object `digest`.
        fn object_path(&self, digest: &Digest) -> Result<PathBuf, StoreError> {
            let (a, b) = Self::object_name(digest)?;
            Ok(self.dir.join("objects").join(a).join(b))
        }
    }

    #[test]
    fn objects_are_content_addressed_and_rehashed_on_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = GateStore::open(dir.path()).unwrap();
        let d = store.put(b"hello").unwrap();
        assert_eq!(d, Digest::blake3(b"hello"));
        assert_eq!(store.put(b"hello").unwrap(), d);
        assert_eq!(store.get(&d).unwrap(), b"hello");
        // Corrupt it on disk: refused, never returned.
        let path = store.object_path(&d).unwrap();
        std::fs::write(&path, b"hellO").unwrap();
        assert!(matches!(store.get(&d), Err(StoreError::Corrupt { .. })));
        // put repairs a corrupt object.
        assert_eq!(store.put(b"hello").unwrap(), d);
        assert_eq!(store.get(&d).unwrap(), b"hello");
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(store.get(&d), Err(StoreError::Read { .. })));
    }

    #[test]
    fn records_and_receipt_pointers_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = GateStore::open(dir.path()).unwrap();
        let value = Value::Array(vec![Value::Integer(1), Value::Text("x".into())]);
        let d = store.put_record(&value).unwrap();
        assert_eq!(store.get_record(&d).unwrap(), value);
        let receipt = Digest::blake3(b"receipt");
        assert_eq!(store.receipt_record(&receipt).unwrap(), None);
        store.link_receipt(&receipt, &d).unwrap();
        assert_eq!(store.receipt_record(&receipt).unwrap(), Some(d));
        // A stray temporary file is removed when the store is opened
        // (once older than a write in flight can be).
        let stray = dir.path().join("tmp/.x.rcpt-tmp");
        std::fs::write(&stray, b"").unwrap();
        let old = std::time::SystemTime::now() - 2 * TMP_GRACE;
        std::fs::File::options()
            .write(true)
            .open(&stray)
            .unwrap()
            .set_modified(old)
            .unwrap();
        GateStore::open(dir.path()).unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
            0
        );
    }
}
