//! Git control of a task's worktrees (`task.commits`, `task.commit.diff`, `task.index`,
//! `task.stage` / `task.unstage` / `task.discard`, `task.commit` of what is staged,
//! `task.amend`), on this host or a build host alike (the runtime's `Site`).
//!
//! Invariants:
//! - What changes a worktree (staging, discarding, committing what is staged, amending) is
//!   refused while one of the task's sessions is starting or running a turn: the agent may be
//!   writing the same files. Reading (commits, diffs, the index) never is.
//! - A commit is named by a hex sha of 7 to 64 digits; anything else is refused before git
//!   sees it.

use std::path::Path;

use kandev_domain::files::{
    BranchCommit, CommitMade, FileChange, HunkRef, IndexAction, IndexState,
};
use kandev_domain::session::SessionState;
use kandev_domain::{RepositoryId, TaskId};

use super::actions::{Mounted, Root, review_base, root};
use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::sites::site_of;
use crate::workdir::shared::git_error;

/// One repository's part of a task's git control answer.
pub struct InRepository<T> {
    pub repository_id: Option<RepositoryId>,
    pub value: T,
}

impl Engine {
    /// The task branch's own commits in each repository, newest first.
    pub async fn task_commits(
        &self,
        task_id: &TaskId,
    ) -> Result<Vec<InRepository<Vec<BranchCommit>>>> {
        let mut out = vec![];
        for mounted in worktrees(&self.inner, task_id).await? {
            let site = site_of(&self.inner, &mounted.record).await?;
            let base = review_base(&self.inner, &site, task_id, &mounted.record).await?;
            let path = Path::new(&mounted.record.path);
            let commits = site.branch_commits(path, &base).await.map_err(git_error)?;
            out.push(InRepository { repository_id: mounted.record.repository_id, value: commits });
        }
        Ok(out)
    }

    /// The diff one commit of the task branch made.
    pub async fn task_commit_diff(
        &self,
        task_id: &TaskId,
        repository: Option<&RepositoryId>,
        sha: &str,
    ) -> Result<Vec<FileChange>> {
        if !(7..=64).contains(&sha.len()) || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(EngineError::Validation(
                "a commit is named by its hex id (7 to 64 digits); take it from the task's list of commits".into(),
            ));
        }
        let mounted = one_worktree(&self.inner, task_id, repository).await?;
        let site = site_of(&self.inner, &mounted.record).await?;
        site.commit_changes(Path::new(&mounted.record.path), sha).await.map_err(git_error)
    }

    /// What is staged and what is not in each of the task's worktrees.
    pub async fn task_index(&self, task_id: &TaskId) -> Result<Vec<InRepository<IndexState>>> {
        let mut out = vec![];
        for mounted in worktrees(&self.inner, task_id).await? {
            let site = site_of(&self.inner, &mounted.record).await?;
            let state =
                site.index_state(Path::new(&mounted.record.path)).await.map_err(git_error)?;
            out.push(InRepository { repository_id: mounted.record.repository_id, value: state });
        }
        Ok(out)
    }

    /// Stages, unstages or discards a file (or one hunk of it) in one of the task's worktrees.
    pub async fn task_change_index(
        &self,
        task_id: &TaskId,
        repository: Option<&RepositoryId>,
        action: IndexAction,
        path: &str,
        hunk: Option<&HunkRef>,
    ) -> Result<()> {
        refuse_during_turn(self, task_id).await?;
        let mounted = one_worktree(&self.inner, task_id, repository).await?;
        let site = site_of(&self.inner, &mounted.record).await?;
        let worktree = Path::new(&mounted.record.path);
        site.change_index(worktree, action, path, hunk).await.map_err(git_error)?;
        crate::workdir::status::refresh_status(&self.inner, task_id).await;
        Ok(())
    }

    /// Commits what is staged in each of the task's worktrees (those with nothing staged are
    /// skipped).
    pub async fn task_commit_staged(
        &self,
        task_id: &TaskId,
        message: &str,
    ) -> Result<Vec<CommitMade>> {
        refuse_during_turn(self, task_id).await?;
        let mut made = vec![];
        for mounted in worktrees(&self.inner, task_id).await? {
            let site = site_of(&self.inner, &mounted.record).await?;
            let worktree = Path::new(&mounted.record.path);
            match site.commit_staged(worktree, message).await {
                Ok(commit) => made.push(commit_made(&mounted, commit)),
                Err(err) if is_nothing_to_commit(&err) => {}
                Err(err) => return Err(git_error(err)),
            }
        }
        if made.is_empty() {
            return Err(EngineError::Validation(
                "nothing is staged; stage files or hunks first, or commit everything".into(),
            ));
        }
        crate::workdir::status::refresh_status(&self.inner, task_id).await;
        Ok(made)
    }

    /// Amends the last commit of the task branch in one worktree with what is staged, and
    /// with `message` when given.
    pub async fn task_amend(
        &self,
        task_id: &TaskId,
        repository: Option<&RepositoryId>,
        message: Option<&str>,
    ) -> Result<CommitMade> {
        refuse_during_turn(self, task_id).await?;
        let mounted = one_worktree(&self.inner, task_id, repository).await?;
        let site = site_of(&self.inner, &mounted.record).await?;
        let base = review_base(&self.inner, &site, task_id, &mounted.record).await?;
        let worktree = Path::new(&mounted.record.path);
        let commit = site.amend(worktree, &base, message).await.map_err(git_error)?;
        crate::workdir::status::refresh_status(&self.inner, task_id).await;
        Ok(commit_made(&mounted, commit))
    }
}

fn commit_made(mounted: &Mounted, commit: kandev_runtime::git::CommitInfo) -> CommitMade {
    CommitMade {
        repository_id: mounted.record.repository_id.clone(),
        branch: mounted.record.branch.clone(),
        sha: commit.sha,
        summary: commit.summary,
        files_changed: commit.files_changed,
    }
}

fn is_nothing_to_commit(err: &kandev_runtime::git::GitError) -> bool {
    use kandev_runtime::git::GitError;
    use kandev_runtime::site::RemoteErrorKind;
    matches!(
        err,
        GitError::NothingToCommit { .. }
            | GitError::Remote { kind: RemoteErrorKind::NothingToCommit, .. }
    )
}

/// The task's worktrees (a task without a repository has none to control).
async fn worktrees(inner: &crate::inner::Inner, task_id: &TaskId) -> Result<Vec<Mounted>> {
    match root(inner, task_id).await? {
        Root::Plain(_) => Err(EngineError::Validation(
            "the task has no repository; add one to the task to use git on it".into(),
        )),
        Root::Worktrees { worktrees, .. } => Ok(worktrees),
    }
}

/// The worktree of `repository`, or the only one when none is named.
async fn one_worktree(
    inner: &crate::inner::Inner,
    task_id: &TaskId,
    repository: Option<&RepositoryId>,
) -> Result<Mounted> {
    let mut all = worktrees(inner, task_id).await?;
    match repository {
        Some(id) => {
            let at = all.iter().position(|m| m.record.repository_id.as_ref() == Some(id));
            at.map(|at| all.swap_remove(at)).ok_or_else(|| {
                EngineError::NotFound(format!("the task has no worktree of repository {id}"))
            })
        }
        None if all.len() == 1 => Ok(all.swap_remove(0)),
        None => Err(EngineError::Validation(
            "the task has several repositories; choose one of them".into(),
        )),
    }
}

/// Refuses while one of the task's sessions is starting or running a turn.
async fn refuse_during_turn(engine: &Engine, task_id: &TaskId) -> Result<()> {
    let sessions = engine.inner.store.list_sessions(task_id).await?;
    if sessions.iter().any(|s| matches!(s.state, SessionState::Starting | SessionState::Running)) {
        return Err(EngineError::Conflict(
            "the agent is working in this worktree (a turn is running); wait for the turn to \
             end or cancel it, then try again"
                .into(),
        ));
    }
    Ok(())
}
