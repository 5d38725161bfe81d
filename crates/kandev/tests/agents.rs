//! Issue 3 acceptance 5 with real processes: after `session.stop` and after server shutdown
//! no agent process remains, including a grandchild the agent started.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/server.rs"]
mod support;

use support::{KANDEV, Server};

const DEADLINE: Duration = Duration::from_secs(20);

fn start_server() -> (Server, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    (support::start(home.path()), home)
}

fn call(server: &Server, action: &str, payload: Value) -> Value {
    let body = reqwest::blocking_free_post(&format!("{}/api/v1/{action}", server.url), &payload);
    assert!(body.get("code").is_none(), "{action} failed: {body}");
    body
}

/// A tiny blocking HTTP POST over std (keeps this test free of an async runtime).
mod reqwest {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    pub fn blocking_free_post(url: &str, payload: &serde_json::Value) -> serde_json::Value {
        let rest = url.strip_prefix("http://").unwrap();
        let (host, path) = rest.split_once('/').unwrap();
        let body = payload.to_string();
        let mut stream = TcpStream::connect(host).unwrap();
        write!(
            stream,
            "POST /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let (_, body) = response.split_once("\r\n\r\n").unwrap();
        serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
    }
}

/// Polls (bounded) until `check` holds.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Gone, or a zombie waiting for its parent (already dead, not running).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
    }
}

/// Starts a session whose agent is `sh`, which starts a `sleep` grandchild and then becomes
/// the mock agent; returns (session id, [agent pid, grandchild pid]).
fn session_with_grandchild(server: &Server, home: &Path) -> (String, Vec<u32>) {
    let pids_file = home.join("pids");
    let script =
        format!("sleep 1000 & echo $$ $! > {}; exec {KANDEV} mock-agent", pids_file.display());
    let profile = call(
        server,
        "agent.profile.create",
        json!({"name": "sh", "kind": "custom", "command": "sh", "args": ["-c", script]}),
    );
    let workspaces = call(server, "workspace.list", json!({}));
    let workspace_id = &workspaces["workspaces"][0]["id"];
    let workflows = call(server, "workflow.list", json!({"workspace_id": workspace_id}));
    let board = &workflows["workflows"][0];
    let task = call(
        server,
        "task.create",
        json!({"workflow_id": board["id"], "title": "t", "step_id": board["steps"][0]["id"]}),
    );
    let launched = call(
        server,
        "session.launch",
        json!({"task_id": task["task"]["id"], "agent_profile_id": profile["profile"]["id"], "prompt": "hello"}),
    );
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    eventually("the first turn", || {
        let messages = call(server, "message.list", json!({"session_id": session}));
        messages["messages"].as_array().unwrap().iter().any(|m| m["content"] == "echo: hello")
    });
    let pids: Vec<u32> = std::fs::read_to_string(&pids_file)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| !process_gone(*p)), "agent and grandchild are running");
    (session, pids)
}

#[test]
fn session_stop_leaves_no_agent_process_behind() {
    let (server, home) = start_server();
    let (session, pids) = session_with_grandchild(&server, home.path());
    let stopped = call(&server, "session.stop", json!({"id": session}));
    assert_eq!(stopped["session"]["state"], "WAITING_FOR_INPUT", "stopped sessions stay resumable");
    for pid in &pids {
        assert!(process_gone(*pid), "process {pid} is gone right after session.stop returned");
    }
}

#[test]
fn server_shutdown_leaves_no_agent_process_behind() {
    let (mut server, home) = start_server();
    let (_, pids) = session_with_grandchild(&server, home.path());
    Command::new("kill").arg("-TERM").arg(server.child.id().to_string()).status().unwrap();
    let start = Instant::now();
    loop {
        if server.child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "the server stops on SIGTERM");
        std::thread::sleep(Duration::from_millis(25));
    }
    for pid in &pids {
        assert!(process_gone(*pid), "process {pid} outlived the server");
    }
    assert!(home.path().join("kandev.db").exists());
}
