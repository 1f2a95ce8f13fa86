//! request: what the kit does around every request of a service: route it
//! through the service ([`Service`]), count it in the service's metrics,
//! write its request log line ([`RequestLine`]), and answer it; and the
//! one capped, timed body read ([`read_body`]).

use crate::net::server::metrics::HttpMetrics;
use crate::net::server::reply::Reply;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header;
use hyper::{Method, Request, Response, StatusCode};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest request path written to the request log (bytes, cut at a
/// character boundary).
pub const MAX_LOGGED_PATH_BYTES: usize = 128;

/// Receives one JSON line per request (the CLI writes them to stderr).
pub type RequestSink = Arc<dyn Fn(&str) + Send + Sync>;

/// What a service gives the kit: its routes, and the counters of its
/// requests. Its state is the implementing type.
pub(crate) trait Service: Send + Sync + 'static {
    /// Answer one request.
    fn route(&self, req: Request<Incoming>) -> impl Future<Output = Reply> + Send;
    /// Where the requests and the write route's answers are counted.
    fn http_metrics(&self) -> &HttpMetrics;
}

/// The context every request of a service runs in: the service, where its
/// request lines go, and how many requests it answered.
pub(crate) struct Ctx<S> {
    service: S,
    sink: RequestSink,
    requests: AtomicU64,
}

impl<S: Service> Ctx<S> {
    /// The context of `service`, its lines going to `sink`.
    pub(crate) fn new(service: S, sink: RequestSink) -> Ctx<S> {
        Ctx {
            service,
            sink,
            requests: AtomicU64::new(0),
        }
    }

    /// Requests answered so far.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Route one request, count it, write its log line and answer it.
    pub(crate) async fn handle(
        &self,
        req: Request<Incoming>,
        remote: SocketAddr,
    ) -> Response<Full<Bytes>> {
        let start = Instant::now();
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let reply = self.service.route(req).await;
        self.service.http_metrics().answered(&method, &path, &reply);
        let line = RequestLine {
            time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            remote,
            method: method.as_str(),
            path: truncated(&path, MAX_LOGGED_PATH_BYTES),
            status: reply.status().as_u16(),
            bytes: reply.body_len(),
            ms: (start.elapsed().as_secs_f64() * 1e6).round() / 1e3,
            error: reply.reason(),
            detail: reply.detail(),
        };
        if let Ok(text) = serde_json::to_string(&line) {
            (self.sink)(&text);
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        reply.into_response(method == Method::HEAD)
    }
}

/// One request log line (spec/service.md "Request log"), the same for
/// both services.
#[derive(Debug, serde::Serialize)]
pub(crate) struct RequestLine<'a> {
    /// When it was answered, Unix milliseconds.
    pub(crate) time_ms: u64,
    /// The peer.
    pub(crate) remote: SocketAddr,
    /// The method.
    pub(crate) method: &'a str,
    /// The path, its first [`MAX_LOGGED_PATH_BYTES`] bytes.
    pub(crate) path: &'a str,
    /// The status sent.
    pub(crate) status: u16,
    /// Bytes of the body (as for a GET).
    pub(crate) bytes: usize,
    /// Time to answer, milliseconds.
    pub(crate) ms: f64,
    /// A refusal's reason code, else null.
    pub(crate) error: Option<&'static str>,
    /// A refusal's text for people; absent when not a refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<&'a str>,
}

/// The first `max` bytes of `text`, cut at a character boundary.
pub(crate) fn truncated(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

/// Why a request body was not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BodyError {
    /// Over the limit, by `Content-Length` (then unread) or while read.
    #[error("the body is over the {max}-byte limit")]
    TooLarge {
        /// The limit.
        max: usize,
    },
    /// Not complete within the time allowed.
    #[error("the request body did not arrive in time")]
    Timeout,
    /// The connection failed while the body was read.
    #[error("the request body could not be read")]
    Unreadable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl BodyError {
    /// The status that answers it: 413, 408 or 400.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            BodyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::Timeout => StatusCode::REQUEST_TIMEOUT,
            BodyError::Unreadable(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// Its reason code: `too_large`, `body_timeout` or `body_unreadable`.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            BodyError::TooLarge { .. } => "too_large",
            BodyError::Timeout => "body_timeout",
            BodyError::Unreadable(_) => "body_unreadable",
        }
    }
}

/// The body of `req`: at most `max` bytes, refused unread when its
/// `Content-Length` says more, and complete within `timeout`.
pub(crate) async fn read_body(
    req: Request<Incoming>,
    max: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge { max });
    }
    let body = Limited::new(req.into_body(), max);
    match tokio::time::timeout(timeout, body.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(BodyError::TooLarge { max }),
        Ok(Err(e)) => Err(BodyError::Unreadable(e)),
        Err(_) => Err(BodyError::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncated("abc", 2), "ab");
        assert_eq!(truncated("aé", 2), "a");
        assert_eq!(truncated("abc", 10), "abc");
    }

    #[test]
    fn a_line_without_a_refusal_has_no_detail() {
        let line = |error, detail| RequestLine {
            time_ms: 1,
            remote: "127.0.0.1:9".parse().unwrap(),
            method: "GET",
            path: "/",
            status: 200,
            bytes: 3,
            ms: 0.5,
            error,
            detail,
        };
        let ok: serde_json::Value = serde_json::to_value(line(None, None)).unwrap();
        assert_eq!(ok["error"], serde_json::Value::Null);
        assert!(ok.get("detail").is_none());
        let refused = serde_json::to_value(line(Some("conflict"), Some("size 5"))).unwrap();
        assert_eq!(refused["error"], "conflict");
        assert_eq!(refused["detail"], "size 5");
    }

    #[test]
    fn body_errors_map_to_their_statuses() {
        assert_eq!(BodyError::TooLarge { max: 1 }.status(), 413);
        assert_eq!(BodyError::Timeout.status(), 408);
        assert_eq!(BodyError::Unreadable("x".into()).status(), 400);
    }
}
