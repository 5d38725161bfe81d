//! Session controls besides the actor's own commands (issue 18): renaming a session, making
//! it its task's primary session, retrying the last user message; and the expansion of
//! saved prompts (`{{prompt:name}}`) in step prompts.

use kandev_api_types::{Notification, SessionDto, SessionEvent, TaskDto, WorkspaceEvent};
use kandev_domain::saved_prompt;
use kandev_domain::task::Task;
use kandev_domain::transcript::{Message, Session};
use kandev_domain::{SessionId, validate};
use kandev_store::Store;

use crate::api::{PromptOutcome, PromptRequest};
use crate::attachments;
use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::publish::notify;

/// `text` with each `{{prompt:name}}` replaced by the task's workspace's saved prompt of that
/// name, and the names that workspace has no saved prompt for (left as written).
pub(crate) async fn expand_saved_prompts(
    store: &Store,
    task: &Task,
    text: String,
) -> Result<(String, Vec<String>)> {
    let names = saved_prompt::references(&text);
    if names.is_empty() {
        return Ok((text, vec![]));
    }
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        if let Some(prompt) = store.saved_prompt_named(&task.workspace_id, &name).await? {
            found.push((name, prompt.body));
        }
    }
    let lookup = |name: &str| found.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone());
    Ok(saved_prompt::expand(&text, lookup))
}

/// The status note a step start leaves when its prompt names saved prompts that do not exist.
pub(crate) fn missing_prompts_note(missing: &[String]) -> String {
    let list: Vec<String> = missing.iter().map(|n| format!("{{{{prompt:{n}}}}}")).collect();
    format!(
        "the step prompt names no saved prompt for {}: sent as written; create it in Settings > Prompts",
        list.join(", ")
    )
}

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
        let event = SessionEvent::Updated { session: SessionDto::from(&session) };
        notify(&mut tx, Notification::session(&session.id, event)).await?;
        tx.commit().await?;
        Ok(session)
    }

    /// Makes `id` its task's primary session (the one the workflow's steps and the card
    /// follow); announces `task.updated` with the card's state taken from that session.
    pub async fn set_primary(&self, id: &SessionId) -> Result<Task> {
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
            attachments: attachments::of_metadata(&last.metadata),
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
