//! How an agent execution is started: a real process (`LocalLauncher`, through the runtime
//! crate), a process owned by a runner (`RunnerLauncher`), or the built-in mock agent in-process over a pipe (`BuiltinMockLauncher`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kandev_runtime::{AgentProcess, ExitInfo, ProcessSpec};
use tokio::io::{AsyncRead, AsyncWrite};

/// What to run, and where. `env` holds the profile's secrets: its `Debug` shows the names
/// only, and the runtime scrubs the values from the agent's stderr, like `secrets` (what the
/// agent gets in ACP messages: its MCP token, the env and header values of its MCP servers).
#[derive(Clone, PartialEq, Eq)]
pub struct LaunchSpec {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Set by the engine when this runs the built-in mock agent (the Mock profile without a
    /// command of its own): the mock agent's flags, so a launcher may run it in-process
    /// instead of as `program args` ([`BuiltinMockLauncher`]). Never guessed from `program`
    /// or `args`: a profile whose own command happens to run the mock is a real process.
    pub builtin_mock: Option<Vec<String>>,
    pub secrets: Vec<String>,
    /// The stored secrets (issue 50) whose values are in `env` or the MCP servers, by name:
    /// an SSH or container executor must allow each of them.
    pub secret_names: Vec<String>,
}

impl std::fmt::Debug for LaunchSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<String> =
            self.env.iter().map(|(name, _)| format!("{name}=<hidden>")).collect();
        f.debug_struct("LaunchSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &env)
            .field("cwd", &self.cwd)
            .field("builtin_mock", &self.builtin_mock)
            .field("secrets", &self.secrets.len())
            .field("secret_names", &self.secret_names)
            .finish()
    }
}

/// A started execution: the agent's stdout and stdin, and a way to stop and watch it.
pub struct Launched {
    pub reader: Box<dyn AsyncRead + Send + Unpin>,
    pub writer: Box<dyn AsyncWrite + Send + Unpin>,
    pub control: Arc<dyn ExecutionControl>,
    /// Set when a runner runs it: its output is acknowledged only once the session committed
    /// its effects (`crate::position`).
    pub runner: Option<RunnerExec>,
}

/// An execution a runner runs: its name there and the acknowledgements of its output
/// ([`kandev_runtime::runner::AckPolicy::OnCommit`]).
#[derive(Clone)]
pub struct RunnerExec {
    pub exec: String,
    pub acks: kandev_runtime::runner::Acks,
    /// Where the ACP client names the lines a restarted server must know the runner took
    /// (issue 38 item 12; `crate::session::inputs`).
    pub keys: kandev_runtime::runner::InputKeys,
}

/// Supervision of one execution.
pub trait ExecutionControl: Send + Sync {
    /// Process id and process group, when it is a real process.
    fn pid(&self) -> Option<i32>;
    fn pgid(&self) -> Option<i32>;
    /// The last lines the agent wrote to stderr.
    fn stderr_tail(&self) -> String;
    /// Ends it (TERM to the group, `grace`, KILL) and returns how it exited.
    fn stop(&self, grace: Duration) -> BoxFuture<'_, ExitInfo>;
    /// Resolves when it has exited, by itself or not.
    fn wait(&self) -> BoxFuture<'_, ExitInfo>;
    /// Called once the handling of an exit [`Self::wait`] returned is committed: a runner's
    /// execution is forgotten only then (its exit acknowledges every earlier output item).
    fn exit_handled(&self) {}
    /// Whether it runs on this server's host: only then may it use this host's files and
    /// terminals (an SSH executor's agent is offered neither, and refused if it asks).
    fn on_this_host(&self) -> bool {
        true
    }
}

/// Starts executions.
pub trait Launcher: Send + Sync + 'static {
    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'static, Result<Launched, String>>;

    /// The local runner this launcher runs agents on, if any: users' terminals and dev
    /// servers run there too, so they outlive a restart of the server as its agents do.
    fn local_runner(&self) -> Option<kandev_runtime::runner::RunnerClient> {
        None
    }
}

/// Runs agents as local processes in their own process group.
pub struct LocalLauncher;

struct LocalControl(AgentProcess);

impl ExecutionControl for LocalControl {
    fn pid(&self) -> Option<i32> {
        Some(self.0.pid())
    }

    fn pgid(&self) -> Option<i32> {
        Some(self.0.pgid())
    }

    fn stderr_tail(&self) -> String {
        self.0.stderr_tail()
    }

    fn stop(&self, grace: Duration) -> BoxFuture<'_, ExitInfo> {
        Box::pin(self.0.stop(grace))
    }

    fn wait(&self) -> BoxFuture<'_, ExitInfo> {
        Box::pin(async move {
            let exit = self.0.wait().await;
            // Let the stderr reader catch up so the tail explains a crash.
            let _ =
                tokio::time::timeout(Duration::from_millis(500), self.0.stderr_finished()).await;
            exit
        })
    }
}

impl Launcher for LocalLauncher {
    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'static, Result<Launched, String>> {
        Box::pin(async move {
            let mut process_spec = ProcessSpec::new(&spec.program, &spec.cwd).args(&spec.args);
            for (key, value) in &spec.env {
                process_spec = process_spec.env(key, value);
            }
            for secret in &spec.secrets {
                process_spec = process_spec.secret(secret);
            }
            let mut process = kandev_runtime::spawn(process_spec).map_err(|e| e.to_string())?;
            let stdio = process
                .take_stdio()
                .ok_or_else(|| "the agent's stdio is not available".to_owned())?;
            Ok(Launched {
                reader: Box::new(stdio.stdout),
                writer: Box::new(stdio.stdin),
                control: Arc::new(LocalControl(process)),
                runner: None,
            })
        })
    }
}

/// The built-in mock agent's launcher: runs it in-process over a pipe, with its flags, when
/// the spec says it is the built-in mock ([`LaunchSpec::builtin_mock`]); every other agent
/// starts as a real process ([`LocalLauncher`]). Engine and API tests use it so sessions of
/// the Mock profile need no `kandev` binary and no process; `kandev serve` uses
/// [`LocalLauncher`], which runs the mock as `kandev mock-agent` like any agent.
pub struct BuiltinMockLauncher;

struct MockControl {
    exit: tokio::sync::watch::Receiver<Option<ExitInfo>>,
    abort: tokio::task::AbortHandle,
}

impl ExecutionControl for MockControl {
    fn pid(&self) -> Option<i32> {
        None
    }

    fn pgid(&self) -> Option<i32> {
        None
    }

    fn stderr_tail(&self) -> String {
        String::new()
    }

    fn stop(&self, _grace: Duration) -> BoxFuture<'_, ExitInfo> {
        Box::pin(async move {
            self.abort.abort();
            self.wait().await
        })
    }

    fn wait(&self) -> BoxFuture<'_, ExitInfo> {
        Box::pin(async move {
            let mut exit = self.exit.clone();
            match exit.wait_for(Option::is_some).await {
                Ok(value) => value.clone().unwrap_or(ExitInfo::Signaled { signal: 9 }),
                Err(_) => ExitInfo::Signaled { signal: 9 },
            }
        })
    }
}

impl Launcher for BuiltinMockLauncher {
    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'static, Result<Launched, String>> {
        let Some(flags) = spec.builtin_mock.clone() else {
            return LocalLauncher.launch(spec);
        };
        Box::pin(async move {
            let config =
                kandev_mock_agent::MockConfig::from_args(&flags).map_err(|e| e.0.to_string())?;
            let (client_side, agent_side) = tokio::io::duplex(1 << 20);
            let (agent_in, agent_out) = tokio::io::split(agent_side);
            let (reader, writer) = tokio::io::split(client_side);
            let (exit_tx, exit_rx) = tokio::sync::watch::channel(None);
            #[expect(
                clippy::disallowed_methods,
                reason = "owned by the `MockControl`, which aborts it"
            )]
            let task = tokio::spawn(async move {
                let exit = match kandev_mock_agent::run(config, agent_in, agent_out).await {
                    Ok(outcome) => ExitInfo::Exited { code: outcome.exit_code() },
                    Err(_) => ExitInfo::Exited { code: 1 },
                };
                // An aborted task never gets here; dropping the sender reads as "killed".
                let _ = exit_tx.send(Some(exit));
            });
            let control = MockControl { exit: exit_rx, abort: task.abort_handle() };
            Ok(Launched {
                reader: Box::new(reader),
                writer: Box::new(writer),
                control: Arc::new(control),
                runner: None,
            })
        })
    }
}

/// Runs agents through a runner (`kandev runner`, docs/architecture.md "Runners"): the
/// runner owns the processes and relays their stdio over its connection, so an agent can
/// outlive this server. The connection is the one runner stack's
/// ([`kandev_runtime::runner::RunnerClient`]): opened again after a drop (a runner that died
/// is started again by its transport), every execution taken over on the new connection or
/// ended as lost. The built-in mock runs as a real process (`program args`) here, as with
/// [`LocalLauncher`].
pub struct RunnerLauncher {
    client: kandev_runtime::runner::RunnerClient,
}

impl RunnerLauncher {
    pub fn new(client: kandev_runtime::runner::RunnerClient) -> Self {
        Self { client }
    }

    /// The runner connection in use (reconciliation takes over what it lists; a shutdown
    /// closes it).
    pub fn client(&self) -> kandev_runtime::runner::RunnerClient {
        self.client.clone()
    }
}

/// A runner's execution; its exit is acknowledged (the runner forgets it) once handled: when
/// this server stopped it, or when the exit's handling is committed.
pub(crate) struct RunnerControl {
    pub control: kandev_runtime::runner::RemoteControl,
    pub acks: kandev_runtime::runner::Acks,
    /// Whether the runner runs on this server's host (an SSH executor's does not: its pid is
    /// that host's, and nothing here may signal it or offer it this host's files).
    pub here: bool,
}

impl ExecutionControl for RunnerControl {
    fn pid(&self) -> Option<i32> {
        self.here.then(|| self.control.pid())
    }

    fn pgid(&self) -> Option<i32> {
        self.here.then(|| self.control.pid())
    }

    fn stderr_tail(&self) -> String {
        self.control.stderr_tail()
    }

    fn stop(&self, grace: Duration) -> BoxFuture<'_, ExitInfo> {
        Box::pin(async move {
            let exit = self.control.stop(grace).await;
            self.forget_exit();
            exit
        })
    }

    fn wait(&self) -> BoxFuture<'_, ExitInfo> {
        // Acknowledged by `exit_handled`, after the output before it is committed.
        Box::pin(self.control.wait())
    }

    fn exit_handled(&self) {
        self.forget_exit();
    }

    fn on_this_host(&self) -> bool {
        self.here
    }
}

impl RunnerControl {
    /// Acknowledges the exit, once it arrived: the runner forgets the execution.
    fn forget_exit(&self) {
        if let Some(seq) = self.acks.exit_seq() {
            self.acks.commit(seq);
        }
    }
}

/// Starts `spec` as execution `exec` through `client`, its output acknowledged once the
/// session committed its effects ([`kandev_runtime::runner::AckPolicy::OnCommit`]). `here`:
/// the runner runs on this server's host.
pub(crate) async fn launch_through(
    client: &kandev_runtime::runner::RunnerClient,
    exec: String,
    spec: kandev_runtime::runner::SpawnSpec,
    here: bool,
) -> Result<Launched, String> {
    let policy = kandev_runtime::runner::AckPolicy::OnCommit;
    let execution = client.spawn_with(&exec, spec, policy).await.map_err(|e| e.to_string())?;
    let (acks, keys) = (execution.acks, execution.keys);
    let control = RunnerControl { control: execution.control, acks: acks.clone(), here };
    Ok(Launched {
        reader: Box::new(execution.stdout),
        writer: Box::new(execution.stdin),
        control: Arc::new(control),
        runner: Some(RunnerExec { exec, acks, keys }),
    })
}

impl Launcher for RunnerLauncher {
    fn launch(&self, spec: LaunchSpec) -> BoxFuture<'static, Result<Launched, String>> {
        let client = self.client.clone();
        Box::pin(async move {
            let exec = uuid::Uuid::new_v4().to_string();
            let spawn = kandev_runtime::runner::SpawnSpec {
                program: spec.program,
                args: spec.args,
                env: spec.env,
                cwd: spec.cwd,
                secrets: spec.secrets,
                pty: None,
                scrollback: 0,
            };
            launch_through(&client, exec, spawn, true).await
        })
    }

    fn local_runner(&self) -> Option<kandev_runtime::runner::RunnerClient> {
        Some(self.client.clone())
    }
}
