//! A session's transcript: the message row, reads and writes. A message's `seq` is the seq
//! of the event that announced it, so a client can tell which messages an event stream
//! already covered.
//!
//! Streamed text is stored at linear cost (issue 15): each append is a `message_chunks` row
//! carrying the message's length after it, so an append neither rewrites nor reads the text.
//! Reads see `content` followed by the chunks; [`WriteTx::fold_messages`] moves a session's
//! chunks into `content` once its stream ends (which also makes the text searchable). The
//! group commit of streamed text is `group.rs`.

mod group;

pub use group::StreamGroup;
pub(crate) use group::{SQLITE_GROUP, SQLITE_HEADS_AND_SEQ, json_rows};

use kandev_domain::message_meta::MessageMeta;
use kandev_domain::transcript::{Message, MessageKind};
use kandev_domain::{MessageId, SessionId, Timestamp, TurnId};
use sqlx::FromRow;

use crate::db::Db;
use crate::sql::QueryBuilder;
use crate::{Result, Store, StoreError, WriteTx};

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
