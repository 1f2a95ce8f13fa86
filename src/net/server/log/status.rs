//! `GET /`: the status page of `log serve` (spec/service.md "Status
//! page"): origin, tree size, checkpoint age, the witnesses and the size
//! each last cosigned, the last entries decoded, and the commands a reader
//! needs. No script; every value from an entry goes through
//! [`crate::net::server::html::escape`] inside `<bdi>`.
//!
//! Bounded work: the entries shown are the last [`STATUS_ENTRIES`] of the
//! published checkpoint, read from at most two entry bundles of the log's
//! own store (the size is the one this service published, never a size a
//! request names).

use super::routes::LogService;
use crate::net::client::witnessing::Witnessing;
use crate::net::server::Reply;
use crate::net::server::html::{age, bdi, escape, page, table, utc};
use crate::receipt::Verdict;
use crate::receipt::dsse::Envelope;
use crate::storage::PublicRead;
use crate::storage::tiles::TileReader;
use crate::tlog::tiles::TILE_WIDTH;
use hyper::Request;
use hyper::body::Incoming;
use hyper::header;
use std::sync::Arc;

/// Entries shown on the page: the last ones of the published tree.
pub const STATUS_ENTRIES: u64 = 20;
/// Longest `Host` header used in the page's commands.
const MAX_HOST_BYTES: usize = 255;

/// One entry as the page shows it.
struct Row {
    index: u64,
    decoded: Result<(String, String, &'static str, i64), NotReceipt>,
}

/// Why the last entries could not be read.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    /// The reading task stopped.
    #[error("the read task stopped")]
    Task(#[source] tokio::task::JoinError),
    /// A tile could not be read.
    #[error(transparent)]
    Tiles(#[from] crate::tlog::tiles::TileError),
}

/// Why an entry is not a receipt entry.
#[derive(Debug, thiserror::Error)]
enum NotReceipt {
    /// Not an envelope.
    #[error(transparent)]
    Envelope(#[from] crate::receipt::dsse::EntryError),
    /// Its payload is not a receipt.
    #[error(transparent)]
    Payload(#[from] crate::receipt::PayloadError),
}

/// The `Host` the request named, when it is a plain host[:port] (used in
/// the commands shown; escaped all the same).
pub(super) fn host(req: &Request<Incoming>) -> Option<String> {
    let h = req.headers().get(header::HOST)?.to_str().ok()?;
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']');
    (!h.is_empty() && h.len() <= MAX_HOST_BYTES && h.chars().all(plain)).then(|| h.to_string())
}

/// The page.
pub(super) async fn status_page(ctx: &LogService, host: Option<String>) -> Reply {
    let published = ctx.shared.published();
    let size = published.size;
    let store: Arc<dyn PublicRead> = published.store.clone();
    let rows = tokio::task::spawn_blocking(move || last_entries(store, size))
        .await
        .unwrap_or_else(|e| Err(ReadError::Task(e)));
    let shared = &ctx.shared;
    let root = crate::tlog::note::Note::parse(&published.checkpoint)
        .ok()
        .and_then(|n| crate::tlog::note::Checkpoint::parse(&n.text).ok())
        .map(|c| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(c.root_hash)
        });
    let mut body = format!(
        "<h1>rcpt log <bdi id=\"origin\">{}</bdi></h1>\n<dl>\n\
         <dt>Tree size</dt><dd id=\"tree-size\">{size}</dd>\n\
         <dt>Root hash</dt><dd><code id=\"root-hash\">{}</code></dd>\n\
         <dt>Checkpoint age</dt><dd id=\"checkpoint-age\">{}</dd>\n\
         <dt>Log key</dt><dd><code id=\"log-key\">{}</code></dd>\n</dl>\n",
        escape(&shared.origin),
        escape(root.as_deref().unwrap_or("none published yet")),
        age(shared.checkpoint_age().as_secs()),
        escape(&shared.vkey),
    );
    body.push_str(&witnesses(shared.witnessing.as_deref()));
    body.push_str(&entries_table(&rows));
    body.push_str(&commands(host.as_deref(), &shared.vkey));
    Reply::page(page(&format!("rcpt log {}", shared.origin), &body))
}

/// The last [`STATUS_ENTRIES`] entries of the tree of `size`, newest first.
fn last_entries(store: Arc<dyn PublicRead>, size: u64) -> Result<Vec<Row>, ReadError> {
    let reader = TileReader::over(store, size, None);
    let first = size.saturating_sub(STATUS_ENTRIES);
    let mut rows = Vec::new();
    if size == 0 {
        return Ok(rows);
    }
    for n in (first / TILE_WIDTH)..=((size - 1) / TILE_WIDTH) {
        let bundle = reader.entry_bundle(n)?;
        for (i, entry) in bundle.iter().enumerate() {
            let index = n * TILE_WIDTH + i as u64;
            if index >= first && index < size {
                rows.push(Row {
                    index,
                    decoded: decode(entry),
                });
            }
        }
    }
    rows.reverse();
    Ok(rows)
}

/// Receipt id, issuer, verdict and issued_at of one entry.
fn decode(entry: &[u8]) -> Result<(String, String, &'static str, i64), NotReceipt> {
    let env = Envelope::from_entry(entry)?;
    let (receipt, id) = crate::receipt::receipt_from_cbor(&env.payload)?;
    let verdict = match receipt.verdict {
        Verdict::Admit { .. } => "admit",
        Verdict::Deny { .. } => "deny",
        Verdict::Escalate { .. } => "escalate",
    };
    Ok((id.to_string(), receipt.issuer, verdict, receipt.issued_at))
}

fn entries_table(rows: &Result<Vec<Row>, ReadError>) -> String {
    let rows = match rows {
        Ok(rows) if rows.is_empty() => return "<h2>Last entries</h2>\n<p>None yet.</p>\n".into(),
        Ok(rows) => rows,
        Err(e) => {
            return format!(
                "<h2>Last entries</h2>\n<p>The entries could not be read: {}</p>\n",
                bdi(&crate::io::error_chain(e))
            );
        }
    };
    let rows = rows.iter().map(|row| {
        let cells = match &row.decoded {
            Ok((id, issuer, verdict, at)) => format!(
                "<td><code>{}</code></td><td class=\"issuer\">{}</td><td>{verdict}</td>\
                 <td><time>{}</time> ({at})</td>",
                escape(id),
                bdi(issuer),
                utc(*at)
            ),
            Err(e) => format!(
                "<td colspan=\"4\">not a receipt entry: {}</td>",
                bdi(&crate::io::error_chain(e))
            ),
        };
        format!(
            "<tr data-index=\"{0}\"><td>{0}</td>{cells}</tr>\n",
            row.index
        )
    });
    let heads = ["index", "receipt id", "issuer", "verdict", "issued_at"];
    format!("<h2>Last entries</h2>\n{}", table("entries", &heads, rows))
}

fn witnesses(witnessing: Option<&Witnessing>) -> String {
    let Some(w) = witnessing else {
        return "<h2>Witnesses</h2>\n<p>None: this log publishes its checkpoints unwitnessed.</p>\n"
            .into();
    };
    let rows = w.status().into_iter().map(|s| {
        let size = s
            .known_size
            .map_or_else(|| "not yet".to_string(), |n| n.to_string());
        format!(
            "<tr><td>{}</td><td class=\"cosigned-size\">{size}</td><td>{} / {} / {}</td></tr>\n",
            bdi(&s.name),
            s.cosigned,
            s.refused,
            s.unreachable
        )
    });
    let heads = [
        "witness",
        "size last cosigned",
        "cosigned / refused / unreachable",
    ];
    format!("<h2>Witnesses</h2>\n{}", table("witnesses", &heads, rows))
}

fn commands(host: Option<&str>, vkey: &str) -> String {
    let url = host.map_or_else(|| "URL".to_string(), |h| format!("http://{h}"));
    format!(
        "<h2>Read and verify</h2>\n<p>The log is served as C2SP tlog-tiles \
         (<code>/checkpoint</code>, <code>/tile/…</code>). Mirror it, checking every new \
         tile and the consistency with what you mirrored before; then prove and verify \
         offline:</p>\n<pre id=\"commands\">rcpt log mirror {} ./mirror --log-key '{}'\n\
         rcpt log prove ./mirror --receipt receipt.json -o receipt.bundle.json\n\
         rcpt verify receipt.bundle.json --trust trust.json</pre>\n",
        escape(&url),
        escape(vkey)
    )
}
