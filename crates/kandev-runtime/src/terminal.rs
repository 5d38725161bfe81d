//! Commands run on someone's behalf with their output kept: an agent's ACP `terminal/*`
//! commands and a task's dev server. Each runs as the leader of its own process group
//! (`group::ProcessGroup`), stdout and stderr merged into one bounded buffer that drops from
//! the start at a UTF-8 boundary, and is killed as a group when its owner kills or drops it.
//!
//! The working directory is a confined [`Root`]: on Linux the child changes into the opened
//! directory itself (`/proc/self/fd/<fd>`), so a symlink swapped in after the check cannot
//! lead it elsewhere; elsewhere it uses the directory's path (checked, then used).

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::RuntimeError;
use crate::confine::Root;
use crate::group::ProcessGroup;

/// Default bound of a command's kept output (ACP's `outputByteLimit` when absent): 1 MiB.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;

/// How long the output readers may go on after the leader exited (a background job that
/// keeps the pipe open does not hold the exit back longer).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);

/// How long [`CommandTerminal::kill`] waits for the group to be empty.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// What to run.
#[derive(Clone)]
pub struct CommandSpec {
    /// The program; looked up on `PATH` unless it contains a `/`.
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Set on top of the server's environment.
    pub env: Vec<(String, String)>,
    /// Most output bytes kept; older output is dropped (at a UTF-8 boundary).
    pub output_limit: usize,
}

impl std::fmt::Debug for CommandSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("CommandSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &env)
            .field("output_limit", &self.output_limit)
            .finish()
    }
}

/// How a command ended: its exit code, or the signal that ended it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalExit {
    pub exit_code: Option<i32>,
    /// The signal's name (`SIGKILL`), when a signal ended it.
    pub signal: Option<String>,
}

/// The kept output of a command, and how it ended if it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalOutput {
    /// The most recent output (lossy UTF-8: a character cut by a read shows as U+FFFD).
    pub output: String,
    /// Older output was dropped to keep within the limit.
    pub truncated: bool,
    pub exit: Option<TerminalExit>,
}

/// A bounded byte buffer that drops from the start, never in the middle of a UTF-8
/// character.
#[derive(Debug, Default)]
pub struct OutputBuffer {
    bytes: Vec<u8>,
    limit: usize,
    truncated: bool,
    /// Offset of `bytes[0]` in the whole output (bytes dropped so far).
    start: u64,
}

impl OutputBuffer {
    pub fn new(limit: usize) -> OutputBuffer {
        OutputBuffer { bytes: Vec::new(), limit, truncated: false, start: 0 }
    }

    /// Appends `chunk`, then drops the oldest bytes beyond the limit; the cut moves forward
    /// past continuation bytes so the kept text starts at a character.
    pub fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() <= self.limit {
            return;
        }
        let mut cut = self.bytes.len() - self.limit;
        while cut < self.bytes.len() && (self.bytes[cut] & 0xC0) == 0x80 {
            cut += 1;
        }
        self.bytes.drain(..cut);
        self.start += cut as u64;
        self.truncated = true;
    }

    /// Up to `max` bytes from `offset` in the whole output on (from the oldest kept byte
    /// when `offset` was dropped already), as [`crate::pty::Ring::read_since`].
    pub fn read_since(&self, offset: u64, max: usize) -> crate::pty::Chunk {
        let end = self.start + self.bytes.len() as u64;
        let skipped = offset < self.start;
        let from = offset.clamp(self.start, end);
        let at = usize::try_from(from - self.start).unwrap_or(self.bytes.len());
        let data = self.bytes[at..].iter().take(max).copied().collect::<Vec<u8>>();
        crate::pty::Chunk { next: from + data.len() as u64, data, skipped }
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

#[derive(Debug)]
struct Shared {
    output: OutputBuffer,
    exit: Option<TerminalExit>,
}

/// Who runs a command: this host (its process group) or a runner (an execution there).
#[derive(Debug)]
enum Owner {
    Group(ProcessGroup),
    Runner(crate::runner::RemoteControl),
}

impl std::fmt::Debug for crate::runner::RemoteControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteControl").field("exec", &self.exec()).finish()
    }
}

/// A running (or ended) command. Dropping it kills its process group (a runner's execution:
/// the runner kills it when its link goes).
#[derive(Debug)]
pub struct CommandTerminal {
    owner: Owner,
    pid: i32,
    shared: Arc<Mutex<Shared>>,
    /// Bumped on every output chunk and once at the exit.
    changes: watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for CommandTerminal {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// The directory a child should change into: the opened directory itself where `/proc`
/// offers it, else its path. `PWD` is set to the path, so shells show the worktree path.
pub(crate) fn child_cwd(cwd: &Root) -> (PathBuf, PathBuf) {
    let shown = cwd.path().to_path_buf();
    let by_fd = PathBuf::from(format!("/proc/self/fd/{}", cwd.dir_fd().as_raw_fd()));
    if std::path::Path::new("/proc/self/fd").is_dir() {
        (by_fd, shown)
    } else {
        (shown.clone(), shown)
    }
}

/// Starts `spec` in `cwd` (a confined directory), as the leader of its own process group,
/// stdin closed, stdout and stderr merged into the kept output.
pub fn run_command(spec: &CommandSpec, cwd: &Root) -> Result<CommandTerminal, RuntimeError> {
    let program = spec.program.to_string_lossy().into_owned();
    let (dir, shown) = child_cwd(cwd);
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .current_dir(&dir)
        .env("PWD", &shown)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    // One pipe for both streams, so their output keeps the order it was written in.
    let spawn_error =
        |source: std::io::Error| RuntimeError::Spawn { program: program.clone(), source };
    let (reader, writer) = std::io::pipe().map_err(spawn_error)?;
    let writer_too = writer.try_clone().map_err(spawn_error)?;
    command.stdout(Stdio::from(writer)).stderr(Stdio::from(writer_too));
    let (mut child, group) =
        ProcessGroup::spawn(&mut command).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => RuntimeError::NotFound { program: program.clone() },
            std::io::ErrorKind::PermissionDenied => {
                RuntimeError::PermissionDenied { program: program.clone() }
            }
            _ => RuntimeError::Spawn { program: program.clone(), source },
        })?;
    let pid = group.pgid();
    let shared =
        Arc::new(Mutex::new(Shared { output: OutputBuffer::new(spec.output_limit), exit: None }));
    let (notify, changes) = watch::channel(0u64);
    let notify = Arc::new(notify);
    // The command holds the write ends now; ours close, so the reader sees the end of file
    // once the command (and what it left running) closed them.
    drop(command);
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|source| RuntimeError::Spawn { program: program.clone(), source })?;
    #[expect(
        clippy::disallowed_methods,
        reason = "the readers, awaited by the waiter; end at the end of the output"
    )]
    let readers = vec![tokio::spawn(read_into(reader, shared.clone(), notify.clone()))];
    #[expect(clippy::disallowed_methods, reason = "owned by the `Terminal`")]
    let waiter = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => TerminalExit {
                    exit_code: status.code(),
                    signal: status.signal().map(signal_name),
                },
                Err(err) => {
                    tracing::warn!(error = %err, "waiting for a command failed");
                    TerminalExit { exit_code: None, signal: None }
                }
            };
            let drained = futures_join(readers);
            if tokio::time::timeout(DRAIN_AFTER_EXIT, drained).await.is_err() {
                tracing::debug!("a command's output stayed open after it exited");
            }
            shared.lock().unwrap_or_else(PoisonError::into_inner).exit = Some(exit);
            notify.send_modify(|n| *n += 1);
        })
    };
    Ok(CommandTerminal { owner: Owner::Group(group), pid, shared, changes, tasks: vec![waiter] })
}

/// A command a runner runs (`execution`, started with its stderr merged into its stdout):
/// its output kept as [`run_command`]'s, its exit the runner's. `pid` is the runner side's.
pub fn through_runner(
    execution: crate::runner::RemoteExecution,
    output_limit: usize,
) -> CommandTerminal {
    let crate::runner::RemoteExecution { stdout, stdin, control, .. } = execution;
    drop(stdin);
    let shared =
        Arc::new(Mutex::new(Shared { output: OutputBuffer::new(output_limit), exit: None }));
    let (notify, changes) = watch::channel(0u64);
    let notify = Arc::new(notify);
    let pid = control.pid();
    #[expect(clippy::disallowed_methods, reason = "owned by the `CommandTerminal`")]
    let reader = tokio::spawn(read_into(stdout, shared.clone(), notify.clone()));
    let waiting = control.clone();
    #[expect(clippy::disallowed_methods, reason = "owned by the `CommandTerminal`")]
    let waiter = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let exit = exit_of(waiting.wait().await);
            let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, reader).await;
            shared.lock().unwrap_or_else(PoisonError::into_inner).exit = Some(exit);
            notify.send_modify(|n| *n += 1);
        })
    };
    CommandTerminal { owner: Owner::Runner(control), pid, shared, changes, tasks: vec![waiter] }
}

/// Waits for every handle (readers end at end of file).
async fn futures_join(handles: Vec<JoinHandle<()>>) {
    for handle in handles {
        let _ = handle.await;
    }
}

async fn read_into(
    mut from: impl AsyncRead + Unpin,
    shared: Arc<Mutex<Shared>>,
    notify: Arc<watch::Sender<u64>>,
) {
    let mut buf = vec![0u8; 8192];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                shared.lock().unwrap_or_else(PoisonError::into_inner).output.push(&buf[..n]);
                notify.send_modify(|n| *n += 1);
            }
        }
    }
}

/// A runner execution's exit as a terminal's.
pub(crate) fn exit_of(exit: crate::ExitInfo) -> TerminalExit {
    match exit {
        crate::ExitInfo::Exited { code } => TerminalExit { exit_code: Some(code), signal: None },
        crate::ExitInfo::Signaled { signal } => {
            TerminalExit { exit_code: None, signal: Some(signal_name(signal)) }
        }
        crate::ExitInfo::Unknown { .. } => TerminalExit { exit_code: None, signal: None },
    }
}

pub(crate) fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {signal}"))
}

impl CommandTerminal {
    /// The leader's pid (and the group's id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The kept output and the exit, if it has exited.
    pub fn output(&self) -> TerminalOutput {
        let shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        TerminalOutput {
            output: shared.output.text(),
            truncated: shared.output.truncated(),
            exit: shared.exit.clone(),
        }
    }

    /// A receiver that changes on every output chunk and at the exit.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// Up to [`crate::pty::READ_CHUNK`] bytes of output from `offset` on, for a reader
    /// that follows the output live.
    pub fn read_since(&self, offset: u64) -> crate::pty::Chunk {
        let shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        shared.output.read_since(offset, crate::pty::READ_CHUNK)
    }

    /// Waits until the command has exited (and its output was read).
    pub async fn wait(&self) -> TerminalExit {
        let mut changes = self.changes.clone();
        loop {
            if let Some(exit) =
                self.shared.lock().unwrap_or_else(PoisonError::into_inner).exit.clone()
            {
                return exit;
            }
            if changes.changed().await.is_err() {
                // The waiter is gone without an exit (aborted): report what is known.
                return TerminalExit { exit_code: None, signal: None };
            }
        }
    }

    /// Kills the whole group and waits (bounded) until none of it runs.
    pub async fn kill(&self) {
        match &self.owner {
            Owner::Group(group) => {
                group.kill();
                if !group.wait_empty(KILL_WAIT).await {
                    tracing::warn!(pgid = self.pid, "a command's process group outlived its kill");
                }
            }
            Owner::Runner(control) => {
                control.stop(Duration::ZERO).await;
            }
        }
    }

    /// Sends `SIGKILL` to the group without waiting.
    pub fn kill_now(&self) {
        match &self.owner {
            Owner::Group(group) => group.kill(),
            Owner::Runner(control) => control.kill(Duration::ZERO),
        }
    }

    /// Whether this host runs it (its pid is this host's).
    pub fn is_local(&self) -> bool {
        matches!(self.owner, Owner::Group(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_keeps_the_tail_at_a_character_boundary() {
        let mut buffer = OutputBuffer::new(5);
        buffer.push("abé".as_bytes());
        assert!(!buffer.truncated());
        buffer.push("éé".as_bytes()); // a b é é é = 8 bytes
        assert!(buffer.truncated());
        assert_eq!(buffer.text(), "éé", "cutting at byte 3 would split an é");
        let mut exact = OutputBuffer::new(3);
        exact.push(b"hello");
        assert_eq!((exact.text().as_str(), exact.truncated()), ("llo", true));
        let chunk = exact.read_since(0, 10);
        assert_eq!((chunk.data.as_slice(), chunk.next, chunk.skipped), (&b"llo"[..], 5, true));
        assert_eq!(exact.read_since(3, 1).data, b"l");
    }
}
