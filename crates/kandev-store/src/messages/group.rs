//! The group commit of streamed text (issue 15): a group of streamed writes (the engine's
//! group commit) in as few round trips to the database as each engine allows. sqlx runs each
//! SQLite connection on its own thread, so every statement is a hand-off to that thread and
//! back; under CPU contention each hand-off is where a chunk waits. On SQLite the group's
//! writes (its new messages, chunks, events and the fold of the messages that stopped
//! streaming) are therefore one multi-statement string (sqlx runs its statements one after
//! another in one hand-off, binding their `?` from one argument list in order), and the two
//! reads before them (the appended messages' heads and the next seq) one more. PostgreSQL
//! does not take several statements with arguments in one string, but one statement may
//! write several tables (data-modifying `WITH`): there the reads are one statement, the
//! inserts one more and the fold a third (each a network round trip; seven before), each
//! taking many rows in one JSON parameter ([`json_rows`]).

use std::collections::HashMap;

use kandev_domain::transcript::{Message, MessageKind};
use kandev_domain::{MessageId, SessionId};

use super::{Appended, FOLD, NewChunk, NewMessage};
use crate::sql::{Dialect, QueryBuilder};
use crate::{Event, Payload, Result, StoreError, Topic, WriteTx};

/// A new message as a row of the JSON arrays the batch inserts read (`value->>0` …).
type MessageJsonRow<'a> =
    (&'a str, &'a str, Option<&'a str>, i64, &'static str, &'a str, String, &'a Option<String>);

fn message_row<'a>(id: &'a MessageId, seq: i64, m: &'a NewMessage) -> MessageJsonRow<'a> {
    (
        id.as_str(),
        m.session_id.as_str(),
        m.turn_id.as_ref().map(|t| t.as_str()),
        seq,
        m.meta.kind().as_str(),
        &m.content,
        m.meta.to_json(),
        &m.client_message_id,
    )
}

/// What one group writes ([`WriteTx::write_stream_group`]).
pub struct StreamGroup<'a> {
    /// New messages, each with its id and `seq` (the seq of the event announcing it).
    pub messages: &'a [(MessageId, i64, NewMessage)],
    pub chunks: &'a [NewChunk<'a>],
    /// The group's events, numbered from `first_seq` in order.
    pub first_seq: i64,
    pub events: Vec<(Topic, String, Payload)>,
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
pub(crate) const SQLITE_GROUP: &str = "\
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

/// The group's inserts on PostgreSQL, in one statement: the new messages, their chunks and
/// the events. A chunk may belong to a message inserted beside it: the foreign key is checked
/// at the statement's end, when both rows are there.
const PG_GROUP_INSERTS: &str = "\
WITH added AS (INSERT INTO messages (id, session_id, turn_id, seq, kind, content, metadata, \
client_message_id, created_at, updated_at) SELECT value->>0, value->>1, value->>2, \
CAST(value->>3 AS BIGINT), value->>4, value->>5, value->>6, value->>7, ?1, ?1 \
FROM json_each(?2) RETURNING 1), \
appended AS (INSERT INTO message_chunks (message_id, session_id, delta, end_len) \
SELECT value->>0, value->>1, value->>2, CAST(value->>3 AS BIGINT) FROM json_each(?3) RETURNING 1) \
INSERT INTO events (seq, topic, action, payload, created_at) \
SELECT CAST(value->>0 AS BIGINT), value->>1, value->>2, value->>3, ?1 FROM json_each(?4)";

/// The fold of a group on PostgreSQL, in one statement: the chunks of the sessions' messages
/// but the ones still streaming are deleted, and what the delete returns is appended to their
/// messages. A separate statement from [`PG_GROUP_INSERTS`], whose chunks it must see.
const PG_GROUP_FOLD: &str = "\
WITH folded AS (DELETE FROM message_chunks WHERE session_id IN (SELECT value->>0 FROM json_each(?1)) \
AND message_id NOT IN (SELECT value->>0 FROM json_each(?2)) RETURNING id, message_id, delta) \
UPDATE messages SET content = content || f.text FROM (SELECT message_id, \
string_agg(delta, '' ORDER BY id) AS text FROM folded GROUP BY message_id) AS f \
WHERE messages.id = f.message_id";

/// The heads of the messages of the one argument and, in a row of its own with no id, the
/// highest seq, in one statement on PostgreSQL.
const PG_HEADS_AND_SEQ: &str = "\
SELECT NULL, NULL, last, NULL, NULL FROM event_seq UNION ALL \
SELECT m.id, m.session_id, m.seq, m.kind, COALESCE((SELECT c.end_len FROM message_chunks c \
WHERE c.message_id = m.id ORDER BY c.id DESC LIMIT 1), octet_length(m.content)) \
FROM messages m WHERE m.id IN (SELECT value->>0 FROM json_each(?))";

/// The heads of the messages of the one argument and, in a row of its own with no id, the highest seq
/// (SQLite: one hand-off for both reads).
pub(crate) const SQLITE_HEADS_AND_SEQ: &str = "\
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
                content: m.content.clone(),
                meta: m.meta.clone(),
                client_message_id: m.client_message_id.clone(),
                created_at: now,
                updated_at: now,
            })
            .collect()
    }

    /// [`WriteTx::stream_heads`] of `ids` and [`WriteTx::next_seq`], in one round trip.
    pub async fn stream_heads_and_next_seq(
        &mut self,
        ids: &[&MessageId],
    ) -> Result<(HashMap<MessageId, Appended>, i64)> {
        let dialect = self.conn().dialect();
        let statement = match dialect {
            Dialect::Sqlite => SQLITE_HEADS_AND_SEQ,
            Dialect::Postgres => PG_HEADS_AND_SEQ,
        };
        let list: Vec<(&str,)> = ids.iter().map(|id| (id.as_str(),)).collect();
        type HeadRow = (Option<String>, Option<String>, i64, Option<String>, Option<i64>);
        let rows: Vec<HeadRow> = crate::sql::query_as(statement)
            .bind(json_rows(&list, dialect)?)
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
    /// the finished messages of its sessions. One round trip on SQLite, two on PostgreSQL
    /// (one when nothing is folded).
    pub async fn write_stream_group(&mut self, group: StreamGroup<'_>) -> Result<()> {
        let StreamGroup { messages, chunks, first_seq, events, fold_sessions, keep } = group;
        let now = self.now();
        let dialect = self.conn().dialect();
        let message_rows: Vec<_> =
            messages.iter().map(|(id, seq, m)| message_row(id, *seq, m)).collect();
        let chunk_rows: Vec<_> = chunks
            .iter()
            .map(|c| (c.message_id.as_str(), c.session_id.as_str(), c.delta, c.end_len))
            .collect();
        let event_rows: Vec<(i64, &str, &str, &str)> = events
            .iter()
            .zip(first_seq..)
            .map(|((topic, action, payload), seq)| {
                (seq, topic.as_str(), action.as_str(), payload.get())
            })
            .collect();
        let sessions: Vec<(&str,)> = fold_sessions.iter().map(|s| (s.as_str(),)).collect();
        let keep: Vec<(&str,)> = keep.iter().map(|id| (id.as_str(),)).collect();
        let (sessions, keep) = (json_rows(&sessions, dialect)?, json_rows(&keep, dialect)?);
        let (message_rows, chunk_rows) =
            (json_rows(&message_rows, dialect)?, json_rows(&chunk_rows, dialect)?);
        let event_rows = json_rows(&event_rows, dialect)?;
        if dialect == Dialect::Postgres {
            crate::sql::query(PG_GROUP_INSERTS)
                .bind(now.millis())
                .bind(message_rows)
                .bind(chunk_rows)
                .bind(event_rows)
                .execute(self.conn())
                .await?;
            if !fold_sessions.is_empty() {
                crate::sql::query(PG_GROUP_FOLD)
                    .bind(sessions)
                    .bind(keep)
                    .execute(self.conn())
                    .await?;
            }
        } else {
            // In the order of the placeholders (see `SQLITE_GROUP`).
            crate::sql::query(SQLITE_GROUP)
                .bind(now.millis())
                .bind(now.millis())
                .bind(message_rows)
                .bind(chunk_rows)
                .bind(now.millis())
                .bind(event_rows)
                .bind(sessions.as_str())
                .bind(keep.as_str())
                .bind(sessions.as_str())
                .bind(keep.as_str())
                .execute(self.conn())
                .await?;
        }
        for ((topic, action, payload), seq) in events.into_iter().zip(first_seq..) {
            self.publish_on_commit(Event { seq, topic, action, payload, created_at: now });
        }
        Ok(())
    }
}

/// `rows` as one JSON array, for the statements that take many rows in one parameter
/// (`json_each`): one statement text whatever the number of rows, so it is prepared once.
///
/// PostgreSQL reads the array as `jsonb`, which refuses the escape of a NUL character
/// (`\u0000`, and its text could not hold one anyway): there each becomes U+FFFD, as NULs in
/// plain arguments do (`sql::pg_args`).
pub(crate) fn json_rows<T: serde::Serialize>(rows: &T, dialect: Dialect) -> Result<String> {
    let json = serde_json::to_string(rows)
        .map_err(|e| StoreError::Corrupt(format!("rows as JSON: {e}")))?;
    Ok(match dialect {
        Dialect::Postgres if json.contains("\\u0000") => without_nul_escapes(&json),
        _ => json,
    })
}

/// `json` with every `\u0000` escape replaced by `\ufffd`; an escaped backslash followed by
/// `u0000` (the text `\u0000` itself) is left alone.
fn without_nul_escapes(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut rest = json;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let escape = &rest[at..];
        if let Some(after) = escape.strip_prefix("\\u0000") {
            out.push_str("\\ufffd");
            rest = after;
        } else {
            // Every escape is a backslash and one more character (`\uXXXX` then goes on as
            // plain hex digits), so a pair is copied whole.
            let pair = escape.char_indices().nth(2).map_or(escape.len(), |(i, _)| i);
            out.push_str(&escape[..pair]);
            rest = &escape[pair..];
        }
    }
    out.push_str(rest);
    out
}

impl WriteTx {
    /// Inserts several messages in one statement (a group commit of streamed text), each
    /// with the id and `seq` given (its `seq` is the seq of the event the caller emits for
    /// it; see [`WriteTx::emit_batch`]). Unlike [`WriteTx::insert_message`] it folds nothing:
    /// the caller folds once for the group ([`WriteTx::fold_sessions_except`]). Returns the
    /// messages as stored, built without reading them back.
    pub async fn insert_messages(
        &mut self,
        rows: &[(MessageId, i64, NewMessage)],
    ) -> Result<Vec<Message>> {
        if rows.is_empty() {
            return Ok(vec![]);
        }
        let now = self.now();
        let json: Vec<_> = rows.iter().map(|(id, seq, m)| message_row(id, *seq, m)).collect();
        crate::sql::query(
            "INSERT INTO messages (id, session_id, turn_id, seq, kind, content, metadata, \
             client_message_id, created_at, updated_at) \
             SELECT value->>0, value->>1, value->>2, CAST(value->>3 AS BIGINT), value->>4, \
             value->>5, value->>6, value->>7, ?2, ?2 FROM json_each(?1)",
        )
        .bind(json_rows(&json, self.conn().dialect())?)
        .bind(now.millis())
        .execute(self.conn())
        .await?;
        Ok(rows
            .iter()
            .map(|(id, seq, m)| Message {
                id: id.clone(),
                session_id: m.session_id.clone(),
                turn_id: m.turn_id.clone(),
                seq: *seq,
                content: m.content.clone(),
                meta: m.meta.clone(),
                client_message_id: m.client_message_id.clone(),
                created_at: now,
                updated_at: now,
            })
            .collect())
    }

    /// What appending to each of `ids` needs to know (its session, seq, kind and length), in
    /// one query; a message that does not exist is missing from the answer.
    pub async fn stream_heads(
        &mut self,
        ids: &[&MessageId],
    ) -> Result<HashMap<MessageId, Appended>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let list: Vec<(&str,)> = ids.iter().map(|id| (id.as_str(),)).collect();
        let rows: Vec<(String, String, i64, String, i64)> = crate::sql::query_as(
            "SELECT m.id, m.session_id, m.seq, m.kind, COALESCE((SELECT c.end_len \
             FROM message_chunks c WHERE c.message_id = m.id ORDER BY c.id DESC LIMIT 1), \
             octet_length(m.content)) FROM messages m \
             WHERE m.id IN (SELECT value->>0 FROM json_each(?))",
        )
        .bind(json_rows(&list, self.conn().dialect())?)
        .fetch_all(self.conn())
        .await?;
        rows.into_iter()
            .map(|(id, session_id, seq, kind, length)| {
                let kind = MessageKind::parse(&kind)
                    .ok_or_else(|| StoreError::Corrupt(format!("message {id} kind {kind:?}")))?;
                let id = MessageId::new(id);
                let head = Appended {
                    id: id.clone(),
                    session_id: SessionId::new(session_id),
                    seq,
                    kind,
                    length: u64::try_from(length).unwrap_or_default(),
                };
                Ok((id, head))
            })
            .collect()
    }

    /// Stores streamed chunks in one statement, in order (see [`NewChunk`]).
    pub async fn insert_chunks(&mut self, chunks: &[NewChunk<'_>]) -> Result<()> {
        if chunks.is_empty() {
            return Ok(());
        }
        let json: Vec<_> = chunks
            .iter()
            .map(|c| (c.message_id.as_str(), c.session_id.as_str(), c.delta, c.end_len))
            .collect();
        crate::sql::query(
            "INSERT INTO message_chunks (message_id, session_id, delta, end_len) \
             SELECT value->>0, value->>1, value->>2, CAST(value->>3 AS BIGINT) FROM json_each(?)",
        )
        .bind(json_rows(&json, self.conn().dialect())?)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Folds the chunks of every message of `sessions` except `keep` (the messages still
    /// streaming), in two statements for all of them.
    pub async fn fold_sessions_except(
        &mut self,
        sessions: &[&SessionId],
        keep: &[&MessageId],
    ) -> Result<()> {
        if sessions.is_empty() {
            return Ok(());
        }
        let sessions: Vec<(&str,)> = sessions.iter().map(|s| (s.as_str(),)).collect();
        let keep: Vec<(&str,)> = keep.iter().map(|id| (id.as_str(),)).collect();
        let dialect = self.conn().dialect();
        let (sessions, keep) = (json_rows(&sessions, dialect)?, json_rows(&keep, dialect)?);
        let chosen = |q: &mut QueryBuilder| {
            q.push("session_id IN (SELECT value->>0 FROM json_each(").push_bind(sessions.as_str());
            q.push(")) AND message_id NOT IN (SELECT value->>0 FROM json_each(");
            q.push_bind(keep.as_str()).push("))");
        };
        let mut update = QueryBuilder::new(dialect, FOLD);
        update.push(" WHERE id IN (SELECT DISTINCT message_id FROM message_chunks WHERE ");
        chosen(&mut update);
        update.push(")");
        update.build().execute(self.conn()).await?;
        let mut delete = QueryBuilder::new(dialect, "DELETE FROM message_chunks WHERE ");
        chosen(&mut delete);
        delete.build().execute(self.conn()).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::without_nul_escapes;

    #[test]
    fn i21_d2_only_escapes_of_nul_are_replaced() {
        let json = serde_json::to_string(&("a\0b", "c\\u0000d", "\u{1}\\\0")).unwrap();
        let cleaned: (String, String, String) =
            serde_json::from_str(&without_nul_escapes(&json)).unwrap();
        assert_eq!(cleaned, ("a\u{fffd}b".into(), "c\\u0000d".into(), "\u{1}\\\u{fffd}".into()));
    }
}
