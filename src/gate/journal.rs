//! journal: writing a change to the work tree so that a crash at any
//! instant leaves every file all before or all after (spec/gate.md "The
//! apply protocol").
//!
//! ```text
//! STORE/lock      flock held by the one apply, undo or recovery using the store
//! STORE/journal   {"version": 1, "op": "apply"|"undo", "top": work tree,
//!                  "record": transition record id, "receipt": receipt id,
//!                  "envelope": id of the signed envelope's JSON (an object)}
//! ```
//!
//! The journal names a transition record whose objects are in the store
//! (both sides where they exist). Its commit point is the receipt pointer
//! `STORE/receipts/<receipt id>`: once it exists the change is done and a
//! recovery rolls forward (writes `post` where a file is still at `pre`);
//! before, a recovery rolls back (writes `pre` where a file is at `post`).
//! A file at neither is someone else's edit: left alone and named. Every
//! file is written by [`crate::io::write_atomic`] (temporary file beside it,
//! synced, renamed, directory synced); a deletion is an unlink and a
//! directory sync.

use super::inverse::{self, InverseError, Record, Side, Transition};
use super::store::{GateStore, StoreError};
use crate::digest::{Algorithm, Digest};
use crate::io::{Dir, DirError, InputError};
use crate::receipt::canonical::{Value, dagcbor};
use std::collections::BTreeMap;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

/// Most bytes of a journal file.
const MAX_JOURNAL_BYTES: usize = 64 * 1024;

/// Why a change could not be written or recovered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The transition record is unusable.
    #[error(transparent)]
    Inverse(#[from] InverseError),
    /// Another gate process holds the store.
    #[error(
        "another rcpt gate apply or undo is using the store {0} (its lock is held); wait for it"
    )]
    Busy(PathBuf),
    /// The lock file failed.
    #[error("locking the store {path}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The journal is not a journal.
    #[error("the journal {0} is corrupt; nothing was recovered (inspect it, then remove it)")]
    Corrupt(PathBuf),
    /// A file of the work tree could not be read.
    #[error("reading {path}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: InputError,
    },
    /// A file of the work tree could not be written.
    #[error("writing {path}")]
    Write {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not what the change expects (compare and swap).
    #[error(
        "{path}: its content is not the one the change was decided on ({why}); nothing was written"
    )]
    Mismatch {
        /// The path.
        path: String,
        /// What was found.
        why: String,
    },
    /// A path goes through a link or a file.
    #[error("{0}: a parent directory is a symbolic link or a file; nothing is written through it")]
    Parent(String),
}

/// The exclusive lock of a store, released on drop or at process death.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// Lock `store` for this process, or refuse when another holds it.
pub fn lock(store: &GateStore) -> Result<Lock, JournalError> {
    lock_dir(store.dir())
}

fn lock_dir(dir: &Path) -> Result<Lock, JournalError> {
    // The store's directory, never through a link (the lock is its file).
    let path = Dir::open(dir).map_err(StoreError::from)?.join("lock");
    let err = |source| JournalError::Lock {
        path: path.clone(),
        source,
    };
    let file = crate::io::open_lock(&path).map_err(err)?;
    match file.try_lock() {
        Ok(()) => Ok(Lock { _file: file }),
        Err(TryLockError::WouldBlock) => Err(JournalError::Busy(dir.to_path_buf())),
        Err(TryLockError::Error(e)) => Err(err(e)),
    }
}

/// What the journal says is under way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `apply` or `undo`.
    pub op: String,
    /// The work tree's top.
    pub top: PathBuf,
    /// The transition record written.
    pub record: Digest,
    /// The receipt whose pointer is the commit point.
    pub receipt: Digest,
    /// The signed envelope's JSON, an object of the store.
    pub envelope: Digest,
}

fn journal_path(store: &GateStore) -> Result<PathBuf, JournalError> {
    Ok(store.journal_path()?)
}

impl Entry {
    fn to_value(&self) -> Value {
        let text = |s: String| Value::Text(s);
        Value::Map(BTreeMap::from([
            ("version".to_string(), Value::Integer(1)),
            ("op".to_string(), text(self.op.clone())),
            (
                "top".to_string(),
                text(self.top.to_string_lossy().into_owned()),
            ),
            ("record".to_string(), text(self.record.to_string())),
            ("receipt".to_string(), text(self.receipt.to_string())),
            ("envelope".to_string(), text(self.envelope.to_string())),
        ]))
    }

    fn from_bytes(bytes: &[u8]) -> Option<Entry> {
        let value = dagcbor::decode(bytes).ok()?;
        let m = value.as_map().filter(|m| m.len() == 6)?;
        if m.get("version") != Some(&Value::Integer(1)) {
            return None;
        }
        let t = |k: &str| m.get(k).and_then(Value::as_text);
        let d = |k: &str| t(k).and_then(|s| s.parse::<Digest>().ok());
        Some(Entry {
            op: t("op")?.to_string(),
            top: PathBuf::from(t("top")?),
            record: d("record")?,
            receipt: d("receipt")?,
            envelope: d("envelope")?,
        })
    }

    /// Write the journal (atomically, durably).
    pub fn write(&self, store: &GateStore) -> Result<(), JournalError> {
        crate::io::write_atomic_via(
            &store.tmp_dir()?,
            &journal_path(store)?,
            &dagcbor::encode(&self.to_value()),
            0o644,
        )
        .map_err(|e| StoreError::Write(e).into())
    }
}

/// Remove the journal (durably).
pub fn clear(store: &GateStore) -> Result<(), JournalError> {
    let path = journal_path(store)?;
    let write = |source| JournalError::Write {
        path: path.display().to_string(),
        source,
    };
    match std::fs::remove_file(&path) {
        Ok(()) => crate::io::sync_dir(store.dir()).map_err(write),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(write(e)),
    }
}

/// What a recovery did.
#[derive(Debug)]
pub struct Recovered {
    /// The interrupted operation.
    pub entry: Entry,
    /// True when it rolled forward (the receipt was issued), false back.
    pub forward: bool,
    /// Files rewritten.
    pub rewritten: usize,
    /// Files at neither side, left alone.
    pub conflicts: Vec<String>,
}

/// Recover an interrupted apply or undo of the store at `dir`, if its
/// journal says one was under way (nothing is created when it does not).
pub fn recover_at(dir: &Path) -> Result<Option<Recovered>, JournalError> {
    // The store's directory, never through a link: a planted one is named.
    match Dir::open(dir) {
        Ok(d) if d.kind("journal").map_err(StoreError::from)?.is_some() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(StoreError::from(e).into()),
    }
    // Locked before the store is opened (opening empties `tmp/`); a held
    // lock means its holder is alive and finishes its own journal.
    let _lock = match lock_dir(dir) {
        Ok(l) => l,
        Err(JournalError::Busy(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    recover(&GateStore::open(dir)?)
}

/// A store locked for one apply or undo (the lock is released on drop).
#[derive(Debug)]
pub struct Locked {
    store: GateStore,
    _lock: Lock,
}

impl Locked {
    /// The locked store.
    pub fn store(&self) -> &GateStore {
        &self.store
    }
}

/// Open the store at `dir`, lock it, and recover an interrupted apply or
/// undo under that lock: the one recovery an apply or undo runs, its
/// result for the caller to report.
pub fn lock_and_recover(dir: &Path) -> Result<(Locked, Option<Recovered>), JournalError> {
    let store = GateStore::open(dir)?;
    let lock = lock(&store)?;
    let recovered = recover(&store)?;
    Ok((Locked { store, _lock: lock }, recovered))
}

/// [`recover_at`] for an open store whose lock the caller holds.
fn recover(store: &GateStore) -> Result<Option<Recovered>, JournalError> {
    let path = journal_path(store)?;
    let bytes = match crate::io::read_path(&path, MAX_JOURNAL_BYTES) {
        Ok(b) => b,
        Err(InputError::NotFound { .. }) => return Ok(None),
        Err(source) => {
            return Err(JournalError::Read {
                path: path.display().to_string(),
                source,
            });
        }
    };
    let entry = Entry::from_bytes(&bytes).ok_or(JournalError::Corrupt(path))?;
    let record = inverse::load(store, &entry.record)?;
    let forward = store.receipt_record(&entry.receipt)?.is_some();
    let target = if forward {
        record
    } else {
        record.swapped(&record.base)
    };
    let (rewritten, conflicts) = reach(store, &entry.top, &target, &mut || {})?;
    clear(store)?;
    Ok(Some(Recovered {
        entry,
        forward,
        rewritten,
        conflicts,
    }))
}

/// The state of `path` under `top` now: `None` absent, else its side.
pub fn side_now(top: &Path, path: &str) -> Result<Option<Side>, JournalError> {
    // Its directory is reached without following a link.
    let Some((dir, name)) = parent_dir(top, path, false)? else {
        return Ok(None);
    };
    let full = dir.join(name);
    let meta = match std::fs::symlink_metadata(&full) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(JournalError::Write {
                path: path.to_string(),
                source,
            });
        }
    };
    if !meta.is_file() {
        return Err(JournalError::Mismatch {
            path: path.to_string(),
            why: "not a regular file".into(),
        });
    }
    let reader = crate::fresh::Reader::new(top, crate::receipt::Substrate::Filesystem);
    let digest = reader
        .digest(path, Algorithm::Blake3)
        .map_err(|e| JournalError::Mismatch {
            path: path.to_string(),
            why: e.to_string(),
        })?;
    Ok(Some(Side {
        digest,
        executable: executable(&meta),
    }))
}

#[cfg(unix)]
fn executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_meta: &std::fs::Metadata) -> bool {
    false
}

/// Compare and swap, the compare: every file of `record` is at `pre`.
pub fn check_pre(top: &Path, record: &Record) -> Result<(), JournalError> {
    for t in &record.files {
        let now = side_now(top, &t.path)?;
        if now != t.pre {
            return Err(JournalError::Mismatch {
                path: t.path.clone(),
                why: describe(now.as_ref(), t.pre.as_ref()),
            });
        }
    }
    Ok(())
}

fn describe(now: Option<&Side>, want: Option<&Side>) -> String {
    let show = |s: Option<&Side>| {
        s.map_or("absent".to_string(), |s| {
            format!(
                "{}{}",
                s.digest,
                if s.executable { " (executable)" } else { "" }
            )
        })
    };
    format!("found {}, expected {}", show(now), show(want))
}

/// Bring every file of `record` to its `post` side where it is at `pre`
/// (a file already at `post` is left; one at neither is a conflict, left
/// alone). Removals first, deepest first, then writes; `step` is called
/// after each file made durable. Files rewritten, and the conflicts.
pub fn reach(
    store: &GateStore,
    top: &Path,
    record: &Record,
    step: &mut dyn FnMut(),
) -> Result<(usize, Vec<String>), JournalError> {
    let mut removals: Vec<&Transition> = record.files.iter().filter(|t| t.post.is_none()).collect();
    removals.sort_by_key(|t| std::cmp::Reverse(t.path.matches('/').count()));
    let writes = record.files.iter().filter(|t| t.post.is_some());
    let (mut rewritten, mut conflicts) = (0, Vec::new());
    for t in removals.into_iter().chain(writes) {
        remove_strays(top, &t.path);
        let now = side_now(top, &t.path).unwrap_or(Some(Side {
            digest: Digest::blake3(b"\0not a file"),
            executable: false,
        }));
        if now == t.post {
            continue;
        }
        if now != t.pre {
            conflicts.push(t.path.clone());
            continue;
        }
        write_side(store, top, t)?;
        rewritten += 1;
        step();
    }
    Ok((rewritten, conflicts))
}

/// Write the `post` side of `t` (remove the file when it is absent). The
/// file's directory is reached (and made) without following a link.
fn write_side(store: &GateStore, top: &Path, t: &Transition) -> Result<(), JournalError> {
    let err = |source| JournalError::Write {
        path: t.path.clone(),
        source,
    };
    let Some(post) = t.post else {
        if let Some((dir, name)) = parent_dir(top, &t.path, false)? {
            dir.remove_file(name).map_err(|e| err(e.into_io()))?;
            dir.sync().map_err(|e| err(e.into_io()))?;
        }
        remove_empty_parents(top, &t.path);
        return Ok(());
    };
    let bytes = store.get(&post.digest)?;
    let Some((dir, name)) = parent_dir(top, &t.path, true)? else {
        return Err(JournalError::Parent(t.path.clone()));
    };
    let full = dir.join(name);
    let mode = if post.executable { 0o755 } else { 0o644 };
    crate::io::write_atomic(&full, &bytes, mode).map_err(|e| JournalError::Write {
        path: t.path.clone(),
        source: std::io::Error::other(crate::io::error_chain(&e)),
    })?;
    crate::io::set_mode(&full, mode).map_err(err)
}

/// The directory holding `path` under `top` and the file's name, reached
/// one component at a time without following a link (made, mode 0777
/// before the umask as git makes them, when `create`); `None` when a
/// directory on the way is absent. A link or a file on the way is
/// [`JournalError::Parent`].
fn parent_dir<'p>(
    top: &Path,
    path: &'p str,
    create: bool,
) -> Result<Option<(Dir, &'p str)>, JournalError> {
    let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
    let opened = Dir::open(top).and_then(|d| d.descend(parent, create.then_some(0o777)));
    match opened {
        Ok(d) => Ok(Some((d, name))),
        Err(e) if e.is_not_found() && !create => Ok(None),
        Err(DirError::Link { .. } | DirError::NotADirectory { .. } | DirError::BadName { .. }) => {
            Err(JournalError::Parent(path.to_string()))
        }
        Err(e) => Err(JournalError::Write {
            path: path.to_string(),
            source: e.into_io(),
        }),
    }
}

/// Temporary files an interrupted atomic write left beside `path` (in its
/// directory's handle: a link there is never followed).
fn remove_strays(top: &Path, path: &str) {
    let Ok(Some((dir, name))) = parent_dir(top, path, false) else {
        return;
    };
    let prefix = format!(".{name}.");
    let _ = dir.remove_entries(|n, kind| {
        let n = n.to_string_lossy();
        kind != crate::io::FileKind::Directory && n.starts_with(&prefix) && n.ends_with(".rcpt-tmp")
    });
}

/// Remove directories left empty above `path`, up to `top`, as git does
/// (each removed from its parent's handle, never through a link).
fn remove_empty_parents(top: &Path, path: &str) {
    let mut rel = path;
    while let Some((parent, _)) = rel.rsplit_once('/') {
        let Ok(Some((dir, name))) = parent_dir(top, parent, false) else {
            break;
        };
        if !dir.remove_empty_dir(name).unwrap_or(false) {
            break;
        }
        rel = parent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(bytes: &[u8]) -> Side {
        Side {
            digest: Digest::blake3(bytes),
            executable: false,
        }
    }

    /// A work-tree directory the journal writes in, removes from or cleans
    /// strays beside, made a link to somewhere else: nothing there is
    /// written or removed (the stray included), the file is named as one at
    /// neither side. A rewrite, a removal and a creation, each through the link.
    #[cfg(unix)]
    #[test]
    fn recovery_never_writes_removes_or_cleans_through_a_linked_directory() {
        let t = tempfile::tempdir().unwrap();
        let store = GateStore::open(&t.path().join("store")).unwrap();
        let (top, outside) = (t.path().join("top"), t.path().join("outside"));
        std::fs::create_dir_all(&top).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let (old, new) = (b"old\n".as_slice(), b"new\n".as_slice());
        store.put(old).unwrap();
        store.put(new).unwrap();
        for (name, bytes) in [
            ("f.txt", old),
            (".f.txt.0123.rcpt-tmp", b"stray".as_slice()),
        ] {
            std::fs::write(outside.join(name), bytes).unwrap();
        }
        std::os::unix::fs::symlink(&outside, top.join("sub")).unwrap();
        let cases = [
            (Some(side(old)), Some(side(new))),
            (Some(side(old)), None),
            (None, Some(side(new))),
        ];
        for (pre, post) in cases {
            let record = Record {
                base: "0".repeat(40),
                files: vec![Transition {
                    path: "sub/f.txt".into(),
                    pre,
                    post,
                }],
            };
            // Left alone and named (a file at neither side), never written.
            let (rewritten, conflicts) = reach(&store, &top, &record, &mut || {}).unwrap();
            assert_eq!((rewritten, conflicts), (0, vec!["sub/f.txt".to_string()]));
            assert_eq!(std::fs::read(outside.join("f.txt")).unwrap(), old);
            assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 2);
        }
        assert!(matches!(
            side_now(&top, "sub/f.txt"),
            Err(JournalError::Parent(_))
        ));
    }
}
