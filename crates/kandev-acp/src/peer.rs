//! The JSON-RPC peer: one read task, one write task, and the table of calls awaiting answers.
//!
//! Invariants:
//! - Only the write task touches the writer; everyone else queues whole lines to it.
//! - The read task never waits for anything but the reader: events and answers are queued on
//!   unbounded channels, so a slow consumer (or a permission waiting for a human) can never
//!   stop responses from being matched.
//! - Once closed (agent output ended, read error, or `close()`), every pending and every later
//!   call fails with `AcpError::Closed`.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::dispatch::{Dispatcher, EventSink};
use crate::error::AcpError;
use crate::line_reader::{AgentLines, Line};
use crate::rpc::{self, RpcErrorBody};

const READ_BUFFER_BYTES: usize = 64 * 1024;

/// One line for the write task, with an optional acknowledgement of the write and an
/// optional key naming it ([`InputKeys`]).
pub(crate) struct Outgoing {
    pub(crate) line: Vec<u8>,
    pub(crate) written: Option<oneshot::Sender<io::Result<()>>>,
    pub(crate) key: Option<String>,
}

/// Where the write task names keyed lines before it writes them: `(offset, key)`, `offset`
/// being the byte offset in the agent's input just past the line. A runner connection
/// (kandev-runtime's `InputKeys`) uses it to tell a restarted server which of its lines the
/// runner took; other writers have none, and keys then go nowhere.
pub type InputKeys = mpsc::UnboundedSender<(u64, String)>;

/// Queues lines for the write task.
pub(crate) type Outbox = mpsc::UnboundedSender<Outgoing>;

type PendingCall = oneshot::Sender<Result<Value, RpcErrorBody>>;

#[derive(Default)]
struct CallTable {
    next_id: u64,
    pending: HashMap<u64, PendingCall>,
    closed: bool,
}

pub(crate) struct Peer {
    /// The stream offset up to which every line of the agent was dispatched.
    read_through: std::sync::atomic::AtomicU64,
    calls: Mutex<CallTable>,
    outbox: Outbox,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Peer {
    /// Spawns the read and write tasks; must be called inside a tokio runtime.
    pub(crate) fn start<R, W>(
        reader: R,
        writer: W,
        max_line_len: usize,
        events: EventSink,
        keys: Option<InputKeys>,
    ) -> Arc<Peer>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (outbox, outgoing) = mpsc::unbounded_channel();
        let peer = Arc::new(Peer {
            read_through: std::sync::atomic::AtomicU64::new(0),
            calls: Mutex::new(CallTable::default()),
            outbox,
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        let dispatcher = Dispatcher::new(peer.clone(), events);
        peer.tasks.spawn(write_loop(writer, outgoing, keys, peer.shutdown.clone()));
        peer.tasks.spawn(read_loop(reader, max_line_len, dispatcher, peer.shutdown.clone()));
        peer.tasks.close();
        peer
    }

    /// Notes that every line up to stream offset `end` was dispatched.
    pub(crate) fn read_through(&self, end: u64) {
        self.read_through.store(end, std::sync::atomic::Ordering::Relaxed);
    }

    /// The stream offset up to which every line was dispatched.
    pub(crate) fn dispatched_through(&self) -> u64 {
        self.read_through.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sends a request and waits for its answer for at most `timeout`.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, AcpError> {
        let id = self.reserve_id();
        self.request_as(id, method, params, timeout, None).await
    }

    /// The next request id, taken (a caller that records it before sending: `request_as`).
    pub(crate) fn reserve_id(&self) -> u64 {
        let mut calls = self.lock();
        let id = calls.next_id;
        calls.next_id += 1;
        id
    }

    /// Starts this connection's request ids at `first` (a server that joins a conversation
    /// an earlier server began: ids that cannot collide with the ones it used).
    pub(crate) fn start_ids_at(&self, first: u64) {
        let mut calls = self.lock();
        calls.next_id = calls.next_id.max(first);
    }

    /// [`Self::request`] with an id from [`Self::reserve_id`].
    pub(crate) async fn request_as(
        &self,
        id: u64,
        method: &str,
        params: Value,
        timeout: Duration,
        key: Option<String>,
    ) -> Result<Value, AcpError> {
        let line = rpc::encode_line(&rpc::request(id, method, params));
        self.call_as(id, method, Some((line, key)), timeout).await
    }

    /// Waits for the answer to request `id`, sent by an earlier connection to the same agent
    /// (the open `session/prompt` of a conversation joined in the middle).
    pub(crate) async fn await_answer(
        &self,
        id: u64,
        method: &str,
        timeout: Duration,
    ) -> Result<Value, AcpError> {
        self.call_as(id, method, None, timeout).await
    }

    /// Registers call `id`, writes `line` (if any) and waits for the answer.
    async fn call_as(
        &self,
        id: u64,
        method: &str,
        line: Option<(Vec<u8>, Option<String>)>,
        timeout: Duration,
    ) -> Result<Value, AcpError> {
        let answer = self.register_call(id, method)?;
        let _forget = ForgetCallOnDrop { peer: self, id };
        let call = async {
            if let Some((line, key)) = line {
                self.write(method, line, key).await?;
                tracing::debug!(id, method, "sent request to agent");
            }
            match answer.await {
                Ok(Ok(result)) => Ok(result),
                Ok(Err(error)) => Err(AcpError::Rpc {
                    method: method.to_owned(),
                    code: error.code,
                    message: error.message,
                    data: error.data,
                }),
                Err(_) => Err(AcpError::closed(method)),
            }
        };
        tokio::time::timeout(timeout, call).await.unwrap_or_else(|_| {
            tracing::debug!(id, method, ?timeout, "agent did not answer in time");
            Err(AcpError::Timeout { method: method.to_owned(), timeout })
        })
    }

    /// Sends a notification, named `key` if given; returns once it is written.
    pub(crate) async fn notify(
        &self,
        method: &str,
        params: Value,
        key: Option<String>,
    ) -> Result<(), AcpError> {
        if self.is_closed() {
            return Err(AcpError::closed(method));
        }
        let line = rpc::encode_line(&rpc::notification(method, params));
        self.write(method, line, key).await
    }

    /// Sends the answer to the agent's request `id`, named `key`; returns once it is written.
    pub(crate) async fn answer(
        &self,
        id: Value,
        result: Value,
        key: String,
    ) -> Result<(), AcpError> {
        const WHAT: &str = "an answer to the agent";
        if self.is_closed() {
            return Err(AcpError::closed(WHAT));
        }
        let line = rpc::encode_line(&rpc::response_message(id, Ok(result)));
        self.write(WHAT, line, Some(key)).await
    }

    /// Hands an answer to the call waiting for it; late or unknown answers are logged.
    pub(crate) fn complete(&self, id: &Value, outcome: Result<Value, RpcErrorBody>) {
        let call = rpc::request_id(id).and_then(|id| self.lock().pending.remove(&id));
        match call {
            // The caller may have given up in the meantime; nothing to do then.
            Some(call) => drop(call.send(outcome)),
            None => tracing::debug!(%id, "ignoring answer to an unknown or timed-out request"),
        }
    }

    /// Closes the connection: fails all pending calls and stops both tasks.
    pub(crate) fn close(&self) {
        let pending = {
            let mut calls = self.lock();
            calls.closed = true;
            std::mem::take(&mut calls.pending)
        };
        // Dropping the senders makes every waiting call fail with `closed`.
        drop(pending);
        self.shutdown.cancel();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Waits until both tasks have finished.
    pub(crate) async fn wait_closed(&self) {
        self.tasks.wait().await;
    }

    pub(crate) fn outbox(&self) -> Outbox {
        self.outbox.clone()
    }

    fn register_call(
        &self,
        id: u64,
        method: &str,
    ) -> Result<oneshot::Receiver<Result<Value, RpcErrorBody>>, AcpError> {
        let mut calls = self.lock();
        if calls.closed {
            return Err(AcpError::closed(method));
        }
        if calls.pending.contains_key(&id) {
            return Err(AcpError::protocol(method, format!("request id {id} is already waiting")));
        }
        let (sender, receiver) = oneshot::channel();
        calls.pending.insert(id, sender);
        Ok(receiver)
    }

    async fn write(
        &self,
        method: &str,
        line: Vec<u8>,
        key: Option<String>,
    ) -> Result<(), AcpError> {
        let (written, done) = oneshot::channel();
        let message = Outgoing { line, written: Some(written), key };
        self.outbox.send(message).map_err(|_| AcpError::closed(method))?;
        match done.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(AcpError::Io { method: method.to_owned(), source }),
            Err(_) => Err(AcpError::closed(method)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, CallTable> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes a call from the table when its caller stops waiting (answer, timeout or drop).
struct ForgetCallOnDrop<'a> {
    peer: &'a Peer,
    id: u64,
}

impl Drop for ForgetCallOnDrop<'_> {
    fn drop(&mut self) {
        self.peer.lock().pending.remove(&self.id);
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
    keys: Option<InputKeys>,
    shutdown: CancellationToken,
) {
    let mut offset = 0u64;
    let writes = async {
        while let Some(message) = outgoing.recv().await {
            offset += message.line.len() as u64;
            // Named before it is written, so the name is there by the time its bytes are.
            if let (Some(keys), Some(key)) = (&keys, message.key) {
                let _ = keys.send((offset, key));
            }
            let result = write_line(&mut writer, &message.line).await;
            if let Err(err) = &result {
                tracing::warn!("writing to agent failed: {err}");
            }
            if let Some(written) = message.written {
                // The caller may have timed out; then nobody wants the acknowledgement.
                drop(written.send(result));
            }
        }
    };
    shutdown.run_until_cancelled(writes).await;
    if let Err(err) = writer.shutdown().await {
        tracing::debug!("closing agent input failed: {err}");
    }
}

async fn write_line<W: AsyncWrite + Unpin>(writer: &mut W, line: &[u8]) -> io::Result<()> {
    writer.write_all(line).await?;
    writer.flush().await
}

async fn read_loop<R: AsyncRead + Unpin>(
    reader: R,
    max_line_len: usize,
    dispatcher: Dispatcher,
    shutdown: CancellationToken,
) {
    let mut lines =
        FramedRead::with_capacity(reader, AgentLines::new(max_line_len), READ_BUFFER_BYTES);
    loop {
        let next = tokio::select! {
            () = shutdown.cancelled() => break,
            next = lines.next() => next,
        };
        dispatcher.at(lines.decoder().consumed());
        match next {
            Some(Ok(Line::Complete(line))) => dispatcher.on_line(line.as_bytes()),
            Some(Ok(Line::TooLong { len })) => dispatcher.on_oversized_line(len, max_line_len),
            Some(Ok(Line::NotUtf8)) => dispatcher.on_non_utf8_line(),
            None => {
                tracing::debug!("agent closed its output");
                break;
            }
            Some(Err(err)) => {
                tracing::warn!("reading from agent failed: {err}");
                break;
            }
        }
    }
    dispatcher.on_closed();
}
