//! Where a task's worktrees and agents are (issue 20, SSH executor): this host, or the build
//! host of the SSH executor its repositories use. One runner connection
//! ([`RunnerClient`] over [`kandev_runtime::runner::ssh::SshTransport`]) per executor, shared by every
//! session, worktree and file action there, made on first use (installing this server's
//! `kandev` on the host first) and made again when it is gone for good or the executor's
//! settings changed. [`RunnerLauncher`] starts agents through it, like the local runner's.
//! A container executor's worktrees are this host's; its agents run in the task's container
//! (`crate::containers`).

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kandev_domain::executor::{ContainerSettings, Executor, ExecutorKind, SshSettings};
use kandev_domain::workspace::Repository;
use kandev_runtime::runner::ssh::{Backoff, SshRunner};
use kandev_runtime::runner::{ExecutionInfo, RunnerClient, SpawnSpec};
use kandev_runtime::site::{RemoteSite, Site};
use kandev_store::{StoreError, WorktreeRecord};

use crate::error::{EngineError, Result};
use crate::inner::Inner;
use crate::launcher::{LaunchSpec, Launched, Launcher, launch_through};
use crate::links::MadeWith;

/// How long a failure to connect to an executor is answered again without a new attempt.
const FAILED_FOR: Duration = Duration::from_secs(5);

/// How long a build host's runner keeps agents while this server is away.
const REMOTE_GRACE: Duration = Duration::from_secs(600);

/// Where a repository's work goes.
#[derive(Clone)]
pub(crate) enum Placement {
    Local,
    Ssh {
        executor: Box<Executor>,
        settings: Box<SshSettings>,
    },
    /// The worktrees on this host, the agent in the task's container (issue 42).
    Container {
        executor: Box<Executor>,
        settings: Box<ContainerSettings>,
    },
}

impl Placement {
    pub fn executor_id(&self) -> Option<&str> {
        match self {
            Placement::Local => None,
            Placement::Ssh { executor, .. } | Placement::Container { executor, .. } => {
                Some(&executor.id)
            }
        }
    }
}

/// The executor `repository` uses.
pub(crate) async fn placement(inner: &Inner, repository: &Repository) -> Result<Placement> {
    match inner.store.repository_executor(repository.id.as_str()).await? {
        Some(executor) => match executor.kind.clone() {
            ExecutorKind::Ssh(settings) => {
                Ok(Placement::Ssh { executor: Box::new(executor), settings: Box::new(settings) })
            }
            ExecutorKind::Container(settings) => Ok(Placement::Container {
                executor: Box::new(executor),
                settings: Box::new(settings),
            }),
            ExecutorKind::Local => Ok(Placement::Local),
        },
        None => Ok(Placement::Local),
    }
}

/// The link to `executor`'s host: the live one, or a new one (install, connect). What the
/// runner still holds from a link that gave up or an earlier server process is forgotten
/// (killed); startup takes the executions of adoptable sessions over first
/// ([`kept_at_startup`]).
pub(crate) async fn link(
    inner: &Inner,
    executor: &Executor,
    settings: &SshSettings,
) -> std::result::Result<RunnerClient, String> {
    let (link, held) = connect(inner, executor, settings).await?;
    if !held.is_empty() {
        tracing::info!(executor = %executor.name, count = held.len(),
            "stopping remote executions nobody here follows");
    }
    for execution in &held {
        link.forget(&execution.exec);
    }
    Ok(link)
}

/// The live link to `executor`'s host with nothing held, or a new one with the executions
/// its runner held. A link replaced because the settings changed is closed: one connection
/// owns a runner at a time (its agents end as lost).
async fn connect(
    inner: &Inner,
    executor: &Executor,
    settings: &SshSettings,
) -> std::result::Result<(RunnerClient, Vec<ExecutionInfo>), String> {
    let slot = inner.links.slot(&executor.id);
    let mut slot = slot.lock().await;
    if let Some((made_with, link)) = &slot.link
        && *made_with == MadeWith::Ssh(settings.clone())
        && !link.is_closed()
    {
        return Ok((link.clone(), vec![]));
    }
    if let Some((tried_with, at, message)) = &slot.failed
        && tried_with == settings
        && at.elapsed() < FAILED_FOR
    {
        return Err(message.clone());
    }
    let local = std::env::current_exe()
        .map_err(|e| format!("cannot find this server's kandev binary: {e}"))?;
    let runner = SshRunner::new(settings.clone(), local, REMOTE_GRACE);
    let (link, held) = match kandev_runtime::runner::ssh::connect_link(runner, Backoff::default())
        .await
    {
        Ok(made) => made,
        Err(e) => {
            let message = format!("cannot reach the SSH executor {}: {}", executor.name, e.message);
            slot.failed = Some((settings.clone(), Instant::now(), message.clone()));
            return Err(message);
        }
    };
    if let Some((_, old)) = slot.link.take() {
        old.close();
    }
    slot.failed = None;
    slot.link = Some((MadeWith::Ssh(settings.clone()), link.clone()));
    Ok((link, held))
}

/// How long startup waits for each SSH executor whose runner may hold agents of the last run.
const STARTUP_CONNECT: Duration = Duration::from_secs(30);

/// At startup, before any actor runs: the connections to the runners of SSH executors and
/// the executions they kept, for
/// each executor where a session has a recorded runner position (its agent may still run
/// there after a `kill -9` of the last server). Reconciliation takes over those of adoptable
/// sessions and forgets (kills) the rest. The executors are reached at once; one that cannot
/// be reached within 30 s (an install included: after an upgrade the binary is copied
/// first) is skipped: its sessions reconcile as interrupted, and what its runner holds is killed on
/// the next connection.
pub(crate) async fn kept_at_startup(
    inner: &Inner,
) -> Result<Vec<(RunnerClient, Vec<ExecutionInfo>)>> {
    let mut executors: Vec<Executor> = vec![];
    for session in inner.store.all_sessions().await? {
        // Only an execution the last run left running (a runtime ended by that run, or
        // before, has nothing left on any runner).
        let running =
            inner.store.get_runtime(&session.id).await?.is_some_and(|r| r.status == "running");
        if !running || inner.store.runner_position(&session.id).await?.is_none() {
            continue;
        }
        for record in inner.store.live_worktrees(&session.task_id).await? {
            let Some(id) = &record.executor_id else { continue };
            if executors.iter().any(|e| &e.id == id) {
                continue;
            }
            match inner.store.get_executor(id).await {
                Ok(executor) => executors.push(executor),
                Err(StoreError::NotFound { .. }) => {}
                Err(other) => return Err(other.into()),
            }
        }
    }
    // At once, each bounded: one host that is down holds up startup 30 s, not 30 s each.
    let connecting = executors.iter().filter_map(|executor| {
        let ExecutorKind::Ssh(settings) = &executor.kind else { return None };
        Some(async move {
            let made = tokio::time::timeout(STARTUP_CONNECT, connect(inner, executor, settings));
            match made.await {
                Ok(Ok(held)) => Some(held),
                Ok(Err(message)) => {
                    tracing::warn!(executor = %executor.name, error = %message, "cannot reach an SSH executor at startup; its sessions are interrupted");
                    None
                }
                Err(_) => {
                    tracing::warn!(executor = %executor.name, "an SSH executor did not answer within 30 s at startup; its sessions are interrupted");
                    None
                }
            }
        })
    });
    let kept = futures::future::join_all(connecting).await.into_iter().flatten().collect();
    Ok(kept)
}

/// The site of a placement.
pub(crate) async fn site(inner: &Inner, placement: &Placement) -> Result<Site> {
    match placement {
        // A container's worktrees are this host's; git runs here.
        Placement::Local | Placement::Container { .. } => Ok(Site::Local),
        Placement::Ssh { executor, settings } => {
            let link = link(inner, executor, settings).await.map_err(EngineError::Unavailable)?;
            Ok(Site::Remote(RemoteSite::new(link, &settings.remote_home, &executor.name)))
        }
    }
}

/// Where a recorded worktree lives (it stays on the host it was made on).
pub(crate) async fn site_of(inner: &Inner, record: &WorktreeRecord) -> Result<Site> {
    let Some(id) = &record.executor_id else {
        return Ok(Site::Local);
    };
    let executor = inner.store.get_executor(id).await.map_err(|e| match e {
        StoreError::NotFound { .. } => EngineError::Conflict(format!(
            "the worktree {} was made on an SSH executor that no longer exists; remove the \
             task's worktrees (archive it) to start again",
            record.path
        )),
        other => other.into(),
    })?;
    match &executor.kind {
        ExecutorKind::Ssh(settings) => {
            site(
                inner,
                &Placement::Ssh {
                    executor: Box::new(executor.clone()),
                    settings: Box::new(settings.clone()),
                },
            )
            .await
        }
        ExecutorKind::Local | ExecutorKind::Container(_) => Ok(Site::Local),
    }
}

/// Where a task's agent works: the host of its worktrees on an SSH executor (a task's
/// repositories all use the same one), else this host.
pub(crate) async fn site_of_task(inner: &Inner, task_id: &kandev_domain::TaskId) -> Result<Site> {
    for record in inner.store.live_worktrees(task_id).await? {
        if record.executor_id.is_some() {
            return site_of(inner, &record).await;
        }
    }
    Ok(Site::Local)
}

/// The name and SSH settings of the executor a recorded worktree was made on (`None`: this
/// host).
pub(crate) async fn ssh_of(
    inner: &Inner,
    record: &WorktreeRecord,
) -> Result<Option<(String, SshSettings)>> {
    let Some(id) = &record.executor_id else {
        return Ok(None);
    };
    // A missing executor is refused with what to do by `site_of`.
    let executor = match inner.store.get_executor(id).await {
        Ok(executor) => executor,
        Err(StoreError::NotFound { .. }) => return site_of(inner, record).await.map(|_| None),
        Err(other) => return Err(other.into()),
    };
    match executor.kind {
        ExecutorKind::Ssh(settings) => Ok(Some((executor.name, settings))),
        ExecutorKind::Local | ExecutorKind::Container(_) => Ok(None),
    }
}

/// The refusal of an action that is not done on an SSH executor's host or in a task's
/// container yet, when one of the task's worktrees was made for one: never on this host
/// instead.
pub(crate) async fn refuse_remote(
    inner: &Inner,
    task_id: &kandev_domain::TaskId,
    what: &str,
) -> Result<()> {
    for record in inner.store.live_worktrees(task_id).await? {
        if let Some(id) = &record.executor_id {
            let name = match inner.store.get_executor(id).await {
                Ok(executor) => executor.name,
                Err(_) => id.clone(),
            };
            return Err(EngineError::Validation(format!(
                "{what} is not available yet for tasks on the executor {name}"
            )));
        }
    }
    Ok(())
}

/// Starts agents through a runner link off this process: an SSH executor's host or a task's
/// container. The built-in mock runs as the runner side's own copy of `kandev` (`kandev
/// mock-agent`), its state under `home` there. The agent's pid is the runner side's: it is
/// not reported (nothing on this host may signal it).
pub(crate) struct RunnerLauncher {
    pub link: RunnerClient,
    /// The `kandev` binary on the runner's side.
    pub kandev: String,
    /// A folder of Kandev's own on the runner's side.
    pub home: String,
}

impl Launcher for RunnerLauncher {
    fn launch(
        &self,
        spec: LaunchSpec,
    ) -> BoxFuture<'static, std::result::Result<Launched, String>> {
        let link = self.link.clone();
        let (kandev, home) = (self.kandev.clone(), self.home.clone());
        Box::pin(async move {
            let (program, args) = match &spec.builtin_mock {
                Some(flags) => {
                    let mut args = vec!["mock-agent".to_owned()];
                    let mut flags = flags.iter();
                    while let Some(flag) = flags.next() {
                        args.push(flag.clone());
                        if flag == "--state-dir" {
                            // This server's state folder means nothing there.
                            flags.next();
                            args.push(format!("{home}/mock-agent"));
                        }
                    }
                    (kandev, args)
                }
                None => (spec.program, spec.args),
            };
            let exec = format!("agent-{}", uuid::Uuid::new_v4());
            let spawn = SpawnSpec {
                program,
                args,
                env: spec.env,
                cwd: spec.cwd,
                secrets: spec.secrets,
                pty: None,
                scrollback: 0,
            };
            launch_through(&link, exec, spawn, false).await
        })
    }
}
