//! The server's side of a runner: a [`RunnerClient`] is a handle to the task that owns the
//! connection ([`super::link`]), which opens it again after a drop and takes every execution
//! over on the new one. An execution started through it is seen as a byte pipe (the agent's
//! stdout and stdin) and a control (pid, stop, wait), like a local child process, so the ACP
//! layer does not care where the bytes come from; its pipes go on across reconnects.
//!
//! Input to an agent is exactly-once too: the bytes written to an execution's stdin pipe
//! become numbered input items ([`Inputs`]) that stay with the server until the runner
//! acknowledges them, at most `input_limit` unacknowledged bytes (past it the writer waits);
//! a new connection resends every unacknowledged item the runner has not taken, in order,
//! before any new one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::sync::{mpsc, oneshot, watch};

use super::host::INPUT_LIMIT;
use super::ledger::{AckPolicy, Acks, InputKeys, Inputs, PIPE};
use super::link::{
    Backoff, Command, Event, Follower, Handshaken, LOST, Link, LinkState, NotReopened, OpenError,
    Opened, RunnerStream, SpawnError, Transport, handshake,
};
use super::proto::{ExecutionInfo, ProtocolError, SpawnSpec, ToRunner};
use crate::ExitInfo;

/// How long past its grace a stopped execution's exit is waited for (through reconnects).
const STOP_MARGIN: Duration = Duration::from_secs(15);

/// How long a spawn waits for the runner's answer, through reconnects.
const SPAWN_WAIT: Duration = Duration::from_secs(60);

/// A connection to a runner, after a successful handshake: a handle to the task that owns
/// it. Clones share it; it ends when it is closed, when it is gone for good, or when the last
/// clone is dropped (closed cleanly then, in its own task: the last acknowledgements still
/// reach the runner; executions still followed end as lost).
#[derive(Clone)]
pub struct RunnerClient {
    commands: mpsc::UnboundedSender<Command>,
    /// Frames for the connection in use (acknowledgements and input items go here).
    out: mpsc::UnboundedSender<ToRunner>,
    state: watch::Receiver<LinkState>,
    parked: Arc<AtomicUsize>,
    /// Unacknowledged input bytes an execution started or attached from here may hold.
    input_limit: usize,
    _closer: Arc<Closer>,
}

/// Closes the connection when the last client handle goes.
struct Closer(mpsc::UnboundedSender<Command>);

impl Drop for Closer {
    fn drop(&mut self) {
        let (done, _) = oneshot::channel();
        let _ = self.0.send(Command::Close(done));
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
#[derive(Clone)]
pub struct RemoteControl {
    exec: String,
    pid: i32,
    commands: mpsc::UnboundedSender<Command>,
    exit: watch::Receiver<Option<(ExitInfo, String)>>,
    /// The execution's input queue (its stdin task lives as long as a handle does).
    inputs: Inputs,
}

impl RunnerClient {
    /// Handshakes on `stream` and starts the connection's task. Returns the client and the
    /// executions the runner already holds (from an earlier server). The connection is not
    /// opened again: once it drops, the client is gone ([`Self::open`] reconnects).
    pub async fn connect<S: RunnerStream>(
        stream: S,
    ) -> Result<(Self, Vec<ExecutionInfo>), ProtocolError> {
        let connection = handshake(stream).await?;
        let executions = connection.executions.clone();
        Ok((Self::connected(connection), executions))
    }

    /// A client on a connection that was handshaken already, not opened again after a drop.
    pub fn connected(connection: Handshaken) -> Self {
        let once = Backoff { first: Duration::ZERO, max: Duration::ZERO, attempts: 1 };
        Self::start(Box::new(NotReopened), once, Opened { connection, guard: None })
    }

    /// Opens a connection through `transport` and keeps it: after a drop it is opened again
    /// with `backoff` and every execution followed here is taken over on the new one. Returns
    /// the client and the executions the runner already held (the caller takes them over
    /// with [`Self::attach_with`] or forgets them; a later connection forgets every one that
    /// nobody follows).
    pub async fn open(
        mut transport: impl Transport,
        backoff: Backoff,
    ) -> Result<(Self, Vec<ExecutionInfo>), OpenError> {
        let opened = transport.open().await?;
        let executions = opened.connection.executions.clone();
        Ok((Self::start(Box::new(transport), backoff, opened), executions))
    }

    fn start(transport: Box<dyn Transport>, backoff: Backoff, first: Opened) -> Self {
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let (out, outbox) = mpsc::unbounded_channel();
        let (state_tx, state) = watch::channel(LinkState::Live { number: 1 });
        let parked = Arc::new(AtomicUsize::new(0));
        let link = Link {
            transport,
            backoff,
            commands: commands_rx,
            outbox,
            out: out.clone(),
            state: state_tx,
            parked: parked.clone(),
        };
        // Not aborted with the handles: the last one closes the link, which ends the task
        // once the connection is closed cleanly.
        #[expect(
            clippy::disallowed_methods,
            reason = "the link ends once the last handle closes it and the connection closes cleanly"
        )]
        tokio::spawn(link.run(first));
        let closer = Arc::new(Closer(commands.clone()));
        Self { commands, out, state, parked, input_limit: INPUT_LIMIT, _closer: closer }
    }

    /// The same connection, whose executions from now on hold at most `limit`
    /// unacknowledged input bytes (default [`INPUT_LIMIT`]; tests use small ones).
    pub fn with_input_limit(mut self, limit: usize) -> Self {
        self.input_limit = limit;
        self
    }

    fn command(&self, command: Command) {
        let _ = self.commands.send(command);
    }

    /// Closes the connection (the runner keeps its agents for its grace period).
    pub fn close(&self) {
        let (done, _) = oneshot::channel();
        self.command(Command::Close(done));
    }

    /// Closes the connection and resolves once everything sent before (the last
    /// acknowledgements) is written and the transport closed cleanly, or it failed.
    pub async fn finish(&self) {
        let (done, closed) = oneshot::channel();
        self.command(Command::Close(done));
        let _ = closed.await;
    }

    /// Whether the connection is gone for good (closed, or reopening it failed).
    pub fn is_closed(&self) -> bool {
        matches!(&*self.state.borrow(), LinkState::Gone(_))
    }

    /// Resolves when the connection is gone for good.
    pub async fn closed(&self) {
        let mut state = self.state.clone();
        let _ = state.wait_for(|s| matches!(s, LinkState::Gone(_))).await;
    }

    /// The connection's state, to watch (tests and diagnostics).
    pub fn state(&self) -> watch::Receiver<LinkState> {
        self.state.clone()
    }

    /// How many connections were made so far (0 while reconnecting or gone).
    pub fn connections(&self) -> u64 {
        match &*self.state.borrow() {
            LinkState::Live { number } => *number,
            LinkState::Reconnecting | LinkState::Gone(_) => 0,
        }
    }

    /// Whether the connection is live now or becomes live within `wait`.
    pub async fn live_within(&self, wait: Duration) -> bool {
        let mut state = self.state.clone();
        let live = state.wait_for(|s| !matches!(s, LinkState::Reconnecting));
        matches!(
            tokio::time::timeout(wait, live).await,
            Ok(Ok(state)) if matches!(*state, LinkState::Live { .. })
        )
    }

    /// Ends the current transport as if the network went away (tests): the link reopens.
    pub fn drop_transport(&self) {
        self.command(Command::DropTransport);
    }

    /// Kills an execution the runner holds and forgets it (one this server does not take
    /// over).
    pub fn forget(&self, exec: &str) {
        self.command(Command::Forget { exec: exec.to_owned() });
    }

    /// Events held for executions nobody attached yet (tests and diagnostics).
    pub fn parked(&self) -> usize {
        self.parked.load(Ordering::Relaxed)
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
        // What the runner acknowledged is forgotten at once; the rest is sent again by the
        // connection's task, in order with what it sends.
        inputs.acked(execution.input_acked);
        let (stdout, control, acks) = self.take_over(execution, policy, committed, inputs.clone());
        ResumedExecution { stdout, control, acks }
    }

    fn take_over(
        &self,
        execution: &ExecutionInfo,
        policy: AckPolicy,
        committed: u64,
        inputs: Inputs,
    ) -> (DuplexStream, RemoteControl, Acks) {
        let (events_tx, events) = mpsc::unbounded_channel();
        let acks = Acks::new(&execution.exec, self.out.clone(), execution.acked.max(committed));
        let follower = Follower {
            events: events_tx,
            inputs: inputs.clone(),
            acks: acks.clone(),
            spawn: None,
            stopping: None,
            sent: execution.input_taken,
            scrollback: true,
        };
        self.command(Command::Attach { info: execution.clone(), committed, follower });
        let (stdout, control) =
            self.follow(&execution.exec, execution.pid, policy, events, inputs, acks.clone());
        (stdout, control, acks)
    }

    /// Starts an execution named `exec` (unique among the runner's live ones).
    pub async fn spawn(&self, exec: &str, spec: SpawnSpec) -> Result<RemoteExecution, SpawnError> {
        self.spawn_with(exec, spec, AckPolicy::OnDelivery).await
    }

    /// [`Self::spawn`] with a choice of when items are acknowledged. While the connection is
    /// being opened again the spawn waits for it (and is sent again when the runner did not
    /// get it), at most 60 s in all. A spawn given up or dropped before its answer is
    /// forgotten (killed) when the answer comes.
    pub async fn spawn_with(
        &self,
        exec: &str,
        spec: SpawnSpec,
        policy: AckPolicy,
    ) -> Result<RemoteExecution, SpawnError> {
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let inputs = Inputs::new(exec, self.out.clone(), 0, self.input_limit);
        let acks = Acks::new(exec, self.out.clone(), 0);
        let follower = Follower {
            events: events_tx,
            inputs: inputs.clone(),
            acks: acks.clone(),
            spawn: Some(spec),
            stopping: None,
            sent: 0,
            scrollback: false,
        };
        self.command(Command::Spawn { exec: exec.to_owned(), follower });
        let Ok(answer) = tokio::time::timeout(SPAWN_WAIT, events.recv()).await else {
            // Given up: when the answer comes, nobody takes it and the execution is forgotten.
            return Err(SpawnError::Lost(format!(
                "the runner did not start it within {} s (its connection may be down); try again",
                SPAWN_WAIT.as_secs()
            )));
        };
        let pid = match answer {
            Some(Event::Spawned(pid)) => pid,
            Some(Event::SpawnFailed(failed)) => return Err(failed),
            Some(Event::Lost(reason)) => return Err(SpawnError::Lost(reason)),
            Some(Event::Output(..) | Event::Scrollback(_) | Event::Exited(..)) => {
                let message = "the runner sent output before the agent started".to_owned();
                return Err(SpawnError::Failed(message));
            }
            None => return Err(SpawnError::Lost(LOST.into())),
        };
        let (stdin, keys) = inputs.start_stdin(self.input_limit);
        let (stdout, control) = self.follow(exec, pid, policy, events, inputs, acks.clone());
        Ok(RemoteExecution { stdout, stdin, keys, control, acks })
    }

    /// Runs `work` for as long as the link lives: it is ended with the link (closed, or gone
    /// for good). For what serves one of its executions and must not outlive it (a relay).
    pub fn run_with_link(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        self.command(Command::Run(Box::pin(work)));
    }

    /// The stdout pipe and control of an execution whose events arrive on `events`; the task
    /// that writes them into the pipe is run by the connection's task.
    fn follow(
        &self,
        exec: &str,
        pid: i32,
        policy: AckPolicy,
        events: mpsc::UnboundedReceiver<Event>,
        inputs: Inputs,
        acks: Acks,
    ) -> (DuplexStream, RemoteControl) {
        let (stdout, stdout_tx) = tokio::io::duplex(PIPE);
        let (exit_tx, exit) = watch::channel(None);
        self.command(Command::Run(Box::pin(deliver(events, stdout_tx, acks, policy, exit_tx))));
        let control = RemoteControl {
            exec: exec.to_owned(),
            pid,
            commands: self.commands.clone(),
            exit,
            inputs,
        };
        (stdout, control)
    }
}

/// Writes an execution's output into its stdout pipe in order, each item once (a replay
/// after a reconnect repeats what was not acknowledged), acknowledged once taken
/// (`OnDelivery`) or recorded for the caller's commit (`OnCommit`); then its exit.
async fn deliver(
    mut events: mpsc::UnboundedReceiver<Event>,
    mut stdout: DuplexStream,
    ledger: Acks,
    policy: AckPolicy,
    exit: watch::Sender<Option<(ExitInfo, String)>>,
) {
    while let Some(event) = events.recv().await {
        match event {
            Event::Output(seq, bytes) => {
                if !ledger.is_new(seq) {
                    continue;
                }
                // A reader that went away still gets the rest acknowledged.
                let _ = stdout.write_all(&bytes).await;
                ledger.written(seq, bytes.len());
                if policy == AckPolicy::OnDelivery {
                    ledger.commit(seq);
                }
            }
            Event::Scrollback(bytes) => {
                let _ = stdout.write_all(&bytes).await;
            }
            Event::Exited(seq, info, stderr) => {
                ledger.exited(seq);
                if policy == AckPolicy::OnDelivery {
                    ledger.commit(seq);
                }
                drop(stdout);
                exit.send_replace(Some((info, stderr)));
                return;
            }
            Event::Lost(reason) => {
                exit.send_replace(Some((ExitInfo::Unknown { reason }, String::new())));
                return;
            }
            Event::Spawned(_) | Event::SpawnFailed(_) => {}
        }
    }
    let lost = ExitInfo::Unknown { reason: LOST.into() };
    exit.send_replace(Some((lost, String::new())));
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
        .unwrap_or(ExitInfo::Unknown { reason: LOST.into() })
    }

    /// TERM to the agent's group, `grace`, then KILL (asked again on each new connection
    /// until the exit arrives); resolves with its exit, or `Unknown` when it has not arrived
    /// `grace` + 15 s later (the connection is down, or the runner does not answer).
    pub async fn stop(&self, grace: Duration) -> ExitInfo {
        self.kill(grace);
        let bound = grace + STOP_MARGIN;
        match tokio::time::timeout(bound, self.wait()).await {
            Ok(exit) => exit,
            Err(_) => ExitInfo::Unknown {
                reason: format!(
                    "the agent did not end within {} s of the stop request (the connection to \
                     its runner may be down); it is stopped when the connection is back",
                    bound.as_secs()
                ),
            },
        }
    }

    /// Gives the execution's pseudo-terminal a new size (one spawned with `pty`; dropped
    /// while the connection is down).
    pub fn resize(&self, cols: u16, rows: u16) {
        let _ = self.commands.send(Command::Resize { exec: self.exec.clone(), cols, rows });
    }

    /// Asks the runner for [`RemoteControl::stop`] without waiting (asked again on each new
    /// connection until the exit arrives).
    pub fn kill(&self, grace: Duration) {
        let _ = self.commands.send(Command::Stop { exec: self.exec.clone(), grace });
    }
}
