//! Session actions: launch, list, get, stop, delete, cancel, modes and options, messages,
//! the prompt queue and permission answers. Every mutation goes to the session's actor.

use kandev_api_types::requests::{
    AutoRunSet, ById, BySession, ByTask, MessageAdd, MessageList, PermissionRespond, QueueAdd,
    QueueRemove, QueueReorder, QueueUpdate, ResumeMode, SessionLaunch, SessionRebind,
    SessionRename, SessionResume, SessionSetConfigOption, SessionSetMode,
};
use kandev_api_types::responses::{
    Deleted, MessageAdded, MessageOne, Messages, Queue, SessionOne, Sessions, TaskOne, Turns,
};
use kandev_api_types::{AttachmentDto, MessageDto, QueuedPromptDto, SessionDto, TaskDto, TurnDto};
use kandev_domain::account::Actor;
use kandev_domain::attachment::AttachmentRef;
use kandev_domain::transcript::QueuedPrompt;
use kandev_domain::{AgentProfileId, QueuedPromptId, SessionId, TaskId, validate};
use kandev_engine::{PermissionAnswer, PromptOutcome, PromptRequest, QueueChange};

use crate::accounts::Identity;
use crate::{ApiError, AppState};

/// Largest page of `message.list`.
const MAX_MESSAGES: u32 = 1000;

/// `session.launch`: a user who launches a session is its starter (its agent's MCP calls act
/// with their rights at most, issue 49).
pub async fn launch(
    s: &AppState,
    who: &Identity,
    p: SessionLaunch,
) -> Result<SessionOne, ApiError> {
    let prompt = p
        .prompt
        .map(|t| validate::text("prompt", &t))
        .transpose()?
        .filter(|t| !t.trim().is_empty());
    let session = s
        .engine()
        .launch_by(
            &TaskId::new(p.task_id),
            p.agent_profile_id.map(AgentProfileId::new),
            prompt,
            match &who.actor {
                Actor::User { id, .. } => Some(id.clone()),
                _ => None,
            },
            p.terminal_ui.unwrap_or(false),
        )
        .await?;
    Ok(SessionOne { session: SessionDto::from(&session) })
}

pub async fn list(s: &AppState, p: ByTask) -> Result<Sessions, ApiError> {
    let task_id = TaskId::new(p.task_id);
    s.store().get_task(&task_id).await?;
    let sessions = s.store().list_sessions(&task_id).await?.iter().map(SessionDto::from).collect();
    Ok(Sessions { sessions, next_cursor: None })
}

pub async fn get(s: &AppState, p: ById) -> Result<SessionOne, ApiError> {
    session_one(s, &SessionId::new(p.id)).await
}

async fn session_one(s: &AppState, id: &SessionId) -> Result<SessionOne, ApiError> {
    let session = s.store().get_session(id).await?;
    Ok(SessionOne { session: SessionDto::from(&session) })
}

pub async fn stop(s: &AppState, p: ById) -> Result<SessionOne, ApiError> {
    let id = SessionId::new(p.id);
    s.engine().stop(&id).await?;
    session_one(s, &id).await
}

pub async fn resume(s: &AppState, p: SessionResume) -> Result<SessionOne, ApiError> {
    let fresh = p.mode.unwrap_or(ResumeMode::Load) == ResumeMode::Fresh;
    let id = SessionId::new(p.id);
    s.engine().resume(&id, fresh).await?;
    session_one(s, &id).await
}

pub async fn reset_context(s: &AppState, p: ById) -> Result<SessionOne, ApiError> {
    let id = SessionId::new(p.id);
    s.engine().reset_context(&id).await?;
    session_one(s, &id).await
}

pub async fn delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete(&SessionId::new(&p.id)).await?;
    Ok(Deleted { deleted: true, id: p.id })
}

pub async fn cancel(s: &AppState, p: BySession) -> Result<SessionOne, ApiError> {
    let id = SessionId::new(p.session_id);
    s.engine().cancel(&id).await?;
    session_one(s, &id).await
}

pub async fn set_mode(s: &AppState, p: SessionSetMode) -> Result<SessionOne, ApiError> {
    let session = s.engine().set_mode(&SessionId::new(p.id), p.mode_id).await?;
    Ok(SessionOne { session: SessionDto::from(&session) })
}

pub async fn set_config_option(
    s: &AppState,
    p: SessionSetConfigOption,
) -> Result<SessionOne, ApiError> {
    let session = s.engine().set_config_option(&SessionId::new(p.id), p.config_id, p.value).await?;
    Ok(SessionOne { session: SessionDto::from(&session) })
}

pub async fn rename(s: &AppState, p: SessionRename) -> Result<SessionOne, ApiError> {
    let session = s.engine().rename_session(&SessionId::new(p.id), p.name).await?;
    Ok(SessionOne { session: SessionDto::from(&session) })
}

/// `session.rebind` (issue 52): the same worktree and transcript, another agent, started
/// with a summary of the conversation.
pub async fn rebind(s: &AppState, p: SessionRebind) -> Result<SessionOne, ApiError> {
    let profile = kandev_domain::AgentProfileId::new(p.profile_id);
    let session = s.engine().rebind(&SessionId::new(p.session_id), &profile).await?;
    Ok(SessionOne { session: SessionDto::from(&session) })
}

pub async fn set_primary(s: &AppState, p: ById) -> Result<TaskOne, ApiError> {
    let task = s.engine().set_primary(&SessionId::new(p.id)).await?;
    Ok(TaskOne { task: TaskDto::from(&task) })
}

pub async fn retry(s: &AppState, p: ById) -> Result<MessageOne, ApiError> {
    let message = s.engine().retry(&SessionId::new(p.id)).await?;
    Ok(MessageOne { message: MessageDto::from(&message) })
}

fn attachments_of(list: Option<Vec<AttachmentDto>>) -> Vec<AttachmentRef> {
    list.unwrap_or_default().into_iter().map(AttachmentRef::from).collect()
}

pub async fn message_add(s: &AppState, p: MessageAdd) -> Result<MessageAdded, ApiError> {
    let content = validate::text("content", &p.content)?;
    let request = PromptRequest {
        content,
        client_message_id: p.client_message_id,
        queue: p.queue,
        attachments: attachments_of(p.attachments),
    };
    Ok(match s.engine().prompt(&SessionId::new(p.session_id), request).await? {
        PromptOutcome::Sent(message) => MessageAdded::Sent { message: MessageDto::from(&message) },
        PromptOutcome::Duplicate(message) => {
            MessageAdded::Duplicate { message: MessageDto::from(&message) }
        }
        PromptOutcome::Queued(entry) => {
            MessageAdded::Queued { queued: QueuedPromptDto::from(&entry) }
        }
    })
}

pub async fn message_list(s: &AppState, p: MessageList) -> Result<Messages, ApiError> {
    let limit = p.limit.unwrap_or(200);
    if limit == 0 || limit > MAX_MESSAGES {
        return Err(ApiError::validation(format!("limit must be between 1 and {MAX_MESSAGES}")));
    }
    let id = SessionId::new(p.session_id);
    s.store().get_session(&id).await?;
    let messages =
        s.store().list_messages(&id, p.after_seq, p.before_seq, i64::from(limit)).await?;
    Ok(Messages { messages: messages.iter().map(MessageDto::from).collect() })
}

pub async fn turn_list(s: &AppState, p: BySession) -> Result<Turns, ApiError> {
    let id = SessionId::new(p.session_id);
    s.store().get_session(&id).await?;
    let turns = s.store().list_turns(&id, 1000).await?;
    Ok(Turns { turns: turns.iter().map(TurnDto::from).collect() })
}

pub async fn permission_respond(
    s: &AppState,
    who: &Identity,
    p: PermissionRespond,
) -> Result<MessageOne, ApiError> {
    let answer = match (p.option_id, p.cancelled) {
        (Some(option), false) => PermissionAnswer::Option(option),
        (None, true) => PermissionAnswer::Cancelled,
        _ => {
            return Err(ApiError::validation(
                "choose one of the agent's options, or dismiss the request",
            ));
        }
    };
    let session = SessionId::new(p.session_id);
    let message = s.engine().respond_permission(&session, p.request_id, answer, &who.by()).await?;
    Ok(MessageOne { message: MessageDto::from(&message) })
}

fn queue_of(queue: &[QueuedPrompt]) -> Queue {
    Queue { queue: queue.iter().map(QueuedPromptDto::from).collect() }
}

pub async fn queue_list(s: &AppState, p: BySession) -> Result<Queue, ApiError> {
    let id = SessionId::new(p.session_id);
    s.store().get_session(&id).await?;
    Ok(queue_of(&s.store().list_queue(&id).await?))
}

async fn change(s: &AppState, session_id: String, change: QueueChange) -> Result<Queue, ApiError> {
    Ok(queue_of(&s.engine().change_queue(&SessionId::new(session_id), change).await?))
}

pub async fn queue_add(s: &AppState, p: QueueAdd) -> Result<Queue, ApiError> {
    let content = validate::text("content", &p.content)?;
    let add = QueueChange::Add {
        content,
        client_message_id: p.client_message_id,
        attachments: attachments_of(p.attachments),
    };
    change(s, p.session_id, add).await
}

pub async fn queue_update(s: &AppState, p: QueueUpdate) -> Result<Queue, ApiError> {
    let content = validate::text("content", &p.content)?;
    change(s, p.session_id, QueueChange::Update { id: QueuedPromptId::new(p.id), content }).await
}

pub async fn queue_remove(s: &AppState, p: QueueRemove) -> Result<Queue, ApiError> {
    change(s, p.session_id, QueueChange::Remove { id: QueuedPromptId::new(p.id) }).await
}

pub async fn queue_reorder(s: &AppState, p: QueueReorder) -> Result<Queue, ApiError> {
    let ids = p.ids.into_iter().map(QueuedPromptId::new).collect();
    change(s, p.session_id, QueueChange::Reorder { ids }).await
}

pub async fn queue_drain(s: &AppState, p: BySession) -> Result<Queue, ApiError> {
    change(s, p.session_id, QueueChange::Drain).await
}

pub async fn auto_run_set(s: &AppState, p: AutoRunSet) -> Result<Queue, ApiError> {
    change(s, p.session_id, QueueChange::SetAutoRun(p.enabled)).await
}
