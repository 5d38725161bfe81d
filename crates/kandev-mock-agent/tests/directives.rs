//! Each `#!mock` directive, observed on the wire.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

mod support;

use std::time::Duration;

use kandev_mock_agent::script::stream_chunk_text;
use kandev_mock_agent::{GARBAGE_LINE, MockConfig, RunOutcome};
use kandev_testkit::TempDir;
use serde_json::{Value, json};
use support::{Client, chunk_texts, message_texts, script, temp_dir, updates_of};

async fn ready(dir: &TempDir) -> (Client, String) {
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    (client, session)
}

#[tokio::test]
async fn say_think_tool_plan_and_usage_produce_their_updates_in_order() {
    let dir = temp_dir("updates");
    let (mut client, session) = ready(&dir).await;
    let prompt = format!(
        "Step: implement the task\nplan mode instructions\n{}",
        script(&[
            "# a comment",
            "",
            "think looking around",
            "say hello",
            "tool execute Run tests",
            "tool_done",
            "tool edit Patch file",
            "tool_done failed",
            "plan completed:Read; in_progress:Fix; Test",
            "usage 1200 200000",
        ])
    );
    let (updates, answer) = client.prompt_turn(&session, &prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let kinds: Vec<&str> = updates.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "agent_thought_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "plan",
            "usage_update",
        ]
    );
    assert_eq!(chunk_texts(&updates, "agent_thought_chunk"), ["looking around"]);
    assert_eq!(message_texts(&updates), ["hello"]);
    assert_eq!(updates[2]["kind"], "execute");
    assert_eq!(updates[2]["title"], "Run tests");
    assert_eq!(updates[2]["status"], "in_progress");
    assert_eq!(updates[3]["toolCallId"], updates[2]["toolCallId"]);
    assert_eq!(updates[3]["status"], "completed");
    assert_eq!(updates[5]["toolCallId"], updates[4]["toolCallId"]);
    assert_ne!(updates[4]["toolCallId"], updates[2]["toolCallId"]);
    assert_eq!(updates[5]["status"], "failed");
    let entries: Vec<(Value, Value)> = updates[6]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["status"].clone(), e["content"].clone()))
        .collect();
    assert_eq!(
        entries,
        [
            (json!("completed"), json!("Read")),
            (json!("in_progress"), json!("Fix")),
            (json!("pending"), json!("Test")),
        ]
    );
    assert_eq!(updates[7]["used"], 1200);
    assert_eq!(updates[7]["size"], 200000);
    client.close().await;
}

#[tokio::test]
async fn stream_sends_every_chunk_in_order() {
    let dir = temp_dir("stream");
    let (mut client, session) = ready(&dir).await;
    let (updates, answer) = client.prompt_turn(&session, &script(&["stream 2000 100"])).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let texts = message_texts(&updates);
    assert_eq!(texts.len(), 2000);
    for (index, text) in texts.iter().enumerate() {
        assert_eq!(*text, stream_chunk_text(index as u64, 100));
    }
    client.close().await;
}

#[tokio::test]
async fn stop_ends_the_turn_with_its_reason_and_skips_the_rest() {
    let dir = temp_dir("stop");
    let (mut client, session) = ready(&dir).await;
    let (updates, answer) =
        client.prompt_turn(&session, &script(&["say one", "stop max_tokens", "say two"])).await;
    assert_eq!(message_texts(&updates), ["one"]);
    assert_eq!(answer["result"]["stopReason"], "max_tokens");
    client.close().await;
}

#[tokio::test]
async fn error_answers_the_prompt_with_a_json_rpc_error() {
    let dir = temp_dir("error");
    let (mut client, session) = ready(&dir).await;
    let (updates, answer) =
        client.prompt_turn(&session, &script(&["say before", "error -32000 please log in"])).await;
    assert_eq!(message_texts(&updates), ["before"]);
    assert_eq!(answer["error"], json!({"code": -32000, "message": "please log in"}));
    // The session still works.
    let (_, answer) = client.prompt_turn(&session, "again").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.close().await;
}

#[tokio::test]
async fn an_invalid_script_is_refused_with_invalid_params() {
    let dir = temp_dir("invalid");
    let (mut client, session) = ready(&dir).await;
    let (updates, answer) = client.prompt_turn(&session, &script(&["say ok", "fly"])).await;
    assert!(updates.is_empty());
    assert_eq!(answer["error"]["code"], -32602);
    assert!(answer["error"]["message"].as_str().unwrap().contains("unknown directive `fly`"));
    client.close().await;
}

#[tokio::test]
async fn crash_writes_what_came_before_then_ends_the_run_with_its_code() {
    let dir = temp_dir("crash");
    let (mut client, session) = ready(&dir).await;
    client.prompt(&session, &script(&["say last words", "crash 3", "say never"])).await;
    let update = client.next().await;
    assert_eq!(update["params"]["update"]["content"]["text"], "last words");
    assert_eq!(client.finish().await, RunOutcome::Crashed { code: 3 });
}

#[tokio::test]
async fn crash_without_code_exits_with_one() {
    let dir = temp_dir("crash1");
    let (mut client, session) = ready(&dir).await;
    client.prompt(&session, &script(&["crash"])).await;
    assert_eq!(client.finish().await.exit_code(), 1);
}

#[tokio::test(start_paused = true)]
async fn hang_never_answers_even_after_cancel_but_the_agent_stays_responsive() {
    let dir = temp_dir("hang");
    let (mut client, session) = ready(&dir).await;
    let hung = client.prompt(&session, &script(&["say stuck", "hang"])).await;
    assert_eq!(client.next().await["params"]["update"]["content"]["text"], "stuck");
    client.cancel(&session).await;
    let (before, answer) =
        client.call("session/set_mode", json!({"sessionId": session, "modeId": "plan"})).await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(answer["result"], json!({}));
    let mode_update = client.next().await;
    assert_eq!(mode_update["params"]["update"]["sessionUpdate"], "current_mode_update");
    // Paused time: this waits a virtual minute, deterministically.
    let late = client.try_next_line(Duration::from_secs(60)).await;
    assert_eq!(late, None, "prompt {hung} must never be answered");
    assert_eq!(client.close().await, RunOutcome::Eof);
}

#[tokio::test]
async fn garbage_writes_one_non_json_line() {
    let dir = temp_dir("garbage");
    let (mut client, session) = ready(&dir).await;
    let id = client.prompt(&session, &script(&["garbage", "say after"])).await;
    assert_eq!(client.next_line().await, GARBAGE_LINE);
    assert!(serde_json::from_str::<Value>(GARBAGE_LINE).is_err());
    let (before, answer) = client.until_response(id).await;
    assert_eq!(message_texts(&updates_of(&before)), ["after"]);
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.close().await;
}

#[tokio::test]
async fn bigline_writes_one_oversized_valid_json_line() {
    let dir = temp_dir("bigline");
    let (mut client, session) = ready(&dir).await;
    let id = client.prompt(&session, &script(&["bigline 3000000"])).await;
    let line = client.next_line().await;
    assert!(line.len() > 3_000_000);
    let message: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(message["params"]["update"]["content"]["text"].as_str().unwrap().len(), 3_000_000);
    let (_, answer) = client.until_response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.close().await;
}

async fn permission_round(option: Value) -> (Vec<Value>, Value, Value) {
    let dir = temp_dir("permission");
    let (mut client, session) = ready(&dir).await;
    let id = client.prompt(&session, &script(&["ask_permission Delete build dir"])).await;
    let request = client.next().await;
    assert_eq!(request["method"], "session/request_permission");
    client.respond(&request["id"], json!({ "outcome": option })).await;
    let (before, answer) = client.until_response(id).await;
    client.close().await;
    (updates_of(&before), answer, request)
}

#[tokio::test]
async fn ask_permission_offers_allow_and_reject_and_says_the_choice() {
    let (updates, answer, request) =
        permission_round(json!({"outcome": "selected", "optionId": "allow_once"})).await;
    let params = &request["params"];
    assert_eq!(params["toolCall"]["title"], "Delete build dir");
    let options: Vec<(&str, &str)> = params["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["optionId"].as_str().unwrap(), o["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(options, [("allow_once", "allow_once"), ("reject_once", "reject_once")]);
    assert_eq!(message_texts(&updates), ["permission: allow_once\n"]);
    assert_eq!(answer["result"]["stopReason"], "end_turn");

    let (updates, _, _) =
        permission_round(json!({"outcome": "selected", "optionId": "reject_once"})).await;
    assert_eq!(message_texts(&updates), ["permission: reject_once\n"]);
    let (updates, _, _) = permission_round(json!({"outcome": "cancelled"})).await;
    assert_eq!(message_texts(&updates), ["permission: cancelled\n"]);
}

#[tokio::test]
async fn write_goes_directly_into_the_cwd_without_the_client_capability() {
    let dir = temp_dir("write-direct");
    let (mut client, session) = ready(&dir).await;
    let (updates, answer) = client
        .prompt_turn(
            &session,
            &script(&["write notes/out.txt first\\nsecond", "read notes/out.txt"]),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let written = std::fs::read_to_string(dir.path().join("notes/out.txt")).unwrap();
    assert_eq!(written, "first\nsecond");
    assert_eq!(message_texts(&updates), ["first\nsecond"]);
    client.close().await;
}

#[tokio::test]
async fn write_outside_the_cwd_is_refused() {
    let dir = temp_dir("write-escape");
    let (mut client, session) = ready(&dir).await;
    let (updates, answer) = client.prompt_turn(&session, &script(&["write ../escape.txt x"])).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let texts = message_texts(&updates);
    assert_eq!(texts.len(), 1);
    assert!(texts[0].starts_with("write ../escape.txt failed"), "{texts:?}");
    assert!(!dir.path().parent().unwrap().join("escape.txt").exists());
    client.close().await;
}

#[tokio::test]
async fn write_and_read_use_the_client_when_it_offers_fs() {
    let dir = temp_dir("write-client");
    let mut client = Client::start(MockConfig::default());
    client.initialize_with(json!({"fs": {"readTextFile": true, "writeTextFile": true}})).await;
    let session = client.new_session(dir.path()).await;
    let id = client.prompt(&session, &script(&["write out.txt hello", "read in.txt"])).await;

    let write = client.next().await;
    assert_eq!(write["method"], "fs/write_text_file");
    assert_eq!(write["params"]["sessionId"], session.as_str());
    assert_eq!(write["params"]["path"], dir.path().join("out.txt").to_str().unwrap());
    assert_eq!(write["params"]["content"], "hello");
    client.respond(&write["id"], Value::Null).await;

    let read = client.next().await;
    assert_eq!(read["method"], "fs/read_text_file");
    assert_eq!(read["params"]["path"], dir.path().join("in.txt").to_str().unwrap());
    client.respond(&read["id"], json!({"content": "from the editor"})).await;

    let (before, answer) = client.until_response(id).await;
    assert_eq!(message_texts(&updates_of(&before)), ["from the editor"]);
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert!(!dir.path().join("out.txt").exists(), "the client does the writing");
    client.close().await;
}

#[tokio::test]
async fn i19_a1_terminal_without_the_client_capability_says_so() {
    let dir = temp_dir("terminal-none");
    let (mut client, session) = ready(&dir).await;
    let (updates, answer) = client.prompt_turn(&session, &script(&["terminal echo hi"])).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(message_texts(&updates), ["terminal: the client does not support terminals"]);
    client.close().await;
}

#[tokio::test]
async fn i19_a1_terminal_runs_through_the_client_and_says_output_and_exit_code() {
    let dir = temp_dir("terminal-client");
    let mut client = Client::start(MockConfig::default());
    client.initialize_with(json!({"terminal": true})).await;
    let session = client.new_session(dir.path()).await;
    let id =
        client.prompt(&session, &script(&["terminal --cwd=sub --limit=64 echo hi; exit 3"])).await;

    let create = client.next().await;
    assert_eq!(create["method"], "terminal/create");
    assert_eq!(create["params"]["command"], "sh");
    assert_eq!(create["params"]["args"], json!(["-c", "echo hi; exit 3"]));
    assert_eq!(create["params"]["cwd"], "sub");
    assert_eq!(create["params"]["outputByteLimit"], 64);
    client.respond(&create["id"], json!({"terminalId": "t1"})).await;

    let tool_call = client.next().await;
    assert_eq!(tool_call["params"]["update"]["sessionUpdate"], "tool_call");
    assert_eq!(
        tool_call["params"]["update"]["content"],
        json!([{"type": "terminal", "terminalId": "t1"}])
    );
    let mut methods = vec![];
    for answer in [
        json!({"exitCode": 3, "signal": null}),
        json!({"output": "hi\n", "truncated": false}),
        json!({}),
    ] {
        let call = client.next().await;
        assert_eq!(call["params"]["terminalId"], "t1");
        methods.push(call["method"].as_str().unwrap().to_owned());
        client.respond(&call["id"], answer).await;
    }
    assert_eq!(methods, ["terminal/wait_for_exit", "terminal/output", "terminal/release"]);
    let (before, answer) = client.until_response(id).await;
    assert_eq!(message_texts(&updates_of(&before)), ["terminal exited with code 3; output: hi\n"]);
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.close().await;
}
