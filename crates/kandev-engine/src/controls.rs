//! Session controls besides the actor's own commands (issue 18): renaming a session (a
//! person's label no runtime write touches, so it is written here, not by the actor), making
//! it its task's primary session, retrying the last user message (through the actor's
//! `prompt`, so the turn gate decides).

use kandev_api_types::{Notification, SessionDto, SessionEvent, TaskDto, WorkspaceEvent};
use kandev_domain::task::Task;
use kandev_domain::transcript::{Message, Session};
use kandev_domain::{SessionId, validate};

use crate::api::{PromptOutcome, PromptRequest};
use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::publish::notify;

impl Engine {
    /// Names a session (an empty name clears it) and announces `session.updated`.
    pub async fn rename_session(&self, id: &SessionId, name: Option<String>) -> Result<Session> {
        let name = match name.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(name) => Some(
                validate::name("name", name).map_err(|e| EngineError::Validation(e.to_string()))?,
            ),
        };
        let mut tx = self.inner.store.begin_write().await?;
        let session = tx.rename_session(id, name.as_deref()).await?;
        let dto = SessionDto::from(&session);
        let event = SessionEvent::Updated { session: dto.clone() };
        notify(&mut tx, Notification::session(&session.id, event)).await?;
        let task = tx.get_task(&session.task_id).await?;
        let event = WorkspaceEvent::SessionRenamed { session: dto };
        notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
        tx.commit().await?;
        Ok(session)
    }

    /// Makes `id` its task's primary session (the one the workflow's steps and the card
    /// follow); announces `task.updated` with the card's state taken from that session.
    pub async fn set_primary(&self, id: &SessionId) -> Result<Task> {
        let session = self.inner.store.get_session(id).await.map_err(crate::error::not_found)?;
        self.refuse_moved(&session).await?;
        let mut tx = self.inner.store.begin_write().await?;
        let session = tx.get_session(id).await?;
        tx.set_primary_session(&session.task_id, &session.id).await?;
        crate::publish::sync_task(&mut tx, &session).await?;
        let task = tx.get_task(&session.task_id).await?;
        let event = WorkspaceEvent::TaskUpdated { task: TaskDto::from(&task) };
        notify(&mut tx, Notification::workspace(&task.workspace_id, event)).await?;
        tx.commit().await?;
        Ok(task)
    }

    /// Refuses a session whose working directory is no longer the task's (an attempt that
    /// was not picked, issue 48): as the primary session it could not start again.
    async fn refuse_moved(&self, session: &Session) -> Result<()> {
        if session.attempt.is_some() {
            return Ok(());
        }
        let task = self.inner.store.get_task(&session.task_id).await?;
        if task.repository_ids.is_empty() {
            return Ok(());
        }
        // A task whose directory cannot be planned now is refused by its next start instead.
        let Ok(plan) = crate::workdir::prepare::plan(&self.inner, &task).await else {
            return Ok(());
        };
        if plan.cwd() == std::path::Path::new(&session.cwd) {
            return Ok(());
        }
        Err(EngineError::Conflict(format!(
            "this session worked in {}, which is no longer the task's working directory (an \
             attempt that was not picked); start a new session for the task instead",
            session.cwd
        )))
    }

    /// Sends the session's last user message again, with its attachments, as a new turn.
    /// Refused (`Busy`) while a turn runs or the agent starts, so a second retry during the
    /// first one's turn never sends twice; never queued.
    pub async fn retry(&self, id: &SessionId) -> Result<Message> {
        let Some(last) = self.inner.store.last_user_message(id).await? else {
            self.inner.store.get_session(id).await?;
            return Err(EngineError::Validation(
                "this session has no message to retry; send one first".into(),
            ));
        };
        let request = PromptRequest {
            content: last.content.clone(),
            client_message_id: None,
            queue: false,
            attachments: last.meta.attachments().to_vec(),
        };
        match self.prompt(id, request).await {
            Ok(PromptOutcome::Sent(message)) => Ok(message),
            Ok(PromptOutcome::Queued(_) | PromptOutcome::Duplicate(_)) => {
                Err(EngineError::Busy("the agent is busy; retry when its turn has ended".into()))
            }
            Err(EngineError::Busy(_)) => Err(EngineError::Busy(
                "the agent is busy with a turn; retry when it has ended, or cancel it first".into(),
            )),
            Err(other) => Err(other),
        }
    }
}
