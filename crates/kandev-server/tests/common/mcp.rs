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

/// The session tokens the agent was handed, oldest first.
pub fn tokens(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(|line| {
            let servers: Value = serde_json::from_str(line).unwrap();
            let header = servers[0]["headers"][0]["value"].as_str().unwrap().to_owned();
            header.strip_prefix("Bearer ").unwrap().to_owned()
        })
        .collect()
}

/// Calls a tool on `/mcp` as an outside client would: `initialize`, then `tools/call`.
/// Returns the HTTP status and the JSON-RPC answer of the last request sent.
pub async fn mcp_call(
    server: &TestServer,
    token: Option<&str>,
    tool: &str,
    args: Value,
) -> (u16, Value) {
    mcp_call_at(server.url("/mcp"), token, tool, args).await
}

/// [`mcp_call`] to the `/mcp` at `url` (owned, so a spawned task can make the call).
pub async fn mcp_call_at(
    url: String,
    token: Option<&str>,
    tool: &str,
    args: Value,
) -> (u16, Value) {
    mcp_rpc(url, token, "tools/call", json!({"name": tool, "arguments": args})).await
}

/// Sends `initialize`, then the JSON-RPC request `method` with `params`, to the `/mcp` at
/// `url`; returns the HTTP status and the answer of the last request sent.
pub async fn mcp_rpc(
    url: String,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let http = reqwest::Client::new();
    let post = |body: Value| {
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let response = post(init).send().await.unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    if status != 200 {
        return (status, body);
    }
    assert_eq!(body["result"]["serverInfo"]["name"], "kandev", "{body}");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params});
    let response = post(call).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// A tool call's answer: whether it failed, and its structured content.
pub fn tool_result(body: &Value) -> (bool, Value) {
    let result = &body["result"];
    (result["isError"] == true, result["structuredContent"].clone())
}
