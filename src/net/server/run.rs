//! run: how a service starts and stops: the listening socket, the async
//! runtime, SIGTERM and SIGINT turned into a graceful stop, and the accept
//! loop ([`crate::net::server::accept`]) serving a [`Service`] until then.

use crate::net::server::accept::serve_until_stopped;
use crate::net::server::request::{Ctx, RequestSink, Service};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::sync::watch;

/// The accept loop's limits of one service.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Most open connections; the loop waits for one to close beyond it.
    pub(crate) max_connections: usize,
    /// Time allowed for a request's headers to arrive.
    pub(crate) header_timeout: Duration,
}

/// A listening socket on `addr`, non-blocking (the runtime takes it over).
pub(crate) fn bind(addr: &str) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The multi-threaded runtime a service runs on, and the stop flag that
/// SIGTERM or SIGINT sets (the handlers are installed before this returns,
/// so a signal from then on stops the service instead of killing it).
pub(crate) fn runtime_with_stop() -> std::io::Result<(Runtime, watch::Receiver<bool>)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let (mut term, mut int) = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        Ok::<_, std::io::Error>((
            signal(SignalKind::terminate())?,
            signal(SignalKind::interrupt())?,
        ))
    })?;
    runtime.spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        let _ = stop_tx.send(true);
    });
    Ok((runtime, stop_rx))
}

/// Serve `service` on `listener` until `stop` is set, then let every
/// connection finish the request it is serving; each request's line goes
/// to `sink`. Returns the number of requests answered, once every request
/// is done and `service` is dropped (so what it held, such as the sending
/// half of a queue, is released when this returns).
pub(crate) fn serve<S: Service>(
    runtime: &Runtime,
    listener: std::net::TcpListener,
    limits: Limits,
    stop: watch::Receiver<bool>,
    service: S,
    sink: RequestSink,
) -> std::io::Result<u64> {
    let ctx = Arc::new(Ctx::new(service, sink));
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let ctx = Arc::clone(&ctx);
        let handle = move |req, remote| {
            let ctx = Arc::clone(&ctx);
            async move { ctx.handle(req, remote).await }
        };
        serve_until_stopped(
            listener,
            limits.max_connections,
            limits.header_timeout,
            stop,
            handle,
        )
        .await;
        Ok::<_, std::io::Error>(())
    });
    let requests = ctx.requests();
    drop(ctx);
    served.map(|()| requests)
}
