//! state: a monitor's directory (spec/monitor.md "State").
//!
//! ```text
//! DIR/lock                        flock held by the one monitor using DIR
//! DIR/tmp/                        temporary files of the atomic writer
//! DIR/origins/<hex>.json          per origin: last checkpoint checked, next index
//! DIR/evidence/<hex>/<what>-<m>-<n>/   old.checkpoint, new.checkpoint, proof.json
//! DIR/alarms/<id>.json            an alarm, kept until acknowledged ([`super::alarms`])
//! DIR/acks/<ns>-<rand>.json       an acknowledgement, kept for good
//! ```
//!
//! `<hex>` is SHA-256 of the origin. Every file is written by the one
//! atomic no-follow writer ([`crate::io::write_atomic_via`]) and read by the
//! capped reader: a crash leaves the old state or the new one, whole.

use crate::io::{Dir, DirError, InputError, OUTPUT_FILE_MODE, OutputError};
use crate::limits::MAX_MONITOR_STATE_BYTES;
use serde::{Deserialize, Serialize};
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

/// `hex(SHA-256(origin))`: a safe file name for an origin.
fn origin_hash(origin: &str) -> String {
    use sha2::Digest as _;
    crate::digest::to_hex(&sha2::Sha256::digest(origin.as_bytes()))
}

/// Format number of a state file.
const STATE_FORMAT: u32 = 1;

/// What the monitor keeps for one origin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Saved {
    /// Always [`STATE_FORMAT`].
    pub format: u32,
    /// The log's origin.
    pub origin: String,
    /// The last checkpoint checked (verified, consistent with the one before).
    pub checkpoint: String,
    /// The next entry to scan: every entry below it was reported.
    pub next_index: u64,
}

impl Saved {
    /// A record for `origin` at `checkpoint`, scanned up to `next_index`.
    pub fn new(origin: &str, checkpoint: &str, next_index: u64) -> Saved {
        Saved {
            format: STATE_FORMAT,
            origin: origin.to_string(),
            checkpoint: checkpoint.to_string(),
            next_index,
        }
    }
}

/// Why the state directory could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// A directory or the lock could not be made.
    #[error("monitor state {}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Another monitor holds the lock.
    #[error(
        "another monitor is using the state directory {} (lock {} is held); \
         one monitor per state directory", dir.display(), dir.join("lock").display()
    )]
    Locked {
        /// The directory.
        dir: PathBuf,
    },
    /// A state file could not be read.
    #[error("monitor state")]
    Read(#[source] InputError),
    /// A state file could not be written.
    #[error("monitor state")]
    Write(#[source] OutputError),
    /// A state file that is not what the monitor wrote.
    #[error("monitor state {} is corrupt: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A state file that is not the JSON the monitor writes, or a state
    /// that could not be put as JSON.
    #[error("monitor state {} is corrupt", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

/// An open state directory, locked for this process.
#[derive(Debug)]
pub struct StateDir {
    pub(super) dir: PathBuf,
    tmp: PathBuf,
    _lock: File,
}

/// Mode of the state directories (before the umask).
pub(super) const STATE_DIR_MODE: u32 = 0o755;

/// A directory of the state that is a link, not a directory, or unusable.
pub(super) fn dir_err(e: DirError) -> StateError {
    StateError::Io {
        path: e.path().to_path_buf(),
        source: e.into_io(),
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl StateDir {
    /// Open (creating it if absent) and lock `dir`; a second monitor gets
    /// [`StateError::Locked`] at once.
    /// `dir`, `tmp/` and `origins/` are opened without following a link
    /// ([`Dir`]): a link planted in place of one is refused, naming it.
    pub fn open(dir: &Path) -> Result<StateDir, StateError> {
        let root = Dir::create(dir, STATE_DIR_MODE).map_err(dir_err)?;
        let tmp_dir = root
            .child_or_create("tmp", STATE_DIR_MODE)
            .map_err(dir_err)?;
        root.child_or_create("origins", STATE_DIR_MODE)
            .map_err(dir_err)?;
        let tmp = tmp_dir.path().to_path_buf();
        let lock_path = root.join("lock");
        let lock = crate::io::open_lock(&lock_path).map_err(io_err(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StateError::Locked {
                    dir: dir.to_path_buf(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
        }
        // Temporary files a killed monitor left are never renamed: drop
        // them, on the handle of `tmp/` (a link in it is removed, not followed).
        tmp_dir.remove_entries(|_, _| true).map_err(dir_err)?;
        Ok(StateDir {
            dir: dir.to_path_buf(),
            tmp,
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The state file of `origin`.
    pub fn origin_path(&self, origin: &str) -> PathBuf {
        self.dir
            .join("origins")
            .join(format!("{}.json", origin_hash(origin)))
    }

    /// The saved state of `origin`, if any.
    pub fn load(&self, origin: &str) -> Result<Option<Saved>, StateError> {
        let path = self.origin_path(origin);
        let corrupt = |detail: String| StateError::Corrupt {
            path: path.clone(),
            detail,
        };
        let read =
            crate::io::read_state_file(&path, MAX_MONITOR_STATE_BYTES, corrupt, StateError::Read);
        let Some(bytes) = read? else {
            return Ok(None);
        };
        let saved: Saved = serde_json::from_slice(&bytes).map_err(|source| StateError::Json {
            path: path.clone(),
            source,
        })?;
        if saved.format != STATE_FORMAT || saved.origin != origin {
            return Err(corrupt(format!(
                "format {} for origin {:?}, expected format {STATE_FORMAT} for {origin:?}",
                saved.format, saved.origin
            )));
        }
        Ok(Some(saved))
    }

    /// Replace the state of its origin, atomically and durably.
    pub fn save(&self, saved: &Saved) -> Result<(), StateError> {
        let mut json = serde_json::to_vec_pretty(saved).map_err(|source| StateError::Json {
            path: self.origin_path(&saved.origin),
            source,
        })?;
        json.push(b'\n');
        self.write(&self.origin_path(&saved.origin), &json)
    }

    /// Keep evidence files (name, bytes) under
    /// `DIR/evidence/<hex>/<what>-<old>-<new>/`; returns that directory.
    pub fn keep_evidence(
        &self,
        origin: &str,
        what: &str,
        sizes: (u64, u64),
        files: &[(&str, &[u8])],
    ) -> Result<PathBuf, StateError> {
        let rel = Path::new("evidence")
            .join(origin_hash(origin))
            .join(format!("{what}-{}-{}", sizes.0, sizes.1));
        let dir = Dir::open(&self.dir)
            .and_then(|d| d.descend(&rel, Some(STATE_DIR_MODE)))
            .map_err(dir_err)?
            .path()
            .to_path_buf();
        for (name, bytes) in files {
            self.write(&dir.join(name), bytes)?;
        }
        Ok(dir)
    }

    pub(super) fn write(&self, path: &Path, bytes: &[u8]) -> Result<(), StateError> {
        // `tmp/` and the file's directory again, never through a link
        // planted since the open.
        Dir::open(&self.tmp).map_err(dir_err)?;
        if let Some(parent) = path.parent() {
            Dir::open(parent).map_err(dir_err)?;
        }
        crate::io::write_atomic_via(&self.tmp, path, bytes, OUTPUT_FILE_MODE)
            .map_err(StateError::Write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_monitor_per_directory_and_state_round_trips() {
        let tmp = std::env::temp_dir().join(format!("rcpt-monitor-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let dir = StateDir::open(&tmp).unwrap();
        assert!(matches!(
            StateDir::open(&tmp),
            Err(StateError::Locked { .. })
        ));
        assert_eq!(dir.load("o").unwrap(), None);
        let s = Saved::new("o", "note\n", 7);
        dir.save(&s).unwrap();
        assert_eq!(dir.load("o").unwrap(), Some(s));
        std::fs::write(dir.origin_path("p"), b"{}").unwrap();
        // Not the JSON the monitor writes: corrupt, the JSON error kept
        // as the cause (#33 item 6), its text said once by the chain.
        let e = dir.load("p").unwrap_err();
        assert!(matches!(e, StateError::Json { .. }), "{e:?}");
        assert!(e.to_string().ends_with("is corrupt"), "{e}");
        let cause = std::error::Error::source(&e).unwrap();
        assert!(cause.is::<serde_json::Error>(), "{cause:?}");
        assert!(
            crate::io::error_chain(&e).contains("missing field"),
            "{e:?}"
        );
        drop(dir);
        StateDir::open(&tmp).unwrap();
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
