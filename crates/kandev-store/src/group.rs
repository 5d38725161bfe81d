//! A group of streamed writes (the engine's group commit, issue 15) in as few round trips to
//! the database as each engine allows. sqlx runs each SQLite connection on its own thread, so
//! every statement is a hand-off to that thread and back; under CPU contention each hand-off
//! is where a chunk waits. On SQLite the group's writes (its new messages, chunks, events and
//! the fold of the messages that stopped streaming) are therefore **one** multi-statement
//! string — sqlx runs its statements one after another in one hand-off, binding their `?`
//! from one argument list in order — and the two reads before them (the appended messages' heads and the
//! next seq) are one more. On PostgreSQL, which does not take several statements with
//! arguments in one string, they run one by one.

use std::collections::HashMap;

use kandev_domain::transcript::{Message, MessageKind};
use kandev_domain::{MessageId, SessionId};

use crate::messages::json_rows;
use crate::sql::Dialect;
use crate::{Appended, Event, NewChunk, NewMessage, Result, StoreError, Topic, WriteTx};

/// What one group writes ([`WriteTx::write_stream_group`]).
pub struct StreamGroup<'a> {
    /// New messages, each with its id and `seq` (the seq of the event announcing it).
    pub messages: &'a [(MessageId, i64, NewMessage)],
    pub chunks: &'a [NewChunk<'a>],
    /// The group's events, numbered from `first_seq` in order.
    pub first_seq: i64,
    pub events: Vec<(Topic, String, serde_json::Value)>,
    /// Every message of these sessions but `keep` (the ones still streaming) is folded.
    pub fold_sessions: &'a [&'a SessionId],
    pub keep: &'a [&'a MessageId],
}

/// The writes of a group on SQLite, in one string (see the module's note). Its placeholders
/// are plain `?`, bound in the order they appear across the statements ([`WriteTx::write_stream_group`]):
/// sqlx binds a statement's `?` from the arguments the statements before it left, while a
/// numbered `?N` in a later statement whose lower numbers it does not use would leave those
/// gaps to consume arguments (and past the last one, stop binding: a fold given `NULL`
/// folds nothing). A statement with an empty array writes nothing.
const SQLITE_GROUP: &str = "\
INSERT INTO messages (id, session_id, turn_id, seq, kind, content, metadata, client_message_id, \
created_at, updated_at) SELECT value->>0, value->>1, value->>2, CAST(value->>3 AS BIGINT), \
value->>4, value->>5, value->>6, value->>7, ?, ? FROM json_each(?); \
INSERT INTO message_chunks (message_id, session_id, delta, end_len) \
SELECT value->>0, value->>1, value->>2, CAST(value->>3 AS BIGINT) FROM json_each(?); \
INSERT INTO events (seq, topic, action, payload, created_at) \
SELECT CAST(value->>0 AS BIGINT), value->>1, value->>2, value->>3, ? FROM json_each(?); \
UPDATE messages SET content = content || (SELECT string_agg(c.delta, '' ORDER BY c.id) \
FROM message_chunks c WHERE c.message_id = messages.id) \
WHERE id IN (SELECT DISTINCT message_id FROM message_chunks \
WHERE session_id IN (SELECT value->>0 FROM json_each(?)) \
AND message_id NOT IN (SELECT value->>0 FROM json_each(?))); \
DELETE FROM message_chunks WHERE session_id IN (SELECT value->>0 FROM json_each(?)) \
AND message_id NOT IN (SELECT value->>0 FROM json_each(?))";

/// The heads of the messages of the one argument and, in a row of its own with no id, the highest seq
/// (SQLite: one hand-off for both reads).
const SQLITE_HEADS_AND_SEQ: &str = "\
SELECT NULL, NULL, seq, NULL, NULL FROM sqlite_sequence WHERE name = 'events'; \
SELECT m.id, m.session_id, m.seq, m.kind, COALESCE((SELECT c.end_len FROM message_chunks c \
WHERE c.message_id = m.id ORDER BY c.id DESC LIMIT 1), octet_length(m.content)) \
FROM messages m WHERE m.id IN (SELECT value->>0 FROM json_each(?))";

impl WriteTx {
    /// The messages `rows` become once [`WriteTx::write_stream_group`] stores them (built
    /// here, not read back).
    pub fn messages_as_stored(&self, rows: &[(MessageId, i64, NewMessage)]) -> Vec<Message> {
        let now = self.now();
        rows.iter()
            .map(|(id, seq, m)| Message {
                id: id.clone(),
                session_id: m.session_id.clone(),
                turn_id: m.turn_id.clone(),
                seq: *seq,
                kind: m.kind,
                content: m.content.clone(),
                metadata: m.metadata.clone(),
                client_message_id: m.client_message_id.clone(),
                created_at: now,
                updated_at: now,
            })
            .collect()
    }

    /// [`WriteTx::stream_heads`] of `ids` and [`WriteTx::next_seq`], in one round trip on
    /// SQLite.
    pub async fn stream_heads_and_next_seq(
        &mut self,
        ids: &[&MessageId],
    ) -> Result<(HashMap<MessageId, Appended>, i64)> {
        if self.conn().dialect() == Dialect::Postgres {
            let heads = self.stream_heads(ids).await?;
            return Ok((heads, self.next_seq().await?));
        }
        let list: Vec<(&str,)> = ids.iter().map(|id| (id.as_str(),)).collect();
        type HeadRow = (Option<String>, Option<String>, i64, Option<String>, Option<i64>);
        let rows: Vec<HeadRow> = crate::sql::query_as(SQLITE_HEADS_AND_SEQ)
            .bind(json_rows(&list, Dialect::Sqlite)?)
            .fetch_all(self.conn())
            .await?;
        let mut highest = 0;
        let mut heads = HashMap::with_capacity(ids.len());
        for (id, session_id, seq, kind, length) in rows {
            let (Some(id), Some(session_id), Some(kind)) = (id, session_id, kind) else {
                highest = seq;
                continue;
            };
            let parsed = MessageKind::parse(&kind)
                .ok_or_else(|| StoreError::Corrupt(format!("message {id} kind {kind:?}")))?;
            let id = MessageId::new(id);
            let head = Appended {
                id: id.clone(),
                session_id: SessionId::new(session_id),
                seq,
                kind: parsed,
                length: length.and_then(|l| u64::try_from(l).ok()).unwrap_or_default(),
            };
            heads.insert(id, head);
        }
        Ok((heads, highest + 1))
    }

    /// Writes a group: its new messages, chunks and events (published on commit), then folds
    /// the finished messages of its sessions. One round trip on SQLite.
    pub async fn write_stream_group(&mut self, group: StreamGroup<'_>) -> Result<()> {
        let StreamGroup { messages, chunks, first_seq, events, fold_sessions, keep } = group;
        if self.conn().dialect() == Dialect::Postgres {
            self.insert_messages(messages).await?;
            self.insert_chunks(chunks).await?;
            self.emit_numbered(first_seq, events).await?;
            return self.fold_sessions_except(fold_sessions, keep).await;
        }
        let now = self.now();
        let dialect = Dialect::Sqlite;
        let message_rows: Vec<_> = messages
            .iter()
            .map(|(id, seq, m)| {
                (
                    id.as_str(),
                    m.session_id.as_str(),
                    m.turn_id.as_ref().map(|t| t.as_str()),
                    seq,
                    m.kind.as_str(),
                    &m.content,
                    &m.metadata,
                    &m.client_message_id,
                )
            })
            .collect();
        let chunk_rows: Vec<_> = chunks
            .iter()
            .map(|c| (c.message_id.as_str(), c.session_id.as_str(), c.delta, c.end_len))
            .collect();
        let event_rows: Vec<(i64, &str, &str, String)> = events
            .iter()
            .zip(first_seq..)
            .map(|((topic, action, payload), seq)| {
                (seq, topic.as_str(), action.as_str(), payload.to_string())
            })
            .collect();
        let sessions: Vec<(&str,)> = fold_sessions.iter().map(|s| (s.as_str(),)).collect();
        let keep: Vec<(&str,)> = keep.iter().map(|id| (id.as_str(),)).collect();
        let (sessions, keep) = (json_rows(&sessions, dialect)?, json_rows(&keep, dialect)?);
        // In the order of the placeholders (see `SQLITE_GROUP`).
        crate::sql::query(SQLITE_GROUP)
            .bind(now.millis())
            .bind(now.millis())
            .bind(json_rows(&message_rows, dialect)?)
            .bind(json_rows(&chunk_rows, dialect)?)
            .bind(now.millis())
            .bind(json_rows(&event_rows, dialect)?)
            .bind(sessions.as_str())
            .bind(keep.as_str())
            .bind(sessions.as_str())
            .bind(keep.as_str())
            .execute(self.conn())
            .await?;
        for ((topic, action, payload), seq) in events.into_iter().zip(first_seq..) {
            self.publish_on_commit(Event { seq, topic, action, payload, created_at: now });
        }
        Ok(())
    }
}
