//! Context resets that were accepted and have not settled yet (lifecycle rule 45): stored
//! before any agent is contacted, so a restart in between finishes them.

use kandev_domain::{SessionId, StepId, Timestamp};
use sqlx::FromRow;

use crate::{Result, Store, WriteTx};

/// A context reset that was accepted and has not settled yet (lifecycle rule 45).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetIntent {
    pub session_id: SessionId,
    /// The step whose `on_enter` asked for it; `None` for the user's reset button.
    pub step_id: Option<StepId>,
    /// The session's epoch when it was accepted.
    pub epoch: i64,
    /// Why the task entered the step (`created`, `manual`, `on_turn_start`,
    /// `on_turn_complete`), or `user`.
    pub cause: String,
    pub created_at: Timestamp,
}

#[derive(FromRow)]
struct ResetRow {
    session_id: String,
    step_id: Option<String>,
    epoch: i64,
    cause: String,
    created_at: i64,
}

impl From<ResetRow> for ResetIntent {
    fn from(r: ResetRow) -> Self {
        ResetIntent {
            session_id: SessionId::new(r.session_id),
            step_id: r.step_id.map(StepId::new),
            epoch: r.epoch,
            cause: r.cause,
            created_at: Timestamp(r.created_at),
        }
    }
}

impl Store {
    /// Context resets that were accepted and never settled (a restart came in between).
    pub async fn reset_intents(&self) -> Result<Vec<ResetIntent>> {
        let rows = crate::sql::query_as::<ResetRow>(
            "SELECT session_id, step_id, epoch, cause, created_at FROM session_resets \
             ORDER BY created_at, session_id",
        )
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(ResetIntent::from).collect())
    }
}

impl WriteTx {
    /// Stores an accepted context reset (one per session); its `created_at` is now.
    pub async fn record_reset(
        &mut self,
        session_id: &SessionId,
        step_id: Option<&StepId>,
        epoch: i64,
        cause: &str,
    ) -> Result<()> {
        crate::sql::query(
            "INSERT INTO session_resets (session_id, step_id, epoch, cause, created_at) \
             VALUES (?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET step_id = excluded.step_id, \
             epoch = excluded.epoch, cause = excluded.cause, created_at = excluded.created_at",
        )
        .bind(session_id.as_str())
        .bind(step_id.map(|s| s.as_str()))
        .bind(epoch)
        .bind(cause)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Forgets the session's reset once it settled; returns whether one was stored.
    pub async fn clear_reset(&mut self, session_id: &SessionId) -> Result<bool> {
        let done = crate::sql::query("DELETE FROM session_resets WHERE session_id = ?")
            .bind(session_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
