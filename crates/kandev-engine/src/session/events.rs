//! What the agent sends on its own, turned into the typed transcript: streamed text and
//! thoughts coalesced into one message each, tool calls, plans, usage, mode and option
//! changes, and confined file access (permission requests: `permissions.rs`).

use std::path::PathBuf;

use kandev_acp::{
    AgentEvent, ContentBlock, PlanEntry, SessionUpdate, ToolCall, ToolCallContent, ToolCallUpdate,
};
use kandev_api_types::{Notification, SessionEvent, UsageMetaDto};
use kandev_domain::message_meta::{
    ErrorMeta, KnownToolContent, MessageMeta, PlanEntryMeta, PlanMeta, StatusNote, ToolCallMeta,
    ToolContent, ToolLocation, UsageMeta,
};
use kandev_domain::transcript::{Message, MessageKind};
use kandev_store::{SessionUpdate as Update, TurnUsagePart, WriteTx};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::error::{EngineError, Result};
use crate::session::state::{Output, PendingText, SessionActor, Submitted};
use crate::stream::{self, Target};
use crate::write::add_message;
use crate::{files, publish};

/// How long streamed chunks wait to be coalesced into one write (issue 15).
const COALESCE_WINDOW: std::time::Duration = std::time::Duration::from_millis(5);
/// Pending text this large is written at once.
const COALESCE_LIMIT: usize = 64 * 1024;
/// At most this many submissions of streamed text wait for their answers; past it the session
/// waits for the oldest (the writer is far behind: the agent's pipe fills and slows it down).
const SUBMITTED_LIMIT: usize = 256;

fn text_of(content: &ContentBlock) -> String {
    match content {
        ContentBlock::Text(text) => text.clone(),
        other => format!(
            "[{}]",
            other.to_json().get("type").and_then(Value::as_str).unwrap_or("content")
        ),
    }
}

fn tool_content(content: &[ToolCallContent]) -> Vec<ToolContent> {
    content
        .iter()
        .map(|c| match c {
            ToolCallContent::Content(block) => {
                ToolContent::Known(KnownToolContent::Content { text: text_of(block) })
            }
            ToolCallContent::Diff { path, old_text, new_text } => {
                ToolContent::Known(KnownToolContent::Diff {
                    path: path.clone(),
                    old_text: old_text.clone(),
                    new_text: new_text.clone(),
                })
            }
            ToolCallContent::Terminal { terminal_id } => {
                ToolContent::Known(KnownToolContent::Terminal { terminal_id: terminal_id.clone() })
            }
            ToolCallContent::Other { raw, .. } => ToolContent::Other(raw.clone()),
        })
        .collect()
}

fn tool_call_meta(call: &ToolCall) -> MessageMeta {
    MessageMeta::ToolCall(ToolCallMeta {
        tool_call_id: call.tool_call_id.clone(),
        title: call.title.clone(),
        kind: call.kind.as_str().to_owned(),
        status: call.status.as_str().to_owned(),
        content: tool_content(&call.content),
        locations: call
            .locations
            .iter()
            .map(|l| ToolLocation { path: l.path.clone(), line: l.line })
            .collect(),
        raw_input: call.raw_input.clone(),
        raw_output: None,
        terminals: Default::default(),
    })
}

fn plan_meta(entries: &[PlanEntry]) -> MessageMeta {
    let entries = entries
        .iter()
        .map(|e| PlanEntryMeta {
            content: e.content.clone(),
            priority: e.priority.as_str().to_owned(),
            status: e.status.as_str().to_owned(),
        })
        .collect();
    MessageMeta::Plan(PlanMeta { entries })
}

impl SessionActor {
    /// Handles an event whose line ends at ACP offset `at` (what a runner position counts:
    /// `crate::position`).
    pub(super) async fn on_agent_event(&mut self, at: u64, event: AgentEvent) {
        // The position before this event's line, and the one its transactions record.
        let before = self.handled();
        self.set_handled(at);
        if let Some(turn) = self.phase.turn_mut() {
            let stall_noticed = turn.output.is_some_and(|o| o.stall_noticed);
            turn.output = Some(Output { last: tokio::time::Instant::now(), stall_noticed });
        }
        // Replayed output whose effects an earlier server committed (it came after a
        // permission request that was still waiting): only requests are handled again.
        let replayed =
            self.phase.live().and_then(|l| l.track.as_ref()).is_some_and(|t| t.already_handled(at));
        if replayed
            && matches!(event, AgentEvent::SessionUpdate { .. } | AgentEvent::ProtocolError { .. })
        {
            return;
        }
        let result = match event {
            AgentEvent::SessionUpdate { update, .. } => self.on_update(update, before).await,
            AgentEvent::PermissionRequest { tool_call, options, responder, .. } => {
                let title =
                    tool_call.title.unwrap_or_else(|| "the agent asks for permission".to_owned());
                self.on_permission_request(title, tool_call.raw, options, responder, before).await
            }
            AgentEvent::ReadTextFile { responder, .. } if !self.agent_on_this_host() => {
                responder.respond(Err(files::off_host("fs/read_text_file")));
                Ok(())
            }
            AgentEvent::WriteTextFile { responder, .. } if !self.agent_on_this_host() => {
                responder.respond(Err(files::off_host("fs/write_text_file")));
                Ok(())
            }
            AgentEvent::ReadTextFile { path, line, limit, responder, .. } => {
                let root = PathBuf::from(&self.session.cwd);
                self.spawn(async move {
                    responder.respond(files::read(&root, &path, line, limit).await);
                });
                Ok(())
            }
            AgentEvent::WriteTextFile { path, content, responder, .. } => {
                let root = PathBuf::from(&self.session.cwd);
                self.spawn(async move {
                    let result = files::write(&root, &path, &content).await;
                    if let Err((_, message)) = &result {
                        tracing::info!(path, reason = %message, "refused or failed agent file write");
                    }
                    responder.respond(result);
                });
                Ok(())
            }
            AgentEvent::Terminal { request, responder, .. } => {
                self.on_terminal(request, responder);
                Ok(())
            }
            AgentEvent::ProtocolError { message } => self.on_protocol_error(message).await,
            AgentEvent::Closed => Ok(()), // the exit watcher reports how it ended
        };
        if let Err(err) = result {
            tracing::error!(session = %self.session.id, error = %err, "handling an agent event failed");
        }
    }

    /// Whether the live agent runs on this server's host (not on an SSH executor's).
    pub(super) fn agent_on_this_host(&self) -> bool {
        self.phase.live().is_none_or(|live| live.control.on_this_host())
    }

    /// The ACP offset through which the live agent's output is handled (0 without a runner).
    pub(super) fn handled(&self) -> u64 {
        self.phase.live().and_then(|l| l.track.as_ref()).map_or(0, |t| t.handled)
    }

    pub(super) fn set_handled(&mut self, at: u64) {
        if let Some(track) = self.phase.live_mut().and_then(|l| l.track.as_mut()) {
            track.handled = at;
        }
    }

    async fn on_protocol_error(&mut self, message: String) -> Result<()> {
        let shown: String = message.chars().take(300).collect();
        let text =
            format!("the agent sent something that is not valid ACP and it was skipped: {shown}");
        let error = self.error(
            "agent_protocol_error",
            text.clone(),
            json!({ "epoch": self.session.epoch }),
        );
        self.commit(
            Update { last_error: Some(Some(error)), ..Update::default() },
            Some((text, ErrorMeta::code("agent_protocol_error").into())),
        )
        .await
    }

    /// `before`: the ACP offset before the update's line.
    async fn on_update(&mut self, update: SessionUpdate, before: u64) -> Result<()> {
        match update {
            // Quirk: agent chatter (Codex's model metadata warning) is a note, not the answer.
            update if kandev_acp::quirks::is_noise_chunk(&update) => {
                let SessionUpdate::AgentMessageChunk { content } = update else { return Ok(()) };
                let text = text_of(&content).trim().to_owned();
                self.add(&text, StatusNote::AgentWarning.into()).await
            }
            SessionUpdate::AgentMessageChunk { content } => {
                self.stream(MessageKind::Agent, &text_of(&content), before).await
            }
            SessionUpdate::AgentThoughtChunk { content } => {
                self.stream(MessageKind::Thought, &text_of(&content), before).await
            }
            SessionUpdate::UserMessageChunk { .. } => Ok(()), // user messages are recorded when sent
            SessionUpdate::ToolCall(call) => self.on_tool_call(call).await,
            SessionUpdate::ToolCallUpdate(update) => self.on_tool_call_update(update).await,
            SessionUpdate::Plan { entries } => self.add("", plan_meta(&entries)).await,
            SessionUpdate::UsageUpdate { used, size, cost, .. } => {
                let usage = UsageMeta { used, size, cost };
                let event_usage = UsageMetaDto::from(&usage);
                let meta = MessageMeta::Usage(usage.clone());
                let text = meta.to_json();
                let mut tx = self.begin_write().await?;
                self.write(
                    &mut tx,
                    Update { context_window: Some(Some(usage)), ..Update::default() },
                )
                .await?;
                self.add_in(&mut tx, "", meta).await?;
                if let Some(turn) = self.phase.turn() {
                    tx.set_turn_usage(&turn.id, TurnUsagePart::Context, &text).await?;
                }
                let session_id = self.session.id.to_string();
                let event = SessionEvent::Usage { session_id, usage: event_usage };
                publish::notify(&mut tx, Notification::session(&self.session.id, event)).await?;
                self.finish(tx).await?;
                Ok(())
            }
            SessionUpdate::CurrentModeUpdate { current_mode_id } => {
                let mut tx = self.begin_write().await?;
                self.write(
                    &mut tx,
                    Update { session_mode: Some(Some(current_mode_id)), ..Update::default() },
                )
                .await?;
                publish::session_event(&mut tx, &self.session, "session.mode_changed").await?;
                self.finish(tx).await?;
                Ok(())
            }
            SessionUpdate::ConfigOptionUpdate { config_options } => {
                let values: serde_json::Map<String, Value> =
                    config_options.into_iter().map(|o| (o.id, o.current_value)).collect();
                self.commit(
                    Update {
                        config_options: Some(Value::Object(values).to_string()),
                        ..Update::default()
                    },
                    None,
                )
                .await
            }
            SessionUpdate::AvailableCommandsUpdate { commands } => {
                let list: Vec<Value> = commands
                    .iter()
                    .map(|c| {
                        let hint =
                            c.input.as_ref().and_then(|i| i.get("hint")).and_then(Value::as_str);
                        json!({ "name": c.name, "description": c.description, "input_hint": hint })
                    })
                    .collect();
                let update = Update {
                    available_commands: Some(Value::Array(list).to_string()),
                    ..Update::default()
                };
                self.commit(update, None).await
            }
            SessionUpdate::SessionInfoUpdate { title, .. } => {
                tracing::debug!(session = %self.session.id, ?title, "agent session info updated");
                Ok(())
            }
            SessionUpdate::Unknown { kind, .. } => {
                tracing::info!(session = %self.session.id, kind, "ignored an unknown session update kind");
                Ok(())
            }
        }
    }

    /// Adds a message to the open turn (or outside a turn) in its own transaction.
    async fn add(&mut self, content: &str, meta: MessageMeta) -> Result<()> {
        let mut tx = self.begin_write().await?;
        self.add_in(&mut tx, content, meta).await?;
        self.finish(tx).await?;
        Ok(())
    }

    pub(super) async fn add_in(
        &mut self,
        tx: &mut WriteTx,
        content: &str,
        meta: MessageMeta,
    ) -> Result<Message> {
        let turn_id = self.phase.turn().map(|t| t.id.clone());
        let message = add_message(tx, &self.session, turn_id.as_ref(), content, meta).await?;
        if let Some(turn) = self.phase.turn_mut() {
            turn.streaming = None;
        }
        Ok(message)
    }

    /// Adds a chunk to the pending text (coalesced, issue 15): text of another kind is
    /// written first (so text, thoughts and tool calls keep their order); the pending text
    /// is written once it is large or due (and before any other command: `actor.rs`).
    /// `before`: the ACP offset before the chunk's line.
    async fn stream(&mut self, kind: MessageKind, delta: &str, before: u64) -> Result<()> {
        if self.pending.as_ref().is_some_and(|p| p.kind != kind) {
            self.flush_text().await;
        }
        let now = tokio::time::Instant::now();
        let through = self.handled();
        let pending = self.pending.get_or_insert_with(|| PendingText {
            kind,
            text: String::new(),
            due: now + COALESCE_WINDOW,
            from: before,
            through,
        });
        pending.text.push_str(delta);
        pending.through = through;
        if pending.text.len() >= COALESCE_LIMIT || now >= pending.due {
            self.flush_text().await;
        }
        Ok(())
    }

    /// Hands the pending text to the group writer (`stream.rs`) without waiting for it to be
    /// stored: appended to the message being streamed, or a new message (its id chosen here,
    /// so later text can follow it at once) when the kind changed. It becomes one
    /// `session.message.updated` (or `added`) carrying the whole coalesced delta, sent after
    /// the commit. Answers are looked at as they come ([`Self::settle_text`] waits for all).
    pub(super) async fn flush_text(&mut self) {
        let Some(PendingText { kind, text, from, through, .. }) = self.pending.take() else {
            return;
        };
        // Stored with the text, and acknowledged after its group commits: every chunk up to
        // `through`, short of permissions still unanswered. Older submissions are stored
        // first or in the same group (the writer keeps their order).
        let mark = self.phase.live().and_then(|live| {
            let track = live.track.as_ref()?;
            let asking = self.permissions.values().map(|p| p.from).min();
            let at = asking.map_or(through, |asking| asking.min(through));
            track.mark(&self.session.id, live.epoch, at, through)
        });
        let current =
            self.phase.turn().and_then(|t| t.streaming.clone()).filter(|(k, _)| *k == kind);
        let target = match current {
            Some((_, id)) => {
                let turn_id = self.phase.turn().map(|t| t.id.clone());
                Target::Append { id, kind, turn_id }
            }
            None => {
                let id = self.inner.store.new_message_id();
                let turn_id = self.phase.turn().map(|t| t.id.clone());
                if let Some(turn) = self.phase.turn_mut() {
                    turn.streaming = Some((kind, id.clone()));
                }
                Target::Start { id, kind, turn_id }
            }
        };
        let message = target.message().clone();
        let answer =
            self.inner.streams.submit(&self.inner.store, &self.session.id, target, text, mark);
        self.submitted.push_back(Submitted { message, answer, from });
        self.reap_text(false).await;
    }

    /// Writes the pending text and waits until all this session's streamed text is stored:
    /// before any other write of the session, so its writes keep their order.
    pub(super) async fn settle_text(&mut self) {
        self.flush_text().await;
        self.reap_text(true).await;
    }

    /// Takes the answers of submitted text: every one when `wait`, otherwise those in
    /// already (and the oldest ones while more than [`SUBMITTED_LIMIT`] wait).
    async fn reap_text(&mut self, wait: bool) {
        while !self.submitted.is_empty() {
            let result = if wait || self.submitted.len() > SUBMITTED_LIMIT {
                let Some(Submitted { message, answer, .. }) = self.submitted.pop_front() else {
                    break;
                };
                (message, stream::answered(answer).await)
            } else {
                let Some(front) = self.submitted.front_mut() else { break };
                let outcome = match front.answer.try_recv() {
                    Err(oneshot::error::TryRecvError::Empty) => break,
                    Ok(outcome) => outcome.map_err(EngineError::Unavailable),
                    Err(oneshot::error::TryRecvError::Closed) => {
                        Err(EngineError::Unavailable("the streamed text was not written".into()))
                    }
                };
                let Some(Submitted { message, .. }) = self.submitted.pop_front() else { break };
                (message, outcome)
            };
            if let (message, Err(err)) = result {
                tracing::error!(session = %self.session.id, error = %err, "writing streamed text failed");
                // Later text must not be appended to a message that was never stored (a full
                // disk can fail a commit): it starts a new one.
                let streaming_it = |t: &&mut crate::session::state::Turn| {
                    t.streaming.as_ref().is_some_and(|(_, id)| *id == message)
                };
                if let Some(turn) = self.phase.turn_mut().filter(streaming_it) {
                    turn.streaming = None;
                }
            }
        }
    }

    async fn on_tool_call(&mut self, call: ToolCall) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let message = self.add_in(&mut tx, &call.title, tool_call_meta(&call)).await?;
        self.finish(tx).await?;
        self.follow_terminals(&message.id, &terminal_ids(&call.content));
        if let Some(turn) = self.phase.turn_mut() {
            turn.tool_calls.insert(call.tool_call_id, message.id);
        }
        Ok(())
    }

    async fn on_tool_call_update(&mut self, update: ToolCallUpdate) -> Result<()> {
        let Some(id) =
            self.phase.turn().and_then(|t| t.tool_calls.get(&update.tool_call_id)).cloned()
        else {
            tracing::debug!(session = %self.session.id, tool_call = update.tool_call_id, "update of an unknown tool call");
            return Ok(());
        };
        let message = self.inner.store.get_message(&id).await?;
        let MessageMeta::ToolCall(mut call) = message.meta else {
            let corrupt = format!("message {id} has no readable tool call metadata");
            return Err(EngineError::Store(kandev_store::StoreError::Corrupt(corrupt)));
        };
        if let Some(title) = &update.title {
            call.title = title.clone();
        }
        if let Some(kind) = &update.kind {
            call.kind = kind.as_str().to_owned();
        }
        if let Some(status) = &update.status {
            call.status = status.as_str().to_owned();
        }
        if let Some(content) = &update.content {
            call.content = tool_content(content);
        }
        if let Some(output) = &update.raw_output {
            call.raw_output = Some(output.clone());
        }
        let mut tx = self.begin_write().await?;
        let meta = MessageMeta::ToolCall(call);
        let message = tx.set_message(&id, update.title.as_deref(), &meta).await?;
        publish::message_changed(&mut tx, &self.session, &message).await?;
        self.finish(tx).await?;
        if let Some(content) = &update.content {
            self.follow_terminals(&message.id, &terminal_ids(content));
        }
        Ok(())
    }
}

/// The terminals a tool call's content shows.
fn terminal_ids(content: &[ToolCallContent]) -> Vec<String> {
    content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Terminal { terminal_id } => Some(terminal_id.clone()),
            _ => None,
        })
        .collect()
}
