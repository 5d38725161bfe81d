//! Session actions: launch, list, get, stop, delete, cancel, modes and options, messages,
//! the prompt queue and permission answers. Every mutation goes to the session's actor.

use kandev_api_types::requests::{
    AutoRunSet, ById, BySession, ByTask, MessageAdd, MessageList, PermissionRespond, QueueAdd,
    QueueRemove, QueueReorder, QueueUpdate, SessionLaunch, SessionResume, SessionSetConfigOption,
    SessionSetMode,
};
use kandev_api_types::{MessageDto, QueuedPromptDto, SessionDto};
use kandev_domain::transcript::QueuedPrompt;
use kandev_domain::{AgentProfileId, QueuedPromptId, SessionId, TaskId, validate};
use kandev_engine::{PermissionAnswer, PromptOutcome, PromptRequest, QueueChange};
use serde_json::{Value, json};

use crate::{ApiError, AppState};

/// Largest page of `message.list`.
const MAX_MESSAGES: u32 = 1000;

pub async fn launch(s: &AppState, p: SessionLaunch) -> Result<Value, ApiError> {
    let prompt = p
        .prompt
        .map(|t| validate::text("prompt", &t))
        .transpose()?
        .filter(|t| !t.trim().is_empty());
    let session = s
        .engine()
        .launch(&TaskId::new(p.task_id), p.agent_profile_id.map(AgentProfileId::new), prompt)
        .await?;
    Ok(json!({ "session": SessionDto::from(&session) }))
}

pub async fn list(s: &AppState, p: ByTask) -> Result<Value, ApiError> {
    let task_id = TaskId::new(p.task_id);
    s.store().get_task(&task_id).await?;
    let list: Vec<SessionDto> =
        s.store().list_sessions(&task_id).await?.iter().map(SessionDto::from).collect();
    Ok(json!({ "sessions": list, "next_cursor": null }))
}

pub async fn get(s: &AppState, p: ById) -> Result<Value, ApiError> {
    let session = s.store().get_session(&SessionId::new(p.id)).await?;
    Ok(json!({ "session": SessionDto::from(&session) }))
}

async fn session_json(s: &AppState, id: &SessionId) -> Result<Value, ApiError> {
    let session = s.store().get_session(id).await?;
    Ok(json!({ "session": SessionDto::from(&session) }))
}

pub async fn stop(s: &AppState, p: ById) -> Result<Value, ApiError> {
    let id = SessionId::new(p.id);
    s.engine().stop(&id).await?;
    session_json(s, &id).await
}

pub async fn resume(s: &AppState, p: SessionResume) -> Result<Value, ApiError> {
    let fresh = match p.mode.as_deref().unwrap_or("load") {
        "load" => false,
        "fresh" => true,
        other => {
            return Err(ApiError::validation(format!(
                "mode {other:?} is unknown; use load or fresh"
            )));
        }
    };
    let id = SessionId::new(p.id);
    s.engine().resume(&id, fresh).await?;
    session_json(s, &id).await
}

pub async fn reset_context(s: &AppState, p: ById) -> Result<Value, ApiError> {
    let id = SessionId::new(p.id);
    s.engine().reset_context(&id).await?;
    session_json(s, &id).await
}

pub async fn delete(s: &AppState, p: ById) -> Result<Value, ApiError> {
    s.engine().delete(&SessionId::new(&p.id)).await?;
    Ok(json!({ "deleted": true, "id": p.id }))
}

pub async fn cancel(s: &AppState, p: BySession) -> Result<Value, ApiError> {
    let id = SessionId::new(p.session_id);
    s.engine().cancel(&id).await?;
    session_json(s, &id).await
}

pub async fn set_mode(s: &AppState, p: SessionSetMode) -> Result<Value, ApiError> {
    let session = s.engine().set_mode(&SessionId::new(p.id), p.mode_id).await?;
    Ok(json!({ "session": SessionDto::from(&session) }))
}

pub async fn set_config_option(s: &AppState, p: SessionSetConfigOption) -> Result<Value, ApiError> {
    let session = s.engine().set_config_option(&SessionId::new(p.id), p.config_id, p.value).await?;
    Ok(json!({ "session": SessionDto::from(&session) }))
}

pub async fn message_add(s: &AppState, p: MessageAdd) -> Result<Value, ApiError> {
    let content = validate::text("content", &p.content)?;
    let request = PromptRequest { content, client_message_id: p.client_message_id, queue: p.queue };
    Ok(match s.engine().prompt(&SessionId::new(p.session_id), request).await? {
        PromptOutcome::Sent(message) => {
            json!({ "status": "sent", "message": MessageDto::from(&message) })
        }
        PromptOutcome::Duplicate(message) => {
            json!({ "status": "duplicate", "message": MessageDto::from(&message) })
        }
        PromptOutcome::Queued(entry) => {
            json!({ "status": "queued", "queued": QueuedPromptDto::from(&entry) })
        }
    })
}

pub async fn message_list(s: &AppState, p: MessageList) -> Result<Value, ApiError> {
    let limit = p.limit.unwrap_or(200);
    if limit == 0 || limit > MAX_MESSAGES {
        return Err(ApiError::validation(format!("limit must be between 1 and {MAX_MESSAGES}")));
    }
    let id = SessionId::new(p.session_id);
    s.store().get_session(&id).await?;
    let messages =
        s.store().list_messages(&id, p.after_seq, p.before_seq, i64::from(limit)).await?;
    let list: Vec<MessageDto> = messages.iter().map(MessageDto::from).collect();
    Ok(json!({ "messages": list }))
}

pub async fn permission_respond(s: &AppState, p: PermissionRespond) -> Result<Value, ApiError> {
    let answer = match (p.option_id, p.cancelled) {
        (Some(option), false) => PermissionAnswer::Option(option),
        (None, true) => PermissionAnswer::Cancelled,
        _ => return Err(ApiError::validation("give either option_id or cancelled: true")),
    };
    let message =
        s.engine().respond_permission(&SessionId::new(p.session_id), p.request_id, answer).await?;
    Ok(json!({ "message": MessageDto::from(&message) }))
}

fn queue_json(queue: &[QueuedPrompt]) -> Value {
    let list: Vec<QueuedPromptDto> = queue.iter().map(QueuedPromptDto::from).collect();
    json!({ "queue": list })
}

pub async fn queue_list(s: &AppState, p: BySession) -> Result<Value, ApiError> {
    let id = SessionId::new(p.session_id);
    s.store().get_session(&id).await?;
    Ok(queue_json(&s.store().list_queue(&id).await?))
}

async fn change(s: &AppState, session_id: String, change: QueueChange) -> Result<Value, ApiError> {
    Ok(queue_json(&s.engine().change_queue(&SessionId::new(session_id), change).await?))
}

pub async fn queue_add(s: &AppState, p: QueueAdd) -> Result<Value, ApiError> {
    let content = validate::text("content", &p.content)?;
    change(s, p.session_id, QueueChange::Add { content, client_message_id: p.client_message_id })
        .await
}

pub async fn queue_update(s: &AppState, p: QueueUpdate) -> Result<Value, ApiError> {
    let content = validate::text("content", &p.content)?;
    change(s, p.session_id, QueueChange::Update { id: QueuedPromptId::new(p.id), content }).await
}

pub async fn queue_remove(s: &AppState, p: QueueRemove) -> Result<Value, ApiError> {
    change(s, p.session_id, QueueChange::Remove { id: QueuedPromptId::new(p.id) }).await
}

pub async fn queue_reorder(s: &AppState, p: QueueReorder) -> Result<Value, ApiError> {
    let ids = p.ids.into_iter().map(QueuedPromptId::new).collect();
    change(s, p.session_id, QueueChange::Reorder { ids }).await
}

pub async fn queue_drain(s: &AppState, p: BySession) -> Result<Value, ApiError> {
    change(s, p.session_id, QueueChange::Drain).await
}

pub async fn auto_run_set(s: &AppState, p: AutoRunSet) -> Result<Value, ApiError> {
    change(s, p.session_id, QueueChange::SetAutoRun(p.enabled)).await
}
