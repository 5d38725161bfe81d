//! Where a task's worktrees and agents are (issue 20, SSH executor): this host, or the build
//! host of the SSH executor its repositories use. One [`SshLink`] per executor, shared by
//! every session, worktree and file action there, made on first use (installing this
//! server's `kandev` on the host first) and made again when it is gone for good or the
//! executor's settings changed. [`SshLauncher`] starts agents through it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kandev_domain::executor::{Executor, ExecutorKind, SshSettings};
use kandev_domain::workspace::Repository;
use kandev_runtime::ExitInfo;
use kandev_runtime::runner::SpawnSpec;
use kandev_runtime::site::{RemoteSite, Site};
use kandev_runtime::ssh::{Backoff, SshRunner};
use kandev_runtime::ssh_link::{LinkedExecution, SshLink};
use kandev_store::{StoreError, WorktreeRecord};

use crate::error::{EngineError, Result};
use crate::inner::Inner;
use crate::launcher::{ExecutionControl, LaunchSpec, Launched, Launcher};

/// How long a failure to connect to an executor is answered again without a new attempt.
const FAILED_FOR: Duration = Duration::from_secs(5);

/// How long a build host's runner keeps agents while this server is away.
const REMOTE_GRACE: Duration = Duration::from_secs(600);

/// Where a repository's work goes.
#[derive(Clone)]
pub(crate) enum Placement {
    Local,
    Ssh { executor: Box<Executor>, settings: Box<SshSettings> },
}

impl Placement {
    pub fn executor_id(&self) -> Option<&str> {
        match self {
            Placement::Local => None,
            Placement::Ssh { executor, .. } => Some(&executor.id),
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
            ExecutorKind::Local => Ok(Placement::Local),
        },
        None => Ok(Placement::Local),
    }
}

/// The link to `executor`'s host: the live one, or a new one (install, connect).
pub(crate) async fn link(
    inner: &Inner,
    executor: &Executor,
    settings: &SshSettings,
) -> std::result::Result<Arc<SshLink>, String> {
    let slot = inner.links.slot(&executor.id);
    let mut slot = slot.lock().await;
    if let Some((made_with, link)) = &slot.link
        && made_with == settings
        && !link.is_gone()
    {
        return Ok(link.clone());
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
    // Connecting forgets (kills) what the runner still holds from an earlier server process
    // or a link that gave up: this server never re-adopts remote executions.
    let (link, forgotten) = match SshLink::connect(runner, Backoff::default()).await {
        Ok(made) => made,
        Err(e) => {
            let message = format!("cannot reach the SSH executor {}: {e}", executor.name);
            slot.failed = Some((settings.clone(), Instant::now(), message.clone()));
            return Err(message);
        }
    };
    if !forgotten.is_empty() {
        tracing::info!(executor = %executor.name, count = forgotten.len(),
            "stopped remote executions this server does not own");
    }
    let link = Arc::new(link);
    slot.failed = None;
    slot.link = Some((settings.clone(), link.clone()));
    Ok(link)
}

/// The site of a placement.
pub(crate) async fn site(inner: &Inner, placement: &Placement) -> Result<Site> {
    match placement {
        Placement::Local => Ok(Site::Local),
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
        ExecutorKind::Local => Ok(Site::Local),
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
        ExecutorKind::Local => Ok(None),
    }
}

/// The refusal of an action that is not done on an SSH executor's host yet, when one of the
/// task's worktrees lives there.
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
                "{what} is not available yet for tasks on the SSH executor {name}"
            )));
        }
    }
    Ok(())
}

/// Starts agents on an SSH executor's host through its link. The built-in mock runs as the
/// host's own copy (`<remote_home>/bin/kandev mock-agent`), its state under the remote home.
/// The agent's pid is the host's: it is not reported (nothing on this host may signal it).
pub(crate) struct SshLauncher {
    pub link: Arc<SshLink>,
    pub remote_home: String,
}

/// A linked execution, with the link it needs (kept alive while the agent runs, even when
/// the executor's settings change and new work gets a new link).
struct LinkedControl {
    execution: LinkedExecution,
    _link: Arc<SshLink>,
}

impl ExecutionControl for LinkedControl {
    fn pid(&self) -> Option<i32> {
        None
    }

    fn pgid(&self) -> Option<i32> {
        None
    }

    fn stderr_tail(&self) -> String {
        self.execution.stderr_tail()
    }

    fn stop(&self, grace: Duration) -> BoxFuture<'_, ExitInfo> {
        Box::pin(self.execution.stop(grace))
    }

    fn wait(&self) -> BoxFuture<'_, ExitInfo> {
        Box::pin(self.execution.wait())
    }

    fn on_this_host(&self) -> bool {
        false
    }
}

impl Launcher for SshLauncher {
    fn launch(
        &self,
        spec: LaunchSpec,
    ) -> BoxFuture<'static, std::result::Result<Launched, String>> {
        let link = self.link.clone();
        let home = self.remote_home.clone();
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
                    (format!("{home}/bin/kandev"), args)
                }
                None => (spec.program, spec.args),
            };
            let exec = format!("agent-{}", uuid::Uuid::new_v4());
            let spawn =
                SpawnSpec { program, args, env: spec.env, cwd: spec.cwd, secrets: spec.secrets };
            let mut execution = link.spawn(&exec, spawn).await?;
            let (ends, _) = tokio::io::duplex(1);
            let stdout = std::mem::replace(&mut execution.stdout, ends);
            let (ends, _) = tokio::io::duplex(1);
            let stdin = std::mem::replace(&mut execution.stdin, ends);
            Ok(Launched {
                reader: Box::new(stdout),
                writer: Box::new(stdin),
                control: Arc::new(LinkedControl { execution, _link: link }),
                runner: None,
            })
        })
    }
}
