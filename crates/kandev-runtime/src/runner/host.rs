//! The runner itself (`kandev runner`): owns agent processes, relays their stdio to one
//! owner connection at a time, keeps each execution's unacknowledged output in a bounded
//! buffer while the owner is away, and kills every agent once the owner has been gone for
//! the grace period.
//!
//! Invariants:
//! - Items of an execution (output chunks, then its exit) get consecutive sequence numbers
//!   and are dropped only when the owner acknowledged them; a new owner connection gets
//!   every unacknowledged item again, in order, before anything new.
//! - Past `buffer_limit` unacknowledged output bytes the agent's stdout is not read any more
//!   (the agent blocks on a full pipe); nothing is dropped.
//! - A newer connection replaces the older one; there is one owner at a time.
//! - With no owner for `grace`, every agent is killed (process group) and the runner ends;
//!   an owner that leaves while no agent runs ends it at once.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

use super::proto::{
    Data, ExecutionInfo, ExitReport, FromRunner, PROTOCOL_VERSION, ProtocolError, RunnerCodec,
    SpawnSpec, ToRunner,
};
use crate::{AgentProcess, ProcessSpec};

/// Default owner-gone grace period.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(600);
/// Default bound of unacknowledged output per execution.
pub const DEFAULT_BUFFER_LIMIT: usize = 16 << 20;
/// Largest chunk read from an agent's stdout at once.
const CHUNK: usize = 64 * 1024;
/// Bound of input bytes queued for an agent's stdin and not yet written (an agent that does
/// not read its input); past it an input frame gets an error and is not queued.
pub const INPUT_LIMIT: usize = 16 << 20;
/// How long a killed agent gets between TERM and KILL when the owner is gone.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// How a runner behaves.
#[derive(Debug, Clone, Copy)]
pub struct RunnerConfig {
    pub grace: Duration,
    pub buffer_limit: usize,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self { grace: DEFAULT_GRACE, buffer_limit: DEFAULT_BUFFER_LIMIT }
    }
}

enum Item {
    Output(Bytes),
    Exited { exit: ExitReport, stderr: String },
}

enum Input {
    Data(Bytes),
    Close,
}

struct Execution {
    pid: i32,
    process: Arc<AgentProcess>,
    /// Unacknowledged items, in sequence order.
    items: VecDeque<(u64, Item)>,
    /// Output bytes among `items`.
    buffered: usize,
    next_seq: u64,
    acked: u64,
    exited: bool,
    input: mpsc::UnboundedSender<Input>,
    /// Bytes in `input` not yet written to the agent's stdin (bounded by [`INPUT_LIMIT`]).
    queued: Arc<AtomicUsize>,
    /// Signalled when an acknowledgement made room in the buffer.
    room: Arc<Notify>,
}

#[derive(Default)]
struct State {
    executions: HashMap<String, Execution>,
    /// The current owner connection's number, if one is connected.
    owner: Option<u64>,
    /// Numbers connections; also ends a pending grace timer when a new owner arrives.
    generation: u64,
    /// Set (under the lock) once the runner started killing its agents to end: a `hello`
    /// after that is refused, so no server spawns agents that are about to be killed.
    ending: bool,
}

/// A runner: serve owner connections with [`Runner::serve_connection`]; [`Runner::done`]
/// is cancelled once the grace period ran out and its agents were killed.
#[derive(Clone)]
pub struct Runner {
    shared: Arc<Shared>,
}

struct Shared {
    config: RunnerConfig,
    state: Mutex<State>,
    /// Bumped whenever an item is added or the owner changes.
    changed: watch::Sender<u64>,
    done: CancellationToken,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Runner {
    /// A runner without an owner yet: the grace period starts now.
    pub fn new(config: RunnerConfig) -> Self {
        let (changed, _) = watch::channel(0);
        let runner = Self {
            shared: Arc::new(Shared {
                config,
                state: Mutex::new(State::default()),
                changed,
                done: CancellationToken::new(),
            }),
        };
        runner.start_grace(0);
        runner
    }

    /// Cancelled when the runner has ended (owner gone past the grace period, agents killed).
    pub fn done(&self) -> CancellationToken {
        self.shared.done.clone()
    }

    /// Unacknowledged output bytes of an execution (tests and diagnostics).
    pub fn buffered(&self, exec: &str) -> Option<usize> {
        self.shared.lock().executions.get(exec).map(|e| e.buffered)
    }

    /// Serves one owner connection until it closes or a newer one replaces it.
    pub async fn serve_connection<S>(&self, stream: S) -> Result<(), ProtocolError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let mut framed = Framed::new(stream, RunnerCodec::default());
        let version = match framed.next().await {
            Some(Ok(ToRunner::Hello { version })) => version,
            Some(Ok(_)) => {
                let message = "the first frame must be hello".to_owned();
                framed.send(FromRunner::Refused { message: message.clone() }).await?;
                return Err(ProtocolError::Refused(message));
            }
            Some(Err(err)) => return Err(err),
            None => return Err(ProtocolError::Closed),
        };
        if version != PROTOCOL_VERSION {
            let err = ProtocolError::VersionMismatch { ours: version, theirs: PROTOCOL_VERSION };
            framed.send(FromRunner::Refused { message: err.to_string() }).await?;
            return Err(ProtocolError::VersionMismatch { ours: PROTOCOL_VERSION, theirs: version });
        }
        let taken = {
            let mut state = self.shared.lock();
            if state.ending { None } else { Some(Self::take_ownership(&mut state)) }
        };
        let Some((generation, executions, mut sent)) = taken else {
            let message = "the runner is ending (its owner was gone past the grace period) and \
                           kills its agents; connect again to start a new runner"
                .to_owned();
            framed.send(FromRunner::Refused { message: message.clone() }).await?;
            return Err(ProtocolError::Refused(message));
        };
        // A connection this one replaces notices and ends.
        self.shared.bump();
        tracing::info!(generation, executions = executions.len(), "runner owner connected");
        let mut changed = self.shared.changed.subscribe();
        let result = async {
            framed.send(FromRunner::Welcome { version: PROTOCOL_VERSION, executions }).await?;
            loop {
                changed.borrow_and_update();
                if self.shared.lock().owner != Some(generation) {
                    return Ok(()); // replaced by a newer connection
                }
                for frame in self.pending(&mut sent) {
                    framed.feed(frame).await?;
                }
                framed.flush().await?;
                tokio::select! {
                    frame = framed.next() => match frame {
                        Some(Ok(frame)) => {
                            if let Some(reply) = self.handle(frame, &mut sent) {
                                framed.send(reply).await?;
                            }
                        }
                        Some(Err(err)) => return Err(err),
                        None => return Ok(()),
                    },
                    _ = changed.changed() => {}
                }
            }
        }
        .await;
        let gone = {
            let mut state = self.shared.lock();
            let ours = state.owner == Some(generation);
            if ours {
                state.owner = None;
            }
            ours
        };
        if gone {
            if self.shared.lock().executions.is_empty() {
                // Nothing to keep for a server that comes back: end now.
                tracing::info!(generation, "runner owner gone and no agent runs; ending");
                self.shared.done.cancel();
            } else {
                tracing::info!(generation, grace = ?self.shared.config.grace, "runner owner gone");
                self.start_grace(generation);
            }
        }
        result
    }

    /// Makes a new connection the owner: its number, the executions to list in `welcome`
    /// and each one's send cursor.
    fn take_ownership(state: &mut State) -> (u64, Vec<ExecutionInfo>, HashMap<String, u64>) {
        state.generation += 1;
        let generation = state.generation;
        state.owner = Some(generation);
        let executions: Vec<ExecutionInfo> = state
            .executions
            .iter()
            .map(|(exec, e)| ExecutionInfo {
                exec: exec.clone(),
                pid: e.pid,
                acked: e.acked,
                exited: e.exited,
            })
            .collect();
        let sent: HashMap<String, u64> =
            state.executions.iter().map(|(exec, e)| (exec.clone(), e.acked)).collect();
        (generation, executions, sent)
    }

    /// Items not yet sent on this connection, as frames.
    fn pending(&self, sent: &mut HashMap<String, u64>) -> Vec<FromRunner> {
        let state = self.shared.lock();
        let mut frames = Vec::new();
        for (exec, execution) in &state.executions {
            let cursor = sent.entry(exec.clone()).or_insert(execution.acked);
            // Items are in sequence order: skip what this connection has sent without a scan.
            let start = execution.items.partition_point(|(seq, _)| *seq <= *cursor);
            for (seq, item) in execution.items.range(start..) {
                *cursor = *seq;
                frames.push(match item {
                    Item::Output(bytes) => FromRunner::Output {
                        exec: exec.clone(),
                        seq: *seq,
                        data: Data(bytes.clone()),
                    },
                    Item::Exited { exit, stderr } => FromRunner::Exited {
                        exec: exec.clone(),
                        seq: *seq,
                        exit: exit.clone(),
                        stderr: stderr.clone(),
                    },
                });
            }
        }
        frames
    }

    fn handle(&self, frame: ToRunner, sent: &mut HashMap<String, u64>) -> Option<FromRunner> {
        match frame {
            ToRunner::Hello { .. } => {
                Some(FromRunner::Error { message: "hello was already received".into() })
            }
            ToRunner::Spawn { exec, spec } => Some(self.spawn(exec, spec, sent)),
            ToRunner::Input { exec, data } => self.input(&exec, Input::Data(data.0)),
            ToRunner::CloseInput { exec } => self.input(&exec, Input::Close),
            ToRunner::Ack { exec, seq } => {
                self.ack(&exec, seq);
                None
            }
            ToRunner::Kill { exec, grace_ms } => {
                let process = self.shared.lock().executions.get(&exec).map(|e| e.process.clone());
                match process {
                    Some(process) => {
                        tokio::spawn(async move {
                            process.stop(Duration::from_millis(grace_ms)).await;
                        });
                        None
                    }
                    None => Some(unknown(&exec)),
                }
            }
            ToRunner::Forget { exec } => {
                let removed = self.shared.lock().executions.remove(&exec);
                sent.remove(&exec);
                match removed {
                    Some(execution) => {
                        // Dropping the last handle kills the group; stop first to reap it.
                        tokio::spawn(async move { execution.process.stop(Duration::ZERO).await });
                        None
                    }
                    None => Some(unknown(&exec)),
                }
            }
        }
    }

    fn input(&self, exec: &str, input: Input) -> Option<FromRunner> {
        let state = self.shared.lock();
        match state.executions.get(exec) {
            Some(execution) => {
                if let Input::Data(bytes) = &input {
                    let queued = execution.queued.load(Ordering::Acquire);
                    if queued + bytes.len() > INPUT_LIMIT {
                        return Some(FromRunner::Error {
                            message: format!(
                                "the stdin of {exec} is full ({queued} bytes queued, the bound \
                                 is {INPUT_LIMIT}): the agent does not read its input; input \
                                 dropped, send it again later"
                            ),
                        });
                    }
                    execution.queued.fetch_add(bytes.len(), Ordering::AcqRel);
                }
                // A closed channel means the agent's stdin is gone; its exit follows.
                let _ = execution.input.send(input);
                None
            }
            None => Some(unknown(exec)),
        }
    }

    fn ack(&self, exec: &str, seq: u64) {
        let mut state = self.shared.lock();
        let Some(execution) = state.executions.get_mut(exec) else { return };
        let mut finished = false;
        while execution.items.front().is_some_and(|(s, _)| *s <= seq) {
            if let Some((s, item)) = execution.items.pop_front() {
                execution.acked = s;
                match item {
                    Item::Output(bytes) => execution.buffered -= bytes.len(),
                    Item::Exited { .. } => finished = true,
                }
            }
        }
        execution.room.notify_one();
        if finished {
            state.executions.remove(exec);
        }
    }

    fn spawn(&self, exec: String, spec: SpawnSpec, sent: &mut HashMap<String, u64>) -> FromRunner {
        if self.shared.lock().executions.contains_key(&exec) {
            return FromRunner::SpawnFailed {
                exec,
                message: "an execution of that name runs already".into(),
            };
        }
        let mut process_spec = ProcessSpec::new(&spec.program, &spec.cwd).args(&spec.args);
        for (key, value) in &spec.env {
            process_spec = process_spec.env(key, value);
        }
        for secret in &spec.secrets {
            process_spec = process_spec.secret(secret);
        }
        let mut process = match crate::spawn(process_spec) {
            Ok(process) => process,
            Err(err) => return FromRunner::SpawnFailed { exec, message: err.to_string() },
        };
        let Some(stdio) = process.take_stdio() else {
            return FromRunner::SpawnFailed {
                exec,
                message: "the agent's stdio is not available".into(),
            };
        };
        let pid = process.pid();
        let process = Arc::new(process);
        let (input, inputs) = mpsc::unbounded_channel();
        let room = Arc::new(Notify::new());
        let queued = Arc::new(AtomicUsize::new(0));
        self.shared.lock().executions.insert(
            exec.clone(),
            Execution {
                pid,
                process: process.clone(),
                items: VecDeque::new(),
                buffered: 0,
                next_seq: 1,
                acked: 0,
                exited: false,
                input,
                queued: queued.clone(),
                room: room.clone(),
            },
        );
        sent.insert(exec.clone(), 0);
        tokio::spawn(write_input(stdio.stdin, inputs, queued));
        tokio::spawn(read_output(self.shared.clone(), exec.clone(), stdio.stdout, process, room));
        FromRunner::Spawned { exec, pid }
    }

    /// Kills every agent and ends the runner (a runner told to stop, or one that can never
    /// get an owner again).
    pub async fn shutdown(&self) {
        let processes: Vec<Arc<AgentProcess>> = {
            let mut state = self.shared.lock();
            state.ending = true;
            state.executions.values().map(|e| e.process.clone()).collect()
        };
        futures::future::join_all(processes.iter().map(|p| p.stop(KILL_GRACE))).await;
        self.shared.lock().executions.clear();
        self.shared.done.cancel();
    }

    /// Whether an owner is connected.
    pub fn has_owner(&self) -> bool {
        self.shared.lock().owner.is_some()
    }

    /// After `grace` without an owner (and no newer connection since `generation`), kills
    /// every agent and ends the runner.
    fn start_grace(&self, generation: u64) {
        let shared = self.shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep(shared.config.grace).await;
            let processes: Vec<Arc<AgentProcess>> = {
                let mut state = shared.lock();
                if state.owner.is_some() || state.generation != generation {
                    return;
                }
                // From here on a new server is refused: it would get agents killed below.
                state.ending = true;
                state.executions.values().map(|e| e.process.clone()).collect()
            };
            tracing::warn!(
                agents = processes.len(),
                "runner owner gone past the grace period; killing its agents"
            );
            futures::future::join_all(processes.iter().map(|p| p.stop(KILL_GRACE))).await;
            shared.lock().executions.clear();
            shared.done.cancel();
        });
    }
}

fn unknown(exec: &str) -> FromRunner {
    FromRunner::Error { message: format!("no execution named {exec}") }
}

async fn write_input(
    mut stdin: tokio::process::ChildStdin,
    mut inputs: mpsc::UnboundedReceiver<Input>,
    queued: Arc<AtomicUsize>,
) {
    while let Some(input) = inputs.recv().await {
        match input {
            Input::Data(bytes) => {
                let written = stdin.write_all(&bytes).await.is_ok() && stdin.flush().await.is_ok();
                queued.fetch_sub(bytes.len(), Ordering::AcqRel);
                if !written {
                    return;
                }
            }
            Input::Close => return,
        }
    }
}

/// Reads the agent's stdout into the execution's buffer, waiting for room past the limit,
/// then records its exit as the last item.
async fn read_output(
    shared: Arc<Shared>,
    exec: String,
    mut stdout: tokio::process::ChildStdout,
    process: Arc<AgentProcess>,
    room: Arc<Notify>,
) {
    let limit = shared.config.buffer_limit.max(1);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        loop {
            let full = match shared.lock().executions.get(&exec) {
                Some(execution) => execution.buffered >= limit,
                None => return, // forgotten
            };
            if !full {
                break;
            }
            room.notified().await;
        }
        let n = match stdout.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut state = shared.lock();
        let Some(execution) = state.executions.get_mut(&exec) else { return };
        let seq = execution.next_seq;
        execution.next_seq += 1;
        execution.buffered += n;
        execution.items.push_back((seq, Item::Output(Bytes::copy_from_slice(&chunk[..n]))));
        drop(state);
        shared.bump();
    }
    let exit = process.wait().await;
    let _ = tokio::time::timeout(Duration::from_millis(500), process.stderr_finished()).await;
    let stderr = process.stderr_tail();
    let mut state = shared.lock();
    let Some(execution) = state.executions.get_mut(&exec) else { return };
    let seq = execution.next_seq;
    execution.next_seq += 1;
    execution.exited = true;
    execution.items.push_back((seq, Item::Exited { exit: ExitReport::from(&exit), stderr }));
    drop(state);
    shared.bump();
}
