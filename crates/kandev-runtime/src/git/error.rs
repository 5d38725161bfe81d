//! The error type of the git and worktree layer.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while preparing, inspecting or removing a task's working
/// directory. Messages are meant to be shown to a user as they are.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The repository's local path does not exist (any more).
    #[error("repository path `{}` does not exist; fix the repository's local path", path.display())]
    RepositoryMissing { path: PathBuf },

    /// The path exists but is not the top-level directory of a git repository.
    #[error(
        "`{}` is not the top-level directory of a git repository; point the repository at the folder that contains `.git`",
        path.display()
    )]
    NotARepository { path: PathBuf },

    /// The repository has no commit yet, so there is nothing to branch off.
    #[error("repository `{}` has no commits; make an initial commit first", path.display())]
    NoCommits { path: PathBuf },

    /// The base branch is neither a local branch nor a remote-tracking branch.
    #[error(
        "base branch `{branch}` does not exist; create it or change the repository's base branch"
    )]
    BaseBranchMissing { branch: String },

    /// A commit (e.g. a recorded base commit) is not known to the repository.
    #[error(
        "commit `{commit}` does not exist in the repository; it may have been garbage-collected, recreate the worktree"
    )]
    UnknownCommit { commit: String },

    /// The branch name is not a valid git branch name.
    #[error("`{branch}` is not a valid git branch name; change the repository's branch template")]
    InvalidBranchName { branch: String },

    /// The task branch is already checked out in another worktree.
    #[error(
        "branch `{branch}` is already checked out in `{}`; remove that worktree first",
        path.display()
    )]
    BranchInUse { branch: String, path: PathBuf },

    /// Every name a new task branch could take (`branch`, `branch-2`, ...) already exists.
    #[error(
        "branches `{branch}` to `{branch}-{last}` all exist; delete some or change the \
         repository's branch template"
    )]
    NoFreeBranchName { branch: String, last: usize },

    /// Something already exists where the new worktree should go.
    #[error("worktree path `{}` already exists; remove it or choose another path", path.display())]
    WorktreeExists { path: PathBuf },

    /// The path is not a linked worktree of the given repository (the main checkout never is).
    #[error(
        "`{}` is not a linked worktree of repository `{}`; only worktrees created for tasks can be removed",
        path.display(),
        repo.display()
    )]
    NotAWorktree { path: PathBuf, repo: PathBuf },

    /// The setup script exited with a non-zero code or was killed by a signal.
    #[error(
        "setup script failed ({}); fix the repository's setup script. last output:\n{}",
        describe_exit(*.exit_code),
        or_no_output(.output_tail)
    )]
    SetupFailed { exit_code: Option<i32>, output_tail: String },

    /// The setup script did not finish in time; its process group was killed.
    #[error(
        "setup script did not finish within {}s and was killed; make it faster or raise its time limit in Settings › Repositories. last output:\n{}",
        timeout.as_secs_f64(),
        or_no_output(.output_tail)
    )]
    SetupTimedOut { timeout: Duration, output_tail: String },

    /// A path leaves the worktree (absolute, `..`, a symlink pointing outside) or names git
    /// metadata.
    #[error("access to `{}` is forbidden: {reason}", path.display())]
    Forbidden { path: PathBuf, reason: String },

    /// `task.amend` on a branch without a commit of the task's own.
    #[error("the task branch has no commit of its own to amend; commit first")]
    NothingToAmend { path: PathBuf },

    /// A hunk was chosen from a diff that is not the file's diff any more.
    #[error("the diff of `{path}` changed since it was shown; refresh and choose again")]
    DiffChanged { path: String },

    /// The hunk index is past the file's hunks (or the file has none to take one from).
    #[error("`{path}` has no hunk {index} in that diff; refresh and choose again")]
    NoSuchHunk { path: String, index: usize },

    /// `git apply` refused one hunk (`why`: its message).
    #[error("the hunk of `{path}` could not be applied: {why}")]
    HunkNotApplied { path: String, why: String },

    /// A worktree, directory or file does not exist.
    #[error("`{}` does not exist", path.display())]
    NotFound { path: PathBuf },

    /// A file was expected but the path is a directory (or something else).
    #[error("`{}` is not a regular file", path.display())]
    NotAFile { path: PathBuf },

    /// Removing a worktree with uncommitted or untracked changes was refused.
    #[error(
        "worktree `{}` has {files} uncommitted or untracked file(s); commit them, or remove the worktree anyway to discard them",
        path.display()
    )]
    Dirty { path: PathBuf, files: usize },

    /// A worktree (or the base branch's checkout) has uncommitted or untracked files that an
    /// operation would have to touch; `files` lists them.
    #[error(
        "`{}` has uncommitted or untracked files ({}); commit or stash them first",
        path.display(),
        list(files)
    )]
    DirtyFiles { path: PathBuf, files: Vec<String> },

    /// A rebase stopped on conflicts; it was aborted and the branch is unchanged.
    #[error(
        "rebasing onto `{base}` conflicts in {}; the rebase was aborted and the branch is unchanged: resolve the conflicts (or ask the agent to) and try again",
        list(files)
    )]
    RebaseConflicts { base: String, files: Vec<String> },

    /// Merging the task branch into its base would conflict; nothing was changed.
    #[error(
        "merging into `{base}` conflicts in {}; nothing was changed: rebase the task onto `{base}` and resolve the conflicts first",
        list(files)
    )]
    MergeConflicts { base: String, files: Vec<String> },

    /// A fast-forward was asked for but the base has commits the task branch lacks.
    #[error(
        "cannot fast-forward `{base}`: it has commits the task branch does not; rebase the task first or use the merge or squash strategy"
    )]
    NotFastForward { base: String },

    /// The base to merge into is not a local branch (a remote-tracking `origin/x`).
    #[error(
        "`{branch}` is not a local branch, so nothing can be merged into it locally; push the task and open a pull request instead"
    )]
    BaseNotLocal { branch: String },

    /// The repository has no such remote.
    #[error(
        "the repository has no remote `{remote}`; add one with `git remote add {remote} <url>`"
    )]
    NoRemote { remote: String },

    /// The task branch fetched from an SSH executor's build host cannot become the branch
    /// of the same name in the server's repository (it has other commits, or it is checked
    /// out there); nothing was changed.
    #[error(
        "cannot bring the task branch `{branch}` from the build host into `{}`: {why}",
        path.display()
    )]
    BranchNotUpdated { branch: String, path: PathBuf, why: String },

    /// The remote refused the push because it is not a fast-forward.
    #[error(
        "`{remote}` refused the push of `{branch}`: the remote branch has commits the task branch does not (non-fast-forward); rebase or pull first, or force-push (with lease) to replace them"
    )]
    PushRejected { remote: String, branch: String },

    /// The remote refused the credentials (or had none).
    #[error(
        "`{remote}` refused the push: authentication failed; configure git credentials for this remote (a credential helper or an SSH key) so `git push` works in a terminal"
    )]
    PushAuth { remote: String },

    /// `commit` found nothing to commit.
    #[error("nothing to commit in `{}`; the worktree has no changes", path.display())]
    NothingToCommit { path: PathBuf },

    /// A commit message must have some text.
    #[error("the commit message is empty; give a message")]
    EmptyCommitMessage,

    /// The worktree is not on a branch, so a commit would not land on the task branch.
    #[error("worktree `{}` is not on a branch (detached head); check out the task branch first", path.display())]
    DetachedHead { path: PathBuf },

    /// A git command failed; `stderr` is git's own explanation.
    #[error("`{command}` failed: {}", stderr.trim())]
    Git { command: String, stderr: String },

    /// A git command did not finish in time and was killed.
    #[error("`{command}` did not finish within {}s and was killed", timeout.as_secs())]
    Timeout { command: String, timeout: Duration },

    /// An operation run on another host (the SSH executor, [`crate::site`]) failed there;
    /// `kind` keeps what the failure means, `message` says it as the host did.
    #[error("{message}")]
    Remote { kind: crate::runner::ops::RemoteErrorKind, message: String },

    /// A filesystem or process error.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl GitError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        GitError::Io { context: context.into(), source }
    }
}

fn describe_exit(code: Option<i32>) -> String {
    match code {
        Some(code) => format!("exit code {code}"),
        None => "killed by a signal".to_owned(),
    }
}

/// A list of paths for a message: the first few, and how many more.
fn list(files: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text =
        files.iter().take(SHOWN).map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ");
    if files.len() > SHOWN {
        text.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    text
}

fn or_no_output(tail: &str) -> &str {
    if tail.trim().is_empty() { "(no output)" } else { tail.trim_end() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_failure_names_the_exit_code_and_the_output() {
        let err = GitError::SetupFailed { exit_code: Some(3), output_tail: "boom\n".into() };
        assert_eq!(
            err.to_string(),
            "setup script failed (exit code 3); fix the repository's setup script. last output:\nboom"
        );
        let err = GitError::SetupFailed { exit_code: None, output_tail: String::new() };
        assert!(err.to_string().contains("killed by a signal"));
        assert!(err.to_string().ends_with("(no output)"));
    }

    #[test]
    fn messages_start_lowercase_and_have_no_trailing_period() {
        let errors = [
            GitError::RepositoryMissing { path: "/x".into() },
            GitError::BaseBranchMissing { branch: "dev".into() },
            GitError::Dirty { path: "/w".into(), files: 2 },
            GitError::EmptyCommitMessage,
        ];
        for err in errors {
            let text = err.to_string();
            assert!(!text.starts_with(|c: char| c.is_ascii_uppercase()), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
    }
}
