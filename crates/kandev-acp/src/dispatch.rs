//! Routes each line the agent sends: answers to pending calls, events, or an error reply.
//!
//! Everything here is synchronous: the read loop never waits on a consumer.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::codes;
use crate::events::{
    AgentEvent, PermissionOption, PermissionResponder, PermissionToolCall, ReadTextFileResponder,
    Reply, TerminalRequest, TerminalResponder, WriteTextFileResponder,
};
use crate::peer::Peer;
use crate::rpc::{Incoming, RpcErrorBody};
use crate::schema::ContentBlock;
use crate::update::SessionUpdate;

/// Where events go: plain, or each with the stream offset where its line ends
/// ([`crate::AcpClient::connect_tagged`]).
pub(crate) enum EventSink {
    Plain(mpsc::UnboundedSender<AgentEvent>),
    Tagged(mpsc::UnboundedSender<(u64, AgentEvent)>),
}

pub(crate) struct Dispatcher {
    peer: Arc<Peer>,
    events: EventSink,
    /// The offset where the line being dispatched ends.
    end: std::sync::atomic::AtomicU64,
}

impl Dispatcher {
    pub(crate) fn new(peer: Arc<Peer>, events: EventSink) -> Self {
        Dispatcher { peer, events, end: std::sync::atomic::AtomicU64::new(0) }
    }

    /// Notes that the next line (or end of input) ends at `end` in the stream.
    pub(crate) fn at(&self, end: u64) {
        self.end.store(end, std::sync::atomic::Ordering::Relaxed);
        self.peer.read_through(end);
    }

    pub(crate) fn on_line(&self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        if let Some((session_id, update)) = text_chunk(line) {
            return self.emit(AgentEvent::SessionUpdate { session_id, update });
        }
        let message = match serde_json::from_slice::<Value>(line) {
            Ok(message) => message,
            Err(err) => {
                return self.protocol_error(format!("agent sent a line that is not json: {err}"));
            }
        };
        match Incoming::classify(message) {
            Ok(Incoming::Response { id, outcome }) => self.peer.complete(&id, outcome),
            Ok(Incoming::Request { id, method, params }) => self.on_request(id, &method, params),
            Ok(Incoming::Notification { method, params }) => self.on_notification(&method, params),
            Err(message) => self.protocol_error(message),
        }
    }

    pub(crate) fn on_oversized_line(&self, len: usize, max_line_len: usize) {
        self.protocol_error(format!(
            "agent sent a line of {len} bytes, over the limit of {max_line_len}; it was discarded"
        ));
    }

    pub(crate) fn on_non_utf8_line(&self) {
        self.protocol_error("agent sent a line that is not json: it is not UTF-8 text".into());
    }

    pub(crate) fn on_closed(&self) {
        self.peer.close();
        self.emit(AgentEvent::Closed);
    }

    fn on_notification(&self, method: &str, params: Value) {
        match method {
            "session/update" => self.on_session_update(params),
            _ if method.starts_with('_') => {
                tracing::debug!(method, "ignoring extension notification from agent");
            }
            _ => tracing::debug!(method, "ignoring unknown notification from agent"),
        }
    }

    fn on_session_update(&self, params: Value) {
        match session_update(params) {
            Ok((session_id, update)) => {
                if let SessionUpdate::Unknown { kind, .. } = &update {
                    tracing::info!(kind, "agent sent an unknown session update kind");
                }
                self.emit(AgentEvent::SessionUpdate { session_id, update });
            }
            Err(message) => self.protocol_error(message),
        }
    }

    fn on_request(&self, id: Value, method: &str, params: Value) {
        let event = match method {
            "session/request_permission" => self.permission_request(id, params),
            "fs/read_text_file" => self.read_text_file(id, params),
            "fs/write_text_file" => self.write_text_file(id, params),
            "terminal/create" => self.terminal_create(id, params),
            "terminal/output" => self.terminal(id, "terminal/output", params, |terminal_id| {
                TerminalRequest::Output { terminal_id }
            }),
            "terminal/wait_for_exit" => {
                self.terminal(id, "terminal/wait_for_exit", params, |terminal_id| {
                    TerminalRequest::WaitForExit { terminal_id }
                })
            }
            "terminal/kill" => self.terminal(id, "terminal/kill", params, |terminal_id| {
                TerminalRequest::Kill { terminal_id }
            }),
            "terminal/release" => self.terminal(id, "terminal/release", params, |terminal_id| {
                TerminalRequest::Release { terminal_id }
            }),
            _ => {
                tracing::debug!(method, "agent called an unknown client method");
                let error = RpcErrorBody::new(
                    codes::METHOD_NOT_FOUND,
                    format!("method not found: {method}"),
                );
                self.reply(id, "unknown method").send(Err(error));
                return;
            }
        };
        if let Some(event) = event {
            self.emit(event);
        }
    }

    fn permission_request(&self, id: Value, params: Value) -> Option<AgentEvent> {
        const METHOD: &str = "session/request_permission";
        let params = self.parse_params::<PermissionParams>(&id, METHOD, params)?;
        let tool_call = PermissionToolCall {
            tool_call_id: string_field(&params.tool_call, "toolCallId"),
            title: string_field(&params.tool_call, "title"),
            raw: params.tool_call,
        };
        Some(AgentEvent::PermissionRequest {
            session_id: params.session_id,
            tool_call,
            options: params.options,
            responder: PermissionResponder::new(self.reply(id, METHOD)),
        })
    }

    fn read_text_file(&self, id: Value, params: Value) -> Option<AgentEvent> {
        const METHOD: &str = "fs/read_text_file";
        let params = self.parse_params::<ReadParams>(&id, METHOD, params)?;
        Some(AgentEvent::ReadTextFile {
            session_id: params.session_id,
            path: params.path,
            line: params.line,
            limit: params.limit,
            responder: ReadTextFileResponder::new(self.reply(id, METHOD)),
        })
    }

    fn write_text_file(&self, id: Value, params: Value) -> Option<AgentEvent> {
        const METHOD: &str = "fs/write_text_file";
        let params = self.parse_params::<WriteParams>(&id, METHOD, params)?;
        Some(AgentEvent::WriteTextFile {
            session_id: params.session_id,
            path: params.path,
            content: params.content,
            responder: WriteTextFileResponder::new(self.reply(id, METHOD)),
        })
    }

    fn terminal_create(&self, id: Value, params: Value) -> Option<AgentEvent> {
        const METHOD: &str = "terminal/create";
        let params = self.parse_params::<CreateTerminalParams>(&id, METHOD, params)?;
        let request = TerminalRequest::Create {
            command: params.command,
            args: params.args,
            env: params.env.into_iter().map(|v| (v.name, v.value)).collect(),
            cwd: params.cwd,
            output_byte_limit: params.output_byte_limit,
        };
        Some(AgentEvent::Terminal {
            session_id: params.session_id,
            request,
            responder: TerminalResponder::new(self.reply(id, METHOD)),
        })
    }

    /// The `terminal/*` calls that name only a terminal.
    fn terminal(
        &self,
        id: Value,
        method: &'static str,
        params: Value,
        request: impl FnOnce(String) -> TerminalRequest,
    ) -> Option<AgentEvent> {
        let params = self.parse_params::<TerminalParams>(&id, method, params)?;
        Some(AgentEvent::Terminal {
            session_id: params.session_id,
            request: request(params.terminal_id),
            responder: TerminalResponder::new(self.reply(id, method)),
        })
    }

    /// Parses request params; on failure answers -32602 and reports a protocol error.
    fn parse_params<T: for<'de> Deserialize<'de>>(
        &self,
        id: &Value,
        method: &'static str,
        params: Value,
    ) -> Option<T> {
        match T::deserialize(params) {
            Ok(params) => Some(params),
            Err(err) => {
                let message = format!("malformed {method} params: {err}");
                let error = RpcErrorBody::new(codes::INVALID_PARAMS, message.clone());
                self.reply(id.clone(), method).send(Err(error));
                self.protocol_error(message);
                None
            }
        }
    }

    fn reply(&self, id: Value, method: &'static str) -> Reply {
        Reply::new(id, method, self.peer.outbox())
    }

    fn protocol_error(&self, message: String) {
        tracing::warn!("{message}");
        self.emit(AgentEvent::ProtocolError { message });
    }

    /// Queues an event; if nobody listens any more, the event (and any responder in it,
    /// which then answers its default) is dropped.
    fn emit(&self, event: AgentEvent) {
        let sent = match &self.events {
            EventSink::Plain(events) => events.send(event).is_ok(),
            EventSink::Tagged(events) => {
                let end = self.end.load(std::sync::atomic::Ordering::Relaxed);
                events.send((end, event)).is_ok()
            }
        };
        if !sent {
            tracing::debug!("no receiver for agent events; event dropped");
        }
    }
}

fn string_field(object: &Value, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(str::to_owned)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionNotification {
    session_id: String,
    update: Value,
}

/// The session and update of a `session/update`'s params.
fn session_update(params: Value) -> Result<(String, SessionUpdate), String> {
    let note = SessionNotification::deserialize(params)
        .map_err(|err| format!("malformed session/update params: {err}"))?;
    Ok((note.session_id, SessionUpdate::from_json(note.update)?))
}

/// The line of a text chunk (of a message, a thought or the user's message), parsed straight
/// into its session and update, or `None` for any other line. Nearly every line a
/// streaming agent sends is one, and parsing each into a `Value` tree first (a map per
/// object) was the largest cost of the server's threads in a flood (a profile of
/// P1). Strict, so that it never differs from the general path: a line with any
/// other field (an `id`, `_meta`, annotations), of another shape, or with an escape in a
/// field other than the text is left to the general path, which handles every line.
fn text_chunk(line: &[u8]) -> Option<(String, SessionUpdate)> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Line<'a> {
        /// Not checked, as on the general path.
        #[serde(default, rename = "jsonrpc")]
        _version: Option<serde::de::IgnoredAny>,
        #[serde(borrow)]
        method: &'a str,
        #[serde(borrow)]
        params: Params<'a>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Params<'a> {
        session_id: String,
        #[serde(borrow)]
        update: Update<'a>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Update<'a> {
        #[serde(borrow)]
        session_update: &'a str,
        #[serde(borrow)]
        content: Content<'a>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Content<'a> {
        #[serde(borrow, rename = "type")]
        kind: &'a str,
        text: String,
    }
    let line: Line<'_> = serde_json::from_slice(line).ok()?;
    let Line { method: "session/update", params: Params { session_id, update }, .. } = line else {
        return None;
    };
    if update.content.kind != "text" {
        return None;
    }
    let content = ContentBlock::Text(update.content.text);
    let update = match update.session_update {
        "agent_message_chunk" => SessionUpdate::AgentMessageChunk { content },
        "agent_thought_chunk" => SessionUpdate::AgentThoughtChunk { content },
        "user_message_chunk" => SessionUpdate::UserMessageChunk { content },
        _ => return None,
    };
    Some((session_id, update))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PermissionParams {
    session_id: String,
    #[serde(default)]
    tool_call: Value,
    #[serde(default, deserialize_with = "crate::lenient::null_as_default")]
    options: Vec<PermissionOption>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadParams {
    session_id: String,
    path: String,
    #[serde(default)]
    line: Option<u64>,
    #[serde(default)]
    limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WriteParams {
    session_id: String,
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateTerminalParams {
    session_id: String,
    command: String,
    #[serde(default, deserialize_with = "crate::lenient::null_as_default")]
    args: Vec<String>,
    #[serde(default, deserialize_with = "crate::lenient::null_as_default")]
    env: Vec<EnvVariable>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    output_byte_limit: Option<u64>,
}

#[derive(Deserialize)]
struct EnvVariable {
    name: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TerminalParams {
    session_id: String,
    terminal_id: String,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{session_update, text_chunk};
    use crate::rpc::Incoming;

    /// What the general path makes of a `session/update` line.
    fn general(line: &str) -> Option<(String, crate::update::SessionUpdate)> {
        let message: Value = serde_json::from_str(line).ok()?;
        match Incoming::classify(message).ok()? {
            Incoming::Notification { method, params } if method == "session/update" => {
                session_update(params).ok()
            }
            _ => None,
        }
    }

    fn update(session_update: &str, content: Value) -> String {
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
            "update": {"sessionUpdate": session_update, "content": content}}})
        .to_string()
    }

    #[test]
    fn i15_a1_text_chunks_parse_as_on_the_general_path() {
        let text = |t: &str| json!({"type": "text", "text": t});
        let taken = [
            update("agent_message_chunk", text("hello")),
            update("agent_thought_chunk", text("thinking \"quoted\" \u{e9}\n")),
            update("user_message_chunk", text("")),
            // Key order and no `jsonrpc` do not matter.
            r#"{"params":{"update":{"content":{"text":"x","type":"text"},"sessionUpdate":"agent_message_chunk"},"sessionId":"s1"},"method":"session/update"}"#.to_owned(),
        ];
        for line in &taken {
            let fast = text_chunk(line.as_bytes());
            assert!(fast.is_some(), "taken: {line}");
            assert_eq!(fast, general(line), "{line}");
        }
        let left = [
            // Not a bare text chunk: the general path decides.
            update("agent_message_chunk", json!({"type": "image", "data": "", "mimeType": "x"})),
            update("agent_message_chunk", json!({"type": "text", "text": "a", "annotations": {}})),
            update("tool_call", text("a")),
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/update", "params": {"sessionId": "s1",
                "update": {"sessionUpdate": "agent_message_chunk", "content": text("a")}}})
            .to_string(),
            json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
                "_meta": {}, "update": {"sessionUpdate": "agent_message_chunk", "content": text("a")}}})
            .to_string(),
            json!({"jsonrpc": "2.0", "method": "other", "params": {"sessionId": "s1",
                "update": {"sessionUpdate": "agent_message_chunk", "content": text("a")}}})
            .to_string(),
            // An escape outside the text.
            update("agent_message_chunk", text("a")).replace("agent_message_chunk", "agent\\u005fmessage_chunk"),
            "{not json".to_owned(),
            "[]".to_owned(),
        ];
        for line in &left {
            assert_eq!(text_chunk(line.as_bytes()), None, "left to the general path: {line}");
        }
    }
}
