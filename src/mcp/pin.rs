//! pin: the tool table from a server's own list (`rcpt gate mcp pin`,
//! spec/gate-mcp.md "Pinning").
//!
//! The server is started and asked as a client that speaks both eras
//! would (MCP stdio "Backward Compatibility"): `server/discover` first at
//! the modern version; a `DiscoverResult` means modern, and `tools/list`
//! carries the per-request `_meta`; any other answer, or none within
//! [`PIN_PROBE_TIMEOUT`], means legacy: `initialize`, `initialized`, then
//! `tools/list`. Every page is read (`nextCursor`). Then the server's
//! stdin is closed and it is waited for.

use super::stdio::{Line, read_line};
use super::table::{self, Listed};
use std::ffi::OsString;
use std::io::{BufReader, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// How long the server has to answer the era probe.
pub const PIN_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server has to answer any other request of `pin`.
pub const PIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Most `tools/list` pages read.
pub const MAX_PIN_PAGES: usize = 100;
/// The modern version `pin` speaks.
pub const MODERN_VERSION: &str = "2026-07-28";
/// UnsupportedProtocolVersionError (MCP 2026-07-28).
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// The legacy version `pin` offers in `initialize`.
pub const LEGACY_VERSION: &str = "2025-11-25";

/// Why the tools could not be listed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PinError {
    /// The server could not be started.
    #[error("starting the server {0:?}")]
    Spawn(OsString, #[source] std::io::Error),
    /// No command.
    #[error("no server command given (after --)")]
    NoCommand,
    /// Talking to the server failed.
    #[error("the server {0}")]
    Server(String),
    /// A message could not be written to the server's input.
    #[error("the server closed its input")]
    Input(#[source] std::io::Error),
}

/// The era the server spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `server/discover`, per-request `_meta`.
    Modern,
    /// `initialize`.
    Legacy,
}

/// The tools a server lists, and the era it spoke.
#[derive(Debug)]
pub struct PinnedList {
    /// Every tool, in the server's order.
    pub tools: Vec<Listed>,
    /// The era.
    pub era: Era,
}

fn meta() -> serde_json::Value {
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "rcpt-gate-mcp-pin", "version": env!("CARGO_PKG_VERSION")},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

struct Talk {
    stdin: std::process::ChildStdin,
    lines: Receiver<String>,
    next: u64,
}

impl Talk {
    fn send(&mut self, method: &str, params: serde_json::Value, id: bool) -> Result<u64, PinError> {
        self.next += 1;
        let mut msg = serde_json::json!({"jsonrpc": "2.0", "method": method, "params": params});
        if id && let Some(o) = msg.as_object_mut() {
            o.insert("id".into(), self.next.into());
        }
        writeln!(self.stdin, "{msg}")
            .and_then(|()| self.stdin.flush())
            .map_err(PinError::Input)?;
        Ok(self.next)
    }

    /// The answer to request `id` (other messages skipped), or `None` on timeout.
    fn answer(&self, id: u64, timeout: Duration) -> Result<Option<serde_json::Value>, PinError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(PinError::Server("ended before answering".into()));
                }
            };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if v.get("id").and_then(serde_json::Value::as_u64) == Some(id)
                && v.get("method").is_none()
            {
                return Ok(Some(v));
            }
        }
    }

    fn request(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, PinError> {
        let id = self.send(method, params, true)?;
        let v = self.answer(id, PIN_TIMEOUT)?.ok_or_else(|| {
            PinError::Server(format!("did not answer {method} in {PIN_TIMEOUT:?}"))
        })?;
        match v.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(PinError::Server(format!(
                "answered {method} with an error: {}",
                v.get("error").unwrap_or(&v)
            ))),
        }
    }
}

/// Start `command`, list its tools, stop it.
pub fn list_tools(command: &[OsString]) -> Result<PinnedList, PinError> {
    let (program, args) = command.split_first().ok_or(PinError::NoCommand)?;
    let mut child = super::stdio::spawn_server(program, args)
        .map_err(|e| PinError::Spawn(program.clone(), e))?;
    let (tx, lines) = std::sync::mpsc::sync_channel(64);
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            while let Some(Line::Text(t)) = read_line(&mut r, super::MAX_FRAME_BYTES) {
                if tx.send(t).is_err() {
                    return;
                }
            }
        });
    }
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| PinError::Server("has no stdin".into()))?;
    let mut talk = Talk {
        stdin,
        lines,
        next: 0,
    };
    let listed = converse(&mut talk);
    drop(talk);
    super::stdio::stop(&mut child);
    listed
}

/// The legacy handshake; a server that answers it with -32022 naming the
/// modern version answered the probe after its timeout (a slow start) and
/// serves the modern era (as the SDKs' fallback rule has it).
fn legacy_or_late_modern(talk: &mut Talk) -> Result<Era, PinError> {
    let params = serde_json::json!({"protocolVersion": LEGACY_VERSION, "capabilities": {},
        "clientInfo": {"name": "rcpt-gate-mcp-pin", "version": env!("CARGO_PKG_VERSION")}});
    let id = talk.send("initialize", params, true)?;
    let answer = talk
        .answer(id, PIN_TIMEOUT)?
        .ok_or_else(|| PinError::Server(format!("did not answer initialize in {PIN_TIMEOUT:?}")))?;
    if answer.get("result").is_some() {
        talk.send("notifications/initialized", serde_json::json!({}), false)?;
        return Ok(Era::Legacy);
    }
    let error = answer.get("error").cloned().unwrap_or_default();
    let modern = error.get("code").and_then(serde_json::Value::as_i64) == Some(UNSUPPORTED_VERSION)
        && error
            .pointer("/data/supported")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|v| v.iter().any(|s| s.as_str() == Some(MODERN_VERSION)));
    if modern {
        return Ok(Era::Modern);
    }
    Err(PinError::Server(format!(
        "answered initialize with an error: {error}"
    )))
}

fn converse(talk: &mut Talk) -> Result<PinnedList, PinError> {
    let probe = talk.send(
        "server/discover",
        serde_json::json!({"_meta": meta()}),
        true,
    )?;
    let modern = talk
        .answer(probe, PIN_PROBE_TIMEOUT)?
        .and_then(|v| v.get("result").cloned())
        .and_then(|r| r.get("supportedVersions").cloned())
        .and_then(|v| v.as_array().cloned())
        .is_some_and(|v| v.iter().any(|s| s.as_str() == Some(MODERN_VERSION)));
    let era = if modern {
        Era::Modern
    } else {
        legacy_or_late_modern(talk)?
    };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PIN_PAGES {
        let mut params = serde_json::Map::new();
        if era == Era::Modern {
            params.insert("_meta".into(), meta());
        }
        if let Some(c) = cursor.take() {
            params.insert("cursor".into(), c.into());
        }
        let page = talk.request("tools/list", serde_json::Value::Object(params))?;
        let list = page
            .get("tools")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| PinError::Server("answered tools/list without a tools array".into()))?;
        for t in list {
            tools.push(table::listed(t).ok_or_else(|| {
                PinError::Server(format!(
                    "listed a tool without a name or an RFC 8785 form: {t}"
                ))
            })?);
        }
        match page.get("nextCursor").and_then(serde_json::Value::as_str) {
            Some(c) => cursor = Some(c.to_string()),
            None => return Ok(PinnedList { tools, era }),
        }
    }
    Err(PinError::Server(format!(
        "listed over {MAX_PIN_PAGES} pages of tools"
    )))
}
