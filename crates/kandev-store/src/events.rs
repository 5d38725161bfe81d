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
