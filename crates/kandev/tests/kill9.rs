//! Issue 4 acceptance 3 (lifecycle rules 41-43) with real processes: stream turns in 10
//! sessions, `kill -9` the server mid-stream, restart it, and check that nothing a client was
//! told is lost, every session is reconciled, no old agent survives, and the next prompt
//! resumes with `session/load`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kandev_mock_agent::{CallKind, Counters};
use serde_json::{Value, json};
use support::{KANDEV, Server, Watch, agents_of, call, eventually, launched_session};
use tokio_tungstenite::tungstenite::Message;

mod support;

const DEADLINE: Duration = support::DEADLINE;
const SESSIONS: usize = 10;
/// These tests guard the restart without a runner (agents are the server's children); with
/// the local runner a restart re-adopts them instead (readopt.rs).
const NONE: [&str; 2] = ["--runner", "none"];

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
    let mut server = KANDEV.start_with(home.path(), &NONE);
    let mut sessions = vec![];
    for i in 0..SESSIONS {
        sessions.push(launched_session(&server, &format!("t{i}")).await.1);
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
    server.kill_9();
    drop(ws);

    let restarted = KANDEV.start_with(home.path(), &NONE);
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

    eventually("agents of the killed server are gone", async || agents_of(home.path()).is_empty())
        .await;

    // The next prompt resumes with session/load.
    let session = &sessions[0];
    let mut watch = Watch::sessions(&restarted, std::slice::from_ref(session)).await;
    call(&restarted, "message.add", json!({"session_id": session, "content": "are you back"}))
        .await;
    let answered = |m: &[Value]| m.iter().any(|m| m["content"] == "echo: are you back");
    watch.messages(&restarted, session, "the resumed agent answers", answered).await;
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

/// Waits (bounded, on the session's notifications) until `ready` holds for its transcript;
/// returns it.
async fn wait_messages(
    server: &Server,
    session: &str,
    ready: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let mut watch = Watch::sessions(server, &[session.to_owned()]).await;
    watch.messages(server, session, "the transcript gets there", ready).await
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
    let mut server = KANDEV.start_with(home.path(), &NONE);
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
    server.kill_9();

    let restarted = KANDEV.start_with(home.path(), &NONE);
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
    restarted.kill_9();
    let again = KANDEV.start_with(home.path(), &NONE);
    assert_eq!(queue_of(&again, &session).await.len(), 1, "the step prompt is queued once");

    call(&again, "message.queue.drain", json!({"session_id": session})).await;
    wait_messages(&again, &session, |m| agent_said(m, "Implement the plan for")).await;
    let counters = Counters::read(&home.path().join("mock-agent")).unwrap();
    let into = counters.sessions_prompted_with("Implement the plan for");
    assert_eq!(into.len(), 1);
    assert_ne!(into[0], old, "the step prompt went to a new conversation");
    assert_eq!(counters.count(CallKind::Load), 0, "the old conversation was never reloaded");
}
