//! record: the lease object, its timing, the errors of taking and holding
//! it, and the holders this process had (spec/storage.md "The lease").

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::super::client::S3Error;

/// Default time a lease stays valid without a renewal.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// Shortest TTL accepted (renewal every 250 ms).
pub const MIN_TTL: Duration = Duration::from_secs(1);
/// Longest TTL accepted.
pub const MAX_TTL: Duration = Duration::from_secs(600);
/// Largest lease object read, bytes.
pub const MAX_LEASE_BYTES: usize = 4096;
/// Shortest pause between two looks at the lease by a contender.
pub const MIN_POLL: Duration = Duration::from_millis(20);
/// Format marker in the lease object.
pub const LEASE_FORMAT: u32 = 1;
/// Former holders remembered per store (the newest; an older one the lease
/// object still names is waited out like anyone else's).
pub const FORMER_HOLDERS_KEPT: usize = 8;
/// Release writes tried, each after a read-back found a renewal of ours
/// landed after the one before (at most one renewal is in flight, so two
/// suffice; one more for a late answer of the release itself).
pub const RELEASE_ROUNDS: u32 = 3;

/// Why the lease could not be taken or was lost.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// Another sequencer holds the lease and renews it.
    #[error(
        "another sequencer holds the lease {key} (holder {holder}, renewing); wait for it to stop, or pass --wait to stand by"
    )]
    Held {
        /// The lease object.
        key: String,
        /// Its holder's id, as written in the lease (or `unknown`).
        holder: String,
    },
    /// This holder lost the lease: it must not write again.
    #[error("lost the lease {key}: {reason}; stopped writing")]
    Lost {
        /// The lease object.
        key: String,
        /// What happened.
        reason: LostReason,
    },
    /// The TTL is outside [`MIN_TTL`]..=[`MAX_TTL`].
    #[error("lease TTL {0:?} is outside 1 s to 600 s")]
    BadTtl(Duration),
    /// The object store failed.
    #[error("lease {key}: {source}")]
    Store {
        /// The lease object.
        key: String,
        /// The failure.
        #[source]
        source: S3Error,
    },
}

/// How a holder lost its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// A renewal found another holder's write.
    TakenOver,
    /// No renewal succeeded before the lease's time ran out.
    Expired,
    /// The holder released it.
    Released,
}

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LostReason::TakenOver => "another sequencer took it over",
            LostReason::Expired => "no renewal succeeded before it expired",
            LostReason::Released => "it was released",
        })
    }
}

/// The lease object's content: one JSON object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Record {
    pub(super) rcpt_lease: u32,
    /// The holder's random id.
    pub(super) holder: String,
    /// Grows with every write by one holder, so every write changes the ETag.
    pub(super) seq: u64,
    /// The TTL the holder renews within, in milliseconds (for contenders: they
    /// wait at least the longer of this and their own).
    pub(super) ttl_ms: u64,
    /// `held` or `released`.
    pub(super) state: String,
}

pub(super) const HELD: &str = "held";
pub(super) const RELEASED: &str = "released";

impl Record {
    pub(super) fn bytes(&self) -> Bytes {
        // Serialising a struct of strings and integers cannot fail; an empty
        // body would only be refused as malformed by every reader.
        Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }

    pub(super) fn parse(bytes: &[u8]) -> Option<Record> {
        serde_json::from_slice::<Record>(bytes)
            .ok()
            .filter(|r| r.rcpt_lease == LEASE_FORMAT)
    }

    /// Held by `holder` (not released, not another's).
    pub(super) fn held_by(&self, holder: &str) -> bool {
        self.holder == holder && self.state == HELD
    }
}

pub(super) fn new_record(holder: &str, seq: u64, config: LeaseConfig, state: &str) -> Record {
    Record {
        rcpt_lease: LEASE_FORMAT,
        holder: holder.to_string(),
        seq,
        ttl_ms: u64::try_from(config.ttl.as_millis()).unwrap_or(u64::MAX),
        state: state.to_string(),
    }
}

/// 16 random bytes in hex, and the process id for people reading the lease.
pub(super) fn new_holder_id() -> String {
    let mut bytes = [0u8; 16];
    // Without OS randomness, the time and pid still differ between holders.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = nanos.to_be_bytes();
    }
    format!(
        "{}-pid{}",
        crate::digest::to_hex(&bytes),
        std::process::id()
    )
}

/// Timing of a lease.
#[derive(Debug, Clone, Copy)]
pub struct LeaseConfig {
    ttl: Duration,
}

impl LeaseConfig {
    /// A lease that lives `ttl` without renewal.
    pub fn new(ttl: Duration) -> Result<LeaseConfig, LeaseError> {
        if !(MIN_TTL..=MAX_TTL).contains(&ttl) {
            return Err(LeaseError::BadTtl(ttl));
        }
        Ok(LeaseConfig { ttl })
    }

    /// The TTL.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Allowance for clock-rate differences and scheduling: a tenth of the TTL.
    pub fn margin(&self) -> Duration {
        self.ttl / 10
    }

    /// How often the holder renews.
    pub(super) fn period(&self) -> Duration {
        self.ttl / 4
    }

    /// How often a contender looks: twice per renewal, so it sees each
    /// renewal soon after it lands and takes over soon after expiry.
    pub(super) fn poll(&self) -> Duration {
        self.ttl / 8
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig { ttl: DEFAULT_TTL }
    }
}

/// The holders of one lease this process had and no longer runs: a lease
/// lost or dropped without a release known to have landed, a take whose
/// answer was lost. The lease object may still name one of them as held;
/// nobody renews it, so the next take of this process need not wait out a
/// TTL: it takes the lease once no write of that holder can still land
/// (its `clear_at`). Cheap to clone: clones share the list.
#[derive(Debug, Clone, Default)]
pub struct FormerHolders(Arc<Mutex<VecDeque<(String, Instant)>>>);

impl FormerHolders {
    /// None yet.
    pub fn new() -> FormerHolders {
        FormerHolders::default()
    }

    fn list(&self) -> std::sync::MutexGuard<'_, VecDeque<(String, Instant)>> {
        // A list of plain values, consistent after every statement.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers `holder`, whose writes can all have landed by `clear_at`.
    pub(super) fn add(&self, holder: &str, clear_at: Instant) {
        let mut list = self.list();
        list.retain(|(h, _)| h != holder);
        list.push_back((holder.to_string(), clear_at));
        while list.len() > FORMER_HOLDERS_KEPT {
            list.pop_front();
        }
    }

    /// When `holder`'s lease may be taken, if it is one of ours.
    pub(super) fn clear_at(&self, holder: &str) -> Option<Instant> {
        self.list()
            .iter()
            .find(|(h, _)| h == holder)
            .map(|(_, at)| *at)
    }

    /// How many are remembered.
    pub fn len(&self) -> usize {
        self.list().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.list().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_foreign_objects_are_not_records() {
        let r = new_record("h1", 7, LeaseConfig::default(), HELD);
        assert_eq!(Record::parse(&r.bytes()), Some(r.clone()));
        assert!(Record::parse(b"not json").is_none());
        let other_format = br#"{"rcpt_lease":2,"holder":"h","seq":1,"ttl_ms":1,"state":"held"}"#;
        assert!(Record::parse(other_format).is_none());
        // Every renewal changes the bytes, so the ETag moves.
        let next = new_record("h1", 8, LeaseConfig::default(), HELD);
        assert_ne!(r.bytes(), next.bytes());
        assert!(r.held_by("h1") && !r.held_by("h2"));
        assert!(!new_record("h1", 9, LeaseConfig::default(), RELEASED).held_by("h1"));
    }

    #[test]
    fn ttl_bounds_hold() {
        assert!(LeaseConfig::new(Duration::from_millis(999)).is_err());
        assert!(LeaseConfig::new(Duration::from_secs(601)).is_err());
        let c = LeaseConfig::new(Duration::from_secs(2)).unwrap();
        assert_eq!(
            (c.period(), c.margin()),
            (Duration::from_millis(500), Duration::from_millis(200))
        );
    }

    #[test]
    fn holder_ids_differ() {
        assert_ne!(new_holder_id(), new_holder_id());
    }

    #[test]
    fn former_holders_are_bounded_and_the_newest_kept() {
        let former = FormerHolders::new();
        let now = Instant::now();
        for n in 0..FORMER_HOLDERS_KEPT + 3 {
            former.add(&format!("h{n}"), now);
        }
        assert_eq!(former.len(), FORMER_HOLDERS_KEPT);
        assert_eq!(former.clear_at("h0"), None);
        assert_eq!(
            former.clear_at(&format!("h{}", FORMER_HOLDERS_KEPT + 2)),
            Some(now)
        );
        // Added again: one entry, the later time.
        let later = now + Duration::from_secs(1);
        former.add("h5", later);
        assert_eq!(
            (former.len(), former.clear_at("h5")),
            (FORMER_HOLDERS_KEPT, Some(later))
        );
    }
}
