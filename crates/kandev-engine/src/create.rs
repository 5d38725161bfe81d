//! Creating a session for a task: its row in `CREATED`, with the profile it runs and the
//! working directory planned for it (the task's worktrees, made when it starts, or its plain
//! folder). Not actor code: the session has no actor until someone talks to it.

use kandev_api_types::{Notification, SessionDto, WorkspaceEvent};
use kandev_domain::agent::{AgentKind, AgentProfile};
use kandev_domain::task::Task;
use kandev_domain::transcript::Session;
use kandev_domain::{AgentProfileId, TaskId};

use crate::error::{EngineError, Result, not_found};
use crate::inner::Inner;
use crate::publish;
use crate::workdir::prepare::{Plan, plan};
use kandev_store::WriteTx;

/// Creates a session row for a task, announced on the session's and the workspace's topics.
/// Without a profile it runs the task's profile, else the built-in Mock profile.
pub(crate) async fn create_session(
    inner: &Inner,
    task_id: &TaskId,
    profile_id: Option<AgentProfileId>,
    started_by: Option<&str>,
    terminal_ui: bool,
) -> Result<Session> {
    let task = inner.store.get_task(task_id).await.map_err(not_found)?;
    let profile = session_profile(inner, profile_id.or(task.agent_profile_id.clone())).await?;
    let kind = profile.as_ref().map_or(AgentKind::Mock, |p| p.kind);
    if terminal_ui && kind.terminal_ui().is_none() {
        return Err(EngineError::Validation(format!(
            "Kandev does not know the terminal UI of {} agents; pick a profile of another kind",
            kind.as_str()
        )));
    }
    if let Some(profile) = &profile {
        // A secret set nowhere refuses the launch before a session exists (issue 50): the
        // start would fail on it, leaving a session that never ran.
        let names = crate::secrets::profile_references(profile);
        let repository = task.repository_ids.first().map(|r| r.as_str());
        crate::secrets::resolve(inner, &names, task.workspace_id.as_str(), repository).await?;
        // So is a version of the agent that is not installed (issue 51; a terminal UI runs
        // the program on the PATH).
        if !terminal_ui {
            crate::installs::check_pinned_for(inner, profile, &task.repository_ids).await?;
        }
    }
    // Held while the directory is planned, so launches of one task agree on it.
    let _worktrees = inner.task_locks.lock(&task.id).await;
    let plan = plan(inner, &task).await?;
    let mut tx = inner.store.begin_write().await?;
    let session = insert_session(&mut tx, &task, profile.as_ref(), &plan, None).await?;
    if let Some(user_id) = started_by {
        tx.set_session_started_by(&session.id, user_id).await?;
    }
    if terminal_ui {
        tx.set_session_terminal_ui(&session.id, kind).await?;
    }
    let session = tx.get_session(&session.id).await?;
    tx.commit().await?;
    Ok(session)
}

/// The profile a new session runs: `profile_id`, else the built-in Mock profile.
pub(crate) async fn session_profile(
    inner: &Inner,
    profile_id: Option<AgentProfileId>,
) -> Result<Option<AgentProfile>> {
    Ok(match &profile_id {
        Some(id) => Some(
            inner
                .store
                .get_profile(id)
                .await
                .map_err(|e| EngineError::Validation(e.to_string()))?,
        ),
        None => inner.store.list_profiles().await?.into_iter().find(|p| p.kind == AgentKind::Mock),
    })
}

/// Writes a session row planned in `plan` in the caller's transaction (numbered `attempt`
/// among the task's attempts, if one), with its announcements and the task's card.
pub(crate) async fn insert_session(
    tx: &mut WriteTx,
    task: &Task,
    profile: Option<&AgentProfile>,
    plan: &Plan,
    attempt: Option<u32>,
) -> Result<Session> {
    let cwd = plan.cwd().display().to_string();
    let session = tx
        .insert_session(
            &task.id,
            profile.map(|p| &p.id),
            &cwd,
            profile.and_then(|p| p.mode.as_deref()),
            profile.and_then(|p| p.model.as_deref()),
        )
        .await?;
    let session = match attempt {
        Some(number) => tx.set_session_attempt(&session.id, Some(number)).await?,
        None => session,
    };
    publish::session_event(tx, &session, "session.created").await?;
    let event = WorkspaceEvent::SessionCreated { session: SessionDto::from(&session) };
    publish::notify(tx, Notification::workspace(&task.workspace_id, event)).await?;
    publish::sync_task(tx, &session).await?;
    Ok(session)
}
