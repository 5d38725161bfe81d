//! Shipping a task's work: its git status per repository (published as `task.git_status`),
//! rebase, merge into the base branch, push, the cleanup script before a worktree goes, and
//! `review.submit`. Pull requests are `workdir::forge`.
//!
//! Invariants:
//! - Nothing is pushed, fetched or sent to a forge unless an action (a person's, or a
//!   workflow action a person configured) asks for it.
//! - Ship actions run under the task's lock, like preparing and removing its worktrees.
//! - A refusal says what blocks it: dirty files (`details.dirty`) and conflicting files
//!   (`details.conflicts`) are listed; a failed rebase leaves the branch as it was.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kandev_domain::ship::{
    DiffSide, GitStatus, MergeStrategy, ReviewComment, diff_hash, quote_line, review_prompt,
};
use kandev_domain::transcript::MessageKind;
use kandev_domain::{RepositoryId, SessionId, TaskId};
use kandev_runtime::git;
use kandev_store::WorktreeRecord;
use serde_json::json;

use crate::api::{PromptOutcome, PromptRequest};
use crate::engine::Engine;
use crate::error::{EngineError, Result, not_found};
use crate::inner::Inner;
use crate::workdir::shared::exists;
use crate::workdir::status::{publish_status, ship_error, targets};
use crate::write::add_message;

/// Longest a repository's cleanup script may run before it is killed.
pub const CLEANUP_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// A merge made by `task.merge`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeMade {
    pub repository_id: RepositoryId,
    pub base_branch: String,
    pub commit: String,
}

/// A push made by `task.push`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushMade {
    pub repository_id: RepositoryId,
    pub remote: String,
    pub branch: String,
    pub head: String,
}

/// What `review.submit` did.
#[derive(Debug, Clone)]
pub struct ReviewSent {
    pub comments: Vec<ReviewComment>,
    pub session_id: SessionId,
    pub queued: bool,
}

/// Runs the repository's cleanup script in a worktree about to be removed. Only when the
/// removal will go ahead (forced, or the worktree is clean); its outcome is a status message
/// in the task's primary session. A failing script does not keep the worktree: the removal
/// was asked for, and the script's work is not the task's.
pub(crate) async fn run_cleanup(inner: &Inner, record: &WorktreeRecord, force: bool) {
    let Some(repository_id) = &record.repository_id else { return };
    let Ok(repository) = inner.store.get_repository(repository_id).await else { return };
    if repository.cleanup_script.trim().is_empty() || !exists(&record.path).await {
        return;
    }
    let path = Path::new(&record.path);
    if !force && !matches!(git::is_dirty(path).await, Ok(0)) {
        return;
    }
    let ran = git::run_setup_script(path, &repository.cleanup_script, CLEANUP_TIMEOUT).await;
    let name = &repository.name;
    let (text, status) = match &ran {
        Ok(output) if output.output.trim().is_empty() => {
            (format!("cleanup script of {name} finished (exit code 0, no output)"), "finished")
        }
        Ok(output) => (
            format!(
                "cleanup script of {name} finished (exit code 0):\n{}",
                output.output.trim_end()
            ),
            "finished",
        ),
        Err(err) => {
            let err = err.to_string().replacen("setup script", "cleanup script", 1);
            tracing::warn!(worktree = %record.path, error = %err, "cleanup script failed");
            (format!("cleanup script of {name} failed: {err}"), "failed")
        }
    };
    let metadata = json!({
        "reason": "cleanup_script",
        "repository_id": repository.id.to_string(),
        "status": status,
    });
    if let Err(err) = status_message(inner, &record.task_id, &text, metadata).await {
        tracing::warn!(error = %err, "recording the cleanup script's outcome failed");
    }
}

/// Adds a status message to the task's primary session, if it has one.
async fn status_message(
    inner: &Inner,
    task_id: &TaskId,
    text: &str,
    metadata: serde_json::Value,
) -> Result<()> {
    let task = inner.store.get_task(task_id).await?;
    let Some(session_id) = task.primary_session_id else { return Ok(()) };
    let session = inner.store.get_session(&session_id).await?;
    let mut tx = inner.store.begin_write().await?;
    add_message(&mut tx, &session, None, MessageKind::Status, text, metadata).await?;
    tx.commit().await?;
    Ok(())
}

impl Engine {
    /// `task.git_status`: each repository's task branch against the current tip of its base,
    /// published as `task.git_status` too.
    pub async fn task_git_status(&self, task_id: &TaskId) -> Result<Vec<GitStatus>> {
        publish_status(&self.inner, task_id).await
    }

    /// `task.rebase`: rebases the task branch onto the current tip of its base in each
    /// repository (or one). A refusal changes nothing in that repository.
    pub async fn task_rebase(
        &self,
        task_id: &TaskId,
        only: Option<&RepositoryId>,
    ) -> Result<Vec<GitStatus>> {
        let targets = targets(&self.inner, task_id, only).await?;
        {
            let _guard = self.inner.task_locks.lock(task_id).await;
            for target in &targets {
                git::rebase(Path::new(&target.record.path), &target.base_branch)
                    .await
                    .map_err(ship_error)?;
            }
        }
        publish_status(&self.inner, task_id).await
    }

    /// `task.merge`: lands the task branch on its (local) base branch in the main repository.
    /// Checks every repository first (clean base checkout, no conflicts) only as far as git
    /// can without changing anything; each merge itself is all-or-nothing.
    pub async fn task_merge(
        &self,
        task_id: &TaskId,
        only: Option<&RepositoryId>,
        strategy: MergeStrategy,
        message: Option<&str>,
    ) -> Result<(Vec<MergeMade>, Vec<GitStatus>)> {
        let task = self.inner.store.get_task(task_id).await.map_err(not_found)?;
        let message = message.map(str::trim).filter(|m| !m.is_empty()).unwrap_or(&task.title);
        let targets = targets(&self.inner, task_id, only).await?;
        let strategy = match strategy {
            MergeStrategy::Merge => git::MergeStrategy::Merge,
            MergeStrategy::Squash => git::MergeStrategy::Squash,
            MergeStrategy::FastForward => git::MergeStrategy::FastForward,
        };
        let mut made = vec![];
        {
            let _guard = self.inner.task_locks.lock(task_id).await;
            for target in &targets {
                let commit = git::merge_into_base(
                    &PathBuf::from(&target.repository.local_path),
                    &target.base_branch,
                    &target.record.branch,
                    strategy,
                    message,
                )
                .await
                .map_err(ship_error)?;
                made.push(MergeMade {
                    repository_id: target.repository.id.clone(),
                    base_branch: target.base_branch.clone(),
                    commit,
                });
            }
        }
        Ok((made, publish_status(&self.inner, task_id).await?))
    }

    /// `task.push`: pushes the task branch to `remote` and sets it as upstream. Never forced
    /// unless `force_with_lease`.
    pub async fn task_push(
        &self,
        task_id: &TaskId,
        only: Option<&RepositoryId>,
        remote: &str,
        force_with_lease: bool,
    ) -> Result<(Vec<PushMade>, Vec<GitStatus>)> {
        let targets = targets(&self.inner, task_id, only).await?;
        let mut made = vec![];
        {
            let _guard = self.inner.task_locks.lock(task_id).await;
            for target in &targets {
                let head = git::push(Path::new(&target.record.path), remote, force_with_lease)
                    .await
                    .map_err(ship_error)?;
                made.push(PushMade {
                    repository_id: target.repository.id.clone(),
                    remote: remote.to_owned(),
                    branch: target.record.branch.clone(),
                    head,
                });
            }
        }
        Ok((made, publish_status(&self.inner, task_id).await?))
    }

    /// The text of a commented line and its file's diff hash (empty when the diff does not
    /// show that line, or cannot be read).
    pub async fn review_line(
        &self,
        task_id: &TaskId,
        path: &str,
        line: u32,
        side: DiffSide,
    ) -> (String, String) {
        let Ok(changes) = self.task_changes(task_id).await else {
            return (String::new(), String::new());
        };
        match changes.files.iter().find(|f| f.change.path == path) {
            Some(file) => {
                (quote_line(&file.change, line, side).unwrap_or_default(), diff_hash(&file.change))
            }
            None => (String::new(), String::new()),
        }
    }

    /// `review.submit`: sends the task's open review comments to its primary session as one
    /// prompt (queued when the agent is busy) and marks them sent.
    pub async fn review_submit(&self, task_id: &TaskId) -> Result<ReviewSent> {
        let task = self.inner.store.get_task(task_id).await.map_err(not_found)?;
        let Some(session_id) = task.primary_session_id.clone() else {
            return Err(EngineError::Conflict(
                "the task has no session to send the review to; launch one first".into(),
            ));
        };
        let open: Vec<ReviewComment> = self
            .inner
            .store
            .review_comments(task_id)
            .await?
            .into_iter()
            .filter(|c| c.sent_at.is_none())
            .collect();
        if open.is_empty() {
            return Err(EngineError::Validation(
                "there are no open review comments; add a comment first".into(),
            ));
        }
        let request = PromptRequest::text(review_prompt(&open));
        let outcome = self.prompt(&session_id, request).await?;
        let mut tx = self.inner.store.begin_write().await?;
        let ids: Vec<String> = open.iter().map(|c| c.id.clone()).collect();
        let comments = tx.mark_review_comments_sent(task_id, &ids).await?;
        tx.commit().await?;
        Ok(ReviewSent { comments, session_id, queued: matches!(outcome, PromptOutcome::Queued(_)) })
    }
}
