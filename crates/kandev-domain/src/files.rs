//! A task's working directory as plain values, defined once: how its files differ from the
//! base commit (changed files, hunks, lines), its file tree, a file read from it, commits made
//! on its branches, and its worktrees. The runtime's git layer makes the per-worktree values,
//! the engine adds which repository each belongs to, the API converts them
//! (`kandev-api-types`, `From` impls). The values a build host answers (changes, trees, file
//! reads) are serializable: they travel as they are between this server and the remote
//! `kandev remote-op` (`kandev_runtime::runner::ops`).

use serde::{Deserialize, Serialize};

use crate::RepositoryId;

/// How a file differs from the base commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeStatus {
    /// New and tracked (staged or committed on the task branch).
    Added,
    /// Content, mode or type changed.
    Modified,
    Deleted,
    /// Moved, with `old_path` set; may also have content changes.
    Renamed,
    /// New and not yet known to git (and not ignored).
    Untracked,
}

impl ChangeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeStatus::Added => "added",
            ChangeStatus::Modified => "modified",
            ChangeStatus::Deleted => "deleted",
            ChangeStatus::Renamed => "renamed",
            ChangeStatus::Untracked => "untracked",
        }
    }
}

/// What a diff line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineKind {
    Context,
    Added,
    Removed,
}

impl LineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LineKind::Context => "context",
            LineKind::Added => "added",
            LineKind::Removed => "removed",
        }
    }
}

/// One line of a hunk, without its `+`/`-`/` ` marker and without the newline. git's
/// "\ No newline at end of file" markers are not included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffLine {
    pub kind: LineKind,
    pub text: String,
}

/// One hunk; the numbers are those of its `@@ -old_start,old_lines +new_start,new_lines @@`
/// header, which is kept verbatim (with its section heading) in `header`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hunk {
    pub header: String,
    pub old_start: u32,
    pub old_lines: u32,
    pub new_start: u32,
    pub new_lines: u32,
    pub lines: Vec<DiffLine>,
}

/// One changed file of a worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// `/`-separated, relative to the worktree (in a [`ChangedFile`], to the task's working
    /// directory); the new path of a rename.
    pub path: String,
    /// The old path of a rename.
    pub old_path: Option<String>,
    pub status: ChangeStatus,
    /// Added and removed lines of the whole file (0 for binary files), even when `hunks`
    /// were cut.
    pub additions: u32,
    pub deletions: u32,
    /// Binary content: no hunks.
    pub binary: bool,
    /// `hunks` are incomplete (or missing) because of size limits.
    pub truncated: bool,
    pub hunks: Vec<Hunk>,
}

/// What a tree entry is. Symlinks are reported, never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
        }
    }
}

/// One entry of a file tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeEntry {
    /// `/`-separated, relative to the worktree (in a [`TaskTree`], to the task's working
    /// directory).
    pub path: String,
    pub kind: EntryKind,
    /// File size in bytes; for a symlink the length of its target; 0 for a directory.
    pub size: u64,
}

/// A file read from a worktree or a task's folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileContent {
    /// The path as asked for, normalized (`./a//b` becomes `a/b`).
    pub path: String,
    /// The text; empty when `binary`. When `truncated`, the first bytes up to the reader's
    /// limit, cut back to a whole UTF-8 character.
    pub content: String,
    /// The file has a NUL byte in its first 8000 bytes or is not UTF-8.
    pub binary: bool,
    pub truncated: bool,
    /// Size of the whole file in bytes.
    pub size: u64,
}

/// One changed file of a task: its change, with paths relative to the task's working
/// directory, and the repository whose worktree holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFile {
    /// `None` once the repository was unregistered.
    pub repository_id: Option<RepositoryId>,
    pub change: FileChange,
    /// Marked viewed by its reviewer, and unchanged since (issue 44 item 3).
    pub viewed: bool,
}

impl ChangedFile {
    /// What a viewed mark is tied to: the file's diff (its hunks, status and counts). A file
    /// whose diff changes is not viewed any more. (A binary or too large file shows no hunks:
    /// only a change of its status or counts unmarks it.)
    pub fn view_hash(&self) -> String {
        let c = &self.change;
        let hunks = crate::ship::diff_hash(c);
        // A new file is the same change untracked or staged: staging it keeps its mark.
        let status = match c.status {
            ChangeStatus::Untracked => ChangeStatus::Added,
            other => other,
        };
        format!("{hunks}-{}-{}-{}", status.as_str(), c.additions, c.deletions)
    }
}

/// One worktree of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskWorktree {
    pub repository_id: Option<RepositoryId>,
    /// The folder its files are under in file actions; `None` with a single repository.
    pub folder: Option<String>,
    /// Absolute path on disk.
    pub path: String,
    pub branch: String,
    pub base_commit: String,
}

/// The changes of a task against its base commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskChanges {
    pub worktrees: Vec<TaskWorktree>,
    pub files: Vec<ChangedFile>,
}

/// The files of a task's working directory, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTree {
    pub entries: Vec<TreeEntry>,
    /// The listing stopped at its limit.
    pub truncated: bool,
}

// Git control of a worktree (issue 44 item 4).

/// One commit of the task branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchCommit {
    pub sha: String,
    /// The first line of its message.
    pub summary: String,
    pub author: String,
    /// Commit time, seconds since the Unix epoch.
    pub committed_at: i64,
}

/// The worktree's index: what is staged (against `HEAD`) and what is not (the worktree
/// against the index, untracked files included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexState {
    pub staged: Vec<FileChange>,
    pub unstaged: Vec<FileChange>,
}

/// What `change_index` does to a file or a hunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexAction {
    /// Unstaged changes go to the index.
    Stage,
    /// Staged changes leave the index (the worktree keeps them).
    Unstage,
    /// Unstaged changes are thrown away (an untracked file is deleted); staged ones stay.
    Discard,
}

/// One hunk of a file's diff as it was shown: its index and the diff's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HunkRef {
    pub index: usize,
    pub diff_hash: String,
}

/// A commit made on a task branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMade {
    pub repository_id: Option<RepositoryId>,
    pub branch: String,
    pub sha: String,
    pub summary: String,
    pub files_changed: usize,
}

/// A worktree that was not removed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptWorktree {
    pub repository_id: Option<RepositoryId>,
    pub path: String,
    pub reason: String,
}

/// What removing a task's worktrees did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorktreeRemoval {
    /// Paths of the removed worktrees (their branches are kept).
    pub removed: Vec<String>,
    pub kept: Vec<KeptWorktree>,
}
