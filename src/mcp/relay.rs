//! relay: where each message goes (spec/gate-mcp.md "Relaying").
//!
//! Transport-free: a message from the client or the server goes in, the
//! messages to send come out ([`Out`]). Everything passes as it came but
//! `tools/list` answers (the tools the table does not hold as listed are
//! removed) and `tools/call`: a `read` tool's call is forwarded and its
//! answer recorded in the session; any other call is a step, forwarded
//! only once [`Gate::prepare`] made its decision durable, its answer
//! relayed only once [`Gate::finish`] made its receipt durable, with the
//! receipt's id in the result's `_meta`. A refused step is answered by the
//! proxy with a tool result whose `isError` is true.
//!
//! The proxy sends requests of its own only to list the server's tools
//! when a call comes before the client listed them or after the server
//! said the list changed. Their ids are strings `rcpt-<random>-<n>`; a
//! client request reusing an id in flight (its own or the proxy's) is
//! refused, so no answer is ever routed to the wrong caller and the
//! client's ids pass unchanged.

use super::frame::{self, IdKey, Kind, code};
use super::step::{Call, Gate, InFlight, Outcome, Prepared, Refused};
use super::table::{self, Listed};
use crate::digest::Digest;
use crate::receipt::Verdict;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// The `_meta` key of the receipt id on a relayed or refused answer.
pub const META_RECEIPT: &str = "dev.rcpt/receipt";
/// The `_meta` key of the verdict.
pub const META_VERDICT: &str = "dev.rcpt/verdict";
/// The `_meta` key of the reasons of a refusal.
pub const META_REASONS: &str = "dev.rcpt/reasons";
/// The `_meta` key of the protocol version of a modern request.
const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// Most calls parked while the proxy lists the server's tools.
pub const MAX_PARKED_CALLS: usize = 256;

/// A message to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out {
    /// To the server.
    Server(String),
    /// To the client.
    Client(String),
}

/// A client request in flight.
#[derive(Debug)]
enum Pending {
    /// Forwarded, answered as it comes.
    Plain,
    /// `tools/list`: the answer is filtered.
    List,
    /// A read call: its answer is recorded.
    Read { tool: String, arguments: Digest },
    /// A step: its answer gets the receipt.
    Step { step: Box<InFlight> },
    /// Parked until the server's tools are listed.
    Waiting,
}

#[derive(Debug, Default)]
struct State {
    pending: HashMap<IdKey, Pending>,
    own: HashMap<IdKey, ()>,
    view: Option<HashMap<String, Listed>>,
    listing: Vec<Listed>,
    parked: Vec<String>,
    modern_meta: Option<String>,
    own_seq: u64,
}

/// A note for the operator (the binary prints it).
pub type Note = Box<dyn Fn(&str) + Send + Sync>;

/// The router of one session.
pub struct Relay {
    gate: Gate,
    state: Mutex<State>,
    prefix: String,
    note: Note,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

fn error(id: Option<&IdKey>, code: i64, message: &str) -> Out {
    Out::Client(frame::error_response(id, code, message, None))
}

impl Relay {
    /// A relay deciding with `gate`; `note` hears what an operator should.
    pub fn new(gate: Gate, note: Note) -> Relay {
        let mut raw = [0u8; 8];
        let _ = getrandom::fill(&mut raw);
        Relay {
            gate,
            state: Mutex::new(State::default()),
            prefix: format!("rcpt-{}", crate::digest::to_hex(&raw)),
            note,
        }
    }

    /// The gate.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Stop: every receipt stored and logged.
    pub fn close(&self) {
        self.gate.close();
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A message from the client.
    pub fn from_client(&self, text: &str) -> Vec<Out> {
        let f = match frame::parse(text) {
            Ok(f) => f,
            Err(e) => {
                (self.note)(&format!("refused a message from the client: {e}"));
                return vec![error(
                    None,
                    e.code(),
                    &format!("rcpt gate mcp refused this message: {e}"),
                )];
            }
        };
        match (f.kind, f.id.clone()) {
            (Kind::Request, Some(id)) => self.request(&f, id),
            _ => vec![Out::Server(text.to_string())],
        }
    }

    fn request(&self, f: &frame::Frame<'_>, id: IdKey) -> Vec<Out> {
        let method = f.method.as_deref().unwrap_or_default();
        let modern = f.params.and_then(modern_meta);
        let mut st = self.state();
        if st.pending.contains_key(&id) || st.own.contains_key(&id) {
            return vec![error(
                Some(&id),
                code::INVALID_REQUEST,
                "this id is already in flight",
            )];
        }
        if st.pending.len() >= super::MAX_IN_FLIGHT {
            return vec![error(
                Some(&id),
                code::INTERNAL_ERROR,
                "too many calls in flight",
            )];
        }
        if let Some(m) = &modern {
            st.modern_meta = Some(m.clone());
        }
        match method {
            "tools/call" => {
                drop(st);
                self.call(f.text, id, modern.is_some())
            }
            "tools/list" => {
                st.pending.insert(id, Pending::List);
                vec![Out::Server(f.text.to_string())]
            }
            _ => {
                st.pending.insert(id, Pending::Plain);
                vec![Out::Server(f.text.to_string())]
            }
        }
    }

    /// A `tools/call` request (its id free and not yet in `pending`).
    fn call(&self, text: &str, id: IdKey, modern: bool) -> Vec<Out> {
        let (name, arguments_text, arguments) = match call_params(text) {
            Ok(p) => p,
            Err(why) => return vec![error(Some(&id), code::INVALID_PARAMS, why)],
        };
        let mut st = self.state();
        let Some(view) = &st.view else {
            return self.park(st, text, id);
        };
        let listed = view.get(&name).cloned();
        if self.gate.kind_of(&name, listed.as_ref()) == Some(super::policy::ToolKind::Read) {
            let Ok(digest) = table::jcs_sha256(&arguments) else {
                return vec![error(
                    Some(&id),
                    code::INVALID_PARAMS,
                    "the arguments have no RFC 8785 form",
                )];
            };
            let read = Pending::Read {
                tool: name,
                arguments: digest,
            };
            st.pending.insert(id, read);
            return vec![Out::Server(text.to_string())];
        }
        st.pending.insert(id.clone(), Pending::Waiting);
        drop(st);
        let call = Call {
            tool: &name,
            arguments_text: &arguments_text,
            arguments: &arguments,
            listed: listed.as_ref(),
        };
        let prepared = self.gate.prepare(&call);
        self.decided(prepared, text, id, &name, modern)
    }

    /// Forward a prepared step, or answer its refusal or failure.
    fn decided(
        &self,
        prepared: Result<Prepared, super::step::StepError>,
        text: &str,
        id: IdKey,
        name: &str,
        modern: bool,
    ) -> Vec<Out> {
        let mut st = self.state();
        match prepared {
            Ok(Prepared::Forward(step)) => {
                st.pending.insert(id, Pending::Step { step });
                vec![Out::Server(text.to_string())]
            }
            Ok(Prepared::Refused(r)) => {
                st.pending.remove(&id);
                (self.note)(&format!("{name} refused: {}", r.details.join("; ")));
                vec![Out::Client(refusal(&id, &r, modern, self.gate.store.dir()))]
            }
            Err(e) => {
                st.pending.remove(&id);
                let msg = format!(
                    "rcpt gate mcp could not evaluate this call (nothing was forwarded): {}",
                    crate::io::error_chain(&e)
                );
                (self.note)(&msg);
                vec![error(Some(&id), code::INTERNAL_ERROR, &msg)]
            }
        }
    }

    /// Hold a call until the server's tools are listed (the proxy asks).
    fn park(&self, mut st: MutexGuard<'_, State>, text: &str, id: IdKey) -> Vec<Out> {
        if st.parked.len() >= MAX_PARKED_CALLS {
            return vec![error(
                Some(&id),
                code::INTERNAL_ERROR,
                "too many calls waiting for the tool list",
            )];
        }
        st.pending.insert(id, Pending::Waiting);
        st.parked.push(text.to_string());
        if st.own.is_empty() {
            st.listing.clear();
            return vec![self.own_list(&mut st, None)];
        }
        Vec::new()
    }

    /// The proxy's own first `tools/list` request when it has no view of
    /// the server's tools and is not already listing them (a transport
    /// that cannot park calls lists first: Streamable HTTP).
    pub fn list_first(&self) -> Option<Out> {
        let mut st = self.state();
        if st.view.is_some() || !st.own.is_empty() {
            return None;
        }
        st.listing.clear();
        Some(self.own_list(&mut st, None))
    }

    /// The proxy's own `tools/list` request (a page after `cursor`).
    fn own_list(&self, st: &mut State, cursor: Option<&str>) -> Out {
        st.own_seq += 1;
        let id = IdKey::Text(format!("{}-{}", self.prefix, st.own_seq));
        let mut params = serde_json::Map::new();
        if let Some(c) = cursor {
            params.insert("cursor".into(), serde_json::Value::String(c.to_string()));
        }
        let mut text = serde_json::Value::Object(params).to_string();
        if let Some(meta) = &st.modern_meta {
            let sep = if text == "{}" { "" } else { "," };
            text = format!("{{\"_meta\":{meta}{sep}{}", text.get(1..).unwrap_or("}"));
        }
        let out = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/list\",\"params\":{text}}}",
            id.to_json()
        );
        st.own.insert(id, ());
        Out::Server(out)
    }
}

/// A `tools/call`'s name, its arguments' text (`{}` when absent) and value.
fn call_params(text: &str) -> Result<(String, String, serde_json::Value), &'static str> {
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
fn modern_meta(params: &RawValue) -> Option<String> {
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

impl Relay {
    /// A message from the server.
    pub fn from_server(&self, text: &str) -> Vec<Out> {
        let f = match frame::parse(text) {
            Ok(f) => f,
            Err(e) => {
                (self.note)(&format!("refused a message from the server: {e}"));
                let msg = format!("rcpt gate mcp refused this message: {e}");
                return vec![Out::Server(frame::error_response(
                    None,
                    e.code(),
                    &msg,
                    None,
                ))];
            }
        };
        let id = match (f.kind, &f.id) {
            (Kind::Result | Kind::Error, Some(id)) => id.clone(),
            _ => {
                if f.method.as_deref() == Some("notifications/tools/list_changed") {
                    self.state().view = None;
                }
                return vec![Out::Client(text.to_string())];
            }
        };
        let mut st = self.state();
        if st.own.remove(&id).is_some() {
            return self.own_answer(st, &f);
        }
        let pending = st.pending.remove(&id);
        drop(st);
        match pending {
            Some(Pending::List) => vec![Out::Client(self.listed(&f))],
            Some(Pending::Read { tool, arguments }) => {
                if let Some(answer) = answer_digest(&f) {
                    self.gate.record_read(&tool, arguments, answer);
                }
                vec![Out::Client(text.to_string())]
            }
            Some(Pending::Step { step }) => vec![Out::Client(self.answered(*step, &f))],
            _ => vec![Out::Client(text.to_string())],
        }
    }

    /// A `tools/list` answer for the client: filtered by the table; the
    /// listed tools update the proxy's view.
    fn listed(&self, f: &frame::Frame<'_>) -> String {
        let Some(result) = f.result else {
            return f.text.to_string();
        };
        let Some(filtered) = table::filter(&self.gate.policy, result) else {
            return f.text.to_string();
        };
        if let Some(view) = self.state().view.as_mut() {
            for t in &filtered.tools {
                if view.len() < table::MAX_LISTED_TOOLS || view.contains_key(&t.name) {
                    view.insert(t.name.clone(), t.clone());
                }
            }
        }
        for (name, why) in &filtered.hidden {
            (self.note)(&format!("{name} hidden from the client: {why}"));
        }
        match filtered.shown {
            None => f.text.to_string(),
            Some(shown) => frame::span_in(f.text, result.get())
                .and_then(|r| frame::splice(f.text, r, &shown))
                .unwrap_or_else(|| f.text.to_string()),
        }
    }

    /// A step's answer: receipt issued (durable), its id in `_meta`.
    fn answered(&self, step: InFlight, f: &frame::Frame<'_>) -> String {
        let Some(answer) = answer_digest(f) else {
            return f.text.to_string();
        };
        let ok = f.result.is_some_and(succeeded);
        match self.gate.finish(step, &Outcome::Answered { ok, answer }) {
            Ok(receipt) => {
                let entries =
                    format!("\"{META_RECEIPT}\":\"{receipt}\",\"{META_VERDICT}\":\"admit\"");
                f.result
                    .and_then(|r| frame::with_result_meta(f.text, r, &entries))
                    .unwrap_or_else(|| f.text.to_string())
            }
            Err(e) => {
                (self.note)(&format!(
                    "the receipt of a forwarded call could not be made durable ({}); \
                     its decision is, and the next start issues it",
                    crate::io::error_chain(&e)
                ));
                f.text.to_string()
            }
        }
    }

    /// An answer to the proxy's own `tools/list`.
    fn own_answer(&self, mut st: MutexGuard<'_, State>, f: &frame::Frame<'_>) -> Vec<Out> {
        let page = f.result.and_then(|r| table::filter(&self.gate.policy, r));
        let Some(page) = page else {
            let parked = std::mem::take(&mut st.parked);
            let mut out = Vec::new();
            for text in parked {
                if let Some(id) = frame::parse(&text).ok().and_then(|p| p.id) {
                    st.pending.remove(&id);
                    out.push(error(
                        Some(&id),
                        code::INTERNAL_ERROR,
                        "the server did not list its tools: the call was not forwarded",
                    ));
                }
            }
            return out;
        };
        st.listing.extend(page.tools);
        if let Some(cursor) = page.next_cursor {
            if st.listing.len() < table::MAX_LISTED_TOOLS {
                return vec![self.own_list(&mut st, Some(&cursor))];
            }
            (self.note)(&format!(
                "the server lists over {} tools: the rest are not read (and so not callable)",
                table::MAX_LISTED_TOOLS
            ));
        }
        let listing = std::mem::take(&mut st.listing);
        st.view = Some(listing.into_iter().map(|t| (t.name.clone(), t)).collect());
        let parked = std::mem::take(&mut st.parked);
        drop(st);
        let mut out = Vec::new();
        for text in parked {
            if let Some(id) = frame::parse(&text).ok().and_then(|p| p.id) {
                self.state().pending.remove(&id);
                out.extend(self.from_client(&text));
            }
        }
        out
    }

    /// A forwarded request that will get no answer (its transport failed):
    /// its pending entry dropped, a step's receipt issued (no answer seen);
    /// the error the client gets.
    pub fn abandon(&self, request: &str, why: &str) -> Option<String> {
        let id = frame::parse(request).ok()?.id?;
        let pending = self.state().pending.remove(&id)?;
        let msg = self.unanswered(pending, &format!("the server did not answer ({why})"), why);
        Some(frame::error_response(
            Some(&id),
            code::INTERNAL_ERROR,
            &msg,
            None,
        ))
    }

    /// `msg` for a request that gets no answer; a step's receipt issued
    /// first (no answer seen) and named.
    fn unanswered(&self, pending: Pending, msg: &str, why: &str) -> String {
        let Pending::Step { step } = pending else {
            return msg.to_string();
        };
        match self
            .gate
            .finish(*step, &Outcome::Unanswered(why.to_string()))
        {
            Ok(r) => format!("{msg}; receipt {r}"),
            Err(e) => format!(
                "{msg}; its receipt is issued at the next start ({})",
                crate::io::error_chain(&e)
            ),
        }
    }

    /// The server is gone: every call in flight answered; every forwarded
    /// step gets its receipt (no answer was seen).
    pub fn server_gone(&self, why: &str) -> Vec<Out> {
        let mut st = self.state();
        let pending: Vec<(IdKey, Pending)> = st.pending.drain().collect();
        st.parked.clear();
        st.own.clear();
        drop(st);
        let mut out = Vec::new();
        for (id, p) in pending {
            let msg = self.unanswered(
                p,
                &format!("the server ended before answering ({why})"),
                why,
            );
            out.push(error(Some(&id), code::INTERNAL_ERROR, &msg));
        }
        out
    }
}

/// `sha256:` over the RFC 8785 form of an answer's `result` or `error`.
fn answer_digest(f: &frame::Frame<'_>) -> Option<Digest> {
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
    }
    let a: Answer = serde_json::from_str(f.text).ok()?;
    let v = a.result.or(a.error)?;
    table::jcs_sha256(&v).ok()
}

/// A tool result that is complete and not `isError`.
fn succeeded(result: &RawValue) -> bool {
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
