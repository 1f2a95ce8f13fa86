//! serve: the witness service's routes and answers: `POST /add-checkpoint`
//! to [`Witness::add_checkpoint`] and its result mapped to a status, the
//! latest cosigned checkpoint by origin hash, the status page.

use super::status::{WitnessMetrics, answer_reason, witness_page};
use super::{
    ADD_CHECKPOINT_PATH, MAX_WITNESS_BODY_BYTES, MAX_WITNESS_CONNECTIONS, WITNESS_BODY_TIMEOUT,
    WITNESS_HEADER_TIMEOUT,
};
use crate::net::server::{
    HttpMetrics, Limits, Refusals, Reply, RequestSink, Routes, Service, bind, read_body,
    runtime_with_stop, serve,
};
use crate::witness::{AddCheckpointError, Witness, error_chain};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

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

/// A bound, not yet running, witness service.
#[derive(Debug)]
pub struct WitnessServer {
    witness: Arc<Witness>,
    listener: std::net::TcpListener,
}

impl WitnessServer {
    /// Bind `addr` for `witness`.
    pub fn bind(witness: Witness, addr: &str) -> Result<WitnessServer, WitnessServeError> {
        let listener = bind(addr).map_err(|source| WitnessServeError::Bind {
            addr: addr.to_string(),
            source,
        })?;
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
        let (runtime, stop) = runtime_with_stop().map_err(WitnessServeError::Start)?;
        let service = WitnessService {
            metrics: Arc::new(WitnessMetrics::new(Arc::clone(&self.witness), ROUTES)),
            witness: self.witness,
        };
        let limits = Limits {
            max_connections: MAX_WITNESS_CONNECTIONS,
            header_timeout: WITNESS_HEADER_TIMEOUT,
        };
        serve(&runtime, self.listener, limits, stop, service, sink)
            .map_err(WitnessServeError::Start)
    }
}

/// The witness service: the witness and its metrics.
struct WitnessService {
    witness: Arc<Witness>,
    metrics: Arc<WitnessMetrics>,
}

impl Service for WitnessService {
    fn route(&self, req: Request<Incoming>) -> impl Future<Output = Reply> + Send {
        route(req, self)
    }

    fn http_metrics(&self) -> &HttpMetrics {
        self.metrics.http()
    }
}

/// The witness's routes, as its metrics name them.
const ROUTES: Routes = Routes {
    name_of: route_name,
    write_path: ADD_CHECKPOINT_PATH,
    write_family: (
        "rcpt_witness_add_checkpoint_answers",
        "add-checkpoint answers, by HTTP status and reason (ok for 200)",
    ),
};

/// The witness answers refusals in text (tlog-witness).
const REFUSALS: Refusals = Refusals::Text;

/// A refusal whose reason is the tlog-witness meaning of its status
/// (`conflict` for 409, ...: the fixed set the metrics label with).
fn refused(status: StatusCode, detail: String) -> Reply {
    REFUSALS.refuse(status, answer_reason(status.as_u16()), detail)
}

/// The origin hash of a monitoring path `/<64 hex>/checkpoint`.
fn monitoring_hash(path: &str) -> Option<&str> {
    let hash = path.strip_prefix('/')?.strip_suffix("/checkpoint")?;
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    (hash.len() == 64 && hash.bytes().all(hex)).then_some(hash)
}

async fn route(req: Request<Incoming>, ctx: &WitnessService) -> Reply {
    let path = req.uri().path();
    if path == ADD_CHECKPOINT_PATH {
        return if req.method() == Method::POST {
            add_checkpoint(req, ctx).await
        } else {
            REFUSALS.method_not_allowed("POST")
        };
    }
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    if path == "/" || path == "/metrics" {
        return if read {
            operator_view(path == "/", ctx).await
        } else {
            REFUSALS.method_not_allowed("GET, HEAD")
        };
    }
    let Some(hash) = monitoring_hash(path).map(str::to_owned) else {
        return REFUSALS.refuse(StatusCode::NOT_FOUND, "not_found", "no such path".into());
    };
    if !read {
        return REFUSALS.method_not_allowed("GET, HEAD");
    }
    let witness = Arc::clone(&ctx.witness);
    let found = tokio::task::spawn_blocking(move || witness.checkpoint_by_origin_hash(&hash)).await;
    match found {
        Ok(Ok(Some(note))) => Reply::text(StatusCode::OK, note),
        Ok(Ok(None)) => REFUSALS.refuse(
            StatusCode::NOT_FOUND,
            "not_found",
            "this witness never cosigned a checkpoint of that log".to_string(),
        ),
        Ok(Err(e)) => refused(StatusCode::INTERNAL_SERVER_ERROR, error_chain(&e)),
        Err(_) => refused(
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
async fn operator_view(page: bool, ctx: &WitnessService) -> Reply {
    let witness = Arc::clone(&ctx.witness);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let made = if page {
        tokio::task::spawn_blocking(move || Reply::page(witness_page(&witness, now))).await
    } else {
        // The metrics read the records too: the same blocking pool.
        let metrics = Arc::clone(&ctx.metrics);
        tokio::task::spawn_blocking(move || Reply::metrics(metrics.scrape())).await
    };
    made.unwrap_or_else(|_| {
        refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the page task stopped".to_string(),
        )
    })
}

/// `POST /add-checkpoint`: body (capped, timed), then the witness's checks
/// and durable compare-and-swap off the async workers.
async fn add_checkpoint(req: Request<Incoming>, ctx: &WitnessService) -> Reply {
    let bytes = match read_body(req, MAX_WITNESS_BODY_BYTES, WITNESS_BODY_TIMEOUT).await {
        Ok(bytes) => bytes,
        Err(e) => return refused(e.status(), error_chain(&e)),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let witness = Arc::clone(&ctx.witness);
    let done = tokio::task::spawn_blocking(move || witness.add_checkpoint(&bytes, now)).await;
    let Ok(result) = done else {
        return refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the cosigning task stopped".to_string(),
        );
    };
    match result {
        Ok(cosigned) => Reply::text(StatusCode::OK, cosigned.lines),
        Err(AddCheckpointError::Refused(r)) => {
            let status =
                StatusCode::from_u16(r.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Reply::new(status, r.content_type(), Bytes::from(r.body()))
                .refusal(answer_reason(status.as_u16()), error_chain(&r))
        }
        Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, error_chain(&e)),
    }
}

#[cfg(test)]
mod tests {
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
