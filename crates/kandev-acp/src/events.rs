//! Agent → client traffic as events, and the responders that answer the agent's requests.

use std::fmt;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::codes;
use crate::lenient::{null_as_default, open_enum};
use crate::peer::{Outbox, Outgoing};
use crate::rpc::{self, RpcErrorBody};
use crate::update::SessionUpdate;

/// Something the agent sent that the client did not ask for, in arrival order.
///
/// Every event read before a response is in the channel before that response's call returns.
#[derive(Debug)]
pub enum AgentEvent {
    /// A `session/update` notification.
    SessionUpdate {
        /// The ACP session it belongs to.
        session_id: String,
        /// What changed.
        update: SessionUpdate,
    },
    /// `session/request_permission`: the agent waits until `responder` answers (possibly
    /// minutes later; the connection keeps working meanwhile). Dropping the responder answers
    /// `cancelled`.
    PermissionRequest {
        /// The ACP session it belongs to.
        session_id: String,
        /// The tool call that needs permission.
        tool_call: PermissionToolCall,
        /// The choices the agent offers.
        options: Vec<PermissionOption>,
        /// Answers the agent, once.
        responder: PermissionResponder,
    },
    /// `fs/read_text_file`. Path confinement is the receiver's decision.
    ReadTextFile {
        /// The ACP session it belongs to.
        session_id: String,
        /// The file (absolute).
        path: String,
        /// First line to read (1-based), if given.
        line: Option<u64>,
        /// Maximum number of lines, if given.
        limit: Option<u64>,
        /// Answers the agent, once. Dropping it answers an internal error.
        responder: ReadTextFileResponder,
    },
    /// `fs/write_text_file`. Path confinement is the receiver's decision.
    WriteTextFile {
        /// The ACP session it belongs to.
        session_id: String,
        /// The file (absolute).
        path: String,
        /// The new content.
        content: String,
        /// Answers the agent, once. Dropping it answers an internal error.
        responder: WriteTextFileResponder,
    },
    /// One of ACP's `terminal/*` calls: run a command for the agent and report its output.
    /// Where it runs (confinement) and its lifetime are the receiver's decision.
    Terminal {
        /// The ACP session it belongs to.
        session_id: String,
        /// What the agent asks.
        request: TerminalRequest,
        /// Answers the agent, once. Dropping it answers an internal error.
        responder: TerminalResponder,
    },
    /// The agent sent something unusable (not JSON, over the line limit, malformed params);
    /// it was skipped and the connection keeps working.
    ProtocolError {
        /// What was wrong, for logs and diagnostics.
        message: String,
    },
    /// The connection closed; this is the last event.
    Closed,
}

/// The tool call a permission request is about.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionToolCall {
    /// The tool call id, if sent.
    pub tool_call_id: Option<String>,
    /// The title, if sent.
    pub title: Option<String>,
    /// The whole `toolCall`, as sent.
    pub raw: Value,
}

open_enum! {
    /// What choosing a permission option means.
    pub enum PermissionOptionKind {
        /// Allow this once.
        AllowOnce = "allow_once",
        /// Allow this and future similar calls.
        AllowAlways = "allow_always",
        /// Reject this once.
        RejectOnce = "reject_once",
        /// Reject this and future similar calls.
        RejectAlways = "reject_always",
    }
}

impl PermissionOptionKind {
    /// The option allows the tool call (once or always).
    pub fn is_allow(&self) -> bool {
        matches!(self, PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways)
    }
}

/// One choice in a permission request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// The id to answer with.
    pub option_id: String,
    /// A human-readable label.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// What the option means.
    pub kind: PermissionOptionKind,
}

/// The answer to a permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The user (or auto-approve) chose this option id.
    Selected(String),
    /// The turn was cancelled or nobody answered.
    Cancelled,
}

impl Outcome {
    /// The `result` of the answer to `session/request_permission`.
    pub fn to_json(&self) -> Value {
        match self {
            Outcome::Selected(option_id) => {
                json!({ "outcome": { "outcome": "selected", "optionId": option_id } })
            }
            Outcome::Cancelled => json!({ "outcome": { "outcome": "cancelled" } }),
        }
    }
}

/// An error answer to an agent request: JSON-RPC `(code, message)`.
pub type RequestError = (i64, String);

/// Sends exactly one response to one agent request.
pub(crate) struct Reply {
    id: Value,
    method: &'static str,
    outbox: Outbox,
}

impl Reply {
    pub(crate) fn new(id: Value, method: &'static str, outbox: Outbox) -> Self {
        Reply { id, method, outbox }
    }

    pub(crate) fn send(self, outcome: Result<Value, RpcErrorBody>) {
        self.send_keyed(outcome, None);
    }

    pub(crate) fn send_keyed(self, outcome: Result<Value, RpcErrorBody>, key: Option<String>) {
        let line = rpc::encode_line(&rpc::response_message(self.id, outcome));
        let message = Outgoing { line, written: None, key };
        if self.outbox.send(message).is_err() {
            tracing::debug!(
                method = self.method,
                "connection closed before the answer could be sent"
            );
        }
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} #{}", self.method, self.id)
    }
}

fn unanswered() -> RpcErrorBody {
    RpcErrorBody::new(codes::INTERNAL_ERROR, "client dropped the request unanswered")
}

fn error_body((code, message): RequestError) -> RpcErrorBody {
    RpcErrorBody::new(code, message)
}

/// Answers a `session/request_permission`; dropping it unanswered answers `cancelled`.
#[derive(Debug)]
pub struct PermissionResponder {
    reply: Option<Reply>,
}

impl PermissionResponder {
    pub(crate) fn new(reply: Reply) -> Self {
        PermissionResponder { reply: Some(reply) }
    }

    /// Sends the answer. Fire-and-forget: if the connection closed meanwhile it is dropped.
    pub fn respond(self, outcome: Outcome) {
        self.respond_keyed(outcome, None);
    }

    /// [`Self::respond`], naming the answer's line `key` ([`crate::InputKeys`]).
    pub fn respond_keyed(mut self, outcome: Outcome, key: Option<String>) {
        if let Some(reply) = self.reply.take() {
            reply.send_keyed(Ok(outcome.to_json()), key);
        }
    }

    /// The agent's JSON-RPC id of the request (to answer it again after a restart:
    /// [`crate::AcpClient::answer`]).
    pub fn request_id(&self) -> Option<&Value> {
        self.reply.as_ref().map(|reply| &reply.id)
    }
}

impl Drop for PermissionResponder {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.send(Ok(Outcome::Cancelled.to_json()));
        }
    }
}

/// Answers an `fs/read_text_file`; dropping it unanswered answers an internal error.
#[derive(Debug)]
pub struct ReadTextFileResponder {
    reply: Option<Reply>,
}

impl ReadTextFileResponder {
    pub(crate) fn new(reply: Reply) -> Self {
        ReadTextFileResponder { reply: Some(reply) }
    }

    /// Sends the file content or a JSON-RPC error `(code, message)`.
    pub fn respond(mut self, result: Result<String, RequestError>) {
        if let Some(reply) = self.reply.take() {
            let outcome = result.map(|content| json!({ "content": content })).map_err(error_body);
            reply.send(outcome);
        }
    }
}

impl Drop for ReadTextFileResponder {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.send(Err(unanswered()));
        }
    }
}

/// Answers an `fs/write_text_file`; dropping it unanswered answers an internal error.
#[derive(Debug)]
pub struct WriteTextFileResponder {
    reply: Option<Reply>,
}

impl WriteTextFileResponder {
    pub(crate) fn new(reply: Reply) -> Self {
        WriteTextFileResponder { reply: Some(reply) }
    }

    /// Confirms the write or sends a JSON-RPC error `(code, message)`.
    pub fn respond(mut self, result: Result<(), RequestError>) {
        if let Some(reply) = self.reply.take() {
            reply.send(result.map(|()| json!({})).map_err(error_body));
        }
    }
}

impl Drop for WriteTextFileResponder {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.send(Err(unanswered()));
        }
    }
}

/// An agent's `terminal/*` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalRequest {
    /// `terminal/create`: start `command` with `args`; answered at once with an id.
    Create {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        /// Absolute, or relative to the session's working directory.
        cwd: Option<String>,
        /// Most output bytes to keep (the client's default when absent).
        output_byte_limit: Option<u64>,
    },
    /// `terminal/output`: the output so far and the exit status if it exited.
    Output { terminal_id: String },
    /// `terminal/wait_for_exit`: answered when the command exits.
    WaitForExit { terminal_id: String },
    /// `terminal/kill`: kill the command, keep the terminal (its output stays readable).
    Kill { terminal_id: String },
    /// `terminal/release`: kill the command if it runs and forget the terminal.
    Release { terminal_id: String },
}

/// How a terminal's command ended (ACP `TerminalExitStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalExitStatus {
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
}

impl TerminalExitStatus {
    fn to_json(&self) -> Value {
        json!({ "exitCode": self.exit_code, "signal": self.signal })
    }
}

/// The answer to a [`TerminalRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalAnswer {
    /// To `Create`.
    Created { terminal_id: String },
    /// To `Output`.
    Output { output: String, truncated: bool, exit_status: Option<TerminalExitStatus> },
    /// To `WaitForExit`.
    Exited(TerminalExitStatus),
    /// To `Kill` and `Release`.
    Done,
}

impl TerminalAnswer {
    fn to_json(&self) -> Value {
        match self {
            TerminalAnswer::Created { terminal_id } => json!({ "terminalId": terminal_id }),
            TerminalAnswer::Output { output, truncated, exit_status } => {
                let mut answer = json!({ "output": output, "truncated": truncated });
                if let Some(exit) = exit_status {
                    answer["exitStatus"] = exit.to_json();
                }
                answer
            }
            TerminalAnswer::Exited(exit) => exit.to_json(),
            TerminalAnswer::Done => json!({}),
        }
    }
}

/// Answers a `terminal/*` call; dropping it unanswered answers an internal error.
#[derive(Debug)]
pub struct TerminalResponder {
    reply: Option<Reply>,
}

impl TerminalResponder {
    pub(crate) fn new(reply: Reply) -> Self {
        TerminalResponder { reply: Some(reply) }
    }

    /// Sends the answer or a JSON-RPC error `(code, message)`.
    pub fn respond(mut self, result: Result<TerminalAnswer, RequestError>) {
        if let Some(reply) = self.reply.take() {
            reply.send(result.map(|answer| answer.to_json()).map_err(error_body));
        }
    }
}

impl Drop for TerminalResponder {
    fn drop(&mut self) {
        if let Some(reply) = self.reply.take() {
            reply.send(Err(unanswered()));
        }
    }
}
