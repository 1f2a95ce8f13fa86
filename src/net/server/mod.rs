//! server: the HTTP server half of `net`: the kit both services stand on,
//! and the two services.
//!
//! The kit (spec/service.md "The HTTP kit"):
//! - [`run`]: the listening socket, the runtime, SIGTERM and SIGINT as a
//!   graceful stop, and serving a service until then;
//! - [`accept`]: the accept loop (connection cap, header timeout, the
//!   headers of the answers hyper writes itself);
//! - [`request`]: what is done around each request ([`Service`], its
//!   context `Ctx`, the request log line `RequestLine`, the counts) and
//!   the capped, timed body read ([`read_body`]);
//! - [`reply`]: the one answer type ([`Reply`]) and its headers, refusals
//!   in a service's style ([`Refusals`]);
//! - [`metrics`]: the `/metrics` plumbing ([`HttpMetrics`]: the registry
//!   and the families every service has);
//! - [`html`]: the status page frame and its escaping.
//!
//! The services keep only their routes and their state: [`log`] (`rcpt
//! log serve`: the read API, `POST /add`, the status page) and [`witness`]
//! (`rcpt witness serve`: `POST /add-checkpoint`). A service implements
//! [`Service`]; nothing in the kit knows either service.

pub(crate) mod accept;
pub mod html;
pub mod log;
pub mod metrics;
pub(crate) mod reply;
pub(crate) mod request;
pub(crate) mod run;
pub mod witness;

pub(crate) use metrics::{HttpMetrics, Routes};
pub use reply::{CACHE_NONE, JSON_CONTENT_TYPE};
pub(crate) use reply::{Refusals, Reply};
pub(crate) use request::{BodyError, Service, read_body};
pub use request::{MAX_LOGGED_PATH_BYTES, RequestSink};
pub(crate) use run::{Limits, bind, runtime_with_stop, serve};
