//! net: the log over HTTP — the service (`rcpt log serve`), the submit
//! client (`rcpt log submit`), the mirror (`rcpt log mirror`), the witness
//! service (`rcpt witness serve`) and the witnessing client a witnessed log
//! uses (`rcpt log serve --witness-policy`).
//!
//! Boundary: everything that opens a socket is here, behind the cargo
//! feature `net`; the verifier and the local log commands never reach it
//! (`cargo build --no-default-features --features cli` builds `rcpt`
//! without any HTTP or async crate). Formats, proofs and durability come
//! from the rest of the crate; this module adds transport and batching (admission is
//! `log::admit`, shared with `rcpt log append`). It never prints: the service hands its request log lines to
//! a caller-given sink. Specification: `spec/service.md`.

mod accept;
pub mod client;
pub mod html;
pub mod metrics;
pub mod mirror;
pub mod serve;
pub mod submit;
pub mod witness_serve;
mod witness_status;
pub mod witnessing;
