//! net: the log over HTTP, in two halves.
//!
//! - [`server`]: the kit both services stand on (the accept loop, replies,
//!   the status page frame, metrics) and the two services, the log's
//!   (`rcpt log serve`, [`server::log`]) and the witness's (`rcpt witness
//!   serve`, [`server::witness`]).
//! - [`client`]: the HTTP client ([`client::Client`]) and what rides on it:
//!   submitting envelopes (`rcpt log submit`, [`client::submit`]), mirroring
//!   a log (`rcpt log mirror`, [`client::mirror`]) and asking witnesses for
//!   cosignatures (`rcpt log serve --witness-policy`, [`client::witnessing`]).
//!
//! Boundary: everything that opens a socket is here, behind the cargo
//! feature `net`; the verifier and the local log commands never reach it
//! (`cargo build --no-default-features --features cli` builds `rcpt`
//! without any HTTP or async crate). Formats, proofs and durability come
//! from the rest of the crate; this module adds transport (admission and
//! batching are the log's). It never prints: the services hand their
//! request log lines to a caller-given sink. Specification: `spec/service.md`.

pub mod client;
pub mod server;
