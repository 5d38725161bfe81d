//! What the agent sends on its own, turned into the typed transcript: streamed text and
//! thoughts coalesced into one message each, tool calls, plans, usage, mode and option
//! changes, permission requests, and confined file access.

use std::path::PathBuf;

use kandev_acp::{
    AgentEvent, ContentBlock, Outcome, PermissionOption, PlanEntry, SessionUpdate, ToolCall,
    ToolCallContent, ToolCallUpdate,
};
use kandev_domain::transcript::{Message, MessageKind};
use kandev_store::{SessionUpdate as Update, WriteTx};
use serde_json::{Value, json};

use crate::actor::{PendingPermission, SessionActor, add_message};
use crate::{EngineError, PermissionAnswer, Result, files, publish};

fn text_of(content: &ContentBlock) -> String {
    match content {
        ContentBlock::Text(text) => text.clone(),
        other => format!(
            "[{}]",
            other.to_json().get("type").and_then(Value::as_str).unwrap_or("content")
        ),
    }
}

fn tool_content_json(content: &[ToolCallContent]) -> Value {
    Value::Array(
        content
            .iter()
            .map(|c| match c {
                ToolCallContent::Content(block) => json!({ "type": "content", "text": text_of(block) }),
                ToolCallContent::Diff { path, old_text, new_text } => {
                    json!({ "type": "diff", "path": path, "old_text": old_text, "new_text": new_text })
                }
                ToolCallContent::Terminal { terminal_id } => json!({ "type": "terminal", "terminal_id": terminal_id }),
                ToolCallContent::Other { raw, .. } => raw.clone(),
            })
            .collect(),
    )
}

fn tool_call_metadata(call: &ToolCall) -> Value {
    json!({
        "tool_call_id": call.tool_call_id,
        "title": call.title,
        "kind": call.kind.as_str(),
        "status": call.status.as_str(),
        "content": tool_content_json(&call.content),
        "locations": call.locations.iter().map(|l| json!({ "path": l.path, "line": l.line })).collect::<Vec<_>>(),
        "raw_input": call.raw_input,
    })
}

fn plan_metadata(entries: &[PlanEntry]) -> Value {
    let list: Vec<Value> = entries
        .iter()
        .map(|e| json!({ "content": e.content, "priority": e.priority.as_str(), "status": e.status.as_str() }))
        .collect();
    json!({ "entries": list })
}

fn options_json(options: &[PermissionOption]) -> Value {
    Value::Array(
        options
            .iter()
            .map(|o| json!({ "option_id": o.option_id, "name": o.name, "kind": o.kind.as_str() }))
            .collect(),
    )
}

impl SessionActor {
    pub async fn on_agent_event(&mut self, event: AgentEvent) {
        if let Some(turn) = self.turn.as_mut() {
            turn.last_output = Some(tokio::time::Instant::now());
        }
        let result = match event {
            AgentEvent::SessionUpdate { update, .. } => self.on_update(update).await,
            AgentEvent::PermissionRequest { tool_call, options, responder, .. } => {
                let title =
                    tool_call.title.unwrap_or_else(|| "the agent asks for permission".to_owned());
                self.on_permission_request(title, tool_call.raw, options, responder).await
            }
            AgentEvent::ReadTextFile { path, line, limit, responder, .. } => {
                let root = PathBuf::from(&self.session.cwd);
                self.spawn_file_io(async move {
                    responder.respond(files::read(&root, &path, line, limit).await);
                });
                Ok(())
            }
            AgentEvent::WriteTextFile { path, content, responder, .. } => {
                let root = PathBuf::from(&self.session.cwd);
                self.spawn_file_io(async move {
                    let result = files::write(&root, &path, &content).await;
                    if let Err((_, message)) = &result {
                        tracing::info!(path, reason = %message, "refused or failed agent file write");
                    }
                    responder.respond(result);
                });
                Ok(())
            }
            AgentEvent::ProtocolError { message } => self.on_protocol_error(message).await,
            AgentEvent::Closed => Ok(()), // the exit watcher reports how it ended
        };
        if let Err(err) = result {
            tracing::error!(session = %self.session.id, error = %err, "handling an agent event failed");
        }
    }

    fn spawn_file_io(&self, future: impl std::future::Future<Output = ()> + Send + 'static) {
        self.inner_tracker_spawn(future);
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
            Some((MessageKind::Error, text, json!({ "code": "agent_protocol_error" }))),
        )
        .await
    }

    async fn on_update(&mut self, update: SessionUpdate) -> Result<()> {
        match update {
            // Quirk: agent chatter (Codex's model metadata warning) is a note, not the answer.
            update if kandev_acp::quirks::is_noise_chunk(&update) => {
                let SessionUpdate::AgentMessageChunk { content } = update else { return Ok(()) };
                let text = text_of(&content).trim().to_owned();
                self.add(MessageKind::Status, &text, json!({ "reason": "agent_warning" })).await
            }
            SessionUpdate::AgentMessageChunk { content } => {
                self.stream(MessageKind::Agent, &text_of(&content)).await
            }
            SessionUpdate::AgentThoughtChunk { content } => {
                self.stream(MessageKind::Thought, &text_of(&content)).await
            }
            SessionUpdate::UserMessageChunk { .. } => Ok(()), // user messages are recorded when sent
            SessionUpdate::ToolCall(call) => self.on_tool_call(call).await,
            SessionUpdate::ToolCallUpdate(update) => self.on_tool_call_update(update).await,
            SessionUpdate::Plan { entries } => {
                self.add(MessageKind::Plan, "", plan_metadata(&entries)).await
            }
            SessionUpdate::UsageUpdate { used, size, cost, .. } => {
                let usage = json!({ "used": used, "size": size, "cost": cost });
                let mut tx = self.inner.store.begin_write().await?;
                self.write(
                    &mut tx,
                    Update { context_window: Some(Some(usage.to_string())), ..Update::default() },
                )
                .await?;
                self.add_in(&mut tx, MessageKind::Usage, "", usage.clone()).await?;
                tx.emit(
                    publish::session_topic(&self.session),
                    "session.usage",
                    json!({ "session_id": self.session.id.to_string(), "usage": usage }),
                )
                .await?;
                tx.commit().await?;
                Ok(())
            }
            SessionUpdate::CurrentModeUpdate { current_mode_id } => {
                let mut tx = self.inner.store.begin_write().await?;
                self.write(
                    &mut tx,
                    Update { session_mode: Some(Some(current_mode_id)), ..Update::default() },
                )
                .await?;
                let payload =
                    json!({ "session": kandev_api_types::SessionDto::from(&self.session) });
                tx.emit(publish::session_topic(&self.session), "session.mode_changed", payload)
                    .await?;
                tx.commit().await?;
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
                tracing::debug!(session = %self.session.id, count = commands.len(), "agent commands updated");
                Ok(())
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
    async fn add(&mut self, kind: MessageKind, content: &str, metadata: Value) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        self.add_in(&mut tx, kind, content, metadata).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn add_in(
        &mut self,
        tx: &mut WriteTx,
        kind: MessageKind,
        content: &str,
        metadata: Value,
    ) -> Result<Message> {
        let turn_id = self.turn.as_ref().map(|t| t.id.clone());
        let message =
            add_message(tx, &self.session, turn_id.as_ref(), kind, content, metadata).await?;
        if let Some(turn) = self.turn.as_mut() {
            turn.streaming = None;
        }
        Ok(message)
    }

    /// Appends a chunk to the message being streamed, or starts a new one when the kind
    /// changes (so text, thoughts and tool calls keep their order).
    async fn stream(&mut self, kind: MessageKind, delta: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        let current =
            self.turn.as_ref().and_then(|t| t.streaming.clone()).filter(|(k, _)| *k == kind);
        let started = match current {
            Some((_, id)) => {
                let message = tx.append_message(&id, delta).await?;
                publish::message_appended(&mut tx, &self.session, &message, delta).await?;
                None
            }
            None => Some(self.add_in(&mut tx, kind, delta, json!({})).await?.id),
        };
        tx.commit().await?;
        // Only once committed (a full disk can fail the commit): later chunks must not append
        // to a message that was never saved.
        if let (Some(id), Some(turn)) = (started, self.turn.as_mut()) {
            turn.streaming = Some((kind, id));
        }
        Ok(())
    }

    async fn on_tool_call(&mut self, call: ToolCall) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        let message = self
            .add_in(&mut tx, MessageKind::ToolCall, &call.title, tool_call_metadata(&call))
            .await?;
        tx.commit().await?;
        if let Some(turn) = self.turn.as_mut() {
            turn.tool_calls.insert(call.tool_call_id, message.id);
        }
        Ok(())
    }

    async fn on_tool_call_update(&mut self, update: ToolCallUpdate) -> Result<()> {
        let Some(id) =
            self.turn.as_ref().and_then(|t| t.tool_calls.get(&update.tool_call_id)).cloned()
        else {
            tracing::debug!(session = %self.session.id, tool_call = update.tool_call_id, "update of an unknown tool call");
            return Ok(());
        };
        let message = self.inner.store.get_message(&id).await?;
        let mut metadata: serde_json::Map<String, Value> =
            serde_json::from_str(&message.metadata).unwrap_or_default();
        if let Some(title) = &update.title {
            metadata.insert("title".into(), json!(title));
        }
        if let Some(kind) = &update.kind {
            metadata.insert("kind".into(), json!(kind.as_str()));
        }
        if let Some(status) = &update.status {
            metadata.insert("status".into(), json!(status.as_str()));
        }
        if let Some(content) = &update.content {
            metadata.insert("content".into(), tool_content_json(content));
        }
        if let Some(output) = &update.raw_output {
            metadata.insert("raw_output".into(), output.clone());
        }
        let mut tx = self.inner.store.begin_write().await?;
        let message = tx
            .set_message(&id, update.title.as_deref(), &Value::Object(metadata).to_string())
            .await?;
        publish::message_changed(&mut tx, &self.session, &message).await?;
        tx.commit().await?;
        Ok(())
    }

    // ------------------------------------------------------------ permissions (section G)

    async fn on_permission_request(
        &mut self,
        title: String,
        raw: Value,
        options: Vec<PermissionOption>,
        responder: kandev_acp::PermissionResponder,
    ) -> Result<()> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let metadata = json!({ "request_id": request_id, "options": options_json(&options), "status": "pending", "tool_call": raw });
        let mut tx = self.inner.store.begin_write().await?;
        let message =
            self.add_in(&mut tx, MessageKind::PermissionRequest, &title, metadata).await?;
        let payload = json!({ "session_id": self.session.id.to_string(), "request_id": request_id, "message": kandev_api_types::MessageDto::from(&message) });
        tx.emit(publish::session_topic(&self.session), "session.permission.requested", payload)
            .await?;
        tx.commit().await?;
        self.permissions.insert(
            request_id.clone(),
            PendingPermission { responder, options: options.clone(), message_id: message.id },
        );
        let auto_approve = self.profile_auto_approves().await;
        if auto_approve && let Some(allow) = options.iter().find(|o| o.kind.is_allow()) {
            self.answer_permission(
                &request_id,
                PermissionAnswer::Option(allow.option_id.clone()),
                "auto_approve",
            )
            .await?;
        }
        Ok(())
    }

    async fn profile_auto_approves(&self) -> bool {
        match &self.session.agent_profile_id {
            Some(id) => {
                self.inner.store.get_profile(id).await.map(|p| p.auto_approve).unwrap_or(false)
            }
            None => false,
        }
    }

    /// Answers a pending request with an option the agent offered (rule 37).
    pub async fn answer_permission(
        &mut self,
        request_id: &str,
        answer: PermissionAnswer,
        by: &str,
    ) -> Result<Message> {
        let Some(pending) = self.permissions.remove(request_id) else {
            return match self
                .inner
                .store
                .find_permission_message(&self.session.id, request_id)
                .await?
            {
                Some(_) => Err(EngineError::AlreadyResolved(
                    "this permission request was already answered or has expired".into(),
                )),
                None => Err(EngineError::NotFound(format!(
                    "permission request {request_id} does not exist in this session"
                ))),
            };
        };
        let (outcome, status, option_id) = match &answer {
            PermissionAnswer::Cancelled => (Outcome::Cancelled, "cancelled", None),
            PermissionAnswer::Option(id) => {
                match pending.options.iter().find(|o| &o.option_id == id) {
                    Some(option) => {
                        let status = if option.kind.is_allow() { "approved" } else { "rejected" };
                        (Outcome::Selected(id.clone()), status, Some(id.clone()))
                    }
                    None => {
                        let offered: Vec<String> =
                            pending.options.iter().map(|o| o.option_id.clone()).collect();
                        self.permissions.insert(request_id.to_owned(), pending);
                        return Err(EngineError::Validation(format!(
                            "option_id {id:?} was not offered; choose one of {offered:?}"
                        )));
                    }
                }
            }
        };
        pending.responder.respond(outcome);
        let mut tx = self.inner.store.begin_write().await?;
        tx.record_permission_answer(&self.session.id, request_id, option_id.as_deref(), status, by)
            .await?;
        let message = self
            .resolve_permission_message(
                &mut tx,
                &pending.message_id,
                status,
                option_id.as_deref(),
                by,
            )
            .await?;
        tx.commit().await?;
        Ok(message)
    }

    async fn resolve_permission_message(
        &mut self,
        tx: &mut WriteTx,
        id: &kandev_domain::MessageId,
        status: &str,
        option_id: Option<&str>,
        by: &str,
    ) -> Result<Message> {
        let message = self.inner.store.get_message(id).await?;
        let mut metadata: serde_json::Map<String, Value> =
            serde_json::from_str(&message.metadata).unwrap_or_default();
        metadata.insert("status".into(), json!(status));
        metadata.insert("selected_option_id".into(), json!(option_id));
        metadata.insert("answered_by".into(), json!(by));
        let message = tx.set_message(id, None, &Value::Object(metadata).to_string()).await?;
        publish::message_changed(tx, &self.session, &message).await?;
        let action = if status == "expired" {
            "session.permission.expired"
        } else {
            "session.permission.resolved"
        };
        let request_id = serde_json::from_str::<Value>(&message.metadata)
            .ok()
            .and_then(|m| m["request_id"].as_str().map(str::to_owned));
        let payload = json!({ "session_id": self.session.id.to_string(), "request_id": request_id, "status": status, "option_id": option_id });
        tx.emit(publish::session_topic(&self.session), action, payload).await?;
        Ok(message)
    }

    /// Answers every pending request `cancelled` and marks it `status` (rules 12, 38).
    pub async fn expire_permissions(&mut self, tx: &mut WriteTx, status: &str) -> Result<()> {
        let pending: Vec<(String, PendingPermission)> = self.permissions.drain().collect();
        for (request_id, permission) in pending {
            permission.responder.respond(Outcome::Cancelled);
            tx.record_permission_answer(&self.session.id, &request_id, None, status, "engine")
                .await?;
            self.resolve_permission_message(tx, &permission.message_id, status, None, "engine")
                .await?;
        }
        Ok(())
    }
}
