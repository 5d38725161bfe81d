//! A task's working directory as the API returns it: changes against the base commit, the
//! file tree, a file's content, commits, and worktrees kept when a task is archived. Each
//! shape converts from its plain value in `kandev_domain::files`.

use kandev_domain::RepositoryId;
use kandev_domain::files::{
    BranchCommit, ChangedFile, CommitMade, DiffLine, FileChange, FileContent, Hunk, IndexState,
    KeptWorktree, TaskWorktree, TreeEntry,
};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

fn id_text(id: Option<&RepositoryId>) -> Option<String> {
    id.map(ToString::to_string)
}

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
    /// Marked viewed (`task.file.viewed.set`) and its diff unchanged since.
    pub viewed: bool,
    /// The hash of this diff of the file: names it when one hunk is staged, unstaged or
    /// discarded (`task.stage`), so a diff that changed since is refused.
    pub diff_hash: String,
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

impl From<&DiffLine> for DiffLineDto {
    fn from(line: &DiffLine) -> Self {
        DiffLineDto { kind: line.kind.as_str().to_owned(), text: line.text.clone() }
    }
}

impl From<&Hunk> for HunkDto {
    fn from(hunk: &Hunk) -> Self {
        HunkDto {
            header: hunk.header.clone(),
            old_start: hunk.old_start,
            old_lines: hunk.old_lines,
            new_start: hunk.new_start,
            new_lines: hunk.new_lines,
            lines: hunk.lines.iter().map(DiffLineDto::from).collect(),
        }
    }
}

impl FileChangeDto {
    /// A file of a diff that has no viewed mark (a commit's, the index's).
    pub fn of(repository_id: Option<&RepositoryId>, change: &FileChange) -> Self {
        FileChangeDto::from(&ChangedFile {
            repository_id: repository_id.cloned(),
            change: change.clone(),
            viewed: false,
        })
    }
}

/// One commit of a task branch; `committed_at` is RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct BranchCommitDto {
    pub repository_id: Option<String>,
    pub sha: String,
    pub summary: String,
    pub author: String,
    pub committed_at: String,
}

impl BranchCommitDto {
    pub fn of(repository_id: Option<&RepositoryId>, commit: &BranchCommit) -> Self {
        BranchCommitDto {
            repository_id: id_text(repository_id),
            sha: commit.sha.clone(),
            summary: commit.summary.clone(),
            author: commit.author.clone(),
            committed_at: crate::rfc3339(kandev_domain::Timestamp(commit.committed_at * 1000)),
        }
    }
}

/// One worktree's index: what is staged (against its last commit) and what is not
/// (untracked files included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct IndexDto {
    pub repository_id: Option<String>,
    pub staged: Vec<FileChangeDto>,
    pub unstaged: Vec<FileChangeDto>,
}

impl IndexDto {
    pub fn of(repository_id: Option<&RepositoryId>, state: &IndexState) -> Self {
        let files =
            |all: &[FileChange]| all.iter().map(|f| FileChangeDto::of(repository_id, f)).collect();
        IndexDto {
            repository_id: id_text(repository_id),
            staged: files(&state.staged),
            unstaged: files(&state.unstaged),
        }
    }
}

impl From<&ChangedFile> for FileChangeDto {
    fn from(file: &ChangedFile) -> Self {
        let change = &file.change;
        FileChangeDto {
            repository_id: id_text(file.repository_id.as_ref()),
            path: change.path.clone(),
            old_path: change.old_path.clone(),
            status: change.status.as_str().to_owned(),
            additions: change.additions,
            deletions: change.deletions,
            binary: change.binary,
            truncated: change.truncated,
            hunks: change.hunks.iter().map(HunkDto::from).collect(),
            viewed: file.viewed,
            diff_hash: kandev_domain::ship::diff_hash(change),
        }
    }
}

impl From<&TaskWorktree> for WorktreeDto {
    fn from(worktree: &TaskWorktree) -> Self {
        WorktreeDto {
            repository_id: id_text(worktree.repository_id.as_ref()),
            folder: worktree.folder.clone(),
            path: worktree.path.clone(),
            branch: worktree.branch.clone(),
            base_commit: worktree.base_commit.clone(),
        }
    }
}

impl From<&TreeEntry> for TreeEntryDto {
    fn from(entry: &TreeEntry) -> Self {
        TreeEntryDto {
            path: entry.path.clone(),
            kind: entry.kind.as_str().to_owned(),
            size: entry.size,
        }
    }
}

impl From<FileContent> for FileContentDto {
    fn from(file: FileContent) -> Self {
        FileContentDto {
            path: file.path,
            content: file.content,
            binary: file.binary,
            truncated: file.truncated,
            size: file.size,
        }
    }
}

impl From<&CommitMade> for CommitDto {
    fn from(commit: &CommitMade) -> Self {
        CommitDto {
            repository_id: id_text(commit.repository_id.as_ref()),
            branch: commit.branch.clone(),
            sha: commit.sha.clone(),
            summary: commit.summary.clone(),
            files_changed: u64::try_from(commit.files_changed).unwrap_or(u64::MAX),
        }
    }
}

impl From<&KeptWorktree> for KeptWorktreeDto {
    fn from(kept: &KeptWorktree) -> Self {
        KeptWorktreeDto {
            repository_id: id_text(kept.repository_id.as_ref()),
            path: kept.path.clone(),
            reason: kept.reason.clone(),
        }
    }
}
