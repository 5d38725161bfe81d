//! Git control of a task's worktree beyond committing everything: the task branch's own
//! commits and each one's diff, the index (what is staged and what is not), and staging,
//! unstaging or discarding a whole file or one hunk of it.
//!
//! A hunk is named by its index in the file's diff *and* the hash of that diff as it was shown
//! ([`kandev_domain::ship::diff_hash`]): a file whose diff changed meanwhile is refused
//! ([`GitError::DiffChanged`]) rather than a different hunk being applied. The hunk is taken
//! from git's own patch text for the file (so "no newline at end of file" markers survive)
//! and applied with `git apply`: to the index to stage, reversed to the index to unstage,
//! reversed to the worktree to discard.

use std::path::Path;

// The values are plain domain types, defined once (kandev_domain::files).
pub use kandev_domain::files::{BranchCommit, HunkRef, IndexAction, IndexState};
use kandev_domain::files::{ChangeStatus, FileChange};
use kandev_domain::ship::diff_hash;

use super::GitError;
use super::cmd::Git;
use super::diff::{patch_command, tracked_changes, untracked_paths, with_untracked};
use super::worktree::{open_worktree, resolve_commit};
use crate::confine::RelPath;

/// At most this many of a branch's commits are listed (newest first).
pub const MAX_COMMITS: usize = 500;

/// The commits on `HEAD` that `base` does not have, newest first (at most [`MAX_COMMITS`]).
pub async fn branch_commits(worktree: &Path, base: &str) -> Result<Vec<BranchCommit>, GitError> {
    let worktree = open_worktree(worktree).await?;
    let base = resolve_commit(&worktree, base).await?;
    let log = Git::new(&worktree)
        .args(["log", "--no-color", "--format=%H%x1f%s%x1f%an%x1f%ct%x1e"])
        .arg(format!("--max-count={MAX_COMMITS}"))
        .arg("--end-of-options")
        .arg(format!("{base}..HEAD"))
        .arg("--")
        .run()
        .await?;
    let text = String::from_utf8_lossy(&log.stdout);
    Ok(text
        .split('\x1e')
        .filter_map(|record| {
            let mut fields = record.trim_start_matches('\n').split('\x1f');
            let sha = fields.next().filter(|s| !s.is_empty())?.to_owned();
            let summary = fields.next()?.to_owned();
            let author = fields.next()?.to_owned();
            let committed_at = fields.next()?.trim().parse().ok()?;
            Some(BranchCommit { sha, summary, author, committed_at })
        })
        .collect())
}

/// The diff one commit made (against its first parent; a root commit against nothing).
pub async fn commit_changes(worktree: &Path, sha: &str) -> Result<Vec<FileChange>, GitError> {
    let worktree = open_worktree(worktree).await?;
    let commit = resolve_commit(&worktree, sha).await?;
    let parent = match resolve_commit(&worktree, &format!("{commit}^1")).await {
        Ok(parent) => parent,
        Err(GitError::UnknownCommit { .. }) => {
            // The empty tree, in this repository's hash.
            Git::new(&worktree).args(["hash-object", "-t", "tree", "--stdin"]).text().await?
        }
        Err(err) => return Err(err),
    };
    let (files, _) = tracked_changes(&worktree, &[&parent, &commit], None).await?;
    Ok(files)
}

/// What changed from commit `from` to commit `to` (a turn's checkpoints, issue 48).
pub async fn commits_changes(
    worktree: &Path,
    from: &str,
    to: &str,
) -> Result<Vec<FileChange>, GitError> {
    let worktree = open_worktree(worktree).await?;
    let from = resolve_commit(&worktree, from).await?;
    let to = resolve_commit(&worktree, to).await?;
    let (files, _) = tracked_changes(&worktree, &[&from, &to], None).await?;
    Ok(files)
}

/// What is staged and what is not.
pub async fn index_state(worktree: &Path) -> Result<IndexState, GitError> {
    let worktree = open_worktree(worktree).await?;
    let (staged, _) = tracked_changes(&worktree, &["--cached", "HEAD"], None).await?;
    let (unstaged, used) = tracked_changes(&worktree, &[], None).await?;
    let unstaged = with_untracked(worktree, unstaged, used).await?;
    Ok(IndexState { staged, unstaged })
}

/// Stages, unstages or discards the file `path` (relative to the worktree), or only one hunk
/// of its diff. An untracked file is staged or discarded whole (its one hunk is all of it).
pub async fn change_index(
    worktree: &Path,
    action: IndexAction,
    path: &str,
    hunk: Option<&HunkRef>,
) -> Result<(), GitError> {
    let worktree = open_worktree(worktree).await?;
    let normalized = RelPath::parse(path)?.normalized();
    let path = normalized.as_str();
    let untracked = untracked_paths(&worktree).await?.iter().any(|p| p == path);
    if let Some(hunk) = hunk {
        let (range, files): (&[&str], Vec<FileChange>) = match action {
            IndexAction::Unstage => (
                &["--cached", "HEAD"],
                tracked_changes(&worktree, &["--cached", "HEAD"], None).await?.0,
            ),
            IndexAction::Stage | IndexAction::Discard => {
                let (files, used) = tracked_changes(&worktree, &[], None).await?;
                (&[], with_untracked(worktree.clone(), files, used).await?)
            }
        };
        let file = files.iter().find(|f| f.path == path);
        match file {
            Some(file) if diff_hash(file) == hunk.diff_hash => {
                if hunk.index >= file.hunks.len() {
                    return Err(GitError::NoSuchHunk { path: path.to_owned(), index: hunk.index });
                }
                if file.status == ChangeStatus::Renamed || file.truncated {
                    return Err(GitError::HunkNotApplied {
                        path: path.to_owned(),
                        why: "a renamed or truncated file is staged, unstaged or discarded whole"
                            .to_owned(),
                    });
                }
                if !untracked {
                    return apply_hunk(&worktree, action, range, path, hunk.index).await;
                }
            }
            _ => return Err(GitError::DiffChanged { path: path.to_owned() }),
        }
    }
    let git = Git::new(&worktree).arg("--literal-pathspecs");
    match action {
        IndexAction::Stage => git.args(["add", "-A", "--", path]).run().await?,
        IndexAction::Unstage => git.args(["reset", "--quiet", "HEAD", "--", path]).run().await?,
        IndexAction::Discard if untracked => {
            git.args(["clean", "-f", "-q", "--", path]).run().await?
        }
        IndexAction::Discard => git.args(["checkout", "--quiet", "--", path]).run().await?,
    };
    tracing::debug!(worktree = %worktree.display(), ?action, path, "changed the index of a file");
    Ok(())
}

/// Applies hunk `index` of git's patch of `path` for `range` as `action` says.
async fn apply_hunk(
    worktree: &Path,
    action: IndexAction,
    range: &[&str],
    path: &str,
    index: usize,
) -> Result<(), GitError> {
    let raw = patch_command(worktree)
        .args(range)
        .arg("--")
        .arg(format!(":(literal){path}"))
        .run()
        .await?;
    let patch = one_hunk(&String::from_utf8_lossy(&raw.stdout), index)
        .ok_or_else(|| GitError::NoSuchHunk { path: path.to_owned(), index })?;
    let mut apply = Git::new(worktree).args(["apply", "--whitespace=nowarn"]);
    apply = match action {
        IndexAction::Stage => apply.arg("--cached"),
        IndexAction::Unstage => apply.args(["--cached", "-R"]),
        IndexAction::Discard => apply.arg("-R"),
    };
    let apply = apply.arg("-").stdin_bytes(patch);
    let output = apply.output().await?;
    if !output.success() {
        let why = output.stderr.trim().to_owned();
        return Err(GitError::HunkNotApplied { path: path.to_owned(), why });
    }
    tracing::debug!(worktree = %worktree.display(), ?action, path, index, "applied one hunk");
    Ok(())
}

/// The patch of one file (`git diff` text) cut down to its header and hunk `index`.
fn one_hunk(patch: &str, index: usize) -> Option<String> {
    let mut header = String::new();
    let mut hunks: Vec<String> = vec![];
    for line in patch.split_inclusive('\n') {
        if line.starts_with("@@") {
            hunks.push(String::new());
        }
        match hunks.last_mut() {
            Some(hunk) => hunk.push_str(line),
            None => header.push_str(line),
        }
    }
    let hunk = hunks.get(index)?;
    Some(format!("{header}{hunk}"))
}

#[cfg(test)]
mod tests {
    use super::one_hunk;

    #[test]
    fn one_hunk_keeps_the_header_and_the_chosen_hunk_with_its_markers() {
        let patch = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n@@ -9 +9 @@\n-x\n+y\n\\ No newline at end of file\n";
        assert_eq!(
            one_hunk(patch, 0).unwrap(),
            "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"
        );
        assert_eq!(
            one_hunk(patch, 1).unwrap(),
            "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -9 +9 @@\n-x\n+y\n\\ No newline at end of file\n"
        );
        assert_eq!(one_hunk(patch, 2), None);
    }
}
