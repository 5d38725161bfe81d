//! Notifications the engine publishes, built from API types, written in the same transaction
//! as the change they describe.

use kandev_api_types::{MessageDto, QueuedPromptDto, SessionDto, TaskDto};
use kandev_domain::session::SessionState;
use kandev_domain::task::{Task, TaskState};
use kandev_domain::transcript::{Message, QueuedPrompt, Session};
use kandev_store::{TaskPatch, WriteTx};
use serde_json::json;

use crate::Result;

pub fn session_topic(session: &Session) -> String {
    format!("session:{}", session.id)
}

pub fn workspace_topic(task: &Task) -> String {
    format!("workspace:{}", task.workspace_id)
}

pub async fn session_event(tx: &mut WriteTx, session: &Session, action: &str) -> Result<()> {
    tx.emit(session_topic(session), action, json!({ "session": SessionDto::from(session) }))
        .await?;
    Ok(())
}

/// Announces a new message; its `seq` is this event's seq.
pub async fn message_added(tx: &mut WriteTx, session: &Session, message: &Message) -> Result<()> {
    let seq = tx
        .emit(
            session_topic(session),
            "session.message.added",
            json!({ "message": MessageDto::from(message) }),
        )
        .await?;
    debug_assert_eq!(seq, message.seq, "a message's seq is the seq of its announcement");
    Ok(())
}

/// Announces a streamed chunk appended to a message.
pub async fn message_appended(
    tx: &mut WriteTx,
    session: &Session,
    message: &Message,
    delta: &str,
) -> Result<()> {
    let payload = json!({
        "message_id": message.id.to_string(),
        "seq": message.seq,
        "kind": message.kind.as_str(),
        "delta": delta,
        "length": message.content.len(),
    });
    tx.emit(session_topic(session), "session.message.updated", payload).await?;
    Ok(())
}

/// Announces a message whose metadata (or whole content) changed.
pub async fn message_changed(tx: &mut WriteTx, session: &Session, message: &Message) -> Result<()> {
    let payload = json!({ "message_id": message.id.to_string(), "seq": message.seq, "message": MessageDto::from(message) });
    tx.emit(session_topic(session), "session.message.updated", payload).await?;
    Ok(())
}

pub async fn queue_changed(
    tx: &mut WriteTx,
    session: &Session,
    queue: &[QueuedPrompt],
) -> Result<()> {
    let list: Vec<QueuedPromptDto> = queue.iter().map(QueuedPromptDto::from).collect();
    tx.emit(
        session_topic(session),
        "session.queue.changed",
        json!({ "session_id": session.id.to_string(), "queue": list }),
    )
    .await?;
    Ok(())
}

/// The task card's state for a primary session's state.
fn task_state(state: SessionState) -> TaskState {
    match state {
        SessionState::Created => TaskState::Todo,
        SessionState::Starting | SessionState::Running => TaskState::InProgress,
        SessionState::WaitingForInput => TaskState::WaitingForInput,
        SessionState::Failed | SessionState::Cancelled => TaskState::Failed,
        SessionState::Completed => TaskState::Completed,
    }
}

/// Keeps the task card in step with its primary session.
pub async fn sync_task(tx: &mut WriteTx, session: &Session) -> Result<()> {
    let task = tx.get_task(&session.task_id).await?;
    if task.primary_session_id.as_ref() != Some(&session.id) {
        return Ok(());
    }
    let state = task_state(session.state);
    if task.state == state {
        return Ok(());
    }
    let task =
        tx.update_task(&task.id, &TaskPatch { state: Some(state), ..TaskPatch::default() }).await?;
    tx.emit(workspace_topic(&task), "task.updated", json!({ "task": TaskDto::from(&task) }))
        .await?;
    Ok(())
}
