//! Committing everything in a worktree on its task branch.

use std::path::Path;

use super::GitError;
use super::cmd::Git;
use super::worktree::open_worktree;

/// Identity used for commits when the repository (and the user's global config) has none.
pub const FALLBACK_USER_NAME: &str = "Kandev";
pub const FALLBACK_USER_EMAIL: &str = "kandev@localhost";

/// A commit made by [`commit_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// Full sha.
    pub sha: String,
    /// The first line of the message.
    pub summary: String,
    /// Files changed by the commit relative to its parent.
    pub files_changed: usize,
}

/// Stages everything (`git add -A`: changes, deletions, untracked files that are not
/// ignored) and commits it on the branch checked out in the worktree.
///
/// Identity: the configuration git sees in the worktree (repository, global, system) and the
/// `GIT_AUTHOR_*`/`GIT_COMMITTER_*` environment win; only a missing `user.name` or
/// `user.email` is filled in with [`FALLBACK_USER_NAME`] / [`FALLBACK_USER_EMAIL`] via
/// `-c`, so the user's own identity is used whenever there is one. Hooks run as usual.
///
/// Errors: [`GitError::EmptyCommitMessage`], [`GitError::DetachedHead`] (the commit would
/// not land on a branch), [`GitError::NothingToCommit`]. When the commit itself fails (for
/// example a `pre-commit` hook), the changes stay staged.
pub async fn commit_all(worktree: &Path, message: &str) -> Result<CommitInfo, GitError> {
    if message.trim().is_empty() {
        return Err(GitError::EmptyCommitMessage);
    }
    let worktree = open_worktree(worktree).await?;
    let head = Git::new(&worktree).args(["symbolic-ref", "--quiet", "HEAD"]).output().await?;
    if !head.success() {
        return Err(GitError::DetachedHead { path: worktree });
    }
    Git::new(&worktree).args(["add", "-A"]).run().await?;
    let staged = Git::new(&worktree).args(["diff", "--cached", "--quiet", "--no-ext-diff"]);
    let staged_output = staged.output().await?;
    match staged_output.status.code() {
        Some(0) => return Err(GitError::NothingToCommit { path: worktree }),
        Some(1) => {}
        _ => return Err(staged.failed(&staged_output)),
    }

    let mut commit = Git::new(&worktree);
    if !has_config(&worktree, "user.name").await? {
        commit = commit.config(format!("user.name={FALLBACK_USER_NAME}"));
    }
    if !has_config(&worktree, "user.email").await? {
        commit = commit.config(format!("user.email={FALLBACK_USER_EMAIL}"));
    }
    commit.args(["commit", "--quiet", "-m", message]).run().await?;

    let sha = Git::new(&worktree).args(["rev-parse", "HEAD"]).text().await?;
    let summary = Git::new(&worktree).args(["log", "-1", "--format=%s", &sha]).text().await?;
    let changed = Git::new(&worktree)
        .args([
            "diff-tree",
            "--root",
            "--no-commit-id",
            "--name-only",
            "-r",
            "-z",
            "--no-renames",
            &sha,
        ])
        .run()
        .await?;
    let files_changed = changed.stdout.split(|&b| b == 0).filter(|p| !p.is_empty()).count();
    tracing::debug!(worktree = %worktree.display(), %sha, files_changed, "committed worktree changes");
    Ok(CommitInfo { sha, summary, files_changed })
}

async fn has_config(worktree: &Path, key: &str) -> Result<bool, GitError> {
    let output = Git::new(worktree).args(["config", "--get", key]).output().await?;
    Ok(output.success() && !output.text().trim().is_empty())
}
