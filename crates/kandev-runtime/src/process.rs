//! Local process supervision: spawning an agent in its own process group, handing out its
//! stdio, keeping a bounded stderr tail, and stopping or killing the whole group.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::group::ProcessGroup;
use crate::redact::Redactor;
use crate::stderr::{StderrRing, drain_into};
use crate::{ExitInfo, RuntimeError};

/// Default size of the stderr ring: the last 64 KiB are kept.
pub const DEFAULT_STDERR_LIMIT: usize = 64 * 1024;

/// How long [`AgentProcess::stop`] waits for the leader after `SIGKILL` before giving up
/// with [`ExitInfo::Unknown`] (only a process stuck in uninterruptible sleep takes this long).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Which environment the child starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EnvPolicy {
    /// The server's environment plus [`ProcessSpec::env`] (later entries win).
    #[default]
    Inherit,
    /// Only [`ProcessSpec::env`].
    Clear,
}

/// What to run and where. Its `Debug` shows the env's names, never their values.
#[derive(Clone)]
pub struct ProcessSpec {
    /// The program; looked up on `PATH` unless it contains a `/`.
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Variables set on top of (or, with [`EnvPolicy::Clear`], instead of) the inherited ones.
    pub env: Vec<(String, String)>,
    pub env_policy: EnvPolicy,
    /// Working directory; must exist.
    pub cwd: PathBuf,
    /// How many of the most recent stderr bytes are kept.
    pub stderr_limit: usize,
    /// More values to scrub from the stderr tail besides the env values (secrets the agent
    /// gets another way, e.g. in its protocol's messages).
    pub secrets: Vec<String>,
}

impl ProcessSpec {
    /// A spec with no arguments, the inherited environment and the default stderr limit.
    pub fn new(program: impl Into<OsString>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            env_policy: EnvPolicy::Inherit,
            cwd: cwd.into(),
            stderr_limit: DEFAULT_STDERR_LIMIT,
            secrets: Vec::new(),
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, A>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// A value to scrub from the stderr tail, like an env value.
    pub fn secret(mut self, value: impl Into<String>) -> Self {
        self.secrets.push(value.into());
        self
    }

    /// Start from an empty environment instead of the server's.
    pub fn clear_env(mut self) -> Self {
        self.env_policy = EnvPolicy::Clear;
        self
    }

    pub fn stderr_limit(mut self, bytes: usize) -> Self {
        self.stderr_limit = bytes;
        self
    }

    fn program_name(&self) -> String {
        self.program.to_string_lossy().into_owned()
    }
}

impl fmt::Debug for ProcessSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env: Vec<String> =
            self.env.iter().map(|(name, _)| format!("{name}=<hidden>")).collect();
        f.debug_struct("ProcessSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &env)
            .field("env_policy", &self.env_policy)
            .field("cwd", &self.cwd)
            .field("stderr_limit", &self.stderr_limit)
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

/// The agent's stdin and stdout, for the ACP connection.
#[derive(Debug)]
pub struct AgentStdio {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
}

/// A running (or finished) agent process and its process group.
///
/// Dropping it sends `SIGKILL` to the whole group (synchronously), unless the group has
/// already been observed empty.
pub struct AgentProcess {
    program: String,
    pid: i32,
    stdio: Option<AgentStdio>,
    /// Killed when this is dropped; never signalled once observed empty.
    group: ProcessGroup,
    exit: watch::Receiver<Option<ExitInfo>>,
    stderr: Arc<Mutex<StderrRing>>,
    /// Scrubs the spec's env values out of the stderr tail.
    redactor: Redactor,
    stderr_done: watch::Receiver<bool>,
    stderr_task: JoinHandle<()>,
}

/// Starts `spec` in a new process group with stdin/stdout piped and stderr drained into a
/// bounded ring.
///
/// Must be called from within a tokio runtime: it spawns the tasks that reap the child and
/// read its stderr.
pub fn spawn(spec: ProcessSpec) -> Result<AgentProcess, RuntimeError> {
    let program = spec.program_name();
    check_cwd(&spec)?;

    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if spec.env_policy == EnvPolicy::Clear {
        command.env_clear();
    }
    command.envs(spec.env.iter().map(|(k, v)| (k, v)));

    // `kill_on_drop` is a backstop if the reaper task is dropped with the runtime; the
    // group is killed when the `AgentProcess` (its `ProcessGroup`) is dropped.
    let (mut child, group) =
        ProcessGroup::spawn(&mut command).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => RuntimeError::NotFound { program: program.clone() },
            io::ErrorKind::PermissionDenied => {
                RuntimeError::PermissionDenied { program: program.clone() }
            }
            _ => RuntimeError::Spawn { program: program.clone(), source },
        })?;

    let pid = group.pgid();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        // Not expected with piped stdio; dropping `group` and `child` takes the child down.
        return Err(RuntimeError::Spawn {
            program,
            source: io::Error::other("spawned process has no stdio pipes"),
        });
    };
    tracing::debug!(pid, program = %program, cwd = %spec.cwd.display(), "spawned agent process");

    let (exit_tx, exit) = watch::channel(None);
    // The reaper runs until the leader exits; it is never aborted so the leader is always
    // reaped, even after the `AgentProcess` is dropped (drop kills the group first).
    #[expect(
        clippy::disallowed_methods,
        reason = "the reaper, never aborted so the leader is always reaped; ends when the leader exits"
    )]
    tokio::spawn(async move {
        let info = match child.wait().await {
            Ok(status) => ExitInfo::from(status),
            Err(e) => ExitInfo::Unknown { reason: format!("waiting for the process failed: {e}") },
        };
        tracing::debug!(pid, exit = %info, "agent process exited");
        exit_tx.send_replace(Some(info));
    });

    let ring = Arc::new(Mutex::new(StderrRing::new(spec.stderr_limit)));
    let (done_tx, stderr_done) = watch::channel(false);
    #[expect(
        clippy::disallowed_methods,
        reason = "owned by the `AgentProcess` (`stderr_task`); ends at the end of the pipe"
    )]
    let stderr_task = tokio::spawn(drain_into(stderr, Arc::clone(&ring), done_tx, pid));

    Ok(AgentProcess {
        program,
        pid,
        stdio: Some(AgentStdio { stdin, stdout }),
        group,
        exit,
        stderr: ring,
        redactor: Redactor::new(
            spec.env.iter().map(|(_, value)| value.clone()).chain(spec.secrets.iter().cloned()),
        ),
        stderr_done,
        stderr_task,
    })
}

/// Gives a missing working directory its own error; `spawn` would report it as a missing
/// program (both are `ENOENT`).
fn check_cwd(spec: &ProcessSpec) -> Result<(), RuntimeError> {
    match std::fs::metadata(&spec.cwd) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(RuntimeError::CwdNotADirectory { cwd: spec.cwd.clone() }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err(RuntimeError::CwdNotFound { cwd: spec.cwd.clone() })
        }
        // Anything else (e.g. permissions) is left to `spawn` to report.
        Err(_) => Ok(()),
    }
}

impl AgentProcess {
    /// The leader's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The process group id; equal to [`pid`](Self::pid) since the leader starts the group.
    pub fn pgid(&self) -> i32 {
        self.pid
    }

    /// The program as given in the spec (for messages).
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Takes stdin and stdout; `None` if they were already taken.
    pub fn take_stdio(&mut self) -> Option<AgentStdio> {
        self.stdio.take()
    }

    /// The most recent stderr output (at most the configured limit), lossily decoded, with
    /// every value of the spec's env scrubbed ([`Redactor`]). When older output was dropped,
    /// the tail starts at a line boundary.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner).tail();
        self.redactor.redact(&tail)
    }

    /// Resolves once stderr reached end of file, i.e. every process holding it has closed
    /// it. Await it (with a timeout) after [`wait`](Self::wait) to get the complete tail of
    /// a crashed agent.
    pub async fn stderr_finished(&self) {
        let mut done = self.stderr_done.clone();
        // An error means the reader is gone, which also means no more output arrives.
        let _ = done.wait_for(|finished| *finished).await;
    }

    /// The exit status, if the leader's exit has been observed.
    pub fn try_exit_status(&self) -> Option<ExitInfo> {
        self.exit.borrow().clone()
    }

    /// Waits for the leader to exit (e.g. to notice a crash). Can be awaited by several
    /// tasks and concurrently with [`stop`](Self::stop).
    pub async fn wait(&self) -> ExitInfo {
        let mut exit = self.exit.clone();
        let observed =
            exit.wait_for(Option::is_some).await.map(|status| status.clone()).ok().flatten();
        // The sender is dropped only after it stored the status, so this is `Some` unless the
        // reaper task was torn down (runtime shutdown).
        observed.or_else(|| exit.borrow().clone()).unwrap_or_else(|| ExitInfo::Unknown {
            reason: "the process reaper stopped before the process exited".to_owned(),
        })
    }

    /// Stops the agent: `SIGTERM` to the group, up to `grace` for the leader to exit, then
    /// `SIGKILL` to the group. Once the leader is gone the group gets `SIGKILL` once more, so
    /// children that survived `SIGTERM` do not outlive it, and the stop returns only when no
    /// process of the group runs any more (bounded by the same wait as the leader's). Returns
    /// the leader's exit status.
    ///
    /// Idempotent; if the leader already exited, only the final `SIGKILL` is sent.
    pub async fn stop(&self, grace: Duration) -> ExitInfo {
        if self.try_exit_status().is_none() {
            self.signal(Signal::SIGTERM);
            if tokio::time::timeout(grace, self.wait()).await.is_err() {
                tracing::debug!(pid = self.pid, ?grace, "agent did not exit within grace; killing");
                self.signal(Signal::SIGKILL);
            }
        }
        let info = match tokio::time::timeout(KILL_WAIT, self.wait()).await {
            Ok(info) => info,
            Err(_) => {
                self.signal(Signal::SIGKILL);
                ExitInfo::Unknown { reason: "the process did not exit after sigkill".to_owned() }
            }
        };
        self.signal(Signal::SIGKILL);
        if !self.group.wait_empty(KILL_WAIT).await {
            tracing::warn!(pgid = self.pid, "processes of the agent's group survived sigkill");
        }
        info
    }

    /// Signals the group unless it was already observed empty.
    fn signal(&self, signal: Signal) {
        self.group.signal(signal);
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        // A process that left the group could keep stderr open forever. (The group itself
        // is killed when the `group` field is dropped, right after this.)
        self.stderr_task.abort();
    }
}

impl fmt::Debug for AgentProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentProcess")
            .field("program", &self.program)
            .field("pid", &self.pid)
            .field("exit", &*self.exit.borrow())
            .field("stdio_taken", &self.stdio.is_none())
            .finish_non_exhaustive()
    }
}
