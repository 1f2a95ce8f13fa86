//! submit: send one envelope to a log service, retry what may be retried,
//! and verify the bundle it answers with before calling it logged.
//!
//! `POST /add` is idempotent (the log keeps the first index of an entry it
//! already holds), so a submission is retried after a 503 (waiting as its
//! `Retry-After` says), a 500, a timeout or a broken connection, at most
//! [`MAX_ATTEMPTS`] times. A 400, 403 or 413 is final.
//!
//! The bundle is checked with the verifier's own pieces: the checkpoint's
//! signature under the log key (C2SP signed note, origin = key name), the
//! RFC 9162 inclusion proof of the submitted entry against that root, the
//! entry byte for byte, and the receipt id recomputed from the payload.

use super::client::{Client, ClientError};
use crate::bundle::Bundle;
use crate::constants::BUNDLE_MEDIA_TYPE;
use crate::keys::NoteVerifier;
use crate::limits::MAX_BUNDLE_BYTES;
use crate::tlog::merkle;
use bytes::Bytes;
use hyper::{Method, StatusCode, header};
use std::time::Duration;

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
    #[error("gave up after {attempts} attempts: {last}")]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// The answer is not a bundle that verifies for this envelope.
    #[error("the service answered with a bundle that does not verify: {0}")]
    BadBundle(String),
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
/// the bundle against `log_key`.
pub async fn submit(
    client: &Client,
    envelope: Bytes,
    log_key: &NoteVerifier,
) -> Result<Logged, SubmitError> {
    // The entry the log must hold: the envelope's, if it parses at all
    // (one that does not is sent anyway, for the service's reason code).
    let entry = crate::receipt::dsse::Envelope::from_json(&envelope)
        .ok()
        .map(|e| e.to_entry());
    let mut last = String::new();
    for attempt in 1..=MAX_ATTEMPTS {
        let sent = client
            .send(
                Method::POST,
                "add",
                envelope.clone(),
                Some(BUNDLE_MEDIA_TYPE),
                MAX_BUNDLE_BYTES,
            )
            .await;
        let wait = match sent {
            Ok(a) if a.status == StatusCode::OK => {
                let Some(entry) = &entry else {
                    return Err(SubmitError::BadBundle(
                        "the service logged an envelope this client cannot parse".to_string(),
                    ));
                };
                let bundle =
                    verify_bundle(&a.body, entry, log_key).map_err(SubmitError::BadBundle)?;
                return Ok(Logged {
                    json: a.body,
                    bundle,
                });
            }
            Ok(a) if a.status == StatusCode::SERVICE_UNAVAILABLE => {
                last = format!("HTTP 503: {}", String::from_utf8_lossy(&a.body).trim());
                retry_after(&a.headers).unwrap_or_else(|| backoff(attempt))
            }
            Ok(a) if a.status.is_server_error() => {
                last = format!(
                    "HTTP {}: {}",
                    a.status.as_u16(),
                    String::from_utf8_lossy(&a.body).trim()
                );
                backoff(attempt)
            }
            Ok(a) => return Err(refusal(a.status, &a.body)),
            Err(e @ (ClientError::Transport { .. } | ClientError::Timeout { .. })) => {
                last = e.to_string();
                backoff(attempt)
            }
            Err(e) => {
                return Err(SubmitError::GaveUp {
                    attempts: attempt,
                    last: e.to_string(),
                });
            }
        };
        if attempt < MAX_ATTEMPTS {
            tokio::time::sleep(wait).await;
        }
    }
    Err(SubmitError::GaveUp {
        attempts: MAX_ATTEMPTS,
        last,
    })
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

/// Check a bundle answer for the submitted `entry` under `log_key`.
pub fn verify_bundle(json: &[u8], entry: &[u8], log_key: &NoteVerifier) -> Result<Bundle, String> {
    let bundle = Bundle::from_json(json).map_err(|e| e.to_string())?;
    if bundle.envelope.to_entry() != entry {
        return Err("its envelope is not the one submitted".to_string());
    }
    let (_, id) = crate::receipt::receipt_from_cbor(&bundle.envelope.payload)
        .map_err(|e| format!("its payload: {e}"))?;
    if id.to_string() != bundle.receipt_id {
        return Err(format!(
            "receipt_id {} is not the payload's id {id}",
            bundle.receipt_id
        ));
    }
    if bundle.log.origin != log_key.name {
        return Err(format!(
            "origin {:?} is not the log key's name {:?}",
            bundle.log.origin, log_key.name
        ));
    }
    let cp = crate::log::verify_checkpoint(bundle.log.checkpoint.as_bytes(), log_key, None)
        .map_err(|e| e.to_string())?;
    if cp.size != bundle.log.tree_size {
        return Err(format!(
            "tree_size {} is not the checkpoint's size {}",
            bundle.log.tree_size, cp.size
        ));
    }
    merkle::verify_inclusion(
        &merkle::leaf_hash(entry),
        bundle.log.index,
        bundle.log.tree_size,
        &bundle.log.inclusion,
        &cp.root_hash,
    )
    .map_err(|e| format!("inclusion: {e}"))?;
    Ok(bundle)
}
