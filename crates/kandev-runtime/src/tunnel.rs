//! TCP relays over a runner execution's stdin and stdout (issue 42): how a task's container
//! with no network reaches Kandev's MCP server and the host ports it is allowed, and how the
//! host reaches a dev server in it, without opening the container's network. They ride the
//! runner connection as ordinary executions of the container's own `kandev`, so the runner
//! stack's exactly-once delivery, back-pressure and reconnection carry them.
//!
//! - `kandev tunnel connect --port P` (one execution per connection): its stdin and stdout
//!   are the bytes of one TCP connection to `127.0.0.1:P` where it runs ([`connect_stdio`]).
//! - `kandev tunnel listen --port P` (one execution per port): it listens on `127.0.0.1:P`
//!   where it runs and carries every connection it accepts over its stdin and stdout,
//!   multiplexed in frames ([`Frame`]); the other end ([`serve_mux`] with a target) opens a
//!   connection to its own `127.0.0.1:P` for each.
//!
//! Framing (version 1 of this sub-protocol): a 4-byte big-endian connection number, a 1-byte
//! kind, a 4-byte big-endian length, then that many bytes. Kinds: `open` (the listening side
//! accepted a connection), `data`, `eof` (no more bytes from that side: the other shuts its
//! write half), `close` (the connection is gone, either side). A malformed frame ends the
//! relay.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// The largest payload of one frame.
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// How long `listen` retries a port still held (an earlier relay being stopped).
const BIND_RETRY: Duration = Duration::from_secs(10);
/// How many frames wait for the writer before readers of the sockets pause (and how many
/// chunks for one connection's socket before the relay waits for it).
const QUEUE: usize = 64;

/// A frame's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Open = 1,
    Data = 2,
    Eof = 3,
    Close = 4,
}

/// One frame of a multiplexed relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub conn: u32,
    pub kind: Kind,
    pub payload: Vec<u8>,
}

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(out: &mut W, frame: &Frame) -> io::Result<()> {
    let mut head = [0u8; 9];
    head[..4].copy_from_slice(&frame.conn.to_be_bytes());
    head[4] = frame.kind as u8;
    let len = u32::try_from(frame.payload.len()).unwrap_or(u32::MAX);
    head[5..].copy_from_slice(&len.to_be_bytes());
    out.write_all(&head).await?;
    out.write_all(&frame.payload).await?;
    out.flush().await
}

/// Reads one frame; `None` at a clean end of the stream.
pub async fn read_frame<R: AsyncRead + Unpin>(input: &mut R) -> io::Result<Option<Frame>> {
    let mut head = [0u8; 9];
    match input.read_exact(&mut head).await {
        Ok(_) => {}
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err),
    }
    let conn = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let kind = match head[4] {
        1 => Kind::Open,
        2 => Kind::Data,
        3 => Kind::Eof,
        4 => Kind::Close,
        other => return Err(bad(format!("unknown frame kind {other}"))),
    };
    let len = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(bad(format!("a frame of {len} bytes; at most {MAX_PAYLOAD}")));
    }
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload).await?;
    Ok(Some(Frame { conn, kind, payload }))
}

fn bad(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// `tunnel connect`: copies stdin to a connection to `127.0.0.1:port` and the connection to
/// stdout, until both directions end.
pub async fn connect_stdio(port: u16) -> io::Result<()> {
    let mut socket = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
    let mut stdio = tokio::io::join(tokio::io::stdin(), tokio::io::stdout());
    tokio::io::copy_bidirectional(&mut socket, &mut stdio).await?;
    Ok(())
}

/// Binds `127.0.0.1:port`, retrying for a while when an earlier relay still holds it.
pub async fn bind_local(port: u16) -> io::Result<TcpListener> {
    let deadline = tokio::time::Instant::now() + BIND_RETRY;
    loop {
        match TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
            Err(err)
                if err.kind() == io::ErrorKind::AddrInUse
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// Serves one multiplexed relay over `input`/`output`: connections `listener` accepts are
/// opened on the other side; connections the other side opens are made to `target`. Ends
/// when `input` ends (every connection is closed then) or fails.
pub async fn serve_mux<R, W>(
    mut input: R,
    output: W,
    listener: Option<TcpListener>,
    target: Option<SocketAddr>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (frames, queue) = mpsc::channel::<Frame>(QUEUE);
    let mut tasks = JoinSet::new();
    tasks.spawn(write_all(output, queue));
    let mut writers: HashMap<u32, mpsc::Sender<Option<Vec<u8>>>> = HashMap::new();
    let mut next: u32 = 1;
    loop {
        // Connections that ended are reaped as the relay goes on.
        while tasks.try_join_next().is_some() {}
        tokio::select! {
            accepted = accept(listener.as_ref()) => {
                let (socket, _) = accepted?;
                let conn = next;
                next = next.wrapping_add(2).max(1);
                if frames.send(Frame { conn, kind: Kind::Open, payload: vec![] }).await.is_err() {
                    return Ok(());
                }
                writers.insert(conn, start(&mut tasks, conn, socket, frames.clone()));
            }
            frame = read_frame(&mut input) => {
                let Some(frame) = frame? else { return Ok(()) };
                match frame.kind {
                    Kind::Open => {
                        let Some(target) = target else {
                            return Err(bad("an open frame where nothing is relayed to".into()));
                        };
                        match TcpStream::connect(target).await {
                            Ok(socket) => {
                                let writer = start(&mut tasks, frame.conn, socket, frames.clone());
                                writers.insert(frame.conn, writer);
                            }
                            Err(err) => {
                                tracing::debug!(%target, error = %err, "a relayed connection was refused");
                                let close = Frame { conn: frame.conn, kind: Kind::Close, payload: vec![] };
                                let _ = frames.send(close).await;
                            }
                        }
                    }
                    // Bounded: a connection that does not take its bytes holds the relay
                    // back (the other side's reads wait) instead of piling them up here.
                    Kind::Data => {
                        if let Some(writer) = writers.get(&frame.conn) {
                            let _ = writer.send(Some(frame.payload)).await;
                        }
                    }
                    Kind::Eof => {
                        if let Some(writer) = writers.get(&frame.conn) {
                            let _ = writer.send(None).await;
                        }
                    }
                    Kind::Close => {
                        writers.remove(&frame.conn);
                    }
                }
            }
        }
    }
}

async fn accept(listener: Option<&TcpListener>) -> io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Writes the queued frames to `output` in order.
async fn write_all<W: AsyncWrite + Unpin>(mut output: W, mut queue: mpsc::Receiver<Frame>) {
    while let Some(frame) = queue.recv().await {
        if write_frame(&mut output, &frame).await.is_err() {
            return;
        }
    }
}

/// Starts relaying one connection: its bytes become `data` frames (then `eof`, or `close`
/// on an error); what the returned sender gets is written to it (`None`: shut the write
/// half).
fn start(
    tasks: &mut JoinSet<()>,
    conn: u32,
    socket: TcpStream,
    frames: mpsc::Sender<Frame>,
) -> mpsc::Sender<Option<Vec<u8>>> {
    let (mut read, mut write) = socket.into_split();
    let (writer, mut incoming) = mpsc::channel::<Option<Vec<u8>>>(QUEUE);
    tasks.spawn(async move {
        let mut chunk = vec![0u8; MAX_PAYLOAD];
        loop {
            let kind = match read.read(&mut chunk).await {
                Ok(0) => Kind::Eof,
                Ok(n) => {
                    let frame = Frame { conn, kind: Kind::Data, payload: chunk[..n].to_vec() };
                    if frames.send(frame).await.is_err() {
                        return;
                    }
                    continue;
                }
                Err(_) => Kind::Close,
            };
            let _ = frames.send(Frame { conn, kind, payload: vec![] }).await;
            return;
        }
    });
    tasks.spawn(async move {
        while let Some(bytes) = incoming.recv().await {
            match bytes {
                Some(bytes) => {
                    if write.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                None => {
                    let _ = write.shutdown().await;
                    return;
                }
            }
        }
    });
    writer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn i42_s4_frames_read_back_as_written_and_a_bad_one_is_an_error() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let frame = Frame { conn: 7, kind: Kind::Data, payload: b"hello".to_vec() };
        write_frame(&mut a, &frame).await.unwrap();
        assert_eq!(read_frame(&mut b).await.unwrap(), Some(frame));
        a.write_all(&[0, 0, 0, 1, 9, 0, 0, 0, 0]).await.unwrap();
        assert!(read_frame(&mut b).await.is_err(), "kind 9 is refused");
        drop(a);
        assert_eq!(read_frame(&mut b).await.unwrap(), None);
    }

    /// A listening side and a connecting side joined by two pipes relay a request and its
    /// answer between a client and a server that never see each other's socket.
    #[tokio::test]
    async fn i42_s4_a_connection_accepted_on_one_side_reaches_the_target_on_the_other() {
        let server = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let target = server.local_addr().unwrap();
        let entry = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let entry_addr = entry.local_addr().unwrap();
        let (listen_in, connect_out) = tokio::io::duplex(4096);
        let (connect_in, listen_out) = tokio::io::duplex(4096);
        let listen = serve_mux(listen_in, listen_out, Some(entry), None);
        let connect = serve_mux(connect_in, connect_out, None, Some(target));
        let echo = async {
            let (mut socket, _) = server.accept().await.unwrap();
            let mut asked = String::new();
            socket.read_to_string(&mut asked).await.unwrap();
            socket.write_all(format!("answer to {asked}").as_bytes()).await.unwrap();
        };
        let client = async {
            let mut socket = TcpStream::connect(entry_addr).await.unwrap();
            socket.write_all(b"the question").await.unwrap();
            socket.shutdown().await.unwrap();
            let mut answer = String::new();
            socket.read_to_string(&mut answer).await.unwrap();
            answer
        };
        let relays = async { tokio::join!(listen, connect) };
        let answer = tokio::select! {
            (answer, ()) = async { tokio::join!(client, echo) } => answer,
            _ = relays => panic!("the relays ended first"),
        };
        assert_eq!(answer, "answer to the question");
    }
}
