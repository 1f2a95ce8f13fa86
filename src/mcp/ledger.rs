//! ledger: each step's decision made durable before the call is forwarded,
//! and its receipt before the answer is relayed (spec/gate-mcp.md "Crash
//! safety").
//!
//! ```text
//! STORE/mcp/sessions/<session>.lock   flock held by the live proxy of that session
//! STORE/mcp/pending/<session>-<seq>   one step: {"version": 1, "state": "decided"|"issued",
//!                                      "step": STEP, "issued": null | ISSUED,
//!                                      "preimages": [bytes] (only when some are carried)}
//!                                     then, once issued, the trailer
//!                                      {"version": 1, "issued_for": "blake3:<decided bytes>",
//!                                       "issued": ISSUED}
//! ISSUED = {"envelope", "receipt_id", "evidence", "inverse"}
//! ```
//!
//! A step's file is written (atomically, synced, directory synced) in
//! state `decided`, its small pre-images in it ([`MAX_CARRIED_PREIMAGE_BYTES`]),
//! before its call reaches the server. Its receipt is appended as the
//! trailer (one data sync) before the answer reaches the client; a trailer
//! cut short by a crash (not whole, or not naming the decided bytes) is no
//! receipt, and the step reads back as decided. The file is removed once
//! the store holds the pre-images and the receipt's objects and the
//! receipt is logged. A file whose session lock is free belongs to a proxy
//! that died: its next start finishes it ([`orphans`]), rewriting the file
//! whole (`state: "issued"`). spec/gate-mcp.md "Crash safety: the ledger".

use crate::digest::Digest;
use crate::gate::inverse::Side;
use crate::gate::store::GateStore;
use crate::io::InputError;
use crate::receipt::canonical::{Value, dagcbor};
use crate::receipt::{Replay, combine};
use std::collections::BTreeMap;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

/// Largest pending file read back (the arguments of one call are in it).
pub const MAX_PENDING_BYTES: usize = 2 * super::MAX_FRAME_BYTES + MAX_CARRIED_PREIMAGE_BYTES;
/// Most bytes of pre-images one step carries in its pending file (the
/// step's existing files together, each whole); beyond, a pre-image is
/// stored as an object in the step's commit. Carried, a pre-image costs
/// the step's path no file and no directory sync of its own.
pub const MAX_CARRIED_PREIMAGE_BYTES: usize = 64 * 1024;
/// Most pending files one start recovers (the rest at the next start).
pub const MAX_RECOVERED_STEPS: usize = 100_000;

/// Why the ledger failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// A directory or lock could not be made.
    #[error("preparing {path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A pending file could not be written.
    #[error("writing the pending step {0}")]
    Write(String, #[source] crate::io::OutputError),
    /// A group of staged steps could not be made durable.
    #[error("making the steps durable")]
    Commit(#[source] crate::io::OutputError),
    /// A pending file could not be read.
    #[error("reading the pending step {0}")]
    Read(String, #[source] InputError),
    /// A pending file is not one.
    #[error("the pending step {0} is corrupt: {1}")]
    Corrupt(String, String),
    /// A pending file is not DAG-CBOR.
    #[error("the pending step {0} is corrupt")]
    Decode(String, #[source] dagcbor::DecodeError),
    /// A directory of the ledger is a link or could not be opened.
    #[error(transparent)]
    Dir(#[from] crate::io::DirError),
}

/// One file of a step: the pointer, the path relative to `/`, its state
/// before the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRecord {
    /// The JSON Pointer that named it.
    pub pointer: String,
    /// The canonical path relative to `/`.
    pub path: String,
    /// Its state before (`None`: absent).
    pub pre: Option<Side>,
}

/// Everything a step's receipt needs, kept from the decision on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepRecord {
    /// `<session>-<seq>`.
    pub id: String,
    /// When it was decided (Unix seconds).
    pub decided_at: i64,
    /// The server's name.
    pub server: String,
    /// The tool's name.
    pub tool: String,
    /// Its definition's digest as listed (`None`: not listed).
    pub def: Option<Digest>,
    /// The arguments as received (JSON text).
    pub arguments: String,
    /// `sha256:` over their RFC 8785 form.
    pub arguments_digest: Digest,
    /// The change's identity.
    pub change_id: Digest,
    /// The policy's identity.
    pub policy_id: Digest,
    /// The receipts' replay class.
    pub replay: Replay,
    /// The files, sorted by path.
    pub files: Vec<FileRecord>,
    /// True when every pre-image is in the store (an inverse can be built).
    pub reversible: bool,
    /// Evidence the decider added (null: none).
    pub evidence: Value,
}

fn t(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

fn side_value(side: Option<&Side>) -> Value {
    side.map_or(Value::Null, |s| {
        Value::Map(BTreeMap::from([
            ("digest".to_string(), t(s.digest.to_string())),
            ("executable".to_string(), Value::Bool(s.executable)),
        ]))
    })
}

fn side_from(v: Option<&Value>) -> Option<Option<Side>> {
    match v? {
        Value::Null => Some(None),
        Value::Map(m) => Some(Some(Side {
            digest: m.get("digest")?.as_text()?.parse().ok()?,
            executable: matches!(m.get("executable")?, Value::Bool(true)),
        })),
        _ => None,
    }
}

/// The replay class as the receipt reads it, in its normal form.
fn replay_from(v: &Value) -> Option<Replay> {
    let (proposal, execution) = Replay::from_value(&v.borrow()).ok()?.stages();
    Some(combine(proposal, execution))
}

impl StepRecord {
    /// As a data-model value.
    pub fn to_value(&self) -> Value {
        let files = self
            .files
            .iter()
            .map(|f| {
                Value::Map(BTreeMap::from([
                    ("pointer".to_string(), t(f.pointer.clone())),
                    ("path".to_string(), t(f.path.clone())),
                    ("pre".to_string(), side_value(f.pre.as_ref())),
                ]))
            })
            .collect();
        let def = self.def.map_or(Value::Null, |d| t(d.to_string()));
        Value::Map(BTreeMap::from([
            ("id".to_string(), t(self.id.clone())),
            ("decided_at".to_string(), Value::Integer(self.decided_at)),
            ("server".to_string(), t(self.server.clone())),
            ("tool".to_string(), t(self.tool.clone())),
            ("def".to_string(), def),
            ("arguments".to_string(), t(self.arguments.clone())),
            (
                "arguments_digest".to_string(),
                t(self.arguments_digest.to_string()),
            ),
            ("change_id".to_string(), t(self.change_id.to_string())),
            ("policy_id".to_string(), t(self.policy_id.to_string())),
            ("replay".to_string(), self.replay.to_value()),
            ("files".to_string(), Value::Array(files)),
            ("reversible".to_string(), Value::Bool(self.reversible)),
            ("evidence".to_string(), self.evidence.clone()),
        ]))
    }

    /// Read a record back.
    pub fn from_value(v: &Value) -> Option<StepRecord> {
        let m = v.as_map()?;
        let text = |k: &str| m.get(k).and_then(Value::as_text).map(str::to_string);
        let digest = |k: &str| text(k).and_then(|s| s.parse::<Digest>().ok());
        let Some(Value::Array(list)) = m.get("files") else {
            return None;
        };
        let files = list
            .iter()
            .map(|f| {
                let f = f.as_map()?;
                Some(FileRecord {
                    pointer: f.get("pointer")?.as_text()?.to_string(),
                    path: f.get("path")?.as_text()?.to_string(),
                    pre: side_from(f.get("pre"))?,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(StepRecord {
            id: text("id")?,
            decided_at: match m.get("decided_at")? {
                Value::Integer(n) => *n,
                _ => return None,
            },
            server: text("server")?,
            tool: text("tool")?,
            def: match m.get("def")? {
                Value::Null => None,
                _ => Some(digest("def")?),
            },
            arguments: text("arguments")?,
            arguments_digest: digest("arguments_digest")?,
            change_id: digest("change_id")?,
            policy_id: digest("policy_id")?,
            replay: replay_from(m.get("replay")?)?,
            files,
            reversible: matches!(m.get("reversible")?, Value::Bool(true)),
            evidence: m.get("evidence")?.clone(),
        })
    }
}

/// The receipt of a step, signed, with what the store must keep of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// The DSSE envelope's JSON.
    pub envelope: String,
    /// The receipt's id.
    pub receipt_id: Digest,
    /// The evidence record (the admit proof, or a refusal's record).
    pub evidence: Value,
    /// The inverse record, when the step is reversible and applied.
    pub inverse: Option<Value>,
}

/// One pending step as read back.
#[derive(Clone, Debug)]
pub struct Pending {
    /// Its file.
    pub path: PathBuf,
    /// The step.
    pub step: StepRecord,
    /// Its receipt, once issued.
    pub issued: Option<Issued>,
    /// The pre-images carried in the file (stored by the finisher).
    pub carried: Vec<Vec<u8>>,
}

impl Issued {
    fn to_value(&self) -> Value {
        Value::Map(BTreeMap::from([
            ("envelope".to_string(), t(self.envelope.clone())),
            ("receipt_id".to_string(), t(self.receipt_id.to_string())),
            ("evidence".to_string(), self.evidence.clone()),
            (
                "inverse".to_string(),
                self.inverse.clone().unwrap_or(Value::Null),
            ),
        ]))
    }

    fn from_value(v: &Value) -> Option<Issued> {
        let i = v.as_map().filter(|m| m.len() == 4)?;
        Some(Issued {
            envelope: i.get("envelope")?.as_text()?.to_string(),
            receipt_id: i.get("receipt_id")?.as_text()?.parse().ok()?,
            evidence: i.get("evidence")?.clone(),
            inverse: match i.get("inverse")? {
                Value::Null => None,
                v => Some(v.clone()),
            },
        })
    }
}

impl Pending {
    fn to_value(&self) -> Value {
        let issued = self.issued.as_ref().map_or(Value::Null, Issued::to_value);
        let state = if self.issued.is_some() {
            "issued"
        } else {
            "decided"
        };
        let mut m = BTreeMap::from([
            ("version".to_string(), Value::Integer(1)),
            ("state".to_string(), t(state)),
            ("step".to_string(), self.step.to_value()),
            ("issued".to_string(), issued),
        ]);
        if !self.carried.is_empty() {
            let carried = self.carried.iter().map(|b| Value::Bytes(b.clone()));
            m.insert("preimages".to_string(), Value::Array(carried.collect()));
        }
        Value::Map(m)
    }

    fn from_value(path: PathBuf, v: &Value) -> Option<Pending> {
        let m = v.as_map()?;
        let carried = match m.get("preimages") {
            None if m.len() == 4 => Vec::new(),
            Some(Value::Array(a)) if m.len() == 5 && !a.is_empty() => a
                .iter()
                .map(|b| match b {
                    Value::Bytes(b) => Some(b.clone()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?,
            _ => return None,
        };
        if m.get("version") != Some(&Value::Integer(1)) {
            return None;
        }
        let step = StepRecord::from_value(m.get("step")?)?;
        let issued = match (m.get("state")?.as_text()?, m.get("issued")?) {
            ("decided", Value::Null) => None,
            ("issued", v) => Some(Issued::from_value(v)?),
            _ => return None,
        };
        Some(Pending {
            path,
            step,
            issued,
            carried,
        })
    }

    /// The file as decided (no receipt): the bytes a trailer names.
    fn decided_bytes(&self) -> Vec<u8> {
        let decided = Pending {
            issued: None,
            ..self.clone()
        };
        dagcbor::encode(&decided.to_value())
    }

    /// Stage the receipt as the trailer appended to the decided file: one
    /// data sync at the commit, no rename and no directory sync.
    pub fn stage_issued(&self, batch: &mut crate::io::Batch) -> Result<(), LedgerError> {
        let Some(issued) = &self.issued else {
            return Ok(());
        };
        let trailer = Value::Map(BTreeMap::from([
            ("version".to_string(), Value::Integer(1)),
            (
                "issued_for".to_string(),
                t(Digest::blake3(&self.decided_bytes()).to_string()),
            ),
            ("issued".to_string(), issued.to_value()),
        ]));
        batch
            .append(&self.path, &dagcbor::encode(&trailer))
            .map_err(|e| LedgerError::Write(self.path.display().to_string(), e))
    }

    /// The receipt a trailer holds, when it is whole and follows `decided`.
    fn trailer_of(decided: &[u8], tail: &[u8]) -> Option<Issued> {
        let v = dagcbor::decode(tail).ok()?;
        let m = v.as_map().filter(|m| m.len() == 3)?;
        if m.get("version") != Some(&Value::Integer(1)) {
            return None;
        }
        let named: Digest = m.get("issued_for")?.as_text()?.parse().ok()?;
        if named != Digest::blake3(decided) {
            return None;
        }
        Issued::from_value(m.get("issued")?)
    }

    /// Write this state (atomically, durably).
    pub fn write(&self, tmp: &Path) -> Result<(), LedgerError> {
        let mut batch = crate::io::Batch::new();
        self.stage(&mut batch, tmp)?;
        batch
            .commit()
            .map_err(|e| LedgerError::Write(self.path.display().to_string(), e))
    }

    /// Stage this state in `batch`: durable when the batch is committed.
    pub fn stage(&self, batch: &mut crate::io::Batch, tmp: &Path) -> Result<(), LedgerError> {
        let bytes = dagcbor::encode(&self.to_value());
        batch
            .write_atomic_via(tmp, &self.path, &bytes, 0o600)
            .map_err(|e| LedgerError::Write(self.path.display().to_string(), e))
    }

    /// Read a pending file.
    pub fn read(path: &Path) -> Result<Pending, LedgerError> {
        let name = path.display().to_string();
        let bytes = crate::io::read_path(path, MAX_PENDING_BYTES)
            .map_err(|e| LedgerError::Read(name.clone(), e))?;
        let (head, tail) = match dagcbor::decode(&bytes) {
            Err(dagcbor::DecodeError::TrailingBytes { offset, .. }) => bytes.split_at(offset),
            _ => (&bytes[..], &[][..]),
        };
        let value = dagcbor::decode(head).map_err(|e| LedgerError::Decode(name.clone(), e))?;
        let corrupt = |why: &str| LedgerError::Corrupt(name.clone(), why.to_string());
        let mut p = Pending::from_value(path.to_path_buf(), &value)
            .ok_or_else(|| corrupt("not a pending step"))?;
        if !tail.is_empty() {
            if p.issued.is_some() {
                return Err(corrupt("bytes after an issued step"));
            }
            // A torn trailer is no receipt: the step is still decided.
            p.issued = Pending::trailer_of(head, tail);
        }
        Ok(p)
    }

    /// Remove the file (the step is finished); durable once its
    /// directory is synced ([`Pending::sync_removals`]).
    pub fn unlink(&self) -> Result<(), LedgerError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(LedgerError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// Make the removals of pending files durable: one sync of their directory.
    pub fn sync_removals(&self) -> Result<(), LedgerError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        crate::io::sync_dir(dir).map_err(|source| LedgerError::Io {
            path: dir.to_path_buf(),
            source,
        })
    }

    /// Remove the file (the step is finished), durably.
    pub fn remove(&self) -> Result<(), LedgerError> {
        self.unlink()?;
        self.sync_removals()
    }
}

/// The ledger of one live session.
#[derive(Debug)]
pub struct Ledger {
    pending: PathBuf,
    tmp: PathBuf,
    session: String,
    seq: std::sync::atomic::AtomicU64,
    _lock: File,
}

/// `rel` under the store's directory, made where missing, every directory
/// opened without following a link (a link there is refused, never used).
fn mkdirs(store: &GateStore, rel: &str) -> Result<(), LedgerError> {
    crate::io::Dir::open(store.dir())?.descend(rel, Some(crate::io::PRIVATE_DIR_MODE))?;
    Ok(())
}

impl Ledger {
    /// Open a new session's ledger in `store`, holding its lock.
    pub fn open(store: &GateStore) -> Result<Ledger, LedgerError> {
        let base = store.dir().join("mcp");
        let (pending, sessions) = (base.join("pending"), base.join("sessions"));
        mkdirs(store, "mcp/pending")?;
        mkdirs(store, "mcp/sessions")?;
        let mut raw = [0u8; 8];
        crate::io::random_bytes(&mut raw).map_err(|source| LedgerError::Io {
            path: sessions.clone(),
            source,
        })?;
        let session = crate::digest::to_hex(&raw);
        let path = sessions.join(format!("{session}.lock"));
        let io = |source| LedgerError::Io {
            path: path.clone(),
            source,
        };
        let lock = crate::io::open_lock(&path).map_err(io)?;
        lock.try_lock().map_err(|e| io(std::io::Error::from(e)))?;
        Ok(Ledger {
            pending,
            tmp: store.dir().join("tmp"),
            session,
            seq: std::sync::atomic::AtomicU64::new(0),
            _lock: lock,
        })
    }

    /// This session's id.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The temporary directory of atomic writes.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// A fresh step id and the path of its pending file.
    pub fn next(&self) -> (String, PathBuf) {
        let n = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{}-{n:012}", self.session);
        let path = self.pending.join(&id);
        (id, path)
    }
}

/// The pending steps of dead sessions in `store`, each with the lock of
/// its session held (released when the returned locks are dropped).
pub fn orphans(store: &GateStore) -> Result<(Vec<Pending>, Vec<File>), LedgerError> {
    let base = store.dir().join("mcp");
    let dir = base.join("pending");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(source) => return Err(LedgerError::Io { path: dir, source }),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let (mut found, mut locks) = (Vec::new(), Vec::new());
    let mut dead: BTreeMap<String, bool> = BTreeMap::new();
    for name in names.into_iter().take(MAX_RECOVERED_STEPS) {
        let session = name.split('-').next().unwrap_or_default().to_string();
        let alive = match dead.get(&session) {
            Some(d) => !*d,
            None => {
                let lock_path = base.join("sessions").join(format!("{session}.lock"));
                let lock = crate::io::open_lock(&lock_path).map_err(|source| LedgerError::Io {
                    path: lock_path.clone(),
                    source,
                })?;
                let free = match lock.try_lock() {
                    Ok(()) => true,
                    Err(TryLockError::WouldBlock) => false,
                    Err(TryLockError::Error(source)) => {
                        return Err(LedgerError::Io {
                            path: lock_path,
                            source,
                        });
                    }
                };
                if free {
                    locks.push(lock);
                }
                dead.insert(session, free);
                !free
            }
        };
        if !alive {
            found.push(Pending::read(&dir.join(&name))?);
        }
    }
    Ok((found, locks))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn record(id: &str) -> StepRecord {
        StepRecord {
            id: id.into(),
            decided_at: 1_700_000_000,
            server: "fs".into(),
            tool: "write_file".into(),
            def: Some(Digest::sha256(b"def")),
            arguments: r#"{"path":"/w/a","content":"x"}"#.into(),
            arguments_digest: Digest::sha256(b"args"),
            change_id: Digest::blake3(b"c"),
            policy_id: Digest::blake3(b"p"),
            replay: combine(crate::receipt::Stage::Llm, crate::receipt::Stage::Unknown),
            files: vec![FileRecord {
                pointer: "/path".into(),
                path: "w/a".into(),
                pre: Some(Side {
                    digest: Digest::blake3(b"old"),
                    executable: true,
                }),
            }],
            reversible: true,
            evidence: Value::Null,
        }
    }

    /// A new decided step of `live`, carrying `carried`.
    fn new_step(live: &Ledger, carried: Vec<Vec<u8>>) -> Pending {
        let (id, path) = live.next();
        Pending {
            path,
            step: record(&id),
            issued: None,
            carried,
        }
    }

    #[test]
    fn a_receipt_is_appended_and_a_torn_trailer_is_no_receipt() {
        let dir = tempfile::tempdir().unwrap();
        let store = GateStore::open(dir.path()).unwrap();
        let live = Ledger::open(&store).unwrap();
        let mut p = new_step(&live, vec![b"the file before".to_vec()]);
        p.write(live.tmp()).unwrap();
        let decided = std::fs::read(&p.path).unwrap();
        p.issued = Some(Issued {
            envelope: "{}".into(),
            receipt_id: Digest::blake3(b"r"),
            evidence: Value::Integer(1),
            inverse: None,
        });
        let mut batch = crate::io::Batch::new();
        p.stage_issued(&mut batch).unwrap();
        batch.commit().unwrap();
        let whole = std::fs::read(&p.path).unwrap();
        assert!(whole.len() > decided.len() && whole.starts_with(&decided));
        let back = Pending::read(&p.path).unwrap();
        assert_eq!(back.issued, p.issued);
        assert_eq!(back.carried, p.carried);
        // Every cut of the trailer, and zeros where it should be (a size
        // made durable before the data), read back as decided.
        for cut in decided.len()..whole.len() {
            std::fs::write(&p.path, &whole[..cut]).unwrap();
            let back = Pending::read(&p.path).unwrap();
            assert!(back.issued.is_none(), "cut at {cut}");
            assert_eq!(back.step, p.step);
        }
        let mut zeroed = decided.clone();
        zeroed.resize(whole.len(), 0);
        std::fs::write(&p.path, &zeroed).unwrap();
        assert!(Pending::read(&p.path).unwrap().issued.is_none());
        // A whole trailer after another step's decision is no receipt of it.
        let other = new_step(&live, Vec::new());
        other.write(live.tmp()).unwrap();
        let mut moved = std::fs::read(&other.path).unwrap();
        moved.extend_from_slice(&whole[decided.len()..]);
        std::fs::write(&other.path, &moved).unwrap();
        assert!(Pending::read(&other.path).unwrap().issued.is_none());
        // After a file rewritten whole as issued, bytes are corrupt.
        p.write(live.tmp()).unwrap();
        let mut after = std::fs::read(&p.path).unwrap();
        after.extend_from_slice(&whole[decided.len()..]);
        std::fs::write(&p.path, &after).unwrap();
        assert!(matches!(
            Pending::read(&p.path),
            Err(LedgerError::Corrupt(..))
        ));
    }

    #[test]
    fn pending_steps_round_trip_and_only_dead_sessions_are_orphans() {
        let dir = tempfile::tempdir().unwrap();
        let store = GateStore::open(dir.path()).unwrap();
        let live = Ledger::open(&store).unwrap();
        let mut p = new_step(&live, Vec::new());
        p.write(live.tmp()).unwrap();
        let back = Pending::read(&p.path).unwrap();
        assert_eq!(back.step, p.step);
        assert!(back.issued.is_none());
        p.issued = Some(Issued {
            envelope: "{}".into(),
            receipt_id: Digest::blake3(b"r"),
            evidence: Value::Integer(1),
            inverse: None,
        });
        p.write(live.tmp()).unwrap();
        assert_eq!(Pending::read(&p.path).unwrap().issued, p.issued);
        // The session is alive: nothing to recover.
        assert!(orphans(&store).unwrap().0.is_empty());
        drop(live);
        let (found, locks) = orphans(&store).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(locks.len(), 1);
        found[0].remove().unwrap();
        assert!(!p.path.exists());
        // A corrupt pending file is named, never guessed at.
        std::fs::write(dir.path().join("mcp/pending/00-1"), b"junk").unwrap();
        drop(locks);
        // Not DAG-CBOR: corrupt, the decoder's error kept as the cause.
        let e = orphans(&store).unwrap_err();
        assert!(matches!(e, LedgerError::Decode(..)), "{e:?}");
        let cause = std::error::Error::source(&e).unwrap();
        assert!(cause.is::<dagcbor::DecodeError>(), "{cause:?}");
    }
}
