//! Attempts of a task (issue 48): `task.attempt.create`, `task.attempt.list`,
//! `task.attempt.diff`, `task.attempt.pick`.

use kandev_api_types::requests::{TaskAttempt, TaskAttemptCreate, TaskAttemptList};
use kandev_api_types::responses::{AttemptPicked, CommitDiff, Sessions, TaskAttempts};
use kandev_api_types::{FileChangeDto, SessionDto, TaskAttemptDto, TaskDto};
use kandev_domain::workflow::MAX_ATTEMPTS;
use kandev_domain::{AgentProfileId, SessionId, TaskId};
use kandev_engine::AttemptRequest;

use crate::accounts::Identity;
use crate::handlers::files::kept_dtos;
use crate::{ApiError, AppState};

/// `task.attempt.create`: each attempt's agent acts with the caller's rights at most.
pub async fn create(
    s: &AppState,
    who: &Identity,
    p: TaskAttemptCreate,
) -> Result<Sessions, ApiError> {
    if p.attempts.is_empty() || p.attempts.len() > MAX_ATTEMPTS as usize {
        return Err(ApiError::validation(format!("start 1 to {MAX_ATTEMPTS} attempts at once")));
    }
    let requests = p
        .attempts
        .into_iter()
        .map(|a| AttemptRequest {
            profile_id: a.profile_id.filter(|id| !id.trim().is_empty()).map(AgentProfileId::new),
            prompt: a.prompt,
            started_by: crate::roles::starter(who),
        })
        .collect();
    let sessions = s.engine().create_attempts(&TaskId::new(p.task_id), requests).await?;
    Ok(Sessions { sessions: sessions.iter().map(SessionDto::from).collect(), next_cursor: None })
}

pub async fn list(s: &AppState, p: TaskAttemptList) -> Result<TaskAttempts, ApiError> {
    let only = p.session_id.map(SessionId::new);
    let attempts = s.engine().attempts(&TaskId::new(p.task_id), only.as_ref()).await?;
    let attempts = attempts
        .iter()
        .map(|a| TaskAttemptDto {
            session: SessionDto::from(&a.session),
            branch: a.worktree.as_ref().map(|w| w.branch.clone()),
            worktree: a.worktree.as_ref().map(|w| w.path.clone()),
            files: u32::try_from(a.changes.len()).unwrap_or(u32::MAX),
            additions: a.changes.iter().map(|c| c.additions).sum(),
            deletions: a.changes.iter().map(|c| c.deletions).sum(),
        })
        .collect();
    Ok(TaskAttempts { attempts })
}

pub async fn diff(s: &AppState, p: TaskAttempt) -> Result<CommitDiff, ApiError> {
    let session = SessionId::new(p.session_id);
    let attempts = s.engine().attempts(&TaskId::new(p.task_id), Some(&session)).await?;
    let Some(attempt) = attempts.into_iter().next() else {
        return Err(ApiError::not_found("that session is not an attempt of this task"));
    };
    let repository = attempt.worktree.as_ref().and_then(|w| w.repository_id.clone());
    let files = attempt.changes.iter().map(|f| FileChangeDto::of(repository.as_ref(), f)).collect();
    Ok(CommitDiff { files })
}

pub async fn pick(s: &AppState, p: TaskAttempt) -> Result<AttemptPicked, ApiError> {
    let (task, session) = (TaskId::new(p.task_id), SessionId::new(p.session_id));
    let picked = s.engine().pick_attempt(&task, &session).await?;
    Ok(AttemptPicked {
        task: TaskDto::from(&picked.task),
        branch: picked.branch,
        worktrees_removed: picked.removal.removed,
        worktrees_kept: kept_dtos(&picked.removal.kept),
    })
}
