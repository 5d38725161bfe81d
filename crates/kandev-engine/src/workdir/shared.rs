//! What preparing a working directory, the file actions and shipping share: where a task's
//! worktrees live under `$KANDEV_HOME`, the limits of reading them and of a cleanup script,
//! and what a git failure or refusal means to a caller.
//!
//! Layout: `worktrees/<task>/<repo>` per repository. With one repository the session works
//! in that worktree; with several it works in `worktrees/<task>/`, which holds one folder per
//! repository. A task without a repository works in `tasks/<task>`. File actions take paths
//! relative to that same directory, so with several repositories they start with the
//! repository's folder.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kandev_domain::TaskId;
use kandev_domain::task::Task;
use kandev_domain::workspace::Repository;
use kandev_runtime::git::{self, GitError};
use kandev_runtime::site::RemoteErrorKind;
use kandev_store::WorktreeRecord;
use serde_json::json;

use crate::error::{EngineError, Result};

/// Most bytes of a file `task.file.read` returns.
pub const MAX_READ_BYTES: usize = 1024 * 1024;

/// Most entries listed for the plain folder of a task without a repository.
pub const MAX_PLAIN_ENTRIES: usize = 10_000;

/// Longest a repository's cleanup script may run before it is killed, unless the repository
/// sets its own limit.
pub const CLEANUP_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// A repository's script time limit: its own (`script_timeout_s`), else `server`'s.
pub(crate) fn script_timeout(
    repository: &kandev_domain::workspace::Repository,
    server: Duration,
) -> Duration {
    match repository.script_timeout_s {
        0 => server,
        seconds => Duration::from_secs(u64::from(seconds)),
    }
}

/// `$KANDEV_HOME/worktrees/<task>`: the folder holding a task's worktrees.
pub(crate) fn task_worktrees_dir(home: &Path, task_id: &TaskId) -> Result<PathBuf> {
    let one = git::worktree_dir(home, task_id.as_str(), "repository").map_err(git_error)?;
    Ok(one.parent().map(Path::to_path_buf).unwrap_or(one))
}

/// `worktrees/<task>/<repository name>`, or with the repository's short id appended when
/// another repository of the task already has that folder.
pub(crate) fn new_worktree_path(
    home: &Path,
    task: &Task,
    repository: &Repository,
    used: &HashSet<OsString>,
) -> Result<PathBuf> {
    let by_name = git::worktree_dir(home, task.id.as_str(), &repository.name).ok();
    if let Some(path) = by_name.filter(|p| p.file_name().is_some_and(|n| !used.contains(n))) {
        return Ok(path);
    }
    let short = git::short_id(repository.id.as_str());
    git::worktree_dir(home, task.id.as_str(), &format!("{}-{short}", repository.name))
        .or_else(|_| git::worktree_dir(home, task.id.as_str(), &short))
        .map_err(git_error)
}

/// Why a task has no worktree to work on: none was made yet, or only its attempts have
/// theirs (issue 48), which are compared and picked first.
pub(crate) fn no_worktree(live: &[WorktreeRecord]) -> EngineError {
    if live.iter().any(|w| !w.is_task_worktree()) {
        return EngineError::Conflict(
            "the task has no worktree of its own yet: its attempts work in theirs; compare \
             them on the Attempts tab and pick one"
                .into(),
        );
    }
    EngineError::Conflict("the task has no worktree; launch a session to create one".into())
}

pub(crate) async fn exists(path: &str) -> bool {
    tokio::fs::symlink_metadata(path).await.is_ok()
}

/// A git-layer error as the engine reports it.
pub(crate) fn git_error(err: GitError) -> EngineError {
    let message = err.to_string();
    match err {
        GitError::Forbidden { .. } => EngineError::Forbidden(message),
        GitError::NotFound { .. } => EngineError::NotFound(message),
        GitError::Dirty { .. }
        | GitError::BranchInUse { .. }
        | GitError::WorktreeExists { .. }
        | GitError::DetachedHead { .. }
        | GitError::DiffChanged { .. }
        | GitError::HunkNotApplied { .. } => EngineError::Conflict(message),
        GitError::Remote { kind, .. } => match kind {
            RemoteErrorKind::Forbidden => EngineError::Forbidden(message),
            RemoteErrorKind::NotFound => EngineError::NotFound(message),
            RemoteErrorKind::Conflict => EngineError::Conflict(message),
            RemoteErrorKind::Unavailable => {
                tracing::warn!(error = %message, "a git operation on a build host failed");
                EngineError::Unavailable(message)
            }
            RemoteErrorKind::NothingToCommit
            | RemoteErrorKind::RepositoryMissing
            | RemoteErrorKind::Validation => EngineError::Validation(message),
        },
        GitError::Git { .. } | GitError::Timeout { .. } | GitError::Io { .. } => {
            tracing::warn!(error = %message, "a git operation failed");
            EngineError::Unavailable(message)
        }
        _ => EngineError::Validation(message),
    }
}

/// A git refusal as the engine reports it, with the files that block it in `details`.
pub(crate) fn ship_error(err: GitError) -> EngineError {
    let message = err.to_string();
    match err {
        GitError::DirtyFiles { files, path } => EngineError::Refused {
            message,
            details: json!({ "dirty": files, "path": path.display().to_string() }),
        },
        GitError::RebaseConflicts { files, .. } | GitError::MergeConflicts { files, .. } => {
            EngineError::Refused { message, details: json!({ "conflicts": files }) }
        }
        GitError::NotFastForward { .. }
        | GitError::PushRejected { .. }
        | GitError::BranchNotUpdated { .. } => EngineError::Conflict(message),
        GitError::PushAuth { .. } => EngineError::Unavailable(message),
        GitError::BaseNotLocal { .. } | GitError::NoRemote { .. } => {
            EngineError::Validation(message)
        }
        other => git_error(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_errors_keep_their_kind() {
        let forbidden = GitError::Forbidden { path: "../x".into(), reason: "no".into() };
        assert!(matches!(git_error(forbidden), EngineError::Forbidden(_)));
        let dirty = GitError::Dirty { path: "/w".into(), files: 1 };
        assert!(matches!(git_error(dirty), EngineError::Conflict(_)));
        let missing = GitError::BaseBranchMissing { branch: "dev".into() };
        assert!(matches!(git_error(missing), EngineError::Validation(m) if m.contains("dev")));
        let gone = GitError::NotFound { path: "a.txt".into() };
        assert!(matches!(git_error(gone), EngineError::NotFound(_)));
    }
}
