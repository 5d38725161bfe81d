//! A session's turns: opened when a prompt is sent, closed with the agent's stop reason.

use kandev_domain::{SessionId, TurnId};

use crate::{Result, WriteTx};

impl WriteTx {
    pub async fn open_turn(&mut self, session_id: &SessionId, epoch: i64) -> Result<TurnId> {
        let id = self.new_id();
        sqlx::query("INSERT INTO turns (id, session_id, epoch, started_at) VALUES (?, ?, ?, ?)")
            .bind(&id)
            .bind(session_id.as_str())
            .bind(epoch)
            .bind(self.now().millis())
            .execute(self.conn())
            .await?;
        Ok(TurnId::new(id))
    }

    /// Closes a turn and folds its streamed text (`messages.rs`); returns false if it was
    /// already closed.
    pub async fn close_turn(&mut self, turn_id: &TurnId, stop_reason: &str) -> Result<bool> {
        let session: Option<String> = sqlx::query_scalar(
            "UPDATE turns SET completed_at = ?, stop_reason = ? WHERE id = ? AND completed_at IS NULL \
             RETURNING session_id",
        )
        .bind(self.now().millis())
        .bind(stop_reason)
        .bind(turn_id.as_str())
        .fetch_optional(self.conn())
        .await?;
        let Some(session) = session else { return Ok(false) };
        self.fold_messages(&SessionId::new(session)).await?;
        Ok(true)
    }

    /// Closes every open turn of a session (startup reconciliation); returns how many.
    pub async fn close_open_turns(
        &mut self,
        session_id: &SessionId,
        stop_reason: &str,
    ) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE turns SET completed_at = ?, stop_reason = ? WHERE session_id = ? AND completed_at IS NULL",
        )
        .bind(self.now().millis())
        .bind(stop_reason)
        .bind(session_id.as_str())
        .execute(self.conn())
        .await?;
        self.fold_messages(session_id).await?;
        Ok(done.rows_affected())
    }
}
