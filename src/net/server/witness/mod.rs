//! witness: a witness over HTTP, C2SP tlog-witness v1
//! (spec/witness.md "Witness service").
//!
//! Boundary: transport only. `POST /add-checkpoint` bodies go, size-capped
//! and within a time limit, to [`Witness::add_checkpoint`], which parses,
//! decides, cosigns and commits the per-origin compare-and-swap before it
//! returns; this module maps its result to the status, content type and
//! body tlog-witness names (200, 400, 403, 404, 409 `text/x.tlog.size`,
//! 422). `GET /<origin hash>/checkpoint` serves the latest cosigned
//! checkpoint ("Monitor Retrieval Mechanism"). Anything else is 404, a
//! known path with another method 405.

use crate::net::server::accept::serve_until_stopped;
mod status;
use crate::limits::MAX_ADD_CHECKPOINT_BYTES;
use crate::witness::{AddCheckpointError, TEXT_CONTENT_TYPE, Witness, error_chain};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use status::{WitnessMetrics, witness_page};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// Largest `add-checkpoint` body read: the parser's own limit
/// (`limits::MAX_ADD_CHECKPOINT_BYTES`: an old line, 63 proof lines, a note).
pub const MAX_WITNESS_BODY_BYTES: usize = MAX_ADD_CHECKPOINT_BYTES;
/// Most open connections; the accept loop waits for one to close beyond it.
pub const MAX_WITNESS_CONNECTIONS: usize = 1024;
/// Time allowed for a request's headers to arrive.
pub const WITNESS_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed for a request body to arrive.
pub const WITNESS_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest request path written to the request log.
const MAX_LOGGED_PATH_BYTES: usize = 128;
/// The one write path.
pub const ADD_CHECKPOINT_PATH: &str = "/add-checkpoint";

/// Why the witness service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WitnessServeError {
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime or a signal handler could not start.
    #[error("starting the witness service")]
    Start(#[source] std::io::Error),
}

/// Receives one JSON line per request (the CLI writes them to stderr).
pub type RequestSink = Arc<dyn Fn(&str) + Send + Sync>;

/// A bound, not yet running, witness service.
#[derive(Debug)]
pub struct WitnessServer {
    witness: Arc<Witness>,
    listener: std::net::TcpListener,
}

impl WitnessServer {
    /// Bind `addr` for `witness`.
    pub fn bind(witness: Witness, addr: &str) -> Result<WitnessServer, WitnessServeError> {
        let listener =
            std::net::TcpListener::bind(addr).map_err(|source| WitnessServeError::Bind {
                addr: addr.to_string(),
                source,
            })?;
        listener
            .set_nonblocking(true)
            .map_err(WitnessServeError::Start)?;
        Ok(WitnessServer {
            witness: Arc::new(witness),
            listener,
        })
    }

    /// The bound address (the port, when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until SIGTERM or SIGINT, then finish the requests in flight;
    /// returns the number of requests answered.
    pub fn run(self, sink: RequestSink) -> Result<u64, WitnessServeError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(WitnessServeError::Start)?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let signals = runtime.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            ))
        });
        let (mut term, mut int) = signals.map_err(WitnessServeError::Start)?;
        runtime.spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            let _ = stop_tx.send(true);
        });
        let ctx = Arc::new(Ctx {
            metrics: Arc::new(WitnessMetrics::new(Arc::clone(&self.witness))),
            witness: self.witness,
            sink,
            requests: AtomicU64::new(0),
        });
        let listener = self.listener;
        let ran = runtime.block_on(async {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let ctx = Arc::clone(&ctx);
            let handle = move |req, remote| {
                let ctx = Arc::clone(&ctx);
                async move { handle(req, &ctx, remote).await }
            };
            serve_until_stopped(
                listener,
                MAX_WITNESS_CONNECTIONS,
                WITNESS_HEADER_TIMEOUT,
                stop_rx,
                handle,
            )
            .await;
            Ok::<_, std::io::Error>(())
        });
        ran.map_err(WitnessServeError::Start)?;
        Ok(ctx.requests.load(Ordering::Relaxed))
    }
}

struct Ctx {
    witness: Arc<Witness>,
    metrics: Arc<WitnessMetrics>,
    sink: RequestSink,
    requests: AtomicU64,
}

/// One answer.
struct Reply {
    status: StatusCode,
    body: Bytes,
    content_type: &'static str,
    allow: Option<&'static str>,
    /// An HTML page: sent with a Content-Security-Policy forbidding scripts.
    page: bool,
    /// For the request log: why it was refused.
    detail: Option<String>,
}

impl Reply {
    fn text(status: StatusCode, body: String) -> Reply {
        Reply {
            status,
            body: Bytes::from(body),
            content_type: TEXT_CONTENT_TYPE,
            allow: None,
            page: false,
            detail: None,
        }
    }

    fn refused(status: StatusCode, detail: String) -> Reply {
        let mut r = Reply::text(status, format!("{detail}\n"));
        r.detail = Some(detail);
        r
    }

    fn method_not_allowed(allow: &'static str) -> Reply {
        let mut r = Reply::refused(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method not allowed; allowed: {allow}"),
        );
        r.allow = Some(allow);
        r
    }

    fn into_response(self, head: bool) -> Response<Full<Bytes>> {
        let len = self.body.len();
        let body = if head { Bytes::new() } else { self.body };
        let mut resp = Response::new(Full::new(body));
        *resp.status_mut() = self.status;
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(allow) = self.allow {
            h.insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        if self.page {
            h.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(crate::net::server::html::PAGE_CSP),
            );
            h.insert(
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            );
        }
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        resp
    }
}

/// One request log line.
#[derive(serde::Serialize)]
struct RequestLine<'a> {
    time_ms: u64,
    remote: SocketAddr,
    method: &'a str,
    path: &'a str,
    status: u16,
    ms: f64,
    detail: Option<&'a str>,
}

async fn handle(req: Request<Incoming>, ctx: &Ctx, remote: SocketAddr) -> Response<Full<Bytes>> {
    let start = Instant::now();
    let method = req.method().clone();
    let path: String = req
        .uri()
        .path()
        .chars()
        .take(MAX_LOGGED_PATH_BYTES)
        .collect();
    let reply = route(req, ctx).await;
    ctx.metrics
        .request(route_name(&path), reply.status.as_u16());
    if path == ADD_CHECKPOINT_PATH && method == Method::POST {
        ctx.metrics.answer(reply.status.as_u16());
    }
    let line = RequestLine {
        time_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        remote,
        method: method.as_str(),
        path: &path,
        status: reply.status.as_u16(),
        ms: (start.elapsed().as_secs_f64() * 1e6).round() / 1e3,
        detail: reply.detail.as_deref(),
    };
    if let Ok(text) = serde_json::to_string(&line) {
        (ctx.sink)(&text);
    }
    ctx.requests.fetch_add(1, Ordering::Relaxed);
    reply.into_response(method == Method::HEAD)
}

/// The origin hash of a monitoring path `/<64 hex>/checkpoint`.
fn monitoring_hash(path: &str) -> Option<&str> {
    let hash = path.strip_prefix('/')?.strip_suffix("/checkpoint")?;
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    (hash.len() == 64 && hash.bytes().all(hex)).then_some(hash)
}

async fn route(req: Request<Incoming>, ctx: &Ctx) -> Reply {
    let path = req.uri().path();
    if path == ADD_CHECKPOINT_PATH {
        return if req.method() == Method::POST {
            add_checkpoint(req, ctx).await
        } else {
            Reply::method_not_allowed("POST")
        };
    }
    if path == "/" || path == "/metrics" {
        if !matches!(*req.method(), Method::GET | Method::HEAD) {
            return Reply::method_not_allowed("GET, HEAD");
        }
        return operator_view(path == "/", ctx).await;
    }
    let Some(hash) = monitoring_hash(path).map(str::to_owned) else {
        return Reply::refused(StatusCode::NOT_FOUND, "no such path".to_string());
    };
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return Reply::method_not_allowed("GET, HEAD");
    }
    let witness = Arc::clone(&ctx.witness);
    let found = tokio::task::spawn_blocking(move || witness.checkpoint_by_origin_hash(&hash)).await;
    match found {
        Ok(Ok(Some(note))) => Reply::text(StatusCode::OK, note),
        Ok(Ok(None)) => Reply::refused(
            StatusCode::NOT_FOUND,
            "this witness never cosigned a checkpoint of that log".to_string(),
        ),
        Ok(Err(e)) => Reply::refused(StatusCode::INTERNAL_SERVER_ERROR, error_chain(&e)),
        Err(_) => Reply::refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the state read stopped".to_string(),
        ),
    }
}

/// The fixed route name of a request path (a metrics label, never the path).
fn route_name(path: &str) -> &'static str {
    match path {
        "/" => "status",
        "/metrics" => "metrics",
        ADD_CHECKPOINT_PATH => "add-checkpoint",
        p if monitoring_hash(p).is_some() => "checkpoint",
        _ => "other",
    }
}

/// `GET /` (the page) or `GET /metrics`, both read from the witness's
/// records off the async workers.
async fn operator_view(page: bool, ctx: &Ctx) -> Reply {
    let witness = Arc::clone(&ctx.witness);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let made = if page {
        tokio::task::spawn_blocking(move || witness_page(&witness, now)).await
    } else {
        // The metrics read the records too: the same blocking pool.
        let metrics = Arc::clone(&ctx.metrics);
        tokio::task::spawn_blocking(move || metrics.scrape()).await
    };
    match made {
        Ok(body) => Reply {
            status: StatusCode::OK,
            body: Bytes::from(body),
            content_type: if page {
                crate::net::server::html::PAGE_CONTENT_TYPE
            } else {
                crate::net::server::metrics::METRICS_CONTENT_TYPE
            },
            allow: None,
            page,
            detail: None,
        },
        Err(_) => Reply::refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the page task stopped".to_string(),
        ),
    }
}

fn too_large() -> Reply {
    Reply::refused(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is over the {MAX_WITNESS_BODY_BYTES}-byte limit"),
    )
}

/// `POST /add-checkpoint`: body (capped, timed), then the witness's checks
/// and durable compare-and-swap off the async workers.
async fn add_checkpoint(req: Request<Incoming>, ctx: &Ctx) -> Reply {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_WITNESS_BODY_BYTES as u64) {
        return too_large();
    }
    let body = Limited::new(req.into_body(), MAX_WITNESS_BODY_BYTES);
    let bytes = match tokio::time::timeout(WITNESS_BODY_TIMEOUT, body.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return too_large(),
        Ok(Err(e)) => return Reply::refused(StatusCode::BAD_REQUEST, e.to_string()),
        Err(_) => {
            return Reply::refused(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time".to_string(),
            );
        }
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let witness = Arc::clone(&ctx.witness);
    let done = tokio::task::spawn_blocking(move || witness.add_checkpoint(&bytes, now)).await;
    let result = match done {
        Ok(r) => r,
        Err(_) => {
            return Reply::refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the cosigning task stopped".to_string(),
            );
        }
    };
    match result {
        Ok(cosigned) => Reply::text(StatusCode::OK, cosigned.lines),
        Err(AddCheckpointError::Refused(r)) => {
            let status =
                StatusCode::from_u16(r.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Reply {
                status,
                body: Bytes::from(r.body()),
                content_type: r.content_type(),
                allow: None,
                page: false,
                detail: Some(error_chain(&r)),
            }
        }
        Err(e) => Reply::refused(StatusCode::INTERNAL_SERVER_ERROR, error_chain(&e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn monitoring_paths() {
        let h = "ab".repeat(32);
        assert_eq!(monitoring_hash(&format!("/{h}/checkpoint")), Some(&*h));
        assert_eq!(
            monitoring_hash(&format!("/{}/checkpoint", "AB".repeat(32))),
            None
        );
        assert_eq!(monitoring_hash(&format!("/{h}x/checkpoint")), None);
        assert_eq!(monitoring_hash("/checkpoint"), None);
    }
}
