//! The log service's refusals, on the kit's [`Reply`]: a JSON body
//! `{"error": CODE, "detail": TEXT}` (spec/service.md "Conventions").

use super::{MAX_BODY_BYTES, RETRY_AFTER_SECONDS};
use crate::net::server::{BodyError, Refusals, Reply};
use hyper::StatusCode;
use hyper::header;
use hyper::header::HeaderValue;

/// The log answers refusals in JSON.
const REFUSALS: Refusals = Refusals::Json;

/// A refusal: `status`, its reason code and its text for people.
pub(super) fn refused(status: StatusCode, reason: &'static str, detail: &str) -> Reply {
    REFUSALS.refuse(status, reason, detail.to_string())
}

/// 404 `not_found`: not a public object of the log.
pub(super) fn not_found() -> Reply {
    refused(StatusCode::NOT_FOUND, "not_found", "no such public object")
}

/// 405 with `Allow`.
pub(super) fn method_not_allowed(allow: &'static str) -> Reply {
    REFUSALS.method_not_allowed(allow)
}

/// 503 with `Retry-After`: come back later.
pub(super) fn busy(reason: &'static str, detail: &str) -> Reply {
    refused(StatusCode::SERVICE_UNAVAILABLE, reason, detail)
        .header(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS))
}

/// 413 `envelope.too_large`: a body over [`MAX_BODY_BYTES`].
pub(super) fn too_large() -> Reply {
    refused(
        StatusCode::PAYLOAD_TOO_LARGE,
        crate::reason::Reason::EnvelopeTooLarge.as_str(),
        &format!("the body is over the {MAX_BODY_BYTES}-byte limit"),
    )
}

/// A `POST /add` body that was not read: 413 `envelope.too_large` (the
/// envelope limit), 408 `body_timeout` or 400 `body_unreadable`.
pub(super) fn body_refused(e: &BodyError) -> Reply {
    match e {
        BodyError::TooLarge { .. } => too_large(),
        other => REFUSALS.body(other),
    }
}
