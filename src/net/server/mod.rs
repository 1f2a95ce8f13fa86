//! server: the HTTP server half of `net`: the kit both services stand on,
//! and the two services.
//!
//! The kit: [`accept`] (the accept loop with its connection cap, header
//! timeout and graceful stop), [`html`] (the status page frame and its
//! escaping), [`metrics`] (the Prometheus text exposition). The services:
//! [`log`] (`rcpt log serve`: the read API, `POST /add`, the status page)
//! and [`witness`] (`rcpt witness serve`: `POST /add-checkpoint`).

pub(crate) mod accept;
pub mod html;
pub mod log;
pub mod metrics;
pub mod witness;
