//! monitor: who watches the log (`rcpt log monitor`, spec/monitor.md).
//!
//! A round reads a log's checkpoint from a source (a directory, an object
//! store, a URL: any [`PublicRead`]), verifies it under the log key (and,
//! with a policy, its witness quorum), proves it consistent with the one
//! kept in the state directory from the source's tiles, then reads every
//! new entry bundle by bundle: each bundle's leaf hashes are pushed onto
//! the tree's edge and the tree they give is proven a prefix of the signed
//! one *before* any of its entries is reported; then each entry is
//! decoded, its signatures checked against the watched keys, and matched
//! against the watch list ([`Watch`]). Events go to a [`Sink`] (the CLI
//! prints them and runs the hook) before the state covering them is saved
//! ([`state`]): delivery is at least once, and nothing is skipped.
//!
//! Work and memory follow what was verified: the only things sized by the
//! checkpoint's claimed tree size are loops that stop at the first tile the
//! source cannot serve; one entry bundle is held at a time.
//!
//! Boundary: no printing, no process; the hook and the output are the
//! binary's. Uses `log` (checkpoint verification), `storage::tiles` (the
//! one tile reader), `tlog` (proofs, notes, policy), `receipt` (the
//! envelope and payload checks) and `trust`.

pub mod alarms;
mod entry;
#[cfg(feature = "net")]
pub mod http;
mod round;
pub mod state;
mod watch;

pub use alarms::{Ack, AckError, Alarm};
pub use round::{Monitor, RoundReport};
pub use state::{StateDir, StateError};
pub use watch::{Watch, WatchError};

use crate::storage::StoreError;
use crate::storage::walk::WalkError;

/// What an event says (spec/monitor.md "Events"), in the table's order:
/// an entry gives at most one, the first that applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// A watched issuer's receipt, signed by one of its keys, authorized.
    Matched,
    /// As matched, but its id is not in the authorized list.
    Unauthorized,
    /// Claims a watched issuer name, not signed by any of its keys.
    Impersonation,
    /// Signed by a watched key, claims another issuer.
    KeyMisuse,
    /// Concerns a watched change id.
    Change,
    /// An entry that cannot be decoded or checked as a receipt.
    Malformed,
    /// The new checkpoint does not extend the stored one.
    Inconsistent,
    /// A smaller tree than the one already checked.
    Rollback,
    /// With a policy, the witness quorum is not met.
    Unwitnessed,
    /// The source's checkpoint does not verify under the log key.
    CheckpointInvalid,
    /// The round could not complete; not evidence.
    Error,
}

impl EventKind {
    /// The event's name (`receipt.matched`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Matched => "receipt.matched",
            EventKind::Unauthorized => "receipt.unauthorized",
            EventKind::Impersonation => "receipt.impersonation",
            EventKind::KeyMisuse => "receipt.key_misuse",
            EventKind::Change => "receipt.change",
            EventKind::Malformed => "entry.malformed",
            EventKind::Inconsistent => "log.inconsistent",
            EventKind::Rollback => "log.rollback",
            EventKind::Unwitnessed => "checkpoint.unwitnessed",
            EventKind::CheckpointInvalid => "checkpoint.invalid",
            EventKind::Error => "monitor.error",
        }
    }

    /// The kind named `name` ([`EventKind::as_str`]).
    pub fn parse(name: &str) -> Option<EventKind> {
        ALL_KINDS.into_iter().find(|k| k.as_str() == name)
    }

    /// True for the events that make a round exit 1.
    pub fn is_alarm(self) -> bool {
        !matches!(
            self,
            EventKind::Matched | EventKind::Change | EventKind::Error
        )
    }
}

/// Every kind, in the table's order.
const ALL_KINDS: [EventKind; 11] = [
    EventKind::Matched,
    EventKind::Unauthorized,
    EventKind::Impersonation,
    EventKind::KeyMisuse,
    EventKind::Change,
    EventKind::Malformed,
    EventKind::Inconsistent,
    EventKind::Rollback,
    EventKind::Unwitnessed,
    EventKind::CheckpointInvalid,
    EventKind::Error,
];

/// Hex digits of an event id.
const EVENT_ID_HEX: usize = 16;

/// An event's id (spec/monitor.md "Event ids"): the first 16 hex digits of
/// SHA-256 over the kind, the origin, and the entry's index or, for a log
/// event, what it is about (the checkpoints'
/// bytes). The same entry's event, or the same log event about the same
/// checkpoints, has the same id in every round and every state directory.
pub fn event_id(kind: EventKind, origin: &str, index: Option<u64>, about: &[u8]) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"rcpt monitor event v1\0");
    for part in [kind.as_str().as_bytes(), origin.as_bytes()] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    match index {
        Some(i) => h.update([[1u8].as_slice(), &i.to_be_bytes()].concat()),
        None => h.update([0u8]),
    }
    h.update((about.len() as u64).to_be_bytes());
    h.update(about);
    let hex = crate::digest::to_hex(&h.finalize());
    hex.get(..EVENT_ID_HEX).unwrap_or(&hex).to_string()
}

/// One event (a JSON Lines object on the CLI's stdout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Its id ([`event_id`]): stable, printed with it, named by `ack`.
    pub id: String,
    /// What it says.
    pub kind: EventKind,
    /// The log's origin (empty when the checkpoint could not be read).
    pub origin: String,
    /// The entry's index (entry events only).
    pub index: Option<u64>,
    /// The receipt id, when the payload decoded.
    pub receipt_id: Option<String>,
    /// The receipt's `issuer`, when it decoded.
    pub issuer: Option<String>,
    /// The receipt's verdict arm (`allow`, `deny`, ...), when it decoded.
    pub verdict: Option<String>,
    /// One line for a person.
    pub summary: String,
}

impl Event {
    /// A log-level event (no entry) about `about` (the checkpoints' bytes).
    pub(crate) fn log(kind: EventKind, origin: &str, summary: String, about: &[u8]) -> Event {
        Event {
            id: event_id(kind, origin, None, about),
            kind,
            origin: origin.to_string(),
            index: None,
            receipt_id: None,
            issuer: None,
            verdict: None,
            summary,
        }
    }

    /// The event as one JSON object (no newline).
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// The event as a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::json!({
            "event": self.kind.as_str(),
            "id": self.id,
            "origin": self.origin,
            "index": self.index,
            "receipt_id": self.receipt_id,
            "issuer": self.issuer,
            "verdict": self.verdict,
            "summary": self.summary,
        })
    }

    /// The event of [`Event::to_value`], read back (an alarm kept in the state).
    pub fn from_value(v: &serde_json::Value) -> Option<Event> {
        let text = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
        let opt = |k: &str| match v.get(k)? {
            serde_json::Value::Null => Some(None),
            serde_json::Value::String(s) => Some(Some(s.clone())),
            _ => None,
        };
        Some(Event {
            id: text("id")?.to_string(),
            kind: EventKind::parse(text("event")?)?,
            origin: text("origin")?.to_string(),
            index: match v.get("index")? {
                serde_json::Value::Null => None,
                i => Some(i.as_u64()?),
            },
            receipt_id: opt("receipt_id")?,
            issuer: opt("issuer")?,
            verdict: opt("verdict")?,
            summary: text("summary")?.to_string(),
        })
    }

    /// The event as one line for a person: `EVENT ORIGIN #INDEX: SUMMARY`,
    /// an alarm with its id (`EVENT ORIGIN #INDEX alarm ID: SUMMARY`). The
    /// origin and the summary (which quotes the receipt's issuer) are peer
    /// text, escaped ([`crate::text::Escaped`]): one event, one line.
    pub fn to_human(&self) -> String {
        use crate::text::Escaped;
        let at = self.index.map(|i| format!(" #{i}")).unwrap_or_default();
        let id = if self.kind.is_alarm() {
            format!(" alarm {}", self.id)
        } else {
            String::new()
        };
        format!(
            "{} {}{at}{id}: {}",
            self.kind.as_str(),
            Escaped(&self.origin),
            Escaped(&self.summary)
        )
    }
}

/// Why a sink refused an event (a failed hook, a closed output).
#[derive(Debug, thiserror::Error)]
#[error("delivering {event}")]
pub struct SinkError {
    /// The event's name.
    pub event: &'static str,
    /// The cause.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// During a scan, the state is saved after an entry bundle once this long
/// has passed since the last save (and after every bundle when the sink
/// runs a hook, [`Sink::hooked`]); always at the end of a round, at a stop
/// and before an error returns. A monitor killed repeats at most the events
/// since the last save: about this long of scanning, or one bundle.
pub const STATE_SAVE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// Where events go. An event is delivered once [`Sink::emit`] has
/// returned for it and then [`Sink::flush`] has returned `Ok`: the monitor
/// flushes before every save of its state (so a saved state never covers an
/// event not delivered) and at the end of every round.
pub trait Sink {
    /// Deliver one event, or buffer it until [`Sink::flush`]; an error stops
    /// the round before its entry.
    fn emit(&mut self, event: &Event) -> Result<(), SinkError>;

    /// True when delivering an event has an effect beyond the output (a
    /// hook): the state is then saved after every entry bundle, so a
    /// monitor killed repeats at most one bundle's effects.
    fn hooked(&self) -> bool {
        false
    }

    /// Deliver every buffered event. After an error the sink is not
    /// trusted again: every later flush fails too.
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    /// `done` of the round's `total` new entries are checked (called after
    /// each entry bundle; a progress display, nothing more).
    fn progress(&mut self, _done: u64, _total: u64) {}
}

/// Why a round could not complete (reported as `monitor.error`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MonitorError {
    /// The source could not be read.
    #[error("reading the source {source_name}")]
    Source {
        /// The source.
        source_name: String,
        /// The cause.
        #[source]
        source: StoreError,
    },
    /// The source has no checkpoint.
    #[error("{0} has no checkpoint; is this a tiled log?")]
    NoCheckpoint(String),
    /// No known log key has the checkpoint's origin.
    #[error("no log key for the origin {0:?} (give --log-key or a trust file listing it)")]
    NoLogKey(String),
    /// A tile or entry bundle the signed tree needs could not be read
    /// (`WalkError::Tiles` or `WalkError::Bundle`).
    #[error(transparent)]
    Read(WalkError),
    /// The source's entries (or tiles) do not give the signed tree.
    #[error(
        "the source's entries up to index {end} do not give the signed tree of size {size}; \
         nothing past index {start} is reported"
    )]
    Mismatch {
        /// First entry of the bundle that failed.
        start: u64,
        /// End of the bundle.
        end: u64,
        /// The signed tree size.
        size: u64,
        /// What the consistency walk found.
        #[source]
        source: WalkError,
    },
    /// The state directory.
    #[error(transparent)]
    State(#[from] StateError),
    /// An event could not be delivered.
    #[error(transparent)]
    Sink(#[from] SinkError),
}
