//! A session's turns: opened when a prompt is sent, closed with the agent's stop reason.

use kandev_domain::transcript::TurnRecord;
use kandev_domain::{MessageId, SessionId, Timestamp, TurnId};
use sqlx::FromRow;

use crate::{Result, Store, WriteTx};

#[derive(FromRow)]
struct TurnRow {
    id: String,
    session_id: String,
    epoch: i64,
    started_at: i64,
    completed_at: Option<i64>,
    stop_reason: Option<String>,
    usage: Option<String>,
}

impl From<TurnRow> for TurnRecord {
    fn from(r: TurnRow) -> Self {
        TurnRecord {
            id: TurnId::new(r.id),
            session_id: SessionId::new(r.session_id),
            epoch: r.epoch,
            started_at: Timestamp(r.started_at),
            completed_at: r.completed_at.map(Timestamp),
            stop_reason: r.stop_reason,
            usage: r.usage,
        }
    }
}

/// A turn and the prompt it carried (`None` for a turn whose prompt was not recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnPrompt {
    pub turn_id: TurnId,
    pub message_id: Option<MessageId>,
    pub content: Option<String>,
}

/// Which part of a turn's `usage` a report sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnUsagePart {
    /// `context`: the context window (`usage_update`).
    Context,
    /// `tokens`: the turn's token counts (the prompt's answer).
    Tokens,
}

/// A session's open turn as a server that re-adopts its agent needs it (issue 20, issue 38
/// item 12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTurn {
    pub id: TurnId,
    /// The JSON-RPC id its `session/prompt` goes out with, if recorded.
    pub prompt_id: Option<u64>,
    /// The user's message the prompt carries, if recorded.
    pub prompt_message_id: Option<MessageId>,
    /// Whether the user cancelled it.
    pub cancel_requested: bool,
}

impl Store {
    /// The session's open turn, if any.
    pub async fn open_turn(&self, session_id: &SessionId) -> Result<Option<OpenTurn>> {
        let row: Option<(String, Option<i64>, Option<String>, i64)> = crate::sql::query_as(
            "SELECT id, prompt_id, prompt_message_id, cancel_requested FROM turns \
             WHERE session_id = ? AND completed_at IS NULL ORDER BY started_at DESC LIMIT 1",
        )
        .bind(session_id.as_str())
        .fetch_optional(&self.read)
        .await?;
        Ok(row.map(|(id, prompt, message, cancel)| OpenTurn {
            id: TurnId::new(id),
            prompt_id: prompt.and_then(|p| u64::try_from(p).ok()),
            prompt_message_id: message.map(MessageId::new),
            cancel_requested: cancel != 0,
        }))
    }

    /// Every turn of a session, oldest first, with the text of the prompt it carried (when
    /// recorded): how a revert names the turns it undoes (issue 48).
    pub async fn turn_prompts(&self, session_id: &SessionId) -> Result<Vec<TurnPrompt>> {
        let rows: Vec<(String, Option<String>, Option<String>)> = crate::sql::query_as(
            "SELECT t.id, m.id, m.content FROM turns t \
             LEFT JOIN messages m ON m.id = t.prompt_message_id \
             WHERE t.session_id = ? ORDER BY t.started_at, t.rowid",
        )
        .bind(session_id.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, message, content)| TurnPrompt {
                turn_id: TurnId::new(id),
                message_id: message.map(MessageId::new),
                content,
            })
            .collect())
    }

    /// A session's turns, oldest first (at most `limit`, the newest ones).
    pub async fn list_turns(&self, session_id: &SessionId, limit: i64) -> Result<Vec<TurnRecord>> {
        let mut db = self.db();
        let mut rows = crate::sql::query_as::<TurnRow>(
            "SELECT id, session_id, epoch, started_at, completed_at, stop_reason, usage FROM turns \
             WHERE session_id = ? ORDER BY started_at DESC, rowid DESC LIMIT ?",
        )
        .bind(session_id.as_str())
        .bind(limit)
        .fetch_all(&mut db)
        .await?;
        rows.reverse();
        Ok(rows.into_iter().map(TurnRecord::from).collect())
    }
}

impl WriteTx {
    pub async fn open_turn(&mut self, session_id: &SessionId, epoch: i64) -> Result<TurnId> {
        let id = self.new_id();
        crate::sql::query(
            "INSERT INTO turns (id, session_id, epoch, started_at) VALUES (?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(session_id.as_str())
        .bind(epoch)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(TurnId::new(id))
    }

    /// Records the JSON-RPC id the turn's `session/prompt` goes out with and the message it
    /// carries (issue 20: a server that joins the conversation after a restart awaits its
    /// answer; issue 38 item 12: or sends it, if the runner never took it).
    pub async fn set_turn_prompt(
        &mut self,
        turn_id: &TurnId,
        prompt_id: u64,
        message_id: &MessageId,
    ) -> Result<()> {
        crate::sql::query("UPDATE turns SET prompt_id = ?, prompt_message_id = ? WHERE id = ?")
            .bind(i64::try_from(prompt_id).unwrap_or(i64::MAX))
            .bind(message_id.as_str())
            .bind(turn_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Records that the user cancelled the turn (issue 38 item 12: a server that re-adopts
    /// the agent goes on cancelling it).
    pub async fn request_turn_cancel(&mut self, turn_id: &TurnId) -> Result<()> {
        crate::sql::query("UPDATE turns SET cancel_requested = 1 WHERE id = ?")
            .bind(turn_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Closes a turn and folds its streamed text (`messages.rs`); returns false if it was
    /// already closed.
    pub async fn close_turn(&mut self, turn_id: &TurnId, stop_reason: &str) -> Result<bool> {
        let session: Option<String> = crate::sql::query_scalar(
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

    /// Sets one part of a turn's usage (`value` is JSON text), keeping the other.
    pub async fn set_turn_usage(
        &mut self,
        turn_id: &TurnId,
        part: TurnUsagePart,
        value: &str,
    ) -> Result<()> {
        let path = match part {
            TurnUsagePart::Context => "$.context",
            TurnUsagePart::Tokens => "$.tokens",
        };
        crate::sql::query(
            "UPDATE turns SET usage = json_set(COALESCE(usage, '{}'), ?, json(?)) WHERE id = ?",
        )
        .bind(path)
        .bind(value)
        .bind(turn_id.as_str())
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Closes every open turn of a session (startup reconciliation); returns how many.
    pub async fn close_open_turns(
        &mut self,
        session_id: &SessionId,
        stop_reason: &str,
    ) -> Result<u64> {
        let done = crate::sql::query(
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
