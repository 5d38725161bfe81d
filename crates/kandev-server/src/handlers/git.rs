//! Git control of a task's worktrees: `task.commits`, `task.commit.diff`, `task.index`,
//! `task.stage`, `task.unstage`, `task.discard`, `task.amend` (and `task.commit` with
//! `staged_only`, in `files.rs`). The engine refuses what changes a worktree while a turn runs.

use kandev_api_types::requests::{ByTask, TaskAmend, TaskCommitDiff, TaskIndexChange};
use kandev_api_types::responses::{
    CommitDiff, TaskAmended, TaskCommits, TaskIndex, TaskIndexChanged,
};
use kandev_api_types::{BranchCommitDto, CommitDto, FileChangeDto, IndexDto};
use kandev_domain::files::{HunkRef, IndexAction};
use kandev_domain::{RepositoryId, TaskId};

use crate::{ApiError, AppState};

pub async fn commits(s: &AppState, p: ByTask) -> Result<TaskCommits, ApiError> {
    let all = s.engine().task_commits(&TaskId::new(p.task_id)).await?;
    let commits = all
        .iter()
        .flat_map(|r| r.value.iter().map(|c| BranchCommitDto::of(r.repository_id.as_ref(), c)))
        .collect();
    Ok(TaskCommits { commits })
}

pub async fn commit_diff(s: &AppState, p: TaskCommitDiff) -> Result<CommitDiff, ApiError> {
    let repository = p.repository_id.map(RepositoryId::new);
    let task_id = TaskId::new(p.task_id);
    let files = s.engine().task_commit_diff(&task_id, repository.as_ref(), p.sha.trim()).await?;
    let files = files.iter().map(|f| FileChangeDto::of(repository.as_ref(), f)).collect();
    Ok(CommitDiff { files })
}

pub async fn index(s: &AppState, p: ByTask) -> Result<TaskIndex, ApiError> {
    let all = s.engine().task_index(&TaskId::new(p.task_id)).await?;
    let repositories =
        all.iter().map(|r| IndexDto::of(r.repository_id.as_ref(), &r.value)).collect();
    Ok(TaskIndex { repositories })
}

pub async fn stage(s: &AppState, p: TaskIndexChange) -> Result<TaskIndexChanged, ApiError> {
    change(s, IndexAction::Stage, p).await
}

pub async fn unstage(s: &AppState, p: TaskIndexChange) -> Result<TaskIndexChanged, ApiError> {
    change(s, IndexAction::Unstage, p).await
}

pub async fn discard(s: &AppState, p: TaskIndexChange) -> Result<TaskIndexChanged, ApiError> {
    change(s, IndexAction::Discard, p).await
}

/// One index change, answered with that worktree's index afterwards.
async fn change(
    s: &AppState,
    action: IndexAction,
    p: TaskIndexChange,
) -> Result<TaskIndexChanged, ApiError> {
    if p.path.trim().is_empty() {
        return Err(ApiError::validation("path is required"));
    }
    let hunk = match (p.hunk, p.diff_hash) {
        (None, None) => None,
        (Some(index), Some(diff_hash)) => {
            Some(HunkRef { index: usize::try_from(index).unwrap_or(usize::MAX), diff_hash })
        }
        _ => {
            return Err(ApiError::validation(
                "a hunk and its diff hash go together: give both (from the listing of the changes) or neither",
            ));
        }
    };
    let task_id = TaskId::new(p.task_id);
    let repository = p.repository_id.map(RepositoryId::new);
    let engine = s.engine();
    engine.task_change_index(&task_id, repository.as_ref(), action, &p.path, hunk.as_ref()).await?;
    let all = engine.task_index(&task_id).await?;
    let index = all
        .iter()
        .find(|r| repository.is_none() || r.repository_id == repository)
        .map(|r| IndexDto::of(r.repository_id.as_ref(), &r.value))
        .ok_or_else(|| ApiError::not_found("the worktree is gone"))?;
    Ok(TaskIndexChanged { index })
}

pub async fn amend(s: &AppState, p: TaskAmend) -> Result<TaskAmended, ApiError> {
    let message = p.message.as_deref().map(str::trim).filter(|m| !m.is_empty());
    let repository = p.repository_id.map(RepositoryId::new);
    let made = s.engine().task_amend(&TaskId::new(p.task_id), repository.as_ref(), message).await?;
    Ok(TaskAmended { commit: CommitDto::from(&made) })
}
