//! lease: one sequencer at a time on a bucket, by conditional writes to one
//! lease object (spec/storage.md "The lease").
//!
//! - **Take**: `If-None-Match: *` when there is no lease object; `If-Match`
//!   on its ETag when it says `released`, or when a contender has seen the
//!   same ETag unchanged for longer than the TTL (the holder stopped
//!   renewing).
//! - **Renew**: every `ttl / 4` (contenders look every `ttl / 8`), `If-Match` on the holder's last ETag, with a
//!   body that always differs (its `seq` grows), so the ETag always moves.
//! - **Expire**: the holder counts its lease valid until the instant it
//!   *sent* its last successful renewal plus `ttl - margin`; a contender
//!   takes over only after it *read* one ETag and then saw no change for
//!   `ttl + margin`. Sending precedes the server applying, which precedes
//!   the contender's read, so the holder's time runs out first, on any two
//!   monotonic clocks whose rates differ by less than the margin (a tenth
//!   of the TTL). No wall clocks are compared.
//! - **Lose**: a holder whose renewal is refused, or that could not renew
//!   before its time ran out, is lost for good: [`Lease::check`] fails from
//!   then on, and the writer stops.
//!
//! The lease is the first fence; the checkpoint's `If-Match` is the second:
//! a writer paused past its lease (a stopped process) still cannot publish
//! over a checkpoint its successor wrote.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::client::{Client, Created, Etag, S3Error};

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
struct Record {
    rcpt_lease: u32,
    /// The holder's random id.
    holder: String,
    /// Grows with every write by one holder, so every write changes the ETag.
    seq: u64,
    /// The TTL the holder renews within, in milliseconds (for contenders: they
    /// wait at least the longer of this and their own).
    ttl_ms: u64,
    /// `held` or `released`.
    state: String,
}

const HELD: &str = "held";
const RELEASED: &str = "released";

impl Record {
    fn bytes(&self) -> Bytes {
        // Serialising a struct of strings and integers cannot fail; an empty
        // body would only be refused as malformed by every reader.
        Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }

    fn parse(bytes: &[u8]) -> Option<Record> {
        serde_json::from_slice::<Record>(bytes)
            .ok()
            .filter(|r| r.rcpt_lease == LEASE_FORMAT)
    }
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
    fn margin(&self) -> Duration {
        self.ttl / 10
    }

    /// How often the holder renews.
    fn period(&self) -> Duration {
        self.ttl / 4
    }

    /// How often a contender looks: twice per renewal, so it sees each
    /// renewal soon after it lands and takes over soon after expiry.
    fn poll(&self) -> Duration {
        self.ttl / 8
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig { ttl: DEFAULT_TTL }
    }
}

/// The holder's view of its lease.
#[derive(Debug)]
struct HolderState {
    etag: Etag,
    seq: u64,
    /// The lease is ours strictly before this instant (unless `lost`).
    valid_until: Instant,
    lost: Option<LostReason>,
    /// Renewals that succeeded, and that failed (for metrics).
    renewals: u64,
    renewal_failures: u64,
}

/// A held lease. Renewed by a task on the tokio runtime it was taken on
/// until [`Lease::release`] or drop. Dropped without `release`, it stops
/// renewing and expires after its TTL.
#[derive(Debug)]
pub struct Lease {
    key: String,
    holder: String,
    config: LeaseConfig,
    client: Client,
    state: Arc<Mutex<HolderState>>,
    renewer: tokio::task::JoinHandle<()>,
}

fn lock(state: &Mutex<HolderState>) -> MutexGuard<'_, HolderState> {
    // The state is a few plain fields, consistent after every statement.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Lease {
    /// Takes the lease object `key`. With `wait`, stands by until the holder
    /// releases it or stops renewing. Without, fails with
    /// [`LeaseError::Held`] as soon as the holder is seen renewing; a dead
    /// holder's lease is still taken over, after its TTL.
    ///
    /// Must run on a multi-thread tokio runtime (the renewal task is spawned on it).
    pub async fn acquire(
        client: &Client,
        key: &str,
        config: LeaseConfig,
        wait: bool,
    ) -> Result<Lease, LeaseError> {
        let holder = new_holder_id();
        let store = |source| LeaseError::Store {
            key: key.to_string(),
            source,
        };
        // The ETag a contender watches, and since when it has been unchanged.
        let mut watched: Option<(Etag, Instant)> = None;
        loop {
            let current = client.get(key, MAX_LEASE_BYTES).await.map_err(store)?;
            // The watch starts once the answer is in: after the server
            // applied whatever write it shows, so after its writer sent it.
            let observed = Instant::now();
            // A lease we take counts from before our write is sent.
            let sent = Instant::now();
            let taken = match &current {
                None => {
                    let record = new_record(&holder, 0, config, HELD);
                    match client.create(key, record.bytes()).await {
                        Ok(Created::New(etag) | Created::Identical(etag)) => Some((etag, 0)),
                        Err(S3Error::ExistsDifferent { .. }) => None,
                        Err(e) => return Err(store(e)),
                    }
                }
                Some(object) => {
                    let record = Record::parse(&object.body);
                    let seq = record.as_ref().map_or(0, |r| r.seq.saturating_add(1));
                    let released = record.as_ref().is_some_and(|r| r.state == RELEASED);
                    // Wait out the longer of the holder's TTL and ours.
                    let their_ttl = record
                        .as_ref()
                        .map_or(config.ttl, |r| Duration::from_millis(r.ttl_ms));
                    let patience = their_ttl.max(config.ttl) + config.margin();
                    let since = match &watched {
                        Some((etag, since)) if *etag == object.etag => *since,
                        _ => {
                            let fresh = watched.is_some();
                            watched = Some((object.etag.clone(), observed));
                            if fresh && !wait && !released {
                                // It moved while we watched: a live holder.
                                return Err(LeaseError::Held {
                                    key: key.to_string(),
                                    holder: record
                                        .map_or_else(|| "unknown".to_string(), |r| r.holder),
                                });
                            }
                            observed
                        }
                    };
                    if released || since.elapsed() >= patience {
                        let mine = new_record(&holder, seq, config, HELD);
                        match client.replace(key, mine.bytes(), &object.etag).await {
                            Ok(etag) => Some((etag, seq)),
                            Err(S3Error::Conflict { .. }) => None,
                            Err(e) => return Err(store(e)),
                        }
                    } else {
                        None
                    }
                }
            };
            if let Some((etag, seq)) = taken {
                return Ok(Lease::start(client, key, holder, config, etag, seq, sent));
            }
            // Look again after a period, or right when the watched lease
            // would expire if that comes sooner (a prompt take-over).
            let due = watched.as_ref().map(|(_, since)| {
                (*since + config.ttl + config.margin()).saturating_duration_since(Instant::now())
            });
            let pause = due.map_or(config.poll(), |d| d.min(config.poll()));
            tokio::time::sleep(pause.max(MIN_POLL)).await;
        }
    }

    fn start(
        client: &Client,
        key: &str,
        holder: String,
        config: LeaseConfig,
        etag: Etag,
        seq: u64,
        sent: Instant,
    ) -> Lease {
        let state = Arc::new(Mutex::new(HolderState {
            etag,
            seq,
            valid_until: sent + config.ttl - config.margin(),
            lost: None,
            renewals: 0,
            renewal_failures: 0,
        }));
        let renewer = tokio::spawn(renew_loop(
            client.clone(),
            key.to_string(),
            holder.clone(),
            config,
            state.clone(),
        ));
        Lease {
            key: key.to_string(),
            holder,
            config,
            client: client.clone(),
            state,
            renewer,
        }
    }

    /// `Ok` while the lease is ours; [`LeaseError::Lost`] once it is not
    /// (taken over, or unrenewed past its time), and forever after. A writer
    /// calls this before every write.
    pub fn check(&self) -> Result<(), LeaseError> {
        check_state(&self.key, &self.state)
    }

    /// A handle that answers [`Lease::check`] for this lease, for code that
    /// must refuse writes once it is lost (a store fencing its writes).
    pub fn watch(&self) -> LeaseWatch {
        LeaseWatch {
            key: self.key.clone(),
            state: self.state.clone(),
        }
    }

    /// This holder's random id, as written in the lease object.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The lease object's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The lease's timing.
    pub fn config(&self) -> LeaseConfig {
        self.config
    }

    /// Time left before the holder must stop, if it is still held.
    pub fn remaining(&self) -> Option<Duration> {
        self.check().ok()?;
        Some(
            lock(&self.state)
                .valid_until
                .saturating_duration_since(Instant::now()),
        )
    }

    /// Stops renewing and marks the lease `released` (by `If-Match` on the
    /// last ETag), so a standby takes it at once instead of after the TTL.
    /// If it was already lost, only stops.
    pub async fn release(self) -> Result<(), LeaseError> {
        self.renewer.abort();
        let (etag, seq) = {
            let mut s = lock(&self.state);
            let was = s.lost.replace(LostReason::Released);
            if was.is_some() || Instant::now() >= s.valid_until {
                return Ok(());
            }
            (s.etag.clone(), s.seq)
        };
        let record = new_record(&self.holder, seq.saturating_add(1), self.config, RELEASED);
        match self.client.replace(&self.key, record.bytes(), &etag).await {
            Ok(_) | Err(S3Error::Conflict { .. }) => Ok(()),
            Err(source) => Err(LeaseError::Store {
                key: self.key.clone(),
                source,
            }),
        }
    }

    /// Stops renewing without releasing: the lease expires after its TTL,
    /// as if this process had died. For failover tests and drills.
    pub fn abandon(self) {
        self.renewer.abort();
        lock(&self.state).lost = Some(LostReason::Released);
    }
}

/// Answers whether a [`Lease`] is still held, from anywhere; cheap to clone.
#[derive(Debug, Clone)]
pub struct LeaseWatch {
    key: String,
    state: Arc<Mutex<HolderState>>,
}

impl LeaseWatch {
    /// As [`Lease::check`].
    pub fn check(&self) -> Result<(), LeaseError> {
        check_state(&self.key, &self.state)
    }

    /// Time left before the holder must stop: a write under the lease
    /// must finish within it. An error once the lease is lost.
    pub fn remaining(&self) -> Result<Duration, LeaseError> {
        check_state(&self.key, &self.state)?;
        Ok(lock(&self.state)
            .valid_until
            .saturating_duration_since(Instant::now()))
    }

    /// Held or not, renewals made and failed, time left: for metrics.
    pub fn status(&self) -> crate::storage::HoldStatus {
        let held = check_state(&self.key, &self.state).is_ok();
        let s = lock(&self.state);
        crate::storage::HoldStatus {
            held,
            renewals: s.renewals,
            renewal_failures: s.renewal_failures,
            remaining: if held {
                s.valid_until.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            },
        }
    }
}

fn check_state(key: &str, state: &Mutex<HolderState>) -> Result<(), LeaseError> {
    let mut s = lock(state);
    if s.lost.is_none() && Instant::now() >= s.valid_until {
        s.lost = Some(LostReason::Expired);
    }
    match s.lost {
        None => Ok(()),
        Some(reason) => Err(LeaseError::Lost {
            key: key.to_string(),
            reason,
        }),
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

/// Renews every period until lost. Each renewal must finish before the
/// lease's time runs out, else the lease is lost.
async fn renew_loop(
    client: Client,
    key: String,
    holder: String,
    config: LeaseConfig,
    state: Arc<Mutex<HolderState>>,
) {
    loop {
        tokio::time::sleep(config.period()).await;
        let (etag, seq, valid_until) = {
            let s = lock(&state);
            if s.lost.is_some() {
                return;
            }
            (s.etag.clone(), s.seq.saturating_add(1), s.valid_until)
        };
        let record = new_record(&holder, seq, config, HELD);
        let sent = Instant::now();
        let budget = valid_until.saturating_duration_since(sent);
        let outcome =
            tokio::time::timeout(budget, client.replace(&key, record.bytes(), &etag)).await;
        let mut s = lock(&state);
        match outcome {
            Ok(Ok(new_etag)) => {
                s.etag = new_etag;
                s.seq = seq;
                s.valid_until = sent + config.ttl - config.margin();
                s.renewals = s.renewals.saturating_add(1);
            }
            Ok(Err(S3Error::Conflict { .. })) => {
                drop(s);
                // Our own earlier renewal may have been applied after we
                // stopped waiting for it: then the lease is still ours.
                let ours = match client.get(&key, MAX_LEASE_BYTES).await {
                    Ok(Some(object)) => Record::parse(&object.body)
                        .filter(|r| r.holder == holder && r.state == HELD)
                        .map(|r| (object.etag, r.seq)),
                    _ => None,
                };
                let mut s = lock(&state);
                s.renewal_failures = s.renewal_failures.saturating_add(1);
                match ours {
                    Some((etag, seq)) => {
                        s.etag = etag;
                        s.seq = seq;
                    }
                    None => {
                        s.lost = Some(LostReason::TakenOver);
                        return;
                    }
                }
            }
            // A transport failure or timeout: try again next period, if
            // there is time left; `check` notices when there is not.
            Ok(Err(_)) | Err(_) => {
                s.renewal_failures = s.renewal_failures.saturating_add(1);
                if Instant::now() >= s.valid_until {
                    s.lost = Some(LostReason::Expired);
                    return;
                }
            }
        }
    }
}

fn new_record(holder: &str, seq: u64, config: LeaseConfig, state: &str) -> Record {
    Record {
        rcpt_lease: LEASE_FORMAT,
        holder: holder.to_string(),
        seq,
        ttl_ms: u64::try_from(config.ttl.as_millis()).unwrap_or(u64::MAX),
        state: state.to_string(),
    }
}

/// 16 random bytes in hex, and the process id for people reading the lease.
fn new_holder_id() -> String {
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
}
