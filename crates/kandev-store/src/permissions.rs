//! Permission requests and the audit of their answers. A request is a transcript message of
//! kind `permission_request` (its metadata holds `request_id` and `status`); each answer
//! is also kept in `permission_answers`, who answered and how.

use kandev_domain::SessionId;
use kandev_domain::transcript::Message;

use crate::messages::{MESSAGE_COLUMNS, MessageRow};
use crate::{Result, Store, WriteTx};

impl Store {
    /// The permission request message with `request_id` in a session, if any.
    pub async fn find_permission_message(
        &self,
        session_id: &SessionId,
        request_id: &str,
    ) -> Result<Option<Message>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND kind = 'permission_request' \
             AND json_extract(metadata, '$.request_id') = ?"
        );
        sqlx::query_as::<_, MessageRow>(&sql)
            .bind(session_id.as_str())
            .bind(request_id)
            .fetch_optional(&self.read)
            .await?
            .map(Message::try_from)
            .transpose()
    }
}

impl WriteTx {
    /// Pending permission requests of a session (status `pending` in their metadata).
    pub async fn pending_permission_messages(
        &mut self,
        session_id: &SessionId,
    ) -> Result<Vec<Message>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND kind = 'permission_request' \
             AND json_extract(metadata, '$.status') = 'pending' ORDER BY seq"
        );
        sqlx::query_as::<_, MessageRow>(&sql)
            .bind(session_id.as_str())
            .fetch_all(self.conn())
            .await?
            .into_iter()
            .map(Message::try_from)
            .collect()
    }

    pub async fn record_permission_answer(
        &mut self,
        session_id: &SessionId,
        request_id: &str,
        option_id: Option<&str>,
        outcome: &str,
        answered_by: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO permission_answers (session_id, request_id, option_id, outcome, answered_by, at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(session_id.as_str())
        .bind(request_id)
        .bind(option_id)
        .bind(outcome)
        .bind(answered_by)
        .bind(self.now().millis())
        .execute(self.conn())
        .await?;
        Ok(())
    }
}
