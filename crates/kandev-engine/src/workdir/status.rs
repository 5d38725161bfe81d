//! A task's git status per repository, computed from git and the store and published as
//! `task.git_status` on its workspace topic (after each turn, each ship action, on demand);
//! and how git refusals read to a caller. Imports nothing that reaches a session actor, so
//! an actor can refresh the status after a turn.

use std::path::Path;

use kandev_api_types::{GitStatusDto, Notification, WorkspaceEvent};
use kandev_domain::ship::{GitStatus, GitSummary, RemoteStatus};
use kandev_domain::workspace::Repository;
use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::git::{self, GitError};
use kandev_store::WorktreeRecord;
use serde_json::json;

use crate::error::{EngineError, Result, not_found};
use crate::inner::Inner;
use crate::publish;
use crate::workdir::prepare::task_base_branch;
use crate::workdir::shared::{exists, git_error};

/// One repository of a task that has a live worktree, with what shipping needs.
pub(crate) struct Target {
    pub record: WorktreeRecord,
    pub repository: Repository,
    pub base_branch: String,
}

/// The task's repositories with a live worktree (only `only`, when given).
pub(crate) async fn targets(
    inner: &Inner,
    task_id: &TaskId,
    only: Option<&RepositoryId>,
) -> Result<Vec<Target>> {
    let task = inner.store.get_task(task_id).await.map_err(not_found)?;
    if let Some(only) = only
        && !task.repository_ids.contains(only)
    {
        return Err(EngineError::Validation(format!(
            "repository {only} is not a repository of the task; pick one of its repositories"
        )));
    }
    if task.repository_ids.is_empty() {
        return Err(EngineError::Validation(
            "the task has no repository; add one to the task to ship its work".into(),
        ));
    }
    let live = inner.store.live_worktrees(task_id).await?;
    let mut targets = vec![];
    for id in &task.repository_ids {
        if only.is_some_and(|only| only != id) {
            continue;
        }
        let Some(record) = live.iter().find(|w| w.repository_id.as_ref() == Some(id)).cloned()
        else {
            continue;
        };
        if record.executor_id.is_some() {
            crate::sites::refuse_remote(
                inner,
                task_id,
                "git status and shipping (rebase, merge, push, pull requests)",
            )
            .await?;
        }
        if !exists(&record.path).await {
            continue;
        }
        let repository = inner.store.get_repository(id).await.map_err(not_found)?;
        let base_branch = task_base_branch(inner, task_id, &repository).await?;
        targets.push(Target { record, repository, base_branch });
    }
    if targets.is_empty() {
        return Err(EngineError::Conflict(
            "the task has no worktree; launch a session to create one".into(),
        ));
    }
    Ok(targets)
}

/// A git refusal as the engine reports it, with the files that block it in `details`.
pub(crate) fn ship_error(err: GitError) -> EngineError {
    let message = err.to_string();
    match err {
        GitError::DirtyFiles { files, path } => EngineError::Refused {
            message,
            details: json!({ "dirty": files, "path": path.display().to_string() }),
        },
        GitError::RebaseConflicts { files, .. } | GitError::MergeConflicts { files, .. } => {
            EngineError::Refused { message, details: json!({ "conflicts": files }) }
        }
        GitError::NotFastForward { .. } | GitError::PushRejected { .. } => {
            EngineError::Conflict(message)
        }
        GitError::PushAuth { .. } => EngineError::Unavailable(message),
        GitError::BaseNotLocal { .. } | GitError::NoRemote { .. } => {
            EngineError::Validation(message)
        }
        other => git_error(other),
    }
}

/// The status of one target, read from git and the store.
async fn status_of(inner: &Inner, target: &Target) -> Result<GitStatus> {
    let status = git::status(Path::new(&target.record.path), &target.base_branch)
        .await
        .map_err(ship_error)?;
    let pr = inner
        .store
        .pull_requests(&target.record.task_id)
        .await?
        .into_iter()
        .find(|p| p.repository_id == target.repository.id);
    Ok(GitStatus {
        repository_id: target.repository.id.clone(),
        branch: status.branch,
        base_branch: target.base_branch.clone(),
        base_commit: target.record.base_commit.clone(),
        base_tip: status.base_tip,
        head: status.head,
        ahead: status.ahead,
        behind: status.behind,
        uncommitted: status.dirty.uncommitted,
        untracked: status.dirty.untracked,
        conflicts_with_base: status.conflicts_with_base,
        remote: status.upstream.map(|u| RemoteStatus {
            remote: u.remote,
            pushed_head: u.pushed_head,
            upstream_ahead: u.ahead,
            upstream_behind: u.behind,
        }),
        pr,
    })
}

/// Computes the task's git status and publishes it on its workspace topic.
pub(crate) async fn publish_status(inner: &Inner, task_id: &TaskId) -> Result<Vec<GitStatus>> {
    let task = inner.store.get_task(task_id).await.map_err(not_found)?;
    let mut statuses = vec![];
    for target in targets(inner, task_id, None).await? {
        statuses.push(status_of(inner, &target).await?);
    }
    let event = WorkspaceEvent::TaskGitStatus {
        task_id: task_id.to_string(),
        repositories: statuses.iter().map(GitStatusDto::from).collect(),
    };
    let mut tx = inner.store.begin_write().await?;
    tx.set_git_summary(task_id, &GitSummary::of(&statuses)).await?;
    publish::notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
    tx.commit().await?;
    Ok(statuses)
}

/// Recomputes and publishes the task's git status after a turn, quietly: a task without a
/// worktree has none.
pub(crate) async fn refresh_status(inner: &Inner, task_id: &TaskId) {
    match publish_status(inner, task_id).await {
        Ok(_) | Err(EngineError::Conflict(_) | EngineError::Validation(_)) => {}
        Err(err) => tracing::debug!(task = %task_id, error = %err, "git status not refreshed"),
    }
}
