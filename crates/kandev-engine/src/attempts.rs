//! Starting attempts of a task (issue 48), for `task.attempt.create` and a step's
//! `start_attempts`: the checks, the sessions' rows (numbered after the task's earlier
//! attempts, each planned in a worktree of its own), then each one's first prompt. It reaches
//! the sessions' actors only through `handle`, so an actor can start attempts too.
//!
//! Attempts run on this server's host, for tasks with exactly one repository; anything else
//! is refused before a session is made.

use std::sync::Arc;

use kandev_domain::TaskId;
use kandev_domain::task::Task;
use kandev_domain::transcript::Session;
use kandev_domain::workflow::MAX_ATTEMPTS;

use crate::api::{AttemptRequest, PromptRequest};
use crate::command::Command;
use crate::create::{insert_session, session_profile};
use crate::error::{EngineError, Result, not_found};
use crate::handle::ask;
use crate::inner::Inner;
use crate::sites::{self, Placement};
use crate::workdir::prepare::{Owner, plan_for};

/// Starts one attempt per request, each with its first prompt (the task's by default).
pub(crate) async fn start(
    inner: &Arc<Inner>,
    task_id: &TaskId,
    requests: Vec<AttemptRequest>,
) -> Result<Vec<Session>> {
    if requests.is_empty() || requests.len() > MAX_ATTEMPTS as usize {
        return Err(EngineError::Validation(format!("start 1 to {MAX_ATTEMPTS} attempts at once")));
    }
    if requests.iter().any(|r| r.prompt.as_deref().is_some_and(|p| p.trim().is_empty())) {
        return Err(EngineError::Validation(
            "an attempt's prompt is empty; leave it out to use the task's".into(),
        ));
    }
    let task = inner.store.get_task(task_id).await.map_err(not_found)?;
    check_allowed(inner, &task).await?;
    let made = insert(inner, &task, &requests).await?;
    for (session, request) in made.iter().zip(requests) {
        let content = request.prompt.unwrap_or_else(|| task.prompt());
        let request = PromptRequest::text(content);
        ask(inner, &session.id, |reply| Command::Prompt { request, queued_by: "user", reply })
            .await?;
    }
    let mut sessions = vec![];
    for session in made {
        sessions.push(inner.store.get_session(&session.id).await?);
    }
    Ok(sessions)
}

/// Refuses attempts for a task they cannot run for (no repository or several, a repository
/// on another host).
async fn check_allowed(inner: &Inner, task: &Task) -> Result<()> {
    let [repository_id] = task.repository_ids.as_slice() else {
        return Err(EngineError::Validation(
            "attempts need a task with exactly one repository".into(),
        ));
    };
    let repository = inner.store.get_repository(repository_id).await.map_err(not_found)?;
    if !matches!(sites::placement(inner, &repository).await?, Placement::Local) {
        return Err(EngineError::Validation(format!(
            "attempts run on this server's host only, and repository {} uses another executor",
            repository.name
        )));
    }
    Ok(())
}

/// The attempts' session rows, numbered after the task's earlier attempts, in one
/// transaction under the task's lock.
async fn insert(inner: &Inner, task: &Task, requests: &[AttemptRequest]) -> Result<Vec<Session>> {
    let mut profiles = vec![];
    for request in requests {
        let id = request.profile_id.clone().or(task.agent_profile_id.clone());
        profiles.push(session_profile(inner, id).await?);
    }
    let _worktrees = inner.task_locks.lock(&task.id).await;
    let sessions = inner.store.list_sessions(&task.id).await?;
    let first = sessions.iter().filter_map(|s| s.attempt).max().unwrap_or(0) + 1;
    let mut made = vec![];
    let mut tx = inner.store.begin_write().await?;
    for ((number, profile), request) in (first..).zip(&profiles).zip(requests) {
        let plan = plan_for(inner, task, Owner::Attempt { number, session: None }).await?;
        let session = insert_session(&mut tx, task, profile.as_ref(), &plan, Some(number)).await?;
        if let Some(user_id) = &request.started_by {
            tx.set_session_started_by(&session.id, user_id).await?;
        }
        made.push(session);
    }
    tx.commit().await?;
    Ok(made)
}
