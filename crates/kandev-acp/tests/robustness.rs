//! What the client does with agent traffic it cannot use: none of it is fatal.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

mod common;

use common::{FakeAgent, connect, connect_with, next_event};
use kandev_acp::{AcpClient, AcpConfig, AgentEvent, ContentBlock, SessionUpdate};
use serde_json::json;

/// A request/response round trip still works.
async fn assert_still_working(client: &AcpClient, agent: &mut FakeAgent) {
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.request("_test/ping", json!({})).await }
    });
    let (id, _) = agent.expect_request("_test/ping").await;
    agent.respond(&id, json!("pong")).await;
    assert_eq!(call.await.unwrap().unwrap(), json!("pong"));
}

async fn expect_protocol_error(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
) -> String {
    match next_event(events).await {
        AgentEvent::ProtocolError { message } => message,
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_garbage_line_is_reported_and_not_fatal() {
    let (client, mut events, mut agent) = connect();
    agent.send_line("npm WARN deprecated something@1.0.0").await;
    let message = expect_protocol_error(&mut events).await;
    assert!(message.contains("not json"), "{message}");
    assert!(!client.is_closed());
    assert_still_working(&client, &mut agent).await;
}

#[tokio::test]
async fn json_that_is_not_a_message_is_reported() {
    let (client, mut events, mut agent) = connect();
    agent.send_line("[1,2,3]").await;
    expect_protocol_error(&mut events).await;
    agent.send_line(r#"{"hello":"world"}"#).await;
    expect_protocol_error(&mut events).await;
    assert_still_working(&client, &mut agent).await;
}

#[tokio::test]
async fn an_over_limit_line_is_discarded_reported_and_not_fatal() {
    let config = AcpConfig { max_line_len: 1024, ..AcpConfig::default() };
    let (client, mut events, mut agent) = connect_with(config);
    let huge = "x".repeat(200_000);
    let line = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": huge}}}});
    agent.send(line).await;
    agent
        .notify(
            "session/update",
            json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "small"}}}),
        )
        .await;

    let message = expect_protocol_error(&mut events).await;
    assert!(message.contains("over the limit of 1024"), "{message}");
    let AgentEvent::SessionUpdate { update, .. } = next_event(&mut events).await else {
        panic!("expected the small update after the discarded line");
    };
    assert_eq!(update, SessionUpdate::AgentMessageChunk { content: ContentBlock::text("small") });
    assert_still_working(&client, &mut agent).await;
}

#[tokio::test]
async fn a_line_that_is_not_utf8_is_reported_and_not_fatal() {
    let (client, mut events, mut agent) = connect();
    agent.send_bytes(b"{\"jsonrpc\": \"2.0\", \"method\": \"x\xff\xfe\"}\n").await;
    let message = expect_protocol_error(&mut events).await;
    assert!(message.contains("not json"), "{message}");
    assert!(!client.is_closed());
    assert_still_working(&client, &mut agent).await;
}

#[tokio::test]
async fn a_last_line_without_newline_is_read_before_the_output_closes() {
    let (client, mut events, mut agent) = connect();
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.request("_test/ping", json!({})).await }
    });
    let (id, _) = agent.expect_request("_test/ping").await;
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": "pong"});
    agent.send_bytes(answer.to_string().as_bytes()).await;
    agent.close_output().await;
    assert_eq!(call.await.unwrap().unwrap(), json!("pong"));
    assert!(matches!(next_event(&mut events).await, AgentEvent::Closed));
}

#[tokio::test]
async fn underscore_notifications_are_ignored() {
    let (_client, mut events, mut agent) = connect();
    agent.notify("_claude/sdkMessage", json!({"anything": [1, 2]})).await;
    agent.notify("some/futureNotification", json!({})).await;
    agent
        .notify(
            "session/update",
            json!({"sessionId": "s", "update": {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}}),
        )
        .await;
    let event = next_event(&mut events).await;
    assert!(
        matches!(
            event,
            AgentEvent::SessionUpdate { update: SessionUpdate::CurrentModeUpdate { .. }, .. }
        ),
        "the ignored notifications must produce no event, got {event:?}"
    );
}

#[tokio::test]
async fn an_unknown_agent_request_gets_method_not_found() {
    let (client, _events, mut agent) = connect();
    agent.request(json!(7), "editor/open", json!({"path": "a.rs"})).await;
    let answer = agent.recv().await;
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], -32601);
    agent.request(json!("ext-1"), "_zed/custom", json!({})).await;
    let answer = agent.recv().await;
    assert_eq!(answer["id"], "ext-1");
    assert_eq!(answer["error"]["code"], -32601);
    assert_still_working(&client, &mut agent).await;
}

#[tokio::test]
async fn a_request_with_malformed_params_gets_invalid_params() {
    let (client, mut events, mut agent) = connect();
    agent.request(json!(3), "fs/read_text_file", json!({"sessionId": "s"})).await;
    let answer = agent.recv().await;
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["error"]["code"], -32602);
    let message = expect_protocol_error(&mut events).await;
    assert!(message.contains("fs/read_text_file"), "{message}");
    assert_still_working(&client, &mut agent).await;
}

#[tokio::test]
async fn a_response_to_an_unknown_id_is_ignored() {
    let (client, _events, mut agent) = connect();
    agent.respond(&json!(999), json!({})).await;
    agent.respond(&json!("not-ours"), json!({})).await;
    assert_still_working(&client, &mut agent).await;
}
