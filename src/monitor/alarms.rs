//! alarms: alarms stay open until acknowledged (spec/monitor.md "Alarms").
//!
//! ```text
//! DIR/alarms/<id>.json          {"format": 1, "id", "opened_at", "event": {...}}
//! DIR/acks/<ns>-<rand>.json     {"format": 1, "at", "by", "note", "ids": [...]}
//! ```
//!
//! The monitor (holding DIR's lock) writes an alarm's file when it delivers
//! the alarm, before the state that covers it is saved. `rcpt log monitor
//! ack` writes a new ack file and never removes one: the acks are the audit
//! trail. An alarm is open while no ack names its id. Ack does not take the
//! lock (a `--follow` monitor holds it for good): every file is written
//! whole by the atomic no-follow writer and each ack is a file of its own,
//! so the monitor and ack never see half of the other's work. Directories
//! are opened without following a link ([`Dir`]).

use super::Event;
use super::state::{STATE_DIR_MODE, StateDir, StateError, dir_err};
use crate::io::{Dir, InputError, OUTPUT_FILE_MODE};
use crate::limits::MAX_MONITOR_STATE_BYTES;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Format number of the alarm and ack files.
const ALARM_FORMAT: u32 = 1;

/// One alarm kept in the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alarm {
    /// The event's id.
    pub id: String,
    /// When the monitor delivered it first (Unix seconds).
    pub opened_at: u64,
    /// The event.
    pub event: Event,
}

/// An acknowledgement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// Always 1.
    pub format: u32,
    /// When (Unix seconds).
    pub at: u64,
    /// Who (the user running `ack`).
    pub by: String,
    /// Why.
    pub note: String,
    /// The alarms it closes.
    pub ids: Vec<String>,
}

/// Why an acknowledgement was refused (nothing written).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AckError {
    /// DIR is not a monitor's state directory.
    #[error("{} is not a monitor state directory (no such directory)", .0.display())]
    NoState(PathBuf),
    /// Ids that name no alarm of DIR.
    #[error(
        "no alarm {} in {}; the open alarms are listed by every round of the monitor",
        .ids.join(", "), .dir.display()
    )]
    Unknown {
        /// The ids.
        ids: Vec<String>,
        /// The state directory.
        dir: PathBuf,
    },
    /// An id already acknowledged.
    #[error("the alarm {id} is already acknowledged ({} by {by}: {note:?})", utc(*.at))]
    Already {
        /// The id.
        id: String,
        /// When.
        at: u64,
        /// Who.
        by: String,
        /// The note.
        note: String,
    },
    /// The state could not be read or written.
    #[error(transparent)]
    State(#[from] StateError),
}

/// What to acknowledge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Which {
    /// Every alarm open now.
    All,
    /// These ids.
    Ids(Vec<String>),
}

/// The alarm file as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    format: u32,
    id: String,
    opened_at: u64,
    event: serde_json::Value,
}

/// Now, in Unix seconds.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `secs` (Unix time) as `YYYY-MM-DDTHH:MM:SSZ` ([`crate::text::utc`]).
pub fn utc(secs: u64) -> String {
    crate::text::utc(i64::try_from(secs).unwrap_or(i64::MAX))
}

fn corrupt(path: PathBuf, detail: String) -> StateError {
    StateError::Corrupt { path, detail }
}

/// A state file that is not the JSON written, or a value not put as JSON.
fn bad_json(path: PathBuf) -> impl FnOnce(serde_json::Error) -> StateError {
    move |source| StateError::Json { path, source }
}

/// The `.json` files of `DIR/<sub>/` (none when it does not exist), each
/// read whole and parsed; temporary files (`.NAME...`) are skipped.
fn read_all<T: serde::de::DeserializeOwned>(dir: &Path, sub: &str) -> Result<Vec<T>, StateError> {
    let root = Dir::open(dir).map_err(dir_err)?;
    let Some(d) = root.try_child(sub).map_err(dir_err)? else {
        return Ok(Vec::new());
    };
    let mut names: Vec<String> = d
        .names()
        .map_err(dir_err)?
        .into_iter()
        .filter_map(|n| n.into_string().ok())
        .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
        .collect();
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let path = d.join(&name);
        let bytes = match crate::io::read_at(&d, &name, MAX_MONITOR_STATE_BYTES) {
            Ok(b) => b,
            Err(e @ InputError::TooLarge { .. }) => return Err(corrupt(path, e.to_string())),
            Err(e) => return Err(StateError::Read(e)),
        };
        out.push(serde_json::from_slice(&bytes).map_err(bad_json(path))?);
    }
    Ok(out)
}

/// Every alarm kept in `dir`, acknowledged or not, oldest first.
pub fn alarms_at(dir: &Path) -> Result<Vec<Alarm>, StateError> {
    let mut out = Vec::new();
    for s in read_all::<Stored>(dir, "alarms")? {
        let path = dir.join("alarms").join(format!("{}.json", s.id));
        let event = Event::from_value(&s.event)
            .filter(|e| e.id == s.id && s.format == ALARM_FORMAT)
            .ok_or_else(|| corrupt(path, "not an alarm the monitor wrote".into()))?;
        out.push(Alarm {
            id: s.id,
            opened_at: s.opened_at,
            event,
        });
    }
    // In the order delivered: by time, then by entry (log events first).
    out.sort_by(|a, b| {
        let key = |x: &Alarm| {
            (
                x.opened_at,
                x.event.origin.clone(),
                x.event.index,
                x.id.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    Ok(out)
}

/// Every acknowledgement kept in `dir`, oldest first.
pub fn acks_at(dir: &Path) -> Result<Vec<Ack>, StateError> {
    read_all(dir, "acks")
}

/// The alarms of `dir` no ack names, oldest first.
pub fn open_alarms_at(dir: &Path) -> Result<Vec<Alarm>, StateError> {
    let acked: BTreeSet<String> = acks_at(dir)?.into_iter().flat_map(|a| a.ids).collect();
    let mut all = alarms_at(dir)?;
    all.retain(|a| !acked.contains(&a.id));
    Ok(all)
}

/// Acknowledge `which` alarms of the state directory `dir`, by `by`, with
/// `note`: a new ack file. `Ok(None)` when `--all` finds none open. An id
/// that names no alarm, or one already acknowledged, refuses the whole
/// ack, nothing written.
pub fn acknowledge(
    dir: &Path,
    which: &Which,
    by: &str,
    note: &str,
) -> Result<Option<Ack>, AckError> {
    let root = match Dir::open(dir) {
        Ok(d) => d,
        Err(e) if e.is_not_found() => return Err(AckError::NoState(dir.to_path_buf())),
        Err(e) => return Err(dir_err(e).into()),
    };
    let alarms = alarms_at(dir)?;
    let acks = acks_at(dir)?;
    let acked = |id: &str| acks.iter().find(|a| a.ids.iter().any(|i| i == id));
    let ids: Vec<String> = match which {
        Which::All => alarms
            .iter()
            .filter(|a| acked(&a.id).is_none())
            .map(|a| a.id.clone())
            .collect(),
        Which::Ids(ids) => {
            let unknown: Vec<String> = ids
                .iter()
                .filter(|id| !alarms.iter().any(|a| &a.id == *id))
                .cloned()
                .collect();
            if !unknown.is_empty() {
                return Err(AckError::Unknown {
                    ids: unknown,
                    dir: dir.to_path_buf(),
                });
            }
            if let Some((id, a)) = ids.iter().find_map(|id| Some((id, acked(id)?))) {
                return Err(AckError::Already {
                    id: id.clone(),
                    at: a.at,
                    by: a.by.clone(),
                    note: a.note.clone(),
                });
            }
            let mut seen = BTreeSet::new();
            ids.iter().filter(|i| seen.insert(*i)).cloned().collect()
        }
    };
    if ids.is_empty() {
        return Ok(None);
    }
    let ack = Ack {
        format: ALARM_FORMAT,
        at: now(),
        by: by.to_string(),
        note: note.to_string(),
        ids,
    };
    write_ack(&root, &ack)?;
    Ok(Some(ack))
}

/// Write `ack` as a new file of `acks/` under the state directory `root`.
fn write_ack(root: &Dir, ack: &Ack) -> Result<(), AckError> {
    let acks_dir = root
        .child_or_create("acks", STATE_DIR_MODE)
        .map_err(dir_err)?;
    let mut rand = [0u8; 8];
    crate::io::random_bytes(&mut rand).map_err(|source| StateError::Io {
        path: acks_dir.path().to_path_buf(),
        source,
    })?;
    // Named by the time in nanoseconds: listed by name, acks come in order.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("{nanos:020}-{}.json", crate::digest::to_hex(&rand));
    let mut json = serde_json::to_vec_pretty(ack).map_err(bad_json(acks_dir.join(&name)))?;
    json.push(b'\n');
    crate::io::write_atomic(&acks_dir.join(&name), &json, OUTPUT_FILE_MODE)
        .map_err(StateError::Write)?;
    Ok(())
}

impl StateDir {
    /// Keep `event` (an alarm) open until acknowledged: written once, at
    /// its first delivery (a repeat keeps the first time).
    pub fn record_alarm(&self, event: &Event) -> Result<(), StateError> {
        let root = Dir::open(&self.dir).map_err(dir_err)?;
        let dir = root
            .child_or_create("alarms", STATE_DIR_MODE)
            .map_err(dir_err)?;
        let name = format!("{}.json", event.id);
        if dir.kind(&name).map_err(dir_err)?.is_some() {
            return Ok(());
        }
        let stored = Stored {
            format: ALARM_FORMAT,
            id: event.id.clone(),
            opened_at: now(),
            event: event.to_value(),
        };
        let path = dir.join(&name);
        let mut json = serde_json::to_vec_pretty(&stored).map_err(bad_json(path.clone()))?;
        json.push(b'\n');
        self.write(&path, &json)
    }

    /// The alarms of this directory no ack names, oldest first.
    pub fn open_alarms(&self) -> Result<Vec<Alarm>, StateError> {
        open_alarms_at(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_796_456_031), "2026-12-05T07:33:51Z");
    }
}
