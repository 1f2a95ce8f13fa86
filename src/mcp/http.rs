//! http: the proxy on Streamable HTTP (spec/gate-mcp.md "Streamable
//! HTTP"; feature `net`).
//!
//! `--listen 127.0.0.1:PORT --upstream URL`: each POST's body is one
//! message, relayed by the same [`Relay`] as on stdio, forwarded to the
//! upstream endpoint with the MCP headers, and its answer (a JSON body, or
//! an SSE stream whose every event's data is relayed) returned. The body
//! decides: the `Mcp-Method` and `Mcp-Name` headers are never used to
//! route, and a request whose headers say otherwise than its body is
//! refused (400, `-32020` HeaderMismatch, MCP "Server Validation"). An
//! `Origin` that is not one of the allowed origins (by default the
//! loopback ones) is refused with 403 (MCP "Security"). The listener is a
//! loopback address. Bodies are bounded by `MAX_FRAME_BYTES`; an SSE answer
//! is relayed once the upstream stream ends (not event by event).

use super::frame::{self, code};
use super::relay::{Out, Relay};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;

/// Most connections served at once.
pub const MAX_HTTP_CONNECTIONS: usize = 256;
/// How long a client has to send its request headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the upstream has to answer one request.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(300);
/// JSON-RPC code of a header that disagrees with the body (MCP 2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;

/// The headers of the proxy's own `tools/list`, sent before a call it
/// holds: the client's (its session, protocol version, authorization),
/// with `Mcp-Method` (where the client sends it) naming what this body is,
/// and no call's `Mcp-Name` or `Mcp-Param-*`: a server of the 2026-07-28
/// era refuses a body its headers do not describe, as this proxy does.
fn own_list_headers(headers: &HeaderMap) -> HeaderMap {
    let mut own = headers.clone();
    own.remove("mcp-name");
    let params: Vec<HeaderName> = own
        .keys()
        .filter(|n| n.as_str().starts_with("mcp-param-"))
        .cloned()
        .collect();
    for name in params {
        own.remove(name);
    }
    if own.contains_key("mcp-method") {
        own.insert("mcp-method", HeaderValue::from_static("tools/list"));
    }
    own
}

/// Request headers passed to the upstream (the rest are the proxy's).
const FORWARDED: &[&str] = &[
    "accept",
    "content-type",
    "authorization",
    "mcp-protocol-version",
    "mcp-session-id",
    "mcp-method",
    "mcp-name",
    "last-event-id",
    "traceparent",
    "tracestate",
    "baggage",
];
/// Answer headers passed back to the client.
const RETURNED: &[&str] = &[
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "www-authenticate",
    "cache-control",
];

/// The proxy's HTTP side.
pub struct HttpProxy {
    relay: Arc<Relay>,
    upstream: String,
    origins: Vec<String>,
    client: HyperClient<HttpConnector, Full<Bytes>>,
}

impl std::fmt::Debug for HttpProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpProxy")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

/// Whether `origin` is a loopback origin (`http://localhost[:p]`,
/// `http://127.x.y.z[:p]`, `http://[::1][:p]`, or https of those).
pub fn is_loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        rest.split(':').next().unwrap_or_default()
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn reply(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn refuse(status: StatusCode, code: i64, message: &str) -> Response<Full<Bytes>> {
    reply(status, frame::error_response(None, code, message, None))
}

impl HttpProxy {
    /// A proxy relaying through `relay` to the endpoint `upstream`
    /// (`http://HOST:PORT/PATH`), allowing the `origins` given besides the
    /// loopback ones.
    pub fn new(relay: Relay, upstream: String, origins: Vec<String>) -> HttpProxy {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = HyperClient::builder(TokioExecutor::new()).build(connector);
        HttpProxy {
            relay: Arc::new(relay),
            upstream,
            origins,
            client,
        }
    }

    /// The relay (to close it when serving is over).
    pub fn relay(&self) -> &Relay {
        &self.relay
    }

    /// Serve on `listener` until `stop`.
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        stop: tokio::sync::watch::Receiver<bool>,
    ) {
        crate::net::server::accept::serve_until_stopped(
            listener,
            MAX_HTTP_CONNECTIONS,
            HEADER_TIMEOUT,
            stop,
            move |req, _| {
                let me = Arc::clone(&self);
                async move { me.handle(req).await }
            },
        )
        .await;
    }

    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let o = origin.to_str().unwrap_or_default();
            if !is_loopback_origin(o) && !self.origins.iter().any(|a| a == o) {
                return refuse(
                    StatusCode::FORBIDDEN,
                    code::INVALID_REQUEST,
                    "rcpt gate mcp: this Origin is not allowed",
                );
            }
        }
        match *req.method() {
            Method::POST => self.post(req).await,
            Method::DELETE => {
                let headers = req.headers().clone();
                match self.upstream(Method::DELETE, &headers, Bytes::new()).await {
                    Ok((status, h, body)) => passthrough(status, &h, body),
                    Err(e) => refuse(
                        StatusCode::BAD_GATEWAY,
                        code::INTERNAL_ERROR,
                        &crate::io::error_chain(&e),
                    ),
                }
            }
            _ => refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                code::INVALID_REQUEST,
                "rcpt gate mcp relays POST (and DELETE) only",
            ),
        }
    }

    async fn post(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let headers = req.headers().clone();
        let body = match Limited::new(req.into_body(), super::MAX_FRAME_BYTES)
            .collect()
            .await
        {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    code::INVALID_REQUEST,
                    "a message over the limit",
                );
            }
        };
        let Ok(text) = String::from_utf8(body.to_vec()) else {
            return refuse(
                StatusCode::BAD_REQUEST,
                code::PARSE_ERROR,
                "a message that is not UTF-8",
            );
        };
        // Parsed once here for the headers and the tool list; the relay
        // parses it again as the one judge of a frame (a malformed one is
        // refused there).
        let parsed = frame::parse(&text).ok();
        if let Some(why) = parsed.as_ref().and_then(|f| header_mismatch(&headers, f)) {
            return refuse(StatusCode::BAD_REQUEST, HEADER_MISMATCH, &why);
        }
        let call_params = parsed
            .as_ref()
            .filter(|f| f.method.as_deref() == Some("tools/call"))
            .map(|f| f.params);
        if let Some(params) = call_params
            && self.list_first(&headers, params).await.is_err()
        {
            return refuse(
                StatusCode::BAD_GATEWAY,
                code::INTERNAL_ERROR,
                "the server did not list its tools",
            );
        }
        let relay = Arc::clone(&self.relay);
        let line = text.clone();
        let outs = tokio::task::spawn_blocking(move || relay.from_client(&line))
            .await
            .unwrap_or_default();
        self.deliver(outs, &headers).await
    }

    /// List the server's tools first when the proxy has no view of them.
    async fn list_first(
        &self,
        headers: &HeaderMap,
        params: Option<&serde_json::value::RawValue>,
    ) -> Result<(), String> {
        let mut next = self.relay.list_first(params);
        let headers = own_list_headers(headers);
        while let Some(Out::Server(req)) = next.take() {
            let (_, _, body) = self
                .upstream(Method::POST, &headers, Bytes::from(req))
                .await
                .map_err(|e| crate::io::error_chain(&e))?;
            for event in events_of(&body) {
                let relay = Arc::clone(&self.relay);
                let outs = tokio::task::spawn_blocking(move || relay.from_server(&event))
                    .await
                    .unwrap_or_default();
                next = outs.into_iter().find(|o| matches!(o, Out::Server(_)));
            }
        }
        Ok(())
    }

    /// Send what the relay said: an answer of its own, or the message upstream.
    async fn deliver(&self, outs: Vec<Out>, headers: &HeaderMap) -> Response<Full<Bytes>> {
        match outs.into_iter().next() {
            Some(Out::Client(text)) => reply(StatusCode::OK, text),
            Some(Out::Server(text)) => self.forward(text, headers).await,
            None => reply(StatusCode::ACCEPTED, String::new()),
        }
    }

    /// Forward one message and relay its answer back.
    async fn forward(&self, text: String, headers: &HeaderMap) -> Response<Full<Bytes>> {
        let (status, h, body) = match self
            .upstream(Method::POST, headers, Bytes::from(text.clone()))
            .await
        {
            Ok(a) => a,
            Err(e) => {
                let why = crate::io::error_chain(&e);
                return self.abandon(&text, &why, StatusCode::BAD_GATEWAY).await;
            }
        };
        let sse = h
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let json = h
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if body.is_empty() || !(sse || json) {
            // No JSON-RPC answer (202 for a notification, or a failure):
            // a request still pending is answered by the proxy.
            if status != StatusCode::ACCEPTED
                && let Some(answer) = self.abandoned(&text, &format!("HTTP {status}")).await
            {
                return reply(status, answer);
            }
            return passthrough(status, &h, body);
        }
        let mut relayed = Vec::new();
        for event in if sse {
            events_of(&body)
        } else {
            vec![String::from_utf8_lossy(&body).into_owned()]
        } {
            let relay = Arc::clone(&self.relay);
            let outs = tokio::task::spawn_blocking(move || relay.from_server(&event))
                .await
                .unwrap_or_default();
            for o in outs {
                match o {
                    Out::Client(t) => relayed.push(t),
                    Out::Server(t) => {
                        let _ = self.upstream(Method::POST, headers, Bytes::from(t)).await;
                    }
                }
            }
        }
        let body = if sse {
            relayed
                .iter()
                .map(|t| format!("event: message\ndata: {t}\n\n"))
                .collect::<String>()
        } else {
            relayed.concat()
        };
        passthrough(status, &h, Bytes::from(body))
    }

    /// The answer to a request the upstream will not answer, if pending.
    async fn abandoned(&self, text: &str, why: &str) -> Option<String> {
        let relay = Arc::clone(&self.relay);
        let (text, why) = (text.to_string(), why.to_string());
        tokio::task::spawn_blocking(move || relay.abandon(&text, &why))
            .await
            .ok()
            .flatten()
    }

    async fn abandon(&self, text: &str, why: &str, status: StatusCode) -> Response<Full<Bytes>> {
        match self.abandoned(text, why).await {
            Some(answer) => reply(status, answer),
            None => refuse(status, code::INTERNAL_ERROR, why),
        }
    }

    /// One request to the upstream endpoint: (status, headers, body).
    async fn upstream(
        &self,
        method: Method,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<(StatusCode, HeaderMap, Bytes), UpstreamError> {
        let mut req = Request::builder()
            .method(method)
            .uri(&self.upstream)
            .body(Full::new(body))
            .map_err(UpstreamError::Request)?;
        for name in FORWARDED {
            for v in headers.get_all(*name) {
                req.headers_mut()
                    .append(HeaderName::from_static(name), v.clone());
            }
        }
        for (name, v) in headers
            .iter()
            .filter(|(n, _)| n.as_str().starts_with("mcp-param-"))
        {
            req.headers_mut().append(name.clone(), v.clone());
        }
        let exchange = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(UpstreamError::Send)?;
            let (parts, body) = resp.into_parts();
            let body = Limited::new(body, super::MAX_FRAME_BYTES)
                .collect()
                .await
                .map_err(UpstreamError::Body)?
                .to_bytes();
            Ok((parts.status, parts.headers, body))
        };
        tokio::time::timeout(UPSTREAM_TIMEOUT, exchange)
            .await
            .map_err(|_| UpstreamError::Timeout)?
    }
}

/// Why the upstream gave no answer: each cause kept until the proxy says
/// it to the client (its chain, the text it said before).
#[derive(Debug, thiserror::Error)]
enum UpstreamError {
    /// The request could not be built.
    #[error(transparent)]
    Request(hyper::http::Error),
    /// The request could not be sent, or no answer came.
    #[error(transparent)]
    Send(hyper_util::client::legacy::Error),
    /// The answer's body could not be read (or is over the limit).
    #[error(transparent)]
    Body(Box<dyn std::error::Error + Send + Sync>),
    /// No answer within [`UPSTREAM_TIMEOUT`].
    #[error("the upstream did not answer in time")]
    Timeout,
}

/// The answer as the upstream gave it (its MCP headers kept).
fn passthrough(status: StatusCode, headers: &HeaderMap, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    for name in RETURNED {
        if let Some(v) = headers.get(*name) {
            r.headers_mut()
                .insert(HeaderName::from_static(name), v.clone());
        }
    }
    r
}

/// Whether a body is a `tools/call` request.
/// Why the `Mcp-Method` or `Mcp-Name` header disagrees with the body.
fn header_mismatch(headers: &HeaderMap, body: &frame::Frame<'_>) -> Option<String> {
    let header = |n: &str| {
        headers
            .get(n)
            .map(|v| v.to_str().unwrap_or("\u{fffd}").to_string())
    };
    if let Some(m) = header("mcp-method")
        && Some(m.as_str()) != body.method.as_deref()
    {
        let b = body.method.as_deref().unwrap_or("(none)");
        return Some(format!(
            "Header mismatch: Mcp-Method {m:?} does not match the body's method {b:?}"
        ));
    }
    if let Some(n) = header("mcp-name")
        && !n.starts_with("=?base64?")
    {
        let p: serde_json::Value = body
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        let name = p
            .get("name")
            .or_else(|| p.get("uri"))
            .and_then(serde_json::Value::as_str);
        if name != Some(n.as_str()) {
            let b = name.unwrap_or("(none)");
            return Some(format!(
                "Header mismatch: Mcp-Name {n:?} does not match the body's name {b:?}"
            ));
        }
    }
    None
}

/// The data of each event of an SSE body (data lines joined by `\n`),
/// or the body itself when it is one JSON message.
pub fn events_of(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    if text.trim_start().starts_with('{') {
        return vec![text.into_owned()];
    }
    let mut out = Vec::new();
    for block in text.replace("\r\n", "\n").split("\n\n") {
        let data: Vec<&str> = block
            .lines()
            .filter_map(|l| {
                l.strip_prefix("data:")
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
            })
            .collect();
        if !data.is_empty() {
            out.push(data.join("\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxys_own_list_carries_no_calls_headers() {
        let mut h = HeaderMap::new();
        h.insert("mcp-method", HeaderValue::from_static("tools/call"));
        h.insert("mcp-name", HeaderValue::from_static("write_file"));
        h.insert("mcp-param-path", HeaderValue::from_static("/x"));
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        h.insert("authorization", HeaderValue::from_static("Bearer t"));
        let own = own_list_headers(&h);
        assert_eq!(own.get("mcp-method").unwrap(), "tools/list");
        assert!(own.get("mcp-name").is_none() && own.get("mcp-param-path").is_none());
        assert_eq!(own.get("mcp-protocol-version").unwrap(), "2026-07-28");
        assert_eq!(own.get("authorization").unwrap(), "Bearer t");
        // A legacy client sends no Mcp-Method: none is made up.
        let legacy = own_list_headers(&HeaderMap::new());
        assert!(legacy.get("mcp-method").is_none());
    }

    #[test]
    fn origins_sse_and_header_checks() {
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443",
            "http://127.1.2.3:9",
        ] {
            assert!(is_loopback_origin(ok), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example",
            "null",
            "http://10.0.0.1",
            "file://",
        ] {
            assert!(!is_loopback_origin(bad), "{bad}");
        }
        let sse = b"event: message\r\ndata: {\"a\":1}\r\n\r\n: keep-alive\n\nid: 2\ndata: {\"b\":\ndata: 2}\n\n";
        assert_eq!(
            events_of(sse),
            vec!["{\"a\":1}".to_string(), "{\"b\":\n2}".to_string()]
        );
        let mut h = HeaderMap::new();
        h.insert("mcp-method", HeaderValue::from_static("tools/list"));
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w"}}"#;
        let call = &frame::parse(call).unwrap();
        assert!(header_mismatch(&h, call).unwrap().contains("Mcp-Method"));
        h.insert("mcp-method", HeaderValue::from_static("tools/call"));
        assert!(header_mismatch(&h, call).is_none());
        h.insert("mcp-name", HeaderValue::from_static("read"));
        assert!(header_mismatch(&h, call).unwrap().contains("Mcp-Name"));
    }
}
