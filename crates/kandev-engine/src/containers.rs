//! Container executors (issue 42): a task whose repositories use one runs its agent in a
//! container of its own (`kandev_runtime::runner::container`), reached through the one runner
//! stack: one link per task container, kept in the executors' link slots under the
//! container's name. The worktrees stay on this host (git runs here); the container sees
//! them at the same paths. Everything fails closed: no engine, no image or a failed start
//! fails the session with the reason; nothing of the task runs on this host instead.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use kandev_domain::TaskId;
use kandev_domain::container::ContainerEngine;
use kandev_domain::executor::{ContainerSettings, Executor, ExecutorKind};
use kandev_runtime::runner::container::{
    self as engine_cli, ContainerTransport, HOME_IN_CONTAINER, KANDEV_IN_CONTAINER, TaskContainer,
};
use kandev_runtime::runner::{Backoff, ExecutionInfo, RunnerClient, SpawnSpec};
use kandev_runtime::tunnel;
use kandev_store::{StoreError, WorktreeRecord};

use kandev_runtime::terminal::CommandTerminal;
use tokio_util::task::AbortOnDropHandle;

use crate::devservers::DEV_SERVER_LOG_BYTES;
use crate::error::{EngineError, Result};
use crate::inner::Inner;
use crate::links::MadeWith;
use crate::sites::RunnerLauncher;

/// How long a container's runner keeps agents while this server is away.
const CONTAINER_GRACE: Duration = Duration::from_secs(600);

/// How long startup waits for one task's container.
const STARTUP_CONNECT: Duration = Duration::from_secs(30);

/// The launcher of a task's container: its link made (the container made or started first),
/// what its runner held from an earlier link forgotten (a fresh start).
pub(crate) async fn launcher(
    inner: &Inner,
    executor: &Executor,
    settings: &ContainerSettings,
    task_id: &TaskId,
    mounts: Vec<PathBuf>,
) -> std::result::Result<RunnerLauncher, String> {
    let (link, held) = connect(inner, executor, settings, task_id, mounts).await?;
    for execution in &held {
        link.forget(&execution.exec);
    }
    Ok(RunnerLauncher {
        link,
        kandev: KANDEV_IN_CONTAINER.to_owned(),
        home: HOME_IN_CONTAINER.to_owned(),
    })
}

/// The container of a task: the engine resolved, this server's binary, the worktrees.
async fn task_container(
    inner: &Inner,
    settings: &ContainerSettings,
    task_id: &TaskId,
    mounts: Vec<PathBuf>,
) -> std::result::Result<TaskContainer, String> {
    let engine = engine_cli::resolve_engine(settings.engine).await.map_err(|e| e.to_string())?;
    // The task's folder of worktrees too: one made later (another repository) is there.
    let mut mounts = mounts;
    let one = kandev_runtime::git::worktree_dir(&inner.config.home, task_id.as_str(), "any");
    mounts.extend(one.ok().and_then(|one| one.parent().map(PathBuf::from)));
    let kandev = std::env::current_exe()
        .map_err(|e| format!("cannot find this server's kandev binary: {e}"))?;
    Ok(TaskContainer {
        engine,
        settings: settings.clone(),
        name: TaskContainer::name_for(task_id.as_str()),
        task_id: task_id.to_string(),
        home: inner.config.home.clone(),
        kandev,
        worktrees: mounts,
        // Made first, so every container has the mount whether or not an agent is
        // installed yet (a later install shows in it).
        agents: std::fs::create_dir_all(inner.agents.root())
            .ok()
            .map(|()| inner.agents.root().to_owned()),
        grace: CONTAINER_GRACE,
        remake_if_changed: false,
    })
}

/// The live link to the task's container, or a new one with the executions its runner held.
async fn connect(
    inner: &Inner,
    executor: &Executor,
    settings: &ContainerSettings,
    task_id: &TaskId,
    mounts: Vec<PathBuf>,
) -> std::result::Result<(RunnerClient, Vec<ExecutionInfo>), String> {
    let name = TaskContainer::name_for(task_id.as_str());
    let slot = inner.links.slot(&name);
    let mut slot = slot.lock().await;
    let made_with = MadeWith::Container(settings.clone());
    if let Some((with, link)) = &slot.link
        && *with == made_with
        && !link.is_closed()
    {
        return Ok((link.clone(), vec![]));
    }
    let failed = |e: String| format!("cannot start the task's container ({}): {e}", executor.name);
    // A link made with other settings goes first (it would start the old container again).
    if let Some((_, old)) = slot.link.take() {
        old.close();
    }
    let mut container = task_container(inner, settings, task_id, mounts).await.map_err(failed)?;
    // A new link is a session's start: a container of other settings is made again.
    container.remake_if_changed = true;
    let (link, held) = RunnerClient::open(ContainerTransport { container }, Backoff::default())
        .await
        .map_err(|e| failed(e.message))?;
    slot.link = Some((made_with, link.clone()));
    start_relays(inner, &link, settings).await;
    Ok((link, held))
}

/// The relays of a task's container: each port it listens on in the container, with where
/// this host makes its connections. Kandev's MCP port leads to the server's listener that
/// serves `/mcp` alone (the rest of the API stays out of reach); each of the executor's
/// `host_ports` to the same port of this host's 127.0.0.1. With network `full` the
/// container's 127.0.0.1 is its own too, so the MCP relay is there as well.
fn relays(inner: &Inner, settings: &ContainerSettings) -> Vec<(u16, SocketAddr)> {
    let mut relays = vec![];
    if let (Some(port), Some(target)) = (inner.mcp.port(), inner.mcp.relay_target()) {
        relays.push((port, target));
    }
    for port in settings.network.host_ports() {
        if !relays.iter().any(|(p, _)| p == port) {
            relays.push((*port, SocketAddr::from((Ipv4Addr::LOCALHOST, *port))));
        }
    }
    relays
}

/// Starts the relays of a new link to a task's container (`kandev tunnel listen` there, one
/// execution per port, multiplexed over its stdio, each connection made again to the host's
/// own port here). A relay that cannot start is logged: what needs it fails in the container
/// with a refused connection, never by reaching the host's network instead.
async fn start_relays(inner: &Inner, link: &RunnerClient, settings: &ContainerSettings) {
    for (port, target) in relays(inner, settings) {
        let exec = format!("relay-{port}-{}", uuid::Uuid::new_v4().simple());
        let spec = SpawnSpec {
            program: KANDEV_IN_CONTAINER.to_owned(),
            args: ["tunnel", "listen", "--port", &port.to_string()].map(str::to_owned).to_vec(),
            env: vec![],
            cwd: PathBuf::from("/"),
            secrets: vec![],
            pty: None,
            scrollback: 0,
        };
        match link.spawn(&exec, spec).await {
            Ok(relay) => {
                // Owned by the link, not the engine's tracker: it ends with the link, which
                // shutdown closes after the tracker's tasks are done.
                link.run_with_link(async move {
                    let ended =
                        tunnel::serve_mux(relay.stdout, relay.stdin, None, Some(target)).await;
                    if let Err(err) = ended {
                        tracing::warn!(port, error = %err, "a container's relay ended");
                    }
                    relay.control.kill(Duration::ZERO);
                });
            }
            Err(err) => tracing::warn!(port, error = %err, "cannot start a container's relay"),
        }
    }
}

/// The container executor a recorded worktree was made for, if it was.
async fn container_of(
    inner: &Inner,
    record: &WorktreeRecord,
) -> Result<Option<(Executor, ContainerSettings)>> {
    let Some(id) = &record.executor_id else { return Ok(None) };
    match inner.store.get_executor(id).await {
        Ok(executor) => match executor.kind.clone() {
            ExecutorKind::Container(settings) => Ok(Some((executor, settings))),
            _ => Ok(None),
        },
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(other) => Err(other.into()),
    }
}

/// For a task whose worktrees were made for a container executor: its container made sure
/// to run (made again from the settings when it is gone), and the command that runs a
/// program in it in `cwd` (`<engine> exec -i [-t] -w <cwd> <container>`, the program to add).
/// `None` for a task on this host or an SSH executor.
pub(crate) async fn exec_in(
    inner: &Inner,
    task_id: &TaskId,
    cwd: &str,
    tty: bool,
) -> Result<Option<Vec<String>>> {
    let Some((executor, settings, mounts)) = container_of_task(inner, task_id).await? else {
        return Ok(None);
    };
    let unavailable = |e: String| {
        EngineError::Unavailable(format!(
            "the task's container ({}) is not available: {e}",
            executor.name
        ))
    };
    let container = task_container(inner, &settings, task_id, mounts).await.map_err(unavailable)?;
    container.ensure().await.map_err(|e| unavailable(e.to_string()))?;
    let mut command =
        vec![container.engine.program().to_owned(), "exec".to_owned(), "-i".to_owned()];
    if tty {
        command.extend(["-t".to_owned(), "-e".to_owned(), "TERM=xterm-256color".to_owned()]);
    }
    command.extend(["-w".to_owned(), cwd.to_owned(), container.name]);
    Ok(Some(command))
}

/// The container executor a task's worktrees were made for, with the worktrees (`None`: the
/// task is on this host or an SSH executor).
async fn container_of_task(
    inner: &Inner,
    task_id: &TaskId,
) -> Result<Option<(Executor, ContainerSettings, Vec<PathBuf>)>> {
    let records = inner.store.live_worktrees(task_id).await?;
    for record in &records {
        if let Some((executor, settings)) = container_of(inner, record).await? {
            let mounts = records.iter().map(|r| PathBuf::from(&r.path)).collect();
            return Ok(Some((executor, settings, mounts)));
        }
    }
    Ok(None)
}

/// Whether the task's worktrees were made for a container executor.
pub(crate) async fn on_container(inner: &Inner, task_id: &TaskId) -> Result<bool> {
    Ok(container_of_task(inner, task_id).await?.is_some())
}

/// A dev server of a task on a container executor: `script` run by the container's runner in
/// `worktree` with `PORT` (stderr with stdout), its output kept like a local one's, and the
/// relay from this host's `127.0.0.1:port` to the container's (one `kandev tunnel connect`
/// execution per connection), which ends when the returned handle is dropped. `None`: the
/// task is not on a container executor.
pub(crate) async fn start_dev_server(
    inner: &Inner,
    task_id: &TaskId,
    worktree: &str,
    script: &crate::devservers::DevScript,
    port: u16,
) -> Result<Option<(CommandTerminal, AbortOnDropHandle<()>, String)>> {
    let Some((executor, settings, mounts)) = container_of_task(inner, task_id).await? else {
        return Ok(None);
    };
    let unavailable =
        |e: String| EngineError::Unavailable(format!("the dev server did not start: {e}"));
    let listener = listen_for(port).await.map_err(unavailable)?;
    let (link, _) =
        connect(inner, &executor, &settings, task_id, mounts).await.map_err(unavailable)?;
    let spec = SpawnSpec {
        program: "sh".to_owned(),
        args: vec!["-c".to_owned(), format!("exec 2>&1\n{}", script.script)],
        env: script.with_port(port),
        cwd: PathBuf::from(worktree),
        secrets: script.values(),
        pty: None,
        // Its log from before a restart of this server, for the one that takes it over.
        scrollback: DEV_SERVER_LOG_BYTES,
    };
    let exec = format!("dev-{port}-{}", uuid::Uuid::new_v4().simple());
    let execution = link.spawn(&exec, spec).await.map_err(|e| unavailable(e.to_string()))?;
    let process = kandev_runtime::terminal::through_runner(execution, DEV_SERVER_LOG_BYTES);
    let relay = AbortOnDropHandle::new(inner.tracker.spawn(relay_into(listener, link, port)));
    Ok(Some((process, relay, exec)))
}

/// This host's listener for a dev server's port.
async fn listen_for(port: u16) -> std::result::Result<tokio::net::TcpListener, String> {
    tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port}: {e}"))
}

/// The relay from this host's `127.0.0.1:port` to a dev server of the last run in a task's
/// container (`link`).
pub(crate) async fn relay_dev_server(
    inner: &Inner,
    link: &RunnerClient,
    port: u16,
) -> std::result::Result<AbortOnDropHandle<()>, String> {
    let listener = listen_for(port).await?;
    let relay = relay_into(listener, link.clone(), port);
    Ok(AbortOnDropHandle::new(inner.tracker.spawn(relay)))
}

/// Relays each connection `listener` accepts to the container's `127.0.0.1:port`.
async fn relay_into(listener: tokio::net::TcpListener, link: RunnerClient, port: u16) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        let link = link.clone();
        connections.spawn(async move {
            let exec = format!("tunnel-{port}-{}", uuid::Uuid::new_v4().simple());
            let spec = SpawnSpec {
                program: KANDEV_IN_CONTAINER.to_owned(),
                args: ["tunnel", "connect", "--port", &port.to_string()]
                    .map(str::to_owned)
                    .to_vec(),
                env: vec![],
                cwd: PathBuf::from("/"),
                secrets: vec![],
                pty: None,
                scrollback: 0,
            };
            let Ok(tunnel) = link.spawn(&exec, spec).await else { return };
            let mut stream = tokio::io::join(tunnel.stdout, tunnel.stdin);
            let _ = tokio::io::copy_bidirectional(&mut socket, &mut stream).await;
            tunnel.control.kill(Duration::ZERO);
        });
        // Reap the finished ones as new ones come.
        while connections.try_join_next().is_some() {}
    }
}

/// At startup: the links to the containers of tasks whose session may still run there (a
/// runner position recorded, the runtime running) or whose dev server ran, with what their
/// runners held.
pub(crate) async fn kept_at_startup(
    inner: &Inner,
) -> Result<Vec<(TaskId, RunnerClient, Vec<ExecutionInfo>)>> {
    let mut candidates: Vec<TaskId> = vec![];
    for session in inner.store.all_sessions().await? {
        let running =
            inner.store.get_runtime(&session.id).await?.is_some_and(|r| r.status == "running");
        if running && inner.store.runner_position(&session.id).await?.is_some() {
            candidates.push(session.task_id);
        }
    }
    for record in inner.store.runner_terminals().await? {
        if record.kind == "dev_server" {
            candidates.push(record.task_id);
        }
    }
    let mut tasks: Vec<(TaskId, Executor, ContainerSettings, Vec<PathBuf>)> = vec![];
    for task_id in candidates {
        if tasks.iter().any(|(t, ..)| *t == task_id) {
            continue;
        }
        let records = inner.store.live_worktrees(&task_id).await?;
        for record in &records {
            if let Some((executor, settings)) = container_of(inner, record).await? {
                let mounts = records.iter().map(|r| PathBuf::from(&r.path)).collect();
                tasks.push((task_id.clone(), executor, settings, mounts));
                break;
            }
        }
    }
    let connecting = tasks.into_iter().map(|(task, executor, settings, mounts)| async move {
        let made = connect(inner, &executor, &settings, &task, mounts);
        match tokio::time::timeout(STARTUP_CONNECT, made).await {
            Ok(Ok((link, held))) => Some((task, link, held)),
            Ok(Err(message)) => {
                tracing::warn!(task = %task, error = %message, "cannot reach a task's container at startup; its sessions are interrupted");
                None
            }
            Err(_) => {
                tracing::warn!(task = %task, "a task's container did not answer within 30 s at startup; its sessions are interrupted");
                None
            }
        }
    });
    Ok(futures::future::join_all(connecting).await.into_iter().flatten().collect())
}

/// At startup: removes the containers this server (its home) made for tasks that no longer
/// exist or have no live worktree, on every engine a container executor names (or finds).
pub(crate) async fn remove_orphans(inner: &Inner) -> Result<()> {
    let mut engines: Vec<ContainerEngine> = vec![];
    for executor in inner.store.list_executors().await? {
        let ExecutorKind::Container(settings) = executor.kind else { continue };
        if let Ok(engine) = engine_cli::resolve_engine(settings.engine).await
            && !engines.contains(&engine)
        {
            engines.push(engine);
        }
    }
    for engine in engines {
        let found = match engine_cli::containers_of(engine, &inner.config.home).await {
            Ok(found) => found,
            Err(err) => {
                tracing::warn!(error = %err, "cannot list the task containers");
                continue;
            }
        };
        for (name, task) in found {
            let live = inner.store.live_worktrees(&TaskId::new(task.as_str())).await?;
            if live.is_empty() {
                tracing::info!(container = %name, "removing the container of a task that is gone");
                match engine_cli::remove(engine, &name).await {
                    Ok(()) => remove_runner_dir(inner, &name),
                    Err(err) => {
                        tracing::warn!(container = %name, error = %err, "cannot remove a container")
                    }
                }
            }
        }
    }
    Ok(())
}

/// Removes the task's container, if its worktrees were made for one (archive, delete): its
/// link closed first, then the container with whatever still runs in it.
pub(crate) async fn remove_for_task(inner: &Inner, records: &[WorktreeRecord]) {
    for record in records {
        let Ok(Some((executor, settings))) = container_of(inner, record).await else { continue };
        let name = TaskContainer::name_for(record.task_id.as_str());
        if let Some((_, link)) = inner.links.slot(&name).lock().await.link.take() {
            link.close();
        }
        let removed = match engine_cli::resolve_engine(settings.engine).await {
            Ok(engine) => engine_cli::remove(engine, &name).await.map_err(|e| e.to_string()),
            Err(err) => Err(err.to_string()),
        };
        match removed {
            Ok(()) => remove_runner_dir(inner, &name),
            Err(err) => {
                tracing::warn!(container = %name, executor = %executor.name, error = %err, "cannot remove a task's container")
            }
        }
        return;
    }
}

/// Removes the folder of a removed container's runner (its socket, log and agent state).
fn remove_runner_dir(inner: &Inner, name: &str) {
    let dir = TaskContainer::runner_dir_of(&inner.config.home, name);
    if let Err(err) = std::fs::remove_dir_all(&dir)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(folder = %dir.display(), error = %err, "cannot remove a container's folder");
    }
}

/// One finding of `executor.check` on a container executor.
#[derive(Debug, Clone)]
pub struct CheckStep {
    pub what: String,
    pub ok: bool,
    /// What was found, or the line that fixes it.
    pub detail: String,
}

/// `executor.check` of a container executor: the engine runs, the image is present, this
/// server's `kandev` runs in it. Nothing is pulled; a step after a failed one is not tried.
pub(crate) async fn check(settings: &ContainerSettings) -> Vec<CheckStep> {
    let step = |what: &str, outcome: std::result::Result<String, String>| CheckStep {
        what: what.to_owned(),
        ok: outcome.is_ok(),
        detail: outcome.unwrap_or_else(|e| e),
    };
    let engine = engine_cli::resolve_engine(settings.engine).await;
    let mut steps = vec![step(
        "engine",
        engine.as_ref().map(|e| format!("{} runs", e.program())).map_err(ToString::to_string),
    )];
    let Ok(engine) = engine else { return steps };
    let image = match engine_cli::image_exists(engine, &settings.image).await {
        Ok(true) => Ok(format!("{} is present", settings.image)),
        Ok(false) => Err(engine_cli::ContainerError::NoImage {
            engine: engine.program(),
            image: settings.image.clone(),
        }
        .to_string()),
        Err(err) => Err(err.to_string()),
    };
    let image_ok = image.is_ok();
    steps.push(step("image", image));
    if !image_ok {
        return steps;
    }
    let version = match std::env::current_exe() {
        Ok(kandev) => engine_cli::kandev_version_in(engine, &settings.image, &kandev)
            .await
            .map(|v| format!("{v} runs in it"))
            .map_err(|e| e.to_string()),
        Err(e) => Err(format!("cannot find this server's kandev binary: {e}")),
    };
    steps.push(step("kandev", version));
    steps
}
