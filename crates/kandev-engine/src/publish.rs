//! Notifications the engine publishes, built as the typed notifications of
//! `kandev_api_types::notifications`, written in the same transaction as the change they
//! describe.

use kandev_api_types::{
    MessageDto, MessageUpdate, Notification, NotificationParts, NotificationRecordDto,
    NotificationsEvent, QueuedPromptDto, SessionDto, SessionEvent, TaskDto, WorkspaceEvent,
};
use kandev_domain::SessionId;
use kandev_domain::needs_you::{Waiting, needs_you};
use kandev_domain::notify::NotificationKind;
use kandev_domain::session::SessionState;
use kandev_domain::ship::PrState;
use kandev_domain::task::TaskState;
use kandev_domain::transcript::{Message, QueuedPrompt, Session, TuiScreen};
use kandev_store::{Appended, NewNotification, TaskPatch, WriteTx};

use crate::Result;

/// Writes `notification` in `tx`; it goes out after the commit. Returns its `seq`.
pub async fn notify(tx: &mut WriteTx, notification: Notification) -> Result<i64> {
    let NotificationParts { topic, action, payload } = notification.into_parts();
    Ok(tx.emit(topic, &action, payload).await?)
}

/// Records an event that needs a person (issue 18): a notification record with `seq`, the
/// event that announced it, its deliveries to the channels that take its kind, and
/// `notification.created` on the `notifications` topic, all in `tx`.
pub async fn attention(
    tx: &mut WriteTx,
    kind: NotificationKind,
    session: &Session,
    seq: i64,
    title: String,
    data: serde_json::Value,
) -> Result<()> {
    let new = NewNotification {
        kind,
        seq,
        task_id: session.task_id.clone(),
        session_id: session.id.clone(),
        title,
        data: data.to_string(),
    };
    let record = tx.insert_notification(&new).await?;
    let event = NotificationsEvent::Created { notification: NotificationRecordDto::from(&record) };
    notify(tx, Notification::Notifications(event)).await?;
    Ok(())
}

/// Announces a change of the whole session object: `action` is `session.created`,
/// `session.updated`, `session.state_changed`, `session.mode_changed` or
/// `session.config_changed`. Returns the event's seq.
pub async fn session_event(tx: &mut WriteTx, session: &Session, action: &str) -> Result<i64> {
    let dto = SessionDto::from(session);
    let event = SessionEvent::session_change(action, dto.clone()).unwrap_or_else(|| {
        debug_assert!(false, "{action} is not a change of the session object");
        tracing::error!(action, "not a change of the session object; sent as session.updated");
        SessionEvent::Updated { session: dto }
    });
    notify(tx, Notification::session(&session.id, event)).await
}

/// Announces a new message; its `seq` is this event's seq.
pub async fn message_added(
    tx: &mut WriteTx,
    session_id: &SessionId,
    message: &Message,
) -> Result<()> {
    let event = SessionEvent::MessageAdded { message: MessageDto::from(message) };
    let seq = notify(tx, Notification::session(session_id, event)).await?;
    debug_assert_eq!(seq, message.seq, "a message's seq is the seq of its announcement");
    Ok(())
}

/// Announces a streamed chunk (several coalesced ones) appended to a message.
pub async fn message_appended(
    tx: &mut WriteTx,
    session_id: &SessionId,
    appended: &Appended,
    delta: &str,
) -> Result<()> {
    let update = MessageUpdate::Chunk {
        message_id: appended.id.to_string(),
        seq: appended.seq,
        kind: appended.kind.into(),
        delta: delta.to_owned(),
        length: appended.length,
    };
    notify(tx, Notification::session(session_id, SessionEvent::MessageUpdated(update))).await?;
    Ok(())
}

/// Announces a message whose metadata (or whole content) changed.
pub async fn message_changed(tx: &mut WriteTx, session: &Session, message: &Message) -> Result<()> {
    let update = MessageUpdate::Whole {
        message_id: message.id.to_string(),
        seq: message.seq,
        message: Box::new(MessageDto::from(message)),
    };
    notify(tx, Notification::session(&session.id, SessionEvent::MessageUpdated(update))).await?;
    Ok(())
}

pub async fn queue_changed(
    tx: &mut WriteTx,
    session: &Session,
    queue: &[QueuedPrompt],
) -> Result<()> {
    let event = SessionEvent::QueueChanged {
        session_id: session.id.to_string(),
        queue: queue.iter().map(QueuedPromptDto::from).collect(),
    };
    notify(tx, Notification::session(&session.id, event)).await?;
    Ok(())
}

/// The task card's state for a primary session's state.
fn task_state(state: SessionState) -> TaskState {
    match state {
        SessionState::Created => TaskState::Todo,
        SessionState::Starting | SessionState::Running => TaskState::InProgress,
        // A stopped terminal UI waits for its developer as much as an idle agent does: they
        // stopped it; it did not fail.
        SessionState::WaitingForInput | SessionState::Cancelled => TaskState::WaitingForInput,
        SessionState::Failed => TaskState::Failed,
        SessionState::Completed => TaskState::Completed,
    }
}

/// Keeps the task card in step with its primary session: its state, and whether it needs
/// its developer (`kandev_domain::needs_you`). Called on a change of the session's state and
/// when a permission request or a question comes or goes.
pub async fn sync_task(tx: &mut WriteTx, session: &Session) -> Result<()> {
    let task = tx.get_task(&session.task_id).await?;
    if task.primary_session_id.as_ref() != Some(&session.id) {
        return Ok(());
    }
    let state = task_state(session.state);
    // Permission requests and questions wait only during a turn (they are answered, cancelled
    // or expired when it ends): they are counted only then.
    // Auto-fix stopped on a pull request that is still open (a merge or close by hand ends it).
    let open = tx.pull_requests(&task.id).await?.iter().any(|p| p.state == PrState::Open);
    let pull_request =
        open && kandev_domain::ship::feedback_stopped(&tx.pr_events(&task.id).await?).is_some();
    let waiting = match session.state {
        SessionState::Running => Waiting {
            // A terminal UI's question on its screen counts as one (issue 52).
            permissions: tx.permissions_waiting(&session.id).await?
                + usize::from(session.tui_screen == Some(TuiScreen::Permission)),
            questions: tx.pending_questions(Some(&session.id)).await?.len(),
            last_error: session.last_error.is_some(),
            pull_request,
        },
        _ => {
            Waiting { last_error: session.last_error.is_some(), pull_request, ..Waiting::default() }
        }
    };
    let needs = needs_you(session.state, waiting);
    if task.state == state && task.needs_you == needs {
        return Ok(());
    }
    let patch = TaskPatch { state: Some(state), needs_you: Some(needs), ..TaskPatch::default() };
    let task = tx.update_task(&task.id, &patch).await?;
    let event = WorkspaceEvent::TaskUpdated { task: TaskDto::from(&task) };
    notify(tx, Notification::workspace(&task.workspace_id, event)).await?;
    Ok(())
}

/// The first line of `text`, cut to `max` characters (with an ellipsis when cut): the titles
/// of notification records.
pub(crate) fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let cut: String = line.chars().take(max).collect();
    format!("{cut}…")
}
