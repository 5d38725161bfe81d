//! Protocol coverage: initialize, session/new, echo prompts, modes, config options, models, errors.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

mod support;

use std::time::Duration;

use kandev_mock_agent::{MockConfig, RunOutcome};
use serde_json::json;
use support::{Client, message_texts, temp_dir, updates_of};

#[tokio::test]
async fn initialize_advertises_load_session_and_agent_info() {
    let mut client = Client::start(MockConfig::default());
    let result = client.initialize().await;
    assert_eq!(result["protocolVersion"], 1);
    assert_eq!(result["agentCapabilities"]["loadSession"], true);
    assert_eq!(result["agentInfo"]["name"], "kandev-mock-agent");
    assert!(result["authMethods"].as_array().is_some_and(|m| !m.is_empty()));
    assert_eq!(client.close().await, RunOutcome::Eof);
}

#[tokio::test]
async fn no_load_session_flag_hides_the_capability_and_the_method() {
    let mut client = Client::start(MockConfig { load_session: false, ..MockConfig::default() });
    let result = client.initialize().await;
    assert_eq!(result["agentCapabilities"]["loadSession"], false);
    let (_, answer) = client
        .call("session/load", json!({"sessionId": "sess_x", "cwd": "/tmp", "mcpServers": []}))
        .await;
    assert_eq!(answer["error"]["code"], -32601);
    client.close().await;
}

#[tokio::test]
async fn session_new_offers_modes_config_options_and_models_then_commands() {
    let dir = temp_dir("new");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let (before, answer) =
        client.call("session/new", json!({"cwd": dir.path(), "mcpServers": []})).await;
    assert!(before.is_empty());
    let result = &answer["result"];
    let session_id = result["sessionId"].as_str().unwrap();
    assert!(!session_id.is_empty());
    assert_eq!(result["modes"]["currentModeId"], "default");
    let modes: Vec<&str> = result["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["default", "plan"]);
    let model = result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .expect("a model config option");
    assert_eq!(model["type"], "select");
    assert_eq!(model["currentValue"], "mock-fast");
    assert_eq!(result["models"]["currentModelId"], "mock-fast");

    let commands = client.next().await;
    assert_eq!(commands["method"], "session/update");
    assert_eq!(commands["params"]["sessionId"], session_id);
    assert_eq!(commands["params"]["update"]["sessionUpdate"], "available_commands_update");
    client.close().await;
}

#[tokio::test]
async fn plain_prompt_is_echoed_in_chunks_and_ends_the_turn() {
    let dir = temp_dir("echo");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    let (updates, answer) = client.prompt_turn(&session, "hello there\nsecond line").await;
    let texts = message_texts(&updates);
    assert!(texts.len() > 1 && texts.len() <= 3, "{texts:?}");
    assert_eq!(texts.concat(), "echo: hello there");
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.close().await;
}

#[tokio::test]
async fn prompts_run_concurrently_on_two_sessions() {
    let dir = temp_dir("concurrent");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let slow = client.new_session(dir.path()).await;
    let fast = client.new_session(dir.path()).await;
    let slow_id = client.prompt(&slow, "#!mock\nsleep 60000\nsay late").await;
    let (updates, answer) = client.prompt_turn(&fast, "quick").await;
    assert_eq!(message_texts(&updates).concat(), "echo: quick");
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.cancel(&slow).await;
    let (_, slow_answer) = client.until_response(slow_id).await;
    assert_eq!(slow_answer["result"]["stopReason"], "cancelled");
    client.close().await;
}

#[tokio::test]
async fn set_mode_answers_then_reports_current_mode() {
    let dir = temp_dir("mode");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    let (_, answer) =
        client.call("session/set_mode", json!({"sessionId": session, "modeId": "plan"})).await;
    assert_eq!(answer["result"], json!({}));
    let update = client.next().await;
    assert_eq!(
        update["params"]["update"],
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    );
    let (_, refused) =
        client.call("session/set_mode", json!({"sessionId": session, "modeId": "yolo"})).await;
    assert_eq!(refused["error"]["code"], -32602);
    client.close().await;
}

#[tokio::test]
async fn set_config_option_returns_all_options_with_the_new_value() {
    let dir = temp_dir("config");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    let (_, answer) = client
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "mock-smart"}),
        )
        .await;
    let options = answer["result"]["configOptions"].as_array().unwrap();
    let ids: Vec<&str> = options.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["mode", "model", "thought_level"]);
    assert_eq!(options[1]["currentValue"], "mock-smart");

    let (_, answer) = client
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "mode", "value": "plan"}),
        )
        .await;
    assert_eq!(answer["result"]["configOptions"][0]["currentValue"], "plan");
    let update = client.next().await;
    assert_eq!(update["params"]["update"]["currentModeId"], "plan");

    let (_, refused) = client
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "gpt-9"}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602);
    client.close().await;
}

#[tokio::test]
async fn legacy_set_model_changes_the_model() {
    let dir = temp_dir("model");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    let (_, answer) = client
        .call("session/set_model", json!({"sessionId": session, "modelId": "mock-smart"}))
        .await;
    assert_eq!(answer["result"], json!({}));
    let (_, answer) = client
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
        )
        .await;
    assert_eq!(answer["result"]["configOptions"][1]["currentValue"], "mock-smart");
    let (_, refused) =
        client.call("session/set_model", json!({"sessionId": session, "modelId": "nope"})).await;
    assert_eq!(refused["error"]["code"], -32602);
    client.close().await;
}

#[tokio::test]
async fn unknown_sessions_methods_and_bad_lines_get_structured_errors() {
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;

    let id = client.prompt("sess_nope", "hi").await;
    let (_, answer) = client.until_response(id).await;
    assert_eq!(answer["error"]["code"], -32002);

    let (_, answer) = client.call("session/fly", json!({})).await;
    assert_eq!(answer["error"]["code"], -32601);

    client.send_raw("this is not json").await;
    let answer = client.next().await;
    assert_eq!(answer["error"]["code"], -32700);
    assert_eq!(answer["id"], serde_json::Value::Null);

    client.send_raw("[1,2,3]").await;
    assert_eq!(client.next().await["error"]["code"], -32600);

    let (_, answer) = client.call("session/new", json!({"mcpServers": []})).await;
    assert_eq!(answer["error"]["code"], -32602);

    // Unknown notifications and extra fields are ignored.
    client.notify("_vendor/ping", json!({"x": 1})).await;
    let (before, answer) =
        client.call("authenticate", json!({"methodId": "mock-login", "extra": true})).await;
    assert!(before.is_empty());
    assert_eq!(answer["result"], json!({}));
    client.close().await;
}

#[tokio::test]
async fn extra_fields_and_non_text_blocks_are_tolerated() {
    let dir = temp_dir("lenient");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    let params = json!({
        "sessionId": session,
        "prompt": [
            {"type": "resource_link", "uri": "file:///x", "name": "x"},
            {"type": "text", "text": "from text block", "annotations": {"audience": ["user"]}},
        ],
        "_meta": {"anything": 1},
    });
    let id = client.request("session/prompt", params).await;
    let (before, answer) = client.until_response(id).await;
    // Issue 18: what other blocks reached it is said first, one line each.
    assert_eq!(
        message_texts(&updates_of(&before)).concat(),
        "received resource_link file:///x\necho: from text block"
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn startup_delay_holds_back_the_initialize_answer() {
    let mut client = Client::start(MockConfig {
        startup_delay: Duration::from_millis(2000),
        ..MockConfig::default()
    });
    let started = tokio::time::Instant::now();
    client.initialize().await;
    assert!(started.elapsed() >= Duration::from_millis(2000), "{:?}", started.elapsed());
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn reset_delay_applies_only_after_the_first_conversation() {
    let dir = temp_dir("reset-delay");
    let delay = Duration::from_millis(3000);
    let mut client = Client::start(MockConfig { reset_delay: delay, ..MockConfig::default() });
    client.initialize().await;
    let started = tokio::time::Instant::now();
    let first = client.new_session(dir.path()).await;
    assert!(started.elapsed() < delay);
    let started = tokio::time::Instant::now();
    let second = client.new_session(dir.path()).await;
    assert!(started.elapsed() >= delay, "{:?}", started.elapsed());
    assert_ne!(first, second);
    client.close().await;
}
