//! Notification records, channels and the delivery log as the API shows them (issue 18). A
//! channel's URL and secret are never answered: only the URL's origin and whether a secret
//! is set.

use kandev_domain::notify::{
    Attempt, Channel, ChannelKind, Delivery, DeliveryStatus, NotificationKind, NotificationRecord,
    url_origin,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

use crate::rfc3339;

/// A kind of event that needs a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum NotificationKindDto {
    PermissionRequested,
    QuestionAsked,
    TurnCompleted,
    SessionFailed,
    PrStateChanged,
}

impl From<NotificationKind> for NotificationKindDto {
    fn from(k: NotificationKind) -> Self {
        match k {
            NotificationKind::PermissionRequested => NotificationKindDto::PermissionRequested,
            NotificationKind::QuestionAsked => NotificationKindDto::QuestionAsked,
            NotificationKind::TurnCompleted => NotificationKindDto::TurnCompleted,
            NotificationKind::SessionFailed => NotificationKindDto::SessionFailed,
            NotificationKind::PrStateChanged => NotificationKindDto::PrStateChanged,
        }
    }
}

impl From<NotificationKindDto> for NotificationKind {
    fn from(k: NotificationKindDto) -> Self {
        match k {
            NotificationKindDto::PermissionRequested => NotificationKind::PermissionRequested,
            NotificationKindDto::QuestionAsked => NotificationKind::QuestionAsked,
            NotificationKindDto::TurnCompleted => NotificationKind::TurnCompleted,
            NotificationKindDto::SessionFailed => NotificationKind::SessionFailed,
            NotificationKindDto::PrStateChanged => NotificationKind::PrStateChanged,
        }
    }
}

/// How a channel delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ChannelKindDto {
    Webhook,
    Ntfy,
}

impl From<ChannelKind> for ChannelKindDto {
    fn from(k: ChannelKind) -> Self {
        match k {
            ChannelKind::Webhook => ChannelKindDto::Webhook,
            ChannelKind::Ntfy => ChannelKindDto::Ntfy,
        }
    }
}

impl From<ChannelKindDto> for ChannelKind {
    fn from(k: ChannelKindDto) -> Self {
        match k {
            ChannelKindDto::Webhook => ChannelKind::Webhook,
            ChannelKindDto::Ntfy => ChannelKind::Ntfy,
        }
    }
}

/// A durable notification record; `seq` is the seq of the event that announced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct NotificationRecordDto {
    pub id: String,
    pub kind: NotificationKindDto,
    pub seq: i64,
    pub task_id: String,
    pub session_id: String,
    pub title: String,
    pub data: Value,
    pub created_at: String,
}

impl From<&NotificationRecord> for NotificationRecordDto {
    fn from(n: &NotificationRecord) -> Self {
        NotificationRecordDto {
            id: n.id.clone(),
            kind: n.kind.into(),
            seq: n.seq,
            task_id: n.task_id.to_string(),
            session_id: n.session_id.to_string(),
            title: n.title.clone(),
            data: serde_json::from_str(&n.data).unwrap_or(Value::Null),
            created_at: rfc3339(n.created_at),
        }
    }
}

/// A channel: `url_origin` is the URL's `scheme://host:port` (the rest of it, and the secret,
/// are never shown).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct ChannelDto {
    pub id: String,
    pub kind: ChannelKindDto,
    pub url_origin: String,
    pub has_secret: bool,
    /// The server secret a webhook signs with (issue 50), by name.
    pub secret_name: Option<String>,
    pub events: Vec<NotificationKindDto>,
    pub created_at: String,
}

impl From<&Channel> for ChannelDto {
    fn from(c: &Channel) -> Self {
        ChannelDto {
            id: c.id.clone(),
            kind: c.kind.into(),
            url_origin: url_origin(&c.url),
            has_secret: c.secret.is_some() || c.secret_name.is_some(),
            secret_name: c.secret_name.clone(),
            events: c.events.iter().map(|&k| k.into()).collect(),
            created_at: rfc3339(c.created_at),
        }
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatusDto {
    Pending,
    Delivered,
    Failed,
}

impl From<DeliveryStatus> for DeliveryStatusDto {
    fn from(s: DeliveryStatus) -> Self {
        match s {
            DeliveryStatus::Pending => DeliveryStatusDto::Pending,
            DeliveryStatus::Delivered => DeliveryStatusDto::Delivered,
            DeliveryStatus::Failed => DeliveryStatusDto::Failed,
        }
    }
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct AttemptDto {
    pub attempt: u32,
    pub at: String,
    pub http_status: Option<u16>,
    pub error: Option<String>,
}

impl From<&Attempt> for AttemptDto {
    fn from(a: &Attempt) -> Self {
        AttemptDto {
            attempt: a.attempt,
            at: rfc3339(a.at),
            http_status: a.http_status,
            error: a.error.clone(),
        }
    }
}

/// A record's delivery to one channel, with every attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct DeliveryDto {
    pub id: i64,
    pub notification_id: String,
    /// Its record's kind, task and title.
    pub kind: NotificationKindDto,
    pub task_id: String,
    pub title: String,
    pub channel_id: String,
    pub status: DeliveryStatusDto,
    pub next_at: Option<String>,
    pub attempts: Vec<AttemptDto>,
}

impl From<&Delivery> for DeliveryDto {
    fn from(d: &Delivery) -> Self {
        DeliveryDto {
            id: d.id,
            notification_id: d.notification_id.clone(),
            kind: d.kind.into(),
            task_id: d.task_id.to_string(),
            title: d.title.clone(),
            channel_id: d.channel_id.clone(),
            status: d.status.into(),
            next_at: d.next_at.map(rfc3339),
            attempts: d.attempts.iter().map(AttemptDto::from).collect(),
        }
    }
}
