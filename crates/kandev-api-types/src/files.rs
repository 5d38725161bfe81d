//! A task's working directory as the API returns it: changes against the base commit, the
//! file tree, a file's content, commits, and worktrees kept when a task is archived.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// One line of a hunk; `kind` is `context`, `added` or `removed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct DiffLineDto {
    pub kind: String,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct HunkDto {
    pub header: String,
    pub old_start: u32,
    pub old_lines: u32,
    pub new_start: u32,
    pub new_lines: u32,
    pub lines: Vec<DiffLineDto>,
}

/// One changed file; `status` is `added`, `modified`, `deleted`, `renamed` or `untracked`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct FileChangeDto {
    pub repository_id: Option<String>,
    pub path: String,
    pub old_path: Option<String>,
    pub status: String,
    pub additions: u32,
    pub deletions: u32,
    pub binary: bool,
    pub truncated: bool,
    pub hunks: Vec<HunkDto>,
}

/// One worktree of a task; `folder` is where its files are in file actions when the task
/// has several repositories (`null` with one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct WorktreeDto {
    pub repository_id: Option<String>,
    pub folder: Option<String>,
    pub path: String,
    pub branch: String,
    pub base_commit: String,
}

/// `kind` is `file`, `dir` or `symlink` (never followed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct TreeEntryDto {
    pub path: String,
    pub kind: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct FileContentDto {
    pub path: String,
    pub content: String,
    pub binary: bool,
    pub truncated: bool,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct CommitDto {
    pub repository_id: Option<String>,
    pub branch: String,
    pub sha: String,
    pub summary: String,
    pub files_changed: u64,
}

/// A worktree that archiving or deleting a task did not remove, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct KeptWorktreeDto {
    pub repository_id: Option<String>,
    pub path: String,
    pub reason: String,
}
