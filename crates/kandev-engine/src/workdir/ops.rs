//! The ship actions as plain functions of the engine's shared state: rebase, merge, push, and
//! running a workflow's ship action, and the values they (and `review.submit`) return.
//! `Engine` methods (`engine::ship`) and workflow steps
//! (`crate::workflow`) both call them; they import nothing that reaches the `Engine` handle.
//!
//! Invariants: they run under the task's lock, and publish the task's git status after.

use std::path::PathBuf;

use kandev_domain::ship::{GitStatus, MergeStrategy, ReviewComment};
use kandev_domain::workflow::Action;
use kandev_domain::{RepositoryId, SessionId, StepId, TaskId};
use kandev_runtime::git;

use crate::error::{EngineError, Result, not_found};
use crate::inner::Inner;
use crate::workdir::status::{publish_status, ship_error, targets};

/// A merge made by `task.merge`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeMade {
    pub repository_id: RepositoryId,
    pub base_branch: String,
    pub commit: String,
}

/// A push made by `task.push`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushMade {
    pub repository_id: RepositoryId,
    pub remote: String,
    pub branch: String,
    pub head: String,
}

/// What `review.submit` did.
#[derive(Debug, Clone)]
pub struct ReviewSent {
    pub comments: Vec<ReviewComment>,
    pub session_id: SessionId,
    pub queued: bool,
}

/// Runs a workflow's ship action (`push`, `create_pull_request`, `merge`, `rebase`) on every
/// repository of the task, as the matching action would with its defaults (`origin`, never
/// forced; the task's title and description); returns what it did, for the transcript.
pub(crate) async fn run_ship_action(
    inner: &Inner,
    task_id: &TaskId,
    action: &Action<StepId>,
) -> Result<String> {
    let done = match action {
        Action::Push => {
            let (made, _) = push(inner, task_id, None, "origin", false).await?;
            let branches: Vec<String> =
                made.iter().map(|m| format!("{} ({})", m.branch, short(&m.head))).collect();
            format!("pushed {} to origin", branches.join(", "))
        }
        Action::CreatePullRequest => {
            let prs =
                crate::workdir::forge::create_prs(inner, task_id, None, None, None, false).await?;
            let urls: Vec<String> =
                prs.iter().map(|p| format!("#{} {}", p.number, p.url)).collect();
            format!("pull request {}", urls.join(", "))
        }
        Action::Merge { strategy } => {
            let (made, _) = merge(inner, task_id, None, *strategy, None).await?;
            let bases: Vec<String> =
                made.iter().map(|m| format!("{} ({})", m.base_branch, short(&m.commit))).collect();
            format!("merged ({}) into {}", strategy.as_str(), bases.join(", "))
        }
        Action::Rebase => {
            let statuses = rebase(inner, task_id, None).await?;
            let bases: Vec<String> = statuses.iter().map(|s| s.base_branch.clone()).collect();
            format!("rebased onto {}", bases.join(", "))
        }
        other => {
            return Err(EngineError::Validation(format!(
                "{} is not a ship action",
                other.type_name()
            )));
        }
    };
    Ok(done)
}

fn short(commit: &str) -> &str {
    commit.get(..8).unwrap_or(commit)
}

/// Rebases the task branch onto the current tip of its base in each repository (or one),
/// then publishes the task's git status. A refusal changes nothing in that repository.
pub(crate) async fn rebase(
    inner: &Inner,
    task_id: &TaskId,
    only: Option<&RepositoryId>,
) -> Result<Vec<GitStatus>> {
    let targets = targets(inner, task_id, only).await?;
    {
        let _guard = inner.task_locks.lock(task_id).await;
        for target in &targets {
            target.rebase().await?;
        }
    }
    publish_status(inner, task_id).await
}

/// Lands the task branch on its (local) base branch in the main repository. Checks every
/// repository first (clean base checkout, no conflicts) only as far as git can without
/// changing anything; each merge itself is all-or-nothing.
pub(crate) async fn merge(
    inner: &Inner,
    task_id: &TaskId,
    only: Option<&RepositoryId>,
    strategy: MergeStrategy,
    message: Option<&str>,
) -> Result<(Vec<MergeMade>, Vec<GitStatus>)> {
    let task = inner.store.get_task(task_id).await.map_err(not_found)?;
    let message = message.map(str::trim).filter(|m| !m.is_empty()).unwrap_or(&task.title);
    let targets = targets(inner, task_id, only).await?;
    let strategy = match strategy {
        MergeStrategy::Merge => git::MergeStrategy::Merge,
        MergeStrategy::Squash => git::MergeStrategy::Squash,
        MergeStrategy::FastForward => git::MergeStrategy::FastForward,
    };
    let mut made = vec![];
    {
        let _guard = inner.task_locks.lock(task_id).await;
        for target in &targets {
            target.bring_back().await?;
            let landed = git::merge_into_base(
                &PathBuf::from(&target.repository.local_path),
                &target.base_branch,
                &target.record.branch,
                strategy,
                message,
            )
            .await
            .map_err(ship_error)?;
            // The status says "merged" while the branch stays at the head that landed.
            let mut tx = inner.store.begin_write().await?;
            tx.set_worktree_merged_head(&target.record.id, &landed.head).await?;
            tx.commit().await?;
            made.push(MergeMade {
                repository_id: target.repository.id.clone(),
                base_branch: target.base_branch.clone(),
                commit: landed.commit,
            });
        }
    }
    Ok((made, publish_status(inner, task_id).await?))
}

/// Pushes the task branch to `remote` and sets it as upstream. Never forced unless
/// `force_with_lease`.
pub(crate) async fn push(
    inner: &Inner,
    task_id: &TaskId,
    only: Option<&RepositoryId>,
    remote: &str,
    force_with_lease: bool,
) -> Result<(Vec<PushMade>, Vec<GitStatus>)> {
    let targets = targets(inner, task_id, only).await?;
    let mut made = vec![];
    {
        let _guard = inner.task_locks.lock(task_id).await;
        for target in &targets {
            let head = target.push(remote, force_with_lease).await?;
            made.push(PushMade {
                repository_id: target.repository.id.clone(),
                remote: remote.to_owned(),
                branch: target.record.branch.clone(),
                head,
            });
        }
    }
    Ok((made, publish_status(inner, task_id).await?))
}
