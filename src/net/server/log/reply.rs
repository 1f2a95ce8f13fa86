//! Replies and the request log line: every answer carries the headers
//! spec/service.md names.

use super::*;
use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use std::net::SocketAddr;

/// One answer: status, body, content type, cache policy and extra headers.
pub(super) struct Reply {
    pub(super) status: StatusCode,
    pub(super) body: Bytes,
    pub(super) content_type: &'static str,
    pub(super) cache: &'static str,
    pub(super) extra: Vec<(header::HeaderName, HeaderValue)>,
    /// The refusal's reason code, for the request log.
    pub(super) error: Option<&'static str>,
}

impl Reply {
    pub(super) fn json(status: StatusCode, value: &impl serde::Serialize) -> Reply {
        let mut body = serde_json::to_vec(value).unwrap_or_default();
        body.push(b'\n');
        Reply {
            status,
            body: Bytes::from(body),
            content_type: "application/json",
            cache: CACHE_NONE,
            extra: Vec::new(),
            error: None,
        }
    }

    pub(super) fn error(status: StatusCode, reason: &'static str, detail: &str) -> Reply {
        let mut r = Reply::json(
            status,
            &serde_json::json!({"error": reason, "detail": detail}),
        );
        r.error = Some(reason);
        r
    }

    /// `GET /metrics`: the exposition, never cached.
    pub(super) fn metrics(text: String) -> Reply {
        Reply {
            status: StatusCode::OK,
            body: Bytes::from(text),
            content_type: crate::net::server::metrics::METRICS_CONTENT_TYPE,
            cache: CACHE_NONE,
            extra: Vec::new(),
            error: None,
        }
    }

    /// An HTML page, under a Content-Security-Policy that forbids scripts.
    pub(super) fn page(html: String) -> Reply {
        use crate::net::server::html::{PAGE_CONTENT_TYPE, PAGE_CSP};
        Reply {
            status: StatusCode::OK,
            body: Bytes::from(html),
            content_type: PAGE_CONTENT_TYPE,
            cache: CACHE_NONE,
            extra: vec![
                (
                    header::CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static(PAGE_CSP),
                ),
                (
                    header::REFERRER_POLICY,
                    HeaderValue::from_static("no-referrer"),
                ),
            ],
            error: None,
        }
    }

    pub(super) fn not_found() -> Reply {
        Reply::error(StatusCode::NOT_FOUND, "not_found", "no such public object")
    }

    pub(super) fn method_not_allowed(allow: &'static str) -> Reply {
        let mut r = Reply::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &format!("allowed: {allow}"),
        );
        r.extra
            .push((header::ALLOW, HeaderValue::from_static(allow)));
        r
    }

    pub(super) fn busy(reason: &'static str, detail: &str) -> Reply {
        let mut r = Reply::error(StatusCode::SERVICE_UNAVAILABLE, reason, detail);
        r.extra
            .push((header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS)));
        r
    }

    pub(super) fn into_response(self, head: bool) -> Response<Full<Bytes>> {
        let len = self.body.len();
        let body = if head { Bytes::new() } else { self.body };
        let mut resp = Response::new(Full::new(body));
        *resp.status_mut() = self.status;
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static(self.cache));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        for (k, v) in self.extra {
            h.insert(k, v);
        }
        resp
    }
}

/// One request log line (spec/service.md "Request log").
#[derive(serde::Serialize)]
pub(super) struct RequestLine<'a> {
    pub(super) time_ms: u64,
    pub(super) remote: SocketAddr,
    pub(super) method: &'a str,
    pub(super) path: &'a str,
    pub(super) status: u16,
    pub(super) bytes: usize,
    pub(super) ms: f64,
    pub(super) error: Option<&'static str>,
}

/// The first `max` bytes of `text`, cut at a character boundary.
pub(super) fn truncated(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}
