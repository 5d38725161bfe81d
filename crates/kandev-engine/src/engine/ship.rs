//! Shipping a task's work, as `Engine` methods: its git status per repository (published as
//! `task.git_status`), rebase, merge into the base branch, push (the work itself is
//! `workdir::ops`), pull requests (the forge client is `workdir::forge`) and their polling,
//! whose state changes run the steps' `on_pr_merged` / `on_pr_closed`, the cleanup script
//! before a worktree goes, and `review.submit`.
//!
//! Invariants:
//! - Nothing is pushed, fetched or sent to a forge unless an action (a person's, or a
//!   workflow action a person configured) asks for it.
//! - Ship actions run under the task's lock, like preparing and removing its worktrees.
//! - A refusal says what blocks it: dirty files (`details.dirty`) and conflicting files
//!   (`details.conflicts`) are listed; a failed rebase leaves the branch as it was.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use kandev_domain::message_meta::StatusNote;
use kandev_domain::ship::{
    DiffSide, GitStatus, MergeStrategy, PrState, PullRequest, ReviewComment, diff_hash,
    quote_lines, review_prompt,
};
use kandev_domain::workspace::Repository;
use kandev_domain::{RepositoryId, TaskId};
use kandev_runtime::git;
use kandev_runtime::site::Site;
use kandev_store::WorktreeRecord;
use tokio_util::sync::CancellationToken;

use crate::api::{PromptOutcome, PromptRequest};
use crate::engine::Engine;
use crate::error::{EngineError, Result, not_found};
use crate::inner::Inner;
use crate::notes::task_status_message as status_message;
use crate::workdir::forge::{create_prs, refresh_one};
use crate::workdir::ops::{MergeMade, PushMade, ReviewSent, merge, push, rebase};
use crate::workdir::shared::CLEANUP_TIMEOUT;
use crate::workdir::status::{publish_status, ship_error};
use crate::workflow::pr_settled;

/// Runs the repository's cleanup script in a worktree about to be removed, on the host the
/// worktree is on (`site`: a build host runs it through its runner, `kandev remote-op`). Only
/// when the removal will go ahead (forced, or the worktree is clean); its outcome is a status
/// message in the task's primary session. A failing script does not keep the worktree: the
/// removal was asked for, and the script's work is not the task's.
pub(crate) async fn run_cleanup(inner: &Inner, site: &Site, record: &WorktreeRecord, force: bool) {
    let Some(repository_id) = &record.repository_id else { return };
    let Ok(repository) = inner.store.get_repository(repository_id).await else { return };
    let path = Path::new(&record.path);
    if repository.cleanup_script.trim().is_empty() {
        return;
    }
    let name = &repository.name;
    // A task's container runs its scripts; never this host instead.
    let through =
        match crate::containers::exec_in(inner, &record.task_id, &record.path, false).await {
            Ok(through) => through,
            Err(err) => {
                let text = format!("cleanup script of {name} did not run: {err}");
                cleanup_note(inner, record, &repository, &text, "failed").await;
                return;
            }
        };
    // A check that fails (a build host's link reconnecting) is not "no worktree": the
    // removal may still go ahead, so the skipped script is said (review finding, issue 20).
    match site.exists(path).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(err) => {
            tracing::warn!(worktree = %record.path, error = %err, "cleanup script not run");
            let text = format!(
                "cleanup script of {name} did not run: cannot check the worktree {}: {err}",
                record.path
            );
            cleanup_note(inner, record, &repository, &text, "failed").await;
            return;
        }
    }
    if !force && !matches!(site.is_dirty(path).await, Ok(0)) {
        return;
    }
    let script = &repository.cleanup_script;
    let timeout = crate::workdir::script_timeout(&repository, CLEANUP_TIMEOUT);
    let env = match crate::secrets::script_env(inner, &repository).await {
        Ok(env) => env,
        Err(err) => {
            let text = format!("cleanup script of {name} did not run: {err}");
            cleanup_note(inner, record, &repository, &text, "failed").await;
            return;
        }
    };
    let ran = match through {
        Some(through) => {
            kandev_runtime::git::run_script_through(&through, path, script, timeout, None, &env)
                .await
        }
        None => site.run_script(path, script, timeout, &env).await,
    };
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
    cleanup_note(inner, record, &repository, &text, status).await;
}

/// The transcript note of a cleanup script's outcome (`reason: cleanup_script`).
async fn cleanup_note(
    inner: &Inner,
    record: &WorktreeRecord,
    repository: &Repository,
    text: &str,
    status: &str,
) {
    let note = StatusNote::CleanupScript {
        repository_id: repository.id.to_string(),
        status: status.to_owned(),
    };
    if let Err(err) = status_message(inner, &record.task_id, text, note).await {
        tracing::warn!(error = %err, "recording the cleanup script's outcome failed");
    }
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
        rebase(&self.inner, task_id, only).await
    }

    /// `task.merge`: lands the task branch on its (local) base branch in the main repository.
    pub async fn task_merge(
        &self,
        task_id: &TaskId,
        only: Option<&RepositoryId>,
        strategy: MergeStrategy,
        message: Option<&str>,
        by: &str,
    ) -> Result<(Vec<MergeMade>, Vec<GitStatus>)> {
        let made = merge(&self.inner, task_id, only, strategy, message).await?;
        for m in &made.0 {
            let text = format!("{by} merged the task branch into {}", m.base_branch);
            self.note_by(task_id, by, "merge", text).await;
        }
        Ok(made)
    }

    /// `task.push`: pushes the task branch to `remote` and sets it as upstream. Never forced
    /// unless `force_with_lease`.
    pub async fn task_push(
        &self,
        task_id: &TaskId,
        only: Option<&RepositoryId>,
        remote: &str,
        force_with_lease: bool,
        by: &str,
    ) -> Result<(Vec<PushMade>, Vec<GitStatus>)> {
        let made = push(&self.inner, task_id, only, remote, force_with_lease).await?;
        for p in &made.0 {
            let text = format!("{by} pushed {} to {}", p.branch, p.remote);
            self.note_by(task_id, by, "push", text).await;
        }
        Ok(made)
    }

    /// Issue 21: a shipping action done by someone named (a user, or the server token) is
    /// recorded in the task's primary session's transcript; without accounts (`by` is the one
    /// local `user`) nothing is added. A failure to record is logged, not the action's.
    async fn note_by(&self, task_id: &TaskId, by: &str, action: &str, text: String) {
        if !kandev_domain::account::names_someone(by) {
            return;
        }
        let note = StatusNote::ShipBy { action: action.to_owned(), by: by.to_owned() };
        if let Err(err) = status_message(&self.inner, task_id, &text, note).await {
            tracing::warn!(error = %err, "recording who shipped failed");
        }
    }

    /// The text of a commented line and its file's diff hash (empty when the diff does not
    /// show that line, or cannot be read).
    pub async fn review_line(
        &self,
        task_id: &TaskId,
        path: &str,
        (first, last): (u32, u32),
        side: DiffSide,
    ) -> (String, String) {
        let Ok(changes) = self.task_changes(task_id).await else {
            return (String::new(), String::new());
        };
        match changes.files.iter().find(|f| f.change.path == path) {
            Some(file) => {
                let quote = quote_lines(&file.change, first, last, side).unwrap_or_default();
                (quote, diff_hash(&file.change))
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
        let listed = self.review_comments(task_id).await?;
        let changed: Vec<&str> =
            listed.iter().filter(|(_, outdated)| *outdated).map(|(c, _)| c.id.as_str()).collect();
        let all: Vec<ReviewComment> = listed.iter().map(|(c, _)| c.clone()).collect();
        // Open comments of threads that are not resolved, each thread's together, first
        // comment first (the list is oldest first).
        let resolved: Vec<&str> =
            all.iter().filter(|c| c.resolved_at.is_some()).map(|c| c.id.as_str()).collect();
        let mut open: Vec<ReviewComment> = all
            .iter()
            .filter(|c| c.sent_at.is_none() && !resolved.contains(&c.thread()))
            .cloned()
            .collect();
        let first_seen = |c: &ReviewComment| all.iter().position(|a| a.id == c.thread());
        open.sort_by_key(|c| (first_seen(c), c.created_at));
        if open.is_empty() {
            return Err(EngineError::Validation(
                "there are no open review comments; add a comment first".into(),
            ));
        }
        let request = PromptRequest::text(review_prompt(&open, &changed));
        let outcome = self.prompt(&session_id, request).await?;
        let mut tx = self.inner.store.begin_write().await?;
        let ids: Vec<String> = open.iter().map(|c| c.id.clone()).collect();
        let comments = tx.mark_review_comments_sent(task_id, &ids).await?;
        tx.commit().await?;
        Ok(ReviewSent { comments, session_id, queued: matches!(outcome, PromptOutcome::Queued(_)) })
    }
}

/// Reads a task's pull request again and, when its state changed to merged or closed, runs
/// the step's `on_pr_merged` / `on_pr_closed` (`crate::workflow::pr_settled`). The one path
/// of polling and of `task.pr.get`.
pub(crate) async fn refresh_and_follow(
    inner: &Arc<Inner>,
    pr: &PullRequest,
) -> Result<PullRequest> {
    let crate::workdir::forge::Refreshed { pr: fresh, changed, api, answer } =
        refresh_one(inner, pr).await?;
    if fresh.state == PrState::Open {
        // Its checks and reviews: a forge that cannot say does not fail the refresh.
        if let Err(err) = crate::feedback::follow(inner, &api, &answer, &fresh).await {
            tracing::debug!(task = %fresh.task_id, error = %err, "cannot read the checks or reviews of a pull request");
        }
    }
    if changed.is_some() {
        tracing::debug!(task = %fresh.task_id, state = fresh.state.as_str(), "pull request state changed");
        if fresh.state != PrState::Open {
            pr_settled(inner.clone(), fresh.task_id.clone(), fresh.state).await?;
        }
    }
    Ok(fresh)
}

/// How many poll intervals a pull request that could not be read waits, after `failures`
/// failures in a row: 2, 4, 8, ... up to 32.
fn backoff(failures: u32) -> u32 {
    1u32 << failures.clamp(1, 5)
}

impl Engine {
    /// `task.pr.create`: for each repository of the task (or one), pushes the task branch
    /// when the remote does not have it yet and opens a pull request on the forge; an open
    /// one is returned as it is.
    pub async fn task_pr_create(
        &self,
        task_id: &TaskId,
        only: Option<&RepositoryId>,
        title: Option<String>,
        body: Option<String>,
        draft: bool,
        by: &str,
    ) -> Result<Vec<PullRequest>> {
        let prs = create_prs(&self.inner, task_id, only, title.as_deref(), body.as_deref(), draft)
            .await?;
        for pr in &prs {
            let text = format!("{by} opened pull request {}", pr.url);
            self.note_by(task_id, by, "pr_create", text).await;
        }
        Ok(prs)
    }

    /// `task.pr.get`: the task's pull requests, each read again from its forge (a change to
    /// merged or closed runs the step's trigger, like polling does); the new state is
    /// published with the task's git status.
    pub async fn task_pr_refresh(&self, task_id: &TaskId) -> Result<Vec<PullRequest>> {
        self.inner.store.get_task(task_id).await.map_err(not_found)?;
        let mut prs = vec![];
        for pr in self.inner.store.pull_requests(task_id).await? {
            prs.push(refresh_and_follow(&self.inner, &pr).await?);
        }
        if let Err(err) = publish_status(&self.inner, task_id).await {
            tracing::debug!(task = %task_id, error = %err, "git status not published");
        }
        Ok(prs)
    }

    /// Polls the forge for every open pull request, every `EngineConfig::pr_poll_interval`,
    /// until `shutdown`: a state change is published and runs the step's `on_pr_merged` /
    /// `on_pr_closed`. A pull request that cannot be read is retried after a back-off.
    /// Only pull requests opened by an action are polled; nothing else reaches a forge.
    pub async fn poll_pull_requests(self, shutdown: CancellationToken) {
        let every = self.inner.config.pr_poll_interval;
        if every.is_zero() {
            return;
        }
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Per pull request: failures in a row, and the ticks still to skip.
        let mut waiting: HashMap<(TaskId, RepositoryId), (u32, u32)> = HashMap::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let open = match self.inner.store.open_pull_requests().await {
                Ok(open) => open,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot list the open pull requests");
                    continue;
                }
            };
            waiting.retain(|key, _| {
                open.iter().any(|p| (&p.task_id, &p.repository_id) == (&key.0, &key.1))
            });
            for pr in open {
                let key = (pr.task_id.clone(), pr.repository_id.clone());
                if let Some((_, skip)) = waiting.get_mut(&key)
                    && *skip > 0
                {
                    *skip -= 1;
                    continue;
                }
                let refreshed = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    refreshed = refresh_and_follow(&self.inner, &pr) => refreshed,
                };
                match refreshed {
                    Ok(fresh) => {
                        waiting.remove(&key);
                        if fresh.state != pr.state {
                            crate::workdir::status::refresh_status(&self.inner, &pr.task_id).await;
                        }
                    }
                    Err(err) => {
                        let failures = waiting.get(&key).map_or(0, |w| w.0) + 1;
                        tracing::debug!(task = %pr.task_id, error = %err, failures, "cannot poll a pull request");
                        waiting.insert(key, (failures, backoff(failures)));
                    }
                }
            }
        }
    }

    /// The disk each live worktree of a repository takes (`repository.usage`).
    pub async fn repository_usage(
        &self,
        repository_id: &RepositoryId,
    ) -> Result<Vec<kandev_domain::ship::WorktreeUsage>> {
        self.inner.store.get_repository(repository_id).await.map_err(not_found)?;
        let mut usage = vec![];
        for record in self.inner.store.live_worktrees_of_repository(repository_id).await? {
            if record.executor_id.is_some() {
                // On an SSH executor's host: not measured (never a path of this host).
                usage.push(kandev_domain::ship::WorktreeUsage {
                    task_id: record.task_id,
                    path: record.path,
                    branch: record.branch,
                    bytes: None,
                    truncated: false,
                });
                continue;
            }
            let measured = git::disk_usage(Path::new(&record.path)).await;
            if let Err(err) = &measured {
                tracing::debug!(path = %record.path, error = %err, "a worktree could not be measured");
            }
            let (bytes, truncated) = match measured {
                Ok((bytes, truncated)) => (Some(bytes), truncated),
                Err(_) => (None, false),
            };
            usage.push(kandev_domain::ship::WorktreeUsage {
                task_id: record.task_id,
                path: record.path,
                branch: record.branch,
                bytes,
                truncated,
            });
        }
        Ok(usage)
    }

    /// The branches of a repository (`repository.branches`).
    pub async fn repository_branches(&self, repo: &Path) -> Result<Vec<String>> {
        git::branches(repo).await.map_err(ship_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_backs_off_up_to_32_intervals() {
        let waits: Vec<u32> = (1..=7).map(backoff).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 32, 32]);
    }
}
