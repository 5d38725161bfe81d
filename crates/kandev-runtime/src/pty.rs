//! A user's shell in a pseudo-terminal (a task's terminal, docs/terminals.md): started by
//! `pty-process` as the leader of a session of its own with the PTY as its controlling
//! terminal, its output kept in a ring of the last bytes with absolute offsets, so every
//! reader (a WebSocket attached now, another one after a reconnect) reads from where it is
//! and nothing is sent twice. Input and resizes go through one queue in their order.
//!
//! Supervision is by session, not group: a shell with job control puts each job in a group
//! of its own, all inside its session. [`PtyShell::kill`] kills the whole session and waits
//! until none of it runs; dropping the shell kills it too.
//!
//! A shell a runner runs ([`through_runner`]) is the same to its readers: the runner owns the
//! session (it outlives this server), its output comes over the runner connection (after a
//! restart: the runner's kept scrollback first), input and resizes go back there; a kill asks
//! the runner, and dropping it leaves the shell to the runner.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::RuntimeError;
use crate::confine::Root;
use crate::group::{kill_session, session_members};
use crate::terminal::{TerminalExit, child_cwd, signal_name};

/// How much of a shell's output is kept for a client that (re)attaches: 256 KiB.
pub const SHELL_REPLAY_BYTES: usize = 256 * 1024;

/// Most bytes one [`PtyShell::read_since`] returns (one WebSocket frame).
pub const READ_CHUNK: usize = 64 * 1024;

/// Input chunks and resizes queued for the shell before a writer waits.
const INPUT_QUEUE: usize = 64;

/// How long [`PtyShell::kill`] waits for the session to be empty.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// What to run in the terminal.
#[derive(Clone)]
pub struct ShellSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Set on top of the server's environment (`TERM` is set to `xterm-256color`).
    pub env: Vec<(String, String)>,
    pub cols: u16,
    pub rows: u16,
}

impl std::fmt::Debug for ShellSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("ShellSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &env)
            .field("cols", &self.cols)
            .field("rows", &self.rows)
            .finish()
    }
}

/// The last bytes of a stream, addressed by their offset in the whole stream.
#[derive(Debug)]
pub struct Ring {
    bytes: VecDeque<u8>,
    /// Offset of `bytes[0]` in the whole stream.
    start: u64,
    limit: usize,
}

/// What [`Ring::read_since`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub data: Vec<u8>,
    /// The offset to read from next.
    pub next: u64,
    /// Bytes between the requested offset and `data` were dropped from the ring.
    pub skipped: bool,
}

impl Ring {
    pub fn new(limit: usize) -> Ring {
        Ring { bytes: VecDeque::new(), start: 0, limit }
    }

    /// The offset just past the last byte.
    pub fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend(chunk);
        let over = self.bytes.len().saturating_sub(self.limit);
        if over > 0 {
            self.bytes.drain(..over);
            self.start += over as u64;
        }
    }

    /// Up to `max` bytes from `offset` on (from the oldest kept byte when `offset` was
    /// dropped already).
    pub fn read_since(&self, offset: u64, max: usize) -> Chunk {
        let skipped = offset < self.start;
        let from = offset.clamp(self.start, self.end());
        let skip = usize::try_from(from - self.start).unwrap_or(usize::MAX);
        let data: Vec<u8> = self.bytes.iter().skip(skip).take(max).copied().collect();
        Chunk { next: from + data.len() as u64, data, skipped }
    }
}

#[derive(Debug)]
struct Shared {
    output: Ring,
    exit: Option<TerminalExit>,
}

enum Input {
    Bytes(Vec<u8>),
    Resize { cols: u16, rows: u16 },
}

/// The shell is gone: its input is no longer read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the terminal has exited")]
pub struct ShellGone;

/// A running (or ended) shell in a PTY. Dropping it kills its session.
#[derive(Debug)]
pub struct PtyShell {
    /// The leader's pid: the id of its session and of its group.
    sid: i32,
    /// Set when a runner runs it (it is killed there, never from here).
    runner: Option<crate::runner::RemoteControl>,
    /// Set once the session was observed empty: its id may be recycled from then on, so it
    /// is never signalled again.
    ended: AtomicBool,
    shared: Arc<Mutex<Shared>>,
    changes: watch::Receiver<u64>,
    input: mpsc::Sender<Input>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Bytes(bytes) => write!(f, "Bytes({})", bytes.len()),
            Input::Resize { cols, rows } => write!(f, "Resize({cols}x{rows})"),
        }
    }
}

impl Drop for PtyShell {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        if self.ended.load(Ordering::Acquire) || self.runner.is_some() {
            return;
        }
        if let Err(err) = kill_session(self.sid) {
            tracing::warn!(sid = self.sid, error = %err, "cannot kill a terminal's session");
        }
    }
}

fn size(cols: u16, rows: u16) -> pty_process::Size {
    pty_process::Size::new(rows.max(1), cols.max(1))
}

/// Starts `spec` in a new PTY of `spec.cols` x `spec.rows` in `cwd` (a confined directory),
/// as the leader of a session of its own.
pub fn spawn_shell(spec: &ShellSpec, cwd: &Root) -> Result<PtyShell, RuntimeError> {
    let program = spec.program.to_string_lossy().into_owned();
    let spawn_error =
        |source: std::io::Error| RuntimeError::Spawn { program: program.clone(), source };
    let pty_error = |err: pty_process::Error| match err {
        pty_process::Error::Io(source) => spawn_error(source),
        pty_process::Error::Rustix(errno) => spawn_error(errno.into()),
        other => spawn_error(std::io::Error::other(other.to_string())),
    };
    let (pty, pts) = pty_process::open().map_err(pty_error)?;
    pty.resize(size(spec.cols, spec.rows)).map_err(pty_error)?;
    let (dir, shown) = child_cwd(cwd);
    let command = pty_process::Command::new(&spec.program)
        .args(&spec.args)
        .current_dir(&dir)
        .env("PWD", &shown)
        .env("TERM", "xterm-256color")
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(true);
    let mut child = command.spawn(pts).map_err(|err| match err {
        pty_process::Error::Io(source) if source.kind() == std::io::ErrorKind::NotFound => {
            RuntimeError::NotFound { program: program.clone() }
        }
        pty_process::Error::Io(source) if source.kind() == std::io::ErrorKind::PermissionDenied => {
            RuntimeError::PermissionDenied { program: program.clone() }
        }
        other => pty_error(other),
    })?;
    let Some(sid) = child.id().and_then(|id| i32::try_from(id).ok()) else {
        return Err(spawn_error(std::io::Error::other("spawned shell has no pid")));
    };
    let shared = Arc::new(Mutex::new(Shared { output: Ring::new(SHELL_REPLAY_BYTES), exit: None }));
    let (notify, changes) = watch::channel(0u64);
    let notify = Arc::new(notify);
    let (mut reader, mut writer) = pty.into_split();
    let (input, mut inputs) = mpsc::channel::<Input>(INPUT_QUEUE);
    #[expect(
        clippy::disallowed_methods,
        reason = "the reader, awaited by the waiter; ends at the end of the terminal's output"
    )]
    let read = {
        let (shared, notify) = (shared.clone(), notify.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                // EIO once no process holds the terminal open any more: the end.
                match reader.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        lock(&shared).output.push(&buf[..n]);
                        notify.send_modify(|n| *n += 1);
                    }
                }
            }
        })
    };
    #[expect(clippy::disallowed_methods, reason = "owned by the `PtyShell` (`tasks`)")]
    let write = tokio::spawn(async move {
        while let Some(input) = inputs.recv().await {
            let done = match input {
                Input::Bytes(bytes) => writer.write_all(&bytes).await.is_ok(),
                Input::Resize { cols, rows } => writer.resize(size(cols, rows)).is_ok(),
            };
            if !done {
                return;
            }
        }
    });
    #[expect(clippy::disallowed_methods, reason = "owned by the `PtyShell` (`tasks`)")]
    let wait = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => TerminalExit {
                    exit_code: status.code(),
                    signal: status.signal().map(signal_name),
                },
                Err(err) => {
                    tracing::warn!(error = %err, "waiting for a terminal's shell failed");
                    TerminalExit { exit_code: None, signal: None }
                }
            };
            // What the shell printed last is read before the exit is told (bounded: a job
            // left in the background may hold the terminal open).
            let _ = tokio::time::timeout(Duration::from_millis(500), read).await;
            lock(&shared).exit = Some(exit);
            notify.send_modify(|n| *n += 1);
        })
    };
    Ok(PtyShell {
        sid,
        runner: None,
        ended: AtomicBool::new(false),
        shared,
        changes,
        input,
        tasks: vec![write, wait],
    })
}

/// A shell a runner runs (spawned there with a `pty`, or taken over from an earlier server):
/// its output (the kept scrollback first) fills the ring, typed input and resizes go to the
/// runner in their order.
pub fn through_runner(execution: crate::runner::RemoteExecution) -> PtyShell {
    let crate::runner::RemoteExecution { mut stdout, mut stdin, control, .. } = execution;
    let shared = Arc::new(Mutex::new(Shared { output: Ring::new(SHELL_REPLAY_BYTES), exit: None }));
    let (notify, changes) = watch::channel(0u64);
    let notify = Arc::new(notify);
    let (input, mut inputs) = mpsc::channel::<Input>(INPUT_QUEUE);
    #[expect(clippy::disallowed_methods, reason = "awaited by the waiter, owned by the shell")]
    let read = {
        let (shared, notify) = (shared.clone(), notify.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                match stdout.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        lock(&shared).output.push(&buf[..n]);
                        notify.send_modify(|n| *n += 1);
                    }
                }
            }
        })
    };
    let resizer = control.clone();
    #[expect(clippy::disallowed_methods, reason = "owned by the `PtyShell` (`tasks`)")]
    let write = tokio::spawn(async move {
        while let Some(input) = inputs.recv().await {
            match input {
                Input::Bytes(bytes) => {
                    if stdin.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                Input::Resize { cols, rows } => resizer.resize(cols, rows),
            }
        }
    });
    let waiting = control.clone();
    #[expect(clippy::disallowed_methods, reason = "owned by the `PtyShell` (`tasks`)")]
    let wait = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let exit = crate::terminal::exit_of(waiting.wait().await);
            let _ = tokio::time::timeout(Duration::from_millis(500), read).await;
            lock(&shared).exit = Some(exit);
            notify.send_modify(|n| *n += 1);
        })
    };
    PtyShell {
        sid: control.pid(),
        runner: Some(control),
        ended: AtomicBool::new(false),
        shared,
        changes,
        input,
        tasks: vec![write, wait],
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PtyShell {
    /// The shell's pid: the id of its session and of its process group.
    pub fn pid(&self) -> i32 {
        self.sid
    }

    /// Its execution's name when a runner runs it.
    pub fn exec(&self) -> Option<&str> {
        self.runner.as_ref().map(|control| control.exec())
    }

    /// Up to [`READ_CHUNK`] bytes of output from `offset` on (0: the oldest kept).
    pub fn read_since(&self, offset: u64) -> Chunk {
        lock(&self.shared).output.read_since(offset, READ_CHUNK)
    }

    /// How the shell ended, once it has.
    pub fn exit(&self) -> Option<TerminalExit> {
        lock(&self.shared).exit.clone()
    }

    /// A receiver that changes on every output chunk and at the exit.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// Queues `bytes` as typed input; waits while the queue is full.
    pub async fn write(&self, bytes: Vec<u8>) -> Result<(), ShellGone> {
        self.input.send(Input::Bytes(bytes)).await.map_err(|_| ShellGone)
    }

    /// Queues a resize (after the input queued before it).
    pub async fn resize(&self, cols: u16, rows: u16) -> Result<(), ShellGone> {
        self.input.send(Input::Resize { cols, rows }).await.map_err(|_| ShellGone)
    }

    /// Kills the whole session and waits (bounded) until none of it runs.
    pub async fn kill(&self) {
        if let Some(control) = &self.runner {
            control.stop(Duration::ZERO).await;
            return;
        }
        let sid = self.sid;
        if self.ended.load(Ordering::Acquire) {
            return;
        }
        let deadline = tokio::time::Instant::now() + KILL_WAIT;
        loop {
            if let Err(err) = kill_session(sid) {
                tracing::warn!(sid, error = %err, "cannot kill a terminal's session");
                return;
            }
            let alive = tokio::task::spawn_blocking(move || !session_members(sid).is_empty())
                .await
                .unwrap_or(true);
            if !alive {
                self.ended.store(true, Ordering::Release);
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(sid, "a terminal's session outlived its kill");
                return;
            }
            // Polling: the kernel offers no wait on another process's session from here.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_tail_and_readers_resume_where_they_were() {
        let mut ring = Ring::new(4);
        ring.push(b"ab");
        let first = ring.read_since(0, 10);
        assert_eq!((first.data.as_slice(), first.next, first.skipped), (&b"ab"[..], 2, false));
        ring.push(b"cdef");
        assert_eq!(ring.end(), 6);
        let resumed = ring.read_since(first.next, 10);
        assert_eq!(resumed.data, b"cdef", "nothing was dropped past offset 2");
        assert!(!resumed.skipped);
        let late = ring.read_since(0, 10);
        assert_eq!((late.data.as_slice(), late.skipped), (&b"cdef"[..], true));
        let capped = ring.read_since(2, 3);
        assert_eq!((capped.data.as_slice(), capped.next), (&b"cde"[..], 5));
        assert!(ring.read_since(6, 10).data.is_empty());
        assert_eq!(ring.read_since(99, 10).next, 6, "an offset past the end reads nothing");
    }
}
