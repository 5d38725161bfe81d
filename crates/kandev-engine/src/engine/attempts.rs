//! Attempts (issue 48): several sessions of one task racing on it, each in a worktree and on
//! a branch of its own made from the task's base, compared side by side; picking one makes
//! its worktree and branch the task's and ends the others.
//!
//! Invariants:
//! - An attempt's worktree is recorded with its session (`worktrees.session_id`); everything
//!   that works on "the task's worktree" (changes, files, terminals, shipping) ignores it
//!   until the attempt is picked.
//! - Attempts run on this server's host, for tasks with exactly one repository; anything
//!   else is refused before a session is made.
//! - A pick stops every other session of the task, removes the other attempts' worktrees and
//!   the task's previous worktree (a dirty one is kept on disk and listed; branches are
//!   always kept), then hands the picked worktree to the task, all under the task's lock.

use std::path::Path;

use kandev_api_types::{Notification, TaskDto, WorkspaceEvent};
use kandev_domain::files::{FileChange, WorktreeRemoval};
use kandev_domain::task::Task;
use kandev_domain::transcript::Session;
use kandev_domain::{SessionId, TaskId};
use kandev_runtime::git;
use kandev_store::WorktreeRecord;

use crate::api::AttemptRequest;
use crate::command::Command;
use crate::engine::Engine;
use crate::error::{EngineError, Result, not_found};
use crate::workdir::shared::{exists, git_error};

/// An attempt as the side-by-side view shows it.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub session: Session,
    /// Its worktree, once its first start made it.
    pub worktree: Option<WorktreeRecord>,
    /// What it changed against the base, once it has a worktree.
    pub changes: Vec<FileChange>,
}

/// What a pick did: the task afterwards, and the worktrees it removed and kept.
#[derive(Debug, Clone)]
pub struct AttemptPick {
    pub task: Task,
    pub branch: String,
    pub removal: WorktreeRemoval,
}

impl Engine {
    /// `task.attempt.create`: starts one session per request, each in a worktree of its own.
    pub async fn create_attempts(
        &self,
        task_id: &TaskId,
        requests: Vec<AttemptRequest>,
    ) -> Result<Vec<Session>> {
        let (inner, task_id) = (self.inner.clone(), task_id.clone());
        self.run_detached(async move { crate::attempts::start(&inner, &task_id, requests).await })
            .await?
    }

    /// `task.attempt.list`: the task's attempts (only `only`'s, when given), oldest first,
    /// with what each changed.
    pub async fn attempts(
        &self,
        task_id: &TaskId,
        only: Option<&SessionId>,
    ) -> Result<Vec<Attempt>> {
        self.inner.store.get_task(task_id).await.map_err(not_found)?;
        let worktrees = self.inner.store.live_worktrees(task_id).await?;
        let mut attempts = vec![];
        for session in self.inner.store.list_sessions(task_id).await? {
            if session.attempt.is_none() || only.is_some_and(|id| id != &session.id) {
                continue;
            }
            let worktree =
                worktrees.iter().find(|w| w.session_id.as_ref() == Some(&session.id)).cloned();
            let changes = match &worktree {
                Some(w) if exists(&w.path).await => {
                    git::changes(Path::new(&w.path), &w.base_commit).await.map_err(git_error)?
                }
                _ => vec![],
            };
            attempts.push(Attempt { session, worktree, changes });
        }
        Ok(attempts)
    }

    /// `task.attempt.pick`: keeps attempt `session_id` (its worktree and branch become the
    /// task's, it becomes the primary session) and ends the others.
    pub async fn pick_attempt(
        &self,
        task_id: &TaskId,
        session_id: &SessionId,
    ) -> Result<AttemptPick> {
        let picked = self.inner.store.get_session(session_id).await.map_err(not_found)?;
        if &picked.task_id != task_id || picked.attempt.is_none() {
            return Err(EngineError::Validation(
                "that session is not an attempt of this task; pick one of its attempts".into(),
            ));
        }
        let live = self.inner.store.live_worktrees(task_id).await?;
        let Some(chosen) = live.iter().find(|w| w.session_id.as_ref() == Some(session_id)).cloned()
        else {
            return Err(EngineError::Conflict(
                "that attempt has no worktree yet; wait until its agent has started".into(),
            ));
        };
        let engine = self.clone();
        let (task_id, session_id) = (task_id.clone(), session_id.clone());
        self.run_detached(async move { engine.pick(&task_id, &session_id, chosen).await }).await?
    }

    async fn pick(
        &self,
        task_id: &TaskId,
        picked: &SessionId,
        chosen: WorktreeRecord,
    ) -> Result<AttemptPick> {
        let sessions = self.inner.store.list_sessions(task_id).await?;
        // Every other session works in a worktree that goes away (an attempt's, or the
        // task's previous one): stopped first, as an archive does.
        for session in sessions.iter().filter(|s| &s.id != picked) {
            match self.stop(&session.id).await {
                Ok(()) | Err(EngineError::NotFound(_)) => {}
                Err(err) => return Err(err),
            }
        }
        let mut removal = WorktreeRemoval::default();
        {
            let _guard = self.inner.task_locks.lock(task_id).await;
            let live = self.inner.store.live_worktrees(task_id).await?;
            for record in live.into_iter().filter(|w| w.id != chosen.id) {
                let kept_before = removal.kept.len();
                self.remove_recorded(record.clone(), false, &mut removal).await?;
                // The task's own worktree cannot stay the task's beside the picked one: a
                // dirty one is kept on disk (listed), and no longer recorded as live.
                if removal.kept.len() > kept_before && record.is_task_worktree() {
                    let mut tx = self.inner.store.begin_write().await?;
                    tx.mark_worktree_removed(&record.id).await?;
                    tx.commit().await?;
                }
            }
            let mut tx = self.inner.store.begin_write().await?;
            tx.adopt_attempt_worktree(&chosen.id).await?;
            tx.set_primary_session(task_id, picked).await?;
            let task = tx.get_task(task_id).await?;
            let event = WorkspaceEvent::TaskUpdated { task: TaskDto::from(&task) };
            crate::publish::notify(&mut tx, Notification::workspace(&task.workspace_id, event))
                .await?;
            tx.commit().await?;
        }
        // The race is over: every attempt works in the task's worktree from now on (the
        // picked one is in it; the others' next start says the directory moved). Each keeps
        // its number as its name, so its tab still says which attempt it was.
        for session in sessions.iter().filter(|s| s.attempt.is_some()) {
            if let (None, Some(number)) = (&session.name, session.attempt) {
                let name = Some(format!("Attempt {number}"));
                if let Err(err) = self.rename_session(&session.id, name).await {
                    tracing::warn!(session = %session.id, error = %err, "attempt not named");
                }
            }
            let done = self.ask(&session.id, |reply| Command::SetAttempt { attempt: None, reply });
            if let Err(err) = done.await {
                tracing::warn!(session = %session.id, error = %err, "still numbered as an attempt");
            }
        }
        crate::workdir::status::refresh_status(&self.inner, task_id).await;
        let task = self.inner.store.get_task(task_id).await?;
        Ok(AttemptPick { task, branch: chosen.branch, removal })
    }
}
