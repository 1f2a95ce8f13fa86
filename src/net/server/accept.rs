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
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
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
                .serve_connection(TokioIo::new(Headed::new(stream)), service);
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

/// Headers every answer carries (spec/service.md), added to the answers
/// hyper writes itself when it refuses a request before any handler runs
/// (431 header fields too large, 414 URI too long, 400 unparsable).
const REFUSAL_HEADERS: &[u8] = b"x-content-type-options: nosniff\r\ncache-control: no-store\r\n";

/// A connection whose writes are checked for one thing: a response head
/// hyper wrote on its own (an error status without
/// `x-content-type-options`, which every answer of the handlers carries)
/// gets [`REFUSAL_HEADERS`]. Writes are not vectored, so hyper flattens
/// each response's head into the start of one buffer.
struct Headed<S> {
    inner: S,
    /// Rewritten bytes still to write, and how many are written.
    pending: Vec<u8>,
    sent: usize,
}

impl<S> Headed<S> {
    fn new(inner: S) -> Self {
        Headed {
            inner,
            pending: Vec::new(),
            sent: 0,
        }
    }
}

/// `buf` with [`REFUSAL_HEADERS`] added, when it starts with a whole
/// response head of an error status that lacks them.
fn with_refusal_headers(buf: &[u8]) -> Option<Vec<u8>> {
    let is_error = [b"HTTP/1.1 4", b"HTTP/1.1 5", b"HTTP/1.0 4", b"HTTP/1.0 5"]
        .iter()
        .any(|p| buf.starts_with(*p));
    if !is_error {
        return None;
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = buf.get(..end + 2)?;
    let lower = head.to_ascii_lowercase();
    if lower.windows(23).any(|w| w == b"x-content-type-options:") {
        return None;
    }
    let mut out = Vec::with_capacity(buf.len() + REFUSAL_HEADERS.len());
    out.extend_from_slice(head);
    out.extend_from_slice(REFUSAL_HEADERS);
    out.extend_from_slice(buf.get(end + 2..)?);
    Some(out)
}

impl<S: AsyncWrite + Unpin> Headed<S> {
    /// Write what is pending; Ready(Ok) once nothing is.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.sent < self.pending.len() {
            let rest = self.pending.get(self.sent..).unwrap_or_default();
            match Pin::new(&mut self.inner).poll_write(cx, rest) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => self.sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.pending.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Headed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Headed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        match this.drain(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        if let Some(rewritten) = with_refusal_headers(buf) {
            this.pending = rewritten;
            // The caller's bytes are taken whole; they go out on drain.
            let _ = this.drain(cx);
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match this.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match this.drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_error_head_gets_the_headers() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        let got = with_refusal_headers(bare).unwrap();
        let text = String::from_utf8(got).unwrap();
        assert!(text.contains("\r\nx-content-type-options: nosniff\r\n"));
        assert!(text.ends_with("cache-control: no-store\r\n\r\n"));
        let ours = b"HTTP/1.1 404 Not Found\r\nX-Content-Type-Options: nosniff\r\n\r\n";
        assert!(with_refusal_headers(ours).is_none());
        assert!(with_refusal_headers(b"HTTP/1.1 200 OK\r\n\r\n").is_none());
        assert!(with_refusal_headers(b"tile bytes").is_none());
    }
}
