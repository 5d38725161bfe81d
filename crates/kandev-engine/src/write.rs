//! The one way a session row changes, and the one way a transcript message is added: each
//! write is checked, compare-and-set, and announced in the transaction that makes it.
//! Session actors, the start of a session (its working directory) and startup
//! reconciliation all write through here.

use kandev_api_types::{Notification, SessionEvent};
use kandev_domain::message_meta::MessageMeta;
use kandev_domain::notify::NotificationKind;
use kandev_domain::session::SessionState;
use kandev_domain::transcript::{Message, Session};
use kandev_domain::{MessageId, SessionId, TurnId};
use kandev_store::{NewMessage, SessionUpdate, WriteTx};

use crate::error::{EngineError, Result};
use crate::publish;

/// Writes `update` to the session `session` was read as, and returns the row as written:
/// - a change of state is checked against the transition table (docs/lifecycle.md rule 1;
///   `Conflict` otherwise, and nothing is written);
/// - the write is a compare-and-set on `session.epoch` (`StaleEpoch` when the session moved
///   on to another execution: a report of an older epoch changes nothing, rule 22);
/// - it is announced in the same transaction: `session.state_changed` (and the task card
///   kept in step) or `session.updated`, plus `session.error` when `last_error` is set (and
///   the task card kept in step then too: an error may need its developer).
pub(crate) async fn write_session(
    tx: &mut WriteTx,
    session: &Session,
    update: &SessionUpdate,
) -> Result<Session> {
    let changed_state = update.state.filter(|to| *to != session.state);
    if let Some(to) = changed_state {
        session.state.transition(to).map_err(|e| EngineError::Conflict(e.to_string()))?;
    }
    let written = tx.update_session(&session.id, session.epoch, update).await?;
    let action = if changed_state.is_some() { "session.state_changed" } else { "session.updated" };
    let seq = publish::session_event(tx, &written, action).await?;
    // A session that failed, or whose agent crashed (it waits without one: the next message
    // starts it again), is a notification, once per failure (issue 45 item 9: a crash was
    // shown as needing you but notified nobody). A failed turn is its `turn_completed`.
    if failed(&written) && !failed(session) {
        failed_attention(tx, &written, seq).await?;
    }
    if update.last_error.is_some() {
        let last_error = written.last_error.as_ref().map(kandev_api_types::LastErrorDto::from);
        let event = SessionEvent::Error { session_id: written.id.to_string(), last_error };
        publish::notify(tx, Notification::session(&written.id, event)).await?;
    }
    if changed_state.is_some() || update.last_error.is_some() {
        publish::sync_task(tx, &written).await?; // its state, and whether it needs its developer
    }
    Ok(written)
}

/// Whether the session failed, or waits after its agent crashed.
fn failed(session: &Session) -> bool {
    let crashed = session.last_error.as_ref().is_some_and(|e| e.code == "agent_exited");
    match session.state {
        SessionState::Failed => true,
        SessionState::WaitingForInput => crashed,
        _ => false,
    }
}

/// A session that failed needs its developer: a notification record (browser, webhooks,
/// ntfy) with the seq of its `session.state_changed`.
async fn failed_attention(tx: &mut WriteTx, session: &Session, seq: i64) -> Result<()> {
    let task = tx.get_task(&session.task_id).await?;
    let reason = session.last_error.as_ref();
    let why = reason
        .map_or_else(|| "the session failed".to_owned(), |e| publish::first_line(&e.message, 160));
    let title = format!("{}: the session failed: {why}", task.title);
    let data = serde_json::json!({ "code": reason.map(|e| e.code.clone()) });
    publish::attention(tx, NotificationKind::SessionFailed, session, seq, title, data).await
}

/// Inserts a transcript message and announces it.
pub(crate) async fn add_message(
    tx: &mut WriteTx,
    session: &Session,
    turn_id: Option<&TurnId>,
    content: &str,
    meta: impl Into<MessageMeta>,
) -> Result<Message> {
    insert_and_announce(tx, None, &session.id, turn_id, content, meta.into()).await
}

/// [`add_message`] with the message's id chosen before (streamed text: `stream.rs`).
pub(crate) async fn add_message_as(
    tx: &mut WriteTx,
    id: &MessageId,
    session_id: &SessionId,
    turn_id: Option<&TurnId>,
    content: &str,
    meta: MessageMeta,
) -> Result<Message> {
    insert_and_announce(tx, Some(id), session_id, turn_id, content, meta).await
}

async fn insert_and_announce(
    tx: &mut WriteTx,
    id: Option<&MessageId>,
    session_id: &SessionId,
    turn_id: Option<&TurnId>,
    content: &str,
    meta: MessageMeta,
) -> Result<Message> {
    let new = NewMessage {
        session_id: session_id.clone(),
        turn_id: turn_id.cloned(),
        content: content.to_owned(),
        meta,
        client_message_id: None,
    };
    let message = match id {
        Some(id) => tx.insert_message_as(id, &new).await?,
        None => tx.insert_message(&new).await?,
    };
    publish::message_added(tx, session_id, &message).await?;
    Ok(message)
}

/// Deletes a session and announces it (the task card too: its primary session may change).
pub(crate) async fn delete_session(
    tx: &mut WriteTx,
    id: &SessionId,
    task: &kandev_domain::task::Task,
) -> Result<()> {
    let session = tx.delete_session(id).await?;
    let (id, task_id) = (session.id.to_string(), session.task_id.to_string());
    let event = SessionEvent::Deleted { id: id.clone(), task_id: task_id.clone() };
    publish::notify(tx, Notification::session(&session.id, event)).await?;
    let event = kandev_api_types::WorkspaceEvent::SessionDeleted { id, task_id };
    publish::notify(tx, Notification::workspace(&task.workspace_id, event)).await?;
    if let Ok(task) = tx.get_task(&task.id).await {
        let event = kandev_api_types::WorkspaceEvent::TaskUpdated {
            task: kandev_api_types::TaskDto::from(&task),
        };
        publish::notify(tx, Notification::workspace(&task.workspace_id, event)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kandev_domain::session::SessionState;
    use kandev_store::{Location, SessionUpdate, Store, StoreError};

    use super::write_session;
    use crate::error::EngineError;

    fn to(state: SessionState) -> SessionUpdate {
        SessionUpdate { state: Some(state), ..SessionUpdate::default() }
    }

    #[tokio::test]
    async fn l01_a_state_change_outside_the_table_or_from_an_old_epoch_writes_nothing() {
        let store = Store::open(Location::Memory).await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        let task = crate::test_support::insert_task(&mut tx).await;
        let created = tx.insert_session(&task.id, None, "/tmp", None, None).await.unwrap();

        // CREATED -> RUNNING is not in the table: refused, nothing written.
        let refused = write_session(&mut tx, &created, &to(SessionState::Running)).await;
        assert!(matches!(refused, Err(EngineError::Conflict(m)) if m.contains("CREATED")));
        assert_eq!(tx.get_session(&created.id).await.unwrap().state, SessionState::Created);

        // CREATED -> STARTING is: written, and the row comes back as written.
        let starting = write_session(&mut tx, &created, &to(SessionState::Starting)).await.unwrap();
        assert_eq!(starting.state, SessionState::Starting);

        // A write from an epoch the session has left changes nothing (rule 22).
        tx.bump_epoch(&created.id, starting.epoch).await.unwrap();
        let stale = write_session(&mut tx, &starting, &to(SessionState::WaitingForInput)).await;
        assert!(matches!(stale, Err(EngineError::Store(StoreError::StaleEpoch { .. }))));
        assert_eq!(tx.get_session(&created.id).await.unwrap().state, SessionState::Starting);
    }
}
