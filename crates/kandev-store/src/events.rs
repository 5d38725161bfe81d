//! The event log: every notification is a row with a global, strictly increasing `seq`.
//! It is bounded (lifecycle rule 47): [`Store::prune_events`] removes the oldest rows in
//! small batches, and [`Store::unreplayable`] tells which `since` can no longer be replayed.

use std::collections::HashMap;
use std::time::Duration;

use kandev_domain::Timestamp;
use serde_json::value::RawValue;
use sqlx::FromRow;

use crate::db::Db;
use crate::sql::{Dialect, QueryBuilder};
use crate::{Result, Store, StoreError};

/// A topic subscribers filter on, e.g. `workspace:<id>` or `session:<id>`.
pub type Topic = String;

/// A committed notification.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: i64,
    pub topic: Topic,
    pub action: String,
    pub payload: Payload,
    pub created_at: Timestamp,
}

/// A notification's payload as JSON text, serialized once where the notification is built:
/// the event row stores this text and every WebSocket frame copies it as it is (issue 15;
/// not a `serde_json::Value` tree serialized for the row, then cloned and serialized again
/// for the frame).
#[derive(Debug, Clone)]
pub struct Payload(Box<RawValue>);

impl Payload {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The text as raw JSON (serializes as itself).
    pub fn raw(&self) -> &RawValue {
        &self.0
    }

    /// The payload parsed into a tree (for readers that look inside; the hot path does not).
    pub fn value(&self) -> serde_json::Value {
        // The text is a `RawValue`, checked JSON when it was made: this parse cannot fail.
        serde_json::from_str(self.0.get()).unwrap_or(serde_json::Value::Null)
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        self.get() == other.get()
    }
}

impl From<Box<RawValue>> for Payload {
    fn from(raw: Box<RawValue>) -> Payload {
        Payload(raw)
    }
}

impl From<serde_json::Value> for Payload {
    fn from(value: serde_json::Value) -> Payload {
        // A `Value` always serializes (its maps have string keys).
        Payload(serde_json::value::to_raw_value(&value).unwrap_or_default())
    }
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
        let payload = RawValue::from_string(row.payload)
            .map_err(|e| StoreError::Corrupt(format!("event {} payload: {e}", row.seq)))?;
        Ok(Event {
            seq: row.seq,
            topic: row.topic,
            action: row.action,
            payload: Payload(payload),
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
        payload: impl Into<Payload>,
    ) -> Result<i64> {
        let topic = topic.into();
        let payload = payload.into();
        let now = self.now();
        let seq: i64 = crate::sql::query_scalar(
            "INSERT INTO events (topic, action, payload, created_at) VALUES (?, ?, ?, ?) RETURNING seq",
        )
        .bind(&topic)
        .bind(action)
        .bind(payload.get())
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

    /// Appends several notifications to the log in one statement, numbered consecutively
    /// from [`WriteTx::next_seq`] in the order given (so a caller that numbered them from
    /// `next_seq` knows each one's seq); published when the transaction commits. Returns the
    /// first seq.
    pub async fn emit_batch(&mut self, events: Vec<(Topic, String, Payload)>) -> Result<i64> {
        let first = self.next_seq().await?;
        self.emit_numbered(first, events).await?;
        Ok(first)
    }

    /// [`WriteTx::emit_batch`] for a caller that read [`WriteTx::next_seq`] already in this
    /// transaction (and emitted nothing since): `first` is the seq of the first event.
    pub async fn emit_numbered(
        &mut self,
        first: i64,
        events: Vec<(Topic, String, Payload)>,
    ) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let now = self.now();
        let rows: Vec<(i64, &str, &str, &str)> = events
            .iter()
            .zip(first..)
            .map(|((topic, action, payload), seq)| {
                (seq, topic.as_str(), action.as_str(), payload.get())
            })
            .collect();
        // Explicit seqs above the highest one: AUTOINCREMENT records the largest in
        // `sqlite_sequence`, so `next_seq` stays exact.
        crate::sql::query(
            "INSERT INTO events (seq, topic, action, payload, created_at) \
             SELECT CAST(value->>0 AS BIGINT), value->>1, value->>2, value->>3, ? FROM json_each(?)",
        )
        .bind(now.millis())
        .bind(crate::messages::json_rows(&rows, self.conn().dialect())?)
        .execute(self.conn())
        .await?;
        for ((topic, action, payload), seq) in events.into_iter().zip(first..) {
            self.publish_on_commit(Event { seq, topic, action, payload, created_at: now });
        }
        Ok(())
    }

    /// Raises the highest seq ever used to at least `seq` (a copied database keeps its
    /// source's, which survives pruning).
    pub(crate) async fn raise_highest_seq(&mut self, seq: i64) -> Result<()> {
        let sql = match self.db().dialect() {
            Dialect::Sqlite => {
                "INSERT INTO sqlite_sequence (name, seq) SELECT 'events', ?1 \
                 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events')"
            }
            Dialect::Postgres => "UPDATE event_seq SET last = GREATEST(last, ?1)",
        };
        crate::sql::query(sql).bind(seq).execute(self.conn()).await?;
        if self.db().dialect() == Dialect::Sqlite {
            crate::sql::query(
                "UPDATE sqlite_sequence SET seq = MAX(seq, ?1) WHERE name = 'events'",
            )
            .bind(seq)
            .execute(self.conn())
            .await?;
        }
        Ok(())
    }

    /// The `seq` the next emitted event will get (writes are serialized, so it is exact).
    pub async fn next_seq(&mut self) -> Result<i64> {
        Ok(highest_seq(self.db()).await? + 1)
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
        let mut q = QueryBuilder::new(
            self.dialect(),
            "SELECT seq, topic, action, payload, created_at FROM events WHERE ",
        );
        for (i, topic) in topics.iter().enumerate() {
            q.push(if i == 0 { "(topic = " } else { " OR (topic = " }).push_bind(topic);
            q.push(" AND seq > ").push_bind(since.get(topic).copied().unwrap_or(0)).push(")");
        }
        q.push(" ORDER BY seq LIMIT ").push_bind(limit);
        let rows: Vec<EventRow> = q.build_query_as().fetch_all(&self.read).await?;
        rows.into_iter().map(Event::try_from).collect()
    }

    /// The highest `seq` written so far (0 for an empty log), even when pruning removed it.
    pub async fn last_seq(&self) -> Result<i64> {
        highest_seq(self.db()).await
    }

    /// The seq of the oldest event of `topic` the log still holds, or the next seq to be
    /// written when it holds none: a `since` of `oldest_seq - 1` or more replays without a gap.
    pub async fn oldest_seq(&self, topic: &str) -> Result<i64> {
        let seq: Option<i64> =
            crate::sql::query_scalar("SELECT MIN(seq) FROM events WHERE topic = ?")
                .bind(topic)
                .fetch_one(&self.read)
                .await?;
        match seq {
            Some(seq) => Ok(seq),
            None => Ok(self.last_seq().await? + 1),
        }
    }

    /// The topics of `since` whose events after their `since` may have been pruned, each
    /// with its [`Store::oldest_seq`] (rule 47). A topic not in the answer replays in full.
    ///
    /// Pruning removes a prefix of the log, so nothing after `since` is gone when `since` is
    /// at least the first retained seq minus one, or at least the topic's oldest retained
    /// event minus one. Otherwise a gap is possible (not certain: the topic may have had no
    /// event in the pruned range), and the client must reload.
    pub async fn unreplayable(&self, since: &HashMap<Topic, i64>) -> Result<HashMap<Topic, i64>> {
        let mut gaps = HashMap::new();
        if since.is_empty() {
            return Ok(gaps);
        }
        let first: Option<i64> =
            crate::sql::query_scalar("SELECT MIN(seq) FROM events").fetch_one(&self.read).await?;
        let first = match first {
            Some(seq) => seq,
            None => self.last_seq().await? + 1,
        };
        for (topic, &after) in since {
            if after.saturating_add(1) >= first {
                continue;
            }
            let oldest = self.oldest_seq(topic).await?;
            if after.saturating_add(1) < oldest {
                gaps.insert(topic.clone(), oldest);
            }
        }
        Ok(gaps)
    }

    /// Removes events older than `retention.max_age` and the oldest beyond
    /// `retention.max_rows`, oldest first, in batches of [`PRUNE_BATCH`] rows, each its own
    /// short write transaction, so writers wait at most one batch.
    pub async fn prune_events(&self, retention: Retention) -> Result<Pruned> {
        let mut pruned = Pruned::default();
        while let Some(through) = self.prune_bound(retention).await? {
            let mut tx = self.begin_write().await?;
            let done = crate::sql::query(PRUNE_SQL).bind(through).execute(tx.conn()).await?;
            tx.commit().await?;
            pruned.rows += done.rows_affected();
            pruned.batches += 1;
            pruned.through_seq = through;
            // The write gate is fair: a writer that waited gets it before the next batch.
            tokio::task::yield_now().await;
        }
        Ok(pruned)
    }

    /// The last seq of the next batch to prune, or `None` when nothing is due.
    async fn prune_bound(&self, retention: Retention) -> Result<Option<i64>> {
        let rows: Vec<(i64, i64)> =
            crate::sql::query_as("SELECT seq, created_at FROM events ORDER BY seq LIMIT ?")
                .bind(PRUNE_BATCH)
                .fetch_all(&self.read)
                .await?;
        let (Some(&(first, _)), Some(&(batch_end, _))) = (rows.first(), rows.last()) else {
            return Ok(None);
        };
        let max_age = i64::try_from(retention.max_age.as_millis()).unwrap_or(i64::MAX);
        let cutoff = self.now().millis().saturating_sub(max_age);
        let by_age = rows.iter().take_while(|(_, at)| *at < cutoff).map(|(seq, _)| *seq).last();
        // Rows are numbered densely (AUTOINCREMENT reuses nothing and only pruning deletes),
        // so the count is `last - first + 1`; a hole would only make this prune a bit more.
        let count = self.last_seq().await? - first + 1;
        let max_rows = i64::try_from(retention.max_rows).unwrap_or(i64::MAX);
        let excess = count.saturating_sub(max_rows);
        let by_count = (excess > 0).then(|| (first + excess - 1).min(batch_end));
        Ok(by_age.max(by_count))
    }
}

/// One pruning batch. It leaves the board cards alone (`write.rs`): a pass of a log over its
/// bound is hundreds of batches, each of which made every kept `task.list` answer stale.
pub(crate) const PRUNE_SQL: &str = "DELETE FROM events WHERE seq <= ?";

/// Rows deleted per pruning transaction.
pub const PRUNE_BATCH: i64 = 500;

/// How much of the event log is kept (rule 47).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Events older than this are pruned.
    pub max_age: Duration,
    /// At most this many events are kept; the oldest go first.
    pub max_rows: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention { max_age: Duration::from_secs(7 * 24 * 3600), max_rows: 1_000_000 }
    }
}

/// What a pruning pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub rows: u64,
    pub batches: u64,
    /// The highest seq removed (0 when nothing was).
    pub through_seq: i64,
}

/// The highest `seq` ever used (0 for an empty log): AUTOINCREMENT keeps it in
/// `sqlite_sequence`, so it survives pruning.
/// On PostgreSQL the `event_seq` row plays that part (see `migrations-pg`).
/// The statement that reads the highest event seq ever given (it survives pruning).
pub(crate) fn highest_seq_sql(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
        Dialect::Postgres => "SELECT last FROM event_seq",
    }
}

async fn highest_seq(mut db: Db<'_>) -> Result<i64> {
    let sql = highest_seq_sql(db.dialect());
    let seq: Option<i64> = crate::sql::query_scalar(sql).fetch_optional(&mut db).await?;
    Ok(seq.unwrap_or(0))
}
