//! P9's browser-like clients: each follows the workspace topic (the board) and a few
//! session topics over one WebSocket, loads its board over HTTP, reconnects now and then by
//! itself and whenever the connection is lost (the restart), with back-off, subscribing again
//! with `since` so nothing is missed; a `resync_required` topic is subscribed again from now
//! and its board reloaded, as the web UI does. Everything a client is told is recorded:
//! each message's text (as a hash of the bytes told and where they start), each task's step.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use super::Api;
use super::record::{Event, Kind, Outcome};
use crate::Report;
use crate::harness::Ws;

pub(super) struct Plan {
    pub ws_url: String,
    pub api: Api,
    /// The board this client shows.
    pub board: String,
    pub workspace_topic: String,
    pub sessions: Vec<String>,
    /// When it reconnects by itself, from `started`.
    pub reconnects: Vec<Duration>,
    pub started: Instant,
}

/// FNV-1a, 64 bits: told text is kept as its length and hash, not its bytes.
#[derive(Clone, Copy)]
pub(super) struct Fnv(pub u64);

impl Fnv {
    pub(super) const NEW: Fnv = Fnv(0xcbf2_9ce4_8422_2325);

    pub(super) fn add(mut self, bytes: &[u8]) -> Fnv {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
        self
    }
}

/// The text of one message as a client was told it: `len` bytes from byte `start` (a
/// client that subscribed in the middle of a message was told only its end).
pub(super) struct ToldText {
    pub session: String,
    pub start: usize,
    pub len: usize,
    pub hash: Fnv,
    /// Set when the client may have missed a part (its topic was told `resync_required`):
    /// what it was told before stays checked, later parts are not added.
    pub frozen: bool,
}

/// Everything one client was told.
#[derive(Default)]
pub(super) struct Told {
    pub messages: HashMap<String, ToldText>,
    /// Task id → the step it was last told the task is in.
    pub tasks: HashMap<String, String>,
    /// The workspace topic was told `resync_required` (its task steps may be stale).
    pub workspace_resynced: bool,
    pub notifications: u64,
    /// A streamed delta that does not follow what was told before, without a resync.
    pub gaps: Vec<String>,
    /// A notification whose seq is not above the topic's previous one.
    pub repeats: Vec<String>,
    pub resyncs: usize,
    pub reconnects_planned: usize,
    pub reconnects_lost: usize,
    /// Subscribe answered with an error.
    pub errors: Vec<String>,
}

/// Why a connection ended.
enum End {
    Stop,
    Planned,
    Lost,
}

/// Runs one client until `stop`; reports its first subscription on `ready`.
pub(super) async fn run(
    plan: Plan,
    events: mpsc::UnboundedSender<Event>,
    mut stop: watch::Receiver<bool>,
    ready: mpsc::UnboundedSender<()>,
) -> Told {
    let mut told = Told::default();
    let mut since: HashMap<String, i64> = HashMap::new();
    let mut topics = vec![plan.workspace_topic.clone()];
    topics.extend(plan.sessions.iter().map(|s| format!("session:{s}")));
    let planned: Vec<Instant> = plan.reconnects.iter().map(|d| plan.started + *d).collect();
    let mut next_planned = 0;
    let mut load_board = true;
    let mut backoff = Duration::from_millis(50);
    let mut first = Some(ready);
    let mut requests = 0u64;
    loop {
        if *stop.borrow() {
            break;
        }
        let connected = tokio::time::timeout(
            Duration::from_secs(5),
            tokio_tungstenite::connect_async(&plan.ws_url),
        )
        .await;
        let mut ws = match connected {
            Ok(Ok((ws, _))) => ws,
            _ => {
                tokio::select! {
                    _ = stop.changed() => break,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        let _ = events.send(Event::Connected(1));
        if load_board {
            load_board = !board(&plan, &events).await;
        }
        requests += 1;
        let end = if subscribe(&mut ws, &topics, &since, requests).await.is_err() {
            End::Lost
        } else {
            let next = planned
                .get(next_planned)
                .copied()
                .unwrap_or(plan.started + Duration::from_secs(86_400));
            let mut reading = Reading { told: &mut told, since: &mut since, events: &events };
            loop {
                tokio::select! {
                    _ = stop.changed() => break End::Stop,
                    () = tokio::time::sleep_until(next.into()) => {
                        next_planned += 1;
                        break End::Planned;
                    }
                    message = ws.next() => match message {
                        Some(Ok(Message::Text(text))) => {
                            let Ok(frame) = serde_json::from_str::<Value>(&text) else { continue };
                            match reading.frame(&frame) {
                                Then::Read => {}
                                Then::Subscribed => {
                                    if let Some(ready) = first.take() {
                                        let _ = ready.send(());
                                    }
                                }
                                Then::Resubscribe(topic) => {
                                    requests += 1;
                                    if topic == plan.workspace_topic {
                                        board(&plan, &events).await;
                                    }
                                    let again = subscribe_frame(&[topic], &HashMap::new(), requests);
                                    if ws.send(Message::text(again.to_string())).await.is_err() {
                                        break End::Lost;
                                    }
                                }
                            }
                        }
                        Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break End::Lost,
                        Some(Ok(_)) => {}
                    },
                }
            }
        };
        let _ = events.send(Event::Connected(-1));
        match end {
            End::Stop => break,
            End::Planned => told.reconnects_planned += 1,
            End::Lost => told.reconnects_lost += 1,
        }
    }
    told
}

/// Loads the client's board as the web UI does on start; whether it was answered.
async fn board(plan: &Plan, events: &mpsc::UnboundedSender<Event>) -> bool {
    let outcome = match plan.api.call("task.list", json!({"workflow_id": plan.board})).await {
        super::Answer::Ok(_) => Outcome::Answered,
        super::Answer::Refused(..) => Outcome::Refused,
        super::Answer::Lost => Outcome::Lost,
    };
    let _ = events.send(Event::Action(Kind::Board, outcome));
    outcome == Outcome::Answered
}

fn subscribe_frame(topics: &[String], since: &HashMap<String, i64>, n: u64) -> Value {
    let since: HashMap<&String, i64> =
        topics.iter().filter_map(|t| Some((t, *since.get(t)?))).collect();
    json!({"id": format!("sub-{n}"), "type": "request", "action": "subscribe",
           "payload": {"topics": topics, "since": since}})
}

async fn subscribe(
    ws: &mut Ws,
    topics: &[String],
    since: &HashMap<String, i64>,
    n: u64,
) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    ws.send(Message::text(subscribe_frame(topics, since, n).to_string())).await
}

/// What to do after a frame.
enum Then {
    Read,
    /// A subscribe was answered.
    Subscribed,
    /// This topic was told `resync_required`: subscribe to it again from now.
    Resubscribe(String),
}

struct Reading<'a> {
    told: &'a mut Told,
    since: &'a mut HashMap<String, i64>,
    events: &'a mpsc::UnboundedSender<Event>,
}

impl Reading<'_> {
    fn frame(&mut self, frame: &Value) -> Then {
        match frame["type"].as_str() {
            Some("notification") => {
                self.notification(frame);
                Then::Read
            }
            Some("response") => {
                if let Some(topics) = frame["payload"]["topics"].as_object() {
                    for (topic, seq) in topics {
                        if let Some(seq) = seq.as_i64() {
                            let known = self.since.entry(topic.clone()).or_insert(seq);
                            *known = (*known).max(seq);
                        }
                    }
                }
                Then::Subscribed
            }
            Some("resync_required") => {
                let topic = frame["topic"].as_str().unwrap_or_default().to_owned();
                self.told.resyncs += 1;
                self.since.remove(&topic);
                match topic.strip_prefix("session:") {
                    Some(session) => {
                        for text in self.told.messages.values_mut() {
                            if text.session == session {
                                text.frozen = true;
                            }
                        }
                    }
                    None => self.told.workspace_resynced = true,
                }
                Then::Resubscribe(topic)
            }
            Some("error") => {
                self.told.errors.push(frame.to_string());
                Then::Read
            }
            _ => Then::Read,
        }
    }

    fn notification(&mut self, frame: &Value) {
        let topic = frame["topic"].as_str().unwrap_or_default();
        let seq = frame["seq"].as_i64().unwrap_or_default();
        let before = self.since.insert(topic.to_owned(), seq);
        if before.is_some_and(|b| seq <= b) && self.told.repeats.len() < 5 {
            self.told.repeats.push(format!("{topic}: seq {seq} after {before:?}"));
        }
        self.told.notifications += 1;
        let payload = &frame["payload"];
        let session = topic.strip_prefix("session:").unwrap_or_default();
        let mut agent_bytes = 0;
        match frame["action"].as_str().unwrap_or_default() {
            "session.message.added" => {
                let message = &payload["message"];
                let content = message["content"].as_str().unwrap_or_default();
                if message["kind"] == "agent" {
                    agent_bytes = content.len() as u64;
                }
                self.whole(message, session);
            }
            "session.message.updated" if payload["delta"].is_string() => {
                let id = payload["message_id"].as_str().unwrap_or_default();
                let delta = payload["delta"].as_str().unwrap_or_default();
                let length = payload["length"].as_u64().unwrap_or_default() as usize;
                if payload["kind"] == "agent" {
                    agent_bytes = delta.len() as u64;
                }
                self.delta(id, session, delta, length);
            }
            "session.message.updated" => self.whole(&payload["message"], session),
            "session.turn.completed" => {
                let _ = self.events.send(Event::TurnCompleted(session.to_owned()));
            }
            "task.created" | "task.moved" | "task.updated" => {
                let task = &payload["task"];
                if let (Some(id), Some(step)) = (task["id"].as_str(), task["step_id"].as_str()) {
                    self.told.tasks.insert(id.to_owned(), step.to_owned());
                }
            }
            _ => {}
        }
        let _ = self.events.send(Event::Told { agent_bytes });
    }

    /// A message told whole (added, or changed as a whole).
    fn whole(&mut self, message: &Value, session: &str) {
        let (Some(id), Some(content)) = (message["id"].as_str(), message["content"].as_str())
        else {
            return;
        };
        self.told.messages.insert(
            id.to_owned(),
            ToldText {
                session: session.to_owned(),
                start: 0,
                len: content.len(),
                hash: Fnv::NEW.add(content.as_bytes()),
                frozen: false,
            },
        );
    }

    /// A streamed delta: `length` is the message's length after it.
    fn delta(&mut self, id: &str, session: &str, delta: &str, length: usize) {
        let Some(start) = length.checked_sub(delta.len()) else {
            self.told.gaps.push(format!("message {id}: a delta longer than its length {length}"));
            return;
        };
        match self.told.messages.get_mut(id) {
            Some(text) if text.frozen => {}
            Some(text) if text.start + text.len == start => {
                text.len += delta.len();
                text.hash = text.hash.add(delta.as_bytes());
            }
            Some(text) => {
                if self.told.gaps.len() < 5 {
                    self.told.gaps.push(format!(
                        "message {id}: told up to byte {}, then a delta from byte {start}",
                        text.start + text.len
                    ));
                }
                text.frozen = true;
            }
            // The first part this client sees of a message begun before it subscribed.
            None => {
                self.told.messages.insert(
                    id.to_owned(),
                    ToldText {
                        session: session.to_owned(),
                        start,
                        len: delta.len(),
                        hash: Fnv::NEW.add(delta.as_bytes()),
                        frozen: false,
                    },
                );
            }
        }
    }
}

/// The clients' figures and checks of what they saw on the wire (gaps, repeats, errors).
pub(super) fn figures(told: &[Told], report: &mut Report) {
    let gaps: Vec<&String> = told.iter().flat_map(|t| &t.gaps).take(3).collect();
    let gap_count: usize = told.iter().map(|t| t.gaps.len()).sum();
    report.check(gaps.is_empty(), format!("{gap_count} told streams had gaps: {gaps:?}"));
    let repeats: Vec<&String> = told.iter().flat_map(|t| &t.repeats).take(3).collect();
    report.check(
        repeats.is_empty(),
        format!("notifications told twice or out of order: {repeats:?}"),
    );
    let errors: Vec<&String> = told.iter().flat_map(|t| &t.errors).take(3).collect();
    report.check(errors.is_empty(), format!("subscribe answered with errors: {errors:?}"));
    let connected_at_end = told.iter().all(|t| t.notifications > 0);
    report.check(connected_at_end, "a client was never told anything");
    report.figure("notifications_told", told.iter().map(|t| t.notifications).sum::<u64>());
    report.figure("client_resyncs", told.iter().map(|t| t.resyncs).sum::<usize>());
    report.figure(
        "client_reconnects_planned",
        told.iter().map(|t| t.reconnects_planned).sum::<usize>(),
    );
    report.figure(
        "client_reconnects_after_loss",
        told.iter().map(|t| t.reconnects_lost).sum::<usize>(),
    );
}
