//! User terminals (docs/terminals.md): a login shell in a PTY in a task's worktree, several
//! per task, opened and closed through the API; the server streams their output over the
//! WebSocket ([`TerminalHandle`]). They live until closed, until the task is archived or
//! deleted, or until the server stops; each is recorded in `child_processes` while it runs
//! so that the next start kills what a `kill -9` of the server left (`reap_children`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::confine::Root;
use kandev_runtime::pty::{PtyShell, ShellGone, ShellSpec, spawn_shell};
use kandev_store::ChildProcess;
use tokio::sync::watch;

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::inner::{Inner, lock};

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
}

impl TerminalHandle {
    /// Up to 64 KiB of output from `offset` on; from the oldest kept byte when `offset` was
    /// already dropped (`skipped`).
    pub fn read_since(&self, offset: u64) -> TerminalChunk {
        match &self.source {
            Source::Shell(shell) => shell.read_since(offset),
            Source::DevServer(server) => server.read_since(offset),
        }
    }

    /// How it ended, once it has.
    pub fn exit(&self) -> Option<TerminalExit> {
        match &self.source {
            Source::Shell(shell) => shell.exit(),
            Source::DevServer(server) => server.output().exit,
        }
    }

    /// Changes on every output chunk and at the exit.
    pub fn changes(&self) -> watch::Receiver<u64> {
        match &self.source {
            Source::Shell(shell) => shell.changes(),
            Source::DevServer(server) => server.changes(),
        }
    }

    /// Typed input; waits while the shell's input queue is full.
    pub async fn write(&self, bytes: Vec<u8>) -> Result<()> {
        match &self.source {
            Source::Shell(shell) => shell.write(bytes).await.map_err(gone),
            Source::DevServer(_) => Err(read_only()),
        }
    }

    pub async fn resize(&self, cols: u16, rows: u16) -> Result<()> {
        check_size(cols, rows)?;
        match &self.source {
            Source::Shell(shell) => shell.resize(cols, rows).await.map_err(gone),
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

fn check_size(cols: u16, rows: u16) -> Result<()> {
    if cols == 0 || rows == 0 || cols > MAX_TERMINAL_CELLS || rows > MAX_TERMINAL_CELLS {
        return Err(EngineError::Validation(format!(
            "cols and rows must be between 1 and {MAX_TERMINAL_CELLS}"
        )));
    }
    Ok(())
}

pub(crate) struct Shell {
    task_id: TaskId,
    repository_id: RepositoryId,
    shell: Arc<PtyShell>,
}

/// The open user terminals, by id.
#[derive(Default)]
pub(crate) struct Shells {
    open: Mutex<HashMap<String, Shell>>,
}

impl Shells {
    /// Takes every terminal of `task` (all when `None`) out of the map.
    fn take(&self, task: Option<&TaskId>) -> Vec<Arc<PtyShell>> {
        let mut open = lock(&self.open);
        let ids: Vec<String> = open
            .iter()
            .filter(|(_, s)| task.is_none_or(|task| &s.task_id == task))
            .map(|(id, _)| id.clone())
            .collect();
        ids.into_iter().filter_map(|id| open.remove(&id)).map(|s| s.shell).collect()
    }
}

fn info(id: &str, shell: &Shell) -> TerminalInfo {
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
fn login_shell() -> String {
    std::env::var("SHELL").ok().filter(|s| s.starts_with('/')).unwrap_or_else(|| "/bin/sh".into())
}

impl Engine {
    /// The task's live worktree of `repository_id` (the task's first repository when `None`).
    pub(crate) async fn task_worktree(
        &self,
        task_id: &TaskId,
        repository_id: Option<&RepositoryId>,
    ) -> Result<(RepositoryId, String)> {
        let task = self.inner.store.get_task(task_id).await.map_err(crate::error::not_found)?;
        let repository_id = match repository_id {
            Some(id) if task.repository_ids.contains(id) => id.clone(),
            Some(id) => {
                return Err(EngineError::Validation(format!(
                    "repository {id} is not a repository of this task"
                )));
            }
            None => task.repository_ids.first().cloned().ok_or_else(|| {
                EngineError::Validation(
                    "the task has no repository; terminals run in a repository's worktree".into(),
                )
            })?,
        };
        let worktree = self
            .inner
            .store
            .live_worktrees(task_id)
            .await?
            .into_iter()
            .find(|w| w.repository_id.as_ref() == Some(&repository_id))
            .ok_or_else(|| {
                EngineError::Conflict(
                    "the task has no worktree yet; launch a session to create one".into(),
                )
            })?;
        Ok((repository_id, worktree.path))
    }

    /// `terminal.open`: a login shell in a PTY of `cols` x `rows` in the task's worktree.
    pub async fn open_terminal(
        &self,
        task_id: &TaskId,
        repository_id: Option<&RepositoryId>,
        cols: u16,
        rows: u16,
    ) -> Result<TerminalInfo> {
        check_size(cols, rows)?;
        let (repository_id, worktree) = self.task_worktree(task_id, repository_id).await?;
        let open = lock(&self.inner.shells.open).values().filter(|s| &s.task_id == task_id).count();
        if open >= MAX_TERMINALS_PER_TASK {
            return Err(EngineError::Conflict(format!(
                "a task may have {MAX_TERMINALS_PER_TASK} terminals open; close one first"
            )));
        }
        let root = Root::open(Path::new(&worktree)).map_err(|e| {
            EngineError::Conflict(format!("the task's worktree is not available: {e}"))
        })?;
        let spec = ShellSpec {
            program: login_shell().into(),
            args: vec!["-l".into()],
            env: vec![],
            cols,
            rows,
        };
        let shell = spawn_shell(&spec, &root)
            .map_err(|e| EngineError::Unavailable(format!("the terminal did not start: {e}")))?;
        let child =
            ChildProcess { pgid: shell.pid(), kind: "terminal".into(), task_id: task_id.clone() };
        let mut tx = self.inner.store.begin_write().await?;
        tx.record_child(&child).await?;
        tx.commit().await?;
        let id = format!("term_{}", uuid::Uuid::now_v7().simple());
        let shell = Shell { task_id: task_id.clone(), repository_id, shell: Arc::new(shell) };
        let shown = info(&id, &shell);
        lock(&self.inner.shells.open).insert(id, shell);
        Ok(shown)
    }

    /// `terminal.close`: kills the terminal's shell and everything it started.
    pub async fn close_terminal(&self, id: &str) -> Result<TerminalInfo> {
        let Some(shell) = lock(&self.inner.shells.open).remove(id) else {
            return Err(EngineError::NotFound(format!("terminal {id} not found")));
        };
        let pid = shell.shell.pid();
        shell.shell.kill().await;
        forget_child(&self.inner, pid).await;
        Ok(info(id, &shell))
    }

    /// `terminal.list`: the task's open terminals, oldest first.
    pub fn list_terminals(&self, task_id: &TaskId) -> Vec<TerminalInfo> {
        let open = lock(&self.inner.shells.open);
        let mut list: Vec<TerminalInfo> =
            open.iter().filter(|(_, s)| &s.task_id == task_id).map(|(id, s)| info(id, s)).collect();
        // Ids are UUIDv7: ordered by creation.
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }

    /// The terminal `id` (a user terminal, or `dev_<port>` for a dev server's log) to stream.
    pub fn terminal(&self, id: &str) -> Result<(TerminalInfo, TerminalHandle)> {
        if let Some(shell) = lock(&self.inner.shells.open).get(id) {
            let handle = TerminalHandle { source: Source::Shell(shell.shell.clone()) };
            return Ok((info(id, shell), handle));
        }
        if let Some(found) = self.dev_server_terminal(id) {
            return Ok(found);
        }
        Err(EngineError::NotFound(format!("terminal {id} not found")))
    }

    /// Closes the terminals of `task` (every one when `None`), waiting until they are gone.
    pub(crate) async fn close_terminals_of(&self, task: Option<&TaskId>) {
        for shell in self.inner.shells.take(task) {
            shell.kill().await;
            forget_child(&self.inner, shell.pid()).await;
        }
    }
}

/// Drops the record of a child that is gone (logged when the store refuses).
pub(crate) async fn forget_child(inner: &Inner, pgid: i32) {
    let forgotten = async {
        let mut tx = inner.store.begin_write().await?;
        tx.forget_child(pgid).await?;
        tx.commit().await
    };
    if let Err(err) = forgotten.await {
        tracing::warn!(pgid, error = %err, "cannot forget a stopped terminal or dev server");
    }
}

/// At startup: kills what the last run's terminals and dev servers left running (a server
/// stopped by `kill -9` could not) and forgets them.
pub(crate) async fn reap_children(inner: &Inner) -> Result<()> {
    for child in inner.store.child_processes().await? {
        let killed = match child.kind.as_str() {
            "terminal" => kandev_runtime::kill_session(child.pgid),
            _ if kandev_runtime::group_alive(child.pgid) => kandev_runtime::kill_group(child.pgid),
            _ => Ok(()),
        };
        if let Err(err) = killed {
            tracing::warn!(pgid = child.pgid, kind = %child.kind, error = %err, "cannot kill a leftover process");
        }
        let mut tx = inner.store.begin_write().await?;
        tx.forget_child(child.pgid).await?;
        tx.commit().await?;
    }
    Ok(())
}
