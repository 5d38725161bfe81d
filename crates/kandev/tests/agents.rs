//! Issue 3 acceptance 5 with real processes: after `session.stop` and after server shutdown
//! no agent process remains, including a grandchild the agent started.

use std::path::Path;

use serde_json::json;

mod support;

use support::{KANDEV, Server, Watch, alive, call, messages};

fn start_server() -> (Server, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    (KANDEV.start(home.path()), home)
}

/// Starts a session whose agent is `sh`, which starts a `sleep` grandchild and then becomes
/// the mock agent; returns (session id, [agent pid, grandchild pid]).
async fn session_with_grandchild(server: &Server, home: &Path) -> (String, Vec<u32>) {
    let pids_file = home.join("pids");
    let script =
        format!("sleep 1000 & echo $$ $! > {}; exec {KANDEV} mock-agent", pids_file.display());
    let profile = call(
        server,
        "agent.profile.create",
        json!({"name": "sh", "kind": "custom", "command": "sh", "args": ["-c", script]}),
    )
    .await;
    let workspaces = call(server, "workspace.list", json!({})).await;
    let workspace_id = &workspaces["workspaces"][0]["id"];
    let workflows = call(server, "workflow.list", json!({"workspace_id": workspace_id})).await;
    let board = &workflows["workflows"][0];
    let task = call(
        server,
        "task.create",
        json!({"workflow_id": board["id"], "title": "t", "step_id": board["steps"][0]["id"]}),
    )
    .await;
    let launched = call(
        server,
        "session.launch",
        json!({"task_id": task["task"]["id"], "agent_profile_id": profile["profile"]["id"], "prompt": "hello"}),
    ).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    let mut watch = Watch::sessions(server, std::slice::from_ref(&session)).await;
    watch
        .until("the first turn", async || {
            messages(server, &session).await.iter().any(|m| m["content"] == "echo: hello")
        })
        .await;
    let pids: Vec<u32> = std::fs::read_to_string(&pids_file)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| alive(*p)), "agent and grandchild are running");
    (session, pids)
}

#[tokio::test]
async fn session_stop_leaves_no_agent_process_behind() {
    let (server, home) = start_server();
    let (session, pids) = session_with_grandchild(&server, home.path()).await;
    let stopped = call(&server, "session.stop", json!({"id": session})).await;
    assert_eq!(stopped["session"]["state"], "WAITING_FOR_INPUT", "stopped sessions stay resumable");
    for pid in &pids {
        assert!(!alive(*pid), "process {pid} is gone right after session.stop returned");
    }
}

#[tokio::test]
async fn server_shutdown_leaves_no_agent_process_behind() {
    let (mut server, home) = start_server();
    let (_, pids) = session_with_grandchild(&server, home.path()).await;
    assert!(server.stop(support::DEADLINE).is_some(), "the server stops on SIGTERM");
    for pid in &pids {
        assert!(!alive(*pid), "process {pid} outlived the server");
    }
    assert!(home.path().join("kandev.db").exists());
}
