//! `notification.*`: the durable records of events that need a person, the channels that
//! carry them out (webhook, ntfy) and their delivery log (issue 18). A channel's URL and
//! secret are never answered or logged.

use kandev_api_types::requests::{
    ById, ChannelCreate, ChannelUpdate, DeliveryList, DeliveryRetry, Empty, NotificationList,
};
use kandev_api_types::responses::{
    ChannelOne, ChannelTested, Channels, Deleted, Deliveries, DeliveryOne, NotificationRecords,
};
use kandev_api_types::{ChannelDto, DeliveryDto, NotificationRecordDto};
use kandev_domain::notify::{ChannelKind, NotificationKind};
use kandev_store::NewChannel;

use std::collections::HashMap;

use kandev_domain::TaskId;

use crate::accounts::Identity;
use crate::roles::Grants;
use crate::{ApiError, AppState};

/// Most records or deliveries in one answer.
const MAX_LIST: u32 = 1000;

fn limit(limit: Option<u32>) -> Result<i64, ApiError> {
    match limit.unwrap_or(200) {
        l @ 1..=MAX_LIST => Ok(i64::from(l)),
        _ => Err(ApiError::validation(format!("limit must be between 1 and {MAX_LIST}"))),
    }
}

/// `notification.list`: the records of the workspaces the caller belongs to (issue 49).
pub async fn list(
    s: &AppState,
    who: &Identity,
    p: NotificationList,
) -> Result<NotificationRecords, ApiError> {
    let limit = limit(p.limit)?;
    let grants = crate::roles::grants(s, who).await?;
    let mut after = p.after_seq.unwrap_or(0);
    let mut shown = Vec::new();
    let mut workspaces: HashMap<TaskId, Option<String>> = HashMap::new();
    // Others' records are skipped, so read on until the page is full or the log ends.
    loop {
        let records = s.store().list_notifications(after, limit).await?;
        let ended = (records.len() as i64) < limit;
        for record in records {
            after = record.seq;
            if grants != Grants::All {
                if !workspaces.contains_key(&record.task_id) {
                    let found = s.store().get_task(&record.task_id).await.ok();
                    let workspace = found.map(|t| t.workspace_id.to_string());
                    workspaces.insert(record.task_id.clone(), workspace);
                }
                let workspace = workspaces.get(&record.task_id).cloned().flatten();
                if !workspace.is_some_and(|w| grants.sees(&w)) {
                    continue;
                }
            }
            shown.push(NotificationRecordDto::from(&record));
            if shown.len() as i64 == limit {
                return Ok(NotificationRecords { notifications: shown });
            }
        }
        if ended {
            return Ok(NotificationRecords { notifications: shown });
        }
    }
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

/// The kinds a channel carries, each once; at least one.
fn checked_events(
    events: Vec<kandev_api_types::NotificationKindDto>,
) -> Result<Vec<NotificationKind>, ApiError> {
    let mut kinds: Vec<NotificationKind> = Vec::new();
    for kind in events.into_iter().map(NotificationKind::from) {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    if kinds.is_empty() {
        return Err(ApiError::validation("choose at least one event to send"));
    }
    Ok(kinds)
}

/// The name of the server secret a webhook signs with (issue 50).
fn stored_secret(name: &str) -> Result<String, ApiError> {
    kandev_domain::secret::secret_name(name)
        .map_err(|e| ApiError::validation(format!("the stored secret {}", e.problem)))
}

/// A webhook's signing secret: 1 to 200 bytes.
fn checked_secret(secret: Option<String>) -> Result<Option<String>, ApiError> {
    match secret {
        Some(secret) if secret.is_empty() || secret.len() > 200 => {
            Err(ApiError::validation("the secret must be 1 to 200 bytes"))
        }
        other => Ok(other),
    }
}

pub async fn channel_create(s: &AppState, p: ChannelCreate) -> Result<ChannelOne, ApiError> {
    let url = checked_url(&p.url)?;
    let events = checked_events(p.events)?;
    let secret = checked_secret(p.secret)?;
    let secret_name = p.secret_name.as_deref().map(stored_secret).transpose()?;
    let kind = ChannelKind::from(p.kind);
    if kind == ChannelKind::Ntfy && (secret.is_some() || secret_name.is_some()) {
        return Err(ApiError::validation("secret signs webhooks only; leave it out for ntfy"));
    }
    if secret.is_some() && secret_name.is_some() {
        return Err(ApiError::validation("give a secret or a stored secret's name, not both"));
    }
    let new = NewChannel { kind, url, secret, secret_name, events };
    let channel = s.engine().create_channel(&new).await?;
    Ok(ChannelOne { channel: ChannelDto::from(&channel) })
}

pub async fn channel_list(s: &AppState, _: Empty) -> Result<Channels, ApiError> {
    let channels = s.store().list_channels().await?;
    Ok(Channels { channels: channels.iter().map(ChannelDto::from).collect() })
}

pub async fn channel_update(s: &AppState, p: ChannelUpdate) -> Result<ChannelOne, ApiError> {
    let url = p.url.as_deref().map(checked_url).transpose()?;
    let events = p.events.map(checked_events).transpose()?;
    let secret = p.secret.map(checked_secret).transpose()?;
    let secret_name =
        p.secret_name.map(|n| n.as_deref().map(stored_secret).transpose()).transpose()?;
    if matches!(secret, Some(Some(_))) && matches!(secret_name, Some(Some(_))) {
        return Err(ApiError::validation("give a secret or a stored secret's name, not both"));
    }
    if matches!(secret, Some(Some(_))) || matches!(secret_name, Some(Some(_))) {
        let channels = s.store().list_channels().await?;
        if channels.iter().any(|c| c.id == p.id && c.kind == ChannelKind::Ntfy) {
            return Err(ApiError::validation("a secret signs webhooks only; ntfy has none"));
        }
    }
    let channel = s
        .engine()
        .update_channel(
            &p.id,
            url.as_deref(),
            events.as_deref(),
            secret.as_ref().map(Option::as_deref),
            secret_name.as_ref().map(Option::as_deref),
        )
        .await?;
    Ok(ChannelOne { channel: ChannelDto::from(&channel) })
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
    let answer = s.engine().test_channel(&channel).await?;
    Ok(ChannelTested {
        delivered: answer.error.is_none(),
        http_status: answer.http_status,
        error: answer.error,
        body: answer.body,
    })
}

pub async fn delivery_list(s: &AppState, p: DeliveryList) -> Result<Deliveries, ApiError> {
    let deliveries = s.store().list_deliveries(p.channel_id.as_deref(), limit(p.limit)?).await?;
    Ok(Deliveries { deliveries: deliveries.iter().map(DeliveryDto::from).collect() })
}

/// Tries a waiting or failed delivery again now (the delivery log's "Retry now").
pub async fn delivery_retry(s: &AppState, p: DeliveryRetry) -> Result<DeliveryOne, ApiError> {
    let delivery = s.engine().retry_delivery(p.id).await?;
    Ok(DeliveryOne { delivery: DeliveryDto::from(&delivery) })
}
