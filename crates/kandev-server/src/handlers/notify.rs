//! `notification.*`: the durable records of events that need a person, the channels that
//! carry them out (webhook, ntfy) and their delivery log (issue 18). A channel's URL and
//! secret are never answered or logged.

use kandev_api_types::requests::{ById, ChannelCreate, DeliveryList, Empty, NotificationList};
use kandev_api_types::responses::{
    ChannelOne, ChannelTested, Channels, Deleted, Deliveries, NotificationRecords,
};
use kandev_api_types::{ChannelDto, DeliveryDto, NotificationRecordDto};
use kandev_domain::notify::{ChannelKind, NotificationKind};
use kandev_store::NewChannel;

use crate::{ApiError, AppState};

/// Most records or deliveries in one answer.
const MAX_LIST: u32 = 1000;

fn limit(limit: Option<u32>) -> Result<i64, ApiError> {
    match limit.unwrap_or(200) {
        l @ 1..=MAX_LIST => Ok(i64::from(l)),
        _ => Err(ApiError::validation(format!("limit must be between 1 and {MAX_LIST}"))),
    }
}

pub async fn list(s: &AppState, p: NotificationList) -> Result<NotificationRecords, ApiError> {
    let records = s.store().list_notifications(p.after_seq.unwrap_or(0), limit(p.limit)?).await?;
    Ok(NotificationRecords {
        notifications: records.iter().map(NotificationRecordDto::from).collect(),
    })
}

/// An `http://` or `https://` URL with a host, one line, at most 2000 characters. The
/// refusal never repeats the URL.
fn checked_url(url: &str) -> Result<String, ApiError> {
    let url = url.trim();
    let host = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .map(|rest| rest.split(['/', '?', '#']).next());
    let refused = |why: &str| ApiError::validation(format!("url {why}"));
    match host {
        Some(Some(host)) if !host.is_empty() => {}
        _ => {
            return Err(refused(
                "must be an http:// or https:// URL with a host, such as http://127.0.0.1:9000/hook",
            ));
        }
    }
    if url.len() > 2000 || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(refused("must be one line without spaces, at most 2000 characters"));
    }
    Ok(url.to_owned())
}

pub async fn channel_create(s: &AppState, p: ChannelCreate) -> Result<ChannelOne, ApiError> {
    let url = checked_url(&p.url)?;
    let mut events: Vec<NotificationKind> = Vec::new();
    for kind in p.events.into_iter().map(NotificationKind::from) {
        if !events.contains(&kind) {
            events.push(kind);
        }
    }
    if events.is_empty() {
        let all: Vec<&str> = NotificationKind::ALL.iter().map(|k| k.as_str()).collect();
        return Err(ApiError::validation(format!(
            "events must name at least one of {}",
            all.join(", ")
        )));
    }
    let secret = match p.secret {
        Some(secret) if secret.is_empty() || secret.len() > 200 => {
            return Err(ApiError::validation("secret must be 1 to 200 bytes"));
        }
        other => other,
    };
    let kind = ChannelKind::from(p.kind);
    if kind == ChannelKind::Ntfy && secret.is_some() {
        return Err(ApiError::validation("secret signs webhooks only; leave it out for ntfy"));
    }
    let channel = s.engine().create_channel(&NewChannel { kind, url, secret, events }).await?;
    Ok(ChannelOne { channel: ChannelDto::from(&channel) })
}

pub async fn channel_list(s: &AppState, _: Empty) -> Result<Channels, ApiError> {
    let channels = s.store().list_channels().await?;
    Ok(Channels { channels: channels.iter().map(ChannelDto::from).collect() })
}

pub async fn channel_delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_channel(&p.id).await?;
    Ok(Deleted { deleted: true, id: p.id })
}

/// Sends one test notification to the channel now and answers what the receiver said; a
/// receiver whose address is not allowed is `FORBIDDEN`, saying why and how to allow it.
pub async fn channel_test(s: &AppState, p: ById) -> Result<ChannelTested, ApiError> {
    let channels = s.store().list_channels().await?;
    let Some(channel) = channels.into_iter().find(|c| c.id == p.id) else {
        return Err(ApiError::not_found("no such notification channel"));
    };
    let (http_status, error) = s.engine().test_channel(&channel).await?;
    Ok(ChannelTested { delivered: error.is_none(), http_status, error })
}

pub async fn delivery_list(s: &AppState, p: DeliveryList) -> Result<Deliveries, ApiError> {
    let deliveries = s.store().list_deliveries(p.channel_id.as_deref(), limit(p.limit)?).await?;
    Ok(Deliveries { deliveries: deliveries.iter().map(DeliveryDto::from).collect() })
}
