//! Test harness: a real server on a real socket (port 0) over a SQLite file in a temp dir
//! (or a PostgreSQL database: see [`location`]).

#![allow(dead_code)]

pub mod logs;
pub mod mcp;
pub mod worktrees;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use kandev_engine::{AgentCommand, BuiltinMockLauncher, Engine, EngineConfig};
use kandev_server::{AppState, ServerConfig};
use kandev_store::{Location, Store};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

pub const WAIT: Duration = Duration::from_secs(10);

pub struct TestServer {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    /// The server's store, for fault injection (a full disk).
    pub store: Store,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    http: reqwest::Client,
    token: Option<String>,
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(ServerConfig::default(), tempfile::tempdir().unwrap()).await
    }

    pub async fn start_with(config: ServerConfig, dir: tempfile::TempDir) -> TestServer {
        Self::start_tuned(config, dir, |_| {}).await
    }

    /// Starts with engine settings adjusted by `tune` (shorter bounds for lifecycle tests).
    pub async fn start_tuned(
        config: ServerConfig,
        dir: tempfile::TempDir,
        tune: impl FnOnce(&mut EngineConfig),
    ) -> TestServer {
        Self::start_at("127.0.0.1:0", config, dir, tune).await
    }

    /// Starts listening on `bind` (`0.0.0.0:0`: every interface); the test still talks to it
    /// on 127.0.0.1.
    pub async fn start_at(
        bind: &str,
        config: ServerConfig,
        dir: tempfile::TempDir,
        tune: impl FnOnce(&mut EngineConfig),
    ) -> TestServer {
        let store = Store::open(location(&dir).await).await.unwrap();
        kandev_server::first_run(&store).await.unwrap();
        let mock = AgentCommand {
            program: "kandev".into(),
            args: vec!["mock-agent".into()],
            flags: vec!["--state-dir".into(), dir.path().join("mock").display().to_string()],
        };
        let mut engine_config = EngineConfig::new(dir.path().to_path_buf(), mock);
        engine_config.cancel_timeout = Duration::from_millis(500);
        engine_config.stop_grace = Duration::from_millis(500);
        engine_config.call_timeout = Duration::from_secs(2);
        tune(&mut engine_config);
        let engine = Engine::new(store.clone(), engine_config, Arc::new(BuiltinMockLauncher));
        engine.reconcile().await.unwrap();
        let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let token = config.token.clone();
        let shutdown = CancellationToken::new();
        let state = AppState::new(engine.clone(), config);
        let stop = shutdown.clone();
        let served = store.clone();
        let task = tokio::spawn(async move {
            kandev_server::serve(listener, state, stop).await.unwrap();
            engine.shutdown().await;
            served.close().await;
        });
        TestServer { addr, dir, store, shutdown, task, http: reqwest::Client::new(), token }
    }

    /// Stops the server and waits until it has closed the database.
    pub async fn stop(self) -> tempfile::TempDir {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task).await.expect("server stops").unwrap();
        self.dir
    }

    /// Call counters of the mock agents this server ran.
    pub fn counters(&self) -> kandev_mock_agent::Counters {
        kandev_mock_agent::Counters::read(&self.dir.path().join("mock")).unwrap()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Posts raw bytes to an action; returns status and JSON body.
    pub async fn post_raw(&self, action: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        let mut request = self
            .http
            .post(self.url(&format!("/api/v1/{action}")))
            .header("content-type", "application/json")
            .body(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// Uploads a file with `attachment.upload`; returns status and JSON body.
    pub async fn upload(&self, name: &str, mime: &str, bytes: Vec<u8>) -> (u16, Value) {
        let mut request = self
            .http
            .post(self.url("/api/v1/attachment.upload"))
            .query(&[("name", name)])
            .header("content-type", mime)
            .header("x-kandev-upload", "1")
            .body(bytes);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    pub async fn post(&self, action: &str, payload: Value) -> (u16, Value) {
        self.post_raw(action, payload.to_string()).await
    }

    /// Calls an action that must succeed.
    pub async fn call(&self, action: &str, payload: Value) -> Value {
        let (status, body) = self.post(action, payload).await;
        assert_eq!(status, 200, "{action} failed: {body}");
        body
    }

    /// A WebSocket on `/ws`, with the server token when the server has one.
    pub async fn ws(&self) -> Ws {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = format!("ws://{}/ws", self.addr).into_client_request().unwrap();
        if let Some(token) = &self.token {
            let value = format!("Bearer {token}").parse().unwrap();
            request.headers_mut().insert("authorization", value);
        }
        let (stream, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        Ws { stream, next_id: 0 }
    }

    /// The default workspace and a fresh Kanban board in it.
    pub async fn kanban(&self) -> (String, Value) {
        let workspaces = self.call("workspace.list", json!({})).await;
        let workspace_id = workspaces["workspaces"][0]["id"].as_str().unwrap().to_owned();
        let created = self
            .call(
                "workflow.create",
                json!({"workspace_id": workspace_id, "name": "Board", "template_id": "kanban"}),
            )
            .await;
        (workspace_id, created["workflow"].clone())
    }
}

/// The database of a test server in `dir`: its SQLite file, or, when
/// `KANDEV_TEST_SERVER_ON_PG` is set (scripts/test runs the storage API tests so a second
/// time), a fresh database on the PostgreSQL server `KANDEV_TEST_PG_URL` names, kept for a
/// restart on the same `dir`.
pub async fn location(dir: &tempfile::TempDir) -> Location {
    if std::env::var_os("KANDEV_TEST_SERVER_ON_PG").is_none() {
        return Location::File(db_path(dir));
    }
    let admin = std::env::var("KANDEV_TEST_PG_URL")
        .expect("KANDEV_TEST_SERVER_ON_PG needs KANDEV_TEST_PG_URL (scripts/pg start)");
    let marker = dir.path().join("postgres-url");
    if let Ok(url) = std::fs::read_to_string(&marker) {
        return Location::Postgres(url);
    }
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let name = format!("kandev_api_{}_{nanos}", std::process::id());
    let url = kandev_store::create_postgres_database(&admin, &name).await.unwrap();
    std::fs::write(&marker, &url).unwrap();
    Location::Postgres(url)
}

pub fn db_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("kandev.db")
}

pub fn step_id(workflow: &Value, name: &str) -> String {
    workflow["steps"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub struct Ws {
    pub stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
}

impl Ws {
    pub fn new(stream: WebSocketStream<MaybeTlsStream<TcpStream>>) -> Ws {
        Ws { stream, next_id: 0 }
    }

    pub async fn send_raw(&mut self, text: impl Into<String>) {
        self.stream.send(Message::text(text.into())).await.unwrap();
    }

    /// Sends a request and returns its id.
    pub async fn request(&mut self, action: &str, payload: Value) -> String {
        self.next_id += 1;
        let id = format!("c{}", self.next_id);
        let frame = json!({"id": id, "type": "request", "action": action, "payload": payload});
        self.send_raw(frame.to_string()).await;
        id
    }

    /// The next JSON frame, failing the test after a timeout.
    pub async fn next(&mut self) -> Value {
        loop {
            let message = tokio::time::timeout(WAIT, self.stream.next())
                .await
                .expect("a frame within the timeout")
                .expect("connection open")
                .expect("valid frame");
            if let Message::Text(text) = message {
                return serde_json::from_str(&text).unwrap();
            }
        }
    }

    /// Skips notifications until the response (or error) to `id` arrives; returns
    /// the notifications seen on the way and the reply.
    pub async fn reply(&mut self, id: &str) -> (Vec<Value>, Value) {
        let mut seen = vec![];
        loop {
            let frame = self.next().await;
            if frame["id"] == id {
                return (seen, frame);
            }
            seen.push(frame);
        }
    }

    /// Sends a request and waits for its reply.
    pub async fn call(&mut self, action: &str, payload: Value) -> Value {
        let id = self.request(action, payload).await;
        self.reply(&id).await.1
    }

    /// Waits for the next notification with `action`, returning it.
    pub async fn notification(&mut self, action: &str) -> Value {
        loop {
            let frame = self.next().await;
            if frame["type"] == "notification" && frame["action"] == action {
                return frame;
            }
        }
    }
}

impl TestServer {
    /// A task on a fresh Kanban board's Backlog (no auto-start), and a session launched on it
    /// with `profile` (the Mock profile when `None`). Returns (task id, session id).
    pub async fn session(&self, profile: Option<&str>) -> (String, String) {
        let (_, workflow) = self.kanban().await;
        let backlog = step_id(&workflow, "Backlog");
        let task = self
            .call(
                "task.create",
                json!({"workflow_id": workflow["id"], "title": "Task", "step_id": backlog}),
            )
            .await;
        let task_id = task["task"]["id"].as_str().unwrap().to_owned();
        let launched = self
            .call("session.launch", json!({"task_id": task_id, "agent_profile_id": profile}))
            .await;
        let session_id = launched["session"]["id"].as_str().unwrap().to_owned();
        self.wait_state(&session_id, "WAITING_FOR_INPUT").await;
        (task_id, session_id)
    }

    /// Creates a profile and returns its id.
    pub async fn profile(&self, body: Value) -> String {
        self.call("agent.profile.create", body).await["profile"]["id"].as_str().unwrap().to_owned()
    }

    /// Waits (bounded) for a session state, following its notifications.
    pub async fn wait_state(&self, session_id: &str, state: &str) -> Value {
        let mut ws = self.ws().await;
        let topic = format!("session:{session_id}");
        ws.call("subscribe", json!({"topics": [topic]})).await;
        let current = self.call("session.get", json!({"id": session_id})).await;
        if current["session"]["state"] == state {
            return current["session"].clone();
        }
        loop {
            let frame = ws.next().await;
            if frame["type"] == "notification" && frame["payload"]["session"]["state"] == state {
                return frame["payload"]["session"].clone();
            }
        }
    }

    /// Waits (bounded) until the session shows a `last_error`, following its notifications;
    /// returns the session.
    pub async fn wait_last_error(&self, session_id: &str) -> Value {
        let mut ws = self.ws().await;
        ws.call("subscribe", json!({"topics": [format!("session:{session_id}")]})).await;
        let current = self.call("session.get", json!({"id": session_id})).await;
        if !current["session"]["last_error"].is_null() {
            return current["session"].clone();
        }
        loop {
            let frame = ws.next().await;
            if frame["type"] == "notification"
                && !frame["payload"]["session"]["last_error"].is_null()
            {
                return frame["payload"]["session"].clone();
            }
        }
    }

    /// Sends a message and waits until the turn it starts has completed.
    pub async fn turn(&self, session_id: &str, content: &str) -> Vec<Value> {
        let mut ws = self.ws().await;
        let topic = format!("session:{session_id}");
        ws.call("subscribe", json!({"topics": [topic]})).await;
        let sent =
            self.call("message.add", json!({"session_id": session_id, "content": content})).await;
        assert_eq!(sent["status"], "sent", "{sent}");
        ws.notification("session.turn.completed").await;
        self.messages(session_id).await
    }

    /// Waits until the session has completed `n` turns in all (replaying from the start, so
    /// turns that ended before the call count).
    pub async fn wait_turns(&self, session_id: &str, n: usize) {
        let mut ws = self.ws().await;
        let topic = format!("session:{session_id}");
        let id =
            ws.request("subscribe", json!({"topics": [topic], "since": {topic.clone(): 0}})).await;
        let (replayed, _) = ws.reply(&id).await;
        let mut done = replayed.iter().filter(|f| f["action"] == "session.turn.completed").count();
        while done < n {
            ws.notification("session.turn.completed").await;
            done += 1;
        }
    }

    pub async fn messages(&self, session_id: &str) -> Vec<Value> {
        let list =
            self.call("message.list", json!({"session_id": session_id, "limit": 1000})).await;
        list["messages"].as_array().unwrap().clone()
    }
}

/// The messages of one kind.
pub fn of_kind<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages.iter().filter(|m| m["kind"] == kind).collect()
}

/// A git repository with one commit (`index.html`), in a temp dir.
pub fn git_repository() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    kandev_testkit::git::init(&repo);
    kandev_testkit::git::commit(&repo, &[("index.html", "dev server ok\n")], "initial");
    (tmp, repo)
}

impl TestServer {
    /// A task on the repository with a session started (which makes its worktree); returns
    /// the task id and the worktree path.
    pub async fn task_with_worktree(&self, workflow: &Value, repo_id: &str) -> (String, String) {
        let backlog = step_id(workflow, "Backlog");
        let task = self
            .call(
                "task.create",
                json!({"workflow_id": workflow["id"], "title": "dev", "step_id": backlog,
                       "repository_ids": [repo_id]}),
            )
            .await;
        let task_id = task["task"]["id"].as_str().unwrap().to_owned();
        let launched = self.call("session.launch", json!({"task_id": task_id})).await;
        let session = launched["session"]["id"].as_str().unwrap().to_owned();
        let session = self.wait_state(&session, "WAITING_FOR_INPUT").await;
        (task_id, session["cwd"].as_str().unwrap().to_owned())
    }
}

/// Live (non-zombie) processes whose `/proc/<pid>/stat` field `field` (after the state: 0
/// the parent, 1 the process group, 2 the session) is `id`.
fn live_processes_with(field: usize, id: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some((_, rest)) = stat.rsplit_once(')') else { return false };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let value = fields.nth(field).and_then(|p| p.parse::<i32>().ok());
            value == Some(id) && state != Some("Z") && state != Some("X")
        })
        .collect()
}

/// Live (non-zombie) processes of the session `sid` (a terminal's shell and its jobs).
pub fn session_members(sid: i32) -> Vec<i32> {
    live_processes_with(2, sid)
}

/// The process group of `pid`, while it lives.
pub fn group_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// Live (non-zombie) processes of the group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    live_processes_with(1, pgid)
}
