//! What the MCP tests (`mcp.rs`, `mcp_questions.rs`, `mcp_servers.rs`) share: a session whose
//! agent logs the MCP servers it was handed, what the agent said of its MCP calls, and
//! waiting for a session by its notifications.

use std::path::{Path, PathBuf};

use kandev_server::ServerConfig;
use serde_json::{Value, json};

use super::{TestServer, of_kind, step_id};

/// A Mock profile whose agent logs the `mcpServers` it gets to `log`.
pub async fn logging_profile(server: &TestServer, log: &Path) -> String {
    let args = json!(["--mcp-log", log.display().to_string()]);
    server.profile(json!({"name": "Mock MCP", "kind": "mock", "args": args})).await
}

/// The agent messages of a session's last turn that report an MCP call.
pub fn mcp_said(messages: &[Value]) -> Vec<String> {
    of_kind(messages, "agent")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .flat_map(str::lines)
        .filter(|c| c.starts_with("mcp "))
        .map(str::to_owned)
        .collect()
}

pub fn script(lines: &[String]) -> String {
    format!("#!mock\n{}", lines.join("\n"))
}

pub struct Setup {
    pub server: TestServer,
    pub log: PathBuf,
    pub workspace_id: String,
    pub workflow: Value,
    pub task_id: String,
    pub session_id: String,
}

/// A Kanban board, a task in Backlog and a session on it whose agent logs its MCP servers.
pub async fn setup(config: ServerConfig) -> Setup {
    let token = config.token.clone();
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    let log = server.dir.path().join("mcp.log");
    let profile = logging_profile(&server, &log).await;
    let (workspace_id, workflow) = server.kanban().await;
    let backlog = step_id(&workflow, "Backlog");
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "Task", "step_id": backlog}),
        )
        .await;
    let task_id = task["task"]["id"].as_str().unwrap().to_owned();
    let launched = server
        .call("session.launch", json!({"task_id": task_id, "agent_profile_id": profile}))
        .await;
    let session_id = launched["session"]["id"].as_str().unwrap().to_owned();
    wait_ready(&server, token.as_deref(), &session_id).await;
    Setup { server, log, workspace_id, workflow, task_id, session_id }
}

/// A WebSocket subscribed to a session's topic (with the server token, if any).
pub async fn session_ws(server: &TestServer, token: Option<&str>, session_id: &str) -> super::Ws {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{}/ws", server.addr).into_client_request().unwrap();
    if let Some(token) = token {
        request.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    let (stream, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut ws = super::Ws::new(stream);
    ws.call("subscribe", json!({"topics": [format!("session:{session_id}")]})).await;
    ws
}

/// Waits (bounded, by its notifications) until the session satisfies `done`.
pub async fn wait_session(
    server: &TestServer,
    token: Option<&str>,
    session_id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let mut ws = session_ws(server, token, session_id).await;
    let current = server.call("session.get", json!({"id": session_id})).await;
    if done(&current["session"]) {
        return current["session"].clone();
    }
    loop {
        let frame = ws.next().await;
        let session = &frame["payload"]["session"];
        if frame["type"] == "notification" && session.is_object() && done(session) {
            return session.clone();
        }
    }
}

pub async fn wait_ready(server: &TestServer, token: Option<&str>, session_id: &str) -> Value {
    wait_session(server, token, session_id, |s| s["state"] == "WAITING_FOR_INPUT").await
}
