//! frame: one JSON-RPC 2.0 message of MCP, read strictly and classified
//! (spec/gate-mcp.md "Framing").
//!
//! A frame is one line of UTF-8 JSON (stdio) or one HTTP body. It is
//! checked once for what lets two readers see two messages in one text
//! (duplicate keys at any depth, nesting past [`MAX_FRAME_DEPTH`], trailing
//! data: [`crate::strictjson::check`]), then its top-level members are
//! borrowed as raw JSON, so a frame that passes is forwarded as the very
//! bytes that came. Only the members the proxy acts on are decoded:
//! `jsonrpc`, `id`, `method`, and for `tools/call` and `tools/list` their
//! `params` or `result`. No I/O.

use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;

/// Deepest nesting of arrays and objects in a frame (tool schemas nest).
pub const MAX_FRAME_DEPTH: usize = 64;

/// JSON-RPC error codes the proxy answers with (JSON-RPC 2.0 section 5.1).
pub mod code {
    /// Invalid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid JSON-RPC message.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The proxy could not evaluate or relay the call.
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// Why a frame is refused (never passed on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Not JSON, a duplicate key, too deep, trailing data, not UTF-8.
    #[error("not a JSON message: {0}")]
    Json(crate::strictjson::StrictJsonError),
    /// JSON, but not a JSON-RPC 2.0 message of MCP.
    #[error("not a JSON-RPC 2.0 message: {0}")]
    Shape(String),
    /// Over the line limit.
    #[error("a message of over {0} bytes")]
    TooLong(usize),
}

impl FrameError {
    /// The JSON-RPC error code answering this refusal.
    pub fn code(&self) -> i64 {
        match self {
            FrameError::Json(_) => code::PARSE_ERROR,
            _ => code::INVALID_REQUEST,
        }
    }
}

/// A request or response id, as a key: strings by their value, numbers by
/// their RFC 8785 form (`1.0` and `1` are one id, as a peer that parses
/// and echoes it sees them).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdKey {
    /// A string id.
    Text(String),
    /// A number id, in its canonical JSON form.
    Number(String),
}

impl IdKey {
    /// The id of raw JSON `raw` (a string or a number), else `None`.
    pub fn of(raw: &RawValue) -> Option<IdKey> {
        let v: serde_json::Value = serde_json::from_str(raw.get()).ok()?;
        match v {
            serde_json::Value::String(s) => Some(IdKey::Text(s)),
            serde_json::Value::Number(_) => serde_jcs::to_string(&v).ok().map(IdKey::Number),
            _ => None,
        }
    }

    /// The id as JSON text.
    pub fn to_json(&self) -> String {
        match self {
            IdKey::Text(s) => serde_json::Value::String(s.clone()).to_string(),
            IdKey::Number(n) => n.clone(),
        }
    }
}

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `method` and `id`.
    Request,
    /// `method`, no `id`.
    Notification,
    /// `id` and `result`.
    Result,
    /// `id` (possibly null) and `error`.
    Error,
}

/// A frame that passed the checks, borrowed from its text.
#[derive(Debug)]
pub struct Frame<'a> {
    /// The whole text, as received (what is forwarded).
    pub text: &'a str,
    /// Its kind.
    pub kind: Kind,
    /// The id (absent for notifications; null only for an error).
    pub id: Option<IdKey>,
    /// The raw id as received.
    pub raw_id: Option<&'a RawValue>,
    /// The method of a request or notification.
    pub method: Option<Cow<'a, str>>,
    /// `params`, raw.
    pub params: Option<&'a RawValue>,
    /// `result`, raw.
    pub result: Option<&'a RawValue>,
}

/// Parse and classify one frame. `text` is one line without its newline.
pub fn parse(text: &str) -> Result<Frame<'_>, FrameError> {
    crate::strictjson::check(text.as_bytes(), MAX_FRAME_DEPTH).map_err(FrameError::Json)?;
    let members: HashMap<Cow<'_, str>, &RawValue> =
        serde_json::from_str(text).map_err(|e| FrameError::Shape(shape_message(&e)))?;
    let shape = |m: &str| FrameError::Shape(m.to_string());
    if members.get("jsonrpc").map(|r| r.get()) != Some("\"2.0\"") {
        return Err(shape("\"jsonrpc\" must be \"2.0\""));
    }
    let raw_id = members.get("id").copied();
    let method = match members.get("method") {
        None => None,
        Some(raw) => Some(
            serde_json::from_str::<Cow<'_, str>>(raw.get())
                .map_err(|_| shape("\"method\" must be a string"))?,
        ),
    };
    let params = members.get("params").copied();
    let result = members.get("result").copied();
    let error = members.get("error").copied();
    let id_null = raw_id.is_some_and(|r| r.get() == "null");
    let id = match raw_id {
        Some(r) if !id_null => {
            Some(IdKey::of(r).ok_or_else(|| shape("\"id\" must be a string or a number"))?)
        }
        _ => None,
    };
    let kind = match (&method, raw_id, result, error) {
        (Some(_), None, None, None) => Kind::Notification,
        (Some(_), Some(_), None, None) if !id_null => Kind::Request,
        (None, Some(_), Some(_), None) if !id_null => Kind::Result,
        (None, Some(_), None, Some(e)) if e.get().starts_with('{') => Kind::Error,
        (Some(_), Some(_), _, _) if id_null => {
            return Err(shape("a request's \"id\" must not be null"));
        }
        _ => {
            return Err(shape(
                "a message is a request (method, id), a notification (method) or a response (id and result or error)",
            ));
        }
    };
    if let Some(p) = params
        && !(p.get().starts_with('{') || p.get().starts_with('['))
    {
        return Err(shape("\"params\" must be an object or an array"));
    }
    Ok(Frame {
        text,
        kind,
        id,
        raw_id: raw_id.filter(|_| !id_null),
        method,
        params,
        result,
    })
}

/// serde_json's message without its "at line 1 column N" noise kept whole.
fn shape_message(e: &serde_json::Error) -> String {
    if e.is_data() {
        "the message must be a JSON object".to_string()
    } else {
        e.to_string()
    }
}

/// A JSON-RPC error response: `{"jsonrpc":"2.0","id":ID,"error":{"code":C,"message":M,"data":D}}`.
pub fn error_response(
    id: Option<&IdKey>,
    code: i64,
    message: &str,
    data: Option<serde_json::Value>,
) -> String {
    let mut error = serde_json::json!({"code": code, "message": message});
    if let (Some(d), Some(obj)) = (data, error.as_object_mut()) {
        obj.insert("data".to_string(), d);
    }
    let id = id.map_or_else(|| "null".to_string(), IdKey::to_json);
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{error}}}")
}

/// A JSON-RPC result response with `result` (raw JSON).
pub fn result_response(id: &IdKey, result: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{result}}}",
        id.to_json()
    )
}

/// The byte range of `inner` inside `outer`, when `inner` is a slice of it
/// (every raw value borrowed from a frame is).
pub fn span_in(outer: &str, inner: &str) -> Option<std::ops::Range<usize>> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    let end = start.checked_add(inner.len())?;
    (end <= outer.len()).then_some(start..end)
}

/// `text` with the byte range `range` replaced by `with`.
pub fn splice(text: &str, range: std::ops::Range<usize>, with: &str) -> Option<String> {
    let (head, tail) = (text.get(..range.start)?, text.get(range.end..)?);
    let mut out = String::with_capacity(head.len() + with.len() + tail.len());
    out.push_str(head);
    out.push_str(with);
    out.push_str(tail);
    Some(out)
}

/// The frame `text` whose `result` object (`result`, borrowed from it)
/// gains the `_meta` entries `entries` (JSON text of `"key":value` pairs):
/// into the result's `_meta` object when it has one, else as a new
/// `_meta`. Every other byte stays as it came.
pub fn with_result_meta(text: &str, result: &RawValue, entries: &str) -> Option<String> {
    let range = span_in(text, result.get())?;
    let members: HashMap<Cow<'_, str>, &RawValue> = serde_json::from_str(result.get()).ok()?;
    match members.get("_meta") {
        Some(meta) if meta.get().starts_with('{') => {
            let m = span_in(text, meta.get())?;
            let empty = serde_json::from_str::<HashMap<Cow<'_, str>, &RawValue>>(meta.get())
                .ok()?
                .is_empty();
            let sep = if empty { "" } else { "," };
            splice(text, m.start + 1..m.start + 1, &format!("{entries}{sep}"))
        }
        Some(_) => None,
        None => {
            let sep = if members.is_empty() { "" } else { "," };
            let at = range.start + 1;
            splice(text, at..at, &format!("\"_meta\":{{{entries}}}{sep}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_classified_and_kept_as_they_came() {
        let t = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#;
        let f = parse(t).unwrap();
        assert_eq!(f.kind, Kind::Request);
        assert_eq!(f.id, Some(IdKey::Number("7".into())));
        assert_eq!(f.method.as_deref(), Some("tools/call"));
        assert_eq!(f.params.unwrap().get(), r#"{"name":"x"}"#);
        let n = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(n.kind, Kind::Notification);
        let r = parse(r#"{"result":{},"jsonrpc":"2.0","id":"a"}"#).unwrap();
        assert_eq!(
            (r.kind, r.id),
            (Kind::Result, Some(IdKey::Text("a".into())))
        );
        let e =
            parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#).unwrap();
        assert_eq!((e.kind, e.id), (Kind::Error, None));
        // 1.0 and 1 are one id.
        let a = parse(r#"{"jsonrpc":"2.0","id":1.0,"result":{}}"#).unwrap();
        assert_eq!(a.id, Some(IdKey::Number("1".into())));
    }

    #[test]
    fn malformed_frames_are_refused_with_their_kind_of_error() {
        let cases = [
            ("{", code::PARSE_ERROR),
            (
                r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
                code::PARSE_ERROR,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}"#,
                code::PARSE_ERROR,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m"} x"#,
                code::PARSE_ERROR,
            ),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
                code::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#,
                code::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"tools/call"}"#,
                code::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#,
                code::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
                code::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
                code::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":3}"#,
                code::INVALID_REQUEST,
            ),
            (r#"{"jsonrpc":"2.0"}"#, code::INVALID_REQUEST),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), want, "{text}: {e}");
        }
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let t = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{deep}}}"#);
        assert_eq!(parse(&t).unwrap_err().code(), code::PARSE_ERROR);
    }

    #[test]
    fn meta_is_added_without_touching_other_bytes() {
        for (text, want) in [
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}"#,
                r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{"k":1},"content":[],"isError":false}}"#,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
                r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{"k":1}}}"#,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{"a": 2.50}, "x" : 1e3}}"#,
                r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{"k":1,"a": 2.50}, "x" : 1e3}}"#,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{ }}}"#,
                r#"{"jsonrpc":"2.0","id":1,"result":{"_meta":{"k":1 }}}"#,
            ),
        ] {
            let f = parse(text).unwrap();
            let out = with_result_meta(text, f.result.unwrap(), r#""k":1"#).unwrap();
            assert_eq!(out, want);
            parse(&out).unwrap();
        }
    }
}
