//! Issue 4 acceptance 3 (lifecycle rules 41-43) with real processes: stream turns in 10
//! sessions, `kill -9` the server mid-stream, restart it, and check that nothing a client was
//! told is lost, every session is reconciled, no old agent survives, and the next prompt
//! resumes with `session/load`.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kandev_mock_agent::{CallKind, Counters};
use serde_json::{Value, json};
use support::{Server, start_with};
use tokio_tungstenite::tungstenite::Message;

#[path = "support/server.rs"]
mod support;

const DEADLINE: Duration = Duration::from_secs(30);
const SESSIONS: usize = 10;
/// These tests guard the restart without a runner (agents are the server's children); with
/// the local runner a restart re-adopts them instead (readopt.rs).
const NONE: [&str; 2] = ["--runner", "none"];

async fn call(server: &Server, action: &str, payload: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/{action}", server.url))
        .json(&payload)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{action}");
    response.json().await.unwrap()
}

/// Agent processes started for this home (their command line names its state dir).
fn agents_of(home: &Path) -> Vec<u32> {
    let needle = home.join("mock-agent").display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie =
                stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).contains(&needle)
        })
        .collect()
}

/// A slow streamed turn: many chunks with small pauses, so the kill lands mid-stream.
fn slow_script() -> String {
    let mut script = String::from("#!mock\n");
    for i in 0..200 {
        script.push_str(&format!("say chunk-{i:03};\nsleep 10\n"));
    }
    script
}

#[tokio::test]
async fn l43_kill_9_mid_stream_loses_nothing_a_client_was_told() {
    let home = tempfile::tempdir().unwrap();
    let server = start_with(home.path(), &NONE);
    let workspaces = call(&server, "workspace.list", json!({})).await;
    let workflows =
        call(&server, "workflow.list", json!({"workspace_id": workspaces["workspaces"][0]["id"]}))
            .await;
    let board = &workflows["workflows"][0];
    let mut sessions = vec![];
    for i in 0..SESSIONS {
        let task = call(&server, "task.create", json!({"workflow_id": board["id"], "title": format!("t{i}"), "step_id": board["steps"][0]["id"]})).await;
        let launched =
            call(&server, "session.launch", json!({"task_id": task["task"]["id"]})).await;
        sessions.push(launched["session"]["id"].as_str().unwrap().to_owned());
    }

    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("{}/ws", server.url.replace("http", "ws")))
            .await
            .unwrap();
    let topics: Vec<String> = sessions.iter().map(|s| format!("session:{s}")).collect();
    let subscribe =
        json!({"id": "s", "type": "request", "action": "subscribe", "payload": {"topics": topics}});
    futures::SinkExt::send(&mut ws, Message::text(subscribe.to_string())).await.unwrap();
    for session in &sessions {
        call(&server, "message.add", json!({"session_id": session, "content": slow_script()}))
            .await;
    }

    // What the client was told: message id -> text so far.
    let mut told: HashMap<String, String> = HashMap::new();
    let mut chunks = 0;
    let started = Instant::now();
    while chunks < 150 {
        assert!(started.elapsed() < DEADLINE, "chunks are streaming");
        let Some(Ok(Message::Text(text))) =
            tokio::time::timeout(DEADLINE, ws.next()).await.unwrap()
        else {
            continue;
        };
        let frame: Value = serde_json::from_str(&text).unwrap();
        match frame["action"].as_str() {
            Some("session.message.added") if frame["payload"]["message"]["kind"] == "agent" => {
                let message = &frame["payload"]["message"];
                told.insert(
                    message["id"].as_str().unwrap().to_owned(),
                    message["content"].as_str().unwrap().to_owned(),
                );
                chunks += 1;
            }
            Some("session.message.updated") if frame["payload"]["delta"].is_string() => {
                let id = frame["payload"]["message_id"].as_str().unwrap();
                told.entry(id.to_owned())
                    .or_default()
                    .push_str(frame["payload"]["delta"].as_str().unwrap());
                chunks += 1;
            }
            _ => {}
        }
    }
    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    drop(ws);

    let restarted = start_with(home.path(), &NONE);
    for session in &sessions {
        let got = call(&restarted, "session.get", json!({"id": session})).await;
        assert_eq!(got["session"]["state"], "WAITING_FOR_INPUT", "reconciled");
        let messages =
            call(&restarted, "message.list", json!({"session_id": session, "limit": 1000})).await;
        let messages = messages["messages"].as_array().unwrap();
        assert!(
            messages.iter().any(|m| m["kind"] == "status"
                && m["content"].as_str().unwrap().starts_with("interrupted")),
            "interrupted note in {session}"
        );
        for message in messages.iter().filter(|m| m["kind"] == "agent") {
            if let Some(seen) = told.get(message["id"].as_str().unwrap()) {
                assert!(
                    message["content"].as_str().unwrap().starts_with(seen.as_str()),
                    "every chunk the client saw is stored"
                );
            }
        }
    }
    let stored: usize = told.len();
    assert!(stored > 0);

    let start_wait = Instant::now();
    while !agents_of(home.path()).is_empty() {
        assert!(
            start_wait.elapsed() < DEADLINE,
            "agents of the killed server are gone: {:?}",
            agents_of(home.path())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The next prompt resumes with session/load.
    let session = &sessions[0];
    call(&restarted, "message.add", json!({"session_id": session, "content": "are you back"}))
        .await;
    let start_wait = Instant::now();
    loop {
        let messages =
            call(&restarted, "message.list", json!({"session_id": session, "limit": 1000})).await;
        if messages["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["content"] == "echo: are you back")
        {
            break;
        }
        assert!(start_wait.elapsed() < DEADLINE, "the resumed agent answers");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let counters = Counters::read(&home.path().join("mock-agent")).unwrap();
    assert_eq!(counters.succeeded(CallKind::Load), 1, "resumed with session/load");
}

async fn session_get(server: &Server, id: &str) -> Value {
    call(server, "session.get", json!({"id": id})).await["session"].clone()
}

async fn queue_of(server: &Server, session: &str) -> Vec<Value> {
    let queue = call(server, "message.queue.list", json!({"session_id": session})).await;
    queue["queue"].as_array().unwrap().clone()
}

/// Waits (bounded) until `ready` holds for the session's transcript; returns it.
async fn wait_messages(
    server: &Server,
    session: &str,
    ready: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let list =
            call(server, "message.list", json!({"session_id": session, "limit": 1000})).await;
        let messages = list["messages"].as_array().unwrap().clone();
        if ready(&messages) {
            return messages;
        }
        assert!(started.elapsed() < DEADLINE, "{messages:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn agent_said(messages: &[Value], needle: &str) -> bool {
    messages.iter().any(|m| m["kind"] == "agent" && m["content"].as_str().unwrap().contains(needle))
}

/// Rule 45 with real processes: `kill -9` while a workflow's context reset waits for the
/// agent's `session/new`; at the restart the reset is finished lazily (new epoch, token
/// gone, the step prompt queued once, also across a second crash), and that prompt then runs
/// in a new conversation, never in the old one.
#[tokio::test]
async fn l45_kill_9_during_a_reset_then_restart() {
    let home = tempfile::tempdir().unwrap();
    let server = start_with(home.path(), &NONE);
    let workspaces = call(&server, "workspace.list", json!({})).await;
    let workspace_id = workspaces["workspaces"][0]["id"].clone();
    let created = call(
        &server,
        "workflow.create",
        json!({"workspace_id": workspace_id, "name": "PB", "template_id": "plan-build"}),
    )
    .await;
    let board = created["workflow"].clone();
    let step = |name: &str| {
        board["steps"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap()["id"].clone()
    };
    let profile = call(
        &server,
        "agent.profile.create",
        json!({"name": "slow reset", "kind": "mock", "args": ["--reset-delay-ms", "60000"]}),
    )
    .await;
    let task = call(&server, "task.create", json!({"workflow_id": board["id"], "title": "Crash course", "step_id": step("Plan"), "agent_profile_id": profile["profile"]["id"]})).await;
    let session = task["session"]["id"].as_str().unwrap().to_owned();
    wait_messages(&server, &session, |m| agent_said(m, "Make a plan for")).await;
    let before = session_get(&server, &session).await;
    let old = before["acp_session_id"].as_str().unwrap().to_owned();
    // Build resets the context, then sends its prompt. The move answers once the reset is
    // accepted; the agent then holds session/new for a minute.
    call(&server, "task.move", json!({"id": task["task"]["id"], "step_id": step("Build")})).await;
    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();

    let restarted = start_with(home.path(), &NONE);
    let after = session_get(&restarted, &session).await;
    assert_eq!(after["state"], "WAITING_FOR_INPUT");
    assert!(after["acp_session_id"].is_null(), "the old conversation is forgotten: {after}");
    assert!(after["last_error"].is_null(), "{after}");
    assert!(after["epoch"].as_i64() > before["epoch"].as_i64());
    let queue = queue_of(&restarted, &session).await;
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0]["queued_by"], "workflow");
    assert!(queue[0]["content"].as_str().unwrap().starts_with("Implement the plan for"));
    let messages = wait_messages(&restarted, &session, |_| true).await;
    assert!(
        messages.iter().any(|m| m["kind"] == "status"
            && m["content"].as_str().unwrap().starts_with("context reset for step Build")),
        "the reset is in the transcript"
    );

    // A second crash does not finish it twice.
    let mut restarted = restarted;
    restarted.child.kill().unwrap();
    restarted.child.wait().unwrap();
    let again = start_with(home.path(), &NONE);
    assert_eq!(queue_of(&again, &session).await.len(), 1, "the step prompt is queued once");

    call(&again, "message.queue.drain", json!({"session_id": session})).await;
    wait_messages(&again, &session, |m| agent_said(m, "Implement the plan for")).await;
    let counters = Counters::read(&home.path().join("mock-agent")).unwrap();
    let into = counters.sessions_prompted_with("Implement the plan for");
    assert_eq!(into.len(), 1);
    assert_ne!(into[0], old, "the step prompt went to a new conversation");
    assert_eq!(counters.count(CallKind::Load), 0, "the old conversation was never reloaded");
}
