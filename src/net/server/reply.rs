//! reply: the one answer type of both services, and the headers every
//! answer carries (spec/service.md "Endpoints", spec/witness.md "Witness
//! service"): `Content-Type`, `Content-Length`, `Cache-Control` (`no-store`
//! unless the route says otherwise) and `X-Content-Type-Options: nosniff`;
//! a page adds its `Content-Security-Policy` and `Referrer-Policy`.
//!
//! A refusal is written in its service's style ([`Refusals`]): the log
//! answers `{"error": CODE, "detail": TEXT}` as JSON, the witness one line
//! of text (tlog-witness). Either way the reply keeps the reason code and
//! the text, which the request log line shows.

use crate::constants::TEXT_CONTENT_TYPE;
use crate::net::server::html::{PAGE_CONTENT_TYPE, PAGE_CSP};
use crate::net::server::metrics::METRICS_CONTENT_TYPE;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Response, StatusCode};

/// `Cache-Control` of every answer whose route names no other.
pub const CACHE_NONE: &str = "no-store";
/// `Content-Type` of a JSON answer.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// One answer: status, body, content type, cache policy, extra headers,
/// and for the request log the reason code and text of a refusal.
#[derive(Clone, Debug)]
pub(crate) struct Reply {
    status: StatusCode,
    body: Bytes,
    content_type: &'static str,
    cache: &'static str,
    headers: Vec<(HeaderName, HeaderValue)>,
    reason: Option<&'static str>,
    detail: Option<String>,
}

impl Reply {
    /// `body` as `content_type`, not cached.
    pub(crate) fn new(status: StatusCode, content_type: &'static str, body: Bytes) -> Reply {
        Reply {
            status,
            body,
            content_type,
            cache: CACHE_NONE,
            headers: Vec::new(),
            reason: None,
            detail: None,
        }
    }

    /// `value` as JSON, with a final newline.
    pub(crate) fn json(status: StatusCode, value: &impl serde::Serialize) -> Reply {
        let mut body = serde_json::to_vec(value).unwrap_or_default();
        body.push(b'\n');
        Reply::new(status, JSON_CONTENT_TYPE, Bytes::from(body))
    }

    /// `text` as plain text.
    pub(crate) fn text(status: StatusCode, text: String) -> Reply {
        Reply::new(status, TEXT_CONTENT_TYPE, Bytes::from(text))
    }

    /// `GET /metrics`: the exposition.
    pub(crate) fn metrics(text: String) -> Reply {
        Reply::new(StatusCode::OK, METRICS_CONTENT_TYPE, Bytes::from(text))
    }

    /// A status page, under a Content-Security-Policy that forbids scripts.
    pub(crate) fn page(html: String) -> Reply {
        Reply::new(StatusCode::OK, PAGE_CONTENT_TYPE, Bytes::from(html))
            .header(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(PAGE_CSP),
            )
            .header(
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            )
    }

    /// The same answer with `Cache-Control: cache`.
    pub(crate) fn cache(mut self, cache: &'static str) -> Reply {
        self.cache = cache;
        self
    }

    /// The same answer with one more header (replacing one of that name).
    pub(crate) fn header(mut self, name: HeaderName, value: HeaderValue) -> Reply {
        self.headers.push((name, value));
        self
    }

    /// The same answer marked as a refusal: `reason` (a code of a fixed
    /// set) and `detail` (for people) go to the request log.
    pub(crate) fn refusal(mut self, reason: &'static str, detail: String) -> Reply {
        self.reason = Some(reason);
        self.detail = Some(detail);
        self
    }

    /// The status.
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// The refusal's reason code (`None`: not a refusal).
    pub(crate) fn reason(&self) -> Option<&'static str> {
        self.reason
    }

    /// The refusal's text for people.
    pub(crate) fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// Bytes of the body (what a GET sends; a HEAD sends none).
    pub(crate) fn body_len(&self) -> usize {
        self.body.len()
    }

    /// The response: the body (none for `HEAD`, with the GET's
    /// `Content-Length`) and every header.
    pub(crate) fn into_response(self, head: bool) -> Response<Full<Bytes>> {
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
        for (k, v) in self.headers {
            h.insert(k, v);
        }
        resp
    }
}

/// How a service writes the body of a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusals {
    /// `{"error": CODE, "detail": TEXT}` and a newline, `application/json`
    /// (the log service, spec/service.md "Conventions").
    Json,
    /// `TEXT` and a newline, `text/plain; charset=utf-8` (the witness:
    /// tlog-witness refusals are text for people).
    Text,
}

impl Refusals {
    /// A refusal with `status`, its reason code and its text.
    pub(crate) fn refuse(self, status: StatusCode, reason: &'static str, detail: String) -> Reply {
        let reply = match self {
            Refusals::Json => Reply::json(
                status,
                &serde_json::json!({"error": reason, "detail": detail}),
            ),
            Refusals::Text => Reply::text(status, format!("{detail}\n")),
        };
        reply.refusal(reason, detail)
    }

    /// 405 `method_not_allowed`, with `Allow`.
    pub(crate) fn method_not_allowed(self, allow: &'static str) -> Reply {
        self.refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("method not allowed; allowed: {allow}"),
        )
        .header(header::ALLOW, HeaderValue::from_static(allow))
    }

    /// The refusal of a body that could not be read (see [`BodyError`]).
    pub(crate) fn body(self, e: &crate::net::server::request::BodyError) -> Reply {
        self.refuse(e.status(), e.reason(), crate::io::error_chain(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn sent(reply: Reply, head: bool) -> (Response<()>, Vec<u8>) {
        let (parts, body) = reply.into_response(head).into_parts();
        let collected = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(body.collect())
            .unwrap();
        (
            Response::from_parts(parts, ()),
            collected.to_bytes().to_vec(),
        )
    }

    #[test]
    fn every_answer_carries_the_common_headers_and_head_sends_no_body() {
        let replies = [
            Reply::json(StatusCode::OK, &serde_json::json!({"a": 1})),
            Reply::text(StatusCode::OK, "x\n".into()),
            Reply::metrics("# EOF\n".into()),
            Reply::page("<p>".into()),
            Refusals::Json.method_not_allowed("POST"),
            Refusals::Text.method_not_allowed("GET, HEAD"),
        ];
        for reply in replies {
            let len = reply.body_len();
            for head in [false, true] {
                let (resp, body) = sent(reply.clone(), head);
                let h = resp.headers();
                assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
                assert_eq!(h[header::CACHE_CONTROL], "no-store");
                assert_eq!(h[header::CONTENT_LENGTH], len.to_string());
                assert!(h.contains_key(header::CONTENT_TYPE));
                assert_eq!(body.len(), if head { 0 } else { len });
            }
        }
    }

    #[test]
    fn refusals_keep_their_reason_in_either_style() {
        let json = Refusals::Json.refuse(StatusCode::FORBIDDEN, "signature.untrusted", "no".into());
        assert_eq!(json.reason(), Some("signature.untrusted"));
        assert_eq!(json.detail(), Some("no"));
        let (resp, body) = sent(json, false);
        assert_eq!(resp.status(), 403);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], JSON_CONTENT_TYPE);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"error": "signature.untrusted", "detail": "no"})
        );
        let text = Refusals::Text.method_not_allowed("POST");
        assert_eq!(text.reason(), Some("method_not_allowed"));
        let (resp, body) = sent(text, false);
        assert_eq!(resp.headers()[header::ALLOW], "POST");
        assert_eq!(resp.headers()[header::CONTENT_TYPE], TEXT_CONTENT_TYPE);
        assert_eq!(body, b"method not allowed; allowed: POST\n");
    }

    #[test]
    fn a_page_forbids_scripts() {
        let (resp, _) = sent(Reply::page("<p>".into()), false);
        assert_eq!(resp.headers()[header::CONTENT_SECURITY_POLICY], PAGE_CSP);
        assert_eq!(resp.headers()[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(resp.headers()[header::CONTENT_TYPE], PAGE_CONTENT_TYPE);
    }
}
