//! Carries notification records out (issue 18): each pending delivery is sent to its channel
//! through `kandev-notify` (a webhook `POST` of the record as JSON, signed when the channel
//! has a secret; an ntfy `POST` of the title), every attempt is logged, and a failure is
//! tried again after an exponential back-off (`kandev_domain::notify::backoff`) until 24 h
//! after the notification. Deliveries are rows, so a restart goes on where it stopped. The
//! channel's URL is a secret: it is never logged. Which targets are allowed, and how a
//! request is made, is `kandev_notify`'s.

use std::time::Duration;

use kandev_api_types::{DeliveryDto, Notification, NotificationRecordDto, NotificationsEvent};
use kandev_domain::notify::{
    Attempt, Channel, DeliveryStatus, NotificationKind, NotificationRecord, backoff,
};
use kandev_domain::{SessionId, TaskId, Timestamp};
use kandev_notify::{Answer, Outgoing, Sender, TargetRefused};
use kandev_store::{DueDelivery, Store};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// Deliveries sent per pass.
const BATCH: i64 = 16;

/// The events after which due deliveries are read again before their time.
const WAKES: [&str; 2] = ["notification.created", "notification.delivery.retried"];

/// `notification.channel.test`: one attempt of a test record (kind: the channel's first
/// event, title "Kandev: test notification", `delivery_id` 0) to `channel`, now; not retried
/// and not in the delivery log. Returns what the receiver answered and why it failed; a
/// target that is not allowed is refused before anything is sent.
/// The value of a server secret by name (issue 50: a webhook channel's signing secret kept
/// in the store), or why there is none. Given by the engine, which holds the key.
pub(crate) type StoredSecret = std::sync::Arc<
    dyn Fn(String) -> futures::future::BoxFuture<'static, Result<String, String>> + Send + Sync,
>;

pub(crate) async fn test(
    channel: &Channel,
    now: Timestamp,
    allow_private: bool,
    web: &WebUrl,
    stored: &StoredSecret,
) -> Result<Answer, TargetRefused> {
    let sender = match Sender::new(allow_private) {
        Ok(sender) => sender,
        Err(error) => return Ok(Answer { error: Some(error), ..Answer::default() }),
    };
    let kind = channel.events.first().copied().unwrap_or(NotificationKind::TurnCompleted);
    let notification = NotificationRecord {
        id: "test".to_owned(),
        kind,
        seq: 0,
        task_id: TaskId::new("test"),
        session_id: SessionId::new("test"),
        title: "Kandev: test notification".to_owned(),
        data: r#"{"test":true}"#.to_owned(),
        created_at: now,
    };
    let delivery = DueDelivery { id: 0, attempts: 0, notification, channel: channel.clone() };
    send(&sender, &delivery, 1, web, stored).await
}

/// Where the web UI is, for the task links in webhook bodies: the server's public URL
/// (`--public-url`), else the address it listens on; `None` before it listens.
#[derive(Debug, Clone, Default)]
pub struct WebUrl(pub Option<String>);

impl WebUrl {
    /// The task's page.
    fn task(&self, task: &TaskId) -> Option<String> {
        let base = self.0.as_deref()?.trim_end_matches('/');
        Some(format!("{base}/tasks/{task}"))
    }
}

/// Sends due deliveries until `stop`: at once for a new notification (woken by the
/// `notification.created` event of its commit), else when the next retry is due.
pub(crate) async fn deliver(
    store: Store,
    base_backoff: Duration,
    allow_private: bool,
    web: WebUrl,
    stored: StoredSecret,
    stop: CancellationToken,
) {
    let client = match Sender::new(allow_private) {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(error, "cannot build the notification client; nothing is delivered");
            return;
        }
    };
    let mut events = store.subscribe();
    let mut listening = true;
    loop {
        loop {
            let due = match store.due_deliveries(store.now(), BATCH).await {
                Ok(due) => due,
                Err(err) => {
                    tracing::warn!(error = %err, "reading due notification deliveries failed");
                    break;
                }
            };
            if due.is_empty() {
                break;
            }
            for delivery in due {
                if stop.is_cancelled() {
                    return;
                }
                attempt(&store, &client, base_backoff, &web, &stored, delivery).await;
            }
        }
        let wait = match store.next_delivery_at().await {
            Ok(Some(at)) => Duration::from_millis(
                u64::try_from(at.millis() - store.now().millis()).unwrap_or(0),
            ),
            _ => Duration::from_secs(3600),
        };
        // Waits for the next due delivery or a new notification. Every other event (each
        // streamed message is one) keeps waiting without reading the database: before, each
        // event ran the two queries above again, two read round trips per message ingested
        // (issue 15).
        let until = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep_until(until) => break,
                event = events.recv(), if listening => match event {
                    // A new record, or a delivery made due now (`retry now`).
                    Ok(event) if !WAKES.contains(&event.action.as_str()) => continue,
                    Ok(_) | Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => {
                        listening = false;
                        break;
                    }
                },
            }
        }
    }
}

/// One attempt of `delivery`, logged; the delivery is then delivered, due again, or failed.
async fn attempt(
    store: &Store,
    client: &Sender,
    base: Duration,
    web: &WebUrl,
    stored: &StoredSecret,
    delivery: DueDelivery,
) {
    let number = delivery.attempts + 1;
    let (http_status, error) = match send(client, &delivery, number, web, stored).await {
        Ok(answer) => (answer.http_status, answer.error),
        Err(refused) => (None, Some(refused.to_string())),
    };
    let now = store.now();
    let since = Duration::from_millis(
        u64::try_from(now.millis() - delivery.notification.created_at.millis()).unwrap_or(0),
    );
    let (status, next_at) = match &error {
        None => (DeliveryStatus::Delivered, None),
        Some(_) => match backoff(number, base, since) {
            Some(wait) => {
                let next =
                    Timestamp(now.millis() + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX));
                (DeliveryStatus::Pending, Some(next))
            }
            None => (DeliveryStatus::Failed, None),
        },
    };
    if let Some(reason) = &error {
        tracing::info!(
            channel = delivery.channel.id,
            delivery = delivery.id,
            attempt = number,
            reason,
            status = status.as_str(),
            "a notification delivery failed"
        );
    }
    let logged = Attempt { attempt: number, at: now, http_status, error };
    let written = async {
        let mut tx = store.begin_write().await?;
        let updated = tx.record_attempt(delivery.id, &logged, status, next_at).await?;
        let event = NotificationsEvent::DeliveryUpdated { delivery: DeliveryDto::from(&updated) };
        crate::publish::notify(&mut tx, Notification::Notifications(event)).await?;
        tx.commit().await?;
        Ok::<(), crate::EngineError>(())
    }
    .await;
    if let Err(err) = written {
        tracing::warn!(delivery = delivery.id, error = %err, "logging a notification delivery failed");
    }
}

/// Sends one attempt of `delivery` (its number `attempt`).
async fn send(
    sender: &Sender,
    delivery: &DueDelivery,
    attempt: u32,
    web: &WebUrl,
    stored: &StoredSecret,
) -> Result<Answer, TargetRefused> {
    let record = &delivery.notification;
    let mut channel = delivery.channel.clone();
    if let Some(name) = &channel.secret_name {
        match stored(name.clone()).await {
            Ok(value) => channel.secret = Some(value),
            // Nothing is sent unsigned: the attempt fails, saying what to add.
            Err(error) => return Ok(Answer { error: Some(error), ..Answer::default() }),
        }
    }
    let out = Outgoing {
        channel: &channel,
        kind: record.kind,
        title: &record.title,
        delivery_id: delivery.id,
        webhook_body: webhook_body(delivery, attempt, web),
    };
    sender.send(out).await
}

/// The JSON a webhook receives: the record (as `notification.list` shows it), the delivery,
/// the attempt number and the task's page (`url`, when the server knows where it is).
fn webhook_body(delivery: &DueDelivery, attempt: u32, web: &WebUrl) -> String {
    let record = &delivery.notification;
    let body = serde_json::json!({
        "notification": NotificationRecordDto::from(record),
        "delivery_id": delivery.id,
        "attempt": attempt,
        "url": web.task(&record.task_id),
    });
    body.to_string()
}
