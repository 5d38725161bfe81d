//! The one task that owns a runner connection (an actor): it opens the connection through its
//! [`Transport`], handshakes, routes what the runner sends to the execution it belongs to,
//! writes what the executions and callers send, and, when the connection drops, opens it
//! again with [`Backoff`] and takes every execution it follows over on the new connection:
//! output acknowledged up to what the caller committed, input sent again from the first item
//! the runner did not take, a requested stop asked again. What the new runner does not hold
//! any more ends with an "agent lost" exit. Nothing else holds the route table; callers talk
//! to it through [`Command`]s ([`super::RunnerClient`]).
//!
//! The transports (the local runner's Unix socket, `ssh … kandev runner --stdio`, one given
//! stream for tests) differ only in how the byte stream is opened.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio_util::codec::Framed;
use tokio_util::task::AbortOnDropHandle;

use super::ledger::{Acks, Inputs};
use super::proto::{
    ExecutionInfo, FromRunner, PROTOCOL_VERSION, ProtocolError, ServerCodec, SpawnSpec, ToRunner,
    kind_of,
};
use crate::ExitInfo;

/// A byte stream to a runner.
pub trait RunnerStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> RunnerStream for T {}

/// A connection after the handshake: its frames and the executions the runner holds.
pub struct Handshaken {
    framed: Framed<Box<dyn RunnerStream>, ServerCodec>,
    pub executions: Vec<ExecutionInfo>,
}

/// Sends `hello` on `stream` and reads the runner's `welcome`.
pub async fn handshake<S: RunnerStream>(stream: S) -> Result<Handshaken, ProtocolError> {
    let stream: Box<dyn RunnerStream> = Box::new(stream);
    let mut framed = Framed::new(stream, ServerCodec::default());
    framed.send(ToRunner::Hello { version: PROTOCOL_VERSION }).await?;
    match framed.next().await {
        Some(Ok(FromRunner::Welcome { version, executions })) => {
            if version != PROTOCOL_VERSION {
                return Err(ProtocolError::VersionMismatch {
                    ours: PROTOCOL_VERSION,
                    theirs: version,
                });
            }
            Ok(Handshaken { framed, executions })
        }
        Some(Ok(FromRunner::Refused { message })) => Err(ProtocolError::Refused(message)),
        Some(Ok(other)) => {
            Err(ProtocolError::Unexpected { expected: "welcome", got: kind_of(&other) })
        }
        Some(Err(err)) => Err(err),
        None => Err(ProtocolError::Closed),
    }
}

/// Why a connection could not be opened.
#[derive(Debug, Clone)]
pub struct OpenError {
    pub message: String,
    /// Whether trying again later may help (a refused host key or another version does not).
    pub transient: bool,
}

/// What keeps a connection's transport (an `ssh` client): ended when the connection is.
pub trait TransportGuard: Send {
    /// Ends the transport as if the network went away (tests).
    fn kill(&mut self) -> BoxFuture<'_, ()>;
    /// Ends it cleanly once what was written reached the runner, within `bound`.
    fn close(self: Box<Self>, bound: Duration) -> BoxFuture<'static, ()>;
}

/// An opened connection.
pub struct Opened {
    pub connection: Handshaken,
    pub guard: Option<Box<dyn TransportGuard>>,
}

/// How a connection to a runner is opened, again after each drop.
pub trait Transport: Send + 'static {
    fn open(&mut self) -> BoxFuture<'_, Result<Opened, OpenError>>;
}

/// The transport of a connection given by the caller (`RunnerClient::connect`): it is not
/// opened again, so a drop is the end of the link.
pub(crate) struct NotReopened;

impl Transport for NotReopened {
    fn open(&mut self) -> BoxFuture<'_, Result<Opened, OpenError>> {
        Box::pin(async { Err(OpenError { message: LOST.into(), transient: false }) })
    }
}

/// Back-off between attempts to open a connection again: `first`, doubled each time up to
/// `max`, for at most `attempts` attempts (then the link is gone for good).
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    pub attempts: u32,
}

impl Default for Backoff {
    /// What an SSH executor uses: 20 attempts, 200 ms to 30 s apart (about 8 minutes).
    fn default() -> Self {
        Self { first: Duration::from_millis(200), max: Duration::from_secs(30), attempts: 20 }
    }
}

impl Backoff {
    /// What the local runner uses: never gives up, 100 ms to 5 s apart (a runner that died
    /// is started again by the transport).
    pub fn forever() -> Self {
        Self { first: Duration::from_millis(100), max: Duration::from_secs(5), attempts: u32::MAX }
    }
}

/// The state of a link, as callers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Connected; `number` counts the connections made (1 for the first).
    Live {
        number: u64,
    },
    Reconnecting,
    /// Closed, or reopening failed for good; the message says why.
    Gone(String),
}

/// Why an execution could not be started through a runner connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnError {
    /// The runner could not start it (its message: the program is missing, ...).
    #[error("{0}")]
    Failed(String),
    /// Another execution of that name runs through this connection.
    #[error("an execution named {0} already runs through this runner connection")]
    AlreadyRuns(String),
    /// The connection is gone (closed, or reopening it failed for good).
    #[error("{0}")]
    Lost(String),
}

/// What happens to an execution, for its follower.
pub(crate) enum Event {
    Spawned(i32),
    SpawnFailed(SpawnError),
    Output(u64, Bytes),
    Exited(u64, ExitInfo, String),
    /// The runner does not hold it any more, or the link is gone.
    Lost(String),
}

/// An execution the link follows.
pub(crate) struct Follower {
    pub events: mpsc::UnboundedSender<Event>,
    pub inputs: Inputs,
    pub acks: Acks,
    /// Set until the runner answered the spawn (sent again on a new connection that does not
    /// list the execution).
    pub spawn: Option<SpawnSpec>,
    /// The grace of a requested stop: asked again on each new connection until the exit.
    pub stopping: Option<Duration>,
    /// The last input item written on the current connection.
    pub sent: u64,
}

enum Route {
    Follow(Follower),
    /// Items of an execution nobody follows yet (the replay right after `welcome` of what an
    /// earlier server started), kept until it is attached or forgotten.
    Parked(Vec<Event>),
    /// Forgotten: what still arrives for it is discarded.
    Forgotten,
}

/// What callers ask of the link.
pub(crate) enum Command {
    /// Follow an execution to be started: the spawn is sent (again on a new connection when
    /// it was lost), its answer comes as an event.
    Spawn {
        exec: String,
        follower: Follower,
    },
    /// Follow an execution the runner holds (`info` from a `welcome`), after `committed`.
    Attach {
        info: ExecutionInfo,
        committed: u64,
        follower: Follower,
    },
    /// Runs an execution's follower task (owned here, ends with the link).
    Run(BoxFuture<'static, ()>),
    Forget {
        exec: String,
    },
    Stop {
        exec: String,
        grace: Duration,
    },
    DropTransport,
    Close(oneshot::Sender<()>),
}

/// Why an execution ended without its exit: the connection to its runner dropped and the
/// runner reached again does not hold it, or the connection could not be opened again.
pub(crate) const LOST: &str = "the connection to the runner was lost";

/// Why an execution ended when its link was closed.
const CLOSED: &str = "the connection to the runner was closed";

/// How long a closed link gives its transport to carry the last frames.
pub(crate) const CLOSE_BOUND: Duration = Duration::from_secs(5);

pub(crate) struct Link {
    pub transport: Box<dyn Transport>,
    pub backoff: Backoff,
    pub commands: mpsc::UnboundedReceiver<Command>,
    pub outbox: mpsc::UnboundedReceiver<ToRunner>,
    /// The link's own sender of the outbox (input queues are pointed at it on resume).
    pub out: mpsc::UnboundedSender<ToRunner>,
    pub state: watch::Sender<LinkState>,
    /// How many events are parked (for [`super::RunnerClient::parked`]).
    pub parked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// Why a connection's loop ended.
enum Ended {
    Dropped,
    Killed,
    Closed(oneshot::Sender<()>),
}

impl Link {
    /// Runs the link on its first connection until it is closed or gone for good.
    pub async fn run(mut self, first: Opened) {
        let mut routes: HashMap<String, Route> = HashMap::new();
        let mut followers = JoinSet::new();
        let mut opened = first;
        let mut number = 1;
        loop {
            let Opened { connection, guard } = opened;
            self.state.send_replace(LinkState::Live { number });
            let ended = self.serve(connection, &mut routes, &mut followers, number).await;
            let killed = matches!(ended, Ended::Killed);
            match ended {
                Ended::Closed(done) => {
                    if let Some(guard) = guard {
                        guard.close(CLOSE_BOUND).await;
                    }
                    gone(&self.state, &mut routes, CLOSED);
                    let _ = done.send(());
                    return;
                }
                Ended::Dropped | Ended::Killed => {
                    if let Some(mut guard) = guard {
                        if killed {
                            guard.kill().await;
                        }
                        drop(guard);
                    }
                }
            }
            self.state.send_replace(LinkState::Reconnecting);
            match self.reopen(&mut routes, &mut followers).await {
                Ok(next) => {
                    number += 1;
                    opened = next;
                }
                Err(Some(message)) => {
                    gone(&self.state, &mut routes, &message);
                    return;
                }
                Err(None) => return, // closed while reconnecting
            }
        }
    }

    /// Opens a new connection with back-off, answering the commands that need no connection
    /// meanwhile. `Err(None)`: closed meanwhile; `Err(Some)`: gone for good.
    async fn reopen(
        &mut self,
        routes: &mut HashMap<String, Route>,
        followers: &mut JoinSet<()>,
    ) -> Result<Opened, Option<String>> {
        let mut delay = self.backoff.first;
        let mut attempt = 1u32;
        loop {
            let open = self.transport.open();
            let failed =
                match while_offline(open, &mut self.commands, &self.state, routes, followers).await
                {
                    None => return Err(None),
                    Some(Ok(opened)) => return Ok(opened),
                    Some(Err(err)) => err,
                };
            if !failed.transient || attempt >= self.backoff.attempts {
                return Err(Some(failed.message));
            }
            tracing::warn!(attempt, error = %failed.message, "reaching the runner again failed; trying again");
            let wait = tokio::time::sleep(delay);
            if while_offline(wait, &mut self.commands, &self.state, routes, followers)
                .await
                .is_none()
            {
                return Err(None);
            }
            delay = (delay * 2).min(self.backoff.max);
            attempt = attempt.saturating_add(1);
        }
    }

    /// Serves one connection until it drops, is killed or the link is closed. Frames go out
    /// through a writer task of the connection, so the actor reads while a write waits (the
    /// runner writes while it reads too: both waiting on a full pipe would be a deadlock).
    async fn serve(
        &mut self,
        connection: Handshaken,
        routes: &mut HashMap<String, Route>,
        followers: &mut JoinSet<()>,
        number: u64,
    ) -> Ended {
        let Handshaken { framed, executions } = connection;
        let (sink, mut stream) = framed.split();
        let (wire, frames) = mpsc::unbounded_channel();
        let mut writer = AbortOnDropHandle::new(tokio::spawn(write_frames(sink, frames)));
        if number == 1 {
            // Held for the caller, who takes each over or forgets it; nothing forgets them.
            for info in &executions {
                routes.entry(info.exec.clone()).or_insert_with(|| Route::Parked(Vec::new()));
            }
        } else {
            self.take_over(&wire, &executions, routes);
        }
        loop {
            tokio::select! {
                frame = stream.next() => match frame {
                    Some(Ok(frame)) => {
                        route(frame, routes, &wire);
                        self.count_parked(routes);
                    }
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "reading from the runner failed");
                        return Ended::Dropped;
                    }
                    None => return Ended::Dropped,
                },
                Some(frame) = self.outbox.recv() => accept(&wire, frame, routes),
                Some(command) = self.commands.recv() => match command {
                    Command::Close(done) => {
                        // What was sent before (the last acknowledgements) goes out, then the
                        // write side is shut; bounded, as a transport may not take it.
                        while let Ok(frame) = self.outbox.try_recv() {
                            accept(&wire, frame, routes);
                        }
                        drop(wire);
                        let _ = tokio::time::timeout(CLOSE_BOUND, &mut writer).await;
                        return Ended::Closed(done);
                    }
                    Command::DropTransport => return Ended::Killed,
                    command => {
                        self.online(command, &wire, &executions, routes, followers);
                        self.count_parked(routes);
                    }
                },
                written = &mut writer => {
                    if let Ok(Err(err)) = written {
                        tracing::warn!(error = %err, "writing to the runner failed");
                    }
                    return Ended::Dropped;
                }
                Some(()) = reap(followers) => {}
            }
        }
    }

    fn count_parked(&self, routes: &HashMap<String, Route>) {
        let parked = routes
            .values()
            .map(|route| if let Route::Parked(p) = route { p.len() } else { 0 })
            .sum();
        self.parked.store(parked, std::sync::atomic::Ordering::Relaxed);
    }

    /// A command while connected (`listed`: what the connection's `welcome` listed).
    fn online(
        &mut self,
        command: Command,
        wire: &Wire,
        listed: &[ExecutionInfo],
        routes: &mut HashMap<String, Route>,
        followers: &mut JoinSet<()>,
    ) {
        match command {
            Command::Spawn { exec, follower } => {
                let Some(spec) = follower.spawn.clone() else { return };
                if !admit(&exec, &follower, routes) {
                    return;
                }
                routes.insert(exec.clone(), Route::Follow(follower));
                let _ = wire.send(ToRunner::Spawn { exec, spec });
            }
            Command::Attach { info, committed, follower } => {
                if !admit(&info.exec, &follower, routes) {
                    return;
                }
                // Gone meanwhile (forgotten on a reconnect, or exited and acknowledged):
                // nothing would ever come for it.
                if !listed.iter().any(|e| e.exec == info.exec) {
                    let _ = follower.events.send(Event::Lost(LOST.into()));
                    return;
                }
                if let Some(Route::Parked(parked)) = routes.remove(&info.exec) {
                    for event in parked {
                        let _ = follower.events.send(event);
                    }
                }
                // Input from the first item the runner did not take (an input queue of an
                // earlier connection has some), before any new one.
                let mut follower = follower;
                follower.sent = info.input_taken;
                follower.inputs.resume(self.out.clone(), info.input_taken, info.input_acked);
                let exec = info.exec.clone();
                routes.insert(exec.clone(), Route::Follow(follower));
                if committed > info.acked {
                    let _ = wire.send(ToRunner::Ack { exec, seq: committed });
                }
            }
            Command::Forget { exec } => {
                routes.insert(exec.clone(), Route::Forgotten);
                let _ = wire.send(ToRunner::Forget { exec });
            }
            Command::Stop { exec, grace } => {
                if let Some(Route::Follow(follower)) = routes.get_mut(&exec) {
                    follower.stopping = Some(grace);
                }
                let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
                let _ = wire.send(ToRunner::Kill { exec, grace_ms });
            }
            other => {
                offline(other, routes, followers);
            }
        }
    }

    /// On a new connection: every followed execution is taken over (or learns it is lost), a
    /// spawn whose answer was lost is sent again or answered from the list, executions held
    /// for the caller stay held (their replay comes again), and what the runner holds that
    /// nobody here follows or holds is forgotten (killed).
    fn take_over(
        &mut self,
        wire: &Wire,
        executions: &[ExecutionInfo],
        routes: &mut HashMap<String, Route>,
    ) {
        let listed = |exec: &str| executions.iter().find(|e| e.exec == exec);
        let mut dropped = vec![];
        for (exec, route) in routes.iter_mut() {
            match route {
                Route::Follow(follower) if follower.events.is_closed() => {
                    // Its caller went away (a cancelled start): it ends.
                    if listed(exec).is_some() {
                        let _ = wire.send(ToRunner::Forget { exec: exec.clone() });
                    }
                    *route = Route::Forgotten;
                }
                Route::Follow(follower) => match listed(exec) {
                    None => match follower.spawn.clone() {
                        Some(spec) => {
                            let _ = wire.send(ToRunner::Spawn { exec: exec.clone(), spec });
                        }
                        None => {
                            // The runner that answered is not the one that ran it (that
                            // one died).
                            tracing::warn!(exec, "the runner no longer holds the execution");
                            let _ = follower.events.send(Event::Lost(LOST.into()));
                            dropped.push(exec.clone());
                        }
                    },
                    Some(info) => {
                        if follower.spawn.take().is_some() {
                            let _ = follower.events.send(Event::Spawned(info.pid));
                        }
                        let committed = follower.acks.committed();
                        if committed > info.acked {
                            let _ = wire.send(ToRunner::Ack { exec: exec.clone(), seq: committed });
                        }
                        // Input from the first item the runner did not take, in order, before
                        // any new one.
                        follower.sent = info.input_taken;
                        follower.inputs.resume(
                            self.out.clone(),
                            info.input_taken,
                            info.input_acked,
                        );
                        if let Some(grace) = follower.stopping {
                            let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
                            let _ = wire.send(ToRunner::Kill { exec: exec.clone(), grace_ms });
                        }
                    }
                },
                Route::Parked(parked) => match listed(exec) {
                    // The runner replays what it holds again: what was parked would repeat.
                    Some(_) => parked.clear(),
                    None => dropped.push(exec.clone()),
                },
                Route::Forgotten => match listed(exec) {
                    // The forget may have been lost with the connection.
                    Some(_) => {
                        let _ = wire.send(ToRunner::Forget { exec: exec.clone() });
                    }
                    None => dropped.push(exec.clone()),
                },
            }
        }
        for exec in dropped {
            routes.remove(&exec);
        }
        for info in executions {
            if !routes.contains_key(&info.exec) {
                tracing::info!(exec = %info.exec, pid = info.pid, "forgetting an execution nobody here follows");
                routes.insert(info.exec.clone(), Route::Forgotten);
                let _ = wire.send(ToRunner::Forget { exec: info.exec.clone() });
            }
        }
    }
}

/// The frames of one connection, in the order they are to be written.
type Wire = mpsc::UnboundedSender<ToRunner>;

/// Writes a connection's frames, as many as are ready before each flush, until the actor
/// lets go of the channel (then shuts the write side) or the transport fails.
async fn write_frames(
    mut sink: futures::stream::SplitSink<Framed<Box<dyn RunnerStream>, ServerCodec>, ToRunner>,
    mut frames: mpsc::UnboundedReceiver<ToRunner>,
) -> Result<(), ProtocolError> {
    while let Some(frame) = frames.recv().await {
        sink.feed(frame).await?;
        while let Ok(frame) = frames.try_recv() {
            sink.feed(frame).await?;
        }
        sink.flush().await?;
    }
    sink.close().await
}

/// Runs `work` while no connection is open, answering the commands that need none; `None`
/// when the link was closed meanwhile (every follower told).
async fn while_offline<T>(
    work: impl Future<Output = T>,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    state: &watch::Sender<LinkState>,
    routes: &mut HashMap<String, Route>,
    followers: &mut JoinSet<()>,
) -> Option<T> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return Some(done),
            Some(command) = commands.recv() => {
                if let Some(done) = offline(command, routes, followers) {
                    gone(state, routes, CLOSED);
                    let _ = done.send(());
                    return None;
                }
            }
            Some(()) = reap(followers) => {}
        }
    }
}

/// Every follower learns that the link is gone; the state says why.
fn gone(state: &watch::Sender<LinkState>, routes: &mut HashMap<String, Route>, message: &str) {
    for (_, route) in routes.drain() {
        if let Route::Follow(follower) = route {
            let _ = follower.events.send(Event::Lost(message.to_owned()));
        }
    }
    state.send_replace(LinkState::Gone(message.to_owned()));
}

/// Whether an execution may be followed under `exec`: not while another one is (its
/// follower is told why).
fn admit(exec: &str, follower: &Follower, routes: &HashMap<String, Route>) -> bool {
    if matches!(routes.get(exec), Some(Route::Follow(_))) {
        let refused = SpawnError::AlreadyRuns(exec.to_owned());
        let _ = follower.events.send(Event::SpawnFailed(refused));
        return false;
    }
    true
}

/// A command that needs no connection (any command while reconnecting: what needs one waits
/// for the next connection, or is answered from the state). `Some`: the link is closing.
fn offline(
    command: Command,
    routes: &mut HashMap<String, Route>,
    followers: &mut JoinSet<()>,
) -> Option<oneshot::Sender<()>> {
    match command {
        Command::Run(task) => {
            followers.spawn(task);
        }
        Command::Close(done) => return Some(done),
        // Sent on the next connection: the spawn as a pending one, the attach as a follow
        // whose take-over happens there, the stop as a requested one.
        Command::Spawn { exec, follower } => {
            if admit(&exec, &follower, routes) {
                routes.insert(exec, Route::Follow(follower));
            }
        }
        Command::Attach { info, follower, .. } => {
            if admit(&info.exec, &follower, routes) {
                routes.insert(info.exec, Route::Follow(follower));
            }
        }
        Command::Forget { exec } => {
            // The next connection forgets what nobody follows.
            routes.remove(&exec);
        }
        Command::Stop { exec, grace } => {
            if let Some(Route::Follow(follower)) = routes.get_mut(&exec) {
                follower.stopping = Some(grace);
            }
        }
        Command::DropTransport => {}
    }
    None
}

/// Awaits the next follower task that ends (never resolves while there is none).
async fn reap(followers: &mut JoinSet<()>) -> Option<()> {
    if followers.is_empty() {
        std::future::pending::<()>().await;
    }
    followers.join_next().await.map(|_| ())
}

/// Passes a frame from the outbox to the connection's writer. An input item goes only in
/// order after the last one written on this connection: an older one is a duplicate, a later
/// one was queued before a reconnect and follows again from the input queue's resend.
fn accept(wire: &Wire, frame: ToRunner, routes: &mut HashMap<String, Route>) {
    if let ToRunner::Input { exec, seq, .. } | ToRunner::CloseInput { exec, seq } = &frame {
        match routes.get_mut(exec.as_str()) {
            Some(Route::Follow(follower)) if *seq == follower.sent + 1 => follower.sent = *seq,
            _ => return,
        }
    }
    let _ = wire.send(frame);
}

/// Hands a frame from the runner to the execution it belongs to. An execution whose caller
/// went away (a start cancelled before its answer) is forgotten, which kills it.
fn route(frame: FromRunner, routes: &mut HashMap<String, Route>, wire: &Wire) {
    let (exec, event) = match frame {
        FromRunner::Spawned { exec, pid } => (exec, Event::Spawned(pid)),
        FromRunner::SpawnFailed { exec, message } => {
            (exec, Event::SpawnFailed(SpawnError::Failed(message)))
        }
        FromRunner::Output { exec, seq, data } => (exec, Event::Output(seq, data.0)),
        FromRunner::Exited { exec, seq, exit, stderr } => {
            (exec, Event::Exited(seq, exit.into(), stderr))
        }
        FromRunner::InputAck { exec, seq } => {
            if let Some(Route::Follow(follower)) = routes.get(&exec) {
                follower.inputs.acked(seq);
            }
            return;
        }
        FromRunner::Error { message } => {
            tracing::warn!(message, "the runner reported an error");
            return;
        }
        other => {
            tracing::warn!(frame = kind_of(&other), "unexpected frame from the runner");
            return;
        }
    };
    // The last event of an execution: it is routed no more (its exit is still acknowledged
    // through its ledger, which needs no route).
    let last = matches!(event, Event::SpawnFailed(_) | Event::Exited(..));
    match routes.entry(exec.clone()).or_insert_with(|| Route::Parked(Vec::new())) {
        Route::Follow(follower) => {
            if matches!(event, Event::Spawned(_)) {
                follower.spawn = None;
            }
            let gone = follower.events.send(event).is_err();
            if last {
                routes.remove(&exec);
            } else if gone {
                routes.insert(exec.clone(), Route::Forgotten);
                let _ = wire.send(ToRunner::Forget { exec });
            }
        }
        Route::Parked(parked) => parked.push(event),
        Route::Forgotten => {}
    }
}

/// Links to in-process runners whose network can be taken away (tests of this crate).
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::runner::{Runner, RunnerClient};

    /// Opens in-process connections to a runner; `kill` of the guard closes the stream.
    pub(crate) struct InProcess {
        runner: Arc<Mutex<Runner>>,
        /// While set, opening fails (transiently): the network is away.
        down: Arc<Mutex<bool>>,
    }

    struct Cut(Option<tokio::task::AbortHandle>);

    impl TransportGuard for Cut {
        fn kill(&mut self) -> BoxFuture<'_, ()> {
            if let Some(serving) = self.0.take() {
                serving.abort();
            }
            Box::pin(async {})
        }

        fn close(self: Box<Self>, _bound: Duration) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    impl Transport for InProcess {
        fn open(&mut self) -> BoxFuture<'_, Result<Opened, OpenError>> {
            Box::pin(async move {
                if *self.down.lock().unwrap() {
                    return Err(OpenError {
                        message: "the network is away".into(),
                        transient: true,
                    });
                }
                let (near, far) = tokio::io::duplex(1 << 16);
                let host = self.runner.lock().unwrap().clone();
                let serving = tokio::spawn(async move {
                    let _ = host.serve_connection(far).await;
                });
                let connection = handshake(near)
                    .await
                    .map_err(|err| OpenError { message: err.to_string(), transient: true })?;
                Ok(Opened { connection, guard: Some(Box::new(Cut(Some(serving.abort_handle())))) })
            })
        }
    }

    pub(crate) fn quick() -> Backoff {
        Backoff { first: Duration::from_millis(10), max: Duration::from_millis(50), attempts: 1000 }
    }

    /// A link to `runner`: the client, what its first connection listed, where to take the
    /// network away, and where to put another runner in its place.
    pub(crate) async fn open(
        runner: &Runner,
    ) -> (RunnerClient, Vec<ExecutionInfo>, Arc<Mutex<bool>>, Arc<Mutex<Runner>>) {
        let down = Arc::new(Mutex::new(false));
        let host = Arc::new(Mutex::new(runner.clone()));
        let transport = InProcess { runner: host.clone(), down: down.clone() };
        let (client, held) = RunnerClient::open(transport, quick()).await.unwrap();
        (client, held, down, host)
    }

    pub(crate) async fn link(runner: &Runner) -> (RunnerClient, Arc<Mutex<bool>>) {
        let (client, down, _) = link_to(runner).await;
        (client, down)
    }

    /// A link to `runner`, and where to put another runner in its place.
    pub(crate) async fn link_to(
        runner: &Runner,
    ) -> (RunnerClient, Arc<Mutex<bool>>, Arc<Mutex<Runner>>) {
        let (client, held, down, host) = open(runner).await;
        assert!(held.is_empty());
        (client, down, host)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{link, link_to};
    use super::*;
    use crate::runner::{AckPolicy, Runner, RunnerClient, RunnerConfig};

    /// `program args` in a temporary directory (returned with it: it must outlive the run).
    fn in_tmp(program: &str, args: &[&str]) -> (SpawnSpec, tempfile::TempDir) {
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

    async fn live_again(client: &RunnerClient, at_least: u64) {
        let mut state = client.state();
        let live = state.wait_for(|s| match s {
            LinkState::Live { number } => *number >= at_least,
            LinkState::Reconnecting | LinkState::Gone(_) => false,
        });
        tokio::time::timeout(Duration::from_secs(10), live).await.unwrap().unwrap();
    }

    /// Finding 2 of the SSH review: a stop requested while the link reconnects is not lost
    /// with the dropped connection: the kill goes again on the next one and the agent ends.
    #[tokio::test]
    async fn i20_d8_a_stop_during_a_connection_drop_ends_the_agent() {
        let runner = Runner::new(RunnerConfig::default());
        let (client, down) = link(&runner).await;
        let (spec, _dir) = in_tmp("sleep", &["300"]);
        let execution = client.spawn_with("agent-d8", spec, AckPolicy::OnDelivery).await.unwrap();
        let pid = nix::unistd::Pid::from_raw(execution.control.pid());
        // The connection drops and stays down; the stop is asked while there is none.
        *down.lock().unwrap() = true;
        client.drop_transport();
        let mut state = client.state();
        state.wait_for(|s| *s == LinkState::Reconnecting).await.unwrap();
        let control = execution.control;
        let stop = tokio::spawn(async move { control.stop(Duration::from_millis(200)).await });
        *down.lock().unwrap() = false;
        let exit = tokio::time::timeout(Duration::from_secs(10), stop)
            .await
            .expect("the stop ends once the link is back")
            .unwrap();
        assert!(!matches!(exit, ExitInfo::Unknown { .. }), "{exit:?}");
        assert!(nix::sys::signal::kill(pid, None).is_err(), "the agent {pid} is gone");
        runner.shutdown().await;
    }

    /// A second execution spawned under a name the link already follows is refused, and the
    /// first stays followed: it is not forgotten on the next connection.
    #[tokio::test]
    async fn i20_d20_a_duplicate_execution_name_is_refused_and_the_first_stays_followed() {
        let runner = Runner::new(RunnerConfig::default());
        let (client, _down) = link(&runner).await;
        let (spec, _dir) = in_tmp("sleep", &["30"]);
        let first = client.spawn("agent-d20", spec.clone()).await.unwrap();
        let second = client.spawn("agent-d20", spec).await.err().expect("a second is refused");
        assert_eq!(second, SpawnError::AlreadyRuns("agent-d20".into()));
        assert!(second.to_string().contains("agent-d20 already runs"), "{second}");
        client.drop_transport();
        live_again(&client, 2).await;
        let pid = nix::unistd::Pid::from_raw(first.control.pid());
        assert!(nix::sys::signal::kill(pid, None).is_ok(), "the first still runs");
        let exit = first.control.stop(Duration::from_millis(200)).await;
        assert!(!matches!(exit, ExitInfo::Unknown { .. }), "{exit:?}");
        runner.shutdown().await;
    }

    /// What the runner holds that nobody on the link follows (an agent of a server that was
    /// killed, or of a link that gave up) is forgotten, and so killed, on a new connection:
    /// no agent keeps working in a worktree next to a new one.
    #[tokio::test]
    async fn i39_a_new_connection_forgets_what_nobody_follows() {
        let runner = Runner::new(RunnerConfig::default());
        let (client, down) = link(&runner).await;
        // Another server's agent, left to the runner (a runner has one owner at a time: this
        // link cannot reach it meanwhile).
        *down.lock().unwrap() = true;
        let (near, far) = tokio::io::duplex(1 << 16);
        let host = runner.clone();
        tokio::spawn(async move { host.serve_connection(far).await });
        let (other, _) = RunnerClient::connect(near).await.unwrap();
        let (spec, _dir) = in_tmp("sleep", &["300"]);
        let stranger = other.spawn("stranger", spec).await.unwrap();
        let pid = nix::unistd::Pid::from_raw(stranger.control.pid());
        other.finish().await;
        *down.lock().unwrap() = false;
        live_again(&client, 2).await;
        let gone = tokio::time::timeout(Duration::from_secs(10), async {
            while nix::sys::signal::kill(pid, None).is_ok() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(gone.is_ok(), "the stranger {pid} still runs");
        runner.shutdown().await;
    }

    /// Review finding: the actor wrote while it did not read, and the runner writes while it
    /// does not read either: input and output both larger than the pipes between them
    /// (an agent echoing a large input) would wait on each other for ever.
    #[tokio::test]
    async fn i39_large_input_and_output_at_once_do_not_wait_on_each_other() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        const BYTES: usize = 4 << 20;
        let runner = Runner::new(RunnerConfig::default());
        let (client, _down) = link(&runner).await;
        let (spec, _dir) = in_tmp("cat", &[]);
        let cat = client.spawn_with("cat", spec, AckPolicy::OnDelivery).await.unwrap();
        let (mut stdin, mut stdout) = (cat.stdin, cat.stdout);
        let written = tokio::spawn(async move {
            stdin.write_all(&vec![b'x'; BYTES]).await.unwrap();
        });
        let mut echoed = vec![0u8; BYTES];
        let read = tokio::time::timeout(Duration::from_secs(30), stdout.read_exact(&mut echoed));
        assert!(read.await.is_ok(), "the echo of 4 MiB did not come back within 30 s");
        written.await.unwrap();
        runner.shutdown().await;
    }

    /// Review finding: what the first connection listed is held for the caller across a
    /// reconnect (not forgotten as nobody's), and taken over afterwards.
    #[tokio::test]
    async fn i39_what_the_first_connection_listed_is_held_across_a_reconnect() {
        use tokio::io::AsyncReadExt;
        let runner = Runner::new(RunnerConfig::default());
        // An agent of an earlier server, left to the runner.
        let (near, far) = tokio::io::duplex(1 << 16);
        let host = runner.clone();
        tokio::spawn(async move { host.serve_connection(far).await });
        let (earlier, _) = RunnerClient::connect(near).await.unwrap();
        let (spec, _dir) = in_tmp("sh", &["-c", "sleep 1; echo late"]);
        earlier.spawn("left", spec).await.unwrap();
        earlier.finish().await;
        let (client, held, _down, _) = testing::open(&runner).await;
        let info = held.iter().find(|e| e.exec == "left").expect("listed").clone();
        client.drop_transport();
        live_again(&client, 2).await;
        let mut left = client.attach_with(&info, AckPolicy::OnDelivery, 0);
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(10), left.stdout.read_to_string(&mut out))
            .await
            .expect("the held execution's output comes")
            .unwrap();
        assert_eq!(out, "late\n");
        runner.shutdown().await;
    }

    /// Review finding: a spawn whose caller goes away before the runner answered (a start
    /// cancelled) is forgotten, and so killed, when the answer comes: no orphan. The runner
    /// here is the test, which answers when it wants.
    #[tokio::test]
    async fn i39_a_spawn_given_up_before_its_answer_is_forgotten() {
        use crate::runner::proto::RunnerCodec;
        let (near, far) = tokio::io::duplex(1 << 16);
        let fake = async move {
            let mut runner = Framed::new(far, RunnerCodec::default());
            assert!(matches!(runner.next().await, Some(Ok(ToRunner::Hello { .. }))));
            let welcome = FromRunner::Welcome { version: PROTOCOL_VERSION, executions: vec![] };
            runner.send(welcome).await.unwrap();
            runner
        };
        let (connected, mut runner) = tokio::join!(RunnerClient::connect(near), fake);
        let (client, _) = connected.unwrap();
        let (spec, _dir) = in_tmp("sleep", &["300"]);
        // Polled once (the spawn is asked for), then dropped before any answer.
        let spawning = futures::FutureExt::now_or_never(client.spawn("cancelled", spec));
        assert!(spawning.is_none(), "no answer yet");
        let wait = Duration::from_secs(10);
        let asked = tokio::time::timeout(wait, runner.next()).await.unwrap();
        assert!(matches!(asked, Some(Ok(ToRunner::Spawn { ref exec, .. })) if exec == "cancelled"));
        let spawned = FromRunner::Spawned { exec: "cancelled".into(), pid: 4242 };
        runner.send(spawned).await.unwrap();
        let next = tokio::time::timeout(wait, runner.next()).await.unwrap().unwrap().unwrap();
        assert_eq!(next, ToRunner::Forget { exec: "cancelled".into() });
    }

    /// Output and input go on across a dropped connection on one pipe each: every byte once,
    /// in order, and an execution the new runner connection does not list ends as lost.
    #[tokio::test]
    async fn i39_one_pipe_each_way_across_a_dropped_connection() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let runner = Runner::new(RunnerConfig::default());
        let (client, _down, host) = link_to(&runner).await;
        let (spec, _dir) = in_tmp("cat", &[]);
        let mut cat = client.spawn_with("cat", spec, AckPolicy::OnCommit).await.unwrap();
        let mut seen = vec![0u8; 4];
        cat.stdin.write_all(b"one\n").await.unwrap();
        cat.stdout.read_exact(&mut seen).await.unwrap();
        client.drop_transport();
        cat.stdin.write_all(b"two\n").await.unwrap();
        live_again(&client, 2).await;
        cat.stdin.write_all(b"three\n").await.unwrap();
        drop(cat.stdin);
        let mut rest = Vec::new();
        cat.stdout.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"two\nthree\n", "nothing twice, nothing lost");
        let exit = tokio::time::timeout(Duration::from_secs(10), cat.control.wait()).await.unwrap();
        assert_eq!(exit, ExitInfo::Exited { code: 0 });

        let (spec, _dir) = in_tmp("sleep", &["300"]);
        let sleeper = client.spawn("sleeper", spec).await.unwrap();
        // The runner died meanwhile (the OOM killer) and a new one took its place.
        let fresh = Runner::new(RunnerConfig::default());
        *host.lock().unwrap() = fresh.clone();
        client.drop_transport();
        let exit = tokio::time::timeout(Duration::from_secs(10), sleeper.control.wait()).await;
        let Ok(ExitInfo::Unknown { reason }) = exit else { panic!("{exit:?}") };
        assert_eq!(reason, LOST);
        runner.shutdown().await;
        fresh.shutdown().await;
    }
}
