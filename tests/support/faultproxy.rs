//! A fault-injecting HTTP/1.1 proxy for the S3 tests: it sits between
//! rcpt and radosgw on 127.0.0.1 and, request by request, passes the
//! exchange through or breaks it in one of the ways an object store (or
//! the network in front of it) fails:
//!
//! | fault           | what the client sees                         | reached the store |
//! |-----------------|----------------------------------------------|-------------------|
//! | `Status(500/503)` | a 5xx with an S3 error body                 | no                |
//! | `DropRequest`   | the connection closed before any answer      | no                |
//! | `DropAnswer`    | the connection closed before any answer      | **yes**           |
//! | `Stall(d)`      | the answer, `d` later than the store sent it  | yes (in time)     |
//! | `Late(d)`       | the answer, `d` later (the store sees it late)| yes (late)        |
//!
//! `DropAnswer` is the hard one: a conditional write the store applied,
//! whose answer is lost, retried by the client, meets its own first write.
//!
//! The plan is a seeded draw per request, so a run is repeatable in its
//! fault sequence (not in timing). `set_down(true)` makes every request
//! fail (503 or a dropped connection, alternately) until `set_down(false)`:
//! an outage, for recovery times. Counters say what was injected.
//!
//! It speaks just enough HTTP/1.1 to find where each request and each
//! answer ends: `Content-Length` bodies, `Transfer-Encoding: chunked`
//! answers, no body for HEAD, 1xx, 204 and 304. Each client connection
//! gets its own upstream connection, reopened when the store closes it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// Longest request or answer head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;

/// One way to break an exchange (see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Pass,
    Status(u16),
    DropRequest,
    DropAnswer,
    Stall(Duration),
    Late(Duration),
}

/// Which faults, how often: weights out of the sum (the rest of 1000 is
/// `Pass`).
#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    /// (fault, per-mille).
    pub faults: Vec<(Fault, u32)>,
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
        }
    }

    /// Every request passes.
    pub fn clean() -> Plan {
        Plan {
            seed: 0,
            faults: Vec::new(),
        }
    }
}

/// What the proxy did, by kind.
#[derive(Default, Debug)]
pub struct Counts {
    pub requests: AtomicU64,
    pub passed: AtomicU64,
    pub status: AtomicU64,
    pub drop_request: AtomicU64,
    pub drop_answer: AtomicU64,
    pub stall: AtomicU64,
    pub late: AtomicU64,
    pub down: AtomicU64,
}

impl Counts {
    /// One line for a test's output.
    pub fn summary(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "{} requests: {} passed, {} 5xx, {} dropped before the store, {} answers lost after the store applied them, {} stalled answers, {} late requests, {} refused while down",
            g(&self.requests),
            g(&self.passed),
            g(&self.status),
            g(&self.drop_request),
            g(&self.drop_answer),
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
            + g(&self.stall)
            + g(&self.late)
            + g(&self.down)
    }
}

struct Shared {
    upstream: SocketAddr,
    plan: Mutex<(Plan, super::Rng)>,
    down: AtomicBool,
    down_turn: AtomicU64,
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
            down_turn: AtomicU64::new(0),
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

    /// An outage (`true`): every request fails until it ends.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
    }

    pub fn counts(&self) -> &Counts {
        &self.shared.counts
    }
}

fn draw(s: &Shared) -> Fault {
    if s.down.load(Ordering::SeqCst) {
        s.counts.down.fetch_add(1, Ordering::Relaxed);
        return if s
            .down_turn
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(2)
        {
            Fault::Status(503)
        } else {
            Fault::DropRequest
        };
    }
    let mut guard = s.plan.lock().unwrap();
    let (plan, rng) = &mut *guard;
    let mut roll = (rng.next() % 1000) as u32;
    for (fault, weight) in &plan.faults {
        if roll < *weight {
            return *fault;
        }
        roll -= weight;
    }
    Fault::Pass
}

/// One HTTP message as read: its head (start line and headers, with the
/// blank line) and its body bytes as sent (chunk framing included).
struct Message {
    head: Vec<u8>,
    body: Vec<u8>,
    /// The sender closes the connection after this message.
    close: bool,
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Reads a head up to and including the blank line; `None` at a clean EOF
/// before any byte.
fn read_head(r: &mut BufReader<TcpStream>) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = r
            .by_ref()
            .take(MAX_HEAD as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            if head.is_empty() {
                return Ok(None);
            }
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&line);
        if head.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
        if line == b"\r\n" || line == b"\n" {
            return Ok(Some(head));
        }
    }
}

fn read_exact_body(r: &mut BufReader<TcpStream>, n: usize) -> std::io::Result<Vec<u8>> {
    let mut body = vec![0u8; n];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// A chunked body as sent, through its last chunk and trailer.
fn read_chunked(r: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = Vec::new();
        r.by_ref().take(4096).read_until(b'\n', &mut line)?;
        body.extend_from_slice(&line);
        let size_text = String::from_utf8_lossy(&line);
        let size_text = size_text.trim().split(';').next().unwrap_or("").to_string();
        let size = usize::from_str_radix(&size_text, 16)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
        if size == 0 {
            // Trailer lines up to the blank one.
            loop {
                let mut t = Vec::new();
                r.by_ref().take(4096).read_until(b'\n', &mut t)?;
                body.extend_from_slice(&t);
                if t == b"\r\n" || t == b"\n" || t.is_empty() {
                    return Ok(body);
                }
            }
        }
        body.extend_from_slice(&read_exact_body(r, size + 2)?);
    }
}

fn read_request(r: &mut BufReader<TcpStream>) -> std::io::Result<Option<(Message, String)>> {
    let Some(head) = read_head(r)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&head).to_string();
    let method = text.split(' ').next().unwrap_or("").to_string();
    let body = match header(&text, "content-length") {
        Some(n) => read_exact_body(r, n.parse().unwrap_or(0))?,
        None => Vec::new(),
    };
    let close = header(&text, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    Ok(Some((Message { head, body, close }, method)))
}

fn read_answer(r: &mut BufReader<TcpStream>, method: &str) -> std::io::Result<Message> {
    let head = read_head(r)?.ok_or(std::io::ErrorKind::UnexpectedEof)?;
    let text = String::from_utf8_lossy(&head).to_string();
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let close = header(&text, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let no_body = method == "HEAD" || status / 100 == 1 || status == 204 || status == 304;
    let body = if no_body {
        Vec::new()
    } else if header(&text, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(r)?
    } else if let Some(n) = header(&text, "content-length") {
        read_exact_body(r, n.parse().unwrap_or(0))?
    } else {
        let mut rest = Vec::new();
        r.read_to_end(&mut rest)?;
        return Ok(Message {
            head,
            body: rest,
            close: true,
        });
    };
    Ok(Message { head, body, close })
}

fn status_answer(code: u16) -> Vec<u8> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{}</Code><Message>injected by the fault proxy</Message></Error>",
        if code == 503 {
            "SlowDown"
        } else {
            "InternalError"
        }
    );
    format!(
        "HTTP/1.1 {code} Injected\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
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
        let fault = draw(s);
        match fault {
            Fault::Status(code) => {
                s.counts.status.fetch_add(1, Ordering::Relaxed);
                if to_client.write_all(&status_answer(code)).is_err() {
                    return;
                }
                continue;
            }
            Fault::DropRequest => {
                s.counts.drop_request.fetch_add(1, Ordering::Relaxed);
                let _ = to_client.shutdown(Shutdown::Both);
                return;
            }
            Fault::Late(d) => {
                s.counts.late.fetch_add(1, Ordering::Relaxed);
                thread::sleep(d);
            }
            _ => {}
        }
        let answer = match exchange(&mut upstream, s.upstream, &request, &method) {
            Ok(a) => a,
            Err(_) => {
                let _ = to_client.shutdown(Shutdown::Both);
                return;
            }
        };
        match fault {
            Fault::DropAnswer => {
                s.counts.drop_answer.fetch_add(1, Ordering::Relaxed);
                let _ = to_client.shutdown(Shutdown::Both);
                return;
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
        if answer.close {
            upstream = None;
        }
        let sent = to_client
            .write_all(&answer.head)
            .and_then(|()| to_client.write_all(&answer.body));
        if sent.is_err() || answer.close || request.close {
            let _ = to_client.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Sends `request` upstream (reconnecting once if the kept connection was
/// closed by the store) and reads its answer.
fn exchange(
    upstream: &mut Option<(TcpStream, BufReader<TcpStream>)>,
    addr: SocketAddr,
    request: &Message,
    method: &str,
) -> std::io::Result<Message> {
    for fresh in [false, true] {
        if fresh || upstream.is_none() {
            let w = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
            let r = BufReader::new(w.try_clone()?);
            *upstream = Some((w, r));
        }
        let Some((w, r)) = upstream.as_mut() else {
            continue;
        };
        let sent = w
            .write_all(&request.head)
            .and_then(|()| w.write_all(&request.body));
        match sent.and_then(|()| read_answer(r, method)) {
            Ok(a) => return Ok(a),
            // A kept connection the store had closed: once more on a new one.
            Err(_) if !fresh => *upstream = None,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::ErrorKind::NotConnected.into())
}
