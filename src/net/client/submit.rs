//! submit: send one envelope to a log service, retry what may be retried,
//! and verify the bundle it answers with before calling it logged.
//!
//! `POST /add` is idempotent (the log keeps the first index of an entry it
//! already holds), so a submission is retried after a 503 (waiting as its
//! `Retry-After` says), a 500, a timeout or a broken connection, at most
//! [`MAX_ATTEMPTS`] times. A 400, 403 or 413 is final.
//!
//! A run of many submissions shares one [`SubmitOptions`]: a deadline for
//! the whole run, a budget of retries for the whole run, and a stop flag:
//! the first submission that cannot reach the log at all (every attempt a
//! refused connection or a timeout) sets it, and every submission not yet
//! sent then ends [`SubmitError::NotSent`] instead of waiting its turn to
//! fail the same way.
//!
//! The bundle is checked with the verifier's own pieces: the checkpoint's
//! signature under the log key (C2SP signed note, origin = key name), the
//! RFC 9162 inclusion proof of the submitted entry against that root, the
//! entry byte for byte, and the receipt id recomputed from the payload.

use super::{Client, ClientError};
use crate::bundle::Bundle;
use crate::constants::BUNDLE_MEDIA_TYPE;
use crate::keys::NoteVerifier;
use crate::limits::MAX_BUNDLE_BYTES;
use crate::tlog::merkle;
use bytes::Bytes;
use hyper::{Method, StatusCode, header};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Most attempts for one submission.
pub const MAX_ATTEMPTS: u32 = 8;
/// Longest wait honoured from a `Retry-After` header.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(30);
/// First back-off after a failure that named no wait (doubled each time).
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// Why a submission did not end with a verified bundle.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// The service refused the envelope (final).
    #[error("refused (HTTP {status}): {reason}: {detail}")]
    Refused {
        /// 400, 403, 413, ...
        status: u16,
        /// Its reason code.
        reason: String,
        /// Its detail.
        detail: String,
    },
    /// Still failing after [`MAX_ATTEMPTS`] attempts.
    #[error("gave up after {}: {last}", attempts_text(*attempts))]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// Every attempt failed to reach the log (refused connection, timeout):
    /// the run stops here (the stop flag of [`SubmitOptions`] is set).
    #[error("the log is unreachable: {}, the last: {last}", attempts_text(*attempts))]
    Unreachable {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// The run's deadline passed before this submission was answered.
    #[error("the run's deadline passed after {}{}", attempts_text(*attempts), last_of(last))]
    Deadline {
        /// Attempts made (0: never sent).
        attempts: u32,
        /// The last failure, if any.
        last: String,
    },
    /// Never sent: an earlier submission found the log unreachable.
    #[error("not sent: an earlier submission found the log unreachable")]
    NotSent,
    /// The answer is not a bundle that verifies for this envelope.
    #[error("the service answered with a bundle that does not verify")]
    BadBundle(#[source] BadBundle),
}

/// "1 attempt", "N attempts".
fn attempts_text(n: u32) -> String {
    if n == 1 {
        "1 attempt".to_string()
    } else {
        format!("{n} attempts")
    }
}

/// " (the last: X)", or nothing.
fn last_of(last: &str) -> String {
    if last.is_empty() {
        String::new()
    } else {
        format!(" (the last: {last})")
    }
}

impl SubmitError {
    /// True when the envelope was never judged by the log (unreachable,
    /// out of time, not sent): the submission could not be evaluated,
    /// which is not a refusal.
    pub fn not_evaluated(&self) -> bool {
        matches!(
            self,
            SubmitError::Unreachable { .. } | SubmitError::Deadline { .. } | SubmitError::NotSent
        )
    }
}

/// What a run of submissions shares: how often one may be retried, the
/// run's deadline and retry budget, and the stop flag.
#[derive(Clone, Debug)]
pub struct SubmitOptions {
    /// Most attempts of one submission (at least 1).
    pub max_attempts: u32,
    /// When the whole run must end; `None`: no deadline.
    pub deadline: Option<Instant>,
    /// Retries left for the whole run.
    pub retry_budget: Arc<AtomicU32>,
    /// Set when a submission found the log unreachable.
    pub stop: Arc<AtomicBool>,
}

impl Default for SubmitOptions {
    fn default() -> Self {
        SubmitOptions {
            max_attempts: MAX_ATTEMPTS,
            deadline: None,
            retry_budget: Arc::new(AtomicU32::new(u32::MAX)),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl SubmitOptions {
    /// Take one retry from the run's budget; false when it is spent.
    fn take_retry(&self) -> bool {
        self.retry_budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Time left before the deadline (`None`: no deadline).
    fn left(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }
}

/// A submission the log holds, with its verified bundle.
#[derive(Clone, Debug)]
pub struct Logged {
    /// The bundle as received (JSON text).
    pub json: Bytes,
    /// The decoded bundle.
    pub bundle: Bundle,
}

/// Submit `envelope` (DSSE JSON), retrying as the module says, and verify
/// the bundle against `log_key` (no deadline, no shared budget).
pub async fn submit(
    client: &Client,
    envelope: Bytes,
    log_key: &NoteVerifier,
) -> Result<Logged, SubmitError> {
    submit_with(client, envelope, log_key, &SubmitOptions::default()).await
}

/// One attempt's outcome that is not final: what failed, whether it was
/// the connection (not the service), and how long to wait.
struct Retry {
    last: String,
    transport: bool,
    wait: Duration,
}

/// [`submit`] as one of a run sharing `opts`.
pub async fn submit_with(
    client: &Client,
    envelope: Bytes,
    log_key: &NoteVerifier,
    opts: &SubmitOptions,
) -> Result<Logged, SubmitError> {
    // The entry the log must hold: the envelope's, if it parses at all
    // (one that does not is sent anyway, for the service's reason code).
    let entry = crate::receipt::dsse::Envelope::from_json(&envelope)
        .ok()
        .map(|e| e.to_entry());
    let mut last = Retry {
        last: String::new(),
        transport: false,
        wait: Duration::ZERO,
    };
    let max = opts.max_attempts.max(1);
    for attempt in 1..=max {
        if opts.stop.load(Ordering::SeqCst) {
            return Err(if attempt == 1 {
                SubmitError::NotSent
            } else {
                SubmitError::Unreachable {
                    attempts: attempt - 1,
                    last: last.last,
                }
            });
        }
        let deadline = |attempts| SubmitError::Deadline {
            attempts,
            last: last.last.clone(),
        };
        let send = attempt_once(client, &envelope, entry.as_deref(), log_key);
        let outcome = match opts.left() {
            Some(left) if left.is_zero() => return Err(deadline(attempt - 1)),
            Some(left) => match tokio::time::timeout(left, send).await {
                Ok(outcome) => outcome,
                Err(_) => return Err(deadline(attempt)),
            },
            None => send.await,
        };
        last = match outcome {
            Ok(Ok(logged)) => return Ok(logged),
            Ok(Err(retry)) => retry,
            Err(fatal) => return Err(fatal),
        };
        let wait = if last.wait.is_zero() {
            backoff(attempt)
        } else {
            last.wait
        };
        if attempt == max || !opts.take_retry() {
            return Err(gave_up(opts, attempt, last));
        }
        if opts.left().is_some_and(|left| left <= wait) {
            return Err(SubmitError::Deadline {
                attempts: attempt,
                last: last.last,
            });
        }
        tokio::time::sleep(wait).await;
    }
    Err(gave_up(opts, max, last))
}

/// The end of a submission out of attempts or budget: unreachable (and
/// the run told to stop) when the last failure was the connection.
fn gave_up(opts: &SubmitOptions, attempts: u32, last: Retry) -> SubmitError {
    if last.transport {
        opts.stop.store(true, Ordering::SeqCst);
        SubmitError::Unreachable {
            attempts,
            last: last.last,
        }
    } else {
        SubmitError::GaveUp {
            attempts,
            last: last.last,
        }
    }
}

/// One POST: `Ok(Ok(logged))`, `Ok(Err(retry))` for what may be retried,
/// `Err` for what is final.
async fn attempt_once(
    client: &Client,
    envelope: &Bytes,
    entry: Option<&[u8]>,
    log_key: &NoteVerifier,
) -> Result<Result<Logged, Retry>, SubmitError> {
    let sent = client
        .send(
            Method::POST,
            "add",
            envelope.clone(),
            Some(BUNDLE_MEDIA_TYPE),
            MAX_BUNDLE_BYTES,
        )
        .await;
    let retry = |last: String, transport, wait| {
        Ok(Err(Retry {
            last,
            transport,
            wait,
        }))
    };
    match sent {
        Ok(a) if a.status == StatusCode::OK => {
            let Some(entry) = entry else {
                return Err(SubmitError::BadBundle(BadBundle::Unparsed));
            };
            let bundle = verify_bundle(&a.body, entry, log_key).map_err(SubmitError::BadBundle)?;
            Ok(Ok(Logged {
                json: a.body,
                bundle,
            }))
        }
        Ok(a) if a.status == StatusCode::SERVICE_UNAVAILABLE => retry(
            format!("HTTP 503: {}", String::from_utf8_lossy(&a.body).trim()),
            false,
            retry_after(&a.headers).unwrap_or_default(),
        ),
        Ok(a) if a.status.is_server_error() => retry(
            format!(
                "HTTP {}: {}",
                a.status.as_u16(),
                String::from_utf8_lossy(&a.body).trim()
            ),
            false,
            Duration::ZERO,
        ),
        Ok(a) => Err(refusal(a.status, &a.body)),
        Err(e @ (ClientError::Transport { .. } | ClientError::Timeout { .. })) => {
            retry(e.to_string(), true, Duration::ZERO)
        }
        Err(e) => Err(SubmitError::GaveUp {
            attempts: 1,
            last: e.to_string(),
        }),
    }
}

/// The doubling back-off of attempt `n` (1-based), capped at [`MAX_RETRY_WAIT`].
fn backoff(attempt: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(8))
        .min(MAX_RETRY_WAIT)
}

/// `Retry-After: <seconds>`, capped (the HTTP-date form is not used by the service).
fn retry_after(headers: &hyper::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_WAIT))
}

/// A final refusal from its `{"error", "detail"}` body.
fn refusal(status: StatusCode, body: &[u8]) -> SubmitError {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    let reason = text("error");
    SubmitError::Refused {
        status: status.as_u16(),
        reason: if reason.is_empty() {
            "http_error".to_string()
        } else {
            reason
        },
        detail: text("detail"),
    }
}

/// Why a bundle answer does not verify.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BadBundle {
    /// The service logged an envelope this client cannot parse.
    #[error("the service logged an envelope this client cannot parse")]
    Unparsed,
    /// The answer is not a bundle.
    #[error(transparent)]
    Bundle(#[from] crate::bundle::BundleError),
    /// Its envelope is not the one submitted.
    #[error("its envelope is not the one submitted")]
    Envelope,
    /// Its payload is not a receipt.
    #[error("its payload")]
    Payload(#[source] crate::receipt::PayloadError),
    /// A field disagrees with what it must match.
    #[error("{0}")]
    Mismatch(String),
    /// Its checkpoint does not verify under the log key.
    #[error(transparent)]
    Checkpoint(crate::log::LogError),
    /// Its inclusion proof does not verify.
    #[error("inclusion")]
    Inclusion(#[source] merkle::ProofError),
}

/// Check a bundle answer for the submitted `entry` under `log_key`.
pub fn verify_bundle(
    json: &[u8],
    entry: &[u8],
    log_key: &NoteVerifier,
) -> Result<Bundle, BadBundle> {
    let bundle = Bundle::from_json(json)?;
    if bundle.envelope.to_entry() != entry {
        return Err(BadBundle::Envelope);
    }
    let (_, id) =
        crate::receipt::receipt_from_cbor(&bundle.envelope.payload).map_err(BadBundle::Payload)?;
    if id.to_string() != bundle.receipt_id {
        return Err(BadBundle::Mismatch(format!(
            "receipt_id {} is not the payload's id {id}",
            bundle.receipt_id
        )));
    }
    if bundle.log.origin != log_key.name {
        return Err(BadBundle::Mismatch(format!(
            "origin {:?} is not the log key's name {:?}",
            bundle.log.origin, log_key.name
        )));
    }
    let cp = crate::log::verify_checkpoint(bundle.log.checkpoint.as_bytes(), log_key, None)
        .map_err(BadBundle::Checkpoint)?;
    if cp.size != bundle.log.tree_size {
        return Err(BadBundle::Mismatch(format!(
            "tree_size {} is not the checkpoint's size {}",
            bundle.log.tree_size, cp.size
        )));
    }
    merkle::verify_inclusion(
        &merkle::leaf_hash(entry),
        bundle.log.index,
        bundle.log.tree_size,
        &bundle.log.inclusion,
        &cp.root_hash,
    )
    .map_err(BadBundle::Inclusion)?;
    Ok(bundle)
}
