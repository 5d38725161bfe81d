//! A session's transcript: the message row, reads and writes. A message's `seq` is the seq
//! of the event that announced it, so a client can tell which messages an event stream
//! already covered.
//!
//! Streamed text is stored at linear cost (issue 15): each append is a `message_chunks` row
//! carrying the message's length after it, so an append neither rewrites nor reads the text.
//! Reads see `content` followed by the chunks; [`WriteTx::fold_messages`] moves a session's
//! chunks into `content` once its stream ends (which also makes the text searchable).

use std::collections::HashMap;

use kandev_domain::message_meta::MessageMeta;
use kandev_domain::transcript::{Message, MessageKind};
use kandev_domain::{MessageId, SessionId, Timestamp, TurnId};
use sqlx::FromRow;

use crate::db::Db;
use crate::sql::{Dialect, QueryBuilder};
use crate::{Event, Payload, Result, Store, StoreError, Topic, WriteTx};

/// A transcript message to add.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub session_id: SessionId,
    pub turn_id: Option<TurnId>,
    pub content: String,
    /// Its kind and what it carries besides its text.
    pub meta: MessageMeta,
    pub client_message_id: Option<String>,
}

/// The columns of a [`MessageRow`] from `messages`, for every read of messages, other
/// kinds' too (`permissions.rs` reads permission requests, which are messages). `content` is
/// the stored text followed by the chunks not folded yet.
pub(crate) const MESSAGE_SELECT: &str = "SELECT id, session_id, turn_id, seq, kind, \
     content || COALESCE((SELECT string_agg(c.delta, '' ORDER BY c.id) FROM message_chunks c \
     WHERE c.message_id = messages.id), '') AS content, \
     metadata, client_message_id, created_at, updated_at FROM messages";

/// What an append changed: enough to announce the chunk without reading the text back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    pub id: MessageId,
    pub session_id: SessionId,
    pub seq: i64,
    pub kind: MessageKind,
    /// The message's length in bytes after the append.
    pub length: u64,
}

/// A streamed chunk to store ([`WriteTx::insert_chunks`]): `end_len` is the message's length
/// in bytes after it (the caller knows it from [`WriteTx::stream_heads`] and the chunks before).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChunk<'a> {
    pub message_id: &'a MessageId,
    pub session_id: &'a SessionId,
    pub delta: &'a str,
    pub end_len: u64,
}

#[derive(FromRow)]
pub(crate) struct MessageRow {
    id: String,
    session_id: String,
    turn_id: Option<String>,
    seq: i64,
    kind: String,
    content: String,
    metadata: String,
    client_message_id: Option<String>,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<MessageRow> for Message {
    type Error = StoreError;

    fn try_from(r: MessageRow) -> Result<Message> {
        let kind = MessageKind::parse(&r.kind)
            .ok_or_else(|| StoreError::Corrupt(format!("message {} kind {:?}", r.id, r.kind)))?;
        // Every field of the typed metadata has a default, so the rows of older versions read;
        // one that still does not (damaged, hand-edited) is kept as it is, never a failed read.
        let (meta, unreadable) = MessageMeta::from_stored(kind, &r.metadata);
        if let Some(err) = unreadable {
            tracing::warn!(message = %r.id, error = %err, "a message's metadata is kept unread");
        }
        Ok(Message {
            id: MessageId::new(r.id),
            session_id: SessionId::new(r.session_id),
            turn_id: r.turn_id.map(TurnId::new),
            seq: r.seq,
            content: r.content,
            meta,
            client_message_id: r.client_message_id,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        })
    }
}

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

/// The message `id`, or `NotFound`.
async fn get(mut db: Db<'_>, id: &str) -> Result<Message> {
    let mut q = QueryBuilder::new(db.dialect(), MESSAGE_SELECT);
    q.push(" WHERE id = ").push_bind(id);
    q.build_query_as::<MessageRow>()
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("message", id))
        .and_then(Message::try_from)
}

/// Adds the `id`s of a JSON list of `{id, ...}` (`attachments` in a user message's metadata,
/// a queued prompt's `attachments` column). Text that is not JSON is an error: a row the
/// attachment sweep cannot read must not let it remove what the row may name.
pub(crate) fn attachment_ids(
    text: &str,
    key: Option<&str>,
    into: &mut std::collections::HashSet<String>,
) -> Result<()> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("attachments of a stored row: {e}")))?;
    let list = match key {
        Some(key) => value.get(key),
        None => Some(&value),
    };
    let Some(list) = list.and_then(serde_json::Value::as_array) else { return Ok(()) };
    into.extend(list.iter().filter_map(|a| a.get("id")?.as_str().map(str::to_owned)));
    Ok(())
}

impl Store {
    /// The ids of the attachments stored user messages name (issue 38: the sweep keeps
    /// them). Reads every user message whose metadata mentions attachments: a scan, which
    /// the sweep runs at most hourly and only when old uploads exist.
    pub async fn message_attachment_ids(&self) -> Result<std::collections::HashSet<String>> {
        let metadata: Vec<String> = crate::sql::query_scalar(
            "SELECT metadata FROM messages WHERE kind = 'user' \
             AND metadata LIKE '%\"attachments\"%'",
        )
        .fetch_all(&self.read)
        .await?;
        let mut ids = std::collections::HashSet::new();
        for text in metadata {
            attachment_ids(&text, Some("attachments"), &mut ids)?;
        }
        Ok(ids)
    }

    /// A fresh message id, for a message a writer announces before it is stored
    /// ([`WriteTx::insert_message_as`]).
    pub fn new_message_id(&self) -> MessageId {
        MessageId::new(self.ids.next_id())
    }

    /// Messages in `seq` order: after `after_seq`, before `before_seq` (newest page when only
    /// `before_seq` is given), at most `limit`.
    pub async fn list_messages(
        &self,
        session_id: &SessionId,
        after_seq: Option<i64>,
        before_seq: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Message>> {
        let newest_first = after_seq.is_none() && before_seq.is_some();
        let mut q = QueryBuilder::new(self.dialect(), MESSAGE_SELECT);
        q.push(" WHERE session_id = ").push_bind(session_id.as_str());
        q.push(" AND seq > ").push_bind(after_seq.unwrap_or(0));
        q.push(" AND seq < ").push_bind(before_seq.unwrap_or(i64::MAX));
        q.push(if newest_first { " ORDER BY seq DESC" } else { " ORDER BY seq ASC" });
        q.push(" LIMIT ").push_bind(limit);
        let rows: Vec<MessageRow> = q.build_query_as().fetch_all(&self.read).await?;
        let mut messages: Vec<Message> =
            rows.into_iter().map(Message::try_from).collect::<Result<_>>()?;
        if newest_first {
            messages.reverse();
        }
        Ok(messages)
    }

    /// The session's latest user message, if any (what `session.retry` sends again).
    pub async fn last_user_message(&self, session_id: &SessionId) -> Result<Option<Message>> {
        let mut q = QueryBuilder::new(self.dialect(), MESSAGE_SELECT);
        q.push(" WHERE session_id = ").push_bind(session_id.as_str());
        q.push(" AND kind = ").push_bind(MessageKind::User.as_str());
        q.push(" ORDER BY seq DESC LIMIT 1");
        q.build_query_as::<MessageRow>()
            .fetch_optional(&self.read)
            .await?
            .map(Message::try_from)
            .transpose()
    }

    /// The newest message of `turn_id` in the session, if any.
    pub async fn last_message_of_turn(
        &self,
        session_id: &SessionId,
        turn_id: &TurnId,
    ) -> Result<Option<Message>> {
        let mut q = QueryBuilder::new(self.dialect(), MESSAGE_SELECT);
        q.push(" WHERE session_id = ").push_bind(session_id.as_str());
        q.push(" AND turn_id = ").push_bind(turn_id.as_str());
        q.push(" ORDER BY seq DESC LIMIT 1");
        q.build_query_as::<MessageRow>()
            .fetch_optional(&self.read)
            .await?
            .map(Message::try_from)
            .transpose()
    }

    pub async fn get_message(&self, id: &MessageId) -> Result<Message> {
        get(self.db(), id.as_str()).await
    }
}

impl WriteTx {
    /// Inserts a message whose `seq` is the seq of the event that will announce it; the
    /// caller emits that event next.
    pub async fn insert_message(&mut self, new: &NewMessage) -> Result<Message> {
        let id = MessageId::new(self.new_id());
        self.insert_message_as(&id, new).await
    }

    /// [`WriteTx::insert_message`] with an id chosen before ([`Store::new_message_id`]).
    pub async fn insert_message_as(&mut self, id: &MessageId, new: &NewMessage) -> Result<Message> {
        // Only a session's newest message streams: the ones before it are complete.
        self.fold_messages(&new.session_id).await?;
        let (id, now) = (id.as_str(), self.now().millis());
        let seq = self.next_seq().await?;
        crate::sql::query(
            "INSERT INTO messages (id, session_id, turn_id, seq, kind, content, metadata, client_message_id, \
             created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(new.session_id.as_str())
        .bind(new.turn_id.as_ref().map(|t| t.as_str()))
        .bind(seq)
        .bind(new.meta.kind().as_str())
        .bind(&new.content)
        .bind(new.meta.to_json())
        .bind(&new.client_message_id)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        get(self.db(), id).await
    }

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

    /// Appends text to a message at a cost independent of its length: one chunk row, whose
    /// `end_len` comes from the previous chunk (or, for the first, the stored content).
    pub async fn append_message(&mut self, id: &MessageId, delta: &str) -> Result<Appended> {
        let head: Option<(String, i64, String)> =
            crate::sql::query_as("SELECT session_id, seq, kind FROM messages WHERE id = ?")
                .bind(id.as_str())
                .fetch_optional(self.conn())
                .await?;
        let (session_id, seq, kind) =
            head.ok_or_else(|| StoreError::not_found("message", id.to_string()))?;
        let kind = MessageKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("message {id} kind {kind:?}")))?;
        let last: Option<i64> = crate::sql::query_scalar(
            "SELECT end_len FROM message_chunks WHERE message_id = ? ORDER BY id DESC LIMIT 1",
        )
        .bind(id.as_str())
        .fetch_optional(self.conn())
        .await?;
        let before = match last {
            Some(len) => len,
            None => {
                crate::sql::query_scalar(
                    "SELECT CAST(octet_length(content) AS BIGINT) FROM messages WHERE id = ?",
                )
                .bind(id.as_str())
                .fetch_one(self.conn())
                .await?
            }
        };
        let length = before + delta.len() as i64;
        crate::sql::query(
            "INSERT INTO message_chunks (message_id, session_id, delta, end_len) VALUES (?, ?, ?, ?)",
        )
        .bind(id.as_str())
        .bind(&session_id)
        .bind(delta)
        .bind(length)
        .execute(self.conn())
        .await?;
        Ok(Appended {
            id: id.clone(),
            session_id: SessionId::new(session_id),
            seq,
            kind,
            length: u64::try_from(length).unwrap_or_default(),
        })
    }

    /// Folds the streamed chunks of `session_id`'s messages into their `content` (one
    /// rewrite per message, when its stream has ended) and deletes them.
    pub async fn fold_messages(&mut self, session_id: &SessionId) -> Result<()> {
        fold(self, Some(session_id.as_str())).await
    }

    /// Folds every message's chunks (at startup: streams a crash interrupted).
    pub async fn fold_all_messages(&mut self) -> Result<()> {
        fold(self, None).await
    }

    /// Replaces a message's metadata (and its text, when `content` is given). `meta` must be
    /// of the message's kind: a message never changes kind.
    pub async fn set_message(
        &mut self,
        id: &MessageId,
        content: Option<&str>,
        meta: &MessageMeta,
    ) -> Result<Message> {
        if content.is_some() {
            crate::sql::query("DELETE FROM message_chunks WHERE message_id = ?")
                .bind(id.as_str())
                .execute(self.conn())
                .await?;
        }
        let kind = meta.kind().as_str();
        let updated = crate::sql::query(
            "UPDATE messages SET content = COALESCE(?, content), metadata = ?, updated_at = ? \
             WHERE id = ? AND kind = ?",
        )
        .bind(content)
        .bind(meta.to_json())
        .bind(self.now().millis())
        .bind(id.as_str())
        .bind(kind)
        .execute(self.conn())
        .await?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::not_found("message of kind", format!("{id} ({kind})")));
        }
        get(self.db(), id.as_str()).await
    }

    pub async fn message_by_client_id(
        &mut self,
        session_id: &SessionId,
        client_message_id: &str,
    ) -> Result<Option<Message>> {
        let mut q = QueryBuilder::new(self.conn().dialect(), MESSAGE_SELECT);
        q.push(" WHERE session_id = ").push_bind(session_id.as_str());
        q.push(" AND client_message_id = ").push_bind(client_message_id);
        q.build_query_as::<MessageRow>()
            .fetch_optional(self.conn())
            .await?
            .map(Message::try_from)
            .transpose()
    }
}

// ---------------------------------------------------------------- group commit

// A group of streamed writes (the engine's group commit, issue 15) in as few round trips to
// the database as each engine allows. sqlx runs each SQLite connection on its own thread, so
// every statement is a hand-off to that thread and back; under CPU contention each hand-off
// is where a chunk waits. On SQLite the group's writes (its new messages, chunks, events and
// the fold of the messages that stopped streaming) are therefore one multi-statement string
// (sqlx runs its statements one after another in one hand-off, binding their `?` from one
// argument list in order), and the two reads before them (the appended messages' heads and
// the next seq) one more. PostgreSQL does not take several statements with arguments in one
// string: there they run one by one.

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

/// Appends each message's chunks to its `content`; the statement goes on with the messages
/// to fold (` WHERE id IN …`).
const FOLD: &str = "UPDATE messages SET content = content || \
     (SELECT string_agg(c.delta, '' ORDER BY c.id) FROM message_chunks c \
     WHERE c.message_id = messages.id)";

/// Folds the chunks of one session's messages (or of all messages) into `content`.
async fn fold(tx: &mut WriteTx, session_id: Option<&str>) -> Result<()> {
    let dialect = tx.conn().dialect();
    let mut update = QueryBuilder::new(dialect, FOLD);
    update.push(" WHERE id IN (SELECT DISTINCT message_id FROM message_chunks");
    let mut remove = QueryBuilder::new(dialect, "DELETE FROM message_chunks");
    if let Some(session_id) = session_id {
        update.push(" WHERE session_id = ").push_bind(session_id);
        remove.push(" WHERE session_id = ").push_bind(session_id);
    }
    update.push(")");
    update.build().execute(tx.conn()).await?;
    remove.build().execute(tx.conn()).await?;
    Ok(())
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
