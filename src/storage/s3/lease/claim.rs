//! claim: taking the lease (spec/storage.md "The lease", "Take").

use std::time::{Duration, Instant};

use super::super::client::{Client, Etag, Object, S3Error};
use super::record::{
    FormerHolders, HELD, LeaseConfig, LeaseError, MAX_LEASE_BYTES, MIN_POLL, RELEASED, Record,
    new_record,
};

/// A lease just taken: its ETag, the `seq` written, and when the write
/// that took it was sent (the lease counts from then).
#[derive(Debug)]
pub(super) struct Taken {
    pub(super) etag: Etag,
    pub(super) seq: u64,
    pub(super) sent: Instant,
}

/// What to do after one look at the lease object.
enum Next {
    Taken(Taken),
    /// Look again after this long.
    Later(Duration),
}

/// One contender for the lease.
struct Claim<'a> {
    client: &'a Client,
    key: &'a str,
    config: LeaseConfig,
    wait: bool,
    holder: &'a str,
    former: &'a FormerHolders,
    /// The ETag being watched, and since when it has been unchanged.
    watched: Option<(Etag, Instant)>,
}

/// Takes the lease object `key` for `holder`: at once when there is none,
/// when it is released, or when it names one of `former` (once that
/// holder's writes are clear); else once its holder stops renewing (with
/// `wait`, or when seen unchanged from the first look). Without `wait`, a
/// holder seen renewing is [`LeaseError::Held`].
pub(super) async fn claim(
    client: &Client,
    key: &str,
    config: LeaseConfig,
    wait: bool,
    holder: &str,
    former: &FormerHolders,
) -> Result<Taken, LeaseError> {
    let mut contender = Claim {
        client,
        key,
        config,
        wait,
        holder,
        former,
        watched: None,
    };
    loop {
        let current = client
            .get(key, MAX_LEASE_BYTES)
            .await
            .map_err(|e| contender.store(e))?;
        // The watch starts once the answer is in: after the server
        // applied whatever write it shows, so after its writer sent it.
        let observed = Instant::now();
        let next = match current {
            None => contender.create().await?,
            Some(object) => contender.consider(object, observed).await?,
        };
        match next {
            Next::Taken(taken) => return Ok(taken),
            Next::Later(pause) => tokio::time::sleep(pause.max(MIN_POLL)).await,
        }
    }
}

impl Claim<'_> {
    fn store(&self, source: S3Error) -> LeaseError {
        LeaseError::Store {
            key: self.key.to_string(),
            source,
        }
    }

    /// No lease object: create it.
    async fn create(&self) -> Result<Next, LeaseError> {
        let record = new_record(self.holder, 0, self.config, HELD);
        let sent = Instant::now();
        match self.client.create(self.key, record.bytes()).await {
            Ok(created) => Ok(Next::Taken(Taken {
                etag: created.etag().clone(),
                seq: 0,
                sent,
            })),
            // Another contender was first: look at what it wrote.
            Err(S3Error::ExistsDifferent { .. }) => Ok(Next::Later(Duration::ZERO)),
            Err(e) => Err(self.store(e)),
        }
    }

    /// Take the lease over `object` (If-Match on its ETag).
    async fn take(&self, object: &Object, seq: u64) -> Result<Next, LeaseError> {
        let record = new_record(self.holder, seq, self.config, HELD);
        let sent = Instant::now();
        match self
            .client
            .replace(self.key, record.bytes(), &object.etag)
            .await
        {
            Ok(etag) => Ok(Next::Taken(Taken { etag, seq, sent })),
            // It moved (a renewal, another contender): look again.
            Err(S3Error::Conflict { .. }) => Ok(Next::Later(Duration::ZERO)),
            Err(e) => Err(self.store(e)),
        }
    }

    /// A lease object is there: take it if it is free, else watch it.
    async fn consider(&mut self, object: Object, observed: Instant) -> Result<Next, LeaseError> {
        let record = Record::parse(&object.body);
        let seq = record.as_ref().map_or(0, |r| r.seq.saturating_add(1));
        if record.as_ref().is_some_and(|r| r.state == RELEASED) {
            return self.take(&object, seq).await;
        }
        // Held by a holder of this process that no longer runs (or by this
        // very claim, a write of which landed late): nobody renews it.
        let ours = record.as_ref().and_then(|r| {
            (r.holder == self.holder)
                .then(Instant::now)
                .or_else(|| self.former.clear_at(&r.holder))
        });
        if let Some(clear_at) = ours {
            let left = clear_at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return self.take(&object, seq).await;
            }
            return Ok(Next::Later(left));
        }
        let since = self.watch(&object.etag, observed, record.as_ref())?;
        // Wait out the longer of the holder's TTL and ours.
        let their_ttl = record
            .as_ref()
            .map_or(self.config.ttl(), |r| Duration::from_millis(r.ttl_ms));
        let patience = their_ttl.max(self.config.ttl()) + self.config.margin();
        if since.elapsed() >= patience {
            return self.take(&object, seq).await;
        }
        // Look again after a period, or right when the watched lease
        // would expire if that comes sooner (a prompt take-over).
        let due = (since + self.config.ttl() + self.config.margin())
            .saturating_duration_since(Instant::now());
        Ok(Next::Later(due.min(self.config.poll())))
    }

    /// Since when `etag` has been seen unchanged. Without `wait`, an ETag
    /// that moved while watched is a live holder: [`LeaseError::Held`].
    fn watch(
        &mut self,
        etag: &Etag,
        observed: Instant,
        record: Option<&Record>,
    ) -> Result<Instant, LeaseError> {
        match &self.watched {
            Some((watched, since)) if watched == etag => Ok(*since),
            previous => {
                let moved = previous.is_some();
                self.watched = Some((etag.clone(), observed));
                if moved && !self.wait {
                    return Err(LeaseError::Held {
                        key: self.key.to_string(),
                        holder: record.map_or_else(|| "unknown".to_string(), |r| r.holder.clone()),
                    });
                }
                Ok(observed)
            }
        }
    }
}
