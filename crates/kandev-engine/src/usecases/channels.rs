//! Notification channel use cases (issue 18): a channel's URL and secret arrive checked and
//! are never logged.

use kandev_api_types::{DeliveryDto, Notification, NotificationsEvent};
use kandev_domain::notify::{Channel, Delivery, NotificationKind};
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

    /// `notification.channel.update`: a new URL (checked as at creation), events or secret
    /// (`Some(None)` removes it).
    pub async fn update_channel(
        &self,
        id: &str,
        url: Option<&str>,
        events: Option<&[NotificationKind]>,
        secret: Option<Option<&str>>,
        secret_name: Option<Option<&str>>,
    ) -> Result<Channel> {
        if let Some(url) = url {
            self.check_channel_url(url)?;
        }
        let mut tx = self.inner.store.begin_write().await?;
        let Some(channel) = tx.update_channel(id, url, events, secret, secret_name).await? else {
            return Err(EngineError::NotFound("no such notification channel".into()));
        };
        tx.commit().await?;
        tracing::info!(channel = channel.id, "notification channel changed");
        Ok(channel)
    }

    /// `notification.delivery.retry`: a delivery waiting for its next try, or failed for
    /// good, is tried again now (a delivered one is answered as it is).
    pub async fn retry_delivery(&self, id: i64) -> Result<Delivery> {
        let mut tx = self.inner.store.begin_write().await?;
        let Some(delivery) = tx.retry_delivery(id).await? else {
            return Err(EngineError::NotFound("no such delivery".into()));
        };
        let event = NotificationsEvent::DeliveryRetried { delivery: DeliveryDto::from(&delivery) };
        crate::publish::notify(&mut tx, Notification::Notifications(event)).await?;
        tx.commit().await?;
        Ok(delivery)
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
