//! The WebSocket transport: requests and responses by id, and subscriptions that replay
//! missed notifications from the event log before going live, without gaps or duplicates.

use std::collections::HashMap;

use axum::extract::State;
use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use kandev_api_types::requests::{Subscribe, Unsubscribe};
use kandev_store::{Event, Store};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::dispatch::decode;
use crate::http::{human_bytes, parse_json};
use crate::{ApiError, AppState, dispatch};

/// Frames larger than this close the connection; between the request limit and this, the
/// client gets an error and the connection stays usable.
const HARD_FRAME_LIMIT: usize = 64 * 1024 * 1024;
/// Outgoing frames buffered per connection before the sender waits.
const OUTBOX: usize = 1024;
/// Events read from the store per replay query.
const REPLAY_PAGE: i64 = 1000;
/// Most topics one connection may follow.
const MAX_TOPICS: usize = 1000;

pub async fn upgrade(State(state): State<AppState>, ws: WebSocketUpgrade) -> Response {
    ws.max_message_size(HARD_FRAME_LIMIT)
        .max_frame_size(HARD_FRAME_LIMIT)
        .on_upgrade(move |socket| connection(state, socket))
}

/// A frame from the client.
#[derive(Deserialize)]
struct Request {
    id: Option<Value>,
    #[serde(rename = "type")]
    kind: Option<String>,
    action: Option<String>,
    #[serde(default)]
    payload: Value,
}

fn response(id: &Value, action: &str, payload: Value) -> Message {
    text(json!({ "id": id, "type": "response", "action": action, "payload": payload }))
}

fn error(id: &Value, action: &str, err: &ApiError) -> Message {
    text(json!({ "id": id, "type": "error", "action": action, "payload": err.body() }))
}

fn notification(event: &Event) -> Message {
    text(json!({
        "type": "notification",
        "topic": event.topic,
        "action": event.action,
        "seq": event.seq,
        "payload": event.payload,
    }))
}

fn text(value: Value) -> Message {
    Message::Text(Utf8Bytes::from(value.to_string()))
}

enum SubscriptionCommand {
    Subscribe { id: Value, request: Subscribe },
    Unsubscribe { id: Value, request: Unsubscribe },
}

async fn connection(state: AppState, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let (out, mut outbox) = mpsc::channel::<Message>(OUTBOX);
    let writer = tokio::spawn(async move {
        while let Some(message) = outbox.recv().await {
            if sink.send(message).await.is_err() {
                break;
            }
        }
    });
    let (commands, command_rx) = mpsc::channel(64);
    let subscriptions = tokio::spawn(subscriptions(state.store().clone(), command_rx, out.clone()));
    let closing = state.closing().clone();
    loop {
        let message = tokio::select! {
            _ = closing.cancelled() => {
                let _ = out.send(Message::Close(None)).await;
                break;
            }
            message = stream.next() => match message {
                Some(Ok(message)) => message,
                _ => break,
            },
        };
        match message {
            Message::Text(body) => on_text(&state, body.as_bytes(), &out, &commands).await,
            Message::Binary(body) => on_text(&state, &body, &out, &commands).await,
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    // The client left. Requests it started keep running to completion (lifecycle rule 33);
    // only this connection's delivery tasks stop.
    subscriptions.abort();
    drop(out);
    let _ = writer.await;
}

async fn on_text(
    state: &AppState,
    body: &[u8],
    out: &mpsc::Sender<Message>,
    commands: &mpsc::Sender<SubscriptionCommand>,
) {
    let limit = state.config().max_request_bytes;
    if body.len() > limit {
        let err = ApiError::bad_request(format!("message is larger than {}", human_bytes(limit)));
        let _ = out.send(error(&Value::Null, "", &err)).await;
        return;
    }
    let request = match parse_json(body).and_then(decode::<Request>) {
        Ok(request) => request,
        Err(err) => {
            let err = ApiError::bad_request(err.message);
            let _ = out.send(error(&Value::Null, "", &err)).await;
            return;
        }
    };
    let id = request.id.unwrap_or(Value::Null);
    let Some(action) = request.action.filter(|a| !a.is_empty()) else {
        let _ = out.send(error(&id, "", &ApiError::bad_request("action is required"))).await;
        return;
    };
    if request.kind.as_deref().is_some_and(|k| k != "request") {
        let err = ApiError::bad_request("type must be \"request\"");
        let _ = out.send(error(&id, &action, &err)).await;
        return;
    }
    let command = match action.as_str() {
        "subscribe" => decode(request.payload)
            .map(|request| SubscriptionCommand::Subscribe { id: id.clone(), request }),
        "unsubscribe" => decode(request.payload)
            .map(|request| SubscriptionCommand::Unsubscribe { id: id.clone(), request }),
        _ => {
            spawn_request(state.clone(), id, action, request.payload, out.clone());
            return;
        }
    };
    match command {
        Ok(command) => {
            let _ = commands.send(command).await;
        }
        Err(err) => {
            let _ = out.send(error(&id, &action, &err)).await;
        }
    }
}

/// Runs one request concurrently with the others of the connection; answers by id.
fn spawn_request(
    state: AppState,
    id: Value,
    action: String,
    payload: Value,
    out: mpsc::Sender<Message>,
) {
    tokio::spawn(async move {
        let reply = match dispatch(&state, &action, payload).await {
            Ok(result) => response(&id, &action, result),
            Err(err) => error(&id, &action, &err),
        };
        let _ = out.send(reply).await;
    });
}

fn valid_topic(topic: &str) -> bool {
    let scoped = |prefix: &str| {
        topic.strip_prefix(prefix).is_some_and(|id| {
            !id.is_empty() && id.len() <= 100 && !id.contains(char::is_whitespace)
        })
    };
    matches!(topic, "workspaces" | "profiles") || scoped("workspace:") || scoped("session:")
}

/// The per-connection delivery loop: owns the topic set and the last `seq` sent per topic.
async fn subscriptions(
    store: Store,
    mut commands: mpsc::Receiver<SubscriptionCommand>,
    out: mpsc::Sender<Message>,
) {
    // Subscribed before any replay, so nothing committed after a replay's read can be missed.
    let mut live = store.subscribe();
    let mut sent: HashMap<String, i64> = HashMap::new();
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(command) => {
                    if on_command(&store, command, &mut sent, &out).await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            event = live.recv() => match event {
                Ok(event) => {
                    if deliver(&event, &mut sent, &out).await.is_err() {
                        return;
                    }
                }
                // Fell behind: re-read what was missed from the store, then go on live.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let topics: Vec<String> = sent.keys().cloned().collect();
                    if replay(&store, &topics, &mut sent, &out).await.is_err() {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
        }
    }
}

struct Gone;

async fn deliver(
    event: &Event,
    sent: &mut HashMap<String, i64>,
    out: &mpsc::Sender<Message>,
) -> Result<(), Gone> {
    match sent.get_mut(&event.topic) {
        Some(last) if event.seq > *last => {
            *last = event.seq;
            out.send(notification(event)).await.map_err(|_| Gone)
        }
        _ => Ok(()),
    }
}

async fn on_command(
    store: &Store,
    command: SubscriptionCommand,
    sent: &mut HashMap<String, i64>,
    out: &mpsc::Sender<Message>,
) -> Result<(), Gone> {
    match command {
        SubscriptionCommand::Subscribe { id, request } => {
            let reply = match subscribe(store, request, sent, out).await {
                Ok(topics) => response(&id, "subscribe", json!({ "topics": topics })),
                Err(SubscribeError::Api(err)) => error(&id, "subscribe", &err),
                Err(SubscribeError::Gone) => return Err(Gone),
            };
            out.send(reply).await.map_err(|_| Gone)
        }
        SubscriptionCommand::Unsubscribe { id, request } => {
            for topic in &request.topics {
                sent.remove(topic);
            }
            out.send(response(&id, "unsubscribe", json!({ "topics": request.topics })))
                .await
                .map_err(|_| Gone)
        }
    }
}

enum SubscribeError {
    Api(ApiError),
    Gone,
}

impl From<ApiError> for SubscribeError {
    fn from(err: ApiError) -> Self {
        SubscribeError::Api(err)
    }
}

/// Adds topics, replays what each missed since its `since`, and returns the last `seq` sent
/// per topic. Without `since` a topic starts from now.
async fn subscribe(
    store: &Store,
    request: Subscribe,
    sent: &mut HashMap<String, i64>,
    out: &mpsc::Sender<Message>,
) -> Result<HashMap<String, i64>, SubscribeError> {
    if let Some(bad) = request.topics.iter().find(|t| !valid_topic(t)) {
        let shown: String = bad.chars().take(100).collect();
        return Err(ApiError::validation(format!(
            "unknown topic {shown:?}; use workspaces, profiles, workspace:<id> or session:<id>"
        ))
        .into());
    }
    if let Some(extra) = request.since.keys().find(|t| !request.topics.contains(t)) {
        return Err(
            ApiError::validation(format!("since names {extra:?}, which is not in topics")).into()
        );
    }
    if sent.len() + request.topics.len() > MAX_TOPICS {
        return Err(ApiError::validation(format!(
            "a connection may follow at most {MAX_TOPICS} topics"
        ))
        .into());
    }
    let now = store.last_seq().await.map_err(ApiError::from)?;
    for topic in &request.topics {
        let start = request.since.get(topic).copied().unwrap_or(now).max(0);
        // Re-subscribing never rewinds below what this connection already got.
        let entry = sent.entry(topic.clone()).or_insert(start);
        *entry = (*entry).max(start);
    }
    replay(store, &request.topics, sent, out).await.map_err(|_| SubscribeError::Gone)?;
    Ok(request.topics.iter().map(|t| (t.clone(), sent.get(t).copied().unwrap_or(0))).collect())
}

/// Sends every stored event of `topics` after what was sent, page by page.
async fn replay(
    store: &Store,
    topics: &[String],
    sent: &mut HashMap<String, i64>,
    out: &mpsc::Sender<Message>,
) -> Result<(), Gone> {
    loop {
        let events = match store.events_since(topics, sent, REPLAY_PAGE).await {
            Ok(events) => events,
            Err(err) => {
                tracing::error!(error = %err, "replay from the event log failed");
                return Err(Gone);
            }
        };
        let done = (events.len() as i64) < REPLAY_PAGE;
        for event in &events {
            deliver(event, sent, out).await?;
        }
        if done {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::valid_topic;

    #[test]
    fn topics_are_checked() {
        for ok in ["workspaces", "profiles", "workspace:abc", "session:1"] {
            assert!(valid_topic(ok), "{ok}");
        }
        for bad in ["", "workspace:", "task:1", "session:a b", "everything"] {
            assert!(!valid_topic(bad), "{bad}");
        }
    }
}
