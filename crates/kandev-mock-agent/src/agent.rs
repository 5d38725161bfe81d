//! The agent side of one connection: shared state and the handler of every incoming message.
//!
//! The read loop calls [`Agent::handle_line`] for each line and never waits on a turn: quick
//! requests are answered inline (so pipelined requests keep their order), prompts and delayed
//! answers run as tasks in the read loop's `JoinSet`. Everything written goes through one
//! channel to the writer, so each task's messages keep their order.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::catalog::{self, Selection};
use crate::config::MockConfig;
use crate::counters::{Call, CallKind, CallLog, CallOutcome};
use crate::error::StateError;
use crate::lock;
use crate::mcp::{McpServer, parse_servers};
use crate::rpc::{self, Incoming, RpcError, codes};
use crate::store::{SessionMeta, Store};
use crate::turn::Turn;

/// What the writer receives.
pub(crate) enum Outgoing {
    /// One line, written followed by `\n`.
    Line(String),
    /// A line holding a `stream ... stamp` chunk: the 16 digits at byte `at` are its write
    /// time, filled in by the writer as the line goes into the pipe ([`crate::write_loop`]).
    Stamped { line: String, at: usize },
    /// Flush and end the run with this exit code (`crash`).
    Crash(i32),
    /// Flush, then answer: everything queued before is in the pipe.
    Flushed(tokio::sync::oneshot::Sender<()>),
}

/// What the client said it can do in `initialize`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClientCaps {
    pub(crate) read_text_file: bool,
    pub(crate) write_text_file: bool,
    pub(crate) terminal: bool,
}

/// A conversation opened (`session/new` or `session/load`) on this connection.
struct LiveSession {
    meta: SessionMeta,
    /// Running turns and their cancel tokens.
    turns: HashMap<u64, CancellationToken>,
    /// The MCP servers the client handed over for this conversation.
    mcp_servers: Vec<McpServer>,
}

/// An answer to a request, with the lines around it.
struct Answer {
    /// Lines sent just before the answer (the `session/load` replay).
    prelude: Vec<String>,
    outcome: Result<Value, RpcError>,
    /// Wait this long before sending anything (`--startup-delay-ms`, `--reset-delay-ms`).
    delay: Duration,
    /// Lines sent just after the answer (`available_commands_update`, `current_mode_update`).
    follow_ups: Vec<String>,
}

impl Answer {
    fn new(outcome: Result<Value, RpcError>) -> Answer {
        Answer { prelude: Vec::new(), outcome, delay: Duration::ZERO, follow_ups: Vec::new() }
    }

    fn delayed(mut self, delay: Duration) -> Answer {
        self.delay = delay;
        self
    }

    fn prelude(mut self, lines: Vec<String>) -> Answer {
        self.prelude = lines;
        self
    }

    fn follow_up(mut self, line: String) -> Answer {
        self.follow_ups.push(line);
        self
    }
}

/// How a request is handled.
enum Reply {
    /// Answer it.
    Answer(Answer),
    /// The handler took care of it (a prompt runs as a task).
    Handled,
    /// Never answer (`--fail-* timeout`).
    Never,
}

impl From<Answer> for Reply {
    fn from(answer: Answer) -> Reply {
        Reply::Answer(answer)
    }
}

impl Reply {
    fn now(outcome: Result<Value, RpcError>) -> Reply {
        Answer::new(outcome).into()
    }
}

/// Shared state of one connection.
pub(crate) struct Agent {
    config: MockConfig,
    out: mpsc::Sender<Outgoing>,
    pub(crate) store: Store,
    calls: Option<CallLog>,
    client: Mutex<ClientCaps>,
    sessions: Mutex<HashMap<String, LiveSession>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>>,
    next_request_id: AtomicU64,
    next_turn_id: AtomicU64,
    /// Set once a conversation was opened here: a later `session/new` is a context reset.
    opened_conversation: AtomicBool,
    /// Set by a successful `authenticate` (what `--require-auth` waits for).
    authenticated: AtomicBool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewParams {
    cwd: PathBuf,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoadParams {
    session_id: String,
    cwd: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionParams {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptParams {
    session_id: String,
    prompt: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetModeParams {
    session_id: String,
    mode_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetConfigParams {
    session_id: String,
    config_id: String,
    value: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetModelParams {
    session_id: String,
    model_id: String,
}

fn parse<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(RpcError::invalid_params)
}

fn outcome_of<T>(result: &Result<T, RpcError>) -> CallOutcome {
    match result {
        Ok(_) => CallOutcome::Ok,
        Err(e) => CallOutcome::Error { code: e.code },
    }
}

fn internal(error: &StateError) -> RpcError {
    tracing::warn!(%error, "state dir error");
    RpcError::new(codes::INTERNAL_ERROR, format!("internal error: {error}"))
}

/// What the agent says back about each block of a prompt that is not text, one line each
/// (tests see what reached the agent): `received image <mimeType> <bytes> bytes`,
/// `received resource <uri> <bytes> bytes`, `received resource_link <uri>` (followed, when
/// the link is a `file://` URI of a file this agent can read, by `read <bytes> bytes from
/// <uri>, starting <hex of the first 16 bytes>`), `received <type>`.
fn received(blocks: &[Value]) -> Vec<String> {
    blocks.iter().flat_map(received_one).collect()
}

/// The lines [`received`] says about one block.
fn received_one(b: &Value) -> Vec<String> {
    fn text<'a>(b: &'a Value, pointer: &str) -> &'a str {
        b.pointer(pointer).and_then(Value::as_str).unwrap_or("")
    }
    match text(b, "/type") {
        "text" => vec![],
        "image" => {
            let data = text(b, "/data");
            let padding = data.bytes().rev().take_while(|&c| c == b'=').count();
            let bytes = (data.len() / 4 * 3).saturating_sub(padding);
            vec![format!("received image {} {bytes} bytes", text(b, "/mimeType"))]
        }
        "resource" => vec![format!(
            "received resource {} {} bytes",
            text(b, "/resource/uri"),
            text(b, "/resource/text").len()
        )],
        "resource_link" => {
            let uri = text(b, "/uri");
            let mut lines = vec![format!("received resource_link {uri}")];
            let read = uri.strip_prefix("file://").and_then(|path| std::fs::read(path).ok());
            if let Some(bytes) = read {
                let head: String = bytes.iter().take(16).map(|b| format!("{b:02x}")).collect();
                lines.push(format!("read {} bytes from {uri}, starting {head}", bytes.len()));
            }
            lines
        }
        other => vec![format!("received {other}")],
    }
}

/// The text of a prompt: its text blocks joined by newlines (other blocks are ignored).
fn prompt_text(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where the answer of a request to the client comes.
pub(crate) type ClientAnswer = oneshot::Receiver<Result<Value, RpcError>>;

/// The answer of a request sent with [`Agent::send_call`].
pub(crate) async fn answer_of(answer: ClientAnswer) -> Result<Value, RpcError> {
    answer
        .await
        .unwrap_or_else(|_| Err(RpcError::new(codes::INTERNAL_ERROR, "client request dropped")))
}

impl Agent {
    pub(crate) fn new(
        config: MockConfig,
        out: mpsc::Sender<Outgoing>,
    ) -> Result<Agent, StateError> {
        let store = Store::open(config.state_dir.as_deref())?;
        let calls = config.state_dir.as_deref().map(CallLog::open).transpose()?;
        Ok(Agent {
            config,
            out,
            store,
            calls,
            client: Mutex::new(ClientCaps::default()),
            sessions: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            next_request_id: AtomicU64::new(1),
            next_turn_id: AtomicU64::new(1),
            opened_conversation: AtomicBool::new(false),
            authenticated: AtomicBool::new(false),
        })
    }

    /// Queues one line for the client. If the writer is gone the run is ending: drop it.
    pub(crate) async fn send(&self, line: String) {
        let _ = self.out.send(Outgoing::Line(line)).await;
    }

    /// Sends a `session/update` notification.
    pub(crate) async fn send_update(&self, session_id: &str, update: &Value) {
        self.send(rpc::update_line(session_id, update)).await;
    }

    /// Sends a `session/update` carrying the stamped chunk `text`
    /// ([`crate::script::stamped_chunk_text`]): the writer stamps it with the time it is written.
    pub(crate) async fn send_stamped_update(&self, session_id: &str, update: &Value, text: &str) {
        let line = rpc::update_line(session_id, update);
        // The chunk's text appears in the line as it is (digits, `|` and letters need no
        // escaping); its stamp follows the six-digit index and `|`.
        let stamp =
            text.get(..crate::script::STAMPED_MIN_BYTES - 1).and_then(|head| line.find(head));
        match stamp {
            Some(start) => {
                let at = start + crate::script::STAMP_OFFSET;
                let _ = self.out.send(Outgoing::Stamped { line, at }).await;
            }
            None => self.send(line).await,
        }
    }

    /// Returns once everything queued so far is written to the pipe (before a call on
    /// another channel, MCP, so the client can see the agent's output in the agent's order).
    pub(crate) async fn flushed(&self) {
        let (done, flushed) = tokio::sync::oneshot::channel();
        if self.out.send(Outgoing::Flushed(done)).await.is_ok() {
            let _ = flushed.await;
        }
    }

    /// Ends the run with `code` once everything queued so far is written.
    pub(crate) async fn crash(&self, code: i32) {
        let _ = self.out.send(Outgoing::Crash(code)).await;
    }

    pub(crate) fn client_caps(&self) -> ClientCaps {
        *lock(&self.client)
    }

    /// The cwd of a live session.
    /// The MCP server called `name` of a conversation.
    pub(crate) fn mcp_server(&self, session_id: &str, name: &str) -> Option<McpServer> {
        let sessions = lock(&self.sessions);
        let servers = &sessions.get(session_id)?.mcp_servers;
        servers.iter().find(|s| s.name() == name).cloned()
    }

    /// The `mcpServers` of a `session/new` or `session/load`, appended to `--mcp-log`.
    fn take_mcp_servers(&self, params: &Value) -> Vec<McpServer> {
        let given = params.get("mcpServers");
        if let (Some(path), Some(given)) = (&self.config.mcp_log, given) {
            let appended =
                std::fs::OpenOptions::new().create(true).append(true).open(path).and_then(
                    |mut file| {
                        std::io::Write::write_all(&mut file, format!("{given}\n").as_bytes())
                    },
                );
            if let Err(err) = appended {
                tracing::warn!(error = %err, "cannot append to the MCP log");
            }
        }
        parse_servers(given)
    }

    pub(crate) fn session_cwd(&self, session_id: &str) -> Option<PathBuf> {
        lock(&self.sessions).get(session_id).map(|s| s.meta.cwd.clone())
    }

    /// Forgets a finished turn.
    pub(crate) fn end_turn(&self, session_id: &str, turn_id: u64) {
        if let Some(session) = lock(&self.sessions).get_mut(session_id) {
            session.turns.remove(&turn_id);
        }
    }

    /// Sends a request to the client and waits for its answer. Dropping the future forgets
    /// the request (a late answer is then ignored).
    pub(crate) async fn call_client(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        struct Forget<'a>(&'a Agent, u64);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                lock(&self.0.pending).remove(&self.1);
            }
        }
        let (id, rx) = self.send_call(method, params).await;
        let _forget = Forget(self, id);
        answer_of(rx).await
    }

    /// Sends a request to the client and returns its id and where its answer comes; the
    /// caller awaits it later ([`answer_of`]) or drops it with [`Self::forget_call`].
    pub(crate) async fn send_call(&self, method: &str, params: Value) -> (u64, ClientAnswer) {
        let id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        self.send(rpc::request_line(id, method, params)).await;
        (id, rx)
    }

    /// Stops waiting for the answer of request `id`.
    pub(crate) fn forget_call(&self, id: u64) {
        lock(&self.pending).remove(&id);
    }

    fn record(&self, kind: CallKind, outcome: CallOutcome, session_id: Option<&str>) {
        self.record_call(Call {
            pid: std::process::id(),
            kind,
            outcome,
            session_id: session_id.map(str::to_owned),
            prompt: None,
        });
    }

    fn record_call(&self, call: Call) {
        if let Some(calls) = &self.calls {
            calls.record(&call);
        }
    }

    /// Handles one input line.
    pub(crate) async fn handle_line(self: &Arc<Self>, line: &[u8], tasks: &mut JoinSet<()>) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        let value: Value = match serde_json::from_slice(line) {
            Ok(value) => value,
            Err(error) => {
                tracing::warn!(%error, "unparsable input line");
                let error = RpcError::new(codes::PARSE_ERROR, format!("parse error: {error}"));
                self.send(rpc::error_line(&Value::Null, &error)).await;
                return;
            }
        };
        match rpc::classify(value) {
            Incoming::Request { id, method, params } => {
                let reply = self.on_request(&id, &method, params, tasks);
                self.answer(id, reply, tasks).await;
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "session/cancel" => {
                    if let Err(error) = self.cancel(params) {
                        tracing::warn!(%error.message, "bad session/cancel");
                    }
                }
                other => tracing::debug!(method = other, "ignoring notification"),
            },
            Incoming::Response { id, outcome } => {
                let waiter = id.as_u64().and_then(|id| lock(&self.pending).remove(&id));
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(outcome);
                    }
                    None => tracing::debug!(%id, "answer to no pending request"),
                }
            }
            Incoming::Invalid { id } => {
                let error = RpcError::new(codes::INVALID_REQUEST, "invalid request");
                self.send(rpc::error_line(&id, &error)).await;
            }
        }
    }

    async fn answer(&self, id: Value, reply: Reply, tasks: &mut JoinSet<()>) {
        let Reply::Answer(answer) = reply else {
            return;
        };
        let mut lines = answer.prelude;
        lines.push(match answer.outcome {
            Ok(result) => rpc::response_line(&id, result),
            Err(error) => rpc::error_line(&id, &error),
        });
        lines.extend(answer.follow_ups);
        if answer.delay.is_zero() {
            for line in lines {
                self.send(line).await;
            }
        } else {
            let out = self.out.clone();
            let delay = answer.delay;
            tasks.spawn(async move {
                tokio::time::sleep(delay).await;
                for line in lines {
                    let _ = out.send(Outgoing::Line(line)).await;
                }
            });
        }
    }

    fn on_request(
        self: &Arc<Self>,
        id: &Value,
        method: &str,
        params: Value,
        tasks: &mut JoinSet<()>,
    ) -> Reply {
        match method {
            "initialize" => self.initialize(&params),
            "authenticate" => self.authenticate(&params),
            "session/new" => self.new_session(params),
            "session/load" => self.load_session(params),
            "session/prompt" => match self.prompt(id, params, tasks) {
                Ok(()) => Reply::Handled,
                Err(error) => Reply::now(Err(error)),
            },
            "session/cancel" => Reply::now(self.cancel(params).map(|()| json!({}))),
            "session/set_mode" => self.set_mode(params),
            "session/set_config_option" => self.set_config_option(params),
            "session/set_model" => self.set_model(params),
            other => Reply::now(Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            ))),
        }
    }

    fn initialize(&self, params: &Value) -> Reply {
        let flag =
            |pointer: &str| params.pointer(pointer).and_then(Value::as_bool).unwrap_or(false);
        *lock(&self.client) = ClientCaps {
            read_text_file: flag("/clientCapabilities/fs/readTextFile"),
            write_text_file: flag("/clientCapabilities/fs/writeTextFile"),
            terminal: flag("/clientCapabilities/terminal"),
        };
        self.record(CallKind::Initialize, CallOutcome::Ok, None);
        let result = json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": self.config.load_session,
                "promptCapabilities": {
                    "image": self.config.image_prompts,
                    "audio": false,
                    "embeddedContext": true,
                },
                "mcpCapabilities": {"http": self.config.mcp_http, "sse": false},
            },
            "authMethods": self.auth_methods(),
            "agentInfo": {
                "name": "kandev-mock-agent",
                "title": "Kandev mock agent",
                "version": env!("CARGO_PKG_VERSION"),
            },
        });
        Answer::new(Ok(result)).delayed(self.config.startup_delay).into()
    }

    /// One auth method, and with `--require-auth` a second one (a person picks one).
    fn auth_methods(&self) -> Value {
        let mut methods = vec![
            json!({"id": "mock-login", "name": "Mock login", "description": "Always succeeds"}),
        ];
        if self.config.require_auth {
            methods.push(json!({
                "id": "mock-token",
                "name": "Mock token",
                "description": "Also succeeds",
            }));
        }
        Value::Array(methods)
    }

    /// `authenticate`: an advertised method succeeds (and unlocks prompts), another is -32602.
    fn authenticate(&self, params: &Value) -> Reply {
        let method = params.get("methodId").and_then(Value::as_str).unwrap_or_default();
        let offered = self.auth_methods();
        let known = offered.as_array().is_some_and(|list| {
            list.iter().any(|m| m.get("id").and_then(Value::as_str) == Some(method))
        });
        if !known {
            let error = RpcError::invalid_params(format!("unknown auth method {method:?}"));
            self.record(CallKind::Authenticate, CallOutcome::Error { code: error.code }, None);
            return Reply::now(Err(error));
        }
        self.authenticated.store(true, Ordering::Relaxed);
        self.record(CallKind::Authenticate, CallOutcome::Ok, None);
        Reply::now(Ok(json!({})))
    }

    /// The answer of `session/new` and `session/load`.
    fn session_result(session_id: Option<&str>, selection: &Selection) -> Value {
        let mut result = json!({
            "modes": selection.modes_json(),
            "configOptions": selection.config_options_json(),
            "models": selection.models_json(),
        });
        if let (Some(id), Some(object)) = (session_id, result.as_object_mut()) {
            object.insert("sessionId".to_owned(), json!(id));
        }
        result
    }

    fn new_session(&self, params: Value) -> Reply {
        let mcp_servers = self.take_mcp_servers(&params);
        let is_reset = self.opened_conversation.swap(true, Ordering::SeqCst);
        let delay = if is_reset { self.config.reset_delay } else { Duration::ZERO };
        if let Some(kind) = self.config.fail_new {
            let Some(error) = kind.error("session/new") else {
                self.record(CallKind::New, CallOutcome::Unanswered, None);
                return Reply::Never;
            };
            self.record(CallKind::New, CallOutcome::Error { code: error.code }, None);
            return Answer::new(Err(error)).delayed(delay).into();
        }
        let created = parse::<NewParams>(params).and_then(|p| {
            let meta = SessionMeta { cwd: p.cwd, selection: Selection::default() };
            let id = self.store.create(&meta).map_err(|e| internal(&e))?;
            Ok((id, meta))
        });
        let (id, meta) = match created {
            Ok(created) => created,
            Err(error) => {
                self.record(CallKind::New, CallOutcome::Error { code: error.code }, None);
                return Answer::new(Err(error)).delayed(delay).into();
            }
        };
        let result = Self::session_result(Some(&id), &meta.selection);
        let live = LiveSession { meta, turns: HashMap::new(), mcp_servers };
        lock(&self.sessions).insert(id.clone(), live);
        self.record(CallKind::New, CallOutcome::Ok, Some(&id));
        Answer::new(Ok(result))
            .delayed(delay)
            .follow_up(rpc::update_line(&id, &catalog::available_commands_update()))
            .into()
    }

    fn load_session(&self, params: Value) -> Reply {
        let mcp_servers = self.take_mcp_servers(&params);
        let session_id = params.get("sessionId").and_then(Value::as_str).map(str::to_owned);
        let record = |outcome| self.record(CallKind::Load, outcome, session_id.as_deref());
        if !self.config.load_session {
            let error = RpcError::new(codes::METHOD_NOT_FOUND, "method not found: session/load");
            record(CallOutcome::Error { code: error.code });
            return Reply::now(Err(error));
        }
        if let Some(kind) = self.config.fail_load {
            let Some(error) = kind.error("session/load") else {
                record(CallOutcome::Unanswered);
                return Reply::Never;
            };
            record(CallOutcome::Error { code: error.code });
            return Reply::now(Err(error));
        }
        let loaded = parse::<LoadParams>(params).and_then(|p| {
            let found = self.store.load(&p.session_id).map_err(|e| internal(&e))?;
            let Some((mut meta, history)) = found else {
                return Err(RpcError::unknown_session(&p.session_id));
            };
            if let Some(cwd) = p.cwd {
                meta.cwd = cwd;
                self.store.save_meta(&p.session_id, &meta).map_err(|e| internal(&e))?;
            }
            Ok((p.session_id, meta, history))
        });
        let (id, meta, history) = match loaded {
            Ok(loaded) => loaded,
            Err(error) => {
                record(CallOutcome::Error { code: error.code });
                return Reply::now(Err(error));
            }
        };
        record(CallOutcome::Ok);
        self.opened_conversation.store(true, Ordering::SeqCst);
        let result = Self::session_result(None, &meta.selection);
        lock(&self.sessions)
            .entry(id.clone())
            .and_modify(|s| {
                s.meta = meta.clone();
                s.mcp_servers = mcp_servers.clone();
            })
            .or_insert_with(|| LiveSession { meta, turns: HashMap::new(), mcp_servers });
        // The replay goes out before the answer: queue it now, in order, from the read loop.
        let replay: Vec<String> = history.iter().map(|u| rpc::update_line(&id, u)).collect();
        Answer::new(Ok(result))
            .prelude(replay)
            .follow_up(rpc::update_line(&id, &catalog::available_commands_update()))
            .into()
    }

    fn prompt(
        self: &Arc<Self>,
        id: &Value,
        params: Value,
        tasks: &mut JoinSet<()>,
    ) -> Result<(), RpcError> {
        let session_id = params.get("sessionId").and_then(Value::as_str).map(str::to_owned);
        let registered = parse::<PromptParams>(params).and_then(|p| {
            if self.config.require_auth && !self.authenticated.load(Ordering::Relaxed) {
                return Err(RpcError::new(
                    codes::AUTH_REQUIRED,
                    "authentication required: log in first",
                ));
            }
            let text = prompt_text(&p.prompt);
            let attached = received(&p.prompt);
            let cancel = CancellationToken::new();
            let turn_id = self.next_turn_id.fetch_add(1, Ordering::Relaxed);
            let mut sessions = lock(&self.sessions);
            let session = sessions
                .get_mut(&p.session_id)
                .ok_or_else(|| RpcError::unknown_session(&p.session_id))?;
            session.turns.insert(turn_id, cancel.clone());
            Ok((p.session_id, text, attached, turn_id, cancel))
        });
        let (session_id, text, attached, turn_id, cancel) = match registered {
            Ok(registered) => registered,
            Err(error) => {
                self.record_call(Call {
                    pid: std::process::id(),
                    kind: CallKind::Prompt,
                    outcome: CallOutcome::Error { code: error.code },
                    session_id,
                    prompt: None,
                });
                return Err(error);
            }
        };
        self.record_call(Call {
            pid: std::process::id(),
            kind: CallKind::Prompt,
            outcome: CallOutcome::Ok,
            session_id: Some(session_id.clone()),
            prompt: Some(text.clone()),
        });
        let turn = Turn::new(Arc::clone(self), session_id, id.clone(), turn_id, cancel);
        tasks.spawn(turn.run(text, attached));
        Ok(())
    }

    fn cancel(&self, params: Value) -> Result<(), RpcError> {
        let session_id = params.get("sessionId").and_then(Value::as_str).map(str::to_owned);
        let result = parse::<SessionParams>(params).and_then(|p| {
            let sessions = lock(&self.sessions);
            let session = sessions
                .get(&p.session_id)
                .ok_or_else(|| RpcError::unknown_session(&p.session_id))?;
            if self.config.hang_on_cancel {
                tracing::debug!(session = %p.session_id, "ignoring cancel (--hang-on-cancel)");
            } else {
                session.turns.values().for_each(CancellationToken::cancel);
            }
            Ok(())
        });
        self.record(CallKind::Cancel, outcome_of(&result), session_id.as_deref());
        result
    }

    /// A live session's current selection (mode, model, thought level).
    pub(crate) fn selection(&self, session_id: &str) -> Option<Selection> {
        lock(&self.sessions).get(session_id).map(|s| s.meta.selection.clone())
    }

    /// Applies `change` to a live session's selection and persists it.
    fn change_selection(
        &self,
        session_id: &str,
        change: impl FnOnce(&mut Selection) -> Result<(), RpcError>,
    ) -> Result<Selection, RpcError> {
        let meta = {
            let mut sessions = lock(&self.sessions);
            let session = sessions
                .get_mut(session_id)
                .ok_or_else(|| RpcError::unknown_session(session_id))?;
            change(&mut session.meta.selection)?;
            session.meta.clone()
        };
        self.store.save_meta(session_id, &meta).map_err(|e| internal(&e))?;
        Ok(meta.selection)
    }

    fn set_mode(&self, params: Value) -> Reply {
        let session_id = params.get("sessionId").and_then(Value::as_str).map(str::to_owned);
        let result = parse::<SetModeParams>(params).and_then(|p| {
            self.change_selection(&p.session_id, |s| {
                s.set("mode", &p.mode_id).map_err(RpcError::invalid_params)
            })
            .map(|selection| (p.session_id, selection))
        });
        self.record(CallKind::SetMode, outcome_of(&result), session_id.as_deref());
        match result {
            Ok((id, selection)) => Answer::new(Ok(json!({})))
                .follow_up(rpc::update_line(&id, &catalog::current_mode_update(&selection.mode)))
                .into(),
            Err(error) => Reply::now(Err(error)),
        }
    }

    fn set_config_option(&self, params: Value) -> Reply {
        let session_id = params.get("sessionId").and_then(Value::as_str).map(str::to_owned);
        let result = parse::<SetConfigParams>(params).and_then(|p| {
            let Some(value) = p.value.as_str() else {
                return Err(RpcError::invalid_params("value must be a string"));
            };
            let selection = self.change_selection(&p.session_id, |s| {
                s.set(&p.config_id, value).map_err(RpcError::invalid_params)
            })?;
            Ok((p.session_id, p.config_id, selection))
        });
        self.record(CallKind::SetConfigOption, outcome_of(&result), session_id.as_deref());
        match result {
            Ok((id, config_id, selection)) => {
                let answer =
                    Answer::new(Ok(json!({ "configOptions": selection.config_options_json() })));
                if config_id == "mode" {
                    let update = catalog::current_mode_update(&selection.mode);
                    answer.follow_up(rpc::update_line(&id, &update)).into()
                } else {
                    answer.into()
                }
            }
            Err(error) => Reply::now(Err(error)),
        }
    }

    fn set_model(&self, params: Value) -> Reply {
        let session_id = params.get("sessionId").and_then(Value::as_str).map(str::to_owned);
        let result = parse::<SetModelParams>(params).and_then(|p| {
            self.change_selection(&p.session_id, |s| {
                s.set("model", &p.model_id).map_err(RpcError::invalid_params)
            })
        });
        self.record(CallKind::SetModel, outcome_of(&result), session_id.as_deref());
        Reply::now(result.map(|_| json!({})))
    }
}
