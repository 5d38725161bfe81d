//! Dev server actions (`devserver.start`, `stop`, `list`) as [`Engine`] methods; the
//! registry and the rules are in `crate::devservers`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::confine::Root;
use kandev_runtime::runner::{RunnerClient, SpawnSpec};
use kandev_runtime::terminal::{CommandSpec, CommandTerminal, run_command};
use kandev_store::{ChildProcess, RunnerTerminal};

use crate::devservers::{DEV_SERVER_LOG_BYTES, DevServer, DevServerInfo, info};
use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::inner::Inner;
use crate::shells::{Source, TerminalHandle, TerminalInfo};
use crate::shells::{forget_child, forget_runner_terminal};

impl Engine {
    /// The task's worktree of `repository_id` (the task's first repository when `None`) and
    /// the repository's `dev_script`.
    async fn dev_worktree(
        &self,
        task_id: &TaskId,
        repository_id: Option<&RepositoryId>,
    ) -> Result<(RepositoryId, String, crate::devservers::DevScript)> {
        let (repository_id, worktree) = self.task_worktree(task_id, repository_id).await?;
        if !crate::containers::on_container(&self.inner, task_id).await? {
            crate::sites::refuse_remote(&self.inner, task_id, "a dev server").await?;
        }
        let repository = self.inner.store.get_repository(&repository_id).await?;
        if repository.dev_script.trim().is_empty() {
            return Err(EngineError::Validation(format!(
                "repository {} has no dev server command; set one in Settings › Repositories (Edit)",
                repository.name
            )));
        }
        let env = crate::secrets::script_env(&self.inner, &repository).await?;
        Ok((
            repository_id,
            worktree,
            crate::devservers::DevScript { script: repository.dev_script, env },
        ))
    }

    /// `devserver.start`: runs the repository's `dev_script` in the task's worktree with
    /// `PORT` set; a dev server already running for them is answered as it is.
    pub async fn start_dev_server(
        &self,
        task_id: &TaskId,
        repository_id: Option<&RepositoryId>,
    ) -> Result<DevServerInfo> {
        let (repository_id, worktree, script) = self.dev_worktree(task_id, repository_id).await?;
        if crate::containers::on_container(&self.inner, task_id).await? {
            return self
                .start_dev_server_in_container(task_id, repository_id, worktree, script)
                .await;
        }
        if let Some(client) = self.inner.launcher.local_runner() {
            return self
                .start_dev_server_on_runner(client, task_id, repository_id, worktree, script)
                .await;
        }
        let key = (task_id.clone(), repository_id.clone());
        // The map's lock is held from the check to the insert, and released before the store.
        let (shown, pgid) = {
            let mut running = self.inner.dev_servers.lock();
            if let Some(server) = running.get(&key)
                && server.process.output().exit.is_none()
            {
                return Ok(info(task_id, &repository_id, server));
            }
            let taken: Vec<u16> = running.values().map(|s| s.port).collect();
            let port = free_port(self.inner.config.dev_server_ports.clone(), &taken)?;
            let root = Root::open(Path::new(&worktree)).map_err(|e| {
                EngineError::Conflict(format!("the task's worktree is not available: {e}"))
            })?;
            let spec = CommandSpec {
                program: "sh".into(),
                args: vec!["-c".into(), script.script.clone().into()],
                env: script.with_port(port),
                output_limit: DEV_SERVER_LOG_BYTES,
            };
            let process = run_command(&spec, &root).map_err(|e| {
                EngineError::Unavailable(format!("the dev server did not start: {e}"))
            })?;
            let pgid = process.pid();
            let server = DevServer { port, process: Arc::new(process), relay: None };
            let shown = info(task_id, &repository_id, &server);
            running.insert(key, server);
            (shown, pgid)
        };
        let child = ChildProcess { pgid, kind: "dev_server".into(), task_id: task_id.clone() };
        let mut tx = self.inner.store.begin_write().await?;
        tx.record_child(&child).await?;
        tx.commit().await?;
        Ok(shown)
    }

    /// [`Self::start_dev_server`] for a task on a container executor: the script runs in its
    /// container, reached from this host's `127.0.0.1:<port>` through the relay. Under the
    /// task's lock, so two starts do not both start one.
    async fn start_dev_server_in_container(
        &self,
        task_id: &TaskId,
        repository_id: RepositoryId,
        worktree: String,
        script: crate::devservers::DevScript,
    ) -> Result<DevServerInfo> {
        let _lock = self.inner.task_locks.lock(task_id).await;
        let port = match self.running_or_free_port(task_id, &repository_id)? {
            Slot::Running(shown) => return Ok(shown),
            Slot::Free(port) => port,
        };
        let started =
            crate::containers::start_dev_server(&self.inner, task_id, &worktree, &script, port);
        let Some((process, relay, exec)) = started.await? else {
            return Err(EngineError::Unavailable("the task's container executor is gone".into()));
        };
        // Its pid is the container's: recorded as the container runner's execution, which the
        // next start takes over (its relay made again).
        let server = DevServer { port, process: Arc::new(process), relay: Some(relay) };
        self.keep_on_runner(task_id, repository_id, exec, server).await
    }

    /// [`Self::start_dev_server`] on the local runner: the dev server outlives a restart of
    /// this server (the next start takes it over, its log kept). Under the task's lock, so
    /// two starts do not both start one.
    async fn start_dev_server_on_runner(
        &self,
        client: RunnerClient,
        task_id: &TaskId,
        repository_id: RepositoryId,
        worktree: String,
        script: crate::devservers::DevScript,
    ) -> Result<DevServerInfo> {
        let _lock = self.inner.task_locks.lock(task_id).await;
        let port = match self.running_or_free_port(task_id, &repository_id)? {
            Slot::Running(shown) => return Ok(shown),
            Slot::Free(port) => port,
        };
        Root::open(Path::new(&worktree)).map_err(|e| {
            EngineError::Conflict(format!("the task's worktree is not available: {e}"))
        })?;
        let spec = SpawnSpec {
            program: "sh".to_owned(),
            // Both streams in one log, in the order they were written.
            args: vec!["-c".to_owned(), format!("exec 2>&1\n{}", script.script)],
            env: [script.with_port(port), vec![("PWD".to_owned(), worktree.clone())]].concat(),
            cwd: PathBuf::from(&worktree),
            secrets: script.values(),
            pty: None,
            scrollback: DEV_SERVER_LOG_BYTES,
        };
        let exec = format!("dev_{port}-{}", uuid::Uuid::now_v7().simple());
        let execution = client
            .spawn(&exec, spec)
            .await
            .map_err(|e| EngineError::Unavailable(format!("the dev server did not start: {e}")))?;
        let process = kandev_runtime::terminal::through_runner(execution, DEV_SERVER_LOG_BYTES);
        let server = DevServer { port, process: Arc::new(process), relay: None };
        self.keep_on_runner(task_id, repository_id, exec, server).await
    }

    /// The dev server running for the task and repository, or a free port for a new one.
    fn running_or_free_port(&self, task_id: &TaskId, repository_id: &RepositoryId) -> Result<Slot> {
        let running = self.inner.dev_servers.lock();
        if let Some(server) = running.get(&(task_id.clone(), repository_id.clone()))
            && server.process.output().exit.is_none()
        {
            return Ok(Slot::Running(info(task_id, repository_id, server)));
        }
        let taken: Vec<u16> = running.values().map(|s| s.port).collect();
        free_port(self.inner.config.dev_server_ports.clone(), &taken).map(Slot::Free)
    }

    /// Records a dev server a runner runs (execution `exec`), for the next start to take
    /// over, and adds it to the registry.
    async fn keep_on_runner(
        &self,
        task_id: &TaskId,
        repository_id: RepositoryId,
        exec: String,
        server: DevServer,
    ) -> Result<DevServerInfo> {
        let kept = RunnerTerminal {
            id: format!("dev_{}", server.port),
            task_id: task_id.clone(),
            repository_id: repository_id.clone(),
            kind: "dev_server".into(),
            exec,
            port: Some(server.port),
        };
        let mut tx = self.inner.store.begin_write().await?;
        tx.record_runner_terminal(&kept).await?;
        tx.commit().await?;
        let shown = info(task_id, &repository_id, &server);
        self.inner.dev_servers.lock().insert((task_id.clone(), repository_id), server);
        Ok(shown)
    }

    /// `devserver.stop`: kills the dev server's process group and waits until it is gone.
    pub async fn stop_dev_server(
        &self,
        task_id: &TaskId,
        repository_id: Option<&RepositoryId>,
    ) -> Result<DevServerInfo> {
        let removed = {
            let mut running = self.inner.dev_servers.lock();
            let key = running
                .keys()
                .find(|(t, r)| t == task_id && repository_id.is_none_or(|id| id == r))
                .cloned();
            key.and_then(|key| running.remove(&key).map(|server| (key, server)))
        };
        let Some(((task_id, repository_id), server)) = removed else {
            return Err(EngineError::NotFound("no dev server runs for this task".into()));
        };
        server.process.kill().await;
        forget_dev_server(&self.inner, server.port, &server.process).await;
        Ok(info(&task_id, &repository_id, &server))
    }

    /// `devserver.list`: the task's dev servers, with their recent output.
    pub fn list_dev_servers(&self, task_id: &TaskId) -> Vec<DevServerInfo> {
        let running = self.inner.dev_servers.lock();
        let mut list: Vec<DevServerInfo> = running
            .iter()
            .filter(|((t, _), _)| t == task_id)
            .map(|((t, r), server)| info(t, r, server))
            .collect();
        list.sort_by_key(|s| s.port);
        list
    }

    /// Stops the dev servers of `task` (every one when `None`), waiting until they are gone.
    pub(crate) async fn stop_dev_servers_of(&self, task: Option<&TaskId>) {
        for (port, process) in self.inner.dev_servers.take(task) {
            process.kill().await;
            forget_dev_server(&self.inner, port, &process).await;
        }
    }

    /// The dev server whose log is the terminal `id` (`dev_<port>`), to stream its output.
    pub(crate) fn dev_server_terminal(&self, id: &str) -> Option<(TerminalInfo, TerminalHandle)> {
        let port: u16 = id.strip_prefix("dev_")?.parse().ok()?;
        let running = self.inner.dev_servers.lock();
        let ((task_id, repository_id), server) = running.iter().find(|(_, s)| s.port == port)?;
        let exit = server.process.output().exit;
        let shown = TerminalInfo {
            id: id.to_owned(),
            task_id: task_id.clone(),
            repository_id: repository_id.clone(),
            state: if exit.is_some() { "exited" } else { "running" },
            exit_code: exit.as_ref().and_then(|e| e.exit_code),
            signal: exit.and_then(|e| e.signal),
        };
        Some((shown, TerminalHandle { source: Source::DevServer(server.process.clone()) }))
    }
}

/// Where a dev server start stands: one runs already, or this port is free for it.
enum Slot {
    Running(DevServerInfo),
    Free(u16),
}

/// Drops the record of a dev server that is gone: this host's child, or a runner's execution
/// (the local runner's or its task's container's).
async fn forget_dev_server(inner: &Inner, port: u16, process: &CommandTerminal) {
    if process.is_local() {
        forget_child(&inner.store, process.pid()).await;
    } else {
        forget_runner_terminal(&inner.store, &format!("dev_{port}")).await;
    }
}

/// The first port of `range` that no dev server holds and that binds on 127.0.0.1 now.
fn free_port(range: impl Iterator<Item = u16>, taken: &[u16]) -> Result<u16> {
    range
        .filter(|p| !taken.contains(p))
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .ok_or_else(|| {
            EngineError::Unavailable(
                "no free port is left in the dev server port range; stop a dev server".into(),
            )
        })
}
