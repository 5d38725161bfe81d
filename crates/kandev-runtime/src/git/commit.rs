//! Committing everything in a worktree on its task branch.

use std::io;
use std::path::{Path, PathBuf};

use super::GitError;
use super::cmd::Git;
use super::worktree::open_worktree;
use crate::confine::{RelPath, Root};

/// Identity used for commits when the repository (and the user's global config) has none.
pub const FALLBACK_USER_NAME: &str = "Kandev";
pub const FALLBACK_USER_EMAIL: &str = "kandev@localhost";

/// A commit made by [`commit_all`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
/// not land on a branch), [`GitError::NothingToCommit`], [`GitError::Forbidden`] when a file
/// to commit has more than one hard link (its content may be a file outside the worktree;
/// such files are unstaged again, nothing is committed). When the commit itself fails (for
/// example a `pre-commit` hook), the changes stay staged. Limit: git stages files itself and
/// the link count is checked right after, so a hard link swapped in and out again meanwhile
/// is not caught.
pub async fn commit_all(worktree: &Path, message: &str) -> Result<CommitInfo, GitError> {
    let worktree = on_branch(worktree, Some(message)).await?;
    Git::new(&worktree).args(["add", "-A"]).run().await?;
    commit_index(&worktree, message).await
}

/// Commits what is staged in the worktree (nothing else), as [`commit_all`] does.
pub async fn commit_staged(worktree: &Path, message: &str) -> Result<CommitInfo, GitError> {
    let worktree = on_branch(worktree, Some(message)).await?;
    commit_index(&worktree, message).await
}

/// The worktree (canonical), once the message (if any) is not empty and it is on a branch.
async fn on_branch(worktree: &Path, message: Option<&str>) -> Result<PathBuf, GitError> {
    if message.is_some_and(|m| m.trim().is_empty()) {
        return Err(GitError::EmptyCommitMessage);
    }
    let worktree = open_worktree(worktree).await?;
    let head = Git::new(&worktree).args(["symbolic-ref", "--quiet", "HEAD"]).output().await?;
    if !head.success() {
        return Err(GitError::DetachedHead { path: worktree });
    }
    Ok(worktree)
}

/// Commits the index as it is: refused when nothing is staged or a staged file is hard linked.
async fn commit_index(worktree: &Path, message: &str) -> Result<CommitInfo, GitError> {
    refuse_hard_linked(worktree).await?;
    let staged = Git::new(worktree).args(["diff", "--cached", "--quiet", "--no-ext-diff"]);
    let staged_output = staged.output().await?;
    match staged_output.status.code() {
        Some(0) => return Err(GitError::NothingToCommit { path: worktree.to_owned() }),
        Some(1) => {}
        _ => return Err(staged.failed(&staged_output)),
    }
    identified(worktree)
        .await?
        .args(["commit", "--quiet", "-F", "-"])
        .stdin_bytes(message)
        .run()
        .await?;
    head_commit(worktree).await
}

/// Amends the worktree's last commit with what is staged, and with `message` when given;
/// refused when the branch has no commit after `base` (the task's own commits only).
pub async fn amend(
    worktree: &Path,
    base: &str,
    message: Option<&str>,
) -> Result<CommitInfo, GitError> {
    let worktree = on_branch(worktree, message).await?;
    let own = Git::new(&worktree)
        .args(["rev-list", "--count", "--end-of-options"])
        .arg(format!("{base}..HEAD"))
        .text()
        .await?;
    if own.trim() == "0" {
        return Err(GitError::NothingToAmend { path: worktree });
    }
    refuse_hard_linked(&worktree).await?;
    let git = identified(&worktree).await?.args(["commit", "--quiet", "--amend"]);
    match message {
        Some(message) => git.args(["-F", "-"]).stdin_bytes(message).run().await?,
        None => git.arg("--no-edit").run().await?,
    };
    head_commit(&worktree).await
}

/// `git` with the fallback identity filled in where the configuration has none.
async fn identified(worktree: &Path) -> Result<Git, GitError> {
    let mut git = Git::new(worktree);
    if !has_config(worktree, "user.name").await? {
        git = git.config(format!("user.name={FALLBACK_USER_NAME}"));
    }
    if !has_config(worktree, "user.email").await? {
        git = git.config(format!("user.email={FALLBACK_USER_EMAIL}"));
    }
    Ok(git)
}

/// The commit `HEAD` is, as [`CommitInfo`].
async fn head_commit(worktree: &Path) -> Result<CommitInfo, GitError> {
    let sha = Git::new(worktree).args(["rev-parse", "HEAD"]).text().await?;
    let summary = Git::new(worktree).args(["log", "-1", "--format=%s", &sha]).text().await?;
    let changed = Git::new(worktree)
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

/// Refuses (and unstages) staged files whose worktree copy has more than one hard link.
async fn refuse_hard_linked(worktree: &Path) -> Result<(), GitError> {
    let staged = Git::new(worktree)
        .args(["diff", "--cached", "--name-only", "-z", "--no-renames", "--diff-filter=d", "HEAD"])
        .run()
        .await?;
    let paths: Vec<String> = staged
        .stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let root: PathBuf = worktree.to_path_buf();
    let linked = tokio::task::spawn_blocking(move || {
        let root = Root::open(&root)?;
        let linked: Vec<String> = paths
            .into_iter()
            .filter(|path| {
                let entry = RelPath::parse(path).and_then(|relative| root.entry(&relative));
                entry.is_ok_and(|entry| entry.is_some_and(|e| e.is_hard_linked()))
            })
            .collect();
        Ok::<_, GitError>(linked)
    })
    .await
    .map_err(|e| GitError::io("checking the files to commit failed", io::Error::other(e)))??;
    let Some(first) = linked.first() else { return Ok(()) };
    Git::new(worktree)
        .args(["--literal-pathspecs", "reset", "--quiet", "--"])
        .args(&linked)
        .run()
        .await?;
    Err(GitError::Forbidden {
        path: PathBuf::from(first),
        reason: "it has more than one hard link and may be a file from outside the worktree; \
                 copy it instead of linking it, then commit again"
            .to_owned(),
    })
}

async fn has_config(worktree: &Path, key: &str) -> Result<bool, GitError> {
    let output = Git::new(worktree).args(["config", "--get", key]).output().await?;
    Ok(output.success() && !output.text().trim().is_empty())
}
