//! Client → agent calls: id matching, typed requests and answers, timeouts, closing.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{connect, next_event};
use kandev_acp::{AcpError, AgentEvent, ContentBlock, StopReason};
use serde_json::{Value, json};

#[tokio::test]
async fn out_of_order_responses_reach_their_own_callers() {
    let (client, _events, mut agent) = connect();
    let first = tokio::spawn({
        let client = client.clone();
        async move { client.request("_test/first", json!({})).await }
    });
    let (first_id, _) = agent.expect_request("_test/first").await;
    let second = tokio::spawn({
        let client = client.clone();
        async move { client.request("_test/second", json!({})).await }
    });
    let (second_id, _) = agent.expect_request("_test/second").await;
    assert!(second_id.as_u64() > first_id.as_u64(), "ids must increase");

    agent.respond(&second_id, json!("two")).await;
    agent.respond(&first_id, json!("one")).await;

    assert_eq!(second.await.unwrap().unwrap(), json!("two"));
    assert_eq!(first.await.unwrap().unwrap(), json!("one"));
}

#[tokio::test]
async fn initialize_announces_the_client_and_keeps_unknown_capabilities() {
    let (client, _events, mut agent) = connect();
    let call = tokio::spawn(async move { client.initialize().await });
    let (id, params) = agent.expect_request("initialize").await;
    assert_eq!(params["protocolVersion"], 1);
    assert_eq!(params["clientCapabilities"]["fs"]["readTextFile"], true);
    assert_eq!(params["clientCapabilities"]["fs"]["writeTextFile"], true);
    assert_eq!(params["clientInfo"]["name"], "kandev");
    agent
        .send_line(
            r#"{"jsonrpc":"2.0","id":ID,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":false},"sessionCapabilities":{"resume":{},"list":{}},"_meta":{"claudeCode":{"promptQueueing":true}}},"authMethods":[{"id":"claude-login","name":"Log in with Claude","description":"Run `claude /login`","type":"terminal"},{"id":"gemini-api-key","name":"Use GEMINI_API_KEY","type":"env_var","vars":["GEMINI_API_KEY"]},{"id":"oauth","name":"OAuth"}],"agentInfo":{"name":"claude-agent-acp","version":"0.9.1","title":"Claude"},"somethingNew":42}}"#
                .replace("ID", &id.to_string())
                .as_str(),
        )
        .await;

    let init = call.await.unwrap().unwrap();
    assert_eq!(init.protocol_version, 1);
    let caps = &init.agent_capabilities;
    assert!(caps.load_session);
    assert!(caps.prompt_capabilities.image && caps.prompt_capabilities.embedded_context);
    assert!(caps.mcp_capabilities.http && !caps.mcp_capabilities.sse);
    assert!(caps.has_session_capability("resume"));
    assert_eq!(caps.extra["_meta"]["claudeCode"]["promptQueueing"], true);
    let kinds: Vec<Option<&str>> = init.auth_methods.iter().map(|m| m.kind.as_deref()).collect();
    assert_eq!(kinds, vec![Some("terminal"), Some("env_var"), None]);
    assert_eq!(init.auth_methods[1].raw["vars"], json!(["GEMINI_API_KEY"]));
    assert_eq!(init.auth_methods[0].description.as_deref(), Some("Run `claude /login`"));
    let info = init.agent_info.unwrap();
    assert_eq!((info.name.as_str(), info.version.as_deref()), ("claude-agent-acp", Some("0.9.1")));
}

#[tokio::test]
async fn new_session_reads_modes_config_options_and_legacy_models() {
    let (client, _events, mut agent) = connect();
    let call = tokio::spawn(async move { client.new_session(Path::new("/work/repo"), &[]).await });
    let (id, params) = agent.expect_request("session/new").await;
    assert_eq!(params, json!({"cwd": "/work/repo", "mcpServers": []}));
    agent
        .respond(
            &id,
            json!({
                "sessionId": "sess-1",
                "modes": {"currentModeId": "default", "availableModes": [
                    {"id": "default", "name": "Default", "description": "Ask before edits"},
                    {"id": "plan", "name": "Plan"}
                ]},
                "configOptions": [{
                    "id": "model", "name": "Model", "category": "model", "type": "select",
                    "currentValue": "sonnet",
                    "options": [{"value": "sonnet", "name": "Sonnet"}, {"value": "opus", "name": "Opus"}],
                    "futureField": true
                }],
                "models": {"currentModelId": "gemini-2.5-pro", "availableModels": [
                    {"modelId": "gemini-2.5-pro", "name": "Gemini 2.5 Pro"}
                ]}
            }),
        )
        .await;

    let session = call.await.unwrap().unwrap();
    assert_eq!(session.session_id, "sess-1");
    let modes = session.modes.unwrap();
    assert_eq!(modes.current_mode_id, "default");
    assert_eq!(modes.available_modes[1].id, "plan");
    assert_eq!(modes.available_modes[0].description.as_deref(), Some("Ask before edits"));
    let options = session.config_options.unwrap();
    assert_eq!(options[0].id, "model");
    assert_eq!(options[0].category.as_deref(), Some("model"));
    assert_eq!(options[0].kind, "select");
    assert_eq!(options[0].current_value, json!("sonnet"));
    assert_eq!(options[0].options[1]["value"], "opus");
    assert_eq!(options[0].raw["futureField"], true);
    let models = session.models.unwrap();
    assert_eq!(models.current_model_id, "gemini-2.5-pro");
    assert_eq!(models.available_models[0].name, "Gemini 2.5 Pro");
}

#[tokio::test]
async fn load_session_accepts_a_null_result() {
    let (client, _events, mut agent) = connect();
    let call =
        tokio::spawn(async move { client.load_session("sess-1", Path::new("/w"), &[]).await });
    let (id, params) = agent.expect_request("session/load").await;
    assert_eq!(params, json!({"sessionId": "sess-1", "cwd": "/w", "mcpServers": []}));
    agent.respond(&id, Value::Null).await;
    let loaded = call.await.unwrap().unwrap();
    assert!(loaded.modes.is_none() && loaded.config_options.is_none() && loaded.models.is_none());
}

#[tokio::test]
async fn prompt_sends_text_blocks_and_reads_stop_reason_and_usage() {
    let (client, _events, mut agent) = connect();
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.prompt("sess-1", &[ContentBlock::text("fix the bug")]).await }
    });
    let (id, params) = agent.expect_request("session/prompt").await;
    assert_eq!(
        params,
        json!({"sessionId": "sess-1", "prompt": [{"type": "text", "text": "fix the bug"}]})
    );
    agent
        .respond(
            &id,
            json!({"stopReason": "end_turn", "usage": {"inputTokens": 10, "outputTokens": 3}}),
        )
        .await;
    let done = call.await.unwrap().unwrap();
    assert_eq!(done.stop_reason, StopReason::EndTurn);
    assert_eq!(done.usage, Some(json!({"inputTokens": 10, "outputTokens": 3})));

    let call =
        tokio::spawn(async move { client.prompt("sess-1", &[ContentBlock::text("go")]).await });
    let (id, _) = agent.expect_request("session/prompt").await;
    agent.respond(&id, json!({"stopReason": "paused_for_reasons"})).await;
    let done = call.await.unwrap().unwrap();
    assert_eq!(done.stop_reason, StopReason::Other("paused_for_reasons".into()));
}

#[tokio::test]
async fn a_prompt_response_without_stop_reason_is_a_protocol_error() {
    let (client, _events, mut agent) = connect();
    let call = tokio::spawn(async move { client.prompt("s", &[ContentBlock::text("go")]).await });
    let (id, _) = agent.expect_request("session/prompt").await;
    agent.respond(&id, json!({"usage": {}})).await;
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(err, AcpError::Protocol { ref method, .. } if method == "session/prompt"),
        "{err}"
    );
}

#[tokio::test]
async fn cancel_is_a_notification() {
    let (client, _events, mut agent) = connect();
    client.cancel("sess-1").await.unwrap();
    let message = agent.recv().await;
    assert_eq!(message["method"], "session/cancel");
    assert_eq!(message["params"], json!({"sessionId": "sess-1"}));
    assert!(message.get("id").is_none(), "a notification has no id: {message}");
}

#[tokio::test]
async fn mode_config_option_model_and_authenticate_send_their_params() {
    let (client, _events, mut agent) = connect();
    let calls = tokio::spawn(async move {
        client.set_mode("s", "plan").await.unwrap();
        let options = client.set_config_option("s", "model", "opus").await.unwrap();
        client.set_model("s", "gemini-2.5-flash").await.unwrap();
        client.authenticate("claude-login").await.unwrap();
        options
    });
    let (id, params) = agent.expect_request("session/set_mode").await;
    assert_eq!(params, json!({"sessionId": "s", "modeId": "plan"}));
    agent.respond(&id, json!({})).await;
    let (id, params) = agent.expect_request("session/set_config_option").await;
    assert_eq!(params, json!({"sessionId": "s", "configId": "model", "value": "opus"}));
    agent
        .respond(
            &id,
            json!({"configOptions": [{"id": "model", "name": "Model", "type": "select", "currentValue": "opus", "options": []}]}),
        )
        .await;
    let (id, params) = agent.expect_request("session/set_model").await;
    assert_eq!(params, json!({"sessionId": "s", "modelId": "gemini-2.5-flash"}));
    agent.respond(&id, Value::Null).await;
    let (id, params) = agent.expect_request("authenticate").await;
    assert_eq!(params, json!({"methodId": "claude-login"}));
    agent.respond(&id, json!({})).await;

    let options = calls.await.unwrap().unwrap();
    assert_eq!(options[0].current_value, json!("opus"));
}

#[tokio::test]
async fn agent_errors_are_classified_by_code() {
    let (client, _events, mut agent) = connect();
    let cases = [
        (-32601, "method not found"),
        (-32002, "resource not found"),
        (-32000, "auth required"),
        (-32603, "internal"),
    ];
    for (code, message) in cases {
        let call = tokio::spawn({
            let client = client.clone();
            async move { client.load_session("old", Path::new("/w"), &[]).await }
        });
        let (id, _) = agent.expect_request("session/load").await;
        agent.respond_error(&id, code, message).await;
        let err = call.await.unwrap().unwrap_err();
        assert_eq!(err.rpc_code(), Some(code), "{err}");
        assert_eq!(err.is_method_not_found(), code == -32601, "{err}");
        assert_eq!(err.is_resource_not_found(), code == -32002, "{err}");
        assert_eq!(err.is_auth_required(), code == -32000, "{err}");
        assert!(!err.is_timeout() && !err.is_closed());
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_without_answer_times_out_and_the_late_answer_is_ignored() {
    let (client, _events, mut agent) = connect();
    let call = tokio::spawn({
        let client = client.with_timeout(Duration::from_secs(5));
        async move { client.load_session("s", Path::new("/w"), &[]).await }
    });
    let (late_id, _) = agent.expect_request("session/load").await;
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(err, AcpError::Timeout { ref method, timeout } if method == "session/load" && timeout == Duration::from_secs(5)),
        "{err}"
    );
    assert!(err.is_timeout() && !err.is_resource_not_found() && !err.is_closed());

    // The late answer does not confuse the next call.
    agent.respond(&late_id, json!({})).await;
    let next = tokio::spawn(async move { client.request("_test/next", json!({})).await });
    let (id, _) = agent.expect_request("_test/next").await;
    assert_ne!(id, late_id);
    agent.respond(&id, json!("fresh")).await;
    assert_eq!(next.await.unwrap().unwrap(), json!("fresh"));
}

#[tokio::test(start_paused = true)]
async fn the_default_timeout_comes_from_the_config() {
    let config =
        kandev_acp::AcpConfig { request_timeout: Duration::from_secs(7), ..Default::default() };
    let (client, _events, mut agent) = common::connect_with(config);
    let call = tokio::spawn(async move { client.set_mode("s", "plan").await });
    agent.expect_request("session/set_mode").await;
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(err, AcpError::Timeout { timeout, .. } if timeout == Duration::from_secs(7)),
        "{err}"
    );
}

#[tokio::test]
async fn agent_exit_fails_pending_calls_with_closed() {
    let (client, mut events, mut agent) = connect();
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.prompt("s", &[ContentBlock::text("go")]).await }
    });
    agent.expect_request("session/prompt").await;
    drop(agent);

    let err = call.await.unwrap().unwrap_err();
    assert!(matches!(err, AcpError::Closed { ref method } if method == "session/prompt"), "{err}");
    assert!(matches!(next_event(&mut events).await, AgentEvent::Closed));
    assert!(client.is_closed());
    let later = client.set_mode("s", "plan").await.unwrap_err();
    assert!(later.is_closed(), "{later}");
    tokio::time::timeout(common::PATIENCE, client.closed()).await.unwrap();
}

#[tokio::test]
async fn close_fails_pending_calls_and_closes_the_agent_input() {
    let (client, mut events, mut agent) = connect();
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.request("_test/slow", json!({})).await }
    });
    agent.expect_request("_test/slow").await;
    client.close();

    assert!(call.await.unwrap().unwrap_err().is_closed());
    assert!(matches!(next_event(&mut events).await, AgentEvent::Closed));
    assert_eq!(agent.recv_eof().await, None, "agent input must be closed");
    tokio::time::timeout(common::PATIENCE, client.closed()).await.unwrap();
    assert!(client.cancel("s").await.unwrap_err().is_closed());
}

#[tokio::test]
async fn dropping_the_last_client_handle_closes_the_connection() {
    let (client, mut events, mut agent) = connect();
    let other = client.clone();
    drop(client);
    other.cancel("s").await.unwrap();
    assert_eq!(agent.recv().await["method"], "session/cancel");
    drop(other);

    assert!(matches!(next_event(&mut events).await, AgentEvent::Closed));
    assert_eq!(agent.recv_eof().await, None, "agent input must be closed");
    assert!(events.recv().await.is_none(), "closed is the last event");
}

#[tokio::test]
async fn updates_sent_before_an_answer_are_queued_before_the_call_returns() {
    let (client, mut events, mut agent) = connect();
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.load_session("sess-1", Path::new("/w"), &[]).await }
    });
    let (id, _) = agent.expect_request("session/load").await;
    for text in ["first", "second"] {
        agent
            .notify(
                "session/update",
                json!({"sessionId": "sess-1", "update": {"sessionUpdate": "user_message_chunk",
                    "content": {"type": "text", "text": text}}}),
            )
            .await;
    }
    agent.respond(&id, json!({})).await;
    call.await.unwrap().unwrap();

    for expected in ["first", "second"] {
        let Ok(AgentEvent::SessionUpdate { update, .. }) = events.try_recv() else {
            panic!("the replayed update must already be queued");
        };
        assert_eq!(
            update,
            kandev_acp::SessionUpdate::UserMessageChunk { content: ContentBlock::text(expected) }
        );
    }
}

#[tokio::test]
async fn i20_a1_a_joined_client_sends_no_handshake_takes_new_ids_and_ends_the_open_turn() {
    // The dead server had sent `session/prompt` as request 7; this one numbers from 1000.
    let (client, mut events, mut agent) = common::join(1000);
    let open_turn = tokio::spawn({
        let client = client.clone();
        async move { client.await_prompt(7).await }
    });
    // The agent goes on with the turn: a chunk, then the answer to request 7.
    let chunk = json!({ "sessionId": "s", "update": { "sessionUpdate": "agent_message_chunk",
        "content": { "type": "text", "text": "still here" } } });
    agent.notify("session/update", chunk).await;
    let (_, event) = tokio::time::timeout(common::PATIENCE, events.recv()).await.unwrap().unwrap();
    assert!(matches!(event, AgentEvent::SessionUpdate { .. }), "{event:?}");
    // A request of this server in the meantime gets an id of the new range.
    let other = tokio::spawn({
        let client = client.clone();
        async move { client.request("_test/ping", json!({})).await }
    });
    // The first thing the agent reads is that request: no `initialize`, no session call.
    let (id, _) = agent.expect_request("_test/ping").await;
    assert_eq!(id, json!(1000));
    agent.respond(&id, json!("pong")).await;
    assert_eq!(other.await.unwrap().unwrap(), json!("pong"));
    agent.respond(&json!(7), json!({ "stopReason": "end_turn" })).await;
    let answer = tokio::time::timeout(common::PATIENCE, open_turn).await.unwrap().unwrap();
    assert_eq!(answer.unwrap().stop_reason, StopReason::EndTurn);
    // A reserved id is the one the prompt goes out with.
    let id = client.reserve_id();
    assert_eq!(id, 1001);
    let prompt = tokio::spawn({
        let client = client.clone();
        async move { client.prompt_as(id, "s", &[ContentBlock::text("next")]).await }
    });
    let (sent, _) = agent.expect_request("session/prompt").await;
    assert_eq!(sent, json!(1001));
    // A second wait for an id already waited on is refused, not a hang.
    let twice = client.await_prompt(1001).await.unwrap_err();
    assert!(twice.to_string().contains("already waiting"), "{twice}");
    agent.respond(&sent, json!({ "stopReason": "end_turn" })).await;
    assert!(prompt.await.unwrap().is_ok());
}
