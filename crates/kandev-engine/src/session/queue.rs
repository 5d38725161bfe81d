//! The prompt queue (docs/lifecycle.md section B): adding, editing, reordering and removing
//! entries, `auto_run`, and taking the next entry, through the same gate as every other
//! admission path (rule 44).

use kandev_domain::transcript::QueuedPrompt;
use kandev_store::SessionUpdate;

use crate::api::{PromptRequest, QueueChange};
use crate::error::{EngineError, Result};
use crate::publish;
use crate::session::state::SessionActor;

impl SessionActor {
    /// Adds an entry at the end, within the cap (rule 8).
    pub(super) async fn enqueue(
        &mut self,
        request: &PromptRequest,
        queued_by: &str,
    ) -> Result<QueuedPrompt> {
        let mut tx = self.begin_write().await?;
        let queue = tx.list_queue(&self.session.id).await?;
        let cap = self.inner.config.queue_cap;
        if cap > 0 && queue.len() >= cap {
            return Err(EngineError::QueueFull(format!(
                "the queue already holds {cap} messages; wait or remove one"
            )));
        }
        let entry = tx
            .enqueue(
                &self.session.id,
                &request.content,
                &request.attachments,
                request.client_message_id.as_deref(),
                queued_by,
            )
            .await?;
        let queue = tx.list_queue(&self.session.id).await?;
        publish::queue_changed(&mut tx, &self.session, &queue).await?;
        self.finish(tx).await?;
        Ok(entry)
    }

    pub(super) async fn change_queue(&mut self, change: QueueChange) -> Result<Vec<QueuedPrompt>> {
        let mut tx = self.begin_write().await?;
        let missing = || {
            EngineError::NotFound(
                "that queued message does not exist (it may have run already)".into(),
            )
        };
        match &change {
            QueueChange::Add { content, client_message_id, attachments } => {
                drop(tx);
                let request = PromptRequest {
                    content: content.clone(),
                    client_message_id: client_message_id.clone(),
                    queue: true,
                    attachments: attachments.clone(),
                };
                if request.content.trim().is_empty() {
                    return Err(EngineError::Validation("content is required".into()));
                }
                self.enqueue(&request, "user").await?;
                self.drain_queue().await;
                return Ok(self.inner.store.list_queue(&self.session.id).await?);
            }
            QueueChange::Update { id, content } => {
                if !tx.update_queued(&self.session.id, id, content).await? {
                    return Err(missing());
                }
            }
            QueueChange::Remove { id } => {
                if !tx.dequeue(&self.session.id, id).await? {
                    return Err(missing());
                }
            }
            QueueChange::Reorder { ids } => tx
                .reorder_queue(&self.session.id, ids)
                .await
                .map_err(|e| EngineError::Validation(e.to_string()))?,
            QueueChange::Drain | QueueChange::Nudge => {}
            QueueChange::SetAutoRun(enabled) => {
                self.write(
                    &mut tx,
                    SessionUpdate { auto_run: Some(*enabled), ..SessionUpdate::default() },
                )
                .await?
            }
        }
        let queue = tx.list_queue(&self.session.id).await?;
        publish::queue_changed(&mut tx, &self.session, &queue).await?;
        self.finish(tx).await?;
        match change {
            QueueChange::Drain => self.take_next_queued().await,
            QueueChange::Nudge => self.drain_queue().await,
            QueueChange::SetAutoRun(true) => self.drain_queue().await,
            _ => {}
        }
        Ok(self.inner.store.list_queue(&self.session.id).await?)
    }

    /// Starts the next queued prompt if `auto_run` is on and a turn may start (rule 9).
    pub(super) async fn drain_queue(&mut self) {
        if self.session.auto_run {
            self.take_next_queued().await;
        }
    }

    /// Starts the next queued prompt if a turn may start now ([`Self::can_start_turn`]);
    /// otherwise it runs when the operation in progress settles (rule 44).
    async fn take_next_queued(&mut self) {
        if self.can_start_turn().is_err() {
            return;
        }
        let result: Result<()> = async {
            let Some(next) =
                self.inner.store.list_queue(&self.session.id).await?.into_iter().next()
            else {
                return Ok(());
            };
            self.record_and_send(
                next.content,
                next.attachments,
                next.client_message_id,
                Some(&next.id),
            )
            .await
            .map(|_| ())
        }
        .await;
        self.log("running the next queued message", result);
    }
}
