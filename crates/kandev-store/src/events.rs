//! The event log: every notification is a row with a global, strictly increasing `seq`.

use std::collections::HashMap;

use kandev_domain::Timestamp;
use sqlx::FromRow;

use crate::{Result, Store, StoreError};

/// A topic subscribers filter on, e.g. `workspace:<id>` or `session:<id>`.
pub type Topic = String;

/// A committed notification.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: i64,
    pub topic: Topic,
    pub action: String,
    pub payload: serde_json::Value,
    pub created_at: Timestamp,
}

#[derive(FromRow)]
struct EventRow {
    seq: i64,
    topic: String,
    action: String,
    payload: String,
    created_at: i64,
}

impl TryFrom<EventRow> for Event {
    type Error = StoreError;

    fn try_from(row: EventRow) -> Result<Event> {
        let payload = serde_json::from_str(&row.payload)
            .map_err(|e| StoreError::Corrupt(format!("event {} payload: {e}", row.seq)))?;
        Ok(Event {
            seq: row.seq,
            topic: row.topic,
            action: row.action,
            payload,
            created_at: Timestamp(row.created_at),
        })
    }
}

impl crate::WriteTx {
    /// Appends a notification to the log; it is published when the transaction commits.
    pub async fn emit(
        &mut self,
        topic: impl Into<String>,
        action: &str,
        payload: serde_json::Value,
    ) -> Result<i64> {
        let topic = topic.into();
        let text = payload.to_string();
        let now = self.now();
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO events (topic, action, payload, created_at) VALUES (?, ?, ?, ?) RETURNING seq",
        )
        .bind(&topic)
        .bind(action)
        .bind(text)
        .bind(now.millis())
        .fetch_one(self.conn())
        .await?;
        self.publish_on_commit(Event {
            seq,
            topic,
            action: action.to_owned(),
            payload,
            created_at: now,
        });
        Ok(seq)
    }

    /// The `seq` the next emitted event will get (writes are serialized, so it is exact).
    pub async fn next_seq(&mut self) -> Result<i64> {
        let last: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
                .fetch_optional(self.conn())
                .await?;
        Ok(last.unwrap_or(0) + 1)
    }
}

impl Store {
    /// Events of `topics` with `seq` greater than the topic's entry in `since` (0 when
    /// absent), oldest first, at most `limit`.
    pub async fn events_since(
        &self,
        topics: &[Topic],
        since: &HashMap<Topic, i64>,
        limit: i64,
    ) -> Result<Vec<Event>> {
        if topics.is_empty() {
            return Ok(vec![]);
        }
        // One range per topic; SQLite uses the (topic, seq) index for each OR branch.
        let clauses = vec!["(topic = ? AND seq > ?)"; topics.len()].join(" OR ");
        let sql = format!(
            "SELECT seq, topic, action, payload, created_at FROM events WHERE {clauses} ORDER BY seq LIMIT ?"
        );
        let mut query = sqlx::query_as::<_, EventRow>(&sql);
        for topic in topics {
            query = query.bind(topic).bind(since.get(topic).copied().unwrap_or(0));
        }
        let rows = query.bind(limit).fetch_all(&self.read).await?;
        rows.into_iter().map(Event::try_from).collect()
    }

    /// The highest `seq` written so far (0 for an empty log).
    pub async fn last_seq(&self) -> Result<i64> {
        let seq: Option<i64> =
            sqlx::query_scalar("SELECT MAX(seq) FROM events").fetch_one(&self.read).await?;
        Ok(seq.unwrap_or(0))
    }
}
