//! Notification channel use cases (issue 18): a channel's URL and secret arrive checked and
//! are never logged.

use kandev_domain::notify::Channel;
use kandev_store::NewChannel;

use crate::engine::Engine;
use crate::error::{EngineError, Result};

impl Engine {
    /// `notification.channel.create`: refuses a URL the server may not send to
    /// ([`Engine::check_channel_url`]), then stores the channel.
    pub async fn create_channel(&self, new: &NewChannel) -> Result<Channel> {
        self.check_channel_url(&new.url)?;
        let mut tx = self.inner.store.begin_write().await?;
        let channel = tx.insert_channel(new).await?;
        tx.commit().await?;
        tracing::info!(
            channel = channel.id,
            kind = new.kind.as_str(),
            "notification channel created"
        );
        Ok(channel)
    }

    /// `notification.channel.delete`.
    pub async fn delete_channel(&self, id: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        if !tx.delete_channel(id).await? {
            return Err(EngineError::NotFound("no such notification channel".into()));
        }
        tx.commit().await?;
        Ok(())
    }
}
