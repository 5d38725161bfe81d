//! Connections (issue 12 finding 3): the accept loop, a cap on open connections that closes
//! silent ones first, a header-read timeout, a write-stall timeout, and a fast refusal when
//! every connection is busy.
//!
//! A connection is *silent* while no request of it is in flight and it is not a WebSocket:
//! it has sent nothing yet, only part of a request head, or it idles between keep-alive
//! requests. Silent connections cost the server nothing it needs back at once, so at the cap
//! the oldest one is closed to admit the newcomer: a flood of connections that never finish a
//! request cannot keep the health check or the UI out. Only when every connection is busy is
//! the newcomer refused with a short 503.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::http::StatusCode;
use axum::response::Response;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

/// After an accept error that is not the client's (no file descriptor or memory left), the
/// loop waits for a connection to close, or this long, before accepting again.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// The same warning is logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The connection settings of [`crate::ServerConfig`].
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub read_timeout: Duration,
    pub write_timeout: Duration,
    pub send_buffer_bytes: usize,
}

/// Accepts connections until `shutdown`, then lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let registry = Arc::new(Registry::new(limits.max_connections));
    let tracker = TaskTracker::new();
    let refusals = Throttle::default();
    let failures = Throttle::default();
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => match registry.admit() {
                Some(ticket) => {
                    let connection =
                        connection(stream, peer, ticket, router.clone(), limits, shutdown.clone());
                    tracker.spawn(connection);
                }
                None => {
                    if refusals.due() {
                        tracing::warn!(
                            max = limits.max_connections,
                            "every connection is busy; refusing new ones with 503"
                        );
                    }
                    refuse(&stream);
                }
            },
            Err(err) if is_client_error(&err) => {}
            Err(err) => {
                // EMFILE, ENFILE, ENOMEM...: make room and retry; never stop or spin.
                if failures.due() {
                    tracing::warn!(error = %err, "cannot accept a connection; closing a silent one");
                }
                let closed = registry.closed.notified();
                registry.evict_silent();
                tokio::select! {
                    _ = closed => {}
                    _ = tokio::time::sleep(ACCEPT_PAUSE) => {}
                    _ = shutdown.cancelled() => {}
                }
            }
        }
    }
    drop(listener);
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// Errors of one connection that went away before it was accepted.
fn is_client_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// Answers 503 without reading anything and closes; never waits on the client.
fn refuse(stream: &TcpStream) {
    let body = r#"{"code":"UNAVAILABLE","message":"too many open connections; try again shortly"}"#;
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// Serves one connection with hyper until it ends, is evicted, or the server shuts down.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) {
    // Linux would otherwise grow it to megabytes for a client that does not read.
    if let Err(err) = socket2::SockRef::from(&stream).set_send_buffer_size(limits.send_buffer_bytes)
    {
        tracing::debug!(error = %err, "cannot size a connection's send buffer");
    }
    let evicted = ticket.evicted.clone();
    let (registry, id) = (ticket.registry.clone(), ticket.id);
    let io = TokioIo::new(Guarded {
        stream,
        write_timeout: limits.write_timeout,
        stall: None,
        _ticket: ticket,
    });
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(ConnectInfo(peer));
        let mut busy = registry.busy(id);
        let mut router = router.clone();
        async move {
            let response: Result<Response, Infallible> = router.call(request).await;
            if response.as_ref().is_ok_and(|r| r.status() == StatusCode::SWITCHING_PROTOCOLS) {
                busy.upgraded = true;
            }
            drop(busy);
            response
        }
    });
    let mut builder = http1::Builder::new();
    // `half_close`: a client that sent its request and closed its side (a closed tab, a
    // script that does not wait) still has its action run to the end; without it hyper drops
    // the request's handler as soon as it reads the EOF, cancelling the action half-way.
    builder.timer(TokioTimer::new()).header_read_timeout(limits.read_timeout).half_close(true);
    let conn = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(err) = result {
                tracing::debug!(error = %err, "connection ended");
            }
        }
        _ = evicted.cancelled() => {}
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = evicted.cancelled() => {}
            }
        }
    }
}

/// The open connections, oldest first.
struct Registry {
    cap: usize,
    inner: Mutex<Entries>,
    /// A connection closed.
    closed: Notify,
}

#[derive(Default)]
struct Entries {
    next_id: u64,
    open: BTreeMap<u64, Entry>,
}

struct Entry {
    in_flight: u32,
    upgraded: bool,
    evict: CancellationToken,
}

impl Entry {
    fn silent(&self) -> bool {
        self.in_flight == 0 && !self.upgraded
    }
}

impl Registry {
    fn new(cap: usize) -> Registry {
        Registry { cap: cap.max(1), inner: Mutex::default(), closed: Notify::new() }
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A place for a new connection, closing the oldest silent one at the cap; `None` when
    /// every open connection is busy.
    fn admit(self: &Arc<Self>) -> Option<Ticket> {
        let mut entries = self.lock();
        if entries.open.len() >= self.cap && !evict_oldest_silent(&mut entries) {
            return None;
        }
        let id = entries.next_id;
        entries.next_id += 1;
        let evicted = CancellationToken::new();
        entries.open.insert(id, Entry { in_flight: 0, upgraded: false, evict: evicted.clone() });
        Some(Ticket { id, registry: self.clone(), evicted })
    }

    /// Closes the oldest silent connection, if any (to free a file descriptor).
    fn evict_silent(&self) {
        evict_oldest_silent(&mut self.lock());
    }

    /// Marks a request of connection `id` in flight until the returned guard drops.
    fn busy(self: &Arc<Self>, id: u64) -> Busy {
        if let Some(entry) = self.lock().open.get_mut(&id) {
            entry.in_flight += 1;
        }
        Busy { registry: self.clone(), id, upgraded: false }
    }
}

fn evict_oldest_silent(entries: &mut Entries) -> bool {
    let Some(id) = entries.open.iter().find(|(_, e)| e.silent()).map(|(id, _)| *id) else {
        return false;
    };
    if let Some(entry) = entries.open.remove(&id) {
        entry.evict.cancel();
    }
    true
}

/// A connection's place in the registry; it lives in the socket (see [`Guarded`]), so it
/// follows a WebSocket after the upgrade and is released when the socket closes.
struct Ticket {
    id: u64,
    registry: Arc<Registry>,
    evicted: CancellationToken,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.registry.lock().open.remove(&self.id);
        self.registry.closed.notify_waiters();
    }
}

/// A request in flight.
struct Busy {
    registry: Arc<Registry>,
    id: u64,
    /// The request became a WebSocket: the connection stays busy for good.
    upgraded: bool,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(entry) = self.registry.lock().open.get_mut(&self.id) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            entry.upgraded |= self.upgraded;
        }
    }
}

/// The socket of a connection: fails a write that makes no progress for `write_timeout` (the
/// client does not read), and holds the connection's [`Ticket`].
struct Guarded {
    stream: TcpStream,
    write_timeout: Duration,
    /// Running while a write waits for the client.
    stall: Option<Pin<Box<Sleep>>>,
    _ticket: Ticket,
}

impl Guarded {
    fn progress<T>(
        &mut self,
        poll: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stall = None;
            return poll;
        }
        let timeout = self.write_timeout;
        let stall = self.stall.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read for the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.progress(poll, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.progress(poll, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_flush(cx);
        self.progress(poll, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Says "due" at most once per [`WARN_EVERY`].
#[derive(Default)]
struct Throttle {
    last: Mutex<Option<Instant>>,
}

impl Throttle {
    fn due(&self) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
            return false;
        }
        *last = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_silent_connection_makes_room() {
        let registry = Arc::new(Registry::new(2));
        let first = registry.admit().unwrap();
        let second = registry.admit().unwrap();
        let busy = registry.busy(first.id);
        let third = registry.admit().expect("the silent second connection makes room");
        assert!(second.evicted.is_cancelled());
        assert!(!first.evicted.is_cancelled(), "a connection with a request in flight stays");
        let mut upgrade = registry.busy(third.id);
        upgrade.upgraded = true;
        drop(upgrade);
        assert!(registry.admit().is_none(), "a busy connection and a WebSocket: refused");
        drop(busy);
        assert!(registry.admit().is_some(), "the first one is silent again");
        drop((first, second, third));
    }
}
