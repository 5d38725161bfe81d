//! Files and git of a task's working directory: `task.changes`, `task.tree`,
//! `task.file.read`, `task.commit`. Paths are confined to the task's worktree by the engine
//! (`FORBIDDEN` otherwise).

use kandev_api_types::requests::{ByTask, TaskCommit, TaskFileRead};
use kandev_api_types::{
    CommitDto, DiffLineDto, FileChangeDto, FileContentDto, HunkDto, KeptWorktreeDto, TreeEntryDto,
    WorktreeDto,
};
use kandev_domain::{RepositoryId, TaskId};
use kandev_engine::workdir::{ChangedFile, CommitMade, KeptWorktree, TaskWorktree};
use serde_json::{Value, json};

use crate::{ApiError, AppState};

pub async fn changes(s: &AppState, p: ByTask) -> Result<Value, ApiError> {
    let changes = s.engine().task_changes(&TaskId::new(p.task_id)).await?;
    let worktrees: Vec<WorktreeDto> = changes.worktrees.iter().map(worktree_dto).collect();
    let files: Vec<FileChangeDto> = changes.files.iter().map(change_dto).collect();
    Ok(json!({ "worktrees": worktrees, "files": files }))
}

pub async fn tree(s: &AppState, p: ByTask) -> Result<Value, ApiError> {
    let tree = s.engine().task_tree(&TaskId::new(p.task_id)).await?;
    let entries: Vec<TreeEntryDto> = tree
        .entries
        .iter()
        .map(|e| TreeEntryDto {
            path: e.path.clone(),
            kind: e.kind.as_str().to_owned(),
            size: e.size,
        })
        .collect();
    Ok(json!({ "entries": entries, "truncated": tree.truncated }))
}

pub async fn read(s: &AppState, p: TaskFileRead) -> Result<Value, ApiError> {
    if p.path.trim().is_empty() {
        return Err(ApiError::validation("path is required"));
    }
    let file = s.engine().task_file_read(&TaskId::new(p.task_id), &p.path).await?;
    let dto = FileContentDto {
        path: file.path,
        content: file.content,
        binary: file.binary,
        truncated: file.truncated,
        size: file.size,
    };
    Ok(json!(dto))
}

pub async fn commit(s: &AppState, p: TaskCommit) -> Result<Value, ApiError> {
    if p.message.trim().is_empty() {
        return Err(ApiError::validation("message is required"));
    }
    let made = s.engine().task_commit(&TaskId::new(p.task_id), &p.message).await?;
    let commits: Vec<CommitDto> = made.iter().map(commit_dto).collect();
    Ok(json!({ "commit": commits.first(), "commits": commits }))
}

/// Worktrees a task removal kept, as the API shows them.
pub fn kept_dtos(kept: &[KeptWorktree]) -> Vec<KeptWorktreeDto> {
    kept.iter()
        .map(|k| KeptWorktreeDto {
            repository_id: id_text(k.repository_id.as_ref()),
            path: k.path.clone(),
            reason: k.reason.clone(),
        })
        .collect()
}

fn id_text(id: Option<&RepositoryId>) -> Option<String> {
    id.map(ToString::to_string)
}

fn worktree_dto(w: &TaskWorktree) -> WorktreeDto {
    WorktreeDto {
        repository_id: id_text(w.repository_id.as_ref()),
        folder: w.folder.clone(),
        path: w.path.clone(),
        branch: w.branch.clone(),
        base_commit: w.base_commit.clone(),
    }
}

fn change_dto(c: &ChangedFile) -> FileChangeDto {
    FileChangeDto {
        repository_id: id_text(c.repository_id.as_ref()),
        path: c.path.clone(),
        old_path: c.old_path.clone(),
        status: c.status.as_str().to_owned(),
        additions: c.additions,
        deletions: c.deletions,
        binary: c.binary,
        truncated: c.truncated,
        hunks: c
            .hunks
            .iter()
            .map(|h| HunkDto {
                header: h.header.clone(),
                old_start: h.old_start,
                old_lines: h.old_lines,
                new_start: h.new_start,
                new_lines: h.new_lines,
                lines: h
                    .lines
                    .iter()
                    .map(|l| DiffLineDto { kind: l.kind.as_str().to_owned(), text: l.text.clone() })
                    .collect(),
            })
            .collect(),
    }
}

fn commit_dto(c: &CommitMade) -> CommitDto {
    CommitDto {
        repository_id: id_text(c.repository_id.as_ref()),
        branch: c.branch.clone(),
        sha: c.sha.clone(),
        summary: c.summary.clone(),
        files_changed: u64::try_from(c.files_changed).unwrap_or(u64::MAX),
    }
}
