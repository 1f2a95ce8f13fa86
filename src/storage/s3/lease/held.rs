//! held: a lease this process holds: its renewals, its checks, and its
//! release (spec/storage.md "The lease").

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::super::client::{Client, Etag, S3Error};
use super::claim::claim;
use super::record::{
    FormerHolders, HELD, LeaseConfig, LeaseError, LostReason, MAX_LEASE_BYTES, RELEASE_ROUNDS,
    RELEASED, Record, new_holder_id, new_record,
};

/// The holder's view of its lease.
#[derive(Debug)]
struct HolderState {
    etag: Etag,
    /// The `seq` of the last write sent (answered or not): every write
    /// sends a higher one, so no two writes of a holder carry the same bytes.
    seq: u64,
    /// The lease is ours strictly before this instant (unless `lost`).
    valid_until: Instant,
    lost: Option<LostReason>,
    /// Renewals that succeeded, and that failed (for metrics).
    renewals: u64,
    renewal_failures: u64,
}

impl HolderState {
    /// The next write's `seq`, with the ETag it is conditioned on.
    fn next_write(&mut self) -> (Etag, u64) {
        self.seq = self.seq.saturating_add(1);
        (self.etag.clone(), self.seq)
    }
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
    /// Where this holder is remembered once it ends without a release
    /// known to have landed (taken with [`Lease::acquire_after`]).
    former: Option<FormerHolders>,
    /// Ended: released, remembered, or abandoned.
    ended: bool,
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
        Lease::take(client, key, config, wait, &FormerHolders::new(), None).await
    }

    /// [`Lease::acquire`] by a process that held this lease before: a lease
    /// object naming one of `former` is taken as soon as that holder's
    /// writes are clear, not after a TTL. A take that fails (its answer
    /// lost, say) is remembered in `former`, and so is this lease when it
    /// ends without a release known to have landed.
    pub async fn acquire_after(
        client: &Client,
        key: &str,
        config: LeaseConfig,
        wait: bool,
        former: &FormerHolders,
    ) -> Result<Lease, LeaseError> {
        Lease::take(client, key, config, wait, former, Some(former.clone())).await
    }

    async fn take(
        client: &Client,
        key: &str,
        config: LeaseConfig,
        wait: bool,
        former: &FormerHolders,
        remember: Option<FormerHolders>,
    ) -> Result<Lease, LeaseError> {
        let holder = new_holder_id();
        match claim(client, key, config, wait, &holder, former).await {
            Ok(taken) => {
                let state = Arc::new(Mutex::new(HolderState {
                    etag: taken.etag,
                    seq: taken.seq,
                    valid_until: taken.sent + config.ttl() - config.margin(),
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
                Ok(Lease {
                    key: key.to_string(),
                    holder,
                    config,
                    client: client.clone(),
                    state,
                    renewer,
                    former: remember,
                    ended: false,
                })
            }
            Err(e) => {
                // A take of ours may have landed unanswered: it held nothing
                // and wrote nothing under it, so it is clear at once.
                if let Some(former) = &remember {
                    former.add(&holder, Instant::now());
                }
                Err(e)
            }
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
    /// A refusal is settled by reading the object: a renewal of ours that
    /// was sent before and answered late (or not at all) moved the ETag,
    /// and the release is written over it; another holder's object, or one
    /// already released, is left alone. Only while the lease is valid: a
    /// lease already lost or past its time only stops (and is remembered,
    /// when taken with [`Lease::acquire_after`]).
    pub async fn release(mut self) -> Result<(), LeaseError> {
        self.renewer.abort();
        let start = {
            let mut s = lock(&self.state);
            let was = s.lost.replace(LostReason::Released);
            (was.is_none() && Instant::now() < s.valid_until).then(|| s.next_write())
        };
        let outcome = match start {
            Some((etag, seq)) => self.mark_released(etag, seq).await,
            None => Ok(false),
        };
        self.end(matches!(outcome, Ok(true)));
        outcome.map(|_| ())
    }

    /// Writes the `released` record over `etag`, reading back after each
    /// refusal: `true` once the object is ours released, or not ours.
    async fn mark_released(&self, mut etag: Etag, mut seq: u64) -> Result<bool, LeaseError> {
        let store = |source| LeaseError::Store {
            key: self.key.clone(),
            source,
        };
        for _ in 0..RELEASE_ROUNDS {
            let record = new_record(&self.holder, seq, self.config, RELEASED);
            match self.client.replace(&self.key, record.bytes(), &etag).await {
                Ok(_) => return Ok(true),
                Err(S3Error::Conflict { .. }) => {}
                Err(e) => return Err(store(e)),
            }
            let now = self.client.get(&self.key, MAX_LEASE_BYTES).await;
            let Some(object) = now.map_err(store)? else {
                return Ok(true);
            };
            let valid = Instant::now() < lock(&self.state).valid_until;
            match Record::parse(&object.body) {
                // A late renewal of ours: release over it, while still ours.
                Some(r) if r.held_by(&self.holder) && valid => {
                    etag = object.etag;
                    seq = seq.max(r.seq).saturating_add(1);
                }
                Some(r) if r.held_by(&self.holder) => return Ok(false),
                _ => return Ok(true),
            }
        }
        Ok(false)
    }

    /// The lease ends: unless its release landed, remembered as a former
    /// holder, clear once every write it may have sent has had its time.
    fn end(&mut self, released: bool) {
        if self.ended {
            return;
        }
        self.ended = true;
        if let (false, Some(former)) = (released, &self.former) {
            let s = lock(&self.state);
            let last_write = s.valid_until.min(Instant::now());
            // As a contender would: the margin on both sides of the expiry.
            former.add(&self.holder, last_write + self.config.margin() * 2);
        }
    }

    /// Stops renewing without releasing: the lease expires after its TTL,
    /// as if this process had died (nothing is remembered). For failover
    /// tests and drills.
    pub fn abandon(mut self) {
        self.renewer.abort();
        self.ended = true;
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
        self.end(false);
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
            let mut s = lock(&state);
            if s.lost.is_some() {
                return;
            }
            let (etag, seq) = s.next_write();
            (etag, seq, s.valid_until)
        };
        let record = new_record(&holder, seq, config, HELD);
        let sent = Instant::now();
        let budget = valid_until.saturating_duration_since(sent);
        let outcome =
            tokio::time::timeout(budget, client.replace(&key, record.bytes(), &etag)).await;
        let go_on = match outcome {
            Ok(Ok(new_etag)) => {
                let mut s = lock(&state);
                s.etag = new_etag;
                s.valid_until = sent + config.ttl() - config.margin();
                s.renewals = s.renewals.saturating_add(1);
                true
            }
            Ok(Err(S3Error::Conflict { .. })) => refused(&client, &key, &holder, &state).await,
            // A transport failure or timeout: try again next period, if
            // there is time left; `check` notices when there is not.
            Ok(Err(_)) | Err(_) => failed(&state),
        };
        if !go_on {
            return;
        }
    }
}

/// A renewal was refused: read the object. Ours still (an earlier renewal
/// of ours landed after we stopped waiting for it): keep it, on its ETag,
/// without counting its time (we do not know when it was sent). Another's,
/// or none: lost. No answer to the read: a failed renewal.
async fn refused(client: &Client, key: &str, holder: &str, state: &Mutex<HolderState>) -> bool {
    let ours = match client.get(key, MAX_LEASE_BYTES).await {
        Ok(Some(object)) => Record::parse(&object.body)
            .filter(|r| r.held_by(holder))
            .map(|r| (object.etag, r.seq)),
        Ok(None) => None,
        Err(_) => return failed(state),
    };
    let mut s = lock(state);
    s.renewal_failures = s.renewal_failures.saturating_add(1);
    match ours {
        Some((etag, seq)) => {
            s.etag = etag;
            s.seq = s.seq.max(seq);
            true
        }
        None => {
            s.lost = Some(LostReason::TakenOver);
            false
        }
    }
}

/// A renewal got no answer: go on while there is time left.
fn failed(state: &Mutex<HolderState>) -> bool {
    let mut s = lock(state);
    s.renewal_failures = s.renewal_failures.saturating_add(1);
    if Instant::now() >= s.valid_until {
        s.lost = Some(LostReason::Expired);
        return false;
    }
    true
}
