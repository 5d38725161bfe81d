//! User terminal actions (`terminal.open`, `close`, `list`, and the handle the WebSocket
//! streams) as [`Engine`] methods, and their take-over at startup from the local runner;
//! the registry and the rules are in `crate::shells`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::confine::Root;
use kandev_runtime::pty::{PtyShell, SHELL_REPLAY_BYTES, ShellSpec, spawn_shell};
use kandev_runtime::runner::SpawnSpec;
use kandev_runtime::runner::proto::PtySize;
use kandev_store::{ChildProcess, RunnerTerminal};

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::inner::Inner;
use crate::shells::{
    MAX_TERMINALS_PER_TASK, Shell, Source, TerminalHandle, TerminalInfo, check_size, forget_child,
    forget_runner_terminal, info, login_shell,
};

impl Engine {
    /// The task's live worktree of `repository_id` (the task's first repository when `None`),
    /// wherever it is: the caller refuses what it cannot do there.
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
            .find(|w| w.is_task_worktree() && w.repository_id.as_ref() == Some(&repository_id))
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
        let open = self.inner.shells.lock().values().filter(|s| &s.task_id == task_id).count();
        if open >= MAX_TERMINALS_PER_TASK {
            return Err(EngineError::Conflict(format!(
                "a task may have {MAX_TERMINALS_PER_TASK} terminals open; close one first"
            )));
        }
        let root = Root::open(Path::new(&worktree)).map_err(|e| {
            EngineError::Conflict(format!("the task's worktree is not available: {e}"))
        })?;
        // In the task's container when it has one (a login shell there); never on this host
        // for a task on another executor.
        let (program, args) =
            match crate::containers::exec_in(&self.inner, task_id, &worktree, true).await? {
                Some(mut command) => {
                    let program = command.remove(0);
                    command.extend(["/bin/sh".to_owned(), "-l".to_owned()]);
                    (program, command)
                }
                None => {
                    crate::sites::refuse_remote(&self.inner, task_id, "a terminal").await?;
                    (login_shell(), vec!["-l".to_owned()])
                }
            };
        let id = format!("term_{}", uuid::Uuid::now_v7().simple());
        let started =
            |e: String| EngineError::Unavailable(format!("the terminal did not start: {e}"));
        let shell = match self.inner.launcher.local_runner() {
            // On the runner: it outlives this server, and the next start takes it over.
            Some(client) => {
                let spec = SpawnSpec {
                    program,
                    args,
                    env: vec![("PWD".to_owned(), worktree.clone())],
                    cwd: PathBuf::from(&worktree),
                    secrets: vec![],
                    pty: Some(PtySize { cols, rows }),
                    scrollback: SHELL_REPLAY_BYTES,
                };
                let execution =
                    client.spawn(&id, spec).await.map_err(|e| started(e.to_string()))?;
                let shell = kandev_runtime::pty::through_runner(execution);
                let kept = RunnerTerminal {
                    id: id.clone(),
                    task_id: task_id.clone(),
                    repository_id: repository_id.clone(),
                    kind: "terminal".into(),
                    exec: id.clone(),
                    port: None,
                };
                let mut tx = self.inner.store.begin_write().await?;
                tx.record_runner_terminal(&kept).await?;
                tx.commit().await?;
                shell
            }
            None => {
                let spec = ShellSpec {
                    program: program.into(),
                    args: args.into_iter().map(Into::into).collect(),
                    env: vec![],
                    cols,
                    rows,
                };
                let shell = spawn_shell(&spec, &root).map_err(|e| started(e.to_string()))?;
                let pgid = shell.pid();
                let child =
                    ChildProcess { pgid, kind: "terminal".into(), task_id: task_id.clone() };
                let mut tx = self.inner.store.begin_write().await?;
                tx.record_child(&child).await?;
                tx.commit().await?;
                shell
            }
        };
        let shell = Shell { task_id: task_id.clone(), repository_id, shell: Arc::new(shell) };
        let shown = info(&id, &shell);
        self.inner.shells.lock().insert(id, shell);
        Ok(shown)
    }

    /// `terminal.close`: kills the terminal's shell and everything it started.
    pub async fn close_terminal(&self, id: &str) -> Result<TerminalInfo> {
        let Some(shell) = self.inner.shells.lock().remove(id) else {
            return Err(EngineError::NotFound(format!("terminal {id} not found")));
        };
        shell.shell.kill().await;
        forget_shell(&self.inner, id, &shell.shell).await;
        Ok(info(id, &shell))
    }

    /// `terminal.list`: the task's open terminals, oldest first.
    pub fn list_terminals(&self, task_id: &TaskId) -> Vec<TerminalInfo> {
        let open = self.inner.shells.lock();
        let mut list: Vec<TerminalInfo> =
            open.iter().filter(|(_, s)| &s.task_id == task_id).map(|(id, s)| info(id, s)).collect();
        // Ids are UUIDv7: ordered by creation.
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }

    /// The terminal `id` (a user terminal, or `dev_<port>` for a dev server's log) to stream.
    pub fn terminal(&self, id: &str) -> Result<(TerminalInfo, TerminalHandle)> {
        if let Some(shell) = self.inner.shells.lock().get(id) {
            let handle = TerminalHandle { source: Source::Shell(shell.shell.clone()) };
            return Ok((info(id, shell), handle));
        }
        if let Some(found) = self.dev_server_terminal(id) {
            return Ok(found);
        }
        // A terminal-UI session's terminal has the session's id.
        if let Some(tui) = self.inner.tui.get(&kandev_domain::SessionId::new(id)) {
            let exit = tui.shell.exit();
            let info = TerminalInfo {
                id: id.to_owned(),
                task_id: tui.task_id.clone(),
                repository_id: tui.repository_id.clone(),
                state: if exit.is_some() { "exited" } else { "running" },
                exit_code: exit.as_ref().and_then(|e| e.exit_code),
                signal: exit.and_then(|e| e.signal),
            };
            return Ok((info, TerminalHandle { source: Source::Tui(tui) }));
        }
        Err(EngineError::NotFound(format!("terminal {id} not found")))
    }

    /// Closes the terminals of `task` (every one when `None`), waiting until they are gone.
    pub(crate) async fn close_terminals_of(&self, task: Option<&TaskId>) {
        for (id, shell) in self.inner.shells.take(task) {
            shell.kill().await;
            forget_shell(&self.inner, &id, &shell).await;
        }
    }
}

/// Drops the record of a terminal that is gone.
async fn forget_shell(inner: &Inner, id: &str, shell: &PtyShell) {
    match shell.exec() {
        Some(_) => forget_runner_terminal(&inner.store, id).await,
        None => forget_child(&inner.store, shell.pid()).await,
    }
}
