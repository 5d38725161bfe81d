//! Files and git of a task's working directory: `task.changes`, `task.tree`,
//! `task.file.read`, `task.commit`. Paths are confined to the task's worktree by the engine
//! (`FORBIDDEN` otherwise); the values it returns convert into the API types by `From`.

use kandev_api_types::requests::{ByTask, FileViewedSet, TaskCommit, TaskFileRead};
use kandev_api_types::responses::{FileViewed, TaskChanges, TaskCommitted, TaskTree};
use kandev_api_types::{
    CommitDto, FileChangeDto, FileContentDto, KeptWorktreeDto, TreeEntryDto, WorktreeDto,
};
use kandev_domain::files::KeptWorktree;
use kandev_domain::{RepositoryId, TaskId};

use crate::{ApiError, AppState};

pub async fn changes(s: &AppState, p: ByTask) -> Result<TaskChanges, ApiError> {
    let changes = s.engine().task_changes(&TaskId::new(p.task_id)).await?;
    Ok(TaskChanges {
        worktrees: changes.worktrees.iter().map(WorktreeDto::from).collect(),
        files: changes.files.iter().map(FileChangeDto::from).collect(),
    })
}

pub async fn tree(s: &AppState, p: ByTask) -> Result<TaskTree, ApiError> {
    let tree = s.engine().task_tree(&TaskId::new(p.task_id)).await?;
    let entries = tree.entries.iter().map(TreeEntryDto::from).collect();
    Ok(TaskTree { entries, truncated: tree.truncated })
}

pub async fn read(s: &AppState, p: TaskFileRead) -> Result<FileContentDto, ApiError> {
    if p.path.trim().is_empty() {
        return Err(ApiError::validation("path is required"));
    }
    let file = s.engine().task_file_read(&TaskId::new(p.task_id), &p.path).await?;
    Ok(FileContentDto::from(file))
}

/// `task.file.viewed.set`: the mark is tied to the file's diff as the server reads it now.
pub async fn set_viewed(s: &AppState, p: FileViewedSet) -> Result<FileViewed, ApiError> {
    if p.path.trim().is_empty() {
        return Err(ApiError::validation("path is required"));
    }
    let repository = p.repository_id.clone().map(RepositoryId::new);
    let viewed =
        s.engine().set_file_viewed(&TaskId::new(p.task_id), repository, &p.path, p.viewed).await?;
    Ok(FileViewed { repository_id: p.repository_id, path: p.path, viewed })
}

pub async fn commit(s: &AppState, p: TaskCommit) -> Result<TaskCommitted, ApiError> {
    if p.message.trim().is_empty() {
        return Err(ApiError::validation("message is required"));
    }
    let task_id = TaskId::new(p.task_id);
    let made = if p.staged_only {
        s.engine().task_commit_staged(&task_id, &p.message).await?
    } else {
        s.engine().task_commit(&task_id, &p.message).await?
    };
    let commits: Vec<CommitDto> = made.iter().map(CommitDto::from).collect();
    Ok(TaskCommitted { commit: commits.first().cloned(), commits })
}

/// Worktrees a task removal kept, as the API shows them.
pub fn kept_dtos(kept: &[KeptWorktree]) -> Vec<KeptWorktreeDto> {
    kept.iter().map(KeptWorktreeDto::from).collect()
}
