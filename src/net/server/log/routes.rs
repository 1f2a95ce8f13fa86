//! Routing: the strict tlog-tiles read API, `POST /add` and `/healthz`.

use super::reply::{body_refused, busy, method_not_allowed, not_found, refused};
use super::sequencer::{Answer, Job, NotLogged, WRITER_AWAY};
use super::shared::Shared;
use super::status::{host, status_page};
use super::{
    BODY_READ_TIMEOUT, CACHE_CHECKPOINT, CACHE_FULL_TILE, CACHE_PARTIAL_TILE, MAX_BODY_BYTES,
};
use crate::constants::BUNDLE_MEDIA_TYPE;
use crate::constants::TEXT_CONTENT_TYPE;
use crate::limits::MAX_ENTRY_BUNDLE_BYTES;
use crate::log::LogError;
use crate::log::admit::{AcceptedIssuers, RefusalClass, admit};
use crate::net::server::{HttpMetrics, Reply, Service, read_body};
use crate::storage::{Family, PublicKey, TileKey};
use crate::tlog::tiles::MAX_HASH_TILE_BYTES;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header;
use hyper::{Method, Request, StatusCode};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;
use tokio::sync::{Semaphore, oneshot};

/// The log service: its state, what its routes need.
pub(super) struct LogService {
    pub(super) shared: Arc<Shared>,
    pub(super) tx: mpsc::Sender<Job>,
    pub(super) permits: Arc<Semaphore>,
    pub(super) queue_max: usize,
    pub(super) accepted: AcceptedIssuers,
}

impl Service for LogService {
    fn route(&self, req: Request<Incoming>) -> impl Future<Output = Reply> + Send {
        route(req, self)
    }

    fn http_metrics(&self) -> &HttpMetrics {
        self.shared.metrics.http()
    }
}

/// The 200 answer without a bundle.
#[derive(serde::Serialize)]
pub(super) struct Indexed<'a> {
    pub(super) index: u64,
    pub(super) receipt_id: &'a str,
    pub(super) tree_size: u64,
    pub(super) new: bool,
}

/// The routes of spec/service.md "Endpoints".
pub(super) async fn route(req: Request<Incoming>, ctx: &LogService) -> Reply {
    let path = req.uri().path();
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    if path == "/add" {
        return if req.method() == Method::POST {
            add(req, ctx).await
        } else {
            method_not_allowed("POST")
        };
    }
    if path == "/" || path == "/metrics" {
        return if !read {
            method_not_allowed("GET, HEAD")
        } else if path == "/" {
            status_page(ctx, host(&req)).await
        } else {
            Reply::metrics(ctx.shared.metrics.scrape(ctx))
        };
    }
    if path == "/healthz" {
        return if !read {
            method_not_allowed("GET, HEAD")
        } else if ctx.shared.writer_alive.load(Ordering::Relaxed) {
            let size = ctx.shared.published().size;
            Reply::json(
                StatusCode::OK,
                &serde_json::json!({"status": "ok", "tree_size": size}),
            )
        } else {
            refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "log_unavailable",
                "the log writer stopped after an error and is being opened again; see the service log",
            )
        };
    }
    let key = path
        .strip_prefix('/')
        .filter(|p| p.len() <= MAX_PUBLIC_PATH_BYTES)
        .and_then(PublicKey::from_path);
    match key {
        None => not_found(),
        Some(_) if !read => method_not_allowed("GET, HEAD"),
        Some(p) => read_public(p, &ctx.shared).await,
    }
}

/// Longest public path looked at (the longest valid one is under 80 bytes).
pub(super) const MAX_PUBLIC_PATH_BYTES: usize = 128;

/// True when every hash or entry of tile `key` lies inside the tree of
/// `size` leaves (the published checkpoint): only such tiles are served.
pub(super) fn within(key: &TileKey, size: u64) -> bool {
    // Nodes of the tile's level (tree level 8·L) that the tree holds.
    let Some(count) = size.checked_shr(8 * u32::from(key.family().level())) else {
        return false;
    };
    key.index()
        .checked_mul(crate::tlog::tiles::TILE_WIDTH)
        .and_then(|start| start.checked_add(key.width().items() as u64))
        .is_some_and(|end| end <= count)
}

/// Serve the checkpoint, or a tile the published checkpoint covers.
pub(super) async fn read_public(key: PublicKey, shared: &Shared) -> Reply {
    let published = shared.published();
    let tile = match key {
        PublicKey::Checkpoint if published.checkpoint.is_empty() => {
            return busy(
                "not_witnessed",
                "no checkpoint is published yet: waiting for a quorum of witnesses",
            );
        }
        PublicKey::Checkpoint => {
            return Reply::new(StatusCode::OK, TEXT_CONTENT_TYPE, published.checkpoint)
                .cache(CACHE_CHECKPOINT);
        }
        PublicKey::Tile(t) => t,
    };
    // A tile past the checkpoint may be rewritten by the next append: never served.
    if !within(&tile, published.size) {
        return not_found();
    }
    let max = match tile.family() {
        Family::Entries => MAX_ENTRY_BUNDLE_BYTES,
        Family::Hashes(_) => MAX_HASH_TILE_BYTES,
    };
    let read = tokio::task::spawn_blocking(move || {
        // The store refuses a symlink as the file itself; a symlinked
        // directory above it is refused here.
        if has_symlink(&published.dir, &key.path()) {
            return None;
        }
        published.store.read(&key, max).ok().flatten()
    })
    .await;
    match read {
        Ok(Some(bytes)) => Reply::new(
            StatusCode::OK,
            "application/octet-stream",
            Bytes::from(bytes),
        )
        .cache(if tile.width().partial_width().is_none() {
            CACHE_FULL_TILE
        } else {
            CACHE_PARTIAL_TILE
        }),
        _ => not_found(),
    }
}

/// True when a directory on the way from `dir` to `dir/rel` is a symbolic link.
pub(super) fn has_symlink(dir: &Path, rel: &str) -> bool {
    let mut cur = dir.to_path_buf();
    let mut parts = rel.split('/').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            return false; // the file itself: the store's read checks it
        }
        cur.push(part);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => return true,
            Ok(_) => {}
            Err(_) => return false, // absent: the read finds nothing
        }
    }
    false
}

/// True when the Accept header asks for the bundle media type.
pub(super) fn wants_bundle(req: &Request<Incoming>) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            item.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case(BUNDLE_MEDIA_TYPE))
        })
}

/// `POST /add`: permit, body, admission, queue, answer.
pub(super) async fn add(req: Request<Incoming>, ctx: &LogService) -> Reply {
    if !ctx.shared.writer_alive.load(Ordering::Relaxed) {
        return busy("log_unavailable", WRITER_AWAY);
    }
    let Ok(_permit) = Arc::clone(&ctx.permits).try_acquire_owned() else {
        return busy("queue_full", "the submission queue is full; retry later");
    };
    let want_bundle = wants_bundle(&req);
    let bytes = match read_body(req, MAX_BODY_BYTES, BODY_READ_TIMEOUT).await {
        Ok(bytes) => bytes,
        Err(e) => return body_refused(&e),
    };
    let admitted = match admit(&bytes, Some(&ctx.accepted)) {
        Ok(a) => a,
        Err(r) => {
            let status = match r.class() {
                RefusalClass::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
                RefusalClass::NotAccepted => StatusCode::FORBIDDEN,
                _ => StatusCode::BAD_REQUEST,
            };
            return refused(status, r.reason().as_str(), &r.to_string());
        }
    };
    drop(bytes);
    // The entry goes to the writer; a bundle answer needs it again.
    let kept = want_bundle.then(|| admitted.entry.clone());
    let receipt_id = admitted.receipt_id;
    let (reply, answer) = oneshot::channel();
    let job = Job {
        entry: Some(crate::log::HashedEntry::new(admitted.entry)),
        arrived: Instant::now(),
        want_bundle,
        reply,
    };
    if ctx.tx.send(job).is_err() {
        return busy("log_unavailable", "the log writer is not running");
    }
    match answer.await {
        Ok(Ok(a)) => answered(receipt_id, kept, a).await,
        Ok(Err(NotLogged::Failed(detail))) => refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "log_write_failed",
            &detail,
        ),
        Ok(Err(NotLogged::NotWitnessed(detail))) => busy("not_witnessed", &detail),
        Ok(Err(NotLogged::Unavailable(detail))) => busy("log_unavailable", &detail),
        Err(_) => busy("log_unavailable", "the log writer stopped"),
    }
}

/// The 200 answer: the index JSON, or the bundle (proof made off the async workers).
pub(super) async fn answered(receipt_id: String, entry: Option<Vec<u8>>, a: Answer) -> Reply {
    let Some(entry) = entry else {
        return Reply::json(
            StatusCode::OK,
            &Indexed {
                index: a.index,
                receipt_id: &receipt_id,
                tree_size: a.tree_size,
                new: a.new,
            },
        );
    };
    let Some(log) = a.snapshot else {
        return refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "proof_failed",
            &format!(
                "the entry is logged at {}, but the log could not be read for its proof",
                a.index
            ),
        );
    };
    let made = tokio::task::spawn_blocking(move || {
        // The published checkpoint, with any witness cosignatures.
        let bundle = log.bundle_of(a.index, &entry, a.tree_size, &a.checkpoint)?;
        Ok::<_, LogError>(bundle.to_json())
    })
    .await;
    match made {
        Ok(Ok(mut json)) => {
            json.push('\n');
            Reply::new(StatusCode::OK, BUNDLE_MEDIA_TYPE, Bytes::from(json))
        }
        Ok(Err(e)) => refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "proof_failed",
            &format!(
                "the entry is logged at {}, but its proof failed: {e}",
                a.index
            ),
        ),
        Err(_) => refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "proof_failed",
            "the proof task stopped",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(path: &str) -> TileKey {
        match PublicKey::from_path(path) {
            Some(PublicKey::Tile(t)) => t,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn a_tile_is_served_only_inside_the_published_tree() {
        for (path, first_size) in [
            ("tile/0/001", 512),
            ("tile/entries/001.p/3", 259),
            ("tile/1/000", 65_536),
            ("tile/1/000.p/1", 256),
            ("tile/2/000.p/1", 65_536),
        ] {
            assert!(!within(&tile(path), first_size - 1), "{path}");
            assert!(within(&tile(path), first_size), "{path}");
        }
        let last = format!(
            "tile/0/{}",
            crate::tlog::tiles::path::encode_index(u64::MAX)
        );
        assert!(!within(&tile(&last), u64::MAX));
    }
}
