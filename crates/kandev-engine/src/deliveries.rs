//! Carries notification records out (issue 18): each pending delivery is sent to its channel
//! (a webhook `POST` of the record as JSON, signed with HMAC-SHA256 when the channel has a
//! secret; an ntfy `POST` of the title), every attempt is logged, and a failure is tried
//! again after an exponential back-off (`kandev_domain::notify::backoff`) until 24 h after
//! the notification. Deliveries are rows, so a restart goes on where it stopped.
//!
//! The channel's URL is a secret: it is never logged, and errors are stored and logged
//! without it (reqwest's `without_url`, and the origin in its place should it appear).

use std::time::Duration;

use hmac::{KeyInit, Mac};
use kandev_api_types::{DeliveryDto, Notification, NotificationRecordDto, NotificationsEvent};
use kandev_domain::notify::{
    Attempt, Channel, ChannelKind, DeliveryStatus, NotificationKind, NotificationRecord, backoff,
    url_origin,
};
use kandev_domain::{SessionId, TaskId, Timestamp};
use kandev_store::{DueDelivery, Store};
use sha2::Sha256;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

/// The header carrying a webhook body's signature: `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "x-kandev-signature";
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Deliveries sent per pass.
const BATCH: i64 = 16;

/// Sends due deliveries until `stop`: at once for a new notification (woken by the
/// `notification.created` event of its commit), else when the next retry is due.
fn http_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// `notification.channel.test`: one attempt of a test record (kind: the channel's first
/// event, title "Kandev: test notification", `delivery_id` 0) to `channel`, now; not retried
/// and not in the delivery log. Returns the HTTP status (when an answer came) and why it
/// failed.
pub(crate) async fn test(channel: &Channel, now: Timestamp) -> (Option<u16>, Option<String>) {
    let client = match http_client() {
        Ok(client) => client,
        Err(err) => {
            return (None, Some(format!("cannot build the http client: {}", err.without_url())));
        }
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
    send(&client, &delivery, 1).await
}

pub(crate) async fn deliver(store: Store, base_backoff: Duration, stop: CancellationToken) {
    let client = match http_client() {
        Ok(client) => client,
        Err(err) => {
            tracing::error!(error = %err.without_url(), "cannot build the notification client; nothing is delivered");
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
                attempt(&store, &client, base_backoff, delivery).await;
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
        // (issue 15, fifth session).
        let until = tokio::time::Instant::now() + wait;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep_until(until) => break,
                event = events.recv(), if listening => match event {
                    Ok(event) if event.action != "notification.created" => continue,
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
async fn attempt(store: &Store, client: &reqwest::Client, base: Duration, delivery: DueDelivery) {
    let number = delivery.attempts + 1;
    let (http_status, error) = send(client, &delivery, number).await;
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

/// Sends one delivery; returns the HTTP status (when an answer came) and why it failed.
async fn send(
    client: &reqwest::Client,
    delivery: &DueDelivery,
    attempt: u32,
) -> (Option<u16>, Option<String>) {
    let channel = &delivery.channel;
    let record = &delivery.notification;
    let request = match channel.kind {
        ChannelKind::Webhook => {
            let body = webhook_body(delivery, attempt);
            let mut request = client
                .post(&channel.url)
                .header("content-type", "application/json")
                .header("x-kandev-event", record.kind.as_str())
                .header("x-kandev-delivery", delivery.id.to_string());
            if let Some(secret) = &channel.secret {
                request = request.header(SIGNATURE_HEADER, signature(secret, body.as_bytes()));
            }
            request.body(body)
        }
        ChannelKind::Ntfy => client
            .post(&channel.url)
            .header("Title", format!("Kandev: {}", record.kind.as_str().replace('_', " ")))
            .header("Tags", "robot")
            .body(record.title.clone()),
    };
    match request.send().await {
        Ok(response) if response.status().is_success() => (Some(response.status().as_u16()), None),
        Ok(response) => {
            let status = response.status();
            (Some(status.as_u16()), Some(format!("the receiver answered {status}")))
        }
        Err(err) => (None, Some(scrubbed(&err, &channel.url))),
    }
}

/// The JSON a webhook receives: the record (as `notification.list` shows it), the delivery
/// and the attempt number.
fn webhook_body(delivery: &DueDelivery, attempt: u32) -> String {
    let body = serde_json::json!({
        "notification": NotificationRecordDto::from(&delivery.notification),
        "delivery_id": delivery.id,
        "attempt": attempt,
    });
    body.to_string()
}

/// `sha256=<hex HMAC-SHA256 of body with secret>`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let Ok(mut mac) = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else {
        return String::new(); // HMAC takes keys of any length
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// Why a request failed, without the URL (reqwest puts it in its message).
fn scrubbed(err: &reqwest::Error, url: &str) -> String {
    let mut text = if err.is_timeout() {
        format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs())
    } else if err.is_connect() {
        "could not connect to the receiver".to_owned()
    } else {
        let mut text = String::from("the request failed");
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    };
    if !url.is_empty() && text.contains(url) {
        text = text.replace(url, &url_origin(url));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_rfc_4231_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
