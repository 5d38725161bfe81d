//! `AcpClient`: the typed client → agent calls of ACP over one connection.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::dispatch::EventSink;
use crate::error::AcpError;
use crate::events::AgentEvent;
use crate::peer::{InputKeys, Peer};
use crate::schema::{
    ConfigOption, ContentBlock, InitializeResponse, LoadSessionResponse, NewSessionResponse,
    PromptResponse, SetConfigOptionResponse,
};

/// The ACP protocol version this client speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Limits of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcpConfig {
    /// Timeout of every call except `session/prompt` (default 60 s).
    pub request_timeout: Duration,
    /// Timeout of `session/prompt`, i.e. of a whole turn (default 24 h; the engine's stall
    /// and cancel rules end hung turns much earlier).
    pub prompt_timeout: Duration,
    /// Longest line accepted from the agent (default 8 MiB); longer lines are discarded and
    /// reported as [`AgentEvent::ProtocolError`].
    pub max_line_len: usize,
    /// Offer the agent this host's file system and terminals (`fs/*`, `terminal/*`; default
    /// true). Off for an agent on another host (the SSH executor): the client would act on
    /// this host, not the agent's.
    pub host_tools: bool,
}

impl Default for AcpConfig {
    fn default() -> Self {
        AcpConfig {
            request_timeout: Duration::from_secs(60),
            prompt_timeout: Duration::from_secs(24 * 60 * 60),
            max_line_len: 8 * 1024 * 1024,
            host_tools: true,
        }
    }
}

/// A handle to one ACP connection. Cheap to clone; all clones share the connection, and
/// dropping the last clone closes it (as [`AcpClient::close`] does).
#[derive(Clone)]
pub struct AcpClient {
    connection: Arc<Connection>,
    /// Overrides the configured timeouts for calls made through this handle.
    timeout: Option<Duration>,
}

/// What all clones of one client share; closes the peer when the last clone goes.
struct Connection {
    peer: Arc<Peer>,
    config: AcpConfig,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.peer.close();
    }
}

impl std::fmt::Debug for AcpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpClient")
            .field("closed", &self.is_closed())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl AcpClient {
    /// Starts a connection over the agent's stdout (`reader`) and stdin (`writer`).
    ///
    /// Spawns the read and write tasks, so it must be called inside a tokio runtime. The
    /// connection lives until the agent closes its output, [`AcpClient::close`] is called or
    /// the last clone is dropped; the receiver then yields [`AgentEvent::Closed`] and ends.
    pub fn connect<R, W>(
        reader: R,
        writer: W,
        config: AcpConfig,
    ) -> (AcpClient, mpsc::UnboundedReceiver<AgentEvent>)
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (events, receiver) = mpsc::unbounded_channel();
        let peer = Peer::start(reader, writer, config.max_line_len, EventSink::Plain(events), None);
        let client = AcpClient { connection: Arc::new(Connection { peer, config }), timeout: None };
        (client, receiver)
    }

    /// [`AcpClient::connect`] whose events come each with the offset in the agent's output
    /// where the line that carried it ends (the end of input for [`AgentEvent::Closed`]). A
    /// runner's execution maps it to the runner item to acknowledge once the event's effects
    /// are committed (issue 20; `kandev_runtime::runner::Acks::seq_through`).
    ///
    /// With `keys`, keyed lines ([`AcpClient::prompt_keyed`], [`AcpClient::cancel_keyed`],
    /// [`crate::PermissionResponder::respond_keyed`], [`AcpClient::answer`]) are named there
    /// before they are written ([`InputKeys`]).
    pub fn connect_tagged<R, W>(
        reader: R,
        writer: W,
        config: AcpConfig,
        keys: Option<InputKeys>,
    ) -> (AcpClient, mpsc::UnboundedReceiver<(u64, AgentEvent)>)
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (events, receiver) = mpsc::unbounded_channel();
        let sink = EventSink::Tagged(events);
        let peer = Peer::start(reader, writer, config.max_line_len, sink, keys);
        let client = AcpClient { connection: Arc::new(Connection { peer, config }), timeout: None };
        (client, receiver)
    }

    /// Joins a conversation an earlier server began with an agent that is still running
    /// (issue 20, re-adopting through a runner): sends nothing (no `initialize`, no
    /// `session/new` or `session/load`: the agent is past them), numbers its requests from
    /// `first_id` on (pick a range the earlier server never reached), and gives events tagged
    /// like [`AcpClient::connect_tagged`]. The open turn's answer is awaited with
    /// [`AcpClient::await_prompt`].
    pub fn join<R, W>(
        reader: R,
        writer: W,
        config: AcpConfig,
        first_id: u64,
        keys: Option<InputKeys>,
    ) -> (AcpClient, mpsc::UnboundedReceiver<(u64, AgentEvent)>)
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (client, events) = Self::connect_tagged(reader, writer, config, keys);
        client.connection.peer.start_ids_at(first_id);
        (client, events)
    }

    /// Takes the next request id, so a caller can record it before the request goes out
    /// ([`AcpClient::prompt_as`]).
    pub fn reserve_id(&self) -> u64 {
        self.connection.peer.reserve_id()
    }

    /// [`AcpClient::prompt`] with an id from [`AcpClient::reserve_id`] (recorded with the turn,
    /// so a server that joins the conversation later can await its answer).
    pub async fn prompt_as(
        &self,
        id: u64,
        session_id: &str,
        prompt: &[ContentBlock],
    ) -> Result<PromptResponse, AcpError> {
        self.prompt_keyed(id, None, session_id, prompt).await
    }

    /// [`AcpClient::prompt_as`] whose line is named `key` ([`InputKeys`]).
    pub async fn prompt_keyed(
        &self,
        id: u64,
        key: Option<String>,
        session_id: &str,
        prompt: &[ContentBlock],
    ) -> Result<PromptResponse, AcpError> {
        const METHOD: &str = "session/prompt";
        let blocks: Vec<Value> = prompt.iter().map(ContentBlock::to_json).collect();
        let params = json!({ "sessionId": session_id, "prompt": blocks });
        let timeout = self.timeout.unwrap_or(self.connection.config.prompt_timeout);
        let result = self.connection.peer.request_as(id, METHOD, params, timeout, key).await?;
        decode(METHOD, result)
    }

    /// Answers the agent's request `id` with `result`, the line named `key`: an answer an
    /// earlier server committed and the runner never took (issue 38 item 12).
    pub async fn answer(&self, id: Value, result: Value, key: String) -> Result<(), AcpError> {
        self.connection.peer.answer(id, result, key).await
    }

    /// Waits for the answer to the `session/prompt` an earlier server sent as request `id`
    /// (a joined conversation's open turn): it ends the turn as if this client had sent it.
    pub async fn await_prompt(&self, id: u64) -> Result<PromptResponse, AcpError> {
        const METHOD: &str = "session/prompt";
        let timeout = self.timeout.unwrap_or(self.connection.config.prompt_timeout);
        let result = self.connection.peer.await_answer(id, METHOD, timeout).await?;
        decode(METHOD, result)
    }

    /// The offset in the agent's output up to which every line was handled (answers to calls
    /// included): where the answer of a call just returned ends, when the agent wrote nothing
    /// after it.
    pub fn dispatched_through(&self) -> u64 {
        self.connection.peer.dispatched_through()
    }

    /// A handle whose calls (including prompts) use `timeout` instead of the configured ones.
    pub fn with_timeout(&self, timeout: Duration) -> AcpClient {
        AcpClient { timeout: Some(timeout), ..self.clone() }
    }

    /// `initialize`: protocol version 1, file system and terminal capabilities, client info
    /// `kandev`.
    pub async fn initialize(&self) -> Result<InitializeResponse, AcpError> {
        let tools = self.connection.config.host_tools;
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": { "readTextFile": tools, "writeTextFile": tools },
                // ACP `terminal/*`: the engine runs the agent's commands (docs/terminals).
                "terminal": tools,
                // Auth methods of type `terminal`: Kandev shows the command to run.
                "auth": { "terminal": true },
            },
            "clientInfo": { "name": "kandev", "version": env!("CARGO_PKG_VERSION") },
        });
        self.call("initialize", params).await
    }

    /// `authenticate` with one of the agent's auth method ids.
    pub async fn authenticate(&self, method_id: &str) -> Result<(), AcpError> {
        self.request("authenticate", json!({ "methodId": method_id })).await.map(drop)
    }

    /// `session/new` in `cwd` (absolute), with the MCP servers the agent should connect to
    /// (ACP `McpServer` objects, http or stdio form).
    pub async fn new_session(
        &self,
        cwd: &Path,
        mcp_servers: &[Value],
    ) -> Result<NewSessionResponse, AcpError> {
        const METHOD: &str = "session/new";
        let params = json!({ "cwd": path_str(METHOD, cwd)?, "mcpServers": mcp_servers });
        self.call(METHOD, params).await
    }

    /// `session/load`: the agent replays the history as session updates, then answers.
    pub async fn load_session(
        &self,
        session_id: &str,
        cwd: &Path,
        mcp_servers: &[Value],
    ) -> Result<LoadSessionResponse, AcpError> {
        const METHOD: &str = "session/load";
        let params = json!({
            "sessionId": session_id,
            "cwd": path_str(METHOD, cwd)?,
            "mcpServers": mcp_servers,
        });
        self.call(METHOD, params).await
    }

    /// `session/prompt`: returns when the turn ends. Uses the prompt timeout.
    pub async fn prompt(
        &self,
        session_id: &str,
        prompt: &[ContentBlock],
    ) -> Result<PromptResponse, AcpError> {
        const METHOD: &str = "session/prompt";
        let blocks: Vec<Value> = prompt.iter().map(ContentBlock::to_json).collect();
        let params = json!({ "sessionId": session_id, "prompt": blocks });
        let timeout = self.timeout.unwrap_or(self.connection.config.prompt_timeout);
        let result = self.connection.peer.request(METHOD, params, timeout).await?;
        decode(METHOD, result)
    }

    /// `session/cancel` (a notification): the agent should end the turn with `cancelled`.
    pub async fn cancel(&self, session_id: &str) -> Result<(), AcpError> {
        self.cancel_keyed(session_id, None).await
    }

    /// [`AcpClient::cancel`] whose line is named `key` ([`InputKeys`]).
    pub async fn cancel_keyed(
        &self,
        session_id: &str,
        key: Option<String>,
    ) -> Result<(), AcpError> {
        let params = json!({ "sessionId": session_id });
        self.connection.peer.notify("session/cancel", params, key).await
    }

    /// `session/set_mode`.
    pub async fn set_mode(&self, session_id: &str, mode_id: &str) -> Result<(), AcpError> {
        let params = json!({ "sessionId": session_id, "modeId": mode_id });
        self.request("session/set_mode", params).await.map(drop)
    }

    /// `session/set_config_option`: returns the full option list if the agent sent it.
    pub async fn set_config_option(
        &self,
        session_id: &str,
        config_id: &str,
        value: impl Into<Value>,
    ) -> Result<Option<Vec<ConfigOption>>, AcpError> {
        let params =
            json!({ "sessionId": session_id, "configId": config_id, "value": value.into() });
        let response: SetConfigOptionResponse =
            self.call("session/set_config_option", params).await?;
        Ok(response.config_options)
    }

    /// Legacy `session/set_model` (agents that return `models` from `session/new`).
    pub async fn set_model(&self, session_id: &str, model_id: &str) -> Result<(), AcpError> {
        let params = json!({ "sessionId": session_id, "modelId": model_id });
        self.request("session/set_model", params).await.map(drop)
    }

    /// Any request, untyped (extension methods, per-agent quirks).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, AcpError> {
        let timeout = self.timeout.unwrap_or(self.connection.config.request_timeout);
        self.connection.peer.request(method, params, timeout).await
    }

    /// Any notification, untyped; returns once it is written.
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), AcpError> {
        self.connection.peer.notify(method, params, None).await
    }

    /// Closes the connection: pending calls fail with `closed`, the agent's stdin is closed and
    /// the event receiver gets [`AgentEvent::Closed`]. Does not kill the agent process.
    pub fn close(&self) {
        self.connection.peer.close();
    }

    /// The connection is closed (or closing).
    pub fn is_closed(&self) -> bool {
        self.connection.peer.is_closed()
    }

    /// Waits until the connection is closed and its tasks have finished.
    pub async fn closed(&self) {
        self.connection.peer.wait_closed().await;
    }

    async fn call<T: DeserializeOwned>(&self, method: &str, params: Value) -> Result<T, AcpError> {
        let result = self.request(method, params).await?;
        decode(method, result)
    }
}

/// Decodes a result; `null` is read as `{}` so that all-optional answers parse.
fn decode<T: DeserializeOwned>(method: &str, result: Value) -> Result<T, AcpError> {
    let result = if result.is_null() { json!({}) } else { result };
    serde_json::from_value(result).map_err(|err| AcpError::protocol(method, err.to_string()))
}

fn path_str<'a>(method: &str, path: &'a Path) -> Result<&'a str, AcpError> {
    path.to_str()
        .ok_or_else(|| AcpError::protocol(method, format!("path is not utf-8: {}", path.display())))
}
