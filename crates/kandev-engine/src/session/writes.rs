//! How the actor writes its session: through [`crate::write::write_session`] (transition
//! check, compare-and-set on the epoch, notifications), keeping its copy of the row, with an
//! optional transcript note in the same transaction.

use kandev_domain::message_meta::{MessageMeta, StatusNote};
use kandev_domain::transcript::LastError;
use kandev_store::{SessionUpdate, StoreError, WriteTx};

use crate::error::Result;
use crate::session::state::SessionActor;
use crate::write::{add_message, write_session};

/// A transcript note: its text and metadata (whose variant is its kind).
pub(crate) type Note = (String, MessageMeta);

impl SessionActor {
    /// Writes `update` in the caller's transaction and keeps the written row.
    pub async fn write(&mut self, tx: &mut WriteTx, update: SessionUpdate) -> Result<()> {
        self.session = write_session(tx, &self.session, &update).await?;
        Ok(())
    }

    /// The runner position to record with the session's next transaction: the agent's
    /// output handled so far, short of streamed text not known to be stored yet and of
    /// permission requests still waiting for an answer (issue 20, `crate::position`); what
    /// is committed past a waiting request goes with it (`Mark::ahead`), so a restart that
    /// asks the request again does not store that output twice.
    pub fn mark(&self) -> Option<crate::position::Mark> {
        let live = self.phase.live()?;
        let track = live.track.as_ref()?;
        let unsettled = self.pending.as_ref().map(|p| p.from);
        let submitted = self.submitted.front().map(|s| s.from);
        let stored = [Some(track.handled), unsettled, submitted].into_iter().flatten().min()?;
        let asking = self.permissions.values().map(|p| p.from).min();
        let at = asking.map_or(stored, |asking| asking.min(stored));
        track.mark(&self.session.id, live.epoch, at, stored)
    }

    /// Begins a write transaction of the session, with its runner position recorded in it.
    pub async fn begin_write(&mut self) -> std::result::Result<WriteTx, StoreError> {
        let mut tx = self.inner.store.begin_write().await?;
        let mut mark = self.mark();
        if let Some(recorded) = &mark
            && let Err(err) = recorded.record(&mut tx).await
        {
            // Not recorded, so not acknowledged: the runner keeps the output for a restart.
            tracing::warn!(session = %self.session.id, error = %err, "cannot record the runner position");
            mark = None;
        }
        self.last_mark = mark;
        Ok(tx)
    }

    /// Commits a transaction of [`Self::begin_write`], then acknowledges the runner position
    /// it recorded.
    pub async fn finish(
        &self,
        tx: WriteTx,
    ) -> std::result::Result<Vec<std::sync::Arc<kandev_store::Event>>, StoreError> {
        let events = tx.commit().await?;
        if let Some(mark) = &self.last_mark {
            mark.ack();
        }
        Ok(events)
    }

    /// Runs one small write transaction: `update`, plus an optional note.
    pub async fn commit(&mut self, update: SessionUpdate, note: Option<Note>) -> Result<()> {
        let tx = self.begin_write().await?;
        self.commit_tx(tx, update, note).await
    }

    /// [`Self::commit`] in a transaction the caller already wrote to. The note belongs to the
    /// open turn, if any; later chunks of the agent start a new message after it.
    pub async fn commit_tx(
        &mut self,
        mut tx: WriteTx,
        update: SessionUpdate,
        note: Option<Note>,
    ) -> Result<()> {
        self.write(&mut tx, update).await?;
        if let Some((text, meta)) = note {
            let turn = self.phase.turn().map(|t| t.id.clone());
            add_message(&mut tx, &self.session, turn.as_ref(), &text, meta).await?;
            if let Some(turn) = self.phase.turn_mut() {
                turn.streaming = None;
            }
        }
        self.finish(tx).await?;
        Ok(())
    }

    /// A status message from outside the agent's output (an MCP note), fenced by `epoch`.
    pub async fn note(&mut self, text: String, note: StatusNote, epoch: Option<i64>) -> Result<()> {
        if epoch.is_some_and(|e| e != self.session.epoch) {
            return Err(crate::error::EngineError::Conflict(
                "the session moved on to a newer execution; this note was not added".into(),
            ));
        }
        let tx = self.begin_write().await?;
        let note = (text, note.into());
        self.commit_tx(tx, SessionUpdate::default(), Some(note)).await
    }

    /// A `last_error` of this session, now.
    pub fn error(
        &self,
        code: &str,
        message: impl Into<String>,
        details: serde_json::Value,
    ) -> LastError {
        LastError {
            code: code.to_owned(),
            message: message.into(),
            details: Some(details.to_string()),
            at: self.inner.store.now(),
        }
    }
}
