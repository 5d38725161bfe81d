//! Write transactions: serialized, and publishing their events only after commit.

use kandev_domain::Timestamp;
use sqlx::{Sqlite, SqliteConnection, Transaction};
use tokio::sync::OwnedMutexGuard;

use crate::{Event, Result, Store};

/// An open write transaction. Dropping it without [`WriteTx::commit`] rolls back.
pub struct WriteTx {
    tx: Transaction<'static, Sqlite>,
    pending: Vec<Event>,
    store: Store,
    now: Timestamp,
    _gate: OwnedMutexGuard<()>,
}

impl WriteTx {
    pub(crate) async fn begin(store: &Store) -> Result<WriteTx> {
        let gate = store.write_gate.clone().lock_owned().await;
        let tx = store.write.begin().await?;
        Ok(WriteTx {
            tx,
            pending: vec![],
            store: store.clone(),
            now: store.clock.now(),
            _gate: gate,
        })
    }

    /// The connection, for queries inside this transaction.
    pub(crate) fn conn(&mut self) -> &mut SqliteConnection {
        &mut self.tx
    }

    /// The time this transaction started; every row it writes carries it.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    pub(crate) fn new_id(&self) -> String {
        self.store.ids.next_id()
    }

    /// Appends a notification to the log; it is published when the transaction commits.
    pub async fn emit(
        &mut self,
        topic: impl Into<String>,
        action: &str,
        payload: serde_json::Value,
    ) -> Result<i64> {
        let topic = topic.into();
        let text = payload.to_string();
        let now = self.now.millis();
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO events (topic, action, payload, created_at) VALUES (?, ?, ?, ?) RETURNING seq",
        )
        .bind(&topic)
        .bind(action)
        .bind(text)
        .bind(now)
        .fetch_one(self.conn())
        .await?;
        self.pending.push(Event {
            seq,
            topic,
            action: action.to_owned(),
            payload,
            created_at: self.now,
        });
        Ok(seq)
    }

    /// Commits, then publishes the emitted events in order. Returns them.
    pub async fn commit(self) -> Result<Vec<Event>> {
        let WriteTx { tx, pending, store, _gate, .. } = self;
        tx.commit().await?;
        for event in &pending {
            // No receiver is not an error: nobody is listening right now.
            let _ = store.events.send(event.clone());
        }
        Ok(pending)
    }
}
