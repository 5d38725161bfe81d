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
//! - Input items of an execution (stdin bytes, then the close) are taken in sequence order,
//!   each once: an item taken already (a resend after a drop) is ignored. Taken items are
//!   acknowledged while the stdin queue is within `input_limit`; past it the acknowledgement
//!   waits until the agent has read enough, so a server that keeps at most `input_limit`
//!   unacknowledged bytes waits too (the queue stays bounded; nothing is refused or lost).
//! - A newer connection replaces the older one; there is one owner at a time.
//! - An execution spawned with `scrollback` keeps that many bytes of acknowledged output; a
//!   new owner gets them (one `scrollback` frame) right after `welcome`, before the items.
//! - An execution spawned with `pty` runs in a pseudo-terminal ([`crate::pty`]): input is
//!   typed into it, its output is what the terminal shows, a kill ends its whole session.
//! - With no owner for `grace`, every agent is killed (process group) and the runner ends;
//!   an owner that leaves while no agent runs ends it at once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

use super::proto::{
    Data, ExecutionInfo, ExitReport, FromRunner, KEYS_KEPT, PROTOCOL_VERSION, ProtocolError,
    RunnerCodec, SpawnSpec, ToRunner,
};
use crate::pty::{PtyShell, Ring, ShellSpec};
use crate::terminal::TerminalExit;
use crate::{AgentProcess, ProcessSpec};

/// Default owner-gone grace period.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(600);
/// Default bound of unacknowledged output per execution.
pub const DEFAULT_BUFFER_LIMIT: usize = 16 << 20;
/// Largest chunk read from an agent's stdout at once.
const CHUNK: usize = 64 * 1024;
/// Default bound of input bytes queued for an agent's stdin and not yet written (an agent
/// that does not read its input): past it taken input is not acknowledged until the agent
/// reads, and the server (which keeps at most this many unacknowledged bytes) waits.
pub const INPUT_LIMIT: usize = 16 << 20;
/// A queue past this many times `input_limit` refuses input with an error: only a server
/// that does not wait for acknowledgements gets there (a waiting one stays within three
/// times, counting what a restarted server sends on top of what its predecessor left).
const INPUT_HARD_FACTOR: usize = 4;
/// How long a killed agent gets between TERM and KILL when the owner is gone.
const KILL_GRACE: Duration = Duration::from_secs(2);

/// How a runner behaves.
#[derive(Debug, Clone, Copy)]
pub struct RunnerConfig {
    pub grace: Duration,
    pub buffer_limit: usize,
    /// Queued stdin bytes past which taken input is not acknowledged ([`INPUT_LIMIT`]).
    pub input_limit: usize,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self { grace: DEFAULT_GRACE, buffer_limit: DEFAULT_BUFFER_LIMIT, input_limit: INPUT_LIMIT }
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

/// What runs an execution: an agent with pipes, or a shell in a pseudo-terminal.
#[derive(Clone)]
enum Proc {
    Pipe(Arc<AgentProcess>),
    Pty(Arc<PtyShell>),
}

impl Proc {
    /// TERM to the agent's group, `grace`, then KILL; a terminal's whole session is killed
    /// at once. Resolves once none of it runs.
    async fn stop(&self, grace: Duration) {
        match self {
            Proc::Pipe(process) => {
                process.stop(grace).await;
            }
            Proc::Pty(shell) => shell.kill().await,
        }
    }
}

/// Where an execution's input goes.
enum Stdin {
    Pipe(tokio::process::ChildStdin),
    Pty(Arc<PtyShell>),
}

impl Stdin {
    /// Whether `bytes` were written (false: the input is gone).
    async fn write(&mut self, bytes: &[u8]) -> bool {
        match self {
            Stdin::Pipe(stdin) => {
                stdin.write_all(bytes).await.is_ok() && stdin.flush().await.is_ok()
            }
            Stdin::Pty(shell) => shell.write(bytes.to_vec()).await.is_ok(),
        }
    }
}

struct Execution {
    pid: i32,
    process: Proc,
    /// Acknowledged output kept for a later owner (spawned with `scrollback`).
    scrollback: Option<Ring>,
    /// Unacknowledged items, in sequence order.
    items: VecDeque<(u64, Item)>,
    /// Output bytes among `items`.
    buffered: usize,
    next_seq: u64,
    acked: u64,
    exited: bool,
    input: mpsc::UnboundedSender<Input>,
    /// The last input item taken into `input`.
    input_taken: u64,
    /// The last input item acknowledged: `input_taken` whenever `queued` is within the
    /// bound.
    input_acked: u64,
    /// Keys of the input items taken, newest last (at most `KEYS_KEPT`).
    keys: VecDeque<String>,
    /// Bytes in `input` not yet written to the agent's stdin.
    queued: usize,
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

    /// Input bytes taken for an execution's stdin and not yet written to it (tests and
    /// diagnostics).
    pub fn queued_input(&self, exec: &str) -> Option<usize> {
        self.shared.lock().executions.get(exec).map(|e| e.queued)
    }

    /// The last input item taken and the last acknowledged of an execution (tests and
    /// diagnostics).
    pub fn input_numbers(&self, exec: &str) -> Option<(u64, u64)> {
        self.shared.lock().executions.get(exec).map(|e| (e.input_taken, e.input_acked))
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
        let Some((generation, executions, kept, mut sent)) = taken else {
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
            framed.feed(FromRunner::Welcome { version: PROTOCOL_VERSION, executions }).await?;
            for (exec, data) in kept {
                framed.feed(FromRunner::Scrollback { exec, data: Data(data) }).await?;
            }
            framed.flush().await?;
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
                            if let Some(reply) = self.handle(frame, generation, &mut sent) {
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

    /// Makes a new connection the owner: its number, the executions to list in `welcome`,
    /// their kept scrollback and each one's send cursor.
    fn take_ownership(state: &mut State) -> Ownership {
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
                input_taken: e.input_taken,
                input_acked: e.input_acked,
                keys: e.keys.iter().cloned().collect(),
            })
            .collect();
        let kept: Vec<(String, Bytes)> = state
            .executions
            .iter()
            .filter_map(|(exec, e)| {
                let data = e.scrollback.as_ref()?.read_since(0, usize::MAX).data;
                (!data.is_empty()).then(|| (exec.clone(), Bytes::from(data)))
            })
            .collect();
        let sent: HashMap<String, Cursor> =
            state.executions.iter().map(|(exec, e)| (exec.clone(), Cursor::of(e))).collect();
        (generation, executions, kept, sent)
    }

    /// Items and input acknowledgements not yet sent on this connection, as frames.
    fn pending(&self, sent: &mut HashMap<String, Cursor>) -> Vec<FromRunner> {
        let state = self.shared.lock();
        let mut frames = Vec::new();
        for (exec, execution) in &state.executions {
            let cursor = sent.entry(exec.clone()).or_insert_with(|| Cursor::of(execution));
            if execution.input_acked > cursor.input_acked {
                // One acknowledgement covers every item taken since the last one.
                cursor.input_acked = execution.input_acked;
                frames.push(FromRunner::InputAck { exec: exec.clone(), seq: cursor.input_acked });
            }
            // Items are in sequence order: skip what this connection has sent without a scan.
            let start = execution.items.partition_point(|(seq, _)| *seq <= cursor.output);
            for (seq, item) in execution.items.range(start..) {
                cursor.output = *seq;
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

    fn handle(
        &self,
        frame: ToRunner,
        generation: u64,
        sent: &mut HashMap<String, Cursor>,
    ) -> Option<FromRunner> {
        match frame {
            ToRunner::Hello { .. } => {
                Some(FromRunner::Error { message: "hello was already received".into() })
            }
            ToRunner::Spawn { exec, spec } => self.spawn(exec, spec, generation, sent),
            ToRunner::Input { exec, seq, data, keys } => {
                self.input(&exec, generation, seq, Input::Data(data.0), keys)
            }
            ToRunner::CloseInput { exec, seq } => {
                self.input(&exec, generation, seq, Input::Close, vec![])
            }
            ToRunner::Ack { exec, seq } => {
                self.ack(&exec, seq);
                None
            }
            ToRunner::Kill { exec, grace_ms } => {
                let process = self.shared.lock().executions.get(&exec).map(|e| e.process.clone());
                match process {
                    Some(process) => {
                        #[expect(
                            clippy::disallowed_methods,
                            reason = "a kill a connection asked for; ends when the group is gone"
                        )]
                        tokio::spawn(async move {
                            process.stop(Duration::from_millis(grace_ms)).await;
                        });
                        None
                    }
                    None => Some(unknown(&exec)),
                }
            }
            ToRunner::Resize { exec, cols, rows } => {
                let process = self.shared.lock().executions.get(&exec).map(|e| e.process.clone());
                match process {
                    Some(Proc::Pty(shell)) => {
                        #[expect(
                            clippy::disallowed_methods,
                            reason = "queues one resize behind the terminal's input; ends then"
                        )]
                        tokio::spawn(async move {
                            let _ = shell.resize(cols.max(1), rows.max(1)).await;
                        });
                        None
                    }
                    Some(Proc::Pipe(_)) => Some(FromRunner::Error {
                        message: format!("{exec} has no terminal to resize"),
                    }),
                    None => Some(unknown(&exec)),
                }
            }
            ToRunner::Forget { exec } => {
                let removed = self.shared.lock().executions.remove(&exec);
                sent.remove(&exec);
                match removed {
                    Some(execution) => {
                        // Dropping the last handle kills the group; stop first to reap it.
                        #[expect(
                            clippy::disallowed_methods,
                            reason = "reaps a forgotten execution's group; ends when it is gone"
                        )]
                        tokio::spawn(async move { execution.process.stop(Duration::ZERO).await });
                        None
                    }
                    None => Some(unknown(&exec)),
                }
            }
        }
    }

    /// Takes input item `seq` into the execution's stdin queue, unless it was taken already
    /// or connection `generation` was replaced (checked under the lock that hands the
    /// ownership over: the new owner numbers its input after what `welcome` listed, so a late
    /// item of the old one must not take a number first).
    fn input(
        &self,
        exec: &str,
        generation: u64,
        seq: u64,
        input: Input,
        keys: Vec<String>,
    ) -> Option<FromRunner> {
        let limit = self.shared.config.input_limit;
        let mut state = self.shared.lock();
        if state.owner != Some(generation) {
            return None;
        }
        let Some(execution) = state.executions.get_mut(exec) else {
            return Some(unknown(exec));
        };
        if seq <= execution.input_taken {
            return None; // a resend after a drop: taken once already
        }
        let taken = execution.input_taken;
        if seq != taken + 1 {
            return Some(FromRunner::Error {
                message: format!(
                    "input item {seq} of {exec} does not follow item {taken}: send the items \
                     after {taken} again, in order"
                ),
            });
        }
        let len = match &input {
            Input::Data(bytes) => bytes.len(),
            Input::Close => 0,
        };
        let queued = execution.queued;
        let hard = limit.saturating_mul(INPUT_HARD_FACTOR);
        if len > 0 && queued + len > hard {
            return Some(FromRunner::Error {
                message: format!(
                    "the stdin of {exec} is full ({queued} bytes queued, the bound is {hard}): \
                     the agent does not read its input; input item {seq} not taken, wait for \
                     input_ack before sending more"
                ),
            });
        }
        execution.input_taken = seq;
        for key in keys {
            if execution.keys.len() == KEYS_KEPT {
                execution.keys.pop_front();
            }
            execution.keys.push_back(key);
        }
        // A closed channel means the agent's stdin is gone (its exit follows): nothing queues.
        if execution.input.send(input).is_ok() {
            execution.queued += len;
        }
        if execution.queued <= limit {
            execution.input_acked = seq;
        }
        None
    }

    fn ack(&self, exec: &str, seq: u64) {
        let mut state = self.shared.lock();
        let Some(execution) = state.executions.get_mut(exec) else { return };
        let mut finished = false;
        while execution.items.front().is_some_and(|(s, _)| *s <= seq) {
            if let Some((s, item)) = execution.items.pop_front() {
                execution.acked = s;
                match item {
                    Item::Output(bytes) => {
                        execution.buffered -= bytes.len();
                        if let Some(kept) = &mut execution.scrollback {
                            kept.push(&bytes);
                        }
                    }
                    Item::Exited { .. } => finished = true,
                }
            }
        }
        execution.room.notify_one();
        if finished {
            state.executions.remove(exec);
        }
    }

    /// Starts an execution for connection `generation`; nothing when that connection is
    /// not the owner any more (a late frame of a replaced connection: the new owner sends
    /// the spawn again if it still wants it).
    fn spawn(
        &self,
        exec: String,
        spec: SpawnSpec,
        generation: u64,
        sent: &mut HashMap<String, Cursor>,
    ) -> Option<FromRunner> {
        {
            let state = self.shared.lock();
            if state.owner != Some(generation) {
                return None;
            }
            if state.executions.contains_key(&exec) {
                let message = "an execution of that name runs already".into();
                return Some(FromRunner::SpawnFailed { exec, message });
            }
        }
        let scrollback = (spec.scrollback > 0).then(|| Ring::new(spec.scrollback));
        let started = match spec.pty {
            Some(_) => start_pty(&spec),
            None => start_pipe(&spec),
        };
        let (pid, process, stdin, output) = match started {
            Ok(started) => started,
            Err(message) => return Some(FromRunner::SpawnFailed { exec, message }),
        };
        let (input, inputs) = mpsc::unbounded_channel();
        let room = Arc::new(Notify::new());
        let mut state = self.shared.lock();
        if state.owner != Some(generation) || state.executions.contains_key(&exec) {
            // Replaced (or raced by the same name) while it started: nobody will follow it.
            drop(state);
            #[expect(
                clippy::disallowed_methods,
                reason = "stops an agent nobody will follow; ends when its group is gone"
            )]
            tokio::spawn(async move { process.stop(KILL_GRACE).await });
            return None;
        }
        state.executions.insert(
            exec.clone(),
            Execution {
                pid,
                process: process.clone(),
                scrollback,
                items: VecDeque::new(),
                buffered: 0,
                next_seq: 1,
                acked: 0,
                exited: false,
                input,
                input_taken: 0,
                input_acked: 0,
                keys: VecDeque::new(),
                queued: 0,
                room: room.clone(),
            },
        );
        drop(state);
        sent.insert(exec.clone(), Cursor::default());
        #[expect(
            clippy::disallowed_methods,
            reason = "an execution's input writer; ends when its queue closes with the execution"
        )]
        tokio::spawn(write_input(self.shared.clone(), exec.clone(), stdin, inputs));
        #[expect(
            clippy::disallowed_methods,
            reason = "an execution's output reader; ends at the end of its output"
        )]
        tokio::spawn(read_output(self.shared.clone(), exec.clone(), output, room));
        Some(FromRunner::Spawned { exec, pid })
    }

    /// Kills every agent and ends the runner (a runner told to stop, or one that can never
    /// get an owner again).
    pub async fn shutdown(&self) {
        let processes: Vec<Proc> = {
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
        #[expect(
            clippy::disallowed_methods,
            reason = "the grace timer; ends after the grace, at once if an owner came back"
        )]
        tokio::spawn(async move {
            tokio::time::sleep(shared.config.grace).await;
            let processes: Vec<Proc> = {
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

/// A new owner's number, the executions `welcome` lists, their kept scrollback (sent right
/// after it) and each one's send cursor.
type Ownership = (u64, Vec<ExecutionInfo>, Vec<(String, Bytes)>, HashMap<String, Cursor>);

fn unknown(exec: &str) -> FromRunner {
    FromRunner::Error { message: format!("no execution named {exec}") }
}

/// What one connection has sent of an execution: output items and input acknowledgements.
#[derive(Clone, Copy, Default)]
struct Cursor {
    output: u64,
    input_acked: u64,
}

impl Cursor {
    /// A new connection starts where the execution's acknowledgements stand (what `welcome`
    /// lists).
    fn of(execution: &Execution) -> Self {
        Self { output: execution.acked, input_acked: execution.input_acked }
    }
}

/// Writes the queued input to the agent's stdin; what it wrote leaves the queue, and taken
/// input held back past the bound is acknowledged once the queue is within it again.
async fn write_input(
    shared: Arc<Shared>,
    exec: String,
    mut stdin: Stdin,
    mut inputs: mpsc::UnboundedReceiver<Input>,
) {
    while let Some(input) = inputs.recv().await {
        let Input::Data(bytes) = input else { break };
        let written = stdin.write(&bytes).await;
        let acked = {
            let mut state = shared.lock();
            let Some(execution) = state.executions.get_mut(&exec) else { return };
            execution.queued -= bytes.len();
            if !written {
                // The agent's stdin is gone (its exit follows): the rest of the queue is
                // dropped, and input from now on is taken and dropped (closed under the lock,
                // so no later item counts as queued).
                inputs.close();
                execution.queued = 0;
            }
            let behind = execution.input_acked < execution.input_taken;
            if behind && execution.queued <= shared.config.input_limit {
                execution.input_acked = execution.input_taken;
                true
            } else {
                false
            }
        };
        if acked {
            shared.bump();
        }
        if !written {
            return;
        }
    }
}

/// What an execution's output is read from.
enum Output {
    Pipe(tokio::process::ChildStdout, Arc<AgentProcess>),
    Pty(Arc<PtyShell>),
}

/// Starts an agent with pipes.
fn start_pipe(spec: &SpawnSpec) -> Result<(i32, Proc, Stdin, Output), String> {
    let mut process_spec = ProcessSpec::new(&spec.program, &spec.cwd).args(&spec.args);
    for (key, value) in &spec.env {
        process_spec = process_spec.env(key, value);
    }
    for secret in &spec.secrets {
        process_spec = process_spec.secret(secret);
    }
    let mut process = crate::spawn(process_spec).map_err(|err| err.to_string())?;
    let stdio = process.take_stdio().ok_or("the agent's stdio is not available")?;
    let pid = process.pid();
    let process = Arc::new(process);
    let output = Output::Pipe(stdio.stdout, process.clone());
    Ok((pid, Proc::Pipe(process), Stdin::Pipe(stdio.stdin), output))
}

/// Starts a program in a pseudo-terminal of the spec's size.
fn start_pty(spec: &SpawnSpec) -> Result<(i32, Proc, Stdin, Output), String> {
    let size = spec.pty.unwrap_or(super::proto::PtySize { cols: 80, rows: 24 });
    let cwd = crate::confine::Root::open(&spec.cwd)
        .map_err(|e| format!("the directory {} is not available: {e}", spec.cwd.display()))?;
    let shell_spec = ShellSpec {
        program: spec.program.clone().into(),
        args: spec.args.iter().map(Into::into).collect(),
        env: spec.env.clone(),
        cols: size.cols,
        rows: size.rows,
    };
    let shell = Arc::new(crate::pty::spawn_shell(&shell_spec, &cwd).map_err(|e| e.to_string())?);
    let pid = shell.pid();
    Ok((pid, Proc::Pty(shell.clone()), Stdin::Pty(shell.clone()), Output::Pty(shell)))
}

/// Waits until the execution's unacknowledged output is within `limit`; false once it was
/// forgotten.
async fn room_for_more(shared: &Shared, exec: &str, limit: usize, room: &Notify) -> bool {
    loop {
        let full = match shared.lock().executions.get(exec) {
            Some(execution) => execution.buffered >= limit,
            None => return false,
        };
        if !full {
            return true;
        }
        room.notified().await;
    }
}

/// Adds an item to the execution; false once it was forgotten.
fn push_item(shared: &Shared, exec: &str, item: Item) -> bool {
    let mut state = shared.lock();
    let Some(execution) = state.executions.get_mut(exec) else { return false };
    let seq = execution.next_seq;
    execution.next_seq += 1;
    match &item {
        Item::Output(bytes) => execution.buffered += bytes.len(),
        Item::Exited { .. } => execution.exited = true,
    }
    execution.items.push_back((seq, item));
    drop(state);
    shared.bump();
    true
}

/// Reads the execution's output into its buffer, waiting for room past the limit, then
/// records its exit as the last item.
async fn read_output(shared: Arc<Shared>, exec: String, output: Output, room: Arc<Notify>) {
    let limit = shared.config.buffer_limit.max(1);
    let exit = match output {
        Output::Pipe(mut stdout, process) => {
            let mut chunk = vec![0u8; CHUNK];
            loop {
                if !room_for_more(&shared, &exec, limit, &room).await {
                    return;
                }
                let n = match stdout.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let bytes = Bytes::copy_from_slice(&chunk[..n]);
                if !push_item(&shared, &exec, Item::Output(bytes)) {
                    return;
                }
            }
            let exit = process.wait().await;
            let stderr_done = process.stderr_finished();
            let _ = tokio::time::timeout(Duration::from_millis(500), stderr_done).await;
            Item::Exited { exit: ExitReport::from(&exit), stderr: process.stderr_tail() }
        }
        Output::Pty(shell) => read_terminal(&shared, &exec, &shell, limit, &room).await,
    };
    push_item(&shared, &exec, exit);
}

/// Follows a terminal's output (its own ring: past it while the owner was away, what is
/// left of it) until its exit, which it answers as the last item.
async fn read_terminal(
    shared: &Shared,
    exec: &str,
    shell: &PtyShell,
    limit: usize,
    room: &Notify,
) -> Item {
    let mut changes = shell.changes();
    let mut offset = 0;
    loop {
        if !room_for_more(shared, exec, limit, room).await {
            let exit = ExitReport::Unknown("forgotten".into());
            return Item::Exited { exit, stderr: String::new() };
        }
        changes.borrow_and_update();
        let chunk = shell.read_since(offset);
        if !chunk.data.is_empty() {
            offset = chunk.next;
            push_item(shared, exec, Item::Output(Bytes::from(chunk.data)));
            continue;
        }
        if let Some(exit) = shell.exit() {
            return Item::Exited { exit: terminal_exit(&exit), stderr: String::new() };
        }
        if changes.changed().await.is_err() {
            let exit = ExitReport::Unknown("the terminal's reader stopped".into());
            return Item::Exited { exit, stderr: String::new() };
        }
    }
}

/// A terminal's exit on the wire.
fn terminal_exit(exit: &TerminalExit) -> ExitReport {
    let signal = |name: &str| name.parse::<nix::sys::signal::Signal>().ok().map(|s| s as i32);
    match (exit.exit_code, exit.signal.as_deref().and_then(signal)) {
        (Some(code), _) => ExitReport::Code(code),
        (None, Some(signal)) => ExitReport::Signal(signal),
        (None, None) => ExitReport::Unknown("the terminal's exit status is not known".into()),
    }
}
