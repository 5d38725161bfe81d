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
//!
//! Here: the link's state (its routes, the commands it takes) and its life, connection after
//! connection (`Link::run`). `connection.rs` opens a connection and handshakes, `serve.rs`
//! serves one (routing frames, writing them, taking executions over), `reconnect.rs` opens
//! it again with back-off and answers what it can meanwhile.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

use super::ledger::{Acks, Inputs};
use super::proto::{ExecutionInfo, SpawnSpec, ToRunner};
use crate::ExitInfo;

mod connection;
mod reconnect;
mod serve;

pub(crate) use connection::NotReopened;
pub use connection::{
    Handshaken, OpenError, Opened, RunnerStream, Transport, TransportGuard, handshake,
};
pub use reconnect::Backoff;

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
    /// What the execution kept of its acknowledged output (before every item), for a
    /// follower that takes over an execution of an earlier server.
    Scrollback(Bytes),
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
    /// Whether it still takes the execution's scrollback: one taken over from an earlier
    /// server, until the scrollback or any item reached it.
    pub scrollback: bool,
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
    /// A new size for an execution's pseudo-terminal.
    Resize {
        exec: String,
        cols: u16,
        rows: u16,
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

/// Awaits the next follower task that ends (never resolves while there is none).
async fn reap(followers: &mut JoinSet<()>) -> Option<()> {
    if followers.is_empty() {
        std::future::pending::<()>().await;
    }
    followers.join_next().await.map(|_| ())
}

/// Links to in-process runners whose network can be taken away (tests of this crate).
#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use futures::{SinkExt, StreamExt};
    use tokio_util::codec::Framed;

    use super::testing::{link, link_to};
    use super::*;
    use crate::runner::proto::{FromRunner, PROTOCOL_VERSION};
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
            pty: None,
            scrollback: 0,
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
