//! Issue 17 acceptance 4: an agent that takes only stdio MCP servers (the mock with
//! `--no-mcp-http`) gets `kandev mcp-bridge` with its session token in the env, and reaches
//! the board through it; a token of an older epoch is refused through the bridge as well.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

mod support;

use support::{KANDEV, Server, Watch, call, messages};

/// The first text of the agent's starting with `prefix`.
async fn agent_says(server: &Server, session: &str, prefix: &str) -> Option<String> {
    let stored = messages(server, session).await;
    let said = stored.iter().filter_map(|m| m["content"].as_str()).find(|c| c.starts_with(prefix));
    said.map(str::to_owned)
}

/// Runs `kandev mcp-bridge` with `token` and these JSON-RPC lines; returns its output lines.
fn bridge(url: &str, token: &str, lines: &[Value]) -> Vec<Value> {
    let mut child = Command::new(KANDEV)
        .args(["mcp-bridge", "--url", url])
        .env("KANDEV_MCP_TOKEN", token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn i17_a4_an_agent_without_mcp_over_http_reaches_the_board_through_the_bridge() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    let log = home.path().join("mcp.log");
    let profile = call(
        &server,
        "agent.profile.create",
        json!({"name": "stdio only", "kind": "mock",
               "args": ["--no-mcp-http", "--mcp-log", log.display().to_string()]}),
    )
    .await;
    let workspaces = call(&server, "workspace.list", json!({})).await;
    let workflows =
        call(&server, "workflow.list", json!({"workspace_id": workspaces["workspaces"][0]["id"]}))
            .await;
    let board = &workflows["workflows"][0];
    let backlog = board["steps"].as_array().unwrap().iter().find(|s| s["name"] == "Backlog");
    let task = call(
        &server,
        "task.create",
        json!({"workflow_id": board["id"], "title": "parent", "step_id": backlog.unwrap()["id"]}),
    )
    .await;
    let task_id = task["task"]["id"].as_str().unwrap().to_owned();
    let script = "#!mock\nmcp kandev create_task {\"title\":\"sub\",\"parent_id\":\"current\"}";
    let launched = call(
        &server,
        "session.launch",
        json!({"task_id": task_id, "agent_profile_id": profile["profile"]["id"], "prompt": script}),
    )
    .await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    let said = watch
        .until("the agent's MCP call", async || agent_says(&server, &session, "mcp ").await)
        .await;
    assert!(said.starts_with("mcp create_task ok:"), "{said}");
    let listed = call(&server, "task.list", json!({"workflow_id": board["id"]})).await;
    let sub = listed["tasks"].as_array().unwrap().iter().find(|t| t["title"] == "sub").cloned();
    assert_eq!(sub.expect("the subtask is on the board")["parent_id"], task_id.as_str());

    // The agent was handed the stdio form: this binary's bridge, the token in its env only.
    let servers: Value =
        serde_json::from_str(std::fs::read_to_string(&log).unwrap().lines().next().unwrap())
            .unwrap();
    let kandev = &servers[0];
    assert_eq!(kandev["args"][0], "mcp-bridge", "{kandev}");
    let token = kandev["env"][0]["value"].as_str().unwrap().to_owned();
    assert!(token.starts_with("kst_") && !kandev["args"].to_string().contains(&token));
    let url = kandev["args"][2].as_str().unwrap().to_owned();

    // A stop and resume moves the session to a new epoch: the old token is refused through
    // the bridge, with the cause.
    call(&server, "session.stop", json!({"id": session})).await;
    call(&server, "session.resume", json!({"id": session})).await;
    watch.state(&server, &session, "WAITING_FOR_INPUT").await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let answers = bridge(&url, &token, std::slice::from_ref(&init));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], 1, "the refusal answers the request: {answers:?}");
    let message = answers[0]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("stale session token"), "{answers:?}");
    let fresh = std::fs::read_to_string(&log).unwrap();
    let fresh: Value = serde_json::from_str(fresh.lines().last().unwrap()).unwrap();
    let fresh = fresh[0]["env"][0]["value"].as_str().unwrap().to_owned();
    let answers = bridge(&url, &fresh, &[init]);
    assert_eq!(answers[0]["result"]["serverInfo"]["name"], "kandev", "{answers:?}");
    let server_log = std::fs::read_to_string(home.path().join("server.log")).unwrap();
    assert!(!server_log.contains(&token) && !server_log.contains(&fresh), "no token in the log");
}
