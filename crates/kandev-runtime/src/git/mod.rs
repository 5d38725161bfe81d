//! Task working directories: git worktrees per repository (create, set up, inspect, commit,
//! remove), plain task directories, and the file actions on them.
//!
//! Invariants of this module:
//! - git is only ever run as the `git` CLI, with `-c core.quotepath=off`, stdin closed,
//!   `GIT_TERMINAL_PROMPT=0`, `LC_ALL=C`, `GIT_OPTIONAL_LOCKS=0` (read-only commands never
//!   take `index.lock` away from the agent's own git), and without inherited variables that
//!   would point it at another repository (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`, ...).
//!   Each git command runs in its own process group under a deadline; on timeout or when its
//!   future is dropped the group is killed.
//! - Commit identity is the user's own whenever git can find one; only a missing
//!   `user.name`/`user.email` is filled in (`Kandev <kandev@localhost>`), per commit via
//!   `-c`, never written to any config.
//! - [`create_worktree`] validates everything it can before touching disk, and undoes its own
//!   work on failure: no stray worktree directory, registration or branch is left behind.
//! - Removing a worktree never deletes its branch, and never touches the main checkout.
//! - Every path that comes from outside is opened through [`crate::confine`] (no absolute
//!   paths, no `..`, nothing under `.git`, no symlink that resolves outside the worktree, no
//!   file with more than one hard link), resolved beneath the worktree without a
//!   check-then-use race.
//! - [`changes`] is always relative to the task's base commit, so committed work stays
//!   visible; untracked files are read directly, the index is never written for a diff.
//! - Output is bounded: setup output to its last 64 KiB, diffs by [`MAX_DIFF_BYTES`] and
//!   [`MAX_FILE_DIFF_BYTES`], file reads by the caller's `max_bytes`.
//!
//! Requires git 2.36 or newer (`git worktree list -z`).

mod branch;
mod checkpoint;
mod cmd;
pub(crate) use cmd::GIT_TIMEOUT;
mod commit;
mod control;
mod diff;
mod error;
mod files;
mod layout;
mod remote;
mod setup;
mod ship;
mod worktree;

pub use branch::{DEFAULT_BRANCH_TEMPLATE, branch_name, is_valid_branch_name, short_id, task_slug};
pub use checkpoint::{
    CHECKPOINT_REFS, CheckpointTurn, MAX_CHECKPOINT_ID, Retention, Snapshot, changed_since,
    checkpoint_ref, collect, restore, snapshot,
};
pub use commit::{
    CommitInfo, FALLBACK_USER_EMAIL, FALLBACK_USER_NAME, amend, commit_all, commit_staged,
};
pub use control::{
    BranchCommit, HunkRef, IndexAction, IndexState, MAX_COMMITS, branch_commits, change_index,
    commit_changes, commits_changes, index_state,
};
pub use diff::{
    ChangeStatus, DiffLine, FileChange, Hunk, LineKind, MAX_DIFF_BYTES, MAX_FILE_DIFF_BYTES,
    changes, review_base,
};
pub use error::GitError;
pub use files::{
    ATTACHMENT_FOLDER, EntryKind, FileContent, TreeEntry, read_file, tree, write_attachment_copy,
};
pub use layout::{create_task_dir, task_dir, worktree_dir};
pub use remote::{
    FETCHED_PREFIX, INCOMING_PREFIX, fetch_over_ssh, full_ref_name, init_bare, push_over_ssh,
    take_fetched,
};
pub use setup::{
    SETUP_OUTPUT_LIMIT, SetupOutput, run_script_through, run_setup_script,
    run_setup_script_streaming,
};
pub use ship::{
    BranchStatus, Dirty, Landed, MAX_USAGE_ENTRIES, MergeStrategy, Upstream,
    branch_commit_summaries, branch_status, branches, commit_summaries, copy_ignored_files,
    dirty_files, disk_usage, fetch_base, merge_into_base, push, push_branch, rebase, remote_url,
    status,
};
pub use worktree::{
    MAX_BRANCH_SUFFIX, OnExistingBranch, Worktree, WorktreeSpec, create_worktree, default_branch,
    is_dirty, remove_worktree,
};
