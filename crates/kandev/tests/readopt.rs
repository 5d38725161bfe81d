//! Issue 20 acceptance 1 (R6, small) and lifecycle rule 42's re-adopt branch with the real
//! binary: `kill -9` of a `serve --runner local` during streaming turns, then a restart. The
//! runner kept the agents; the new server takes them over, every turn completes without
//! `session/load` or an "interrupted" note, every chunk an agent wrote is in the transcript
//! exactly once, and the agents of tasks deleted while the server was down or after the
//! restart are killed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kandev_mock_agent::script::stream_chunk_text;
use kandev_mock_agent::{CallKind, Counters};
use serde_json::{Value, json};
use support::{Server, start_with};

#[path = "support/server.rs"]
mod support;

const DEADLINE: Duration = Duration::from_secs(60);
/// Streaming turns that must survive the restart (R6 asks for 20: `kandev-bench r6`).
const TURNS: usize = 5;
const CHUNKS: u64 = 150;
const BYTES: usize = 24;
const LOCAL: [&str; 4] = ["--runner", "local", "--runner-grace", "60s"];

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

/// Live (not zombie) processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie =
                stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(needle)
        })
        .collect()
}

fn agents_of(home: &Path) -> Vec<u32> {
    processes_with(&home.join("mock-agent").display().to_string())
}

fn runners_of(home: &Path) -> Vec<u32> {
    processes_with(&format!("runner --socket {}", home.join("runner.sock").display()))
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < DEADLINE, "{what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn messages(server: &Server, session: &str) -> Vec<Value> {
    let listed = call(server, "message.list", json!({"session_id": session, "limit": 1000})).await;
    listed["messages"].as_array().unwrap().clone()
}

/// Everything the agent said in the session, in order.
fn agent_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["kind"] == "agent")
        .map(|m| m["content"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn i20_a1_l42_kill_9_during_streaming_turns_then_restart_every_turn_completes_once() {
    let home = tempfile::tempdir().unwrap();
    let server = start_with(home.path(), &LOCAL);
    let workspaces = call(&server, "workspace.list", json!({})).await;
    let workflows =
        call(&server, "workflow.list", json!({"workspace_id": workspaces["workspaces"][0]["id"]}))
            .await;
    let board = &workflows["workflows"][0];
    // Two more sessions than the turns checked: the task of one is deleted while the server
    // is down, the other's after the restart, while its re-adopted turn runs.
    let mut tasks = vec![];
    let mut sessions = vec![];
    for i in 0..TURNS + 2 {
        let task = call(&server, "task.create", json!({"workflow_id": board["id"], "title": format!("r6-{i}"), "step_id": board["steps"][0]["id"]})).await;
        let launched =
            call(&server, "session.launch", json!({"task_id": task["task"]["id"]})).await;
        tasks.push(task["task"]["id"].as_str().unwrap().to_owned());
        sessions.push(launched["session"]["id"].as_str().unwrap().to_owned());
    }
    let script = format!("#!mock\nstream {CHUNKS} {BYTES} every 20");
    for session in &sessions {
        call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    }
    // Every turn is streaming (some text stored), none is done.
    let start = Instant::now();
    for session in &sessions {
        while agent_text(&messages(&server, session).await).len() < BYTES * 10 {
            assert!(start.elapsed() < DEADLINE, "the turn of {session} streams");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    assert_eq!(agents_of(home.path()).len(), TURNS + 2, "the runner keeps the agents");

    // The last task is deleted while no server runs.
    {
        let location = kandev_store::Location::File(home.path().join("kandev.db"));
        let store = kandev_store::Store::open(location).await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        tx.delete_task(&kandev_domain::TaskId::new(tasks[TURNS].clone())).await.unwrap();
        tx.commit().await.unwrap();
        store.close().await;
    }

    let restarted = start_with(home.path(), &LOCAL);
    let got = call(&restarted, "session.get", json!({"id": sessions[TURNS + 1]})).await;
    assert_eq!(got["session"]["state"], "RUNNING", "re-adopted mid-turn");
    call(&restarted, "task.delete", json!({"id": tasks[TURNS + 1], "force": true})).await;
    let expected: String = (0..CHUNKS).map(|i| stream_chunk_text(i, BYTES)).collect();
    for session in &sessions[..TURNS] {
        let start = Instant::now();
        loop {
            let got = call(&restarted, "session.get", json!({"id": session})).await;
            if got["session"]["state"] == "WAITING_FOR_INPUT" {
                break;
            }
            assert_eq!(got["session"]["state"], "RUNNING", "the turn goes on in {session}");
            assert!(start.elapsed() < DEADLINE, "the turn of {session} completes");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let stored = messages(&restarted, session).await;
        assert_eq!(agent_text(&stored), expected, "every chunk once, in order, in {session}");
        assert!(
            !stored.iter().any(|m| m["kind"] == "status"
                && m["content"].as_str().unwrap().starts_with("interrupted")),
            "no interrupted note in {session}"
        );
        let turns = call(&restarted, "session.turn.list", json!({"session_id": session})).await;
        let turns = turns["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 1, "one turn in {session}");
        assert_eq!(turns[0]["stop_reason"], "end_turn");
    }
    let counters = Counters::read(&home.path().join("mock-agent")).unwrap();
    assert_eq!(counters.count(CallKind::Load), 0, "no session/load");
    assert_eq!(counters.count(CallKind::Prompt), TURNS + 2, "each prompt sent once");
    // The deleted tasks' agents are gone; the others stay, ready for the next prompt.
    eventually("the deleted sessions' agents are killed", || agents_of(home.path()).len() == TURNS)
        .await;
    let session = &sessions[0];
    call(&restarted, "message.add", json!({"session_id": session, "content": "are you back"}))
        .await;
    let start = Instant::now();
    while !messages(&restarted, session).await.iter().any(|m| m["content"] == "echo: are you back")
    {
        assert!(start.elapsed() < DEADLINE, "the re-adopted agent answers a new prompt");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let counters = Counters::read(&home.path().join("mock-agent")).unwrap();
    assert_eq!(counters.count(CallKind::Load), 0, "still no session/load");

    // No orphan: a graceful stop ends the agents, and the runner with nothing left.
    let mut restarted = restarted;
    Command::new("kill").arg("-TERM").arg(restarted.child.id().to_string()).status().unwrap();
    restarted.child.wait().unwrap();
    eventually("no agent is left", || agents_of(home.path()).is_empty()).await;
    eventually("the runner ends", || runners_of(home.path()).is_empty()).await;
}

/// The session's permission requests: `(request id, status)`, oldest first.
fn permissions(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m["kind"] == "permission_request")
        .map(|m| {
            let id = m["metadata"]["request_id"].as_str().unwrap().to_owned();
            (id, m["metadata"]["status"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn l42_a_permission_request_pending_at_a_kill_9_is_asked_again_after_the_restart() {
    let home = tempfile::tempdir().unwrap();
    let server = start_with(home.path(), &LOCAL);
    let workspaces = call(&server, "workspace.list", json!({})).await;
    let workflows =
        call(&server, "workflow.list", json!({"workspace_id": workspaces["workspaces"][0]["id"]}))
            .await;
    let board = &workflows["workflows"][0];
    let task = call(
        &server,
        "task.create",
        json!({"workflow_id": board["id"], "title": "ask", "step_id": board["steps"][0]["id"]}),
    )
    .await;
    let launched = call(&server, "session.launch", json!({"task_id": task["task"]["id"]})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    let script = "#!mock\nsay before\nask_permission deploy\nsay after";
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let start = Instant::now();
    while permissions(&messages(&server, &session).await).is_empty() {
        assert!(start.elapsed() < DEADLINE, "the agent asks");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL, the request unanswered
    server.child.wait().unwrap();

    // The request the user saw expires (its responder died with the server); the agent's
    // request, still waiting, comes again with the replay and is asked anew.
    let restarted = start_with(home.path(), &LOCAL);
    let start = Instant::now();
    let asked = loop {
        let asked = permissions(&messages(&restarted, &session).await);
        if asked.len() == 2 {
            break asked;
        }
        assert!(start.elapsed() < DEADLINE, "the request is asked again: {asked:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(asked[0].1, "expired");
    assert_eq!(asked[1].1, "pending");
    let got = call(&restarted, "session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["state"], "RUNNING", "the turn goes on");
    let answer =
        json!({"session_id": session, "request_id": asked[1].0, "option_id": "allow_once"});
    call(&restarted, "permission.respond", answer).await;
    let start = Instant::now();
    loop {
        let got = call(&restarted, "session.get", json!({"id": session})).await;
        if got["session"]["state"] == "WAITING_FOR_INPUT" {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "the turn completes");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let text = agent_text(&messages(&restarted, &session).await);
    assert_eq!(text, "beforepermission: allow_once\nafter", "the agent got the answer");
    let counters = Counters::read(&home.path().join("mock-agent")).unwrap();
    assert_eq!(counters.count(CallKind::Load), 0, "no session/load");
}

/// Waits until the session waits for input.
async fn until_waiting(server: &Server, session: &str, what: &str) {
    let start = Instant::now();
    loop {
        let got = call(server, "session.get", json!({"id": session})).await;
        if got["session"]["state"] == "WAITING_FOR_INPUT" {
            return;
        }
        assert!(start.elapsed() < DEADLINE, "{what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A session launched on the first board's first step, with one finished turn (its agent
/// is live and idle).
async fn live_session(server: &Server) -> String {
    let workspaces = call(server, "workspace.list", json!({})).await;
    let workflows =
        call(server, "workflow.list", json!({"workspace_id": workspaces["workspaces"][0]["id"]}))
            .await;
    let board = &workflows["workflows"][0];
    let task = call(
        server,
        "task.create",
        json!({"workflow_id": board["id"], "title": "t", "step_id": board["steps"][0]["id"]}),
    )
    .await;
    let launched = call(server, "session.launch", json!({"task_id": task["task"]["id"]})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    call(server, "message.add", json!({"session_id": session, "content": "hello"})).await;
    until_waiting(server, &session, "the first turn completes").await;
    session
}

#[tokio::test]
async fn i20_d1_a_session_after_a_live_context_reset_is_re_adopted() {
    let home = tempfile::tempdir().unwrap();
    let server = start_with(home.path(), &LOCAL);
    let session = live_session(&server).await;
    call(&server, "session.reset_context", json!({"id": session})).await;
    let start = Instant::now();
    while !messages(&server, &session)
        .await
        .iter()
        .any(|m| m["metadata"]["reason"] == "context_reset")
    {
        assert!(start.elapsed() < DEADLINE, "the live reset completes");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let script = format!("#!mock\nstream 60 {BYTES} every 20");
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let start = Instant::now();
    while agent_text(&messages(&server, &session).await).len() < BYTES * 5 {
        assert!(start.elapsed() < DEADLINE, "the turn streams");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();

    let restarted = start_with(home.path(), &LOCAL);
    let got = call(&restarted, "session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["state"], "RUNNING", "re-adopted mid-turn");
    until_waiting(&restarted, &session, "the re-adopted turn completes").await;
    let stored = messages(&restarted, &session).await;
    assert!(
        !stored
            .iter()
            .any(|m| m["kind"] == "status"
                && m["content"].as_str().unwrap().starts_with("interrupted")),
        "no interrupted note"
    );
    let expected: String = (0..60).map(|i| stream_chunk_text(i, BYTES)).collect();
    assert_eq!(agent_text(&stored), format!("echo: hello{expected}"), "every chunk once");
    let counters = Counters::read(&home.path().join("mock-agent")).unwrap();
    assert_eq!(counters.count(CallKind::Load), 0, "no session/load");
    let mut restarted = restarted;
    Command::new("kill").arg("-TERM").arg(restarted.child.id().to_string()).status().unwrap();
    restarted.child.wait().unwrap();
    eventually("no agent is left", || agents_of(home.path()).is_empty()).await;
}

#[tokio::test]
async fn i20_d2_a_re_adopted_quiet_turn_is_not_ended_as_silent() {
    // Rule 40 after 1 s: a turn with no output by then is ended, a quiet one gets a notice.
    let args = [LOCAL.as_slice(), &["--agent-stall-after", "1s"]].concat();
    let home = tempfile::tempdir().unwrap();
    let server = start_with(home.path(), &args);
    let session = live_session(&server).await;
    let script = "#!mock\nsay before\nsleep 8000\nsay after";
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let start = Instant::now();
    while !agent_text(&messages(&server, &session).await).ends_with("before") {
        assert!(start.elapsed() < DEADLINE, "the agent speaks");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL, the agent quiet
    server.child.wait().unwrap();

    let restarted = start_with(home.path(), &args);
    let got = call(&restarted, "session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["state"], "RUNNING", "re-adopted mid-turn");
    until_waiting(&restarted, &session, "the re-adopted turn completes").await;
    let got = call(&restarted, "session.get", json!({"id": session})).await;
    assert!(got["session"]["last_error"].is_null(), "not stalled: {got}");
    assert_eq!(agent_text(&messages(&restarted, &session).await), "echo: hellobeforeafter");
    let turns = call(&restarted, "session.turn.list", json!({"session_id": session})).await;
    assert_eq!(turns["turns"][1]["stop_reason"], "end_turn", "{turns}");
    let mut restarted = restarted;
    Command::new("kill").arg("-TERM").arg(restarted.child.id().to_string()).status().unwrap();
    restarted.child.wait().unwrap();
    eventually("no agent is left", || agents_of(home.path()).is_empty()).await;
}

#[tokio::test]
async fn i20_d4_an_execution_acknowledged_past_the_recorded_position_is_not_re_adopted() {
    let home = tempfile::tempdir().unwrap();
    let server = start_with(home.path(), &LOCAL);
    let session = live_session(&server).await;
    let script = format!("#!mock\nstream 100 {BYTES} every 20");
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    let start = Instant::now();
    while agent_text(&messages(&server, &session).await).len() < BYTES * 5 {
        assert!(start.elapsed() < DEADLINE, "the turn streams");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut server = server;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    // The recorded position falls behind what the runner was told (a record that failed
    // while its transaction committed): output after it would be stored twice.
    {
        let location = kandev_store::Location::File(home.path().join("kandev.db"));
        let store = kandev_store::Store::open(location).await.unwrap();
        let id = kandev_domain::SessionId::new(session.clone());
        let position = store.runner_position(&id).await.unwrap().unwrap();
        assert!(position.committed > 0, "some output was committed");
        let mut tx = store.begin_write().await.unwrap();
        tx.set_runner_exec(&id, position.epoch, &position.exec).await.unwrap();
        tx.commit().await.unwrap();
        store.close().await;
    }

    let restarted = start_with(home.path(), &LOCAL);
    let got = call(&restarted, "session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["state"], "WAITING_FOR_INPUT", "reconciled, not re-adopted");
    let stored = messages(&restarted, &session).await;
    assert!(
        stored
            .iter()
            .any(|m| m["kind"] == "status"
                && m["content"].as_str().unwrap().starts_with("interrupted")),
        "an interrupted note"
    );
    eventually("its agent is killed", || agents_of(home.path()).is_empty()).await;
}
