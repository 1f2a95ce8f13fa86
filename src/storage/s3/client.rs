//! client: the S3 requests the log needs, path-style, signed with SigV4,
//! each with a deadline, bounded retries and a capped answer body
//! (spec/storage.md "Client").
//!
//! | call        | request                         | answers handled                         |
//! |-------------|---------------------------------|-----------------------------------------|
//! | [`get`]     | `GET /bucket/key`               | 200 body + ETag, 404 absent             |
//! | [`head`]    | `HEAD /bucket/key`              | 200 ETag + length, 404 absent           |
//! | [`create`]  | `PUT` + `If-None-Match: *`      | 200 new; 412, or no answer, then compare bytes |
//! | [`replace`] | `PUT` + `If-Match: ETAG`        | 200 new ETag; 412/404, or no answer, then compare |
//! | [`delete`]  | `DELETE /bucket/key`            | 204/200, 404 (already gone)             |
//! | [`list`]    | `GET /bucket?list-type=2&prefix`| keys, page by page, capped in count     |
//!
//! Retries: a transport error, a timeout, a 5xx or 409 (S3's "conditional
//! request conflict") is retried up to [`MAX_ATTEMPTS`] times in all. A
//! retried conditional write may meet its own first attempt: its 412 then
//! finds its own bytes, which [`create`] and [`replace`] report as success.
//! That is also why a 412 is always resolved by reading the object: the
//! object's bytes, not the status, say what happened. The same read
//! settles a conditional write whose every attempt went unanswered (a
//! broken connection, a timeout, a 5xx): the store may have applied one
//! and the answer been lost ([`answer_lost`](super::answer_lost)); our bytes there mean it did.
//!
//! [`get`]: Client::get
//! [`head`]: Client::head
//! [`create`]: Client::create
//! [`replace`]: Client::replace
//! [`delete`]: Client::delete
//! [`list`]: Client::list

use crate::io::error_chain;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{self, HeaderMap};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest, Sha256};

pub use super::answer::{Created, Etag, Meta, Object, S3Error};
use super::answer::{check_key, etag_of};
use super::config::{Location, Settings};
use super::list::{ListPage, parse_list_page, unescape_xml, xml_element};
use super::sigv4::{self, AmzTime, Scope};
use crate::digest::to_hex;

/// Time allowed for one attempt, from sending to the last body byte.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed to open a TCP connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts per request, the first included.
pub const MAX_ATTEMPTS: u32 = 4;
/// Wait before the second attempt; doubled before each later one.
pub const RETRY_BASE_DELAY: Duration = Duration::from_millis(200);
/// Largest error body read (S3's XML error document), bytes.
pub const MAX_ERROR_BODY_BYTES: usize = 16 * 1024;
/// Largest ListObjectsV2 page read, bytes (1,000 keys of 1,024 bytes, escaped, fit).
pub const MAX_LIST_PAGE_BYTES: usize = 8 * 1024 * 1024;
/// Keys asked for per ListObjectsV2 page (S3's own maximum).
pub const LIST_PAGE_KEYS: usize = 1000;
/// Longest key sent (S3's limit), bytes.
pub const MAX_KEY_BYTES: usize = 1024;
/// Longest ETag accepted from a server, bytes.
pub const MAX_ETAG_BYTES: usize = 256;
/// Idle keep-alive connections are closed after this long.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// One request as one attempt sends it: `extra` headers beside `host` and
/// the payload's SHA-256, which is signed with the rest.
struct Call<'a> {
    method: &'a Method,
    key: &'a str,
    query: &'a [(String, String)],
    body: Bytes,
    extra: &'a [(String, String)],
    payload_sha256: &'a str,
}

/// One answer with its body read (capped).
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
}

/// A client for one bucket at one endpoint. Cheap to clone (shared pool).
#[derive(Clone)]
pub struct Client {
    /// Keep-alive connections, for requests whose answer has no body.
    http: HyperClient<HttpConnector, Full<Bytes>>,
    /// A new connection per request, for GETs: radosgw 16 answers a GET on
    /// a reused connection about 40 ms late (measured: 44 ms against 1.7 ms
    /// on a new connection, with curl as with this client; spec/storage.md).
    http_fresh: HyperClient<HttpConnector, Full<Bytes>>,
    settings: Arc<Settings>,
    bucket: String,
    /// Whether `If-Match` must carry the ETag in quotes. Unquoted first:
    /// radosgw 16 matches only the bare tag; a server that wants RFC 9110's
    /// quoted form is detected on the first refusal (spec/storage.md).
    pub(super) quote_if_match: Arc<AtomicBool>,
    /// Requests sent (every attempt), for measurements.
    sent: Arc<AtomicU64>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.settings.endpoint.authority)
            .field("bucket", &self.bucket)
            .finish()
    }
}

impl Client {
    /// A client for `location`'s bucket. Needs a tokio runtime to run its calls.
    pub fn new(settings: Settings, location: &Location) -> Client {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let http = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector.clone());
        let http_fresh = HyperClient::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        Client {
            http,
            http_fresh,
            settings: Arc::new(settings),
            bucket: location.bucket.clone(),
            quote_if_match: Arc::new(AtomicBool::new(false)),
            sent: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Requests sent so far by this client and its clones, retries included.
    pub fn requests_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Whether `If-Match` carries the ETag quoted (RFC 9110) or bare (radosgw 16).
    pub fn quotes_if_match(&self) -> bool {
        self.quote_if_match.load(Ordering::Relaxed)
    }

    /// Starts with the given quoting of `If-Match`; the client still switches
    /// when the server refuses a tag that matches.
    pub fn set_quotes_if_match(&self, quoted: bool) {
        self.quote_if_match.store(quoted, Ordering::Relaxed);
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// GET `key`: the object (at most `max` bytes), or `None` if absent.
    pub async fn get(&self, key: &str, max: usize) -> Result<Option<Object>, S3Error> {
        let a = self
            .send(Method::GET, key, &[], Bytes::new(), &[], max)
            .await?;
        match a.status {
            StatusCode::OK => {
                let etag = etag_of(&a.headers, "GET", key)?;
                Ok(Some(Object { body: a.body, etag }))
            }
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(status_error("GET", key, &a)),
        }
    }

    /// GET `len` bytes of `key` from `offset` (`Range: bytes=…`): exactly
    /// that many bytes, `None` if the object is absent, an error if it
    /// ends first.
    pub async fn get_range(
        &self,
        key: &str,
        offset: u64,
        len: usize,
    ) -> Result<Option<Bytes>, S3Error> {
        if len == 0 {
            return Ok(self.head(key).await?.map(|_| Bytes::new()));
        }
        let last = offset.saturating_add(len as u64 - 1);
        let range = vec![("range".to_string(), format!("bytes={offset}-{last}"))];
        let a = self
            .send(Method::GET, key, &[], Bytes::new(), &range, len)
            .await?;
        match a.status {
            StatusCode::PARTIAL_CONTENT | StatusCode::OK if a.body.len() == len => Ok(Some(a.body)),
            StatusCode::PARTIAL_CONTENT | StatusCode::OK | StatusCode::RANGE_NOT_SATISFIABLE => {
                Err(S3Error::Status {
                    method: "GET",
                    key: key.to_string(),
                    status: a.status.as_u16(),
                    code: "ShortRead".to_string(),
                    message: format!("asked for {len} bytes at {offset}, got {}", a.body.len()),
                })
            }
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(status_error("GET", key, &a)),
        }
    }

    /// True when at least one key starts with `prefix` (one LIST of one key).
    pub async fn any_key(&self, prefix: &str) -> Result<bool, S3Error> {
        let page = self.list_page(prefix, 1, None).await?;
        Ok(!page.keys.is_empty())
    }

    /// HEAD `key`: its ETag and length, or `None` if absent.
    pub async fn head(&self, key: &str) -> Result<Option<Meta>, S3Error> {
        let a = self
            .send(Method::HEAD, key, &[], Bytes::new(), &[], 0)
            .await?;
        match a.status {
            StatusCode::OK => {
                let etag = etag_of(&a.headers, "HEAD", key)?;
                let len = a
                    .headers
                    .get(header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                Ok(Some(Meta { etag, len }))
            }
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(status_error("HEAD", key, &a)),
        }
    }

    /// DELETE `key`; an absent key is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), S3Error> {
        let a = self
            .send(
                Method::DELETE,
                key,
                &[],
                Bytes::new(),
                &[],
                MAX_ERROR_BODY_BYTES,
            )
            .await?;
        match a.status {
            StatusCode::NO_CONTENT | StatusCode::OK | StatusCode::NOT_FOUND => Ok(()),
            _ => Err(status_error("DELETE", key, &a)),
        }
    }

    /// Every key starting with `prefix`, in S3's (byte) order; an error past
    /// `max_keys` keys.
    pub async fn list(&self, prefix: &str, max_keys: usize) -> Result<Vec<String>, S3Error> {
        self.list_paged(prefix, max_keys, LIST_PAGE_KEYS).await
    }

    /// [`Client::list`], asking for `page_keys` keys per page (at most [`LIST_PAGE_KEYS`]).
    pub async fn list_paged(
        &self,
        prefix: &str,
        max_keys: usize,
        page_keys: usize,
    ) -> Result<Vec<String>, S3Error> {
        let page_keys = page_keys.clamp(1, LIST_PAGE_KEYS);
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_page(prefix, page_keys, token.as_deref()).await?;
            let bad = |detail: String| S3Error::BadListing {
                prefix: prefix.to_string(),
                detail,
            };
            if keys.len() + page.keys.len() > max_keys {
                return Err(bad(format!("more than {max_keys} keys")));
            }
            // A truncated page must carry keys: a server that answers
            // empty pages with a new token forever never ends a listing
            // (pages are bounded by the key limit, not by the server).
            if page.truncated && page.keys.is_empty() {
                return Err(bad("a truncated page with no keys".into()));
            }
            keys.extend(page.keys);
            match (page.truncated, page.next_token) {
                (true, Some(t)) => token = Some(t),
                (true, None) => {
                    return Err(bad("truncated page without a continuation token".into()));
                }
                (false, _) => return Ok(keys),
            }
        }
    }

    /// One ListObjectsV2 page of at most `page_keys` keys under `prefix`,
    /// continuing from `token`.
    async fn list_page(
        &self,
        prefix: &str,
        page_keys: usize,
        token: Option<&str>,
    ) -> Result<ListPage, S3Error> {
        let mut query = vec![
            ("list-type".to_string(), "2".to_string()),
            ("prefix".to_string(), prefix.to_string()),
            ("max-keys".to_string(), page_keys.to_string()),
        ];
        if let Some(t) = token {
            query.push(("continuation-token".to_string(), t.to_string()));
        }
        let a = self
            .send(
                Method::GET,
                "",
                &query,
                Bytes::new(),
                &[],
                MAX_LIST_PAGE_BYTES,
            )
            .await?;
        if a.status != StatusCode::OK {
            return Err(status_error("GET", prefix, &a));
        }
        let bad = |detail: String| S3Error::BadListing {
            prefix: prefix.to_string(),
            detail,
        };
        let text = std::str::from_utf8(&a.body).map_err(|e| bad(e.to_string()))?;
        parse_list_page(text).map_err(|d| bad(d.to_string()))
    }

    /// Sends one request with retries; the answer of the last attempt.
    pub(super) async fn send(
        &self,
        method: Method,
        key: &str,
        query: &[(String, String)],
        body: Bytes,
        headers: &[(String, String)],
        max: usize,
    ) -> Result<Answer, S3Error> {
        check_key(key)?;
        let name = method_name(&method);
        let payload_sha256 = if body.is_empty() {
            sigv4::EMPTY_SHA256.to_string()
        } else {
            to_hex(&Sha256::digest(&body))
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let call = Call {
                method: &method,
                key,
                query,
                body: body.clone(),
                extra: headers,
                payload_sha256: &payload_sha256,
            };
            let outcome = self.attempt(call, max).await;
            let retry = match &outcome {
                Ok(a) => a.status.is_server_error() || a.status == StatusCode::CONFLICT,
                Err(Failure::Transport(_) | Failure::Timeout) => true,
                Err(Failure::TooLarge) => false,
            };
            if !retry || attempt >= MAX_ATTEMPTS {
                return outcome.map_err(|f| match f {
                    Failure::Transport(detail) => S3Error::Transport {
                        method: name,
                        key: key.to_string(),
                        detail,
                        attempts: attempt,
                    },
                    Failure::Timeout => S3Error::Timeout {
                        method: name,
                        key: key.to_string(),
                        attempts: attempt,
                    },
                    Failure::TooLarge => S3Error::TooLarge {
                        key: key.to_string(),
                        max,
                    },
                });
            }
            tokio::time::sleep(RETRY_BASE_DELAY * 2u32.pow(attempt - 1)).await;
        }
    }

    /// One attempt: sign, send, read the answer within [`REQUEST_TIMEOUT`].
    async fn attempt(&self, call: Call<'_>, max: usize) -> Result<Answer, Failure> {
        let method = call.method;
        let request = self.signed_request(call)?;
        let head_only = method == Method::HEAD;
        self.sent.fetch_add(1, Ordering::Relaxed);
        let exchange = async {
            let http = if method == Method::GET {
                &self.http_fresh
            } else {
                &self.http
            };
            let response = http
                .request(request)
                .await
                .map_err(|e| Failure::Transport(error_chain(&e)))?;
            let (parts, body) = response.into_parts();
            let body = read_body(&parts, body, head_only, max).await?;
            Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout),
        }
    }

    /// The request of one attempt, signed with SigV4.
    fn signed_request(&self, call: Call<'_>) -> Result<Request<Full<Bytes>>, Failure> {
        let Call {
            method,
            key,
            query,
            body,
            extra,
            payload_sha256,
        } = call;
        let path = if key.is_empty() {
            format!("/{}", self.bucket)
        } else {
            format!("/{}/{key}", self.bucket)
        };
        let mut headers: Vec<(String, String)> = vec![
            ("host".into(), self.settings.endpoint.authority.clone()),
            (sigv4::AMZ_CONTENT_SHA256.into(), payload_sha256.to_string()),
        ];
        headers.extend_from_slice(extra);
        let signed = sigv4::sign(
            &self.settings.credentials,
            &Scope {
                region: &self.settings.region,
                service: "s3",
                time: AmzTime::now(),
            },
            &sigv4::Request {
                method: method.as_str(),
                path: &path,
                query,
                headers: &headers,
                payload_sha256,
            },
        );
        let uri = self.uri_of(&path, query);
        let mut builder = Request::builder().method(method.clone()).uri(&uri);
        for (name, value) in headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .chain(signed.added_headers.iter().map(|(n, v)| (*n, v.as_str())))
        {
            builder = builder.header(name, value);
        }
        builder = builder.header(header::AUTHORIZATION, &signed.authorization);
        builder
            .body(Full::new(body))
            .map_err(|e| Failure::Transport(e.to_string()))
    }

    /// The request URI of `path` with `query`, each part percent-encoded
    /// as SigV4 signed it.
    fn uri_of(&self, path: &str, query: &[(String, String)]) -> String {
        let mut uri = format!(
            "{}{}",
            self.settings.endpoint.url(),
            sigv4::uri_encode(path, false)
        );
        if !query.is_empty() {
            let q: Vec<String> = query
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}={}",
                        sigv4::uri_encode(k, true),
                        sigv4::uri_encode(v, true)
                    )
                })
                .collect();
            uri.push('?');
            uri.push_str(&q.join("&"));
        }
        uri
    }
}

/// How one attempt failed, before it is known whether it will be retried.
enum Failure {
    Transport(String),
    Timeout,
    TooLarge,
}

fn method_name(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        _ => "request",
    }
}

pub(super) fn status_error(method: &'static str, key: &str, a: &Answer) -> S3Error {
    let text = String::from_utf8_lossy(&a.body);
    S3Error::Status {
        method,
        key: key.to_string(),
        status: a.status.as_u16(),
        code: xml_element(&text, "Code")
            .map(|c| unescape_xml(c).unwrap_or_default())
            .unwrap_or_default(),
        message: xml_element(&text, "Message")
            .map(|c| unescape_xml(c).unwrap_or_default())
            .unwrap_or_default(),
    }
}
/// The body of an answer: none for HEAD; a success body up to the
/// caller's `max` (over it is [`Failure::TooLarge`], whatever the length
/// the server declares); an error body up to [`MAX_ERROR_BODY_BYTES`],
/// read only for S3's code and message (an oversized one is dropped
/// unread and the status stands).
async fn read_body(
    parts: &hyper::http::response::Parts,
    body: hyper::body::Incoming,
    head_only: bool,
    max: usize,
) -> Result<Bytes, Failure> {
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if head_only {
        Ok(Bytes::new())
    } else if parts.status.is_success() {
        if declared.is_some_and(|n| n > max as u64) {
            return Err(Failure::TooLarge);
        }
        Ok(Limited::new(body, max)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    Failure::TooLarge
                } else {
                    Failure::Transport(error_chain(e.as_ref()))
                }
            })?
            .to_bytes())
    } else if declared.is_some_and(|n| n > MAX_ERROR_BODY_BYTES as u64) {
        Ok(Bytes::new())
    } else {
        match Limited::new(body, MAX_ERROR_BODY_BYTES).collect().await {
            Ok(b) => Ok(b.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Ok(Bytes::new()),
            Err(e) => Err(Failure::Transport(error_chain(e.as_ref()))),
        }
    }
}
