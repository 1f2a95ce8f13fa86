//! Routing: the strict tlog-tiles read API, `POST /add` and `/healthz`.

use super::*;
use crate::constants::BUNDLE_MEDIA_TYPE;
use crate::log::admit::{AcceptedIssuers, RefusalClass, admit};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::sync::mpsc;

/// Everything a request handler needs.
pub(super) struct Ctx {
    pub(super) shared: Arc<Shared>,
    pub(super) tx: mpsc::Sender<Job>,
    pub(super) permits: Arc<Semaphore>,
    pub(super) queue_max: usize,
    pub(super) accepted: AcceptedIssuers,
    pub(super) sink: RequestSink,
    pub(super) requests: AtomicU64,
}

/// The 200 answer without a bundle.
#[derive(serde::Serialize)]
pub(super) struct Indexed<'a> {
    pub(super) index: u64,
    pub(super) receipt_id: &'a str,
    pub(super) tree_size: u64,
    pub(super) new: bool,
}

/// Route one request, answer it, and write its log line.
pub(super) async fn handle(
    req: Request<Incoming>,
    ctx: &Ctx,
    remote: SocketAddr,
) -> Response<Full<Bytes>> {
    let start = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let head = method == Method::HEAD;
    let reply = route(req, ctx).await;
    let metrics = &ctx.shared.metrics;
    metrics.request(route_name(&path), reply.status.as_u16());
    if path == "/add" && method == Method::POST {
        metrics.add_answer(reply.status.as_u16(), reply.error);
    }
    let line = RequestLine {
        time_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        remote,
        method: method.as_str(),
        path: truncated(&path, MAX_LOGGED_PATH_BYTES),
        status: reply.status.as_u16(),
        bytes: reply.body.len(),
        ms: (start.elapsed().as_secs_f64() * 1e6).round() / 1e3,
        error: reply.error,
    };
    if let Ok(text) = serde_json::to_string(&line) {
        (ctx.sink)(&text);
    }
    ctx.requests.fetch_add(1, Ordering::Relaxed);
    reply.into_response(head)
}

pub(super) async fn route(req: Request<Incoming>, ctx: &Ctx) -> Reply {
    let path = req.uri().path();
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    if path == "/add" {
        return if req.method() == Method::POST {
            add(req, ctx).await
        } else {
            Reply::method_not_allowed("POST")
        };
    }
    if path == "/" || path == "/metrics" {
        return if !read {
            Reply::method_not_allowed("GET, HEAD")
        } else if path == "/" {
            status_page(ctx, host(&req)).await
        } else {
            Reply::metrics(ctx.shared.metrics.scrape(ctx))
        };
    }
    if path == "/healthz" {
        return if !read {
            Reply::method_not_allowed("GET, HEAD")
        } else if ctx.shared.writer_alive.load(Ordering::Relaxed) {
            let size = ctx.shared.published().size;
            Reply::json(
                StatusCode::OK,
                &serde_json::json!({"status": "ok", "tree_size": size}),
            )
        } else {
            Reply::error(
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
        None => Reply::not_found(),
        Some(_) if !read => Reply::method_not_allowed("GET, HEAD"),
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
            return Reply::busy(
                "not_witnessed",
                "no checkpoint is published yet: waiting for a quorum of witnesses",
            );
        }
        PublicKey::Checkpoint => {
            return Reply {
                status: StatusCode::OK,
                body: published.checkpoint,
                content_type: "text/plain; charset=utf-8",
                cache: CACHE_CHECKPOINT,
                extra: Vec::new(),
                error: None,
            };
        }
        PublicKey::Tile(t) => t,
    };
    // A tile past the checkpoint may be rewritten by the next append: never served.
    if !within(&tile, published.size) {
        return Reply::not_found();
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
        Ok(Some(bytes)) => Reply {
            status: StatusCode::OK,
            body: Bytes::from(bytes),
            content_type: "application/octet-stream",
            cache: if tile.width().partial_width().is_none() {
                CACHE_FULL_TILE
            } else {
                CACHE_PARTIAL_TILE
            },
            extra: Vec::new(),
            error: None,
        },
        _ => Reply::not_found(),
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
pub(super) async fn add(req: Request<Incoming>, ctx: &Ctx) -> Reply {
    if !ctx.shared.writer_alive.load(Ordering::Relaxed) {
        return Reply::busy("log_unavailable", WRITER_AWAY);
    }
    let Ok(_permit) = Arc::clone(&ctx.permits).try_acquire_owned() else {
        return Reply::busy("queue_full", "the submission queue is full; retry later");
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return too_large();
    }
    let want_bundle = wants_bundle(&req);
    let body = Limited::new(req.into_body(), MAX_BODY_BYTES);
    let bytes = match tokio::time::timeout(BODY_READ_TIMEOUT, body.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => return too_large(),
        Ok(Err(e)) => {
            return Reply::error(StatusCode::BAD_REQUEST, "body_unreadable", &e.to_string());
        }
        Err(_) => {
            return Reply::error(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                "the request body did not arrive in time",
            );
        }
    };
    let admitted = match admit(&bytes, Some(&ctx.accepted)) {
        Ok(a) => a,
        Err(r) => {
            let status = match r.class() {
                RefusalClass::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
                RefusalClass::NotAccepted => StatusCode::FORBIDDEN,
                _ => StatusCode::BAD_REQUEST,
            };
            return Reply::error(status, r.reason().as_str(), &r.to_string());
        }
    };
    drop(bytes);
    // The entry goes to the writer; a bundle answer needs it again.
    let kept = want_bundle.then(|| admitted.entry.clone());
    let receipt_id = admitted.receipt_id;
    let (reply, answer) = oneshot::channel();
    let job = Job {
        entry: admitted.entry,
        arrived: Instant::now(),
        want_bundle,
        reply,
    };
    if ctx.tx.send(job).is_err() {
        return Reply::busy("log_unavailable", "the log writer is not running");
    }
    match answer.await {
        Ok(Ok(a)) => answered(receipt_id, kept, a).await,
        Ok(Err(NotLogged::Failed(detail))) => Reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "log_write_failed",
            &detail,
        ),
        Ok(Err(NotLogged::NotWitnessed(detail))) => Reply::busy("not_witnessed", &detail),
        Ok(Err(NotLogged::Unavailable(detail))) => Reply::busy("log_unavailable", &detail),
        Err(_) => Reply::busy("log_unavailable", "the log writer stopped"),
    }
}

pub(super) fn too_large() -> Reply {
    Reply::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        crate::reason::Reason::EnvelopeTooLarge.as_str(),
        &format!("the body is over the {MAX_BODY_BYTES}-byte limit"),
    )
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
        return Reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "proof_failed",
            &format!(
                "the entry is logged at {}, but the log could not be read for its proof",
                a.index
            ),
        );
    };
    let made = tokio::task::spawn_blocking(move || {
        let inclusion = log.inclusion_proof(a.index, a.tree_size)?;
        // The published checkpoint, with any witness cosignatures.
        let checkpoint = a.checkpoint.to_string();
        let bundle = log.bundle_from(a.index, &entry, inclusion, a.tree_size, &checkpoint)?;
        Ok::<_, LogError>(bundle.to_json())
    })
    .await;
    match made {
        Ok(Ok(mut json)) => {
            json.push('\n');
            Reply {
                status: StatusCode::OK,
                body: Bytes::from(json),
                content_type: BUNDLE_MEDIA_TYPE,
                cache: CACHE_NONE,
                extra: Vec::new(),
                error: None,
            }
        }
        Ok(Err(e)) => Reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "proof_failed",
            &format!(
                "the entry is logged at {}, but its proof failed: {e}",
                a.index
            ),
        ),
        Err(_) => Reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "proof_failed",
            "the proof task stopped",
        ),
    }
}
