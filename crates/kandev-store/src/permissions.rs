//! Permission requests and the audit of their answers. A request is a transcript message of
//! kind `permission_request` (its metadata holds `request_id` and `status`); each answer
//! is also kept in `permission_answers`, who answered and how.

use kandev_domain::transcript::Message;
use kandev_domain::{SessionId, TurnId};

use crate::messages::{MESSAGE_SELECT, MessageRow};
use crate::sql::QueryBuilder;
use crate::{Result, Store, WriteTx};

/// Appends the condition that picks the permission requests of `session_id` to a statement
/// over `messages`, through their partial index (`messages_permission_requests`, migration
/// 0019: the `kind` test must stay this literal for SQLite to use it); callers add their
/// own conditions.
fn push_requests_of(q: &mut QueryBuilder, session_id: &SessionId) {
    q.push(" WHERE session_id = ").push_bind(session_id.as_str());
    q.push(" AND kind = 'permission_request'");
}

/// The permission request `request_id` of `session_id`.
fn push_request(q: &mut QueryBuilder, session_id: &SessionId, request_id: &str) {
    q.push(MESSAGE_SELECT);
    push_requests_of(q, session_id);
    q.push(" AND json_extract(metadata, '$.request_id') = ").push_bind(request_id);
}

/// The pending permission requests of `session_id`, oldest first.
fn push_pending(q: &mut QueryBuilder, session_id: &SessionId) {
    q.push(MESSAGE_SELECT);
    push_requests_of(q, session_id);
    q.push(" AND json_extract(metadata, '$.status') = 'pending' ORDER BY seq");
}

/// How many permission requests of `session_id` are pending.
fn push_waiting(q: &mut QueryBuilder, session_id: &SessionId) {
    q.push("SELECT COUNT(*) FROM messages");
    push_requests_of(q, session_id);
    q.push(" AND json_extract(metadata, '$.status') = 'pending'");
}

impl Store {
    /// The permission request message with `request_id` in a session, if any.
    pub async fn find_permission_message(
        &self,
        session_id: &SessionId,
        request_id: &str,
    ) -> Result<Option<Message>> {
        let mut q = QueryBuilder::new(self.dialect(), "");
        push_request(&mut q, session_id, request_id);
        q.build_query_as::<MessageRow>()
            .fetch_optional(&self.read)
            .await?
            .map(Message::try_from)
            .transpose()
    }
}

impl WriteTx {
    /// Whether the agent of `session_id` waits on a permission request (one recorded as
    /// pending in its transcript).
    pub async fn permissions_waiting(&mut self, session_id: &SessionId) -> Result<usize> {
        let mut q = QueryBuilder::new(self.conn().dialect(), "");
        push_waiting(&mut q, session_id);
        let n: i64 = q.build_query_scalar().fetch_one(self.conn()).await?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Pending permission requests of a session (status `pending` in their metadata).
    pub async fn pending_permission_messages(
        &mut self,
        session_id: &SessionId,
    ) -> Result<Vec<Message>> {
        let mut q = QueryBuilder::new(self.conn().dialect(), "");
        push_pending(&mut q, session_id);
        q.build_query_as::<MessageRow>()
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
    use kandev_domain::SessionId;

    use super::{QueryBuilder, push_pending, push_request, push_waiting};
    use crate::Store;
    use crate::sql::Dialect;

    #[tokio::test]
    async fn i15_a4_permission_lookups_use_their_index_not_the_sessions_messages() {
        let store = Store::in_memory().await.unwrap();
        let session = SessionId::new("s");
        let statements: [&dyn Fn(&mut QueryBuilder); 3] =
            [&|q| push_pending(q, &session), &|q| push_request(q, &session, "r"), &|q| {
                push_waiting(q, &session)
            }];
        for push in statements {
            let mut q = QueryBuilder::new(Dialect::Sqlite, "EXPLAIN QUERY PLAN ");
            push(&mut q);
            let sql = q.sql().to_owned();
            let rows: Vec<(i64, i64, i64, String)> =
                q.build_query_as().fetch_all(&store.read).await.unwrap();
            let plan = rows.into_iter().map(|r| r.3).collect::<Vec<_>>().join("\n");
            assert!(plan.contains("messages_permission_requests"), "{sql}\n{plan}");
        }
    }
}
