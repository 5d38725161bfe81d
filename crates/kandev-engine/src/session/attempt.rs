//! A session's place among its task's attempts (issue 48), changed through its actor so the
//! actor's copy of the session, which the next start plans its worktrees from, never lags.

use kandev_api_types::{Notification, SessionDto, WorkspaceEvent};

use crate::error::Result;
use crate::publish;
use crate::session::state::SessionActor;

impl SessionActor {
    /// Numbers the session among its task's attempts (`None`: it works in the task's
    /// worktrees from now on), announced as a change of the session.
    pub(super) async fn set_attempt(&mut self, attempt: Option<u32>) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let session = tx.set_session_attempt(&self.session.id, attempt).await?;
        publish::session_event(&mut tx, &session, "session.updated").await?;
        let event = WorkspaceEvent::SessionAttemptChanged { session: SessionDto::from(&session) };
        publish::notify(&mut tx, Notification::workspace(&self.task.workspace_id, event)).await?;
        self.session.attempt = session.attempt;
        self.session.updated_at = session.updated_at;
        self.finish(tx).await?;
        Ok(())
    }
}
