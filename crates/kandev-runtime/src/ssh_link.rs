//! A runner over SSH that survives dropped connections (issue 20, R7): [`SshLink`] keeps one
//! connection to an executor's runner and reopens it with back-off when it drops; a
//! [`LinkedExecution`] gives one stdout and one stdin that go on across the drops, so the ACP
//! layer sees one unbroken byte stream. After a reopen each execution is re-attached with the
//! number of the last item this side took (`attach_with(.., committed)`): the runner replays
//! the rest, once.
//!
//! Input is exactly-once as well: the stdin is the pipe of the execution's input queue
//! ([`crate::runner::Inputs`]), which keeps every item until the runner acknowledges it; a
//! re-attach resumes the queue on the new connection (`RunnerClient::resume`), which resends
//! what the runner did not take, in order, before anything new. What is written while the
//! link is reconnecting waits in the queue (bounded: past the bound the writer waits).
//!
//! This server never re-adopts a remote execution it did not start itself (in this process):
//! on every new connection (the first one, each reopen, and a link made again after one went
//! gone) every execution the runner still holds that no [`LinkedExecution`] of this process
//! follows, or is being spawned, is forgotten (killed). So the agent of a server that was
//! killed, or of a link that gave up, never keeps working in a worktree next to a new one.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::ExitInfo;
use crate::runner::{
    AckPolicy, ExecutionInfo, RemoteControl, RemoteExecution, RunnerClient, SpawnSpec,
};
use crate::ssh::{Backoff, SshConnection, SshError, SshRunner};

/// Size of the pipes between a linked execution and its reader/writer.
const PIPE: usize = 1 << 20;

/// How long past its grace a stopped execution's exit is waited for (through reconnects).
const STOP_MARGIN: Duration = Duration::from_secs(15);

/// How long a dropped link gives its connection to close cleanly before killing `ssh`.
const CLOSE_BOUND: Duration = Duration::from_secs(5);

/// The executions this process follows or is spawning on any runner (names are unique:
/// `op-<pid>-<time>-<n>` for operations, `agent-<uuid>` for agents).
static OWNED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

/// An execution name in [`OWNED`], for as long as this lives.
struct Owned(String);

impl Owned {
    /// Claims `exec`; refused when this process already owns an execution of that name (its
    /// release would make the other one a stranger, killed on the next connection).
    fn new(exec: &str) -> Result<Self, String> {
        if !OWNED.lock().unwrap_or_else(PoisonError::into_inner).insert(exec.to_owned()) {
            return Err(format!("an execution named {exec} already runs through an ssh link"));
        }
        Ok(Self(exec.to_owned()))
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        OWNED.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.0);
    }
}

/// Forgets (kills) every execution in `held` that this process does not own; returns them.
fn forget_strangers(client: &RunnerClient, held: &[ExecutionInfo]) -> Vec<ExecutionInfo> {
    let strangers: Vec<ExecutionInfo> = {
        let owned = OWNED.lock().unwrap_or_else(PoisonError::into_inner);
        held.iter().filter(|e| !owned.contains(&e.exec)).cloned().collect()
    };
    for stranger in &strangers {
        tracing::info!(exec = %stranger.exec, pid = stranger.pid, "forgetting a remote execution this server does not own");
        client.forget(&stranger.exec);
    }
    strangers
}

/// The state of a link's connection.
#[derive(Clone)]
enum Generation {
    /// Connected; `number` counts the connections made (1 for the first).
    Live {
        number: u64,
        client: RunnerClient,
        executions: Arc<Vec<ExecutionInfo>>,
    },
    Reconnecting,
    /// Reconnecting failed for good; the message says why.
    Gone(String),
}

/// A connection to an executor's runner that reopens itself.
pub struct SshLink {
    generation: watch::Receiver<Generation>,
    kill: mpsc::UnboundedSender<()>,
    /// Ends the supervisor task (it owns the connection), which closes the connection
    /// cleanly ([`SshConnection::close`]) within [`CLOSE_BOUND`].
    cancel: CancellationToken,
    /// The supervisor task, awaited by [`SshLink::close`] (taken by the first close).
    supervisor: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for SshLink {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// An execution whose pipes outlive connection drops.
pub struct LinkedExecution {
    /// The agent's stdout, across every connection.
    pub stdout: DuplexStream,
    /// The agent's stdin, across every connection (each item once, in order).
    pub stdin: DuplexStream,
    pid: i32,
    control: Arc<Mutex<Arc<RemoteControl>>>,
    /// The grace of a requested stop: the kill is sent again on each new connection until the
    /// exit arrives.
    stopping: Arc<Mutex<Option<Duration>>>,
    exit: watch::Receiver<Option<ExitInfo>>,
    /// Keeps the execution from being forgotten as a stranger on a new connection.
    _owned: Owned,
    /// Copies between the pipes and the current connection; ends with the execution.
    _pump: AbortOnDropHandle<()>,
}

impl SshLink {
    /// Installs and connects (as [`SshRunner::connect`]); later drops are reopened with
    /// `backoff`. Every execution the runner already held that this process does not own is
    /// forgotten (killed); those are returned.
    pub async fn connect(
        runner: SshRunner,
        backoff: Backoff,
    ) -> Result<(SshLink, Vec<ExecutionInfo>), SshError> {
        let connection = runner.connect().await?;
        let forgotten = forget_strangers(&connection.client, &connection.executions);
        let executions = connection.executions.clone();
        let (tx, generation) = watch::channel(Generation::Live {
            number: 1,
            client: connection.client.clone(),
            executions: Arc::new(executions.clone()),
        });
        let (kill, kills) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        // Not aborted with the link: it ends on `cancel`, after closing the connection.
        let supervisor =
            tokio::spawn(supervise(runner, backoff, connection, tx, kills, cancel.clone()));
        let supervisor = Mutex::new(Some(supervisor));
        Ok((SshLink { generation, kill, cancel, supervisor }, forgotten))
    }

    /// Closes the link and waits until its connection is closed cleanly (within
    /// [`CLOSE_BOUND`]): the acknowledgements still on their way reach the runner before
    /// the `ssh` client goes. What a server does on shutdown; a link only dropped closes
    /// the same way in a task of its own, which a runtime that ends right after never
    /// finishes. Later calls return at once.
    pub async fn close(&self) {
        self.cancel.cancel();
        let supervisor = self.supervisor.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(supervisor) = supervisor {
            let _ = supervisor.await;
        }
    }

    /// How many connections were made so far (1 before any drop).
    pub fn connections(&self) -> u64 {
        match &*self.generation.borrow() {
            Generation::Live { number, .. } => *number,
            Generation::Reconnecting | Generation::Gone(_) => 0,
        }
    }

    /// Whether reconnecting failed for good: nothing will run through this link again.
    pub fn is_gone(&self) -> bool {
        matches!(&*self.generation.borrow(), Generation::Gone(_))
    }

    /// Kills the current `ssh` client (tests: the network goes away); the link reopens.
    pub fn drop_transport(&self) {
        let _ = self.kill.send(());
    }

    /// Whether the link is live now or becomes live within `wait` (false when it is gone).
    pub async fn live_within(&self, wait: Duration) -> bool {
        matches!(tokio::time::timeout(wait, self.client()).await, Ok(Ok(_)))
    }

    /// The live client, waiting while the link reconnects.
    async fn client(&self) -> Result<(u64, RunnerClient), String> {
        let mut generation = self.generation.clone();
        loop {
            match &*generation.borrow_and_update() {
                Generation::Live { number, client, .. } => return Ok((*number, client.clone())),
                Generation::Gone(message) => return Err(message.clone()),
                Generation::Reconnecting => {}
            }
            if generation.changed().await.is_err() {
                return Err("the ssh link is closed".into());
            }
        }
    }

    /// Starts an execution on the runner; its pipes go on across drops. A connection that
    /// dropped under the spawn (before the supervisor noticed) is waited out: on the next
    /// one the execution is taken over when the runner lists it (it was started), else
    /// spawned again.
    pub async fn spawn(&self, exec: &str, spec: SpawnSpec) -> Result<LinkedExecution, String> {
        let owned = Owned::new(exec)?;
        let execution = self.spawn_owned(exec, spec).await?;
        Ok(self.follow(exec, owned, execution.0, execution.1))
    }

    async fn spawn_owned(
        &self,
        exec: &str,
        spec: SpawnSpec,
    ) -> Result<(u64, RemoteExecution), String> {
        loop {
            let (number, client) = self.client().await?;
            match client.spawn_with(exec, spec.clone(), AckPolicy::OnDelivery).await {
                Ok(execution) => return Ok((number, execution)),
                Err(_) if client.closed().now_or_never().is_some() => {
                    let (number, client, executions) = self.live_after(number).await?;
                    if let Some(info) = executions.iter().find(|e| e.exec == exec) {
                        let execution = client.attach_with(info, AckPolicy::OnDelivery, 0);
                        return Ok((number, execution));
                    }
                }
                Err(message) => return Err(message),
            }
        }
    }

    /// The first live connection after connection `number`.
    async fn live_after(
        &self,
        number: u64,
    ) -> Result<(u64, RunnerClient, Arc<Vec<ExecutionInfo>>), String> {
        let mut generation = self.generation.clone();
        loop {
            match &*generation.borrow_and_update() {
                Generation::Live { number: now, client, executions } if *now > number => {
                    return Ok((*now, client.clone(), executions.clone()));
                }
                Generation::Gone(message) => return Err(message.clone()),
                Generation::Live { .. } | Generation::Reconnecting => {}
            }
            if generation.changed().await.is_err() {
                return Err("the ssh link is closed".into());
            }
        }
    }

    fn follow(
        &self,
        exec: &str,
        owned: Owned,
        number: u64,
        execution: RemoteExecution,
    ) -> LinkedExecution {
        let (stdout, stdout_tx) = tokio::io::duplex(PIPE);
        let (exit_tx, exit) = watch::channel(None);
        let pid = execution.control.pid();
        let control = Arc::new(Mutex::new(Arc::new(execution.control)));
        let stopping = Arc::new(Mutex::new(None));
        let current = Current { stdout: execution.stdout, acks: execution.acks, number };
        let pump = AbortOnDropHandle::new(tokio::spawn(pump(
            exec.to_owned(),
            current,
            self.generation.clone(),
            stdout_tx,
            (control.clone(), stopping.clone()),
            exit_tx,
            self.cancel.clone(),
        )));
        // The input queue's own pipe: it moves to each new connection with the queue.
        LinkedExecution {
            stdout,
            stdin: execution.stdin,
            pid,
            control,
            stopping,
            exit,
            _owned: owned,
            _pump: pump,
        }
    }
}

impl LinkedExecution {
    /// The agent's pid on the remote host.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The last lines the process wrote to stderr (reported with its exit).
    pub fn stderr_tail(&self) -> String {
        self.control.lock().unwrap_or_else(PoisonError::into_inner).stderr_tail()
    }

    /// Resolves with the agent's exit, or `Unknown` when the link is gone for good.
    pub async fn wait(&self) -> ExitInfo {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(value) => value.clone(),
            Err(_) => None,
        }
        .unwrap_or(ExitInfo::Unknown { reason: "the ssh link is closed".into() })
    }

    /// TERM, `grace`, KILL through the current connection, and again through each new one
    /// until the exit arrives; resolves with the exit, or `Unknown` when it has not arrived
    /// `grace` + [`STOP_MARGIN`] later (the link is down, or the runner does not answer).
    pub async fn stop(&self, grace: Duration) -> ExitInfo {
        // The flag first, then the connection: the pump swaps the connection first, then
        // reads the flag, so one of the two sends the kill on the newest connection.
        *self.stopping.lock().unwrap_or_else(PoisonError::into_inner) = Some(grace);
        let control = self.control.lock().unwrap_or_else(PoisonError::into_inner).clone();
        control.kill(grace);
        let bound = grace + STOP_MARGIN;
        match tokio::time::timeout(bound, self.wait()).await {
            Ok(exit) => exit,
            Err(_) => ExitInfo::Unknown {
                reason: format!(
                    "the agent on the build host did not end within {} s of the stop request \
                     (the ssh link may be down); it is killed when the link is back",
                    bound.as_secs()
                ),
            },
        }
    }
}

/// An execution's control on the current connection (swapped on each re-attach).
type SharedControl = Arc<Mutex<Arc<RemoteControl>>>;

/// The output of an execution on one connection.
struct Current {
    stdout: DuplexStream,
    acks: crate::runner::Acks,
    number: u64,
}

/// Keeps the connection: waits for it to drop (or to be killed), reopens it with back-off and
/// publishes each new one.
async fn supervise(
    runner: SshRunner,
    backoff: Backoff,
    mut connection: SshConnection,
    generation: watch::Sender<Generation>,
    mut kills: mpsc::UnboundedReceiver<()>,
    cancel: CancellationToken,
) {
    let mut number = 1;
    loop {
        let killed = tokio::select! {
            _ = cancel.cancelled() => {
                connection.close(CLOSE_BOUND).await;
                return;
            }
            _ = connection.client.closed() => false,
            Some(()) = kills.recv() => true,
        };
        if killed {
            connection.drop_transport().await;
        }
        generation.send_replace(Generation::Reconnecting);
        let reopened = tokio::select! {
            _ = cancel.cancelled() => return,
            reopened = runner.reconnect(backoff) => reopened,
        };
        match reopened {
            Ok(next) => {
                number += 1;
                connection = next;
                forget_strangers(&connection.client, &connection.executions);
                tracing::info!(target = %runner.target(), number, "ssh link reconnected");
                generation.send_replace(Generation::Live {
                    number,
                    client: connection.client.clone(),
                    executions: Arc::new(connection.executions.clone()),
                });
            }
            Err(err) => {
                generation.send_replace(Generation::Gone(err.to_string()));
                return;
            }
        }
    }
}

/// Copies an execution's output into the linked stdout, moving to the next connection (with
/// the execution's input queue) after each drop, until the agent's exit arrives.
async fn pump(
    exec: String,
    mut current: Current,
    mut generation: watch::Receiver<Generation>,
    mut stdout: DuplexStream,
    // The execution's current control, and the grace of a requested stop.
    (control, stopping): (SharedControl, Arc<Mutex<Option<Duration>>>),
    exit: watch::Sender<Option<ExitInfo>>,
    cancel: CancellationToken,
) {
    let mut out = vec![0u8; 64 * 1024];
    loop {
        // This connection's output until it ends (the exit, or the connection lost).
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                read = current.stdout.read(&mut out) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        // A reader that went away: keep going so the exit is still seen.
                        let _ = stdout.write_all(&out[..n]).await;
                    }
                },
            }
        }
        if current.acks.exit_seq().is_some() {
            let control = control.lock().unwrap_or_else(PoisonError::into_inner).clone();
            exit.send_replace(Some(control.wait().await));
            return;
        }
        // The connection dropped: take the execution over on the next one, after the last
        // item this side took.
        let committed = current.acks.committed();
        let next = loop {
            let found = match &*generation.borrow_and_update() {
                Generation::Live { number, client, executions } if *number > current.number => {
                    Some(Ok((*number, client.clone(), executions.clone())))
                }
                Generation::Gone(message) => Some(Err(message.clone())),
                Generation::Live { .. } | Generation::Reconnecting => None,
            };
            if let Some(found) = found {
                break found;
            }
            tokio::select! {
                _ = cancel.cancelled() => return,
                changed = generation.changed() => if changed.is_err() {
                    break Err("the ssh link is closed".into());
                },
            }
        };
        let (number, client, executions) = match next {
            Ok(next) => next,
            Err(message) => {
                exit.send_replace(Some(ExitInfo::Unknown { reason: message }));
                return;
            }
        };
        let Some(info) = executions.iter().find(|e| e.exec == exec) else {
            let reason = format!("the runner no longer holds execution {exec}");
            exit.send_replace(Some(ExitInfo::Unknown { reason }));
            return;
        };
        let inputs = control.lock().unwrap_or_else(PoisonError::into_inner).inputs().clone();
        let execution = client.resume(info, AckPolicy::OnDelivery, committed, &inputs);
        let resumed = Arc::new(execution.control);
        *control.lock().unwrap_or_else(PoisonError::into_inner) = resumed.clone();
        if let Some(grace) = *stopping.lock().unwrap_or_else(PoisonError::into_inner) {
            resumed.kill(grace);
        }
        current = Current { stdout: execution.stdout, acks: execution.acks, number };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::{Runner, RunnerConfig};

    /// A new connection to `runner` over an in-process pipe (no ssh).
    async fn connect(runner: &Runner) -> (RunnerClient, Vec<ExecutionInfo>) {
        let (near, far) = tokio::io::duplex(1 << 16);
        let host = runner.clone();
        tokio::spawn(async move { host.serve_connection(far).await });
        RunnerClient::connect(near).await.unwrap()
    }

    /// A link in `generation`, without a supervisor: the test plays it through the sender.
    fn link_in(generation: Generation) -> (watch::Sender<Generation>, SshLink) {
        let (tx, generation) = watch::channel(generation);
        let (kill, _kills) = mpsc::unbounded_channel();
        let link = SshLink {
            generation,
            kill,
            cancel: CancellationToken::new(),
            supervisor: Mutex::new(None),
        };
        (tx, link)
    }

    /// A link live on a new in-process connection to `runner`, and that connection's client.
    async fn live_link(runner: &Runner) -> (watch::Sender<Generation>, SshLink, RunnerClient) {
        let (client, executions) = connect(runner).await;
        let live = Generation::Live {
            number: 1,
            client: client.clone(),
            executions: Arc::new(executions),
        };
        let (tx, link) = link_in(live);
        (tx, link, client)
    }

    /// `program args` in a temporary directory (returned with it: it must outlive the run).
    fn spec(program: &str, args: &[&str]) -> (SpawnSpec, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let spec = SpawnSpec {
            program: program.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![],
            cwd: dir.path().to_path_buf(),
            secrets: vec![],
        };
        (spec, dir)
    }

    /// A dropped [`LinkedExecution`] takes its pump task with it: the task lets go of the
    /// execution's control (it would otherwise run until the agent exits, owned by nobody).
    #[tokio::test]
    async fn i20_d6_a_dropped_linked_execution_ends_its_pump() {
        let runner = Runner::new(RunnerConfig::default());
        let (_tx, link, _client) = live_link(&runner).await;
        let (spec, _dir) = spec("sleep", &["30"]);
        let execution = link.spawn("e1", spec).await.unwrap();
        let control = Arc::downgrade(&execution.control);
        drop(execution);
        // The abort is handled by the runtime's next poll of the task: a bounded wait.
        let gone = tokio::time::timeout(Duration::from_secs(5), async {
            while control.upgrade().is_some() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(gone.is_ok(), "the pump still holds the execution 5 s after its owner dropped it");
        runner.shutdown().await;
    }

    /// Finding 2 of the SSH review: a stop requested while the link reconnects is not lost
    /// with the dropped connection: the kill goes again on the next one and the agent ends.
    #[tokio::test]
    async fn i20_d8_a_stop_during_a_connection_drop_ends_the_agent() {
        let runner = Runner::new(RunnerConfig::default());
        let (tx, link, client) = live_link(&runner).await;
        let (spec, _dir) = spec("sleep", &["300"]);
        let execution = link.spawn("agent-d8", spec).await.unwrap();
        let pid = nix::unistd::Pid::from_raw(execution.pid());
        // The connection drops; the stop is asked while there is none.
        tx.send_replace(Generation::Reconnecting);
        client.close();
        client.closed().await;
        let stop = tokio::spawn(async move { execution.stop(Duration::from_millis(200)).await });
        tokio::task::yield_now().await;
        let (client, executions) = connect(&runner).await;
        assert!(executions.iter().any(|e| e.exec == "agent-d8"), "{executions:?}");
        tx.send_replace(Generation::Live { number: 2, client, executions: Arc::new(executions) });
        let exit = tokio::time::timeout(Duration::from_secs(10), stop)
            .await
            .expect("the stop ends once the link is back")
            .unwrap();
        assert!(!matches!(exit, ExitInfo::Unknown { .. }), "{exit:?}");
        assert!(nix::sys::signal::kill(pid, None).is_err(), "the agent {pid} is gone");
        runner.shutdown().await;
    }

    /// A second execution spawned under a name this process already follows is refused,
    /// and the first stays owned: the refused one's release made the first a stranger,
    /// killed on the next connection (two tests that both named their agent `agent-1` saw
    /// their turn stop after a reconnect).
    #[tokio::test]
    async fn i20_d20_a_duplicate_execution_name_is_refused_and_the_first_stays_owned() {
        let runner = Runner::new(RunnerConfig::default());
        let (_tx, link, client) = live_link(&runner).await;
        let (spec, _dir) = spec("sleep", &["30"]);
        let first = link.spawn("agent-d20", spec.clone()).await.unwrap();
        let second = link.spawn("agent-d20", spec).await.err().expect("a second is refused");
        assert!(second.contains("agent-d20 already runs"), "{second}");
        let held = [ExecutionInfo {
            exec: "agent-d20".into(),
            pid: first.pid(),
            acked: 0,
            exited: false,
            input_taken: 0,
            input_acked: 0,
            keys: vec![],
        }];
        assert!(forget_strangers(&client, &held).is_empty(), "the first is still ours");
        drop(first);
        runner.shutdown().await;
    }

    /// Finding 3 of the SSH review: a remote operation does not wait for a reconnecting link
    /// for as long as the back-off lasts: it fails soon, saying to try again.
    #[tokio::test]
    async fn i20_d10_a_remote_operation_on_a_reconnecting_link_fails_soon() {
        let (_tx, link) = link_in(Generation::Reconnecting);
        let site = crate::site::RemoteSite::new(Arc::new(link), "/srv/kandev", "build1")
            .with_live_wait(Duration::from_millis(100));
        let op = crate::runner::ops::Commit { path: "/srv/w".into(), message: "m".into() };
        let failed = tokio::time::timeout(Duration::from_secs(10), site.call(op))
            .await
            .expect("the operation gives up while the link reconnects")
            .unwrap_err();
        assert!(
            failed
                .to_string()
                .contains("the SSH executor build1 is reconnecting; try again in a minute"),
            "{failed}"
        );
    }
}
