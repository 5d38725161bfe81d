//! User terminals (docs/terminals.md): a login shell in a PTY in a task's worktree, several
//! per task, opened and closed through the API; the server streams their output over the
//! WebSocket ([`TerminalHandle`], which serves dev servers' logs too). They live until
//! closed, until the task is archived or deleted, or until the server stops. With the local
//! runner (the default) the runner runs them and they outlive a crash or `kill -9` of the
//! server like its agents: each is recorded in `runner_terminals`, and the next start takes
//! it over with its scrollback (`reconcile.rs`). Without one (`--runner none`) they
//! are the server's children, recorded in `child_processes` so that the next start kills what
//! a `kill -9` left (`reconcile.rs`). This is the registry; the actions are
//! `engine/terminals.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kandev_domain::{RepositoryId, SessionId, TaskId};
use kandev_runtime::pty::{PtyShell, ShellGone};
use tokio::sync::watch;

use crate::error::{EngineError, Result};

/// Most terminals one task may have open at once.
pub const MAX_TERMINALS_PER_TASK: usize = 16;
/// Largest accepted width or height, in cells.
pub const MAX_TERMINAL_CELLS: u16 = 1000;

/// A terminal as the API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalInfo {
    pub id: String,
    pub task_id: TaskId,
    pub repository_id: RepositoryId,
    /// `running` or `exited`.
    pub state: &'static str,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
}

/// Output from an offset on; see [`TerminalHandle::read_since`].
pub use kandev_runtime::pty::Chunk as TerminalChunk;
/// How a terminal (or a dev server) ended.
pub use kandev_runtime::terminal::TerminalExit;

/// What a WebSocket reads a terminal's output from: a user's shell or a dev server.
#[derive(Clone)]
pub struct TerminalHandle {
    pub(crate) source: Source,
}

#[derive(Clone)]
pub(crate) enum Source {
    Shell(Arc<PtyShell>),
    DevServer(Arc<kandev_runtime::terminal::CommandTerminal>),
    /// A terminal-UI session's program (`tui/`): its resizes reach its screen reader too.
    Tui(Arc<TuiTerminal>),
}

impl TerminalHandle {
    /// Up to 64 KiB of output from `offset` on; from the oldest kept byte when `offset` was
    /// already dropped (`skipped`).
    pub fn read_since(&self, offset: u64) -> TerminalChunk {
        match &self.source {
            Source::Shell(shell) => shell.read_since(offset),
            Source::Tui(tui) => tui.shell.read_since(offset),
            Source::DevServer(server) => server.read_since(offset),
        }
    }

    /// How it ended, once it has.
    pub fn exit(&self) -> Option<TerminalExit> {
        match &self.source {
            Source::Shell(shell) => shell.exit(),
            Source::Tui(tui) => tui.shell.exit(),
            Source::DevServer(server) => server.output().exit,
        }
    }

    /// Whether it takes input: a user's shell does, a dev server's log does not.
    pub fn is_shell(&self) -> bool {
        matches!(self.source, Source::Shell(_) | Source::Tui(_))
    }

    /// Changes on every output chunk and at the exit.
    pub fn changes(&self) -> watch::Receiver<u64> {
        match &self.source {
            Source::Shell(shell) => shell.changes(),
            Source::Tui(tui) => tui.shell.changes(),
            Source::DevServer(server) => server.changes(),
        }
    }

    /// Typed input; waits while the shell's input queue is full.
    pub async fn write(&self, bytes: Vec<u8>) -> Result<()> {
        match &self.source {
            Source::Shell(shell) => shell.write(bytes).await.map_err(gone),
            Source::Tui(tui) => tui.shell.write(bytes).await.map_err(gone),
            Source::DevServer(_) => Err(read_only()),
        }
    }

    pub async fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        check_size(cols, rows)?;
        match &self.source {
            Source::Shell(shell) => shell.resize(cols, rows).await.map_err(gone),
            Source::Tui(tui) => tui.resize(cols, rows).await.map_err(gone),
            Source::DevServer(_) => Err(read_only()),
        }
    }
}

fn gone(_: ShellGone) -> EngineError {
    EngineError::Conflict("the terminal has exited; close it and open a new one".into())
}

fn read_only() -> EngineError {
    EngineError::Validation("a dev server's log takes no input".into())
}

pub(crate) fn check_size(cols: u16, rows: u16) -> Result<()> {
    if cols == 0 || rows == 0 || cols > MAX_TERMINAL_CELLS || rows > MAX_TERMINAL_CELLS {
        return Err(EngineError::Validation(format!(
            "cols and rows must be between 1 and {MAX_TERMINAL_CELLS}"
        )));
    }
    Ok(())
}

/// The size a terminal UI starts at, until a viewer resizes it.
pub const TUI_COLS: u16 = 120;
pub const TUI_ROWS: u16 = 36;

/// A terminal UI's PTY, as the screen reader and the terminal stream share it.
pub(crate) struct TuiTerminal {
    pub task_id: TaskId,
    /// The task's first repository (terminals are listed by one).
    pub repository_id: RepositoryId,
    pub shell: Arc<PtyShell>,
    /// The PTY's (cols, rows): the screen reader follows a resize.
    pub size: tokio::sync::watch::Sender<(u16, u16)>,
}

impl TuiTerminal {
    pub(crate) fn new(task_id: TaskId, repository_id: RepositoryId, shell: PtyShell) -> Self {
        let (size, _) = tokio::sync::watch::channel((TUI_COLS, TUI_ROWS));
        TuiTerminal { task_id, repository_id, shell: Arc::new(shell), size }
    }

    /// Resizes the PTY, and the screen the rules read with it.
    pub(crate) async fn resize(
        &self,
        cols: u16,
        rows: u16,
    ) -> Result<(), kandev_runtime::pty::ShellGone> {
        self.shell.resize(cols, rows).await?;
        self.size.send_replace((cols, rows));
        Ok(())
    }
}

/// The running terminal UIs, by session: the actor's, or one the last run left on the
/// runner that its actor takes over when it starts.
#[derive(Default)]
pub(crate) struct TuiTerminals {
    open: Mutex<HashMap<SessionId, Arc<TuiTerminal>>>,
}

impl TuiTerminals {
    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, Arc<TuiTerminal>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn get(&self, id: &SessionId) -> Option<Arc<TuiTerminal>> {
        self.lock().get(id).cloned()
    }

    pub(crate) fn insert(&self, id: SessionId, terminal: Arc<TuiTerminal>) {
        self.lock().insert(id, terminal);
    }

    pub(crate) fn remove(&self, id: &SessionId) -> Option<Arc<TuiTerminal>> {
        self.lock().remove(id)
    }

    /// The sessions whose terminal UI runs.
    pub(crate) fn sessions(&self) -> Vec<SessionId> {
        self.lock().keys().cloned().collect()
    }
}

pub(crate) struct Shell {
    pub task_id: TaskId,
    pub repository_id: RepositoryId,
    pub shell: Arc<PtyShell>,
}

/// The open user terminals, by id.
#[derive(Default)]
pub(crate) struct Shells {
    open: Mutex<HashMap<String, Shell>>,
}

impl Shells {
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<String, Shell>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes every terminal of `task` (all when `None`) out of the map, with its id.
    pub(crate) fn take(&self, task: Option<&TaskId>) -> Vec<(String, Arc<PtyShell>)> {
        let mut open = self.lock();
        let ids: Vec<String> = open
            .iter()
            .filter(|(_, s)| task.is_none_or(|task| &s.task_id == task))
            .map(|(id, _)| id.clone())
            .collect();
        ids.into_iter().filter_map(|id| open.remove(&id).map(|s| (id, s.shell))).collect()
    }
}

pub(crate) fn info(id: &str, shell: &Shell) -> TerminalInfo {
    let exit = shell.shell.exit();
    TerminalInfo {
        id: id.to_owned(),
        task_id: shell.task_id.clone(),
        repository_id: shell.repository_id.clone(),
        state: if exit.is_some() { "exited" } else { "running" },
        exit_code: exit.as_ref().and_then(|e| e.exit_code),
        signal: exit.and_then(|e| e.signal),
    }
}

/// The user's login shell: `$SHELL` when it names an absolute path, else `/bin/sh`.
pub(crate) fn login_shell() -> String {
    std::env::var("SHELL").ok().filter(|s| s.starts_with('/')).unwrap_or_else(|| "/bin/sh".into())
}

/// Drops the record of a terminal or dev server a runner ran (logged when the store refuses).
pub(crate) async fn forget_runner_terminal(store: &kandev_store::Store, id: &str) {
    let forgotten = async {
        let mut tx = store.begin_write().await?;
        tx.forget_runner_terminal(id).await?;
        tx.commit().await
    };
    if let Err(err) = forgotten.await {
        tracing::warn!(id, error = %err, "cannot forget a stopped terminal or dev server");
    }
}

/// Drops the record of a child that is gone (logged when the store refuses).
pub(crate) async fn forget_child(store: &kandev_store::Store, pgid: i32) {
    let forgotten = async {
        let mut tx = store.begin_write().await?;
        tx.forget_child(pgid).await?;
        tx.commit().await
    };
    if let Err(err) = forgotten.await {
        tracing::warn!(pgid, error = %err, "cannot forget a stopped terminal or dev server");
    }
}
