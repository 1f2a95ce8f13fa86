//! wire: what the relay reads from and writes into messages: a call's
//! name and arguments, the modern era's `_meta`, an answer's digest and
//! success, and the answer to a refused step (spec/gate-mcp.md "Refusals").

use super::frame::{self, IdKey};
use super::relay::{META_REASONS, META_RECEIPT, META_VERDICT};
use super::step::Refused;
use super::table;
use crate::digest::Digest;
use crate::receipt::Verdict;
use serde_json::value::RawValue;

/// The `_meta` key of the protocol version of a modern request.
const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// A `tools/call`'s name, its arguments' text (`{}` when absent) and value.
pub fn call_params(text: &str) -> Result<(String, String, serde_json::Value), &'static str> {
    #[derive(serde::Deserialize)]
    struct Params<'a> {
        name: String,
        #[serde(borrow)]
        arguments: Option<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Wire<'a> {
        #[serde(borrow)]
        params: Params<'a>,
    }
    let Ok(Wire { params }) = serde_json::from_str::<Wire<'_>>(text) else {
        return Err("tools/call needs params {\"name\": text, \"arguments\": object}");
    };
    let arguments_text = params.arguments.map_or("{}", RawValue::get);
    match serde_json::from_str(arguments_text) {
        Ok(v @ serde_json::Value::Object(_)) => Ok((params.name, arguments_text.to_string(), v)),
        _ => Err("tools/call arguments must be an object"),
    }
}

/// The `io.modelcontextprotocol/*` entries of a modern request's
/// `params._meta`, as a JSON object text (what the proxy's own requests
/// carry); `None` for a request of the legacy era.
pub fn modern_meta(params: &RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct P {
        #[serde(rename = "_meta")]
        meta: Option<serde_json::Map<String, serde_json::Value>>,
    }
    let meta = serde_json::from_str::<P>(params.get()).ok()?.meta?;
    meta.get(PROTOCOL_VERSION)?;
    let kept: serde_json::Map<String, serde_json::Value> = meta
        .into_iter()
        .filter(|(k, _)| k.starts_with("io.modelcontextprotocol/"))
        .collect();
    Some(serde_json::Value::Object(kept).to_string())
}

/// The answer to a refused step: a tool result with `isError` true naming
/// the verdict, the reasons and the receipt (and for an escalation, the
/// ticket and the approve command for the store `store`).
pub fn refusal(id: &IdKey, r: &Refused, modern: bool, store: &std::path::Path) -> String {
    let (word, ticket) = match &r.verdict {
        Verdict::Deny { .. } => ("deny", None),
        Verdict::Escalate { ticket } => ("escalate", Some(ticket)),
        Verdict::Admit { .. } => ("admit", None),
    };
    let reasons = &r.reasons;
    let mut text = format!(
        "rcpt gate refused this call: {word} ({}). Receipt {}.",
        reasons.join(", "),
        r.receipt_id
    );
    if !r.details.is_empty() {
        text.push_str(&format!(" Found: {}.", r.details.join("; ")));
    }
    if let Some(ticket) = ticket {
        text.push_str(&format!(
            " Ticket {ticket}. An approver can admit this call: rcpt gate approve RECEIPT \
             --key APPROVER.key --gate-key-file GATE.vkey --store {} (RECEIPT: this receipt's \
             bundle from the log, or its envelope); then make the same call again.",
            store.display()
        ));
    }
    let mut result = serde_json::json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
        "_meta": {META_RECEIPT: r.receipt_id.to_string(), META_VERDICT: word, META_REASONS: reasons},
    });
    if modern && let Some(obj) = result.as_object_mut() {
        obj.insert(
            "resultType".into(),
            serde_json::Value::String("complete".into()),
        );
    }
    frame::result_response(id, &result.to_string())
}

/// `sha256:` over the RFC 8785 form of an answer's `result` or `error`,
/// the protocol's members left out: `_meta` (a 2026-07-28 server puts its
/// `serverInfo` there, a 2025-11-25 one nothing) and a `resultType` of
/// `"complete"` (the 2026-07-28 era says it, a 2025-11-25 result is
/// complete without it). The same answer has one digest in either era.
pub fn answer_digest(f: &frame::Frame<'_>) -> Option<Digest> {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
    }
    let a: Answer = serde_json::from_str(f.text).ok()?;
    let mut v = a.result.or(a.error)?;
    if let Some(m) = v.as_object_mut() {
        m.remove("_meta");
        if m.get("resultType").and_then(serde_json::Value::as_str) == Some("complete") {
            m.remove("resultType");
        }
    }
    table::jcs_sha256(&v).ok()
}

/// A tool result that is complete and not `isError`.
pub fn succeeded(result: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct R {
        #[serde(rename = "isError")]
        is_error: Option<bool>,
        #[serde(rename = "resultType")]
        result_type: Option<String>,
    }
    serde_json::from_str::<R>(result.get()).is_ok_and(|r| {
        r.is_error != Some(true) && r.result_type.as_deref().is_none_or(|t| t == "complete")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_of(text: &str) -> Option<Digest> {
        answer_digest(&frame::parse(text).unwrap())
    }

    #[test]
    fn an_answers_digest_leaves_out_its_meta_and_nothing_else() {
        let legacy =
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}]}}"#;
        let modern = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"files"}}}}"#;
        let incomplete = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"resultType":"incomplete"}}"#;
        let other = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"y"}]}}"#;
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#;
        assert_eq!(digest_of(legacy), digest_of(modern));
        assert!(digest_of(legacy).is_some());
        assert_ne!(digest_of(legacy), digest_of(other));
        assert_ne!(digest_of(legacy), digest_of(incomplete));
        assert!(digest_of(error).is_some() && digest_of(error) != digest_of(legacy));
    }
}
