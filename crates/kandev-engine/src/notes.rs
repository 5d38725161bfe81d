//! Status messages about a task in its primary session's transcript (cleanup scripts, and
//! who moved or shipped it: issue 21's `by`), and the divider a context reset leaves in a
//! session's transcript (written by the actor's reset and by startup reconciliation).

use kandev_domain::TaskId;
use kandev_domain::message_meta::StatusNote;
use kandev_domain::workflow::Step;

use crate::error::Result;
use crate::inner::Inner;
use crate::write::add_message;

/// Adds a status message to the task's primary session, if it has one.
pub(crate) async fn task_status_message(
    inner: &Inner,
    task_id: &TaskId,
    text: &str,
    note: StatusNote,
) -> Result<()> {
    let task = inner.store.get_task(task_id).await?;
    let Some(session_id) = task.primary_session_id else { return Ok(()) };
    let session = inner.store.get_session(&session_id).await?;
    let mut tx = inner.store.begin_write().await?;
    add_message(&mut tx, &session, None, text, note).await?;
    tx.commit().await?;
    Ok(())
}

/// The transcript's divider after a reset.
pub(crate) fn divider(step: Option<&Step>) -> String {
    match step {
        Some(step) => {
            format!("context reset for step {}: the agent starts a fresh conversation", step.name)
        }
        None => "context reset: the agent starts a fresh conversation".to_owned(),
    }
}
