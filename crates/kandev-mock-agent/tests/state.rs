//! The state dir: history replay by `session/load` across restarts, `--fail-load`,
//! `--fail-new`, and the call counters.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

mod support;

use std::path::Path;
use std::time::Duration;

use kandev_mock_agent::{CallKind, CallOutcome, Counters, FailKind, MockConfig, RunOutcome};
use serde_json::{Value, json};
use support::{Client, chunk_texts, message_texts, script, temp_dir, updates_of};

fn config(state: &Path) -> MockConfig {
    MockConfig { state_dir: Some(state.to_owned()), ..MockConfig::default() }
}

/// One run that creates a conversation with two turns; returns its id.
async fn first_life(state: &Path, cwd: &Path) -> String {
    let mut client = Client::with_state(state);
    client.initialize().await;
    let session = client.new_session(cwd).await;
    client.prompt_turn(&session, "hello").await;
    client
        .prompt_turn(
            &session,
            &script(&["think hmm", "say part one;", "say part two", "tool read Look"]),
        )
        .await;
    let (_, answer) =
        client.call("session/set_mode", json!({"sessionId": session, "modeId": "plan"})).await;
    assert_eq!(answer["result"], json!({}));
    assert_eq!(client.close().await, RunOutcome::Eof);
    session
}

fn load_params(session: &str, cwd: &Path) -> Value {
    json!({"sessionId": session, "cwd": cwd, "mcpServers": []})
}

#[tokio::test]
async fn load_after_restart_replays_the_history_before_answering() {
    let state = temp_dir("replay-state");
    let cwd = temp_dir("replay-cwd");
    let session = first_life(state.path(), cwd.path()).await;

    let mut client = Client::with_state(state.path());
    client.initialize().await;
    let (before, answer) = client.call("session/load", load_params(&session, cwd.path())).await;
    let replay = updates_of(&before);
    let kinds: Vec<&str> = replay.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "agent_message_chunk",
            "user_message_chunk",
            "agent_thought_chunk",
            "agent_message_chunk",
            "tool_call",
        ]
    );
    assert!(before.iter().all(|m| m["params"]["sessionId"] == session.as_str()));
    assert_eq!(chunk_texts(&replay, "user_message_chunk")[0], "hello");
    assert_eq!(message_texts(&replay), ["echo: hello", "part one;part two"]);
    assert_eq!(answer["result"]["modes"]["currentModeId"], "plan", "the mode survives too");
    let commands = client.next().await;
    assert_eq!(commands["params"]["update"]["sessionUpdate"], "available_commands_update");

    // The loaded conversation takes prompts and keeps growing.
    let (_, answer) = client.prompt_turn(&session, "after restart").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.close().await;

    let mut client = Client::with_state(state.path());
    client.initialize().await;
    let (before, _) = client.call("session/load", load_params(&session, cwd.path())).await;
    assert_eq!(before.len(), 8);
    client.close().await;
}

#[tokio::test]
async fn load_of_an_unknown_session_is_resource_not_found() {
    let state = temp_dir("unknown-state");
    let mut client = Client::with_state(state.path());
    client.initialize().await;
    for id in ["sess_never_created", "../../etc/passwd"] {
        let (_, answer) = client.call("session/load", load_params(id, Path::new("/tmp"))).await;
        assert_eq!(answer["error"]["code"], -32002, "{id}");
    }
    client.close().await;
    assert_eq!(Counters::read(state.path()).unwrap().failed(CallKind::Load), 2);
}

#[tokio::test]
async fn without_a_state_dir_conversations_live_only_in_the_run() {
    let cwd = temp_dir("memory-cwd");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let session = client.new_session(cwd.path()).await;
    client.prompt_turn(&session, "remember me").await;
    let (before, answer) = client.call("session/load", load_params(&session, cwd.path())).await;
    assert_eq!(message_texts(&updates_of(&before)), ["echo: remember me"]);
    assert!(answer.get("result").is_some());
    client.close().await;

    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let (_, answer) = client.call("session/load", load_params(&session, cwd.path())).await;
    assert_eq!(answer["error"]["code"], -32002);
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn each_fail_load_kind_answers_its_code_or_never() {
    let cases = [
        (FailKind::MethodNotFound, Some(-32601)),
        (FailKind::UnknownSession, Some(-32002)),
        (FailKind::Auth, Some(-32000)),
        (FailKind::Internal, Some(-32603)),
        (FailKind::Timeout, None),
    ];
    for (kind, code) in cases {
        let state = temp_dir("fail-load");
        let cwd = temp_dir("fail-load-cwd");
        let session = first_life(state.path(), cwd.path()).await;
        let mut client =
            Client::start(MockConfig { fail_load: Some(kind), ..config(state.path()) });
        client.initialize().await;
        let id = client.request("session/load", load_params(&session, cwd.path())).await;
        match code {
            Some(code) => {
                let (before, answer) = client.until_response(id).await;
                assert!(before.is_empty(), "{kind:?}: no replay on failure");
                assert_eq!(answer["error"]["code"], code, "{kind:?}");
            }
            None => {
                let line = client.try_next_line(Duration::from_secs(60)).await;
                assert_eq!(line, None, "timeout never answers");
            }
        }
        client.close().await;
        let counters = Counters::read(state.path()).unwrap();
        assert_eq!(counters.load_session(), 1, "{kind:?}");
        assert_eq!(counters.failed(CallKind::Load), 1, "{kind:?}");
        let expected = match code {
            Some(code) => CallOutcome::Error { code },
            None => CallOutcome::Unanswered,
        };
        let load = counters.calls().iter().find(|c| c.kind == CallKind::Load).unwrap();
        assert_eq!(load.outcome, expected);
        assert_eq!(load.session_id.as_deref(), Some(session.as_str()));
    }
}

#[tokio::test(start_paused = true)]
async fn each_fail_new_kind_answers_its_code_or_never() {
    let cases = [
        (FailKind::MethodNotFound, Some(-32601)),
        (FailKind::UnknownSession, Some(-32002)),
        (FailKind::Auth, Some(-32000)),
        (FailKind::Internal, Some(-32603)),
        (FailKind::Timeout, None),
    ];
    for (kind, code) in cases {
        let state = temp_dir("fail-new");
        let mut client = Client::start(MockConfig { fail_new: Some(kind), ..config(state.path()) });
        client.initialize().await;
        let id = client.request("session/new", json!({"cwd": "/tmp", "mcpServers": []})).await;
        match code {
            Some(code) => {
                let (before, answer) = client.until_response(id).await;
                assert!(before.is_empty());
                assert_eq!(answer["error"]["code"], code, "{kind:?}");
            }
            None => {
                assert_eq!(client.try_next_line(Duration::from_secs(60)).await, None);
            }
        }
        client.close().await;
        let counters = Counters::read(state.path()).unwrap();
        assert_eq!(counters.new_session(), 1, "{kind:?}");
        assert_eq!(counters.failed(CallKind::New), 1, "{kind:?}");
    }
}

#[tokio::test]
async fn counters_count_every_call_and_where_each_prompt_went() {
    let state = temp_dir("counters");
    let cwd = temp_dir("counters-cwd");
    let mut client = Client::with_state(state.path());
    client.initialize().await;
    let old = client.new_session(cwd.path()).await;
    client.prompt_turn(&old, "Plan: think first").await;
    // A context reset on the live process: a new conversation, then the step prompt.
    let new = client.new_session(cwd.path()).await;
    client.prompt_turn(&new, "Build: write the code").await;
    client.call("session/set_mode", json!({"sessionId": new, "modeId": "plan"})).await;
    client.next().await; // current_mode_update
    client
        .call(
            "session/set_config_option",
            json!({"sessionId": new, "configId": "model", "value": "mock-smart"}),
        )
        .await;
    client.call("session/set_model", json!({"sessionId": new, "modelId": "bogus"})).await;
    client.call("authenticate", json!({"methodId": "mock-login"})).await;
    client.cancel(&new).await;
    client.close().await;

    // A second process on the same state dir adds to the same counters.
    let mut client = Client::with_state(state.path());
    client.initialize().await;
    client.call("session/load", load_params(&new, cwd.path())).await;
    client.close().await;

    let counters = Counters::read(state.path()).unwrap();
    assert_eq!(counters.initialize(), 2);
    assert_eq!(counters.new_session(), 2);
    assert_eq!(counters.load_session(), 1);
    assert_eq!(counters.succeeded(CallKind::Load), 1);
    assert_eq!(counters.prompt(), 2);
    assert_eq!(counters.set_mode(), 1);
    assert_eq!(counters.set_config_option(), 1);
    assert_eq!(counters.set_model(), 1);
    assert_eq!(counters.failed(CallKind::SetModel), 1);
    assert_eq!(counters.authenticate(), 1);
    assert_eq!(counters.cancel(), 1);
    assert_eq!(counters.sessions_prompted_with("Build"), [new.as_str()]);
    assert_eq!(counters.prompts_in(&old), ["Plan: think first"]);
    assert_eq!(counters.prompts_in(&new), ["Build: write the code"]);
    let created: Vec<&str> = counters
        .calls()
        .iter()
        .filter(|c| c.kind == CallKind::New)
        .filter_map(|c| c.session_id.as_deref())
        .collect();
    assert_eq!(created, [old.as_str(), new.as_str()]);
}

#[tokio::test]
async fn concurrent_runs_sharing_a_state_dir_lose_no_call() {
    let state = temp_dir("shared");
    let cwd = temp_dir("shared-cwd");
    let mut clients = Vec::new();
    for _ in 0..4 {
        let mut client = Client::with_state(state.path());
        client.initialize().await;
        clients.push(client);
    }
    for client in &mut clients {
        let session = client.new_session(cwd.path()).await;
        for n in 0..5 {
            client.prompt_turn(&session, &format!("prompt {n}")).await;
        }
    }
    for client in clients {
        client.close().await;
    }
    let counters = Counters::read(state.path()).unwrap();
    assert_eq!(counters.initialize(), 4);
    assert_eq!(counters.new_session(), 4);
    assert_eq!(counters.prompt(), 20);
}
