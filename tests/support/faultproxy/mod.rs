//! A fault-injecting HTTP/1.1 proxy for the S3 tests: it sits between
//! rcpt and radosgw on 127.0.0.1 and, request by request, passes the
//! exchange through or breaks it in one of the ways an object store (or
//! the network in front of it) fails:
//!
//! | fault             | what the client sees                          | reached the store |
//! |-------------------|-----------------------------------------------|-------------------|
//! | `Status(500/503)` | a 5xx with an S3 error body                   | no                |
//! | `DropRequest`     | the connection closed before any answer       | no                |
//! | `DropAnswer`      | the connection closed before any answer       | **yes**           |
//! | `LostAs(500)`     | a 5xx instead of the store's answer           | **yes**           |
//! | `Stall(d)`        | the answer, `d` later than the store sent it  | yes (in time)     |
//! | `Late(d)`         | the answer, `d` later (the store sees it late)| yes (late)        |
//!
//! `DropAnswer` and `LostAs` are the hard ones: a conditional write the
//! store applied whose answer is lost. Retried, it meets its own first
//! write; if the retries fail too (the store goes down right after), the
//! client is left not knowing, and only a read says what happened.
//!
//! Each request is classified ([`Kind`]): reads, other writes, the
//! checkpoint's compare-and-swap, and the lease's take, renewal and
//! release (told apart by the lease body: `released`, or a holder the
//! proxy saw the store accept last for that key, or a new one). Faults
//! come from three sources, first match wins:
//!
//! 1. an outage: `set_down(true)`, or the store down for a while after a
//!    scripted or drawn lost answer: every request fails (503 and dropped
//!    connections in turn);
//! 2. a [`Script`]: the next requests of one kind meet given faults in
//!    turn, then the store may go down for a while (a scripted sequence);
//! 3. the [`Plan`]: a seeded draw per request, so a run repeats its fault
//!    sequence (not its timing); [`seed`] takes `RCPT_FAULT_SEED` to
//!    replay one. Its `lost` entries make lost answers of a kind likely,
//!    each followed by an outage of a drawn length (shorter or longer than
//!    the client's retries and read-back).
//!
//! Counters say what was injected; [`FaultProxy::events`] lists each lost
//! answer and scripted fault. Each client connection gets its own upstream
//! connection, reopened when the store closes it.
#![allow(dead_code)]

mod http;

use http::{Message, exchange, header, read_request, status_answer};
use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// One way to break an exchange (see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Pass,
    Status(u16),
    DropRequest,
    DropAnswer,
    LostAs(u16),
    Stall(Duration),
    Late(Duration),
}

/// What a request is, as far as the faults care.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// GET, HEAD, a listing.
    Read,
    /// Any other PUT or DELETE.
    Write,
    /// A conditional PUT of the public checkpoint (`…/checkpoint`).
    CheckpointCas,
    /// A conditional PUT of the lease by a holder the store has not
    /// accepted last for that key (a take).
    LeaseTake,
    /// A conditional PUT of the lease by the holder the store accepted last.
    LeaseRenew,
    /// A conditional PUT marking the lease `released`.
    LeaseRelease,
}

/// Which faults, how often (per mille of requests; the rest pass).
#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    /// (fault, per-mille), for any request.
    pub faults: Vec<(Fault, u32)>,
    /// (kind, per-mille): the store applies the write, its answer is lost
    /// (`DropAnswer` or `LostAs(500)`, drawn), then the store is down for
    /// a time drawn in `lost_down`.
    pub lost: Vec<(Kind, u32)>,
    pub lost_down: (Duration, Duration),
}

impl Plan {
    /// The mix the fault tests use: about one request in four breaks.
    pub fn rough(seed: u64) -> Plan {
        Plan {
            seed,
            faults: vec![
                (Fault::Status(503), 60),
                (Fault::Status(500), 30),
                (Fault::DropRequest, 40),
                (Fault::DropAnswer, 50),
                (Fault::Stall(Duration::from_millis(150)), 40),
                (Fault::Late(Duration::from_millis(150)), 30),
            ],
            lost: Vec::new(),
            lost_down: (Duration::ZERO, Duration::ZERO),
        }
    }

    /// Lost answers of the checkpoint's and the lease's conditional writes,
    /// each followed by an outage of 0.2 to 4 s (shorter than the client's
    /// retries, or long enough that its read-back fails too and a lease of
    /// 2 s runs out), on top of a lighter [`Plan::rough`] mix.
    pub fn lost_answers(seed: u64) -> Plan {
        let mut plan = Plan::rough(seed);
        for (_, weight) in &mut plan.faults {
            *weight /= 2;
        }
        plan.lost = vec![
            (Kind::CheckpointCas, 120),
            (Kind::LeaseTake, 250),
            (Kind::LeaseRenew, 40),
            (Kind::LeaseRelease, 250),
        ];
        plan.lost_down = (Duration::from_millis(200), Duration::from_secs(4));
        plan
    }

    /// Every request passes.
    pub fn clean() -> Plan {
        Plan {
            seed: 0,
            faults: Vec::new(),
            lost: Vec::new(),
            lost_down: (Duration::ZERO, Duration::ZERO),
        }
    }
}

/// A scripted sequence: the next requests of `kind` meet `faults` in
/// turn (before any drawn fault); after the last, the store is down for
/// `then_down` (zero: not at all).
#[derive(Clone, Debug)]
pub struct Script {
    pub kind: Kind,
    pub faults: Vec<Fault>,
    pub then_down: Duration,
}

/// The seed of a random plan: `RCPT_FAULT_SEED` (decimal, or hex with
/// `0x`) to replay a run, else a new one from the clock. The caller prints
/// it, so a failing run can be replayed.
pub fn seed() -> u64 {
    if let Ok(text) = std::env::var("RCPT_FAULT_SEED") {
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        };
        return parsed.expect("RCPT_FAULT_SEED: a decimal or 0x-hex number");
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// What the proxy did, by kind.
#[derive(Default, Debug)]
pub struct Counts {
    pub requests: AtomicU64,
    pub passed: AtomicU64,
    pub status: AtomicU64,
    pub drop_request: AtomicU64,
    pub drop_answer: AtomicU64,
    pub lost_as: AtomicU64,
    pub stall: AtomicU64,
    pub late: AtomicU64,
    pub down: AtomicU64,
}

impl Counts {
    /// One line for a test's output.
    pub fn summary(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "{} requests: {} passed, {} 5xx, {} dropped before the store, {} answers lost after the store applied them ({} dropped, {} answered 5xx), {} stalled answers, {} late requests, {} refused while down",
            g(&self.requests),
            g(&self.passed),
            g(&self.status),
            g(&self.drop_request),
            g(&self.drop_answer) + g(&self.lost_as),
            g(&self.drop_answer),
            g(&self.lost_as),
            g(&self.stall),
            g(&self.late),
            g(&self.down),
        )
    }

    /// Requests that broke, all kinds.
    pub fn broken(&self) -> u64 {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        g(&self.status)
            + g(&self.drop_request)
            + g(&self.drop_answer)
            + g(&self.lost_as)
            + g(&self.stall)
            + g(&self.late)
            + g(&self.down)
    }
}

/// A drawn fault and the outage that follows it.
type Dealt = (Fault, Duration);

struct Shared {
    upstream: SocketAddr,
    plan: Mutex<(Plan, super::Rng)>,
    down: AtomicBool,
    down_until: Mutex<Option<Instant>>,
    down_turn: AtomicU64,
    scripts: Mutex<HashMap<Kind, VecDeque<Dealt>>>,
    /// Per lease key, the holder whose write the store last accepted.
    lease_holders: Mutex<HashMap<String, String>>,
    /// Requests of each kind that reached the store and were answered by it.
    forwarded: Mutex<HashMap<Kind, u64>>,
    events: Mutex<Vec<String>>,
    counts: Counts,
}

/// A running proxy (its threads live as long as the test process).
pub struct FaultProxy {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `upstream`
    /// (`http://host:port`).
    pub fn start(upstream: &str, plan: Plan) -> FaultProxy {
        let authority = upstream
            .strip_prefix("http://")
            .expect("an http:// upstream")
            .trim_end_matches('/');
        let upstream: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(authority)
            .expect("upstream address")
            .next()
            .expect("upstream address");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let rng = super::Rng(plan.seed | 1);
        let shared = Arc::new(Shared {
            upstream,
            plan: Mutex::new((plan, rng)),
            down: AtomicBool::new(false),
            down_until: Mutex::new(None),
            down_turn: AtomicU64::new(0),
            scripts: Mutex::new(HashMap::new()),
            lease_holders: Mutex::new(HashMap::new()),
            forwarded: Mutex::new(HashMap::new()),
            events: Mutex::new(Vec::new()),
            counts: Counts::default(),
        });
        let s = Arc::clone(&shared);
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let s = Arc::clone(&s);
                thread::spawn(move || serve_connection(conn, &s));
            }
        });
        FaultProxy { addr, shared }
    }

    /// `http://127.0.0.1:PORT`, for `--endpoint`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replaces the plan (and its draw) from the next request on.
    pub fn set_plan(&self, plan: Plan) {
        let rng = super::Rng(plan.seed | 1);
        *self.shared.plan.lock().unwrap() = (plan, rng);
    }

    /// An outage (`true`): every request fails until it ends. Ending it
    /// also ends an outage a lost answer started.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
        if !down {
            *self.shared.down_until.lock().unwrap() = None;
        }
    }

    /// Queues a scripted sequence (after any queued for the same kind).
    pub fn script(&self, script: Script) {
        let mut scripts = self.shared.scripts.lock().unwrap();
        let queue = scripts.entry(script.kind).or_default();
        let last = script.faults.len().saturating_sub(1);
        for (i, fault) in script.faults.into_iter().enumerate() {
            let down = if i == last {
                script.then_down
            } else {
                Duration::ZERO
            };
            queue.push_back((fault, down));
        }
    }

    /// Scripted faults not yet dealt, for `kind`.
    pub fn scripted_left(&self, kind: Kind) -> usize {
        let scripts = self.shared.scripts.lock().unwrap();
        scripts.get(&kind).map_or(0, VecDeque::len)
    }

    /// Requests of `kind` the store answered (whatever the client saw).
    pub fn forwarded(&self, kind: Kind) -> u64 {
        let forwarded = self.shared.forwarded.lock().unwrap();
        forwarded.get(&kind).copied().unwrap_or(0)
    }

    /// Whether an outage is on now.
    pub fn is_down(&self) -> bool {
        is_down(&self.shared)
    }

    /// Each lost answer and scripted fault dealt, in order.
    pub fn events(&self) -> Vec<String> {
        self.shared.events.lock().unwrap().clone()
    }

    pub fn counts(&self) -> &Counts {
        &self.shared.counts
    }
}

fn is_down(s: &Shared) -> bool {
    s.down.load(Ordering::SeqCst)
        || s.down_until
            .lock()
            .unwrap()
            .is_some_and(|until| Instant::now() < until)
}

/// The kind of a request, from its head and body.
fn classify(s: &Shared, request: &Message) -> (Kind, String) {
    let head = String::from_utf8_lossy(&request.head);
    let mut start = head.split(' ');
    let method = start.next().unwrap_or("");
    let path = start.next().unwrap_or("").split('?').next().unwrap_or("");
    let conditional =
        header(&head, "if-match").is_some() || header(&head, "if-none-match").is_some();
    let kind = match method {
        "GET" | "HEAD" => Kind::Read,
        "PUT" if conditional && path.ends_with("/checkpoint") => Kind::CheckpointCas,
        "PUT" if conditional && path.ends_with("/.rcpt/lease") => {
            let record: serde_json::Value =
                serde_json::from_slice(&request.body).unwrap_or_default();
            let holder = record["holder"].as_str().unwrap_or("");
            let holders = s.lease_holders.lock().unwrap();
            if record["state"] == "released" {
                Kind::LeaseRelease
            } else if holders.get(path).is_some_and(|h| h == holder) {
                Kind::LeaseRenew
            } else {
                Kind::LeaseTake
            }
        }
        _ => Kind::Write,
    };
    (kind, path.to_string())
}

/// The fault for a request of `kind`: an outage, a script, or the plan.
fn draw(s: &Shared, kind: Kind) -> Dealt {
    if is_down(s) {
        s.counts.down.fetch_add(1, Ordering::Relaxed);
        let turn = s.down_turn.fetch_add(1, Ordering::Relaxed);
        let fault = if turn.is_multiple_of(2) {
            Fault::Status(503)
        } else {
            Fault::DropRequest
        };
        return (fault, Duration::ZERO);
    }
    let scripted = s
        .scripts
        .lock()
        .unwrap()
        .get_mut(&kind)
        .and_then(VecDeque::pop_front);
    if let Some((fault, down)) = scripted {
        s.events.lock().unwrap().push(format!(
            "{kind:?}: {fault:?} (scripted), then down {down:?}"
        ));
        return (fault, down);
    }
    let mut guard = s.plan.lock().unwrap();
    let (plan, rng) = &mut *guard;
    if let Some((_, weight)) = plan.lost.iter().find(|(k, _)| *k == kind)
        && ((rng.next() % 1000) as u32) < *weight
    {
        let fault = if rng.next().is_multiple_of(2) {
            Fault::DropAnswer
        } else {
            Fault::LostAs(500)
        };
        let (lo, hi) = plan.lost_down;
        let span = (hi.saturating_sub(lo).as_millis() as u64).max(1);
        let down = lo + Duration::from_millis(rng.next() % span);
        s.events
            .lock()
            .unwrap()
            .push(format!("{kind:?}: {fault:?} (drawn), then down {down:?}"));
        return (fault, down);
    }
    let mut roll = (rng.next() % 1000) as u32;
    for (fault, weight) in &plan.faults {
        if roll < *weight {
            return (*fault, Duration::ZERO);
        }
        roll -= weight;
    }
    (Fault::Pass, Duration::ZERO)
}

/// Before the store: answers a fault that never reaches it (`false`: the
/// connection is done), or delays a late request.
fn before_store(fault: Fault, s: &Shared, to_client: &mut TcpStream) -> Option<bool> {
    match fault {
        Fault::Status(code) => {
            s.counts.status.fetch_add(1, Ordering::Relaxed);
            Some(to_client.write_all(&status_answer(code)).is_ok())
        }
        Fault::DropRequest => {
            s.counts.drop_request.fetch_add(1, Ordering::Relaxed);
            let _ = to_client.shutdown(Shutdown::Both);
            Some(false)
        }
        Fault::Late(d) => {
            s.counts.late.fetch_add(1, Ordering::Relaxed);
            thread::sleep(d);
            None
        }
        _ => None,
    }
}

/// Records what the store accepted: the lease's holder, and the count of
/// forwarded requests of `kind`.
fn note_answer(s: &Shared, kind: Kind, path: &str, request: &Message, answer: &Message) {
    *s.forwarded.lock().unwrap().entry(kind).or_default() += 1;
    let ok = answer.head.starts_with(b"HTTP/1.1 200") || answer.head.starts_with(b"HTTP/1.0 200");
    if ok && matches!(kind, Kind::LeaseTake | Kind::LeaseRenew) {
        let record: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
        if let Some(holder) = record["holder"].as_str() {
            let mut holders = s.lease_holders.lock().unwrap();
            holders.insert(path.to_string(), holder.to_string());
        }
    }
}

fn serve_connection(client: TcpStream, s: &Shared) {
    let Ok(client_read) = client.try_clone() else {
        return;
    };
    let mut from_client = BufReader::new(client_read);
    let mut to_client = client;
    let mut upstream: Option<(TcpStream, BufReader<TcpStream>)> = None;
    loop {
        let Ok(Some((request, method))) = read_request(&mut from_client) else {
            return;
        };
        s.counts.requests.fetch_add(1, Ordering::Relaxed);
        let (kind, path) = classify(s, &request);
        let (fault, then_down) = draw(s, kind);
        let open = match before_store(fault, s, &mut to_client) {
            Some(open) => open,
            None => match exchange(&mut upstream, s.upstream, &request, &method) {
                Ok(answer) => {
                    note_answer(s, kind, &path, &request, &answer);
                    if answer.close {
                        upstream = None;
                    }
                    after_store(fault, s, &answer, &mut to_client) && !request.close
                }
                Err(_) => false,
            },
        };
        if !then_down.is_zero() {
            *s.down_until.lock().unwrap() = Some(Instant::now() + then_down);
        }
        if !open {
            let _ = to_client.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// After the store answered: passes the answer on, stalled, lost or
/// replaced as `fault` says; `false` when the connection is done.
fn after_store(fault: Fault, s: &Shared, answer: &Message, to_client: &mut TcpStream) -> bool {
    match fault {
        Fault::DropAnswer => {
            s.counts.drop_answer.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        Fault::LostAs(code) => {
            s.counts.lost_as.fetch_add(1, Ordering::Relaxed);
            return to_client.write_all(&status_answer(code)).is_ok();
        }
        Fault::Stall(d) => {
            s.counts.stall.fetch_add(1, Ordering::Relaxed);
            thread::sleep(d);
        }
        Fault::Pass => {
            s.counts.passed.fetch_add(1, Ordering::Relaxed);
        }
        _ => {}
    }
    let sent = to_client
        .write_all(&answer.head)
        .and_then(|()| to_client.write_all(&answer.body));
    sent.is_ok() && !answer.close
}
