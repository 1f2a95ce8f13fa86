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

use super::commit::{Durable, Item, Job};
use super::frame::{self, IdKey, Kind, code};
use super::step::{Call, Gate, InFlight, Outcome, Prepared};
use super::table::{self, Listed};
use super::wire::{answer_digest, call_params, modern_meta, refusal, succeeded};
use crate::digest::Digest;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// The `_meta` key of the receipt id on a relayed or refused answer.
pub const META_RECEIPT: &str = "dev.rcpt/receipt";
/// The `_meta` key of the verdict.
pub const META_VERDICT: &str = "dev.rcpt/verdict";
/// The `_meta` key of the reasons of a refusal.
pub const META_REASONS: &str = "dev.rcpt/reasons";
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

    /// A message from the client: what to send, once what it made durable
    /// is committed here.
    pub fn from_client(&self, text: &str) -> Vec<Out> {
        self.commit(vec![self.stage_from_client(text)])
    }

    /// A message from the client, its durable part staged, not committed:
    /// [`Relay::commit`] sends it (with the jobs read meanwhile).
    pub fn stage_from_client(&self, text: &str) -> Job {
        let mut durable = Durable::new();
        let items = self.client_message(text, &mut durable);
        Job { items, durable }
    }

    /// Commit the jobs' durable parts as one, then give their messages in
    /// order (a message whose commit failed gives its failure instead).
    pub fn commit(&self, jobs: Vec<Job>) -> Vec<Out> {
        let mut durable = Durable::new();
        let mut items = Vec::new();
        for j in jobs {
            durable.absorb(j.durable);
            items.extend(j.items);
        }
        let committed = match self.gate.commit(durable) {
            Ok(()) => true,
            Err(e) => {
                (self.note)(&format!(
                    "steps could not be made durable ({}): none of them was forwarded",
                    crate::io::error_chain(&e)
                ));
                false
            }
        };
        let mut outs = Vec::with_capacity(items.len());
        for item in items {
            outs.push(match item {
                Item::Now(o) => o,
                Item::After { ok, .. } if committed => ok,
                Item::After { failed, forget, .. } => {
                    if let Some(id) = forget {
                        self.state().pending.remove(&id);
                    }
                    failed
                }
            });
        }
        outs
    }

    fn client_message(&self, text: &str, d: &mut Durable) -> Vec<Item> {
        let f = match frame::parse(text) {
            Ok(f) => f,
            Err(e) => {
                (self.note)(&format!("refused a message from the client: {e}"));
                let msg = format!("rcpt gate mcp refused this message: {e}");
                return vec![error(None, e.code(), &msg).into()];
            }
        };
        match (f.kind, f.id.clone()) {
            (Kind::Request, Some(id)) => self.request(&f, id, d),
            _ => vec![Out::Server(text.to_string()).into()],
        }
    }

    fn request(&self, f: &frame::Frame<'_>, id: IdKey, d: &mut Durable) -> Vec<Item> {
        let method = f.method.as_deref().unwrap_or_default();
        let modern = f.params.and_then(modern_meta);
        let mut st = self.state();
        if st.pending.contains_key(&id) || st.own.contains_key(&id) {
            let msg = "this id is already in flight";
            return vec![error(Some(&id), code::INVALID_REQUEST, msg).into()];
        }
        if st.pending.len() >= super::MAX_IN_FLIGHT {
            let msg = "too many calls in flight";
            return vec![error(Some(&id), code::INTERNAL_ERROR, msg).into()];
        }
        if let Some(m) = &modern {
            st.modern_meta = Some(m.clone());
        }
        match method {
            "tools/call" => {
                drop(st);
                self.call(f.text, id, modern.is_some(), d)
            }
            "tools/list" => {
                st.pending.insert(id, Pending::List);
                vec![Out::Server(f.text.to_string()).into()]
            }
            _ => {
                st.pending.insert(id, Pending::Plain);
                vec![Out::Server(f.text.to_string()).into()]
            }
        }
    }

    /// A `tools/call` request (its id free and not yet in `pending`).
    fn call(&self, text: &str, id: IdKey, modern: bool, d: &mut Durable) -> Vec<Item> {
        let (name, arguments_text, arguments) = match call_params(text) {
            Ok(p) => p,
            Err(why) => return vec![error(Some(&id), code::INVALID_PARAMS, why).into()],
        };
        let mut st = self.state();
        let Some(view) = &st.view else {
            return self
                .park(st, text, id)
                .into_iter()
                .map(Item::from)
                .collect();
        };
        let listed = view.get(&name).cloned();
        if self.gate.kind_of(&name, listed.as_ref()) == Some(super::policy::ToolKind::Read) {
            let Ok(digest) = table::jcs_sha256(&arguments) else {
                let msg = "the arguments have no RFC 8785 form";
                return vec![error(Some(&id), code::INVALID_PARAMS, msg).into()];
            };
            let read = Pending::Read {
                tool: name,
                arguments: digest,
            };
            st.pending.insert(id, read);
            return vec![Out::Server(text.to_string()).into()];
        }
        st.pending.insert(id.clone(), Pending::Waiting);
        drop(st);
        let call = Call {
            tool: &name,
            arguments_text: &arguments_text,
            arguments: &arguments,
            listed: listed.as_ref(),
        };
        let prepared = self.gate.prepare(&call, d);
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
    ) -> Vec<Item> {
        let mut st = self.state();
        let unsaved = |id: &IdKey| {
            let msg = "rcpt gate mcp could not make its decision durable: \
                       the call was not forwarded";
            error(Some(id), code::INTERNAL_ERROR, msg)
        };
        match prepared {
            Ok(Prepared::Forward(step)) => {
                st.pending.insert(id.clone(), Pending::Step { step });
                vec![Item::After {
                    ok: Out::Server(text.to_string()),
                    failed: unsaved(&id),
                    forget: Some(id),
                }]
            }
            Ok(Prepared::Refused(r)) => {
                st.pending.remove(&id);
                (self.note)(&format!("{name} refused: {}", r.details.join("; ")));
                let answer = refusal(&id, &r, modern, self.gate.store.dir());
                vec![Item::After {
                    ok: Out::Client(answer),
                    failed: unsaved(&id),
                    forget: None,
                }]
            }
            Err(e) => {
                st.pending.remove(&id);
                let msg = format!(
                    "rcpt gate mcp could not evaluate this call (nothing was forwarded): {}",
                    crate::io::error_chain(&e)
                );
                (self.note)(&msg);
                vec![error(Some(&id), code::INTERNAL_ERROR, &msg).into()]
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
    /// that cannot park calls lists first: Streamable HTTP), before the
    /// client's message, whose `params` are given. A 2026-07-28 message's
    /// `_meta` is taken first, so that the request speaks the client's era
    /// (that era's server refuses a request without it).
    pub fn list_first(&self, params: Option<&serde_json::value::RawValue>) -> Option<Out> {
        let modern = params.and_then(modern_meta);
        let mut st = self.state();
        if let Some(m) = modern {
            st.modern_meta = Some(m);
        }
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

impl Relay {
    /// A message from the server.
    pub fn from_server(&self, text: &str) -> Vec<Out> {
        self.commit(vec![self.stage_from_server(text)])
    }

    /// A message from the server, its durable part staged, not committed
    /// (see [`Relay::stage_from_client`]).
    pub fn stage_from_server(&self, text: &str) -> Job {
        let mut durable = Durable::new();
        let items = self.server_message(text, &mut durable);
        Job { items, durable }
    }

    fn server_message(&self, text: &str, d: &mut Durable) -> Vec<Item> {
        let f = match frame::parse(text) {
            Ok(f) => f,
            Err(e) => {
                (self.note)(&format!("refused a message from the server: {e}"));
                let msg = format!("rcpt gate mcp refused this message: {e}");
                let answer = frame::error_response(None, e.code(), &msg, None);
                return vec![Out::Server(answer).into()];
            }
        };
        let id = match (f.kind, &f.id) {
            (Kind::Result | Kind::Error, Some(id)) => id.clone(),
            _ => {
                if f.method.as_deref() == Some("notifications/tools/list_changed") {
                    self.state().view = None;
                }
                return vec![Out::Client(text.to_string()).into()];
            }
        };
        let mut st = self.state();
        if st.own.remove(&id).is_some() {
            return self.own_answer(st, &f, d);
        }
        let pending = st.pending.remove(&id);
        drop(st);
        let plain = match pending {
            Some(Pending::List) => self.listed(&f),
            Some(Pending::Read { tool, arguments }) => {
                if let Some(answer) = answer_digest(&f) {
                    self.gate.record_read(&tool, arguments, answer);
                }
                text.to_string()
            }
            Some(Pending::Step { step }) => return vec![self.answered(*step, &f, d)],
            _ => text.to_string(),
        };
        vec![Out::Client(plain).into()]
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

    /// A step's answer: its receipt staged in `d`; relayed with the
    /// receipt's id in `_meta` once that is durable (as it came if not:
    /// the decision is durable, and the next start issues the receipt).
    fn answered(&self, step: InFlight, f: &frame::Frame<'_>, d: &mut Durable) -> Item {
        let as_came = Out::Client(f.text.to_string());
        let Some(answer) = answer_digest(f) else {
            return as_came.into();
        };
        let ok = f.result.is_some_and(succeeded);
        match self.gate.finish(step, &Outcome::Answered { ok, answer }, d) {
            Ok(receipt) => {
                let entries =
                    format!("\"{META_RECEIPT}\":\"{receipt}\",\"{META_VERDICT}\":\"admit\"");
                let with_meta = f
                    .result
                    .and_then(|r| frame::with_result_meta(f.text, r, &entries))
                    .unwrap_or_else(|| f.text.to_string());
                Item::After {
                    ok: Out::Client(with_meta),
                    failed: as_came,
                    forget: None,
                }
            }
            Err(e) => {
                (self.note)(&format!(
                    "the receipt of a forwarded call could not be made durable ({}); \
                     its decision is, and the next start issues it",
                    crate::io::error_chain(&e)
                ));
                as_came.into()
            }
        }
    }

    /// An answer to the proxy's own `tools/list`.
    fn own_answer(
        &self,
        mut st: MutexGuard<'_, State>,
        f: &frame::Frame<'_>,
        d: &mut Durable,
    ) -> Vec<Item> {
        let page = f.result.and_then(|r| table::filter(&self.gate.policy, r));
        let Some(page) = page else {
            let parked = std::mem::take(&mut st.parked);
            let mut out = Vec::new();
            for text in parked {
                if let Some(id) = frame::parse(&text).ok().and_then(|p| p.id) {
                    st.pending.remove(&id);
                    let msg = "the server did not list its tools: the call was not forwarded";
                    out.push(error(Some(&id), code::INTERNAL_ERROR, msg).into());
                }
            }
            return out;
        };
        st.listing.extend(page.tools);
        if let Some(cursor) = page.next_cursor {
            if st.listing.len() < table::MAX_LISTED_TOOLS {
                return vec![self.own_list(&mut st, Some(&cursor)).into()];
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
                out.extend(self.client_message(&text, d));
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
        let mut d = Durable::new();
        let finished = self
            .gate
            .finish(*step, &Outcome::Unanswered(why.to_string()), &mut d)
            .and_then(|r| self.gate.commit(d).map(|()| r));
        match finished {
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
