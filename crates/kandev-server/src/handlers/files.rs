//! Files and git of a task's working directory: `task.changes`, `task.tree`,
//! `task.file.read`, `task.commit`. Paths are confined to the task's worktree by the engine
//! (`FORBIDDEN` otherwise); the values it returns convert into the API types by `From`.

use kandev_api_types::requests::{ByTask, TaskCommit, TaskFileRead};
use kandev_api_types::{
    CommitDto, FileChangeDto, FileContentDto, KeptWorktreeDto, TreeEntryDto, WorktreeDto,
};
use kandev_domain::TaskId;
use kandev_domain::files::KeptWorktree;
use serde_json::{Value, json};

use crate::{ApiError, AppState};

pub async fn changes(s: &AppState, p: ByTask) -> Result<Value, ApiError> {
    let changes = s.engine().task_changes(&TaskId::new(p.task_id)).await?;
    let worktrees: Vec<WorktreeDto> = changes.worktrees.iter().map(WorktreeDto::from).collect();
    let files: Vec<FileChangeDto> = changes.files.iter().map(FileChangeDto::from).collect();
    Ok(json!({ "worktrees": worktrees, "files": files }))
}

pub async fn tree(s: &AppState, p: ByTask) -> Result<Value, ApiError> {
    let tree = s.engine().task_tree(&TaskId::new(p.task_id)).await?;
    let entries: Vec<TreeEntryDto> = tree.entries.iter().map(TreeEntryDto::from).collect();
    Ok(json!({ "entries": entries, "truncated": tree.truncated }))
}

pub async fn read(s: &AppState, p: TaskFileRead) -> Result<Value, ApiError> {
    if p.path.trim().is_empty() {
        return Err(ApiError::validation("path is required"));
    }
    let file = s.engine().task_file_read(&TaskId::new(p.task_id), &p.path).await?;
    Ok(json!(FileContentDto::from(file)))
}

pub async fn commit(s: &AppState, p: TaskCommit) -> Result<Value, ApiError> {
    if p.message.trim().is_empty() {
        return Err(ApiError::validation("message is required"));
    }
    let made = s.engine().task_commit(&TaskId::new(p.task_id), &p.message).await?;
    let commits: Vec<CommitDto> = made.iter().map(CommitDto::from).collect();
    Ok(json!({ "commit": commits.first(), "commits": commits }))
}

/// Worktrees a task removal kept, as the API shows them.
pub fn kept_dtos(kept: &[KeptWorktree]) -> Vec<KeptWorktreeDto> {
    kept.iter().map(KeptWorktreeDto::from).collect()
}
