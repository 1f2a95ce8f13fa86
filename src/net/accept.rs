//! The HTTP/1.1 accept loop shared by `log serve` and `witness serve`: a cap
//! on open connections, a header read timeout, and a graceful stop.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};

/// Accept connections until `stop`, serving each request with `handle`, at
/// most `max_connections` open at once; then let each connection finish
/// its request in flight (hyper's graceful shutdown) and wait for all.
pub(crate) async fn serve_until_stopped<H, F>(
    listener: tokio::net::TcpListener,
    max_connections: usize,
    header_timeout: Duration,
    mut stop: watch::Receiver<bool>,
    handle: H,
) where
    H: Fn(Request<Incoming>, SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let slot = tokio::select! {
            _ = stopped(&mut stop) => break,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, remote)) = accepted else {
            // Out of descriptors or a reset before accept: pause, go on.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let handle = handle.clone();
        let mut stop = stop.clone();
        tasks.spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req| {
                let answer = handle(req, remote);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
        while tasks.try_join_next().is_some() {}
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
}

/// Resolves once the stop flag is set (at once if it already is).
pub(crate) async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard wait_for returns is dropped here, before any await of the caller.
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}
