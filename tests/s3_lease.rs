//! The sequencer lease against a real server (radosgw): one holder at a
//! time, renewal, hand-over on release and on expiry, and a holder cut off
//! by a network partition (a loopback proxy the test can cut) that loses
//! the lease before its successor takes it and gets a typed error.
//! Skipped, with the reason on stderr, when `RCPT_S3_ENDPOINT` is not set.
//! No assertion depends on timing; measured hand-over times are printed.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::faultproxy::{Fault, FaultProxy, Kind, Plan, Script};
use support::s3 as s3_support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rcpt::storage::s3::{
    BlockingClient, Endpoint, FormerHolders, Lease, LeaseConfig, LeaseError, Location, LostReason,
    Settings,
};

const TTL: Duration = Duration::from_secs(2);

fn config() -> LeaseConfig {
    LeaseConfig::new(TTL).unwrap()
}

/// A client of its own (own runtime and connection pool): another process, in effect.
fn contender(settings: &Settings, location: &Location) -> BlockingClient {
    BlockingClient::new(settings.clone(), location).unwrap()
}

fn acquire(s3: &BlockingClient, key: &str, wait: bool) -> Result<Lease, LeaseError> {
    s3.block_on(Lease::acquire(s3.client(), key, config(), wait))
}

/// [`Lease::acquire_after`] without waiting, by a process that
/// remembers its `former` holders.
fn taken_back(s3: &BlockingClient, key: &str, former: &FormerHolders) -> Result<Lease, LeaseError> {
    s3.block_on(Lease::acquire_after(
        s3.client(),
        key,
        config(),
        false,
        former,
    ))
}

/// Polls `f` every 5 ms until it is true, for at most `limit`; false if never.
fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(5));
    }
    f()
}

#[test]
fn two_contenders_exactly_one_holds() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    for round in 0..3 {
        let loc = s3_support::fresh_location(&bucket, "lease-race");
        let key = loc.key(".rcpt/lease");
        let results: Vec<Result<(BlockingClient, Lease), LeaseError>> = thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let (settings, loc, key) = (&settings, &loc, &key);
                    scope.spawn(move || {
                        let s3 = contender(settings, loc);
                        acquire(&s3, key, false).map(|lease| (s3, lease))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let holders: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        let refused = results
            .iter()
            .filter(|r| matches!(r, Err(LeaseError::Held { .. })))
            .count();
        assert_eq!(
            (holders.len(), refused),
            (1, 1),
            "round {round}: {results:?}"
        );
        let (s3, lease) = holders[0];
        assert!(lease.check().is_ok());
        let record = s3.get(&key, 4096).unwrap().unwrap();
        let text = String::from_utf8(record.body.to_vec()).unwrap();
        assert!(
            text.contains(lease.holder()),
            "the lease object names its holder: {text}"
        );
    }
}

#[test]
fn a_renewing_holder_keeps_the_lease_past_many_ttls() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let loc = s3_support::fresh_location(&bucket, "lease-renew");
    let key = loc.key(".rcpt/lease");
    let a = contender(&settings, &loc);
    let lease = acquire(&a, &key, false).unwrap();
    let first = a.head(&key).unwrap().unwrap().etag;
    thread::sleep(TTL * 2);
    assert!(
        lease.check().is_ok(),
        "renewed, so still held after two TTLs"
    );
    assert_ne!(
        a.head(&key).unwrap().unwrap().etag,
        first,
        "renewals moved the ETag"
    );
    // A contender that will not wait sees a live holder and gives up.
    let b = contender(&settings, &loc);
    match acquire(&b, &key, false) {
        Err(LeaseError::Held { holder, .. }) => assert_eq!(holder, lease.holder()),
        other => panic!("expected Held, got {other:?}"),
    }
    assert!(lease.check().is_ok());
}

#[test]
fn release_hands_over_to_a_standby() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let loc = s3_support::fresh_location(&bucket, "lease-release");
    let key = loc.key(".rcpt/lease");
    let a = contender(&settings, &loc);
    let lease_a = acquire(&a, &key, false).unwrap();
    let handover = thread::scope(|scope| {
        let standby = scope.spawn(|| {
            let b = contender(&settings, &loc);
            let lease = acquire(&b, &key, true).unwrap();
            (Instant::now(), b, lease)
        });
        thread::sleep(TTL);
        let released_at = Instant::now();
        a.block_on(lease_a.release()).unwrap();
        let (taken_at, b, lease_b) = standby.join().unwrap();
        assert!(lease_b.check().is_ok());
        drop(b);
        taken_at.saturating_duration_since(released_at)
    });
    eprintln!("measured: release to standby holding: {handover:?} (TTL {TTL:?})");
}

#[test]
fn a_standby_takes_over_when_the_holder_dies() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let loc = s3_support::fresh_location(&bucket, "lease-expiry");
    let key = loc.key(".rcpt/lease");
    let a = contender(&settings, &loc);
    let lease_a = acquire(&a, &key, false).unwrap();
    let holder_a = lease_a.holder().to_string();
    let (b, lease_b, failover) = thread::scope(|scope| {
        let standby = scope.spawn(|| {
            let b = contender(&settings, &loc);
            let lease = acquire(&b, &key, true).unwrap();
            (Instant::now(), b, lease)
        });
        thread::sleep(TTL);
        // As a SIGKILL would: renewals stop, nothing is released.
        let died_at = Instant::now();
        lease_a.abandon();
        let (taken_at, b, lease_b) = standby.join().unwrap();
        (b, lease_b, taken_at.saturating_duration_since(died_at))
    });
    assert!(lease_b.check().is_ok());
    assert_ne!(lease_b.holder(), holder_a);
    let text = String::from_utf8(b.get(&key, 4096).unwrap().unwrap().body.to_vec()).unwrap();
    assert!(text.contains(lease_b.holder()), "{text}");
    eprintln!("measured: holder stopped to standby holding: {failover:?} (TTL {TTL:?})");
}

#[test]
fn a_holder_whose_lease_is_overwritten_loses_it_on_its_next_renewal() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let loc = s3_support::fresh_location(&bucket, "lease-stolen");
    let key = loc.key(".rcpt/lease");
    let a = contender(&settings, &loc);
    let lease = acquire(&a, &key, false).unwrap();
    // Someone writes the lease object without the protocol (an operator, a
    // buggy tool): the holder's next If-Match renewal is refused.
    a.put_overwrite(&key, Bytes::from_static(b"{\"not\":\"a lease\"}"))
        .unwrap();
    assert!(
        eventually(TTL * 5, || lease.check().is_err()),
        "the holder must notice within its TTL"
    );
    match lease.check() {
        Err(LeaseError::Lost { reason, .. }) => assert_eq!(reason, LostReason::TakenOver),
        other => panic!("expected Lost(TakenOver), got {other:?}"),
    }
    // Lost is for good.
    thread::sleep(TTL / 2);
    assert!(lease.check().is_err());
    assert_eq!(
        &a.get(&key, 4096).unwrap().unwrap().body[..],
        b"{\"not\":\"a lease\"}"
    );
}

/// The holder is partitioned from the server (its connections cut, new
/// ones refused). Its renewals fail, its time runs out, and only then does
/// the standby take over; when the partition heals, the old holder's next
/// write is refused with a typed error and it never overwrites the lease.
#[test]
fn a_partitioned_holder_expires_before_its_successor_takes_over() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let loc = s3_support::fresh_location(&bucket, "lease-partition");
    let key = loc.key(".rcpt/lease");
    let proxy = Proxy::start(&settings.endpoint.authority);
    let via_proxy = Settings {
        endpoint: Endpoint::parse(&format!("http://{}", proxy.authority)).unwrap(),
        ..settings.clone()
    };
    let a = contender(&via_proxy, &loc);
    let lease_a = acquire(&a, &key, false).unwrap();
    let b = contender(&settings, &loc);
    let (lease_b, a_state_when_b_took_over, gap) = thread::scope(|scope| {
        let standby = scope.spawn(|| {
            let lease = acquire(&b, &key, true).unwrap();
            // The instant B holds the lease, A must already know it is out.
            let a_state = lease_a.check();
            (Instant::now(), lease, a_state)
        });
        // Cut right after a renewal lands (its remaining time jumps), so no
        // renewal is in flight: A's last renewal is the one B watches.
        let mut last = lease_a.remaining().unwrap();
        assert!(eventually(TTL, || {
            let now = lease_a.remaining().unwrap_or_default();
            let renewed = now > last;
            last = now;
            renewed
        }));
        let cut_at = Instant::now();
        proxy.cut();
        let (taken_at, lease_b, a_state) = standby.join().unwrap();
        (lease_b, a_state, taken_at.saturating_duration_since(cut_at))
    });
    match a_state_when_b_took_over {
        Err(LeaseError::Lost { reason, .. }) => assert_eq!(reason, LostReason::Expired),
        other => panic!("A still believed it held the lease when B took it: {other:?}"),
    }
    eprintln!("measured: partition to successor holding: {gap:?} (TTL {TTL:?})");
    proxy.heal();
    thread::sleep(TTL);
    assert!(
        lease_b.check().is_ok(),
        "the old holder never disturbed the new one"
    );
    assert!(matches!(lease_a.check(), Err(LeaseError::Lost { .. })));
    let text = String::from_utf8(b.get(&key, 4096).unwrap().unwrap().body.to_vec()).unwrap();
    assert!(text.contains(lease_b.holder()), "{text}");
}

/// A client of the store that talks through `proxy`.
fn through(proxy: &FaultProxy, settings: &Settings, location: &Location) -> BlockingClient {
    let via = Settings {
        endpoint: Endpoint::parse(&proxy.url()).unwrap(),
        ..settings.clone()
    };
    contender(&via, location)
}

/// A lease key under a fresh prefix, a fault proxy in front of the store
/// (no faults until scripted), and a client talking through it.
fn behind_proxy(name: &str) -> Option<(Settings, Location, String, FaultProxy, BlockingClient)> {
    let (settings, bucket) = s3_support::server()?;
    let loc = s3_support::fresh_location(&bucket, name);
    let key = loc.key(".rcpt/lease");
    let proxy = FaultProxy::start(&settings.endpoint.url(), Plan::clean());
    let a = through(&proxy, &settings, &loc);
    Some((settings, loc, key, proxy, a))
}

/// The lease object's `state` and `holder`, read directly.
fn lease_record(s3: &BlockingClient, key: &str) -> (String, String) {
    let body = s3.get(key, 4096).unwrap().unwrap().body;
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    (
        v["state"].as_str().unwrap().to_string(),
        v["holder"].as_str().unwrap().to_string(),
    )
}

/// A contender that will not wait takes the lease; how long it took. A
/// lease left `held` by a holder that stopped cannot be taken before the
/// contender has watched it unchanged for TTL + TTL/10, so a take in less
/// than the TTL means the lease was free.
fn take_at_once(settings: &Settings, location: &Location, key: &str) -> Duration {
    let b = contender(settings, location);
    let started = Instant::now();
    let lease = acquire(&b, key, false).unwrap();
    let took = started.elapsed();
    assert_eq!(
        lease_record(&b, key),
        ("held".into(), lease.holder().into())
    );
    took
}

/// The release races a renewal whose answer comes late: the store applied
/// the renewal (the ETag moved), its answer is stalled, and the release's
/// `If-Match` on the ETag the holder knew is refused. The release reads the
/// object back, finds its own renewal, and releases over it: the object
/// says `released`, and the next writer takes it at once instead of
/// waiting out the TTL.
#[test]
fn a_release_racing_a_renewal_answered_late_still_releases() {
    let Some((settings, loc, key, proxy, a)) = behind_proxy("lease-release-race") else {
        return;
    };
    let lease = acquire(&a, &key, false).unwrap();
    proxy.script(Script {
        kind: Kind::LeaseRenew,
        faults: vec![Fault::Stall(TTL / 2)],
        then_down: Duration::ZERO,
    });
    assert!(
        eventually(TTL, || proxy.forwarded(Kind::LeaseRenew) == 1),
        "no renewal reached the store: {:?}",
        proxy.events()
    );
    // The renewal is applied and its answer held back: release now.
    let direct = contender(&settings, &loc);
    assert_eq!(
        lease_record(&direct, &key),
        ("held".into(), lease.holder().into())
    );
    a.block_on(lease.release()).unwrap();
    assert_eq!(
        lease_record(&direct, &key).0,
        "released",
        "the release left the lease held"
    );
    assert_eq!(
        proxy.forwarded(Kind::LeaseRelease),
        2,
        "the first release was refused and the second written over the late renewal"
    );
    let took = take_at_once(&settings, &loc, &key);
    assert!(
        took < TTL,
        "the next writer waited {took:?}: the lease was left held"
    );
    eprintln!(
        "measured: release racing a late renewal answer, next writer holding after {took:?} (TTL {TTL:?})"
    );
}

/// The release is applied and its every answer lost, and the store stays
/// down past the client's read-back: the release reports the store's
/// failure, and the lease is released all the same; the next writer
/// takes it at once.
#[test]
fn a_release_whose_answers_are_lost_still_hands_over() {
    let Some((settings, loc, key, proxy, a)) = behind_proxy("lease-release-lost") else {
        return;
    };
    let lease = acquire(&a, &key, false).unwrap();
    proxy.script(Script {
        kind: Kind::LeaseRelease,
        faults: vec![Fault::DropAnswer],
        then_down: Duration::from_secs(6),
    });
    let outcome = a.block_on(lease.release());
    assert!(
        matches!(outcome, Err(LeaseError::Store { .. })),
        "{outcome:?}"
    );
    proxy.set_down(false);
    let direct = contender(&settings, &loc);
    assert_eq!(lease_record(&direct, &key).0, "released");
    let took = take_at_once(&settings, &loc, &key);
    assert!(took < TTL, "the next writer waited {took:?}");
}

/// A take the store applied whose answers were all lost (the store down
/// past the read-back): the take fails, and the lease object names a
/// holder that never knew it held it. The same process's next take
/// recognises its own former holder and takes the lease at once; a
/// process without that memory would wait out the TTL.
#[test]
fn a_take_whose_answers_were_lost_is_taken_back_at_once() {
    let Some((settings, loc, key, proxy, a)) = behind_proxy("lease-take-lost") else {
        return;
    };
    let former = FormerHolders::new();
    let direct = contender(&settings, &loc);
    // First a lease to take over (its holder releases it), so the lost take
    // is an If-Match; then one on a fresh key, an If-None-Match.
    let fresh = s3_support::fresh_location(&loc.bucket, "lease-take-lost").key(".rcpt/lease");
    for (n, key) in [key.clone(), fresh].iter().enumerate() {
        if n == 0 {
            let first = acquire(&direct, key, false).unwrap();
            direct.block_on(first.release()).unwrap();
        }
        proxy.script(Script {
            kind: Kind::LeaseTake,
            faults: vec![Fault::DropAnswer],
            then_down: Duration::from_secs(6),
        });
        let lost = taken_back(&a, key, &former);
        assert!(matches!(lost, Err(LeaseError::Store { .. })), "{lost:?}");
        proxy.set_down(false);
        let (state, ghost) = lease_record(&direct, key);
        assert_eq!(state, "held", "the lost take was applied");
        let started = Instant::now();
        let lease = taken_back(&a, key, &former).unwrap();
        let took = started.elapsed();
        assert!(took < TTL, "took {took:?}: waited out its own lost take");
        assert_ne!(lease.holder(), ghost);
        assert_eq!(
            lease_record(&direct, key),
            ("held".into(), lease.holder().into())
        );
        a.block_on(lease.release()).unwrap();
    }
}

/// The store goes down for longer than the TTL: the holder's renewals
/// fail and its lease expires (lost for good). Once the store is back, the
/// same process takes the lease back as soon as its old holder's writes
/// are clear (its expiry plus two margins), not after watching it for a
/// TTL; a stranger still waits the TTL out.
#[test]
fn a_lease_lost_in_an_outage_is_taken_back_once_its_writes_are_clear() {
    let Some((settings, loc, key, proxy, a)) = behind_proxy("lease-outage") else {
        return;
    };
    let former = FormerHolders::new();
    let lease = taken_back(&a, &key, &former).unwrap();
    let old = lease.holder().to_string();
    proxy.set_down(true);
    assert!(eventually(TTL * 2, || lease.check().is_err()));
    assert!(matches!(
        lease.check(),
        Err(LeaseError::Lost {
            reason: LostReason::Expired,
            ..
        })
    ));
    drop(lease);
    assert_eq!(former.len(), 1);
    thread::sleep(TTL / 2);
    proxy.set_down(false);
    let direct = contender(&settings, &loc);
    assert_eq!(lease_record(&direct, &key), ("held".into(), old.clone()));
    let started = Instant::now();
    let lease = taken_back(&a, &key, &former).unwrap();
    let took = started.elapsed();
    assert!(took < TTL, "took {took:?}");
    assert_ne!(lease.holder(), old);
    eprintln!(
        "measured: lease lost in an outage, taken back {took:?} after the store was back (TTL {TTL:?})"
    );
}

/// A TCP proxy on loopback that can cut every connection and refuse new ones.
struct Proxy {
    authority: String,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Vec::new()));
        let (cut2, open2, upstream) = (cut.clone(), open.clone(), upstream.to_string());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if cut2.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                {
                    let mut open = open2.lock().unwrap();
                    open.push(client.try_clone().unwrap());
                    open.push(server.try_clone().unwrap());
                }
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Proxy {
            authority,
            cut,
            open,
        }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
    });
}
