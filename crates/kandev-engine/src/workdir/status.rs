//! A task's git status per repository, computed from git and the store and published as
//! `task.git_status` on its workspace topic (after each turn, each ship action, on demand).
//! Imports nothing that reaches a session actor, so an actor can refresh the status after a
//! turn.

use std::path::Path;

use kandev_api_types::{GitStatusDto, Notification, WorkspaceEvent};
use kandev_domain::ship::{GitStatus, GitSummary, RemoteStatus};
use kandev_domain::{RepositoryId, TaskId};

use kandev_store::WorktreeRecord;

use crate::error::{EngineError, Result, not_found};
use crate::inner::Inner;
use crate::publish;
use crate::workdir::branch::{Place, Target};
use crate::workdir::prepare::task_base_branch;
pub(crate) use crate::workdir::shared::ship_error;
use crate::workdir::shared::{exists, git_error};

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
    let all = inner.store.live_worktrees(task_id).await?;
    let live: Vec<WorktreeRecord> = all.iter().filter(|w| w.is_task_worktree()).cloned().collect();
    let mut targets = vec![];
    for id in &task.repository_ids {
        if only.is_some_and(|only| only != id) {
            continue;
        }
        let Some(record) = live.iter().find(|w| w.repository_id.as_ref() == Some(id)).cloned()
        else {
            continue;
        };
        let place = match crate::sites::ssh_of(inner, &record).await? {
            None if !exists(&record.path).await => continue,
            None => Place::Here,
            Some((executor, settings)) => {
                let site = crate::sites::site_of(inner, &record).await?;
                if !site.exists(Path::new(&record.path)).await.map_err(git_error)? {
                    continue;
                }
                Place::BuildHost { site, settings: Box::new(settings), executor }
            }
        };
        let repository = inner.store.get_repository(id).await.map_err(not_found)?;
        let base_branch = task_base_branch(inner, task_id, &repository).await?;
        targets.push(Target { record, repository, base_branch, place });
    }
    if targets.is_empty() {
        return Err(crate::workdir::shared::no_worktree(&all));
    }
    Ok(targets)
}

/// The status of one target, read from git and the store.
async fn status_of(inner: &Inner, target: &Target) -> Result<GitStatus> {
    let status = target.branch_status().await?;
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
        // Merged as it is now: the head that landed, and nothing uncommitted left out.
        merged: target.record.merged_head.as_deref() == Some(status.head.as_str())
            && status.dirty.uncommitted.is_empty()
            && status.dirty.untracked.is_empty(),
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
    let targets = targets(inner, task_id, None).await?;
    // A build host's branch is fetched into the server's repository: under the task's lock,
    // as the ship actions do, so two fetches of one branch never race for its refs.
    let _guard = match targets.iter().any(|t| matches!(t.place, Place::BuildHost { .. })) {
        true => Some(inner.task_locks.lock(task_id).await),
        false => None,
    };
    let mut statuses = vec![];
    for target in &targets {
        statuses.push(status_of(inner, target).await?);
    }
    drop(_guard);
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
