//! The server's side of a runner connection: the handshake, then one task that writes frames
//! and one that routes what the runner sends to the execution it belongs to. An execution
//! started through the runner is seen as a byte pipe (the agent's stdout and stdin) and a
//! control (pid, stop, wait), like a local child process, so the ACP layer does not care
//! where the bytes come from.
//!
//! Input to an agent is exactly-once too: the bytes written to an execution's stdin pipe
//! become numbered input items ([`Inputs`]) that stay with the server until the runner
//! acknowledges them, at most `input_limit` unacknowledged bytes (past it the writer waits);
//! [`RunnerClient::resume`] hands them to a new connection, which resends every
//! unacknowledged item the runner has not taken, in order, before any new one.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::host::INPUT_LIMIT;
use super::proto::{
    Data, ExecutionInfo, FromRunner, PROTOCOL_VERSION, ProtocolError, ServerCodec, SpawnSpec,
    ToRunner, kind_of,
};
use crate::ExitInfo;

/// Size of the in-process pipes between the connection and an execution's reader/writer.
const PIPE: usize = 1 << 20;

enum Event {
    Spawned(i32),
    SpawnFailed(String),
    Output(u64, Bytes),
    Exited(u64, ExitInfo, String),
}

/// Where the frames of an execution go: to its follower, parked until someone attaches
/// (the replay of executions an earlier server started arrives right after `welcome`), or
/// nowhere for an execution this server forgot (the replay of its old items can still
/// arrive after `forget`: the marker keeps them from being parked for ever).
enum Route {
    Follow(mpsc::UnboundedSender<Event>, Inputs),
    Parked(Vec<Event>),
    Forgotten,
}

type Routes = Arc<Mutex<HashMap<String, Route>>>;

/// A connection to a runner, after a successful handshake.
#[derive(Clone)]
pub struct RunnerClient {
    out: mpsc::UnboundedSender<ToRunner>,
    routes: Routes,
    /// Cancelled when the connection is gone.
    closed: CancellationToken,
    /// Cancelled once the writer ended: after `close`, everything sent before it is written
    /// and the transport's write side is shut.
    written: CancellationToken,
    /// Unacknowledged input bytes an execution started or attached from here may hold.
    input_limit: usize,
}

/// When the runner's items are acknowledged (and so forgotten by the runner).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPolicy {
    /// Once written into the stdout pipe: a server that dies before it handled them loses
    /// them.
    OnDelivery,
    /// Only through [`Acks::commit`], once the caller committed their effects: a server that
    /// dies first gets them again from the runner, from the first uncommitted one.
    OnCommit,
}

/// Which runner item each byte of an execution's stdout pipe came from, and the
/// acknowledgements of an [`AckPolicy::OnCommit`] follower.
#[derive(Clone)]
pub struct Acks {
    exec: String,
    out: mpsc::UnboundedSender<ToRunner>,
    ledger: Arc<Mutex<Ledger>>,
}

struct Ledger {
    /// Bytes written into the stdout pipe so far.
    written: u64,
    /// `(end offset, seq)` of the items written and not yet acknowledged, in order.
    items: VecDeque<(u64, u64)>,
    /// The highest acknowledged number (the runner's own count when attached).
    acked: u64,
    /// The number of the exit item, once it arrived.
    exit: Option<u64>,
    /// Where the acknowledged item `acked` ends in the stdout pipe (0 before any was
    /// written: the pipe starts with item `acked + 1`).
    acked_end: u64,
}

impl Acks {
    fn new(exec: &str, out: mpsc::UnboundedSender<ToRunner>, acked: u64) -> Self {
        let ledger = Ledger { written: 0, items: VecDeque::new(), acked, exit: None, acked_end: 0 };
        Self { exec: exec.to_owned(), out, ledger: Arc::new(Mutex::new(ledger)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn written(&self, seq: u64, len: usize) {
        let mut ledger = self.lock();
        ledger.written += len as u64;
        let end = ledger.written;
        ledger.items.push_back((end, seq));
    }

    /// The item a reader that consumed the first `offset` bytes of stdout has seen whole: its
    /// number and the offset where it ends (the tag of an ACP message that ends at `offset`).
    /// `None` when no unacknowledged item lies wholly within them.
    pub fn seq_through(&self, offset: u64) -> Option<(u64, u64)> {
        let ledger = self.lock();
        let whole = ledger.items.partition_point(|(end, _)| *end <= offset);
        whole.checked_sub(1).and_then(|i| ledger.items.get(i)).map(|(end, seq)| (*seq, *end))
    }

    /// The runner position of `offset` bytes of stdout: the last item wholly within them and
    /// how many bytes of the next one they cover too (items are chunks of the agent's output,
    /// not lines, so a line can end inside one). A new server that attaches at that item
    /// drops that many bytes of the replay. `None` for an offset before the last
    /// acknowledged item's end (a later position is committed already).
    pub fn position(&self, offset: u64) -> Option<(u64, u64)> {
        let ledger = self.lock();
        let whole = ledger.items.partition_point(|(end, _)| *end <= offset);
        match whole.checked_sub(1).and_then(|i| ledger.items.get(i)) {
            Some((end, seq)) => Some((*seq, offset - end)),
            None => offset.checked_sub(ledger.acked_end).map(|skip| (ledger.acked, skip)),
        }
    }

    /// Acknowledges every item up to `seq` (the last one whose effects are committed): the
    /// runner forgets them and replays only later ones after a reconnect. Lower numbers than
    /// an earlier commit change nothing.
    pub fn commit(&self, seq: u64) {
        let mut ledger = self.lock();
        if seq <= ledger.acked {
            return;
        }
        ledger.acked = seq;
        while ledger.items.front().is_some_and(|(_, s)| *s <= seq) {
            if let Some((end, _)) = ledger.items.pop_front() {
                ledger.acked_end = end;
            }
        }
        let _ = self.out.send(ToRunner::Ack { exec: self.exec.clone(), seq });
    }

    /// The highest acknowledged number.
    pub fn committed(&self) -> u64 {
        self.lock().acked
    }

    /// The number of the execution's exit item, once it arrived (commit it after the exit's
    /// effects; the runner then forgets the execution).
    pub fn exit_seq(&self) -> Option<u64> {
        self.lock().exit
    }
}

/// The input items of one execution not yet acknowledged by the runner, in order, and the
/// connection they go to. Bytes written to the execution's stdin pipe become items (a chunk
/// each, then the close) numbered from the runner's last taken one plus 1; each is sent when
/// made and kept until an `input_ack` covers it; [`RunnerClient::resume`] points the queue at
/// a new connection and resends what the runner did not take. At most `limit`
/// unacknowledged bytes are held (a single larger chunk alone): the stdin task waits for
/// acknowledgements past it, so the pipe fills and its writer waits.
#[derive(Clone)]
pub struct Inputs {
    shared: Arc<InputShared>,
}

struct InputShared {
    exec: String,
    /// Permits for unacknowledged bytes (`limit` in all; an item holds `min(len, limit)`).
    room: Arc<Semaphore>,
    state: Mutex<InputState>,
    /// The task that turns the stdin pipe into items; it ends with the last handle.
    task: OnceLock<AbortOnDropHandle<()>>,
}

/// Names a line written into an execution's stdin pipe, so the runner can say whether it took
/// it (protocol version 3): `(offset, key)`, where `offset` is the byte offset in the pipe
/// just past the line's last byte. Sent *before* the line is written into the pipe, in the
/// order the lines are written; the pipe's reader gives the key to the item holding that
/// byte. A writer that names nothing never sends.
pub type InputKeys = mpsc::UnboundedSender<(u64, String)>;

/// One unacknowledged input item.
struct InputItem {
    seq: u64,
    /// `None`: the close.
    data: Option<Bytes>,
    /// The keys of the lines that end in it.
    keys: Vec<String>,
    /// The permits of room it holds.
    permits: u32,
}

struct InputState {
    /// The number the next item gets.
    next: u64,
    /// Unacknowledged items, in order.
    items: VecDeque<InputItem>,
    /// Unacknowledged bytes.
    bytes: usize,
    /// The connection items go to (a gone one: they wait for [`RunnerClient::resume`]).
    out: mpsc::UnboundedSender<ToRunner>,
}

impl Inputs {
    /// A queue whose first item is `taken + 1`, sending to `out`, bounded by `limit` bytes.
    fn new(exec: &str, out: mpsc::UnboundedSender<ToRunner>, taken: u64, limit: usize) -> Self {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX).max(1);
        let state = InputState { next: taken + 1, items: VecDeque::new(), bytes: 0, out };
        let shared = InputShared {
            exec: exec.to_owned(),
            room: Arc::new(Semaphore::new(limit as usize)),
            state: Mutex::new(state),
            task: OnceLock::new(),
        };
        Self { shared: Arc::new(shared) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InputState> {
        self.shared.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The stdin pipe whose bytes become this queue's items (once per queue), and where its
    /// writer names the lines it writes ([`InputKeys`]).
    fn start_stdin(&self, limit: usize) -> (DuplexStream, InputKeys) {
        let (stdin, stdin_rx) = tokio::io::duplex(PIPE);
        let (keys, keys_rx) = mpsc::unbounded_channel();
        let limit = u32::try_from(limit).unwrap_or(u32::MAX).max(1);
        let task = tokio::spawn(read_stdin(
            Arc::downgrade(&self.shared),
            self.shared.room.clone(),
            limit,
            stdin_rx,
            keys_rx,
        ));
        let _ = self.shared.task.set(AbortOnDropHandle::new(task));
        (stdin, keys)
    }

    /// Numbers an item, keeps it and sends it.
    fn push(&self, data: Option<Bytes>, keys: Vec<String>, permits: u32) {
        let mut state = self.lock();
        let seq = state.next;
        state.next += 1;
        state.bytes += data.as_ref().map_or(0, Bytes::len);
        let item = InputItem { seq, data, keys, permits };
        let _ = state.out.send(frame(&self.shared.exec, &item));
        state.items.push_back(item);
    }

    /// The runner took every item up to `seq`: they are forgotten and their room freed.
    fn acked(&self, seq: u64) {
        let mut state = self.lock();
        let mut freed = 0usize;
        while state.items.front().is_some_and(|item| item.seq <= seq) {
            if let Some(item) = state.items.pop_front() {
                state.bytes -= item.data.as_ref().map_or(0, Bytes::len);
                freed += item.permits as usize;
            }
        }
        drop(state);
        self.shared.room.add_permits(freed);
    }

    /// Points the queue at a new connection: items up to `acked` are forgotten, items after
    /// `taken` are sent again, in order, before any new one (both under one lock).
    fn resume(&self, out: mpsc::UnboundedSender<ToRunner>, taken: u64, acked: u64) {
        self.acked(acked);
        let mut state = self.lock();
        state.next = state.next.max(taken + 1);
        for item in &state.items {
            if item.seq > taken {
                let _ = out.send(frame(&self.shared.exec, item));
            }
        }
        state.out = out;
    }

    /// Unacknowledged input bytes (tests and diagnostics).
    pub fn unacknowledged(&self) -> usize {
        self.lock().bytes
    }

    /// The number of the last item made (0 before any).
    pub fn last(&self) -> u64 {
        self.lock().next - 1
    }
}

fn frame(exec: &str, item: &InputItem) -> ToRunner {
    let (exec, seq) = (exec.to_owned(), item.seq);
    match &item.data {
        Some(bytes) => {
            ToRunner::Input { exec, seq, data: Data(bytes.clone()), keys: item.keys.clone() }
        }
        None => ToRunner::CloseInput { exec, seq },
    }
}

/// Turns the stdin pipe into input items, waiting for room past the bound; its end becomes
/// the close item. Each item carries the keys of the lines that end in it (`keys`, named
/// before the lines were written, so a key is always there by the time its bytes are).
/// Holds the queue only weakly: the last [`Inputs`] handle ends it.
async fn read_stdin(
    inputs: Weak<InputShared>,
    room: Arc<Semaphore>,
    limit: u32,
    mut stdin: DuplexStream,
    mut keys: mpsc::UnboundedReceiver<(u64, String)>,
) {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut named: VecDeque<(u64, String)> = VecDeque::new();
    let mut read = 0u64;
    loop {
        let data = match stdin.read(&mut chunk).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(Bytes::copy_from_slice(&chunk[..n])),
        };
        let len = data.as_ref().map_or(0, Bytes::len);
        read += len as u64;
        while let Ok(key) = keys.try_recv() {
            named.push_back(key);
        }
        let mut item_keys = vec![];
        while named.front().is_some_and(|(end, _)| *end <= read) {
            if let Some((_, key)) = named.pop_front() {
                item_keys.push(key);
            }
        }
        let permits = u32::try_from(len).unwrap_or(u32::MAX).min(limit);
        if permits > 0 {
            match room.acquire_many(permits).await {
                Ok(permit) => permit.forget(),
                Err(_) => return,
            }
        }
        let Some(shared) = inputs.upgrade() else { return };
        let closing = data.is_none();
        Inputs { shared }.push(data, item_keys, permits);
        if closing {
            return;
        }
    }
}

/// An execution started through a runner.
pub struct RemoteExecution {
    /// The agent's stdout.
    pub stdout: DuplexStream,
    /// The agent's stdin.
    pub stdin: DuplexStream,
    /// Where the writer of `stdin` names lines (version 3 keys).
    pub keys: InputKeys,
    pub control: RemoteControl,
    /// Where each stdout byte came from; acknowledgements under [`AckPolicy::OnCommit`].
    pub acks: Acks,
}

/// An execution taken over on a new connection with the input queue of an earlier one
/// ([`RunnerClient::resume`]): its stdin stays the pipe the queue was started with.
pub struct ResumedExecution {
    /// The agent's stdout on this connection.
    pub stdout: DuplexStream,
    pub control: RemoteControl,
    pub acks: Acks,
}

/// Supervision of a runner's execution.
pub struct RemoteControl {
    exec: String,
    pid: i32,
    out: mpsc::UnboundedSender<ToRunner>,
    exit: watch::Receiver<Option<(ExitInfo, String)>>,
    /// The execution's input queue (its stdin task lives as long as a handle does).
    inputs: Inputs,
}

impl RunnerClient {
    /// Handshakes on `stream` and starts the connection's tasks. Returns the client and the
    /// executions the runner already holds (from an earlier server).
    pub async fn connect<S>(stream: S) -> Result<(Self, Vec<ExecutionInfo>), ProtocolError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut framed = Framed::new(stream, ServerCodec::default());
        framed.send(ToRunner::Hello { version: PROTOCOL_VERSION }).await?;
        let executions = match framed.next().await {
            Some(Ok(FromRunner::Welcome { version, executions })) => {
                if version != PROTOCOL_VERSION {
                    return Err(ProtocolError::VersionMismatch {
                        ours: PROTOCOL_VERSION,
                        theirs: version,
                    });
                }
                executions
            }
            Some(Ok(FromRunner::Refused { message })) => {
                return Err(ProtocolError::Refused(message));
            }
            Some(Ok(other)) => {
                return Err(ProtocolError::Unexpected {
                    expected: "welcome",
                    got: kind_of(&other),
                });
            }
            Some(Err(err)) => return Err(err),
            None => return Err(ProtocolError::Closed),
        };
        let (mut sink, mut stream) = framed.split();
        let (out, mut outbox) = mpsc::unbounded_channel::<ToRunner>();
        let routes: Routes = Arc::default();
        let closed = CancellationToken::new();
        let written = CancellationToken::new();
        let (writer_closed, writer_done) = (closed.clone(), written.clone());
        tokio::spawn(async move {
            let _done = writer_done.drop_guard();
            loop {
                let frame = tokio::select! {
                    biased;
                    frame = outbox.recv() => frame,
                    _ = writer_closed.cancelled() => {
                        // What was sent before `close` (the last acknowledgements) goes out.
                        while let Ok(frame) = outbox.try_recv() {
                            if sink.feed(frame).await.is_err() {
                                return;
                            }
                        }
                        let _ = sink.close().await;
                        return;
                    }
                };
                let Some(frame) = frame else { return };
                if let Err(err) = sink.send(frame).await {
                    tracing::warn!(error = %err, "writing to the runner failed");
                    writer_closed.cancel();
                    return;
                }
            }
        });
        let (reader_routes, reader_closed) = (routes.clone(), closed.clone());
        tokio::spawn(async move {
            loop {
                let frame = tokio::select! {
                    _ = reader_closed.cancelled() => break,
                    frame = stream.next() => frame,
                };
                let frame = match frame {
                    Some(Ok(frame)) => frame,
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "reading from the runner failed");
                        break;
                    }
                    None => break,
                };
                let (exec, event) = match frame {
                    FromRunner::Spawned { exec, pid } => (exec, Event::Spawned(pid)),
                    FromRunner::SpawnFailed { exec, message } => {
                        (exec, Event::SpawnFailed(message))
                    }
                    FromRunner::Output { exec, seq, data } => (exec, Event::Output(seq, data.0)),
                    FromRunner::Exited { exec, seq, exit, stderr } => {
                        (exec, Event::Exited(seq, exit.into(), stderr))
                    }
                    FromRunner::InputAck { exec, seq } => {
                        let routes = reader_routes.lock().unwrap_or_else(PoisonError::into_inner);
                        if let Some(Route::Follow(_, inputs)) = routes.get(&exec) {
                            inputs.acked(seq);
                        }
                        continue;
                    }
                    FromRunner::Error { message } => {
                        tracing::warn!(message, "the runner reported an error");
                        continue;
                    }
                    other => {
                        tracing::warn!(frame = kind_of(&other), "unexpected frame from the runner");
                        continue;
                    }
                };
                let mut routes = reader_routes.lock().unwrap_or_else(PoisonError::into_inner);
                match routes.entry(exec).or_insert_with(|| Route::Parked(Vec::new())) {
                    Route::Follow(follower, _) => {
                        let _ = follower.send(event);
                    }
                    Route::Parked(parked) => parked.push(event),
                    Route::Forgotten => {}
                }
            }
            reader_closed.cancel();
            // Every follower learns that the connection is gone.
            reader_routes.lock().unwrap_or_else(PoisonError::into_inner).clear();
        });
        Ok((Self { out, routes, closed, written, input_limit: INPUT_LIMIT }, executions))
    }

    /// The same connection, whose executions from now on hold at most `limit`
    /// unacknowledged input bytes (default [`INPUT_LIMIT`]; tests use small ones).
    pub fn with_input_limit(mut self, limit: usize) -> Self {
        self.input_limit = limit;
        self
    }

    /// Closes the connection (the runner keeps its agents for its grace period).
    pub fn close(&self) {
        self.closed.cancel();
    }

    /// Closes the connection and resolves once everything sent before (the last
    /// acknowledgements) is written and the write side shut, or the transport failed.
    pub async fn finish(&self) {
        self.close();
        self.written.cancelled().await;
    }

    /// Whether the connection is gone (the runner ended or the transport failed).
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves when the connection is gone.
    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }

    /// Kills an execution the runner holds and forgets it (one this server does not take
    /// over).
    pub fn forget(&self, exec: &str) {
        // One small marker per forgotten execution: what still arrives for it is discarded.
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(exec.to_owned(), Route::Forgotten);
        let _ = self.out.send(ToRunner::Forget { exec: exec.to_owned() });
    }

    /// Events held for executions nobody attached yet (tests and diagnostics).
    pub fn parked(&self) -> usize {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes
            .values()
            .map(|route| match route {
                Route::Parked(parked) => parked.len(),
                Route::Follow(..) | Route::Forgotten => 0,
            })
            .sum()
    }

    /// Takes over an execution the runner already holds (listed in `welcome`): its
    /// unacknowledged output comes first, then what it writes from now on.
    pub fn attach(&self, execution: &ExecutionInfo) -> RemoteExecution {
        self.attach_with(execution, AckPolicy::OnDelivery, 0)
    }

    /// [`Self::attach`] with a choice of when items are acknowledged, for a server that
    /// recorded `committed`, the number of the last item whose effects it committed (its own
    /// record: an acknowledgement sent just before a crash may never have reached the
    /// runner). Output items up to it are acknowledged and dropped, not delivered again.
    ///
    /// Its input is numbered after the last item the runner took (what an earlier server
    /// sent and the runner did not take is not known here: see [`Self::resume`] for a
    /// server that still holds it).
    pub fn attach_with(
        &self,
        execution: &ExecutionInfo,
        policy: AckPolicy,
        committed: u64,
    ) -> RemoteExecution {
        let inputs =
            Inputs::new(&execution.exec, self.out.clone(), execution.input_taken, self.input_limit);
        let (stdin, keys) = inputs.start_stdin(self.input_limit);
        let (stdout, control, acks) = self.take_over(execution, policy, committed, inputs);
        RemoteExecution { stdout, stdin, keys, control, acks }
    }

    /// Takes over, on this connection, an execution followed on an earlier one (listed in
    /// this connection's `welcome`), with that one's input queue (`control.inputs()`): items
    /// the runner acknowledged are forgotten, items it did not take are sent again, in order,
    /// before any new one; the stdin pipe stays the one the queue was started with. Output as
    /// [`Self::attach_with`].
    pub fn resume(
        &self,
        execution: &ExecutionInfo,
        policy: AckPolicy,
        committed: u64,
        inputs: &Inputs,
    ) -> ResumedExecution {
        let (stdout, control, acks) = self.take_over(execution, policy, committed, inputs.clone());
        inputs.resume(self.out.clone(), execution.input_taken, execution.input_acked);
        ResumedExecution { stdout, control, acks }
    }

    fn take_over(
        &self,
        execution: &ExecutionInfo,
        policy: AckPolicy,
        committed: u64,
        inputs: Inputs,
    ) -> (DuplexStream, RemoteControl, Acks) {
        let (follower, events) = mpsc::unbounded_channel();
        {
            let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(Route::Parked(parked)) = routes.remove(&execution.exec) {
                for event in parked {
                    let _ = follower.send(event);
                }
            }
            if !self.closed.is_cancelled() {
                routes.insert(execution.exec.clone(), Route::Follow(follower, inputs.clone()));
            }
        }
        let acked = execution.acked.max(committed);
        if committed > execution.acked {
            let _ = self.out.send(ToRunner::Ack { exec: execution.exec.clone(), seq: committed });
        }
        self.follow(&execution.exec, execution.pid, acked, policy, events, inputs)
    }

    /// Starts an execution named `exec` (unique among the runner's live ones).
    pub async fn spawn(&self, exec: &str, spec: SpawnSpec) -> Result<RemoteExecution, String> {
        self.spawn_with(exec, spec, AckPolicy::OnDelivery).await
    }

    /// [`Self::spawn`] with a choice of when items are acknowledged.
    pub async fn spawn_with(
        &self,
        exec: &str,
        spec: SpawnSpec,
        policy: AckPolicy,
    ) -> Result<RemoteExecution, String> {
        let (follower, mut events) = mpsc::unbounded_channel();
        let inputs = Inputs::new(exec, self.out.clone(), 0, self.input_limit);
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(exec.to_owned(), Route::Follow(follower, inputs.clone()));
        if self.out.send(ToRunner::Spawn { exec: exec.to_owned(), spec }).is_err() {
            return Err(self.gone(exec));
        }
        let pid = match events.recv().await {
            Some(Event::Spawned(pid)) => pid,
            Some(Event::SpawnFailed(message)) => {
                self.routes.lock().unwrap_or_else(PoisonError::into_inner).remove(exec);
                return Err(message);
            }
            Some(_) => return Err("the runner sent output before the agent started".into()),
            None => return Err(self.gone(exec)),
        };
        let (stdin, keys) = inputs.start_stdin(self.input_limit);
        let (stdout, control, acks) = self.follow(exec, pid, 0, policy, events, inputs);
        Ok(RemoteExecution { stdout, stdin, keys, control, acks })
    }

    /// The stdout pipe and control of an execution whose frames arrive on `events`.
    fn follow(
        &self,
        exec: &str,
        pid: i32,
        acked: u64,
        policy: AckPolicy,
        mut events: mpsc::UnboundedReceiver<Event>,
        inputs: Inputs,
    ) -> (DuplexStream, RemoteControl, Acks) {
        let acks = Acks::new(exec, self.out.clone(), acked);
        let (stdout, mut stdout_tx) = tokio::io::duplex(PIPE);
        let (exit_tx, exit) = watch::channel(None);
        // Output in order into the agent's stdout pipe, each item acknowledged once taken
        // (`OnDelivery`) or recorded for the caller's commit (`OnCommit`).
        let (routes, name, ledger) = (self.routes.clone(), exec.to_owned(), acks.clone());
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                match event {
                    // Already committed by an earlier server (acknowledged in `attach_with`).
                    Event::Output(seq, _) if seq <= acked => {}
                    Event::Output(seq, bytes) => {
                        // A reader that went away still gets the rest acknowledged.
                        let _ = stdout_tx.write_all(&bytes).await;
                        ledger.written(seq, bytes.len());
                        if policy == AckPolicy::OnDelivery {
                            ledger.commit(seq);
                        }
                    }
                    Event::Exited(seq, exit, stderr) => {
                        ledger.lock().exit = Some(seq);
                        if policy == AckPolicy::OnDelivery {
                            ledger.commit(seq);
                        }
                        drop(stdout_tx);
                        exit_tx.send_replace(Some((exit, stderr)));
                        routes.lock().unwrap_or_else(PoisonError::into_inner).remove(&name);
                        return;
                    }
                    Event::Spawned(_) | Event::SpawnFailed(_) => {}
                }
            }
            // The connection is gone before the agent's exit arrived.
            let lost = ExitInfo::Unknown { reason: "the connection to the runner was lost".into() };
            exit_tx.send_replace(Some((lost, String::new())));
        });
        let control =
            RemoteControl { exec: exec.to_owned(), pid, out: self.out.clone(), exit, inputs };
        (stdout, control, acks)
    }

    fn gone(&self, exec: &str) -> String {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner).remove(exec);
        "the connection to the runner is gone; restart the server".into()
    }
}

impl RemoteControl {
    /// The execution's name on the runner.
    pub fn exec(&self) -> &str {
        &self.exec
    }

    /// The agent's pid; it leads its own process group.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The execution's input queue (hand it to [`RunnerClient::resume`] on a new connection).
    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }

    /// The stderr tail the runner reported with the exit (empty while it runs).
    pub fn stderr_tail(&self) -> String {
        self.exit.borrow().as_ref().map(|(_, stderr)| stderr.clone()).unwrap_or_default()
    }

    /// Resolves with the agent's exit (or `Unknown` when the runner connection is lost).
    pub async fn wait(&self) -> ExitInfo {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(value) => value.as_ref().map(|(exit, _)| exit.clone()),
            Err(_) => None,
        }
        .unwrap_or(ExitInfo::Unknown { reason: "the connection to the runner was lost".into() })
    }

    /// TERM to the agent's group, `grace`, then KILL; resolves with its exit.
    pub async fn stop(&self, grace: Duration) -> ExitInfo {
        self.kill(grace);
        self.wait().await
    }

    /// Asks the runner for [`RemoteControl::stop`] without waiting (lost with a lost
    /// connection: the caller sends it again on the next one).
    pub fn kill(&self, grace: Duration) {
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        let _ = self.out.send(ToRunner::Kill { exec: self.exec.clone(), grace_ms });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(rx: &mut mpsc::UnboundedReceiver<ToRunner>) -> Vec<(u64, Option<Vec<u8>>)> {
        let mut frames = Vec::new();
        while let Ok(frame) = rx.try_recv() {
            frames.push(match frame {
                ToRunner::Input { seq, data, .. } => (seq, Some(data.0.to_vec())),
                ToRunner::CloseInput { seq, .. } => (seq, None),
                other => panic!("not an input frame: {other:?}"),
            });
        }
        frames
    }

    #[test]
    fn i20_d5_a_resumed_queue_resends_what_was_not_taken_in_order_before_new_items() {
        let (old, mut old_rx) = mpsc::unbounded_channel();
        // Attached after the runner took item 2 (of an earlier server): numbering goes on.
        let inputs = Inputs::new("x", old, 2, 1 << 20);
        for text in ["a", "b", "c", "d"] {
            // As the stdin task does: room first, then the item.
            inputs.shared.room.try_acquire_many(1).unwrap().forget();
            inputs.push(Some(Bytes::from_static(text.as_bytes())), vec![], 1);
        }
        assert_eq!(sent(&mut old_rx).iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [3, 4, 5, 6]);
        inputs.acked(3);
        assert_eq!(inputs.unacknowledged(), 3);
        // The connection dropped; the new one's welcome: taken through 5, acknowledged 4.
        let (new, mut new_rx) = mpsc::unbounded_channel();
        inputs.resume(new, 5, 4);
        inputs.push(None, vec![], 0);
        assert_eq!(
            sent(&mut new_rx),
            [(6, Some(b"d".to_vec())), (7, None)],
            "only what was not taken is sent again, then the new item"
        );
        assert_eq!(inputs.unacknowledged(), 2, "item 5 stays until acknowledged");
        assert!(sent(&mut old_rx).is_empty());
        inputs.acked(7);
        assert_eq!((inputs.unacknowledged(), inputs.last()), (0, 7));
        assert_eq!(inputs.shared.room.available_permits(), 1 << 20, "the room is back");
    }

    #[test]
    fn i20_a1_a_position_is_the_last_whole_item_and_the_bytes_of_the_next() {
        let (out, mut sent) = mpsc::unbounded_channel();
        // Attached after item 4 was committed: the pipe starts with item 5.
        let acks = Acks::new("x", out, 4);
        acks.written(5, 10); // bytes 0..10
        acks.written(6, 10); // bytes 10..20
        assert_eq!(acks.position(0), Some((4, 0)));
        assert_eq!(acks.position(7), Some((4, 7)), "a line that ends inside item 5");
        assert_eq!(acks.position(10), Some((5, 0)));
        assert_eq!(acks.position(15), Some((5, 5)));
        acks.commit(5);
        assert!(matches!(sent.try_recv(), Ok(ToRunner::Ack { seq: 5, .. })));
        assert_eq!(acks.position(15), Some((5, 5)), "after the commit too");
        assert_eq!(acks.position(20), Some((6, 0)));
        acks.commit(6);
        assert_eq!(acks.position(25), Some((6, 5)));
        assert_eq!(acks.position(9), None, "before what is committed");
    }
}
