//! Preparing the working directory a session starts in: planning it when the session is
//! created (the task's worktrees, or its plain folder), then, as the first part of every
//! start, making or reusing the worktrees and running setup scripts that have not succeeded
//! yet, their output streamed into the transcript.
//!
//! Invariants:
//! - Worktrees of a task are created, reused and removed under the task's lock
//!   (`Inner::task_locks`), so two starts (or a start and an archive) never race for the
//!   same directory.
//! - A failure the user must fix (a repository that is gone, a missing base branch, no
//!   commits, a failing setup script) is a failed start with a readable message, never an
//!   API error; what was made for other repositories stays, recorded, for the next start.
//! - A worktree made but not recorded is removed again: nobody would ever remove it.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kandev_domain::SessionId;
use kandev_domain::message_meta::{MessageMeta, StatusNote};
use kandev_domain::task::Task;
use kandev_domain::transcript::Session;
use kandev_domain::workspace::Repository;
use kandev_runtime::git::{self, GitError, OnExistingBranch, WorktreeSpec};
use kandev_runtime::runner::ssh::SshRunner;
use kandev_runtime::site::Site;
use kandev_store::{NewWorktree, StoreError, WorktreeRecord};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::error::{EngineError, Result};
use crate::handshake::BootFailure;
use crate::inner::Inner;
use crate::publish;
use crate::sites::{self, Placement};
use crate::workdir::shared::{git_error, new_worktree_path, script_timeout, task_worktrees_dir};
use crate::write::add_message;

/// Most bytes of a setup script's output streamed into its transcript message while it
/// runs; the last lines are shown when it ends either way.
const SETUP_STREAM_LIMIT: usize = 64 * 1024;

/// Where a new session of a task will work, decided before its row is written.
pub(crate) struct Plan {
    cwd: PathBuf,
    repositories: Vec<Planned>,
    /// The executor of the task's repositories (they all use the same one).
    placement: Placement,
}

struct Planned {
    repository: Repository,
    /// The live worktree recorded for this task and repository, if any.
    existing: Option<WorktreeRecord>,
    path: PathBuf,
}

impl Plan {
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }
}

/// Whose worktrees a plan is for: the task's own, or those of attempt `number` (issue 48),
/// whose session is known once its row exists.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Owner<'a> {
    Task,
    Attempt { number: u32, session: Option<&'a SessionId> },
}

impl Owner<'_> {
    fn owns(&self, record: &WorktreeRecord) -> bool {
        match self {
            Owner::Task => record.is_task_worktree(),
            Owner::Attempt { session, .. } => {
                session.is_some_and(|s| record.session_id.as_ref() == Some(s))
            }
        }
    }
}

/// Decides the session's working directory in the task's worktrees. A task without a
/// repository gets its plain folder (created here); worktrees are only planned, [`prepare`]
/// makes them.
pub(crate) async fn plan(inner: &Inner, task: &Task) -> Result<Plan> {
    plan_for(inner, task, Owner::Task).await
}

/// [`plan`] for the task's own worktrees or an attempt's. An attempt of a task with one
/// repository works in `worktrees/<task>/attempt-<n>`; attempts of tasks with no repository
/// or several are refused.
pub(crate) async fn plan_for(inner: &Inner, task: &Task, owner: Owner<'_>) -> Result<Plan> {
    let home = &inner.config.home;
    if task.repository_ids.is_empty() {
        let cwd = git::create_task_dir(home, task.id.as_str())
            .await
            .map_err(|e| EngineError::Unavailable(format!("cannot create the task folder: {e}")))?;
        return Ok(Plan { cwd, repositories: vec![], placement: Placement::Local });
    }
    if let Owner::Attempt { .. } = owner
        && task.repository_ids.len() != 1
    {
        return Err(EngineError::Validation(
            "attempts need a task with exactly one repository; this one has several".into(),
        ));
    }
    let all = inner.store.live_worktrees(&task.id).await?;
    let mut used: HashSet<OsString> =
        all.iter().filter_map(|w| Path::new(&w.path).file_name().map(OsString::from)).collect();
    let live: Vec<WorktreeRecord> = all.into_iter().filter(|w| owner.owns(w)).collect();
    let mut repositories = vec![];
    let mut placement: Option<Placement> = None;
    for id in &task.repository_ids {
        let repository = inner.store.get_repository(id).await.map_err(|e| match e {
            StoreError::NotFound { .. } => EngineError::Validation(format!(
                "repository {id} of the task no longer exists; update the task's repositories"
            )),
            other => other.into(),
        })?;
        let here = sites::placement(inner, &repository).await?;
        if let Some(first) = &placement
            && first.executor_id() != here.executor_id()
        {
            return Err(EngineError::Validation(format!(
                "the repositories of a task must all use the same executor, but {} uses {}; \
                 set the same executor on each in Settings › Repositories",
                repository.name,
                describe(&here)
            )));
        }
        let existing = live.iter().find(|w| w.repository_id.as_ref() == Some(id)).cloned();
        if let Some(record) = &existing
            && record.executor_id.as_deref() != here.executor_id()
        {
            return Err(EngineError::Conflict(format!(
                "the task's worktree {} of repository {} was made on another executor than the \
                 one the repository now uses ({}); remove the task's worktrees (archive the \
                 task) or set the repository's executor back",
                record.path,
                repository.name,
                describe(&here)
            )));
        }
        let root = root_of(home, &here);
        placement = Some(here);
        let path = match (&existing, owner) {
            (Some(record), _) => PathBuf::from(&record.path),
            (None, Owner::Attempt { number, .. }) => {
                task_worktrees_dir(&root, &task.id)?.join(format!("attempt-{number}"))
            }
            (None, Owner::Task) => {
                let path = new_worktree_path(&root, task, &repository, &used)?;
                used.extend(path.file_name().map(OsString::from));
                path
            }
        };
        repositories.push(Planned { repository, existing, path });
    }
    let placement = placement.unwrap_or(Placement::Local);
    let cwd = match repositories.as_slice() {
        [only] => only.path.clone(),
        _ => task_worktrees_dir(&root_of(home, &placement), &task.id)?,
    };
    Ok(Plan { cwd, repositories, placement })
}

/// Where worktrees of a placement go: `$KANDEV_HOME`, or the SSH executor's remote home.
fn root_of(home: &Path, placement: &Placement) -> PathBuf {
    match placement {
        Placement::Local | Placement::Container { .. } => home.to_path_buf(),
        Placement::Ssh { settings, .. } => PathBuf::from(&settings.remote_home),
    }
}

fn describe(placement: &Placement) -> String {
    match placement {
        Placement::Local => "this server's host".to_owned(),
        Placement::Ssh { executor, .. } => format!("the SSH executor {}", executor.name),
        Placement::Container { executor, .. } => {
            format!("the container executor {}", executor.name)
        }
    }
}

/// Prepares the working directory a session's agent is about to start in: the task's
/// worktrees are made (or reused, or made again when they vanished) and setup scripts that
/// have not succeeded yet run, their output streamed into the transcript. It runs inside the
/// session's start (a child future of its actor), under the task's lock, so `session.stop`
/// cancels it (killing a setup script's process group), a client going away does not, and
/// an archive waits for it or cancels it instead of removing a worktree under a new agent.
/// `first` (the session's first start) announces a reused worktree. A failure the user must
/// fix (a repository that is gone, a missing base branch, no commits, a failing setup
/// script) is a [`BootFailure`] with a readable message; worktrees of other repositories
/// that were prepared stay, recorded, for the next start.
pub(crate) async fn prepare_for_start(
    inner: &Inner,
    session: &Session,
    first: bool,
    cancel: &CancellationToken,
) -> std::result::Result<Placement, BootFailure> {
    let stopped = || BootFailure::new("cancelled", "the start was cancelled");
    let unusable = |err: EngineError| {
        BootFailure::new("worktree_failed", format!("cannot prepare the working directory: {err}"))
    };
    let _lock = tokio::select! {
        _ = cancel.cancelled() => return Err(stopped()),
        lock = inner.task_locks.lock(&session.task_id) => lock,
    };
    let task = inner.store.get_task(&session.task_id).await.map_err(|e| unusable(e.into()))?;
    let owner = match session.attempt {
        Some(number) => Owner::Attempt { number, session: Some(&session.id) },
        None => Owner::Task,
    };
    let plan = plan_for(inner, &task, owner).await.map_err(unusable)?;
    let cwd = plan.cwd().display().to_string();
    if cwd != session.cwd {
        return Err(BootFailure::new(
            "worktree_failed",
            format!(
                "the task's working directory is now {cwd}, not {}; start a new session for it",
                session.cwd
            ),
        ));
    }
    let placement = plan.placement.clone();
    let site = if plan.repositories.is_empty() {
        Site::Local
    } else {
        tokio::select! {
            _ = cancel.cancelled() => return Err(stopped()),
            site = sites::site(inner, &placement) => site.map_err(unusable)?,
        }
    };
    for planned in plan.repositories {
        if cancel.is_cancelled() {
            return Err(stopped());
        }
        let prepared =
            prepare_repository(inner, &task, session, planned, first, cancel, &site, &placement);
        match prepared.await {
            Ok(Ok(())) => {}
            Ok(Err(failure)) => return Err(failure.into_boot()),
            Err(err) => return Err(unusable(err)),
        }
    }
    Ok(placement)
}

/// Why a session could not start, for its `last_error`.
struct Failure {
    code: &'static str,
    message: String,
    details: serde_json::Value,
}

impl Failure {
    fn into_boot(self) -> BootFailure {
        let mut failure = BootFailure::new(self.code, self.message);
        if let serde_json::Value::Object(details) = self.details {
            failure.details = details;
        }
        failure
    }
}

#[allow(clippy::too_many_arguments)]
async fn prepare_repository(
    inner: &Inner,
    task: &Task,
    session: &Session,
    planned: Planned,
    first: bool,
    cancel: &CancellationToken,
    site: &Site,
    placement: &Placement,
) -> Result<std::result::Result<(), Failure>> {
    let Planned { repository, existing, path } = planned;
    let present = match &existing {
        Some(record) => site.exists(Path::new(&record.path)).await.map_err(git_error)?,
        None => false,
    };
    let record = match existing {
        Some(record) if present => {
            if first {
                let text = format!(
                    "working in the task's worktree {} on branch {}",
                    record.path, record.branch
                );
                let note = StatusNote::WorktreeReused {
                    repository_id: repository.id.to_string(),
                    path: record.path.clone(),
                    branch: record.branch.clone(),
                };
                status(inner, session, &text, note).await?;
            }
            record
        }
        stale => {
            if let Some(stale) = stale {
                // Its directory was deleted behind our back: forget it (this also prunes
                // git's registration, so the branch can be checked out again).
                let pruned = site
                    .remove_worktree(
                        Path::new(&stale.repository_path),
                        Path::new(&stale.path),
                        false,
                    )
                    .await;
                if let Err(err) = pruned {
                    tracing::warn!(path = %stale.path, error = %err, "pruning a vanished worktree failed");
                }
                let mut tx = inner.store.begin_write().await?;
                tx.mark_worktree_removed(&stale.id).await?;
                tx.commit().await?;
            }
            match create(inner, task, session, &repository, path, site, placement).await? {
                Ok(record) => record,
                Err(failure) => return Ok(Err(failure)),
            }
        }
    };
    if record.setup_done {
        return Ok(Ok(()));
    }
    if repository.setup_script.trim().is_empty() {
        let mut tx = inner.store.begin_write().await?;
        tx.mark_worktree_setup_done(&record.id).await?;
        tx.commit().await?;
        return Ok(Ok(()));
    }
    // In the task's container for a container executor (made or started here).
    let through = match placement {
        Placement::Container { .. } => {
            crate::containers::exec_in(inner, &session.task_id, &record.path, false)
                .await?
                .ok_or_else(|| {
                    EngineError::Unavailable("the task's container executor is gone".into())
                })?
        }
        _ => vec![],
    };
    if let Placement::Ssh { executor, .. } = placement {
        return Ok(Err(Failure {
            code: "setup_script_failed",
            message: format!(
                "repository {} has a setup script, and setup scripts do not run on the SSH \
                 executor {} yet (never on this host instead); clear the script or use the \
                 local executor",
                repository.name, executor.name
            ),
            details: json!({ "repository_id": repository.id.to_string() }),
        }));
    }
    run_setup(inner, session, &repository, &record, &through, cancel).await
}

/// Runs a repository's setup script in its worktree, streaming its output into one
/// transcript message that ends up saying how the script ended.
async fn run_setup(
    inner: &Inner,
    session: &Session,
    repository: &Repository,
    record: &WorktreeRecord,
    through: &[String],
    cancel: &CancellationToken,
) -> Result<std::result::Result<(), Failure>> {
    let name = &repository.name;
    let metadata = |outcome: &str, exit_code: Option<i32>| {
        MessageMeta::from(StatusNote::SetupScript {
            repository_id: repository.id.to_string(),
            status: outcome.to_owned(),
            exit_code,
        })
    };
    let mut tx = inner.store.begin_write().await?;
    let running = format!("setup script of {name} running:\n");
    let message = add_message(&mut tx, session, None, &running, metadata("running", None)).await?;
    tx.commit().await?;
    let (live, chunks) = tokio::sync::mpsc::channel(64);
    let timeout = script_timeout(repository, inner.config.setup_timeout);
    let script = &repository.setup_script;
    let path = Path::new(&record.path);
    let env = match crate::secrets::script_env(inner, repository).await {
        Ok(env) => env,
        Err(err) => {
            return Ok(Err(Failure {
                code: "setup_script_failed",
                message: format!("setup script of {name} did not run: {err}"),
                details: json!({ "repository_id": repository.id.to_string() }),
            }));
        }
    };
    let run = git::run_script_through(through, path, script, timeout, Some(live), &env);
    let ran = tokio::select! {
        // Dropping the script's future kills its process group.
        _ = cancel.cancelled() => None,
        (ran, streamed) = async { tokio::join!(run, stream_output(inner, session, &message, chunks)) } => {
            if let Err(err) = streamed {
                tracing::warn!(error = %err, "streaming the setup script's output failed");
            }
            Some(ran)
        }
    };
    let (text, outcome, result) = match ran {
        None => (
            format!("setup script of {name} was stopped; it runs again at the next start"),
            metadata("stopped", None),
            Err(Failure {
                code: "cancelled",
                message: "the start was cancelled".into(),
                details: json!({}),
            }),
        ),
        Some(Ok(output)) => {
            let shown = output.output.trim_end();
            let text = if shown.is_empty() {
                format!("setup script of {name} finished (exit code 0, no output)")
            } else {
                format!("setup script of {name} finished (exit code 0):\n{shown}")
            };
            (text, metadata("finished", Some(output.exit_code)), Ok(()))
        }
        Some(Err(err)) => {
            let (exit_code, output) = match &err {
                GitError::SetupFailed { exit_code, output_tail } => {
                    (*exit_code, output_tail.clone())
                }
                GitError::SetupTimedOut { output_tail, .. } => (None, output_tail.clone()),
                _ => (None, String::new()),
            };
            let failure = Failure {
                code: "setup_script_failed",
                message: format!("repository {name}: {err}"),
                details: json!({
                    "repository_id": repository.id.to_string(),
                    "exit_code": exit_code,
                    "output": output,
                    "worktree": record.path,
                }),
            };
            let text = format!("setup script of {name} failed: {err}");
            (text, metadata("failed", exit_code), Err(failure))
        }
    };
    let mut tx = inner.store.begin_write().await?;
    if result.is_ok() {
        tx.mark_worktree_setup_done(&record.id).await?;
    }
    let message = tx.set_message(&message.id, Some(&text), &outcome).await?;
    publish::message_changed(&mut tx, session, &message).await?;
    tx.commit().await?;
    Ok(result)
}

/// Appends what a running setup script writes to its transcript message, in batches, up to
/// [`SETUP_STREAM_LIMIT`] bytes.
async fn stream_output(
    inner: &Inner,
    session: &Session,
    message: &kandev_domain::transcript::Message,
    mut chunks: tokio::sync::mpsc::Receiver<String>,
) -> Result<()> {
    let mut streamed = 0;
    while let Some(first) = chunks.recv().await {
        let mut batch = first;
        while let Ok(more) = chunks.try_recv() {
            batch.push_str(&more);
        }
        if streamed >= SETUP_STREAM_LIMIT {
            continue; // keep draining so the script is never held up
        }
        streamed += batch.len();
        if streamed >= SETUP_STREAM_LIMIT {
            batch.push_str("\n[more output; its last lines are shown when the script ends]");
        }
        let mut tx = inner.store.begin_write().await?;
        let appended = tx.append_message(&message.id, &batch).await?;
        publish::message_appended(&mut tx, &session.id, &appended, &batch).await?;
        tx.commit().await?;
    }
    Ok(())
}

/// The branch a new worktree of the task starts from. The task's own branch (from its
/// earlier worktree of this repository, removed since: the branch was kept) is checked out
/// again with its commits; otherwise a name from the repository's template, on which
/// `create_worktree` never takes over an existing branch (another task's, perhaps archived,
/// with its commits) but picks a free `-<n>` suffix.
async fn task_branch(
    inner: &Inner,
    task: &Task,
    repository: &Repository,
) -> Result<(String, OnExistingBranch)> {
    if let Some(own) = inner.store.last_worktree_branch(&task.id, &repository.id).await? {
        return Ok((own, OnExistingBranch::Reuse));
    }
    let name = git::branch_name(&repository.branch_template, &task.title, task.id.as_str());
    Ok((name, OnExistingBranch::PickAnother))
}

/// The branch the task works from in `repository`: the one chosen at creation, else the
/// repository's default branch.
pub(crate) async fn task_base_branch(
    inner: &Inner,
    task_id: &kandev_domain::TaskId,
    repository: &Repository,
) -> Result<String> {
    Ok(inner
        .store
        .task_base_branch(task_id, &repository.id)
        .await?
        .unwrap_or_else(|| repository.default_branch.clone()))
}

/// Creates and records a new worktree of `repository` for the task.
async fn create(
    inner: &Inner,
    task: &Task,
    session: &Session,
    repository: &Repository,
    path: PathBuf,
    site: &Site,
    placement: &Placement,
) -> Result<std::result::Result<WorktreeRecord, Failure>> {
    let (branch, existing) = match session.attempt {
        // An attempt's own branch beside the task's (a free `-<n>` suffix if taken).
        Some(number) => {
            let name = git::branch_name(&repository.branch_template, &task.title, task.id.as_str());
            (format!("{name}-attempt-{number}"), OnExistingBranch::PickAnother)
        }
        None => task_branch(inner, task, repository).await?,
    };
    let base_branch = task_base_branch(inner, &task.id, repository).await?;
    let local_repo = PathBuf::from(&repository.local_path);
    let repo_path = local_repo.clone();
    // A remote base (`origin/feature`) starts from the remote's current tip.
    if let Err(err) = git::fetch_base(&repo_path, &base_branch).await {
        return Ok(Err(Failure {
            code: "worktree_failed",
            message: format!(
                "cannot fetch the base branch {base_branch} of repository {}: {err}",
                repository.name
            ),
            details: json!({
                "repository_id": repository.id.to_string(),
                "base_branch": base_branch,
            }),
        }));
    }
    // On an SSH executor the worktree is made of a bare copy on the build host, into which
    // the base branch is pushed from the server's repository first.
    let repo_path = match placement {
        Placement::Local | Placement::Container { .. } => repo_path,
        Placement::Ssh { settings, executor } => {
            let bare =
                PathBuf::from(format!("{}/repos/{}.git", settings.remote_home, repository.id));
            if let Err(message) = mirror(&local_repo, &bare, &base_branch, site, settings).await {
                return Ok(Err(Failure {
                    code: "worktree_failed",
                    message: format!(
                        "cannot copy the base branch {base_branch} of repository {} to the SSH \
                         executor {}: {message}",
                        repository.name, executor.name
                    ),
                    details: json!({
                        "repository_id": repository.id.to_string(),
                        "base_branch": base_branch,
                    }),
                }));
            }
            bare
        }
    };
    let spec = WorktreeSpec {
        repo_path,
        base_branch: base_branch.clone(),
        branch,
        existing,
        worktree_path: path,
    };
    let worktree = match site.create_worktree(&spec).await {
        Ok(worktree) => worktree,
        Err(err) => {
            return Ok(Err(Failure {
                code: "worktree_failed",
                message: format!(
                    "cannot create a worktree of repository {}: {err}",
                    repository.name
                ),
                details: json!({
                    "repository_id": repository.id.to_string(),
                    "repository_path": repository.local_path,
                    "base_branch": base_branch,
                    "branch": spec.branch,
                }),
            }));
        }
    };
    let path = worktree.path.display().to_string();
    let new = NewWorktree {
        task_id: task.id.clone(),
        repository_id: repository.id.clone(),
        repository_path: spec.repo_path.display().to_string(),
        path: path.clone(),
        branch: worktree.branch.clone(),
        base_commit: worktree.base_commit.clone(),
        executor_id: placement.executor_id().map(str::to_owned),
        session_id: session.attempt.map(|_| session.id.clone()),
    };
    let short: String = worktree.base_commit.chars().take(8).collect();
    let mut text = format!(
        "created worktree {path} on branch {} from {base_branch} ({short})",
        worktree.branch
    );
    // Ignored files the repository asks for (`.env`), never over a tracked file.
    let copied = match placement {
        Placement::Local | Placement::Container { .. } => {
            git::copy_ignored_files(&spec.repo_path, &worktree.path, &repository.copy_files).await
        }
        Placement::Ssh { .. } if repository.copy_files.is_empty() => Ok(vec![]),
        Placement::Ssh { .. } => {
            text.push_str("; the repository's files to copy are not copied to an SSH executor");
            Ok(vec![])
        }
    };
    match copied {
        Ok(copied) if !copied.is_empty() => {
            text.push_str(&format!("; copied {}", copied.join(", ")));
        }
        Ok(_) => {}
        Err(err) => {
            tracing::warn!(path, error = %err, "copying files into a new worktree failed");
            text.push_str(&format!("; copying files failed: {err}"));
        }
    }
    let note = StatusNote::WorktreeCreated {
        repository_id: repository.id.to_string(),
        path: path.to_owned(),
        branch: worktree.branch.clone(),
        base_commit: worktree.base_commit.clone(),
    };
    let recorded = async {
        let mut tx = inner.store.begin_write().await?;
        let record = tx.insert_worktree(&new).await?;
        add_message(&mut tx, session, None, &text, note).await?;
        tx.commit().await?;
        Ok::<_, EngineError>(record)
    }
    .await;
    match recorded {
        Ok(record) => Ok(Ok(record)),
        Err(err) => {
            // Not recorded means nobody would ever remove it: undo.
            if let Err(e) = site.remove_worktree(&spec.repo_path, &worktree.path, true).await {
                tracing::warn!(path, error = %e, "removing an unrecorded worktree failed");
            }
            Err(err)
        }
    }
}

/// Makes the build host's bare copy of the repository (`bare`) hold the base branch: `git init
/// --bare` there, then a push from the server's repository over ssh with the executor's
/// options. Also before a rebase there (`workdir::branch`).
pub(crate) async fn mirror(
    local: &Path,
    bare: &Path,
    base_branch: &str,
    site: &Site,
    settings: &kandev_domain::executor::SshSettings,
) -> std::result::Result<(), String> {
    let full = git::full_ref_name(local, base_branch).await.map_err(|e| e.to_string())?;
    let Some(full) = full else {
        return Err(GitError::BaseBranchMissing { branch: base_branch.to_owned() }.to_string());
    };
    site.init_bare(bare).await.map_err(|e| e.to_string())?;
    // Only its ssh options and URL are used here: no binary is copied.
    let ssh = SshRunner::new(settings.clone(), PathBuf::new(), std::time::Duration::ZERO);
    let url = ssh.git_url(&bare.display().to_string());
    git::push_over_ssh(local, &url, &[full], &ssh.git_ssh_command())
        .await
        .map_err(|e| e.to_string())
}

async fn status(inner: &Inner, session: &Session, text: &str, note: StatusNote) -> Result<()> {
    let mut tx = inner.store.begin_write().await?;
    add_message(&mut tx, session, None, text, note).await?;
    tx.commit().await?;
    Ok(())
}
