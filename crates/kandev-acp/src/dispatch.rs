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
        let parsed = SessionNotification::deserialize(params)
            .map_err(|err| format!("malformed session/update params: {err}"))
            .and_then(|note| Ok((note.session_id, SessionUpdate::from_json(note.update)?)));
        match parsed {
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
