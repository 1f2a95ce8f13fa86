//! serve: the log as an HTTP service (spec/service.md).
//!
//! One process holds the log's writer lock. Async workers (tokio, hyper
//! HTTP/1.1) serve the read API (C2SP tlog-tiles) and admit `POST /add`
//! submissions; one dedicated writer thread closes batches (at
//! `batch_max` entries or `batch_wait` after a batch's first entry) and
//! integrates each with one durable append ([`LogWriter::append`]: every
//! tile, then the checkpoint, fsynced and renamed). A submitter is answered
//! only after the append that holds its entry has published its checkpoint,
//! so every 200 survives a crash of the process at any instant.
//!
//! Memory is bounded by the queue: a submission takes one of `queue_max`
//! permits before its body is read and keeps it until it is answered, so at
//! most `queue_max` submissions are being read, queued, integrated or
//! answered at once; one more gets 503 with `Retry-After`.

use super::accept::serve_until_stopped;
use crate::bundle::{Bundle, LogProof};
use crate::constants::BUNDLE_MEDIA_TYPE;
use crate::keys::SigningKey;
use crate::limits::{MAX_APPEND_BATCH_ENTRIES, MAX_ENTRY_BUNDLE_BYTES, MAX_ENVELOPE_BYTES};
use crate::log::admit::{AcceptedIssuers, RefusalClass, admit};
use crate::log::{Log, LogError, LogWriter};
use crate::net::witnessing::{Prover, Stopped, Witnessing};
use crate::receipt::dsse::Envelope;
use crate::storage::{Family, PublicKey, Store, TileKey};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{Semaphore, oneshot, watch};

/// Longest request path written to the request log.
pub const MAX_LOGGED_PATH_BYTES: usize = 128;
/// Largest `POST /add` body: one envelope (`limits::MAX_ENVELOPE_BYTES`).
pub const MAX_BODY_BYTES: usize = MAX_ENVELOPE_BYTES;
/// Most open connections; the accept loop waits for one to close beyond it.
pub const MAX_CONNECTIONS: usize = 16_384;
/// Largest `--queue-max`.
pub const MAX_QUEUE: usize = 1 << 20;
/// Time allowed for a request's headers to arrive.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed for a `POST /add` body to arrive.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// `Retry-After` of a 503 (seconds).
pub const RETRY_AFTER_SECONDS: u64 = 1;
/// Largest hash tile file: 256 hashes.
const MAX_HASH_TILE_BYTES: usize = 256 * 32;
/// Cache-Control of the checkpoint (C2SP tlog-tiles: mutable).
pub const CACHE_CHECKPOINT: &str = "no-cache";
/// Cache-Control of a full tile or entry bundle (immutable once published).
pub const CACHE_FULL_TILE: &str = "public, max-age=604800, immutable";
/// Cache-Control of a partial tile (spec/service.md explains the short life).
pub const CACHE_PARTIAL_TILE: &str = "public, max-age=60";
/// Cache-Control of every other answer.
pub const CACHE_NONE: &str = "no-store";

/// How the service runs.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The log directory (for a log on object storage, its `s3://` location, for messages).
    pub dir: PathBuf,
    /// Where the log lives: `None` is the directory `dir`; an object store
    /// (`s3://`) is given here.
    pub store: Option<Arc<dyn Store>>,
    /// Wait for the writer lock (a standby: on object storage, until the
    /// holder's lease is released or expires) instead of failing at once.
    pub wait: bool,
    /// The log's signing key.
    pub key: SigningKey,
    /// Accepted issuers (at least one, by type): an envelope needs a
    /// signature by one of them, under the name its payload gives as `issuer`.
    pub accepted: AcceptedIssuers,
    /// Most entries in one batch (1..=`MAX_APPEND_BATCH_ENTRIES`).
    pub batch_max: usize,
    /// How long a batch stays open after its first entry.
    pub batch_wait: Duration,
    /// Most submissions in the service at once (1..=[`MAX_QUEUE`]).
    pub queue_max: usize,
    /// Witnesses whose quorum must cosign each checkpoint before it is
    /// published (`--witness-policy`); `None` publishes at once.
    pub witnessing: Option<Arc<Witnessing>>,
}

impl ServeConfig {
    /// The store of the log: the one given, or the directory.
    fn open_store(&self) -> Arc<dyn Store> {
        match &self.store {
            Some(store) => Arc::clone(store),
            None => Arc::new(crate::storage::posix::PosixStore::new(&self.dir)),
        }
    }
}

/// Why the service could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A setting is out of range.
    #[error("{0}")]
    Setting(String),
    /// Opening or writing the log failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The async runtime, a signal handler or the writer thread could not start.
    #[error("starting the service: {0}")]
    Start(std::io::Error),
    /// The writer thread stopped abnormally.
    #[error("the log writer thread stopped unexpectedly")]
    WriterThread,
}

/// What a service did, returned when it has drained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Requests answered.
    pub requests: u64,
    /// Durable appends made.
    pub batches: u64,
    /// Submissions integrated (new or duplicate).
    pub integrated: u64,
}

/// Receives one JSON line per request (the CLI writes them to stderr).
pub type RequestSink = Arc<dyn Fn(&str) + Send + Sync>;

/// A bound, not yet running, service: it holds the writer lock and the socket.
pub struct Server {
    config: ServeConfig,
    writer: LogWriter,
    listener: std::net::TcpListener,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("dir", &self.config.dir)
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Check the settings, take the log's writer lock (failing at once if
    /// another writer holds it), and bind `addr`.
    pub fn bind(config: ServeConfig, addr: &str) -> Result<Server, ServeError> {
        if !(1..=MAX_APPEND_BATCH_ENTRIES).contains(&config.batch_max) {
            return Err(ServeError::Setting(format!(
                "--batch-max must be 1..={MAX_APPEND_BATCH_ENTRIES}"
            )));
        }
        if !(1..=MAX_QUEUE).contains(&config.queue_max) {
            return Err(ServeError::Setting(format!(
                "--queue-max must be 1..={MAX_QUEUE}"
            )));
        }
        let writer = LogWriter::open_store(config.open_store(), &config.key, config.wait)?;
        let listener = std::net::TcpListener::bind(addr).map_err(|source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        })?;
        listener.set_nonblocking(true).map_err(ServeError::Start)?;
        Ok(Server {
            config,
            writer,
            listener,
        })
    }

    /// The address the socket is bound to (the port, when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until SIGTERM or SIGINT, then drain: stop accepting, finish
    /// the requests in flight (queued submissions are integrated and
    /// answered), and return.
    pub fn run(self, sink: RequestSink) -> Result<Summary, ServeError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(ServeError::Start)?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let signals = runtime.block_on(async {
            use tokio::signal::unix::{SignalKind, signal};
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            ))
        });
        let (mut term, mut int) = signals.map_err(ServeError::Start)?;
        runtime.spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            let _ = stop_tx.send(true);
        });
        self.run_until(&runtime, stop_rx, sink)
    }

    /// [`Server::run`] with the stop signal given by the caller.
    fn run_until(
        self,
        runtime: &tokio::runtime::Runtime,
        stop: watch::Receiver<bool>,
        sink: RequestSink,
    ) -> Result<Summary, ServeError> {
        let Server {
            config,
            writer,
            listener,
        } = self;
        let shared = Arc::new(Shared::new(
            writer.log(),
            &config.dir,
            config.witnessing.as_deref(),
        ));
        let (tx, rx) = mpsc::channel::<Job>();
        let batcher = Batcher {
            config: config.clone(),
            shared: Arc::clone(&shared),
            sink: Arc::clone(&sink),
            runtime: runtime.handle().clone(),
            stop: stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("rcpt-log-writer".to_string())
            .spawn(move || batcher.run(writer, rx))
            .map_err(ServeError::Start)?;
        let ctx = Arc::new(Ctx {
            shared: Arc::clone(&shared),
            tx,
            permits: Arc::new(Semaphore::new(config.queue_max)),
            accepted: config.accepted,
            sink,
            requests: AtomicU64::new(0),
        });
        let accepted = runtime.block_on(async {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let ctx = Arc::clone(&ctx);
            let handle = move |req, remote| {
                let ctx = Arc::clone(&ctx);
                async move { handle(req, &ctx, remote).await }
            };
            serve_until_stopped(listener, MAX_CONNECTIONS, HEADER_READ_TIMEOUT, stop, handle).await;
            Ok::<_, std::io::Error>(())
        });
        let requests = ctx.requests.load(Ordering::Relaxed);
        // The last sender goes with the context: the writer drains the
        // queue, integrates it, answers, and ends.
        drop(ctx);
        let batches = thread.join().map_err(|_| ServeError::WriterThread)?;
        accepted.map_err(ServeError::Start)?;
        Ok(Summary {
            requests,
            batches: batches.0,
            integrated: batches.1,
        })
    }
}

/// What the read API serves and the health of the writer.
#[derive(Debug)]
struct Shared {
    published: RwLock<Published>,
    writer_alive: AtomicBool,
}

/// The latest published checkpoint (empty: none yet, a witnessed log
/// before its first quorum).
#[derive(Debug, Clone)]
struct Published {
    size: u64,
    checkpoint: Bytes,
    store: Arc<dyn Store>,
    dir: PathBuf,
}

impl Shared {
    /// A witnessed log publishes nothing until its checkpoint is cosigned:
    /// a stored checkpoint that already carries a quorum is published from
    /// the first request on (before any is accepted); any other waits for
    /// the writer thread to get it witnessed.
    fn new(log: &Log, dir: &Path, witnessing: Option<&Witnessing>) -> Shared {
        let stored = (log.size(), Bytes::from(log.checkpoint().to_string()));
        let (size, checkpoint) = match witnessing {
            None => stored,
            Some(w) if quorum_cosigners(w, log.checkpoint()).is_some() => stored,
            Some(_) => (0, Bytes::new()),
        };
        Shared {
            published: RwLock::new(Published {
                size,
                checkpoint,
                store: Arc::clone(log.store()),
                dir: dir.to_path_buf(),
            }),
            writer_alive: AtomicBool::new(true),
        }
    }

    fn published(&self) -> Published {
        match self.published.read() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn publish(&self, size: u64, checkpoint: String) {
        let mut p = match self.published.write() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        };
        p.size = size;
        p.checkpoint = Bytes::from(checkpoint);
    }
}

/// One admitted submission waiting for its batch.
struct Job {
    entry: Vec<u8>,
    /// When the submission was queued: its batch closes `batch_wait` after
    /// the arrival of its first entry, not after the writer picked it up.
    arrived: Instant,
    want_bundle: bool,
    reply: oneshot::Sender<Result<Answer, NotLogged>>,
}

/// Where an integrated submission landed, with a reader of the log at the
/// published size when a bundle was asked for.
struct Answer {
    index: u64,
    new: bool,
    tree_size: u64,
    snapshot: Option<Arc<Log>>,
    /// The published checkpoint (with its cosignatures) of `tree_size`.
    checkpoint: Arc<str>,
}

/// The writer thread: closes batches and integrates them.
struct Batcher {
    config: ServeConfig,
    shared: Arc<Shared>,
    sink: RequestSink,
    /// For the witnessing requests (the writer thread waits on them).
    runtime: tokio::runtime::Handle,
    /// Set at shutdown: witnessing gives up.
    stop: watch::Receiver<bool>,
}

/// One line of the service log per durable append.
#[derive(serde::Serialize)]
struct BatchLine {
    event: &'static str,
    entries: usize,
    new: usize,
    tree_size: u64,
    /// From the first entry's arrival to the batch's close.
    wait_ms: f64,
    /// The durable append, checkpoint published.
    append_ms: f64,
    error: Option<String>,
}

/// Milliseconds, to the microsecond.
fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl Batcher {
    /// Run until every sender is gone and the queue is empty; returns
    /// (appends made, submissions integrated).
    fn run(self, writer: LogWriter, rx: mpsc::Receiver<Job>) -> (u64, u64) {
        // A witnessed log first gets its current checkpoint cosigned (after
        // a restart, the one it may not have published before stopping).
        let mut writer = writer;
        if self.config.witnessing.is_some() {
            let _ = self.publish(&mut writer);
        }
        let mut writer = Some(writer);
        let (mut batches, mut integrated) = (0u64, 0u64);
        while let Some(mut jobs) = self.next_batch(&rx) {
            let Some(w) = writer.as_mut() else {
                reply_all(
                    jobs,
                    &NotLogged::Failed("the log writer has stopped after an error".into()),
                );
                continue;
            };
            let entries: Vec<Vec<u8>> = jobs
                .iter_mut()
                .map(|j| std::mem::take(&mut j.entry))
                .collect();
            let closed = Instant::now();
            let wait = jobs.first().map_or(Duration::ZERO, |j| closed - j.arrived);
            let appended = w.append(&entries);
            let line = |new: usize, size: u64, error: Option<String>| BatchLine {
                event: "batch",
                entries: entries.len(),
                new,
                tree_size: size,
                wait_ms: millis(wait),
                append_ms: millis(closed.elapsed()),
                error,
            };
            match appended {
                Ok(results) => {
                    let new = results.iter().filter(|a| a.new).count();
                    self.log_line(&line(new, w.log().size(), None));
                    batches += 1;
                    integrated += jobs.len() as u64;
                    self.answer(w, jobs, &results);
                }
                Err(e) => {
                    let detail = format!("the log append failed: {e}");
                    self.log_line(&line(0, w.log().size(), Some(detail.clone())));
                    reply_all(jobs, &NotLogged::Failed(detail));
                    // Reopen: the writer's open repairs whatever the failed
                    // append left past the checkpoint (spec/log.md).
                    writer = None;
                    match LogWriter::open_store(self.config.open_store(), &self.config.key, false) {
                        Ok(w) => writer = Some(w),
                        Err(_) => self.shared.writer_alive.store(false, Ordering::Relaxed),
                    }
                }
            }
        }
        (batches, integrated)
    }

    fn log_line(&self, line: &BatchLine) {
        if let Ok(text) = serde_json::to_string(line) {
            (self.sink)(&text);
        }
    }

    /// Wait for a first job, then take more until `batch_max` or
    /// `batch_wait` after the first; `None` once the queue is closed and empty.
    fn next_batch(&self, rx: &mpsc::Receiver<Job>) -> Option<Vec<Job>> {
        let first = rx.recv().ok()?;
        let deadline = first.arrived + self.config.batch_wait;
        let mut jobs = vec![first];
        while jobs.len() < self.config.batch_max {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        Some(jobs)
    }

    /// Publish the log's checkpoint: at once, or, for a witnessed log,
    /// once a quorum of the policy's witnesses cosigned it (waiting as
    /// long as that takes, unless the service stops). The cosigned note is
    /// first made the log's stored checkpoint ([`LogWriter::add_signatures`];
    /// spec/witness.md "Witnessed log"), so the log's files, `log prove`
    /// and a restarted service give it too. A stored checkpoint that
    /// already carries a quorum's cosignatures (after a restart, or a batch
    /// of duplicates) is published as it is.
    fn publish(&self, w: &mut LogWriter) -> Result<Arc<str>, Stopped> {
        let log = w.log();
        let Some(witnessing) = &self.config.witnessing else {
            let note: Arc<str> = Arc::from(log.checkpoint());
            self.shared.publish(log.size(), note.to_string());
            return Ok(note);
        };
        if let Some(cosigners) = quorum_cosigners(witnessing, log.checkpoint()) {
            let line = serde_json::json!({"event": "witnessed", "tree_size": log.size(),
                "published": true, "cosigners": cosigners, "ms": 0.0, "from_store": true});
            (self.sink)(&line.to_string());
            let note: Arc<str> = Arc::from(log.checkpoint());
            self.shared.publish(log.size(), note.to_string());
            return Ok(note);
        }
        let reader = Log::open_store(Arc::clone(log.store()), None).map(Arc::new);
        let prover: Prover = Arc::new(move |m, n| match &reader {
            Ok(r) => r.consistency_proof(m, n).map_err(|e| e.to_string()),
            Err(e) => Err(format!("opening the log for a proof: {e}")),
        });
        let started = Instant::now();
        let size = log.size();
        let unwitnessed = log_signed_only(log.checkpoint(), log.verifier());
        let cosigned = self.runtime.block_on(witnessing.witness(
            &unwitnessed,
            size,
            prover,
            Arc::clone(&self.sink),
            self.stop.clone(),
        ));
        let cosigners = cosigned.as_ref().map(|c| c.cosigners.clone()).ok();
        // Stored before it is published: a submitter's answer means the
        // cosigned checkpoint is durable.
        let stored = cosigned.as_ref().ok().map(|c| w.add_signatures(&c.note));
        let error = match &stored {
            Some(Err(e)) => Some(format!("storing the cosigned checkpoint: {e}")),
            _ => None,
        };
        let line = serde_json::json!({"event": "witnessed", "tree_size": size,
            "published": cosigned.is_ok(), "cosigners": cosigners,
            "ms": millis(started.elapsed()), "stored": matches!(stored, Some(Ok(()))),
            "error": error});
        (self.sink)(&line.to_string());
        let note: Arc<str> = Arc::from(cosigned?.note);
        self.shared.publish(size, note.to_string());
        Ok(note)
    }

    /// The append is durable: publish its checkpoint, then answer each job
    /// (not before: a submitter's answer means its entry is published).
    fn answer(&self, w: &mut LogWriter, jobs: Vec<Job>, results: &[crate::log::Appended]) {
        let Ok(checkpoint) = self.publish(w) else {
            let detail = "the entry is durably logged, but the service stopped before a quorum \
                          of witnesses cosigned its checkpoint; it is published after a restart";
            reply_all(jobs, &NotLogged::NotWitnessed(detail.into()));
            return;
        };
        let log = w.log();
        let snapshot = if jobs.iter().any(|j| j.want_bundle) {
            Log::open_store(Arc::clone(log.store()), None)
                .ok()
                .map(Arc::new)
        } else {
            None
        };
        for (job, a) in jobs.into_iter().zip(results) {
            let _ = job.reply.send(Ok(Answer {
                index: a.index,
                new: a.new,
                tree_size: log.size(),
                checkpoint: Arc::clone(&checkpoint),
                snapshot: if job.want_bundle {
                    snapshot.clone()
                } else {
                    None
                },
            }));
        }
    }
}

/// The names of the policy witnesses whose cosignatures in `note` verify,
/// when they meet the quorum and no listed witness's line fails; `None`
/// otherwise (a note signed by the log alone, or one short of the quorum).
fn quorum_cosigners(witnessing: &Witnessing, note: &str) -> Option<Vec<String>> {
    let policy = witnessing.policy();
    let parsed = crate::tlog::note::Note::parse(note.as_bytes()).ok()?;
    let eval = policy.evaluate(&parsed).ok()?;
    if !eval.quorum_met || !eval.failed_witnesses().is_empty() {
        return None;
    }
    let names = policy.witnesses.iter().zip(&eval.witnesses);
    let names =
        names.filter(|(_, s)| matches!(s, crate::tlog::cosig::CosigStatus::Verified { .. }));
    Some(names.map(|(w, _)| w.name.to_string()).collect())
}

/// `note` with only the signature lines of the log key `verifier`: what
/// the witnesses are sent (a stored note may carry older cosignatures).
fn log_signed_only(note: &str, verifier: &crate::keys::NoteVerifier) -> String {
    use base64::Engine;
    let Ok(parsed) = crate::tlog::note::Note::parse(note.as_bytes()) else {
        return note.to_string();
    };
    let mut out = format!("{}\n", parsed.text);
    for sig in parsed
        .signatures
        .iter()
        .filter(|s| s.name == verifier.name && s.key_hash == verifier.key_hash)
    {
        let mut raw = sig.key_hash.to_vec();
        raw.extend_from_slice(&sig.sig);
        let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
        out.push_str(&format!(
            "{}{} {b64}\n",
            crate::tlog::note::SIGNATURE_LINE_PREFIX,
            sig.name
        ));
    }
    out
}

/// Why a queued submission gets no index.
#[derive(Clone, Debug)]
enum NotLogged {
    /// The append failed (500).
    Failed(String),
    /// Appended durably, but the service stopped before a quorum of
    /// witnesses cosigned its checkpoint (503: published after a restart).
    NotWitnessed(String),
}

fn reply_all(jobs: Vec<Job>, why: &NotLogged) {
    for job in jobs {
        let _ = job.reply.send(Err(why.clone()));
    }
}

/// Everything a request handler needs.
struct Ctx {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Job>,
    permits: Arc<Semaphore>,
    accepted: AcceptedIssuers,
    sink: RequestSink,
    requests: AtomicU64,
}

/// One answer: status, body, content type, cache policy and extra headers.
struct Reply {
    status: StatusCode,
    body: Bytes,
    content_type: &'static str,
    cache: &'static str,
    extra: Vec<(header::HeaderName, HeaderValue)>,
    /// The refusal's reason code, for the request log.
    error: Option<&'static str>,
}

impl Reply {
    fn json(status: StatusCode, value: &impl serde::Serialize) -> Reply {
        let mut body = serde_json::to_vec(value).unwrap_or_default();
        body.push(b'\n');
        Reply {
            status,
            body: Bytes::from(body),
            content_type: "application/json",
            cache: CACHE_NONE,
            extra: Vec::new(),
            error: None,
        }
    }

    fn error(status: StatusCode, reason: &'static str, detail: &str) -> Reply {
        let mut r = Reply::json(
            status,
            &serde_json::json!({"error": reason, "detail": detail}),
        );
        r.error = Some(reason);
        r
    }

    fn not_found() -> Reply {
        Reply::error(StatusCode::NOT_FOUND, "not_found", "no such public object")
    }

    fn method_not_allowed(allow: &'static str) -> Reply {
        let mut r = Reply::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &format!("allowed: {allow}"),
        );
        r.extra
            .push((header::ALLOW, HeaderValue::from_static(allow)));
        r
    }

    fn busy(reason: &'static str, detail: &str) -> Reply {
        let mut r = Reply::error(StatusCode::SERVICE_UNAVAILABLE, reason, detail);
        r.extra
            .push((header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS)));
        r
    }

    fn into_response(self, head: bool) -> Response<Full<Bytes>> {
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
        for (k, v) in self.extra {
            h.insert(k, v);
        }
        resp
    }
}

/// One request log line (spec/service.md "Request log").
#[derive(serde::Serialize)]
struct RequestLine<'a> {
    time_ms: u64,
    remote: SocketAddr,
    method: &'a str,
    path: &'a str,
    status: u16,
    bytes: usize,
    ms: f64,
    error: Option<&'static str>,
}

/// The first `max` bytes of `text`, cut at a character boundary.
fn truncated(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

/// The 200 answer without a bundle.
#[derive(serde::Serialize)]
struct Indexed<'a> {
    index: u64,
    receipt_id: &'a str,
    tree_size: u64,
    new: bool,
}

/// Route one request, answer it, and write its log line.
async fn handle(req: Request<Incoming>, ctx: &Ctx, remote: SocketAddr) -> Response<Full<Bytes>> {
    let start = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let head = method == Method::HEAD;
    let reply = route(req, ctx).await;
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

async fn route(req: Request<Incoming>, ctx: &Ctx) -> Reply {
    let path = req.uri().path();
    let read = matches!(*req.method(), Method::GET | Method::HEAD);
    if path == "/add" {
        return if req.method() == Method::POST {
            add(req, ctx).await
        } else {
            Reply::method_not_allowed("POST")
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
                "the log writer stopped after an error; see the service log",
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
const MAX_PUBLIC_PATH_BYTES: usize = 128;

/// True when every hash or entry of tile `key` lies inside the tree of
/// `size` leaves (the published checkpoint): only such tiles are served.
fn within(key: &TileKey, size: u64) -> bool {
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
async fn read_public(key: PublicKey, shared: &Shared) -> Reply {
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
fn has_symlink(dir: &Path, rel: &str) -> bool {
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
fn wants_bundle(req: &Request<Incoming>) -> bool {
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
async fn add(req: Request<Incoming>, ctx: &Ctx) -> Reply {
    if !ctx.shared.writer_alive.load(Ordering::Relaxed) {
        return Reply::busy("log_unavailable", "the log writer stopped after an error");
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
        Err(_) => Reply::busy("log_unavailable", "the log writer stopped"),
    }
}

fn too_large() -> Reply {
    Reply::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        crate::reason::Reason::EnvelopeTooLarge.as_str(),
        &format!("the body is over the {MAX_BODY_BYTES}-byte limit"),
    )
}

/// The 200 answer: the index JSON, or the bundle (proof made off the async workers).
async fn answered(receipt_id: String, entry: Option<Vec<u8>>, a: Answer) -> Reply {
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
        let envelope =
            Envelope::from_entry(&entry).map_err(|e| format!("decoding the logged entry: {e}"))?;
        let inclusion = log
            .inclusion_proof(a.index, a.tree_size)
            .map_err(|e| e.to_string())?;
        // The published checkpoint, with any witness cosignatures.
        let checkpoint = a.checkpoint.to_string();
        let bundle = Bundle {
            receipt_id,
            envelope,
            log: LogProof {
                origin: log.origin().to_string(),
                index: a.index,
                tree_size: a.tree_size,
                inclusion,
                checkpoint,
            },
        };
        Ok::<_, String>(bundle.to_json())
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn witnesses_are_sent_the_note_with_the_log_lines_only() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let origin = "example.com/strip";
        let note = crate::log::sign_checkpoint(origin, 5, [7; 32], &key).unwrap();
        let verifier = crate::keys::NoteVerifier::new(origin, key.verifying_key()).unwrap();
        let body = crate::tlog::note::Note::parse(note.as_bytes())
            .unwrap()
            .text;
        let w = SigningKey::from_bytes(&[4; 32]);
        let line = crate::tlog::cosig::sign(&body, "witness.example/a", &w, 1).unwrap();
        let cosigned = format!("{note}{line}");
        assert_eq!(log_signed_only(&cosigned, &verifier), note);
        assert_eq!(log_signed_only(&note, &verifier), note);
    }

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

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncated("abc", 2), "ab");
        assert_eq!(truncated("aé", 2), "a");
        assert_eq!(truncated("abc", 10), "abc");
    }
}
