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
use crate::io::{InputError, OutputError};
use crate::limits::{MAX_STORE_OBJECT_BYTES, MAX_STORE_RECORD_BYTES};
use crate::receipt::canonical::{Value, dagcbor};
use std::path::{Path, PathBuf};

/// Age under which a temporary file of `tmp/` may be a write in flight.
const TMP_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Most approvals kept under one ticket that are read back.
pub const MAX_STORED_APPROVALS: usize = 64;

/// Mode of stored objects and pointers (before the umask).
const OBJECT_MODE: u32 = 0o644;

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
    pub fn open(dir: &Path) -> Result<GateStore, StoreError> {
        for sub in ["objects", "receipts", "tmp"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(|source| StoreError::Create {
                path: path.clone(),
                source,
            })?;
        }
        // Leftovers of an interrupted write: never objects (a rename is the
        // only way in), so removing them loses nothing. A temporary file
        // lives for one atomic write; one younger than a minute may be
        // another gate process's write in flight, and is left.
        if let Ok(entries) = std::fs::read_dir(dir.join("tmp")) {
            let now = std::time::SystemTime::now();
            for entry in entries.flatten() {
                let young = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| now.duration_since(t).map_or(true, |age| age < TMP_GRACE));
                if !young {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(GateStore {
            dir: dir.to_path_buf(),
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes the store's objects take (their file sizes), read now.
    pub fn size(&self) -> Result<u64, StoreError> {
        let objects = self.dir.join("objects");
        let err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Create { path, source }
        };
        let mut total = 0u64;
        for fan in std::fs::read_dir(&objects).map_err(err(&objects))? {
            let fan = fan.map_err(err(&objects))?.path();
            let Ok(entries) = std::fs::read_dir(&fan) else {
                continue;
            };
            for e in entries.flatten() {
                if let Ok(m) = e.metadata() {
                    total = total.saturating_add(m.len());
                }
            }
        }
        Ok(total)
    }

    /// The file of object `digest`.
    fn object_path(&self, digest: &Digest) -> Result<PathBuf, StoreError> {
        if digest.algorithm != Algorithm::Blake3 {
            return Err(StoreError::NotBlake3(*digest));
        }
        let hex = to_hex(&digest.bytes);
        let (a, b) = hex.split_at(2);
        Ok(self.dir.join("objects").join(a).join(b))
    }

    /// Store `bytes`; their BLAKE3 digest names them. Storing what is
    /// already there (and intact) writes nothing.
    pub fn put(&self, bytes: &[u8]) -> Result<Digest, StoreError> {
        let digest = Digest::blake3(bytes);
        let path = self.object_path(&digest)?;
        if self.get(&digest).is_ok() {
            return Ok(digest);
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::Create {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        crate::io::write_atomic_via(&self.dir.join("tmp"), &path, bytes, OBJECT_MODE)
            .map_err(StoreError::Write)?;
        Ok(digest)
    }

    /// The bytes of object `digest`, re-hashed.
    pub fn get(&self, digest: &Digest) -> Result<Vec<u8>, StoreError> {
        self.get_capped(digest, MAX_STORE_OBJECT_BYTES)
    }

    fn get_capped(&self, digest: &Digest, limit: usize) -> Result<Vec<u8>, StoreError> {
        let path = self.object_path(digest)?;
        let bytes = crate::io::read_path(&path, limit).map_err(|source| StoreError::Read {
            digest: *digest,
            source,
        })?;
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

    /// The record `digest`, re-hashed and strictly decoded.
    pub fn get_record(&self, digest: &Digest) -> Result<Value, StoreError> {
        let bytes = self.get_capped(digest, MAX_STORE_RECORD_BYTES)?;
        dagcbor::decode(&bytes).map_err(|source| StoreError::NotARecord {
            digest: *digest,
            source,
        })
    }

    fn pointer_path(&self, receipt_id: &Digest) -> PathBuf {
        self.dir.join("receipts").join(to_hex(&receipt_id.bytes))
    }

    /// Remember that receipt `receipt_id` rests on record `record`.
    pub fn link_receipt(&self, receipt_id: &Digest, record: &Digest) -> Result<(), StoreError> {
        let text = format!("{record}\n");
        crate::io::write_atomic_via(
            &self.dir.join("tmp"),
            &self.pointer_path(receipt_id),
            text.as_bytes(),
            OBJECT_MODE,
        )
        .map_err(StoreError::Write)
    }

    /// The record a receipt rests on, if this store issued it.
    pub fn receipt_record(&self, receipt_id: &Digest) -> Result<Option<Digest>, StoreError> {
        let path = self.pointer_path(receipt_id);
        let text = match crate::io::read_path_text(&path, 256) {
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
            .map_err(|_| StoreError::BadPointer { path })
    }
}

impl GateStore {
    fn approvals_dir(&self, ticket: &Digest) -> PathBuf {
        self.dir.join("approvals").join(to_hex(&ticket.bytes))
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
        let dir = self.approvals_dir(ticket);
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Create {
            path: dir.clone(),
            source,
        })?;
        crate::io::write_atomic_via(
            &self.dir.join("tmp"),
            &dir.join(to_hex(&receipt_id.bytes)),
            envelope,
            OBJECT_MODE,
        )
        .map_err(StoreError::Write)
    }

    /// The envelopes kept under `ticket` (by receipt id, at most
    /// [`MAX_STORED_APPROVALS`]); none when there is no such directory.
    pub fn approvals(&self, ticket: &Digest) -> Result<Vec<Vec<u8>>, StoreError> {
        let dir = self.approvals_dir(ticket);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(Vec::new());
        };
        let mut names: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()))
            })
            .collect();
        names.sort();
        names.truncate(MAX_STORED_APPROVALS);
        names
            .iter()
            .map(|path| {
                crate::io::read_path(path, crate::limits::MAX_ENVELOPE_BYTES).map_err(|source| {
                    StoreError::Read {
                        digest: *ticket,
                        source,
                    }
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

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
