//! A session's prompt queue: prompts waiting for the current turn to end, in order.

use kandev_domain::attachment::AttachmentRef;
use kandev_domain::transcript::QueuedPrompt;
use kandev_domain::{QueuedPromptId, SessionId, Timestamp};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct QueuedRow {
    id: String,
    session_id: String,
    position: i64,
    content: String,
    client_message_id: Option<String>,
    queued_by: String,
    created_at: i64,
    attachments: String,
}

/// The `attachments` column: `[{id, name, mime, size}]`.
/// The `attachments` column: a JSON list of `{id, name, mime, size}`.
fn attachments_json(attachments: &[AttachmentRef]) -> String {
    // A list of strings and numbers: serializing cannot fail.
    serde_json::to_string(attachments).unwrap_or_else(|_| "[]".to_owned())
}

impl TryFrom<QueuedRow> for QueuedPrompt {
    type Error = StoreError;

    fn try_from(r: QueuedRow) -> Result<Self> {
        let attachments = crate::error::read_json("queued prompt", &r.id, &r.attachments)?;
        Ok(QueuedPrompt {
            id: QueuedPromptId::new(r.id),
            session_id: SessionId::new(r.session_id),
            position: r.position,
            content: r.content,
            client_message_id: r.client_message_id,
            queued_by: r.queued_by,
            created_at: Timestamp(r.created_at),
            attachments,
        })
    }
}

/// A session's queue in order.
async fn list(mut db: Db<'_>, session_id: &SessionId) -> Result<Vec<QueuedPrompt>> {
    let rows = crate::sql::query_as::<QueuedRow>(
        "SELECT * FROM queued_prompts WHERE session_id = ? ORDER BY position, created_at",
    )
    .bind(session_id.as_str())
    .fetch_all(&mut db)
    .await?;
    rows.into_iter().map(QueuedPrompt::try_from).collect()
}

impl Store {
    pub async fn list_queue(&self, session_id: &SessionId) -> Result<Vec<QueuedPrompt>> {
        list(self.db(), session_id).await
    }

    /// The ids of the attachments queued prompts name (issue 38: the sweep keeps them).
    pub async fn queued_attachment_ids(&self) -> Result<std::collections::HashSet<String>> {
        let lists: Vec<String> = crate::sql::query_scalar(
            "SELECT attachments FROM queued_prompts WHERE attachments <> '[]'",
        )
        .fetch_all(&self.read)
        .await?;
        let mut ids = std::collections::HashSet::new();
        for text in lists {
            crate::messages::attachment_ids(&text, None, &mut ids)?;
        }
        Ok(ids)
    }
}

impl WriteTx {
    pub async fn list_queue(&mut self, session_id: &SessionId) -> Result<Vec<QueuedPrompt>> {
        list(self.db(), session_id).await
    }

    pub async fn enqueue(
        &mut self,
        session_id: &SessionId,
        content: &str,
        attachments: &[AttachmentRef],
        client_message_id: Option<&str>,
        queued_by: &str,
    ) -> Result<QueuedPrompt> {
        let position: i64 = crate::sql::query_scalar(
            "SELECT COALESCE(MAX(position), -1) + 1 FROM queued_prompts WHERE session_id = ?",
        )
        .bind(session_id.as_str())
        .fetch_one(self.conn())
        .await?;
        let id = self.new_id();
        crate::sql::query(
            "INSERT INTO queued_prompts (id, session_id, position, content, client_message_id, queued_by, created_at, attachments) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(session_id.as_str())
        .bind(position)
        .bind(content)
        .bind(client_message_id)
        .bind(queued_by)
        .bind(self.now().millis())
        .bind(attachments_json(attachments))
        .execute(self.conn())
        .await?;
        let row = crate::sql::query_as::<QueuedRow>("SELECT * FROM queued_prompts WHERE id = ?")
            .bind(&id)
            .fetch_one(self.conn())
            .await?;
        row.try_into()
    }

    /// Removes a queue entry; returns false if it was not there.
    pub async fn dequeue(&mut self, session_id: &SessionId, id: &QueuedPromptId) -> Result<bool> {
        let done = crate::sql::query("DELETE FROM queued_prompts WHERE id = ? AND session_id = ?")
            .bind(id.as_str())
            .bind(session_id.as_str())
            .execute(self.conn())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn update_queued(
        &mut self,
        session_id: &SessionId,
        id: &QueuedPromptId,
        content: &str,
    ) -> Result<bool> {
        let done = crate::sql::query(
            "UPDATE queued_prompts SET content = ? WHERE id = ? AND session_id = ?",
        )
        .bind(content)
        .bind(id.as_str())
        .bind(session_id.as_str())
        .execute(self.conn())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Sets the queue order; `order` must hold exactly the session's entries.
    pub async fn reorder_queue(
        &mut self,
        session_id: &SessionId,
        order: &[QueuedPromptId],
    ) -> Result<()> {
        let mut current: Vec<String> =
            self.list_queue(session_id).await?.into_iter().map(|q| q.id.into_string()).collect();
        let mut wanted: Vec<String> = order.iter().map(|q| q.to_string()).collect();
        current.sort();
        wanted.sort();
        if current != wanted {
            return Err(StoreError::Conflict(
                "ids must list every queued prompt exactly once".into(),
            ));
        }
        for (position, id) in order.iter().enumerate() {
            crate::sql::query("UPDATE queued_prompts SET position = ? WHERE id = ?")
                .bind(position as i64)
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }
}
