//! state: the witness's per-origin record, changed only by an atomic,
//! durable compare-and-swap.
//!
//! One file per log origin, `DIR/state/<hex SHA-256(origin)>`, holding the
//! latest checkpoint the witness cosigned (body, the log signature lines
//! it verified, its own cosignature line). A change takes the origin's
//! lock (`<hex>.lock`, an exclusive `flock`, so it excludes other threads
//! and other processes alike), re-reads the file (capped, through
//! [`crate::io::read_path`]), compares it with what the caller decided
//! from, and only then writes a temporary file, fsyncs it, renames it over
//! the record and fsyncs the directory ([`crate::io::write_atomic_via`]). Two updates
//! from the same old record can therefore never both succeed, and a crash
//! at any instant leaves the old record or the new one, whole.

use crate::io::{InputError, OUTPUT_FILE_MODE, OutputError};
use crate::limits::MAX_NOTE_BYTES;
use crate::tlog::merkle::Hash;
use crate::tlog::note::{Checkpoint, Note};

use sha2::Digest as _;
use std::path::{Path, PathBuf};

/// The witness's record for one origin: the latest cosigned tree head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeHead {
    /// Tree size of the latest cosigned checkpoint.
    pub size: u64,
    /// Its root hash.
    pub root: Hash,
}

/// A stored record: the tree head and the cosigned checkpoint note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Size and root of the checkpoint.
    pub head: TreeHead,
    /// The cosigned checkpoint note, as stored.
    pub note: String,
}

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// A file-system operation failed.
    #[error("witness state {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A record could not be read.
    #[error("witness state")]
    Read(#[source] InputError),
    /// A record could not be written.
    #[error("witness state")]
    Write(#[source] OutputError),
    /// A record that is not a checkpoint note of its origin.
    #[error("witness state {} is corrupt: {detail}; restore it from a backup", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A stored record that is not a checkpoint note of its origin.
    #[error("witness state {} is corrupt; restore it from a backup", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: RecordError,
    },
    /// A new record smaller than the stored one: refused, whatever the caller decided.
    #[error("refusing to roll the witness state of {origin} back from size {current} to {new}")]
    Rollback {
        /// The origin.
        origin: String,
        /// Stored size.
        current: u64,
        /// Size offered.
        new: u64,
    },
    /// A new record that is not a checkpoint note of the origin named.
    #[error("new record for {origin:?} refused")]
    BadRecord {
        /// The origin named.
        origin: String,
        /// What is wrong.
        #[source]
        source: RecordError,
    },
    /// The record kept changing under concurrent requests.
    #[error("witness state of {0} changed {1} times in a row under concurrent requests; retry")]
    Contended(String, usize),
}

/// Why a record is not a checkpoint note of its origin.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Not UTF-8 text.
    #[error(transparent)]
    Text(#[from] std::string::FromUtf8Error),
    /// Not a note, or its text not a checkpoint.
    #[error(transparent)]
    Note(#[from] crate::tlog::note::NoteError),
    /// A checkpoint of another origin.
    #[error("origin {found:?}, expected {expected:?}")]
    Origin {
        /// The checkpoint's origin.
        found: String,
        /// The origin asked for.
        expected: String,
    },
}

/// Why a compare-and-swap did not write.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CasError {
    /// The stored record is not the one expected.
    #[error("witness state changed: now {current:?}")]
    Conflict {
        /// The record found (None: never cosigned).
        current: Option<TreeHead>,
    },
    /// Reading or writing failed.
    #[error(transparent)]
    State(#[from] StateError),
}

/// The per-origin state files under one directory.
#[derive(Clone, Debug)]
pub struct StateStore {
    dir: PathBuf,
    tmp: PathBuf,
}

/// A state directory that is a link, not a directory, or unusable.
fn dir_err(e: crate::io::DirError) -> StateError {
    StateError::Io {
        path: e.path().to_path_buf(),
        source: e.into_io(),
    }
}

/// Open `dir` without following a link at it.
fn open_dir(dir: &Path) -> Result<crate::io::Dir, StateError> {
    crate::io::Dir::open(dir).map_err(dir_err)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `hex(SHA-256(origin))`: the tlog-witness "origin hash", a safe file name.
pub fn origin_hash(origin: &str) -> String {
    crate::digest::to_hex(&sha2::Sha256::digest(origin.as_bytes()))
}

impl StateStore {
    /// The store with records in `dir` and temporary files in `tmp` (same
    /// file system, so the rename is atomic). Both are created if absent.
    ///
    /// Each is opened without following a link ([`crate::io::Dir`]): a
    /// link planted in place of either is refused, naming it.
    pub fn open(dir: &Path, tmp: &Path) -> Result<StateStore, StateError> {
        for d in [dir, tmp] {
            crate::io::Dir::create(d, 0o755).map_err(dir_err)?;
        }
        Ok(StateStore {
            dir: dir.to_path_buf(),
            tmp: tmp.to_path_buf(),
        })
    }

    /// Path of the record of `origin`.
    pub fn record_path(&self, origin: &str) -> PathBuf {
        self.dir.join(origin_hash(origin))
    }

    fn lock_path(&self, origin: &str) -> PathBuf {
        self.dir.join(format!("{}.lock", origin_hash(origin)))
    }

    /// The record of `origin`, or None if the witness never cosigned it.
    pub fn load(&self, origin: &str) -> Result<Option<Record>, StateError> {
        let path = self.record_path(origin);
        let corrupt = |detail: String| StateError::Corrupt {
            path: path.clone(),
            detail,
        };
        let read = crate::io::read_state_file(&path, MAX_NOTE_BYTES, corrupt, StateError::Read);
        let Some(bytes) = read? else {
            return Ok(None);
        };
        let bad_file = |source| StateError::BadFile {
            path: path.clone(),
            source,
        };
        let text = String::from_utf8(bytes).map_err(|e| bad_file(e.into()))?;
        let head = parse_record(&text, origin).map_err(bad_file)?;
        Ok(Some(Record { head, note: text }))
    }

    /// Replace the record of `origin` by `note` if and only if the stored
    /// record's head is still `expected` (None: no record), durably.
    ///
    /// `note` must be a checkpoint note of `origin` no smaller than the
    /// stored one. On [`CasError::Conflict`] nothing was written.
    pub fn compare_and_swap(
        &self,
        origin: &str,
        expected: Option<&TreeHead>,
        note: &str,
    ) -> Result<(), CasError> {
        let new = parse_record(note, origin).map_err(|source| StateError::BadRecord {
            origin: origin.to_owned(),
            source,
        })?;
        // Both directories again, never through a link planted since open.
        for d in [&self.dir, &self.tmp] {
            open_dir(d)?;
        }
        let lock_path = self.lock_path(origin);
        let lock = crate::io::open_lock(&lock_path).map_err(io(&lock_path))?;
        // Held until `lock` drops at the end of this function (or the
        // process dies): no other thread or process passes this line for
        // this origin meanwhile.
        lock.lock().map_err(io(&lock_path))?;
        let current = self.load(origin)?.map(|r| r.head);
        if current.as_ref() != expected {
            return Err(CasError::Conflict { current });
        }
        if let Some(cur) = current.filter(|c| c.size > new.size) {
            return Err(StateError::Rollback {
                origin: origin.to_owned(),
                current: cur.size,
                new: new.size,
            }
            .into());
        }
        self.write_durable(&self.record_path(origin), note.as_bytes())?;
        drop(lock);
        Ok(())
    }

    /// Temporary file in the store's `tmp` directory, fsync, rename over
    /// `dest`, fsync the directory. A crash before the rename leaves the
    /// old record (and a stray temporary file, ignored); after it, the new one.
    fn write_durable(&self, dest: &Path, bytes: &[u8]) -> Result<(), StateError> {
        crate::io::write_atomic_via(&self.tmp, dest, bytes, OUTPUT_FILE_MODE)
            .map_err(StateError::Write)
    }
}

/// The tree head of a stored record, which must be a checkpoint note of `origin`.
fn parse_record(text: &str, origin: &str) -> Result<TreeHead, RecordError> {
    let note = Note::parse(text.as_bytes())?;
    let cp = Checkpoint::parse(&note.text)?;
    if cp.origin != origin {
        return Err(RecordError::Origin {
            found: cp.origin,
            expected: origin.to_owned(),
        });
    }
    Ok(TreeHead {
        size: cp.size,
        root: cp.root_hash,
    })
}
