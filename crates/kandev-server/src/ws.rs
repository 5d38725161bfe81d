//! The WebSocket transport: requests and responses by id, and subscriptions that replay
//! missed notifications from the event log before going live, without gaps or duplicates.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use kandev_api_types::actions;
use kandev_api_types::notifications::{
    NOTIFICATIONS_TOPIC, PROFILES_TOPIC, SESSION_TOPIC_PREFIX, WORKSPACE_TOPIC_PREFIX,
    WORKSPACES_TOPIC,
};
use kandev_api_types::requests::{Subscribe, Unsubscribe};
use kandev_api_types::responses::{Subscribed, Unsubscribed};
use kandev_api_types::{Action, Frame as Envelope, RequestFrame, frame};
use kandev_store::{Event, Store};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::access::Credential;
use crate::accounts::Identity;
use crate::dispatch::decode;
use crate::http::{human_bytes, parse_json};
use crate::outbox::{Outbox, Refused};
use crate::routes::{Behind, Follower, Frames, Routes, Weight};
use crate::visibility::Visibility;
use crate::ws_terminals::{Streams, on_frame};
use crate::{ApiError, AppState, dispatch};

/// Frames larger than this close the connection; between the request limit and this, the
/// client gets an error and the connection stays usable.
const HARD_FRAME_LIMIT: usize = 64 * 1024 * 1024;
/// Most events read from the store per replay query (held in memory while they are sent).
const REPLAY_PAGE: i64 = 256;
/// The first replay query reads this many; later ones as many as fit [`REPLAY_PAGE_BYTES`]
/// at the size of the events read so far, so a page of streamed chunks (up to 64 KiB each)
/// holds about 1 MiB, not 16 (issue 38 item 3).
const FIRST_REPLAY_PAGE: i64 = 16;
const REPLAY_PAGE_BYTES: usize = 1024 * 1024;
/// Most topics one connection may follow.
const MAX_TOPICS: usize = 1000;
/// tungstenite's buffers per connection (its default is 128 KiB each; they grow as needed).
const SOCKET_BUFFER: usize = 16 * 1024;
/// Most frames the writer sends with one flush.
const WRITE_BATCH: usize = 256;
/// Bytes of notifications that may wait for a connection's delivery loop, as a multiple of
/// its queue (`ServerConfig::ws_queue_bytes`: 4 MiB by default). Past it the client reads
/// too slowly for what it follows and is told `resync_required` (issue 38 item 3); the
/// frames are shared with every other follower, so what one slow connection holds by itself
/// is its queue and its socket's buffers.
const WAITING_PER_QUEUE: usize = 16;

/// A committed event as every connection sends it: serialized once, shared by reference, so
/// a thousand subscribers queue one copy.
pub struct Frame {
    topic: Arc<str>,
    seq: i64,
    text: Utf8Bytes,
}

impl Frame {
    fn of(event: &Event) -> Frame {
        Frame { topic: event.topic.as_str().into(), seq: event.seq, text: notification(event) }
    }
}

impl Weight for Frame {
    fn weight(&self) -> usize {
        self.text.len()
    }
}

/// Serializes each committed event once, for the connections that follow its topic only
/// (`routes.rs`), until `shutdown`. An event nobody follows is not serialized at all.
pub async fn fan_out(
    mut events: broadcast::Receiver<std::sync::Arc<Event>>,
    routes: Arc<Routes<Frame>>,
    shutdown: CancellationToken,
) {
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = events.recv() => event,
        };
        match event {
            Ok(event) => routes.publish_with(&event.topic, || Frame::of(&event)),
            // Fell behind the store: everyone re-reads what they follow.
            Err(broadcast::error::RecvError::Lagged(_)) => routes.all_behind(),
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

pub async fn upgrade(
    State(state): State<AppState>,
    Extension(identity): Extension<Identity>,
    credential: Option<Extension<Credential>>,
    ws: WebSocketUpgrade,
) -> Response {
    // Registered while it is open, so it closes when its access ends (`access.rs`).
    let credential = credential.map(|Extension(c)| c);
    let access =
        match state.live().register(state.store(), &identity, credential, state.closing()).await {
            Ok(Some(access)) => access,
            Ok(None) => return ApiError::unauthorized().into_response(),
            Err(err) => return ApiError::from(err).into_response(),
        };
    ws.max_message_size(HARD_FRAME_LIMIT)
        .max_frame_size(HARD_FRAME_LIMIT)
        .read_buffer_size(SOCKET_BUFFER)
        .write_buffer_size(SOCKET_BUFFER)
        .on_upgrade(move |socket| async move {
            connection(state, identity, socket, access.ending(), access.changed()).await;
            drop(access);
        })
}

/// The close code of a WebSocket whose access ended (a logout, a revoked token, a removed
/// user, a changed password, or the first user added to an open server): an application
/// code (4000-4999), like HTTP's 401.
pub const ACCESS_ENDED: u16 = 4401;

/// The close code of a WebSocket whose user's roles changed (issue 49): the page reconnects
/// and follows what it may see now.
pub const ROLES_CHANGED: u16 = 4409;

/// An answer already in JSON text (from `dispatch`), copied into its frame as it is.
fn response(id: &Value, action: &str, payload: Box<RawValue>) -> Message {
    let frame = Envelope::Response {
        id: Cow::Borrowed(id),
        action: action.into(),
        payload: Cow::Owned(payload),
    };
    message(&frame).unwrap_or_else(|| error(id, action, &ApiError::internal()))
}

/// An answer the connection builds itself (subscriptions, terminal attach).
fn typed_response(id: &Value, action: &str, payload: impl Serialize) -> Message {
    match serde_json::value::to_raw_value(&payload) {
        Ok(raw) => response(id, action, raw),
        Err(err) => {
            tracing::error!(action, error = %err, "cannot serialize a response");
            error(id, action, &ApiError::internal())
        }
    }
}

fn error(id: &Value, action: &str, err: &ApiError) -> Message {
    let frame =
        Envelope::Error { id: Cow::Borrowed(id), action: action.into(), payload: err.body() };
    // An error body is strings and JSON values: it serializes.
    message(&frame).unwrap_or_else(|| Message::Text(Utf8Bytes::from_static(r#"{"type":"error"}"#)))
}

/// The frame of a committed event: its payload is JSON text already (serialized once when
/// the notification was built, the same text as its row), copied into the frame as it is.
fn notification(event: &Event) -> Utf8Bytes {
    let frame = Envelope::Notification {
        topic: Cow::Borrowed(&event.topic),
        action: Cow::Borrowed(&event.action),
        seq: event.seq,
        payload: Cow::Borrowed(event.payload.raw()),
    };
    // Cannot fail: strings, a number and JSON text.
    sized(frame.to_text().unwrap_or_default())
}

/// Rule 47: the topic is no longer followed; the client reloads its objects and subscribes
/// again (without `since`, or with one of at least `oldest_seq - 1`).
fn resync_required(topic: &str, oldest_seq: i64) -> Message {
    let frame = Envelope::ResyncRequired { topic: topic.into(), oldest_seq };
    message(&frame).unwrap_or_else(|| Message::Text(Utf8Bytes::from_static("{}")))
}

/// A frame as a text message, or `None` (logged) if it does not serialize.
fn message(frame: &Envelope<'_>) -> Option<Message> {
    match frame.to_text() {
        Ok(text) => Some(Message::Text(sized(text))),
        Err(err) => {
            tracing::error!(frame = frame.type_name(), error = %err, "cannot serialize a frame");
            None
        }
    }
}

/// Queued frames are counted by length: their allocation is kept no bigger than that.
fn sized(mut text: String) -> Utf8Bytes {
    text.shrink_to_fit();
    Utf8Bytes::from(text)
}

enum SubscriptionCommand {
    Subscribe { id: Value, request: Subscribe },
    Unsubscribe { id: Value, request: Unsubscribe },
}

/// One WebSocket; every request on it runs as `identity`, who opened it. It closes when
/// `closing` is cancelled (shutdown, or the end of its access).
async fn connection(
    state: AppState,
    identity: Identity,
    socket: WebSocket,
    closing: CancellationToken,
    changed: CancellationToken,
) {
    let (mut sink, mut stream) = socket.split();
    let config = state.config();
    let outbox = Outbox::new(config.ws_queue_bytes, config.ws_queue_wait);
    // The connection's own tasks: the writer and the delivery loop. Dropping the set (the
    // connection ended) aborts whatever is left of them.
    let mut tasks = JoinSet::new();
    // Ends when the client is gone or stopped reading for the write timeout (the socket's
    // writes then fail), which ends the connection.
    let writer_done = CancellationToken::new();
    tasks.spawn({
        let outbox = outbox.clone();
        let done = writer_done.clone();
        async move {
            // Frames ready together go out with one flush (one write of the socket).
            'write: while let Some(batch) = outbox.next_batch(WRITE_BATCH).await {
                for message in batch {
                    if sink.feed(message).await.is_err() {
                        break 'write;
                    }
                }
                if sink.flush().await.is_err() {
                    break;
                }
            }
            done.cancel();
        }
    });
    let (commands, command_rx) = mpsc::channel(64);
    // Each topic is routed here before its replay is read (`subscribe`), so nothing
    // committed after that read can be missed.
    let waiting = config.ws_queue_bytes.saturating_mul(WAITING_PER_QUEUE);
    let (follower, frames) = state.routes().connect(waiting);
    let visibility = match crate::roles::grants(&state, &identity).await {
        Ok(grants) => Visibility::of(&grants),
        Err(err) => {
            tracing::error!(error = %err.message, "cannot read a WebSocket user's roles");
            return;
        }
    };
    let followed = Followed { sent: HashMap::new(), follower, visibility };
    let store = state.store().clone();
    let subscriptions =
        tasks.spawn(subscriptions(store, followed, frames, command_rx, outbox.clone()));
    // This connection's terminal streams; dropped (stopped) when it ends.
    let mut streams = Streams::default();
    loop {
        let message = tokio::select! {
            _ = closing.cancelled() => {
                // The server going away closes plainly; access that ended says so, and the
                // page goes to the login form (`web/src/api/live.ts`).
                let frame = (!state.closing().is_cancelled()).then(|| CloseFrame {
                    code: ACCESS_ENDED,
                    reason: "access ended; log in again".into(),
                });
                let _ = outbox.push_now(Message::Close(frame));
                break;
            }
            _ = changed.cancelled() => {
                let frame =
                    CloseFrame { code: ROLES_CHANGED, reason: "your roles changed; reconnect".into() };
                let _ = outbox.push_now(Message::Close(Some(frame)));
                break;
            }
            _ = writer_done.cancelled() => break,
            message = stream.next() => match message {
                Some(Ok(message)) => message,
                _ => break,
            },
        };
        match message {
            Message::Text(body) => {
                on_text(&state, &identity, body.as_bytes(), &outbox, &commands, &mut streams).await
            }
            // A terminal's input or resize; any other binary frame is a JSON request.
            Message::Binary(body)
                if body.first().is_some_and(|k| [frame::INPUT, frame::RESIZE].contains(k)) =>
            {
                if let Err((action, err)) = on_frame(&state, &identity, &streams, &body).await {
                    reply(&outbox, error(&Value::Null, action, &err)).await;
                }
            }
            Message::Binary(body) => {
                on_text(&state, &identity, &body, &outbox, &commands, &mut streams).await
            }
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    // The client left. Requests it started keep running to completion (lifecycle rule 33);
    // only this connection's delivery tasks and terminal streams stop.
    drop(streams);
    subscriptions.abort();
    outbox.close();
    // The writer sends what is queued; the write timeout bounds this wait for a client that
    // does not read.
    while tasks.join_next().await.is_some() {}
    outbox.shut();
}

async fn on_text(
    state: &AppState,
    identity: &Identity,
    body: &[u8],
    out: &Arc<Outbox>,
    commands: &mpsc::Sender<SubscriptionCommand>,
    streams: &mut Streams,
) {
    let limit = state.config().max_request_bytes;
    if body.len() > limit {
        let err = ApiError::bad_request(format!("message is larger than {}", human_bytes(limit)));
        reply(out, error(&Value::Null, "", &err)).await;
        return;
    }
    let request = match parse_json(body).and_then(decode::<RequestFrame>) {
        Ok(request) => request,
        Err(err) => {
            let err = ApiError::bad_request(err.message);
            reply(out, error(&Value::Null, "", &err)).await;
            return;
        }
    };
    let id = request.id.unwrap_or(Value::Null);
    let Some(action) = request.action.filter(|a| !a.is_empty()) else {
        reply(out, error(&id, "", &ApiError::bad_request("action is required"))).await;
        return;
    };
    if request.kind.as_deref().is_some_and(|k| k != "request") {
        let err = ApiError::bad_request("type must be \"request\"");
        reply(out, error(&id, &action, &err)).await;
        return;
    }
    let command = match action.as_str() {
        actions::Subscribe::NAME => decode(request.payload)
            .map(|request| SubscriptionCommand::Subscribe { id: id.clone(), request }),
        actions::Unsubscribe::NAME => decode(request.payload)
            .map(|request| SubscriptionCommand::Unsubscribe { id: id.clone(), request }),
        actions::TerminalAttach::NAME | actions::TerminalDetach::NAME => {
            if action == actions::TerminalAttach::NAME
                && let Err(err) = may_attach(state, identity, &request.payload).await
            {
                reply(out, error(&id, &action, &err)).await;
                return;
            }
            match streams.handle(state, &action, request.payload) {
                Ok((answer, stream)) => {
                    if reply(out, typed_response(&id, &action, answer)).await
                        && let Some((terminal, handle)) = stream
                    {
                        streams.start(terminal, handle, out.clone());
                    }
                }
                Err(err) => {
                    reply(out, error(&id, &action, &err)).await;
                }
            }
            return;
        }
        _ => {
            spawn_request(
                state.clone(),
                identity.clone(),
                id,
                action,
                request.payload,
                out.clone(),
            );
            return;
        }
    };
    match command {
        Ok(command) => {
            let _ = commands.send(command).await;
        }
        Err(err) => {
            reply(out, error(&id, &action, &err)).await;
        }
    }
}

/// `terminal.attach`'s access rule (issue 49): following a dev server's log is reading its
/// task (a viewer); attaching a user's shell is using a shell on the server (an admin).
async fn may_attach(
    state: &AppState,
    identity: &Identity,
    payload: &Value,
) -> Result<(), ApiError> {
    let id = payload.get("terminal_id").and_then(Value::as_str).unwrap_or_default();
    let shell = state.engine().terminal(id).is_ok_and(|(_, handle)| handle.is_shell());
    let access =
        if shell { crate::ws_terminals::SHELL_ACCESS } else { actions::TerminalAttach::ACCESS };
    let grants = crate::roles::grants(state, identity).await?;
    crate::roles::precheck(&grants, access)?;
    crate::roles::check_subjects(state, &grants, access, &[id]).await?;
    Ok(())
}

/// Queues an answer. A client that leaves its answers unread past the wait is disconnected:
/// answers cannot be dropped like notifications.
async fn reply(out: &Outbox, message: Message) -> bool {
    match out.push(message, None).await {
        Ok(()) => true,
        Err(Refused::Full) => {
            tracing::info!("a WebSocket client does not read its answers; disconnecting it");
            out.shut();
            false
        }
        Err(Refused::Closed) => false,
    }
}

/// Runs one request concurrently with the others of the connection; answers by id. The
/// request is the server's task, not the connection's: a client that leaves does not cancel
/// it (rule 33), and shutdown waits for it.
fn spawn_request(
    state: AppState,
    identity: Identity,
    id: Value,
    action: String,
    payload: Value,
    out: Arc<Outbox>,
) {
    let tasks = state.tasks().clone();
    tasks.spawn(async move {
        let answer = match dispatch(&state, &identity, &action, payload).await {
            Ok(result) => response(&id, &action, result),
            Err(err) => error(&id, &action, &err),
        };
        reply(&out, answer).await;
    });
}

fn valid_topic(topic: &str) -> bool {
    let scoped = |prefix: &str| {
        topic.strip_prefix(prefix).is_some_and(|id| {
            !id.is_empty() && id.len() <= 100 && !id.contains(char::is_whitespace)
        })
    };
    topic == WORKSPACES_TOPIC
        || topic == PROFILES_TOPIC
        || topic == NOTIFICATIONS_TOPIC
        || scoped(WORKSPACE_TOPIC_PREFIX)
        || scoped(SESSION_TOPIC_PREFIX)
}

/// The topics a connection follows with the last `seq` sent of each, and its entry in the
/// routing table: a topic stops being routed here when it stops being followed.
struct Followed {
    sent: HashMap<String, i64>,
    follower: Follower<Frame>,
    /// What this connection's user may see (issue 49).
    visibility: Visibility,
}

impl Followed {
    fn contains(&self, topic: &str) -> bool {
        self.sent.contains_key(topic)
    }

    fn topics(&self) -> Vec<String> {
        self.sent.keys().cloned().collect()
    }

    /// Starts following `topic` after `seq` (never rewinding what was sent).
    fn start(&mut self, topic: &str, seq: i64) {
        let entry = self.sent.entry(topic.to_owned()).or_insert(seq);
        *entry = (*entry).max(seq);
    }

    fn stop(&mut self, topic: &str) {
        self.sent.remove(topic);
        self.follower.unfollow(topic);
    }
}

/// The per-connection delivery loop: owns the topic set and the last `seq` sent per topic.
async fn subscriptions(
    store: Store,
    mut followed: Followed,
    mut frames: Frames<Frame>,
    mut commands: mpsc::Receiver<SubscriptionCommand>,
    out: Arc<Outbox>,
) {
    let result = loop {
        let step = tokio::select! {
            // "Behind" first: it was signalled before any frame queued after the ones it
            // missed, and taking such a frame first would move `sent` past the missed ones
            // (`i15_a3_a_connection_told_it_is_behind_replays_before_it_takes_a_newer_frame`).
            biased;
            // Frames did not fit this connection's queue, or the fan-out fell behind.
            behind = followed.follower.behind() => {
                on_behind(&store, behind, &mut followed, &out).await
            }
            command = commands.recv() => match command {
                Some(command) => on_command(&store, command, &mut followed, &out).await,
                None => Err(Gone),
            },
            frame = frames.recv() => match frame {
                Some(frame) => deliver(&store, &frame, &mut followed, &out).await,
                None => Err(Gone),
            },
        };
        if step.is_err() {
            break step;
        }
    };
    if result.is_err() {
        out.shut();
    }
}

/// Frames of `overflowed` topics did not fit the routed queue: the client reads too slowly
/// for them and must resync (issue 38 item 3): re-reading them from the event log instead
/// would hold a replay page per slow connection for as long as it stayed behind (R8's slow
/// readers: 317 MB within a second). When the fan-out fell behind the store (`gap`),
/// every topic still followed is re-read.
async fn on_behind(
    store: &Store,
    behind: Behind,
    followed: &mut Followed,
    out: &Outbox,
) -> Result<(), Gone> {
    let Behind { overflowed, gap } = behind;
    if !overflowed.is_empty() {
        let overflowed: Vec<String> = overflowed.iter().map(|t| t.to_string()).collect();
        shed(store, &overflowed, followed, out).await?;
    }
    if gap {
        let topics = followed.topics();
        replay(store, &topics, followed, out).await?;
    }
    Ok(())
}

/// The connection cannot go on (closed, or its answers are not read).
struct Gone;

/// Sends one event to the client if it follows the topic and has not had it yet.
async fn deliver(
    store: &Store,
    frame: &Frame,
    followed: &mut Followed,
    out: &Outbox,
) -> Result<(), Gone> {
    let Some(last) = followed.sent.get_mut(&*frame.topic) else { return Ok(()) };
    if frame.seq <= *last {
        return Ok(());
    }
    *last = frame.seq;
    if !followed.visibility.shows(store, &frame.topic, frame.text.as_str()).await {
        return Ok(());
    }
    let message = Message::Text(frame.text.clone());
    match out.push(message, Some(frame.topic.clone())).await {
        Ok(()) => Ok(()),
        Err(Refused::Closed) => Err(Gone),
        Err(Refused::Full) => shed(store, &[frame.topic.to_string()], followed, out).await,
    }
}

/// The client stopped reading, or reads too slowly for `behind` (more than its bound waits
/// for it): drop every notification queued for it, stop following those topics and
/// `behind`, and tell it to resync each (rule 47), so it holds no more than a few small
/// frames.
async fn shed(
    store: &Store,
    behind: &[String],
    followed: &mut Followed,
    out: &Outbox,
) -> Result<(), Gone> {
    let mut topics: Vec<String> =
        out.drop_notifications().into_iter().map(|t| t.to_string()).collect();
    topics.extend(behind.iter().cloned());
    topics.sort();
    topics.dedup();
    topics.retain(|t| followed.contains(t));
    tracing::info!(topics = topics.len(), "a WebSocket client fell behind; it must resync");
    for topic in topics {
        followed.stop(&topic);
        tell_resync(store, &topic, out).await?;
    }
    Ok(())
}

async fn tell_resync(store: &Store, topic: &str, out: &Outbox) -> Result<(), Gone> {
    let oldest = store.oldest_seq(topic).await.map_err(|err| {
        tracing::error!(error = %err, "reading the event log failed");
        Gone
    })?;
    out.push_now(resync_required(topic, oldest)).map_err(|_| Gone)
}

async fn on_command(
    store: &Store,
    command: SubscriptionCommand,
    followed: &mut Followed,
    out: &Outbox,
) -> Result<(), Gone> {
    let answer = match command {
        SubscriptionCommand::Subscribe { id, request } => {
            let name = actions::Subscribe::NAME;
            match subscribe(store, request, followed, out).await {
                Ok(topics) => typed_response(&id, name, Subscribed { topics }),
                Err(SubscribeError::Api(err)) => error(&id, name, &err),
                Err(SubscribeError::Gone) => return Err(Gone),
            }
        }
        SubscriptionCommand::Unsubscribe { id, request } => {
            for topic in &request.topics {
                followed.stop(topic);
            }
            let topics = request.topics;
            typed_response(&id, actions::Unsubscribe::NAME, Unsubscribed { topics })
        }
    };
    if reply(out, answer).await { Ok(()) } else { Err(Gone) }
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

impl From<Gone> for SubscribeError {
    fn from(_: Gone) -> Self {
        SubscribeError::Gone
    }
}

/// Adds topics, replays what each missed since its `since`, and returns the last `seq` sent
/// per followed topic. Without `since` a topic starts from now. A `since` the log can no
/// longer replay (rule 47) gets `resync_required` instead, and that topic is not followed.
async fn subscribe(
    store: &Store,
    request: Subscribe,
    followed: &mut Followed,
    out: &Outbox,
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
    for topic in &request.topics {
        if !followed.contains(topic) && !followed.visibility.may_follow(store, topic).await {
            let shown: String = topic.chars().take(100).collect();
            return Err(ApiError::not_found(format!(
                "topic {shown} not found: its workspace is not one you belong to"
            ))
            .into());
        }
    }
    if followed.sent.len() + request.topics.len() > MAX_TOPICS {
        return Err(ApiError::validation(format!(
            "a connection may follow at most {MAX_TOPICS} topics"
        ))
        .into());
    }
    // A topic this connection already follows has had everything live: no gap to check.
    let rewinds: HashMap<String, i64> = request
        .since
        .iter()
        .filter(|(topic, _)| !followed.contains(topic))
        .map(|(topic, seq)| (topic.clone(), (*seq).max(0)))
        .collect();
    // Routed here before `now` is read: whatever commits after it reaches this connection.
    for topic in &request.topics {
        followed.follower.follow(topic);
    }
    let prepared = prepare(store, &rewinds).await;
    let (gaps, now) = match prepared {
        Ok(read) => read,
        Err(err) => {
            unfollow_new(followed, &request.topics);
            return Err(err.into());
        }
    };
    for topic in &request.topics {
        if let Some(oldest) = gaps.get(topic) {
            followed.stop(topic);
            out.push_now(resync_required(topic, *oldest)).map_err(|_| Gone)?;
            continue;
        }
        let start = request.since.get(topic).copied().unwrap_or(now).max(0);
        // Re-subscribing never rewinds below what this connection already got.
        followed.start(topic, start);
    }
    replay(store, &request.topics, followed, out).await?;
    // Pruning may have run during the replay: a topic it cut into must resync too.
    let replayed: HashMap<String, i64> = rewinds
        .into_iter()
        .filter(|(topic, _)| !gaps.contains_key(topic) && followed.contains(topic))
        .collect();
    for (topic, oldest) in store.unreplayable(&replayed).await.map_err(ApiError::from)? {
        followed.stop(&topic);
        out.push_now(resync_required(&topic, oldest)).map_err(|_| Gone)?;
    }
    Ok(request.topics.iter().filter_map(|t| Some((t.clone(), *followed.sent.get(t)?))).collect())
}

/// Which rewound topics the log can no longer replay (rule 47), and the last `seq` now.
async fn prepare(
    store: &Store,
    rewinds: &HashMap<String, i64>,
) -> Result<(HashMap<String, i64>, i64), ApiError> {
    let gaps = store.unreplayable(rewinds).await.map_err(ApiError::from)?;
    let now = store.last_seq().await.map_err(ApiError::from)?;
    Ok((gaps, now))
}

/// A refused subscribe routes nothing new here (topics followed before stay).
fn unfollow_new(followed: &Followed, topics: &[String]) {
    for topic in topics.iter().filter(|t| !followed.contains(t)) {
        followed.follower.unfollow(topic);
    }
}

/// Sends every stored event of the followed `topics` after what was sent, page by page.
async fn replay(
    store: &Store,
    topics: &[String],
    followed: &mut Followed,
    out: &Outbox,
) -> Result<(), Gone> {
    let mut page = FIRST_REPLAY_PAGE;
    loop {
        // A topic shed on the way (the client stopped reading) is no longer replayed.
        let active: Vec<String> = topics.iter().filter(|t| followed.contains(t)).cloned().collect();
        if active.is_empty() {
            return Ok(());
        }
        let events = match store.events_since(&active, &followed.sent, page).await {
            Ok(events) => events,
            Err(err) => {
                tracing::error!(error = %err, "replay from the event log failed");
                return Err(Gone);
            }
        };
        let done = (events.len() as i64) < page;
        let bytes: usize = events.iter().map(|e| e.payload.get().len()).sum();
        let each = (bytes / events.len().max(1)).max(1);
        page = ((REPLAY_PAGE_BYTES / each) as i64).clamp(FIRST_REPLAY_PAGE, REPLAY_PAGE);
        for event in &events {
            deliver(store, &Frame::of(event), followed, out).await?;
        }
        if done {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use axum::extract::ws::Message;
    use kandev_store::Store;
    use serde_json::json;
    use tokio::sync::mpsc;

    use super::{Followed, Frame, notification, subscriptions, valid_topic};
    use crate::outbox::Outbox;
    use crate::routes::Routes;

    /// Review finding: the fan-out missed events 1 and 2 (it fell behind the store), marked
    /// the connection behind, then routed event 3. A delivery loop that took event 3 before
    /// the "behind" replayed from 3 and never sent 1 and 2. Twenty rounds: the loop's choice
    /// was random, so each round caught the old loop with a one-in-two chance.
    #[tokio::test]
    async fn i15_a3_a_connection_told_it_is_behind_replays_before_it_takes_a_newer_frame() {
        let store = Store::in_memory().await.unwrap();
        let topic = "session:s".to_owned();
        let mut tx = store.begin_write().await.unwrap();
        for n in 1..=3 {
            tx.emit(topic.clone(), "session.message.updated", json!({ "n": n })).await.unwrap();
        }
        tx.commit().await.unwrap();
        let from_start = HashMap::from([(topic.clone(), 0)]);
        let events =
            store.events_since(std::slice::from_ref(&topic), &from_start, 10).await.unwrap();
        for round in 0..20 {
            let routes = Arc::new(Routes::<Frame>::default());
            let (follower, frames) = routes.connect(usize::MAX);
            follower.follow(&topic);
            let followed = Followed {
                sent: from_start.clone(),
                follower,
                visibility: crate::visibility::Visibility::all(),
            };
            routes.all_behind();
            routes.publish_with(&topic, || Frame::of(&events[2]));
            let (_commands, command_rx) = mpsc::channel(1);
            let out = Outbox::new(1 << 20, Duration::from_secs(5));
            let delivering = tokio::spawn(subscriptions(
                store.clone(),
                followed,
                frames,
                command_rx,
                out.clone(),
            ));
            let mut seqs = vec![];
            while !seqs.contains(&events[2].seq) {
                let batch = tokio::time::timeout(Duration::from_secs(10), out.next_batch(16))
                    .await
                    .expect("frames in time")
                    .expect("the outbox is open");
                for message in batch {
                    let Message::Text(text) = message else { panic!("a text frame") };
                    let frame: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
                    seqs.push(frame["seq"].as_i64().unwrap());
                }
            }
            let expected: Vec<i64> = events.iter().map(|e| e.seq).collect();
            assert_eq!(seqs, expected, "round {round}: every event once, in order");
            delivering.abort();
        }
    }

    /// The frame copies the payload's JSON text as it is (the text its event row holds),
    /// not a tree serialized again.
    #[test]
    fn i15_a3_a_notification_frame_carries_its_payload_text_as_it_is() {
        let payload = serde_json::value::RawValue::from_string(
            r#"{"z":1,"delta":"h\u00e9\n","a":[true,null]}"#.to_owned(),
        )
        .unwrap();
        let event = kandev_store::Event {
            seq: 7,
            topic: "session:s1".into(),
            action: "session.message.updated".into(),
            payload: payload.into(),
            created_at: kandev_domain::Timestamp(0),
        };
        assert_eq!(
            notification(&event).as_str(),
            r#"{"type":"notification","topic":"session:s1","action":"session.message.updated","seq":7,"payload":{"z":1,"delta":"h\u00e9\n","a":[true,null]}}"#
        );
    }

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
