//! client: a small HTTP/1.1 client for a log's base URL (pooled keep-alive
//! connections, size-capped bodies, a timeout per request).
//!
//! Only `http://` URLs: this build carries no TLS stack (spec/service.md
//! "Transport"); put the service behind a TLS-terminating proxy and reach
//! it on the inside, or mirror from a plain-HTTP copy.

use crate::io::error_chain;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// Time allowed for one request, from sending to the last body byte.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest base URL accepted.
const MAX_URL_BYTES: usize = 2048;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The base URL is not an absolute `http://` URL.
    #[error("{url:?} is not a usable log URL: {detail}")]
    Url {
        /// The text given.
        url: String,
        /// What is wrong.
        detail: String,
    },
    /// Connecting, sending or receiving failed.
    #[error("{method} {url}: {detail}")]
    Transport {
        /// GET or POST.
        method: &'static str,
        /// The full URL.
        url: String,
        /// What failed.
        detail: String,
    },
    /// No answer within [`REQUEST_TIMEOUT`].
    #[error("{method} {url}: no answer within {secs} s", secs = REQUEST_TIMEOUT.as_secs())]
    Timeout {
        /// GET or POST.
        method: &'static str,
        /// The full URL.
        url: String,
    },
    /// The answer body is over the limit for what was asked.
    #[error("{url}: the answer is over {max} bytes")]
    TooLarge {
        /// The full URL.
        url: String,
        /// The limit.
        max: usize,
    },
    /// An unexpected status.
    #[error("GET {url}: HTTP {status}")]
    Status {
        /// The full URL.
        url: String,
        /// The status.
        status: u16,
    },
}

/// One HTTP answer with its body read.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body, at most the limit asked for.
    pub body: Bytes,
}

/// A client for the objects under one log URL prefix.
#[derive(Clone, Debug)]
pub struct Client {
    inner: HyperClient<HttpConnector, Full<Bytes>>,
    /// `http://authority/prefix/` (always ending in `/`).
    base: String,
}

impl Client {
    /// A client for `base` (`http://host:port` or `http://host/prefix`).
    pub fn new(base: &str) -> Result<Client, ClientError> {
        let bad = |detail: &str| ClientError::Url {
            url: base.chars().take(MAX_URL_BYTES).collect(),
            detail: detail.to_string(),
        };
        if base.len() > MAX_URL_BYTES {
            return Err(bad("too long"));
        }
        let uri: Uri = base
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(bad(
                    "https is not supported by this build (no TLS stack); reach the log over \
                     http on a trusted network or through a local TLS-terminating proxy",
                ));
            }
            _ => return Err(bad("expected http://HOST[:PORT][/PREFIX]")),
        }
        if uri.authority().is_none() || uri.query().is_some() {
            return Err(bad("expected http://HOST[:PORT][/PREFIX] without a query"));
        }
        let mut base = format!(
            "http://{}{}",
            uri.authority().map_or("", |a| a.as_str()),
            uri.path()
        );
        if !base.ends_with('/') {
            base.push('/');
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(REQUEST_TIMEOUT));
        let inner = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Client { inner, base })
    }

    /// The base URL, ending in `/`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The full URL of `rel` (a path relative to the base).
    pub fn url(&self, rel: &str) -> String {
        format!("{}{rel}", self.base)
    }

    /// Send one request and read the answer body up to `max` bytes.
    pub async fn send(
        &self,
        method: Method,
        rel: &str,
        body: Bytes,
        accept: Option<&'static str>,
        max: usize,
    ) -> Result<Answer, ClientError> {
        let url = self.url(rel);
        let name: &'static str = if method == Method::POST {
            "POST"
        } else {
            "GET"
        };
        let transport = |detail: String| ClientError::Transport {
            method: name,
            url: url.clone(),
            detail,
        };
        let mut req = Request::builder()
            .method(method)
            .uri(&url)
            .body(Full::new(body))
            .map_err(|e| transport(e.to_string()))?;
        if let Some(a) = accept {
            req.headers_mut()
                .insert(header::ACCEPT, HeaderValue::from_static(a));
        }
        let exchange = async {
            let resp = self
                .inner
                .request(req)
                .await
                .map_err(|e| transport(error_chain(&e)))?;
            let (parts, body) = resp.into_parts();
            let body = Limited::new(body, max).collect().await.map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    ClientError::TooLarge {
                        url: url.clone(),
                        max,
                    }
                } else {
                    transport(e.to_string())
                }
            })?;
            Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                body: body.to_bytes(),
            })
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, exchange).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::Timeout {
                method: name,
                url: url.clone(),
            }),
        }
    }

    /// GET `rel`: its body on 200, `None` on 404, an error otherwise.
    pub async fn get(&self, rel: &str, max: usize) -> Result<Option<Bytes>, ClientError> {
        let a = self.send(Method::GET, rel, Bytes::new(), None, max).await?;
        match a.status {
            StatusCode::OK => Ok(Some(a.body)),
            StatusCode::NOT_FOUND => Ok(None),
            s => Err(ClientError::Status {
                url: self.url(rel),
                status: s.as_u16(),
            }),
        }
    }
}
