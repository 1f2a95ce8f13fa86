//! client: the HTTP client half of `net`.
//!
//! [`Client`] (in `http.rs`) speaks HTTP/1.1 to one base URL with capped
//! bodies and a timeout per request; on it ride [`submit`] (envelopes to a
//! log service, `rcpt log submit`), [`mirror`] (a checked local copy of a
//! log, `rcpt log mirror`) and [`witnessing`] (cosignatures from the
//! witnesses of a tlog-policy, for a witnessed log).

mod http;
pub mod mirror;
pub mod submit;
pub mod witnessing;

pub use http::{Answer, Client, ClientError, REQUEST_TIMEOUT};
