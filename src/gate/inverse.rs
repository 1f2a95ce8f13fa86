//! inverse: the transition record of a change the gate writes (spec/gate.md
//! "The inverse record").
//!
//! ```text
//! {"version": 1, "base": oid,
//!  "files": [{"path": P,
//!             "pre":  {"digest": D, "mode": "100644"|"100755"} | null,
//!             "post": {"digest": D, "mode": "100644"|"100755"} | null}, ...]}
//! ```
//!
//! sorted bytewise by path, each path once. `pre` is what the file held
//! before the change (null: absent), `post` what the change leaves. Stored
//! as canonical DAG-CBOR in the gate store; its identity is the receipt's
//! `inverse_delta_id`. Undoing the change writes every `pre` where every
//! file still is at `post`; the undo's own record is this one with the two
//! sides swapped, so an undo is undone the same way.

use super::store::{GateStore, StoreError};
use crate::digest::Digest;
use crate::receipt::canonical::Value;
use std::collections::BTreeMap;

/// Version of the record.
const INVERSE_VERSION: i64 = 1;

/// One side of a transition: a regular file's bytes and executable bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Side {
    /// BLAKE3 of its bytes.
    pub digest: Digest,
    /// Mode 100755 rather than 100644.
    pub executable: bool,
}

/// One path: what it held before and after (`None`: absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// Relative to the top of the work tree.
    pub path: String,
    /// Before.
    pub pre: Option<Side>,
    /// After.
    pub post: Option<Side>,
}

/// The transition record of one change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The commit `HEAD` named when the change was made.
    pub base: String,
    /// Sorted by path, each once.
    pub files: Vec<Transition>,
}

/// Why a stored record is not a usable inverse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InverseError {
    /// The store failed (missing or corrupt object).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The record does not have the documented shape.
    #[error("inverse record {id}: {why}")]
    Shape {
        /// The record.
        id: Digest,
        /// What is wrong.
        why: String,
    },
    /// Stored, then read back different.
    #[error("inverse record {0} reads back different from what was stored")]
    ReadBack(Digest),
}

fn side_value(side: Option<&Side>) -> Value {
    side.map_or(Value::Null, |s| {
        let mode = if s.executable { "100755" } else { "100644" };
        Value::Map(BTreeMap::from([
            ("digest".to_string(), Value::Text(s.digest.to_string())),
            ("mode".to_string(), Value::Text(mode.to_string())),
        ]))
    })
}

fn side_from(value: Option<&Value>) -> Result<Option<Side>, String> {
    match value {
        Some(Value::Null) => Ok(None),
        Some(Value::Map(m)) if m.len() == 2 => {
            let digest = m
                .get("digest")
                .and_then(Value::as_text)
                .and_then(|t| t.parse().ok())
                .ok_or("a side's digest is not a digest")?;
            let executable = match m.get("mode").and_then(Value::as_text) {
                Some("100644") => false,
                Some("100755") => true,
                _ => return Err("a side's mode is not 100644 or 100755".into()),
            };
            Ok(Some(Side { digest, executable }))
        }
        _ => Err("a side is neither null nor {digest, mode}".into()),
    }
}

impl Record {
    /// The record as a data-model value.
    pub fn to_value(&self) -> Value {
        let files = self
            .files
            .iter()
            .map(|t| {
                Value::Map(BTreeMap::from([
                    ("path".to_string(), Value::Text(t.path.clone())),
                    ("pre".to_string(), side_value(t.pre.as_ref())),
                    ("post".to_string(), side_value(t.post.as_ref())),
                ]))
            })
            .collect();
        Value::Map(BTreeMap::from([
            ("version".to_string(), Value::Integer(INVERSE_VERSION)),
            ("base".to_string(), Value::Text(self.base.clone())),
            ("files".to_string(), Value::Array(files)),
        ]))
    }

    /// Read a record back, strictly (exact fields, sorted unique paths).
    pub fn from_value(value: &Value) -> Result<Record, String> {
        let top = value.as_map().ok_or("not a map")?;
        if top.len() != 3 || top.get("version") != Some(&Value::Integer(INVERSE_VERSION)) {
            return Err("not a version 1 record of {version, base, files}".into());
        }
        let base = top
            .get("base")
            .and_then(Value::as_text)
            .ok_or("base is not a text")?
            .to_string();
        let Some(Value::Array(list)) = top.get("files") else {
            return Err("files is not an array".into());
        };
        let mut files = Vec::with_capacity(list.len());
        for item in list {
            let m = item
                .as_map()
                .filter(|m| m.len() == 3)
                .ok_or("a file is not {path, pre, post}")?;
            let path = m
                .get("path")
                .and_then(Value::as_text)
                .ok_or("path is not a text")?;
            crate::fresh::check_relative(path).map_err(|e| e.to_string())?;
            files.push(Transition {
                path: path.to_string(),
                pre: side_from(m.get("pre"))?,
                post: side_from(m.get("post"))?,
            });
        }
        if files.windows(2).any(|w| match w {
            [a, b] => a.path.as_bytes() >= b.path.as_bytes(),
            _ => false,
        }) {
            return Err("paths are not sorted and unique".into());
        }
        Ok(Record { base, files })
    }

    /// The record of the undo: the two sides swapped.
    pub fn swapped(&self, base: &str) -> Record {
        Record {
            base: base.to_string(),
            files: self
                .files
                .iter()
                .map(|t| Transition {
                    path: t.path.clone(),
                    pre: t.post,
                    post: t.pre,
                })
                .collect(),
        }
    }

    /// Store the record, read it back, and check that it is what was
    /// stored and that every object it needs is in the store and intact:
    /// the `pre` side when `pre` (an inverse), the `post` side when `post`
    /// (a roll forward). Its identity.
    pub fn store_checked(
        &self,
        store: &GateStore,
        pre: bool,
        post: bool,
    ) -> Result<Digest, InverseError> {
        let id = store.put_record(&self.to_value())?;
        let back = load(store, &id)?;
        if back != *self {
            return Err(InverseError::ReadBack(id));
        }
        back.check_objects(store, pre, post)?;
        Ok(id)
    }

    /// Every object of the chosen sides re-hashed from the store.
    pub fn check_objects(
        &self,
        store: &GateStore,
        pre: bool,
        post: bool,
    ) -> Result<(), InverseError> {
        for t in &self.files {
            for side in [t.pre.filter(|_| pre), t.post.filter(|_| post)]
                .into_iter()
                .flatten()
            {
                store.get(&side.digest)?;
            }
        }
        Ok(())
    }
}

/// The record `id` from `store`, re-hashed and strictly decoded.
pub fn load(store: &GateStore, id: &Digest) -> Result<Record, InverseError> {
    let value = store.get_record(id)?;
    Record::from_value(&value).map_err(|why| InverseError::Shape { id: *id, why })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(bytes: &[u8], executable: bool) -> Option<Side> {
        Some(Side {
            digest: Digest::blake3(bytes),
            executable,
        })
    }

    #[test]
    fn a_record_round_trips_and_is_checked_against_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = GateStore::open(dir.path()).unwrap();
        let record = Record {
            base: "ab".repeat(20),
            files: vec![
                Transition {
                    path: "a".into(),
                    pre: None,
                    post: side(b"new", false),
                },
                Transition {
                    path: "b/c".into(),
                    pre: side(b"old", true),
                    post: None,
                },
            ],
        };
        // The pre-image is not stored yet: the check refuses.
        assert!(matches!(
            record.store_checked(&store, true, false),
            Err(InverseError::Store(_))
        ));
        store.put(b"old").unwrap();
        let id = record.store_checked(&store, true, false).unwrap();
        assert_eq!(load(&store, &id).unwrap(), record);
        let undo = record.swapped("cd");
        assert_eq!(undo.files[0].pre, record.files[0].post);
        assert_eq!(undo.swapped(&record.base), record);
        // Unsorted paths are refused.
        let mut bad = record.clone();
        bad.files.reverse();
        assert!(Record::from_value(&bad.to_value()).is_err());
    }
}
