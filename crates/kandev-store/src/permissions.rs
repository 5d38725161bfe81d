//! Permission requests and the audit of their answers. A request is a transcript message of
//! kind `permission_request` (its metadata holds `request_id` and `status`); each answer
//! is also kept in `permission_answers`, who answered and how.

use kandev_domain::transcript::Message;
use kandev_domain::{SessionId, TurnId};

use crate::messages::{MESSAGE_COLUMNS, MessageRow};
use crate::{Result, Store, WriteTx};

/// The permission requests of a session (`?1`), through their partial index
/// (`messages_permission_requests`, migration 0019: the `kind` test must stay this literal
/// for SQLite to use it); callers add their own conditions.
pub(crate) const PERMISSION_REQUESTS: &str =
    "FROM messages WHERE session_id = ?1 AND kind = 'permission_request'";

impl Store {
    /// The permission request message with `request_id` in a session, if any.
    pub async fn find_permission_message(
        &self,
        session_id: &SessionId,
        request_id: &str,
    ) -> Result<Option<Message>> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} {PERMISSION_REQUESTS} AND json_extract(metadata, '$.request_id') = ?2"
        );
        crate::sql::query_as::<MessageRow>(&sql)
            .bind(session_id.as_str())
            .bind(request_id)
            .fetch_optional(&self.read)
            .await?
            .map(Message::try_from)
            .transpose()
    }
}

/// The pending permission requests of a session, oldest first.
fn pending_permissions_sql() -> String {
    format!(
        "SELECT {MESSAGE_COLUMNS} {PERMISSION_REQUESTS} AND json_extract(metadata, '$.status') = 'pending' ORDER BY seq"
    )
}

impl WriteTx {
    /// Pending permission requests of a session (status `pending` in their metadata).
    pub async fn pending_permission_messages(
        &mut self,
        session_id: &SessionId,
    ) -> Result<Vec<Message>> {
        let sql = pending_permissions_sql();
        crate::sql::query_as::<MessageRow>(&sql)
            .bind(session_id.as_str())
            .fetch_all(self.conn())
            .await?
            .into_iter()
            .map(Message::try_from)
            .collect()
    }

    /// Records who answered a permission request and how; with the turn of the request and
    /// the JSON-RPC answer the agent gets (`reply`, `{"id": …, "result": …}`), which a
    /// server that re-adopts the agent sends again if the runner never took it (issue 38
    /// item 12).
    pub async fn record_permission_answer(
        &mut self,
        session_id: &SessionId,
        request_id: &str,
        option_id: Option<&str>,
        outcome: &str,
        answered_by: &str,
        reply: Option<(&TurnId, &str)>,
    ) -> Result<()> {
        crate::sql::query(
            "INSERT INTO permission_answers \
             (session_id, request_id, option_id, outcome, answered_by, at, turn_id, reply) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(session_id.as_str())
        .bind(request_id)
        .bind(option_id)
        .bind(outcome)
        .bind(answered_by)
        .bind(self.now().millis())
        .bind(reply.map(|(turn, _)| turn.as_str()))
        .bind(reply.map(|(_, reply)| reply))
        .execute(self.conn())
        .await?;
        Ok(())
    }
}

impl Store {
    /// The answers given to the permission requests of `turn_id` with their JSON-RPC reply,
    /// oldest first: `(request id, reply)`.
    pub async fn permission_replies(
        &self,
        session_id: &SessionId,
        turn_id: &TurnId,
    ) -> Result<Vec<(String, String)>> {
        let rows = crate::sql::query_as(
            "SELECT request_id, reply FROM permission_answers \
             WHERE session_id = ? AND turn_id = ? AND reply IS NOT NULL ORDER BY id",
        )
        .bind(session_id.as_str())
        .bind(turn_id.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::{PERMISSION_REQUESTS, pending_permissions_sql};
    use crate::Store;

    /// The query plan of `sql` (one line per step).
    async fn plan(store: &Store, sql: &str) -> String {
        let rows: Vec<(i64, i64, i64, String)> =
            crate::sql::query_as(&format!("EXPLAIN QUERY PLAN {sql}"))
                .bind("s")
                .bind("r")
                .fetch_all(&store.read)
                .await
                .unwrap();
        rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("\n")
    }

    #[tokio::test]
    async fn i15_a4_permission_lookups_use_their_index_not_the_sessions_messages() {
        let store = Store::in_memory().await.unwrap();
        let by_id = format!(
            "SELECT id {PERMISSION_REQUESTS} AND json_extract(metadata, '$.request_id') = ?2"
        );
        // `WriteTx::permissions_waiting`'s query.
        let waiting = format!(
            "SELECT COUNT(*) {PERMISSION_REQUESTS} AND json_extract(metadata, '$.status') = 'pending'"
        );
        for sql in [pending_permissions_sql(), by_id, waiting] {
            let plan = plan(&store, &sql).await;
            assert!(plan.contains("messages_permission_requests"), "{sql}\n{plan}");
        }
    }
}
