//! Issue 19: the agent's ACP terminals (the mock's `terminal` directive), through the real
//! server and a real mock agent process.

use crate::common;

use std::path::Path;

use common::{TestServer, group_members, of_kind};
use kandev_testkit::eventually_within;
use kandev_testkit::wait::file_value;
use serde_json::{Value, json};

/// Waits (bounded) until the group `pgid` has no live process (processes this test does not
/// own: their ends announce nothing).
async fn wait_group_gone(pgid: i32) {
    let what = format!("group {pgid} to end");
    eventually_within(common::WAIT, what, async || group_members(pgid).is_empty()).await;
}

fn said(messages: &[Value]) -> String {
    of_kind(messages, "agent").iter().map(|m| m["content"].as_str().unwrap()).collect()
}

async fn cwd_of(server: &TestServer, session: &str) -> String {
    server.call("session.get", json!({"id": session})).await["session"]["cwd"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The only terminal state kept in a tool call's metadata.
fn terminal_state(tool_call: &Value) -> Value {
    let metadata: Value = match &tool_call["metadata"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    };
    let terminals = metadata["terminals"].as_object().expect("terminals in the metadata").clone();
    assert_eq!(terminals.len(), 1, "{metadata}");
    terminals.values().next().unwrap().clone()
}

#[tokio::test]
async fn i19_a1_a_terminal_command_yields_its_output_and_exit_code_in_the_tool_call() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let messages = server.turn(&session, "#!mock\nterminal echo hi; exit 3").await;
    let said = said(&messages);
    assert!(said.contains("terminal exited with code 3; output: hi\n"), "{said}");
    let calls = of_kind(&messages, "tool_call");
    assert_eq!(calls.len(), 1, "{messages:?}");
    let state = terminal_state(calls[0]);
    assert_eq!(state["output"], "hi\n", "{state}");
    assert_eq!(state["exit_code"], 3, "{state}");
    assert_eq!(state["truncated"], false, "{state}");
    assert_eq!(state["exited"], true, "{state}");
}

#[tokio::test]
async fn i19_a1_output_over_the_limit_keeps_the_tail_at_a_character_and_says_truncated() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    // 1 + 6 × 2 bytes: a 5-byte cut would split an `é`; the tail keeps whole characters.
    let messages =
        server.turn(&session, "#!mock\nterminal --limit=5 printf 'xéééééé'; printf end").await;
    let said = said(&messages);
    assert!(said.contains("output (truncated): éend"), "{said}");
    let state = terminal_state(of_kind(&messages, "tool_call")[0]);
    assert_eq!(
        (state["output"].as_str(), state["truncated"].as_bool()),
        (Some("éend"), Some(true))
    );
}

#[tokio::test]
async fn i19_a1_a_cwd_outside_the_worktree_is_refused_and_one_inside_works() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let cwd = cwd_of(&server, &session).await;
    std::fs::create_dir(Path::new(&cwd).join("sub")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), Path::new(&cwd).join("escape")).unwrap();
    let script = format!(
        "#!mock\nterminal --cwd={} touch made-outside\nterminal --cwd=.. touch made-above\nterminal --cwd=escape touch made-through-link\nterminal --cwd=sub pwd",
        outside.path().display()
    );
    let messages = server.turn(&session, &script).await;
    let said = said(&messages);
    assert_eq!(said.matches("terminal failed: terminal cwd refused").count(), 3, "{said}");
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none(), "nothing ran outside");
    assert!(!Path::new(&cwd).join("../made-above").exists());
    assert!(said.contains(&format!("exited with code 0; output: {cwd}/sub\n")), "{said}");
}

#[tokio::test]
async fn i19_a1_a_cancelled_turn_kills_its_terminal_and_leaves_no_process() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let cwd = cwd_of(&server, &session).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let script = "#!mock\nterminal echo $$ > term.pid; sleep 600; echo never";
    server.call("message.add", json!({"session_id": session, "content": script})).await;
    let pgid = file_value::<i32>(&Path::new(&cwd).join("term.pid")).await;
    assert!(!group_members(pgid).is_empty(), "the command runs");
    server.call("agent.cancel", json!({"session_id": session})).await;
    ws.notification("session.turn.completed").await;
    wait_group_gone(pgid).await;
}

/// Acceptance 5: stop, reset and delete each leave no process of a running terminal.
#[tokio::test]
async fn i19_a5_stop_reset_and_delete_kill_the_terminals() {
    let server = TestServer::start().await;
    for (round, action) in
        ["session.stop", "session.reset_context", "session.delete"].iter().enumerate()
    {
        let (_, session) = server.session(None).await;
        let cwd = cwd_of(&server, &session).await;
        let pid_file = format!("term-{round}.pid");
        let script = format!("#!mock\nterminal echo $$ > {pid_file}; sleep 600");
        server.call("message.add", json!({"session_id": session, "content": script})).await;
        let pgid = file_value::<i32>(&Path::new(&cwd).join(&pid_file)).await;
        let (status, body) = server.post(action, json!({"id": session})).await;
        assert_eq!(status, 200, "{action}: {body}");
        wait_group_gone(pgid).await;
    }
}
