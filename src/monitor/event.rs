//! event: what a monitor reports (spec/monitor.md "Events"): its kind, its
//! stable id, and its text and JSON forms.

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
