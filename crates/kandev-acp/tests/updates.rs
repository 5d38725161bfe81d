//! `session/update` parsing from literal lines as real agents send them.

mod common;

use common::{connect, next_event};
use kandev_acp::{
    AgentEvent, ContentBlock, PlanEntryPriority, PlanEntryStatus, SessionUpdate, ToolCallContent,
    ToolCallStatus, ToolKind,
};
use serde_json::json;

/// Sends one literal line and returns the session update it produced.
async fn update_from(line: &str) -> SessionUpdate {
    let (_client, mut events, mut agent) = connect();
    agent.send_line(line).await;
    match next_event(&mut events).await {
        AgentEvent::SessionUpdate { session_id, update } => {
            assert_eq!(session_id, "sess-1");
            update
        }
        other => panic!("expected a session update, got {other:?}"),
    }
}

#[tokio::test]
async fn message_thought_and_user_chunks() {
    let cases = [
        (
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello","annotations":null},"messageId":"m1"}}}"#,
            SessionUpdate::AgentMessageChunk { content: ContentBlock::text("Hello") },
        ),
        (
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"Thinking"}},"_meta":{"x":1}}}"#,
            SessionUpdate::AgentThoughtChunk { content: ContentBlock::text("Thinking") },
        ),
        (
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"fix it"}}}}"#,
            SessionUpdate::UserMessageChunk { content: ContentBlock::text("fix it") },
        ),
        (
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"image","mimeType":"image/png","data":"AAAA"}}}}"#,
            SessionUpdate::UserMessageChunk {
                content: ContentBlock::Other {
                    kind: "image".into(),
                    raw: json!({"type": "image", "mimeType": "image/png", "data": "AAAA"}),
                },
            },
        ),
    ];
    for (line, expected) in cases {
        assert_eq!(update_from(line).await, expected, "{line}");
    }
}

#[tokio::test]
async fn tool_call_with_diff_locations_and_raw_input() {
    let update = update_from(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"tool_call","toolCallId":"toolu_01","title":"Edit `src/main.rs`","kind":"edit","status":"pending","content":[{"type":"diff","path":"/w/src/main.rs","oldText":"a","newText":"b"},{"type":"content","content":{"type":"text","text":"note"}},{"type":"terminal","terminalId":"term-1"}],"locations":[{"path":"/w/src/main.rs","line":3}],"rawInput":{"file_path":"/w/src/main.rs"},"_meta":{"claudeCode":{"toolName":"Edit"}}}}}"#).await;
    let SessionUpdate::ToolCall(call) = update else {
        panic!("expected a tool call, got {update:?}");
    };
    assert_eq!(call.tool_call_id, "toolu_01");
    assert_eq!(call.title, "Edit `src/main.rs`");
    assert_eq!(call.kind, ToolKind::Edit);
    assert_eq!(call.status, ToolCallStatus::Pending);
    assert_eq!(
        call.content,
        vec![
            ToolCallContent::Diff {
                path: "/w/src/main.rs".into(),
                old_text: Some("a".into()),
                new_text: "b".into(),
            },
            ToolCallContent::Content(ContentBlock::text("note")),
            ToolCallContent::Terminal { terminal_id: "term-1".into() },
        ]
    );
    assert_eq!(call.locations[0].path, "/w/src/main.rs");
    assert_eq!(call.locations[0].line, Some(3));
    assert_eq!(call.raw_input, Some(json!({"file_path": "/w/src/main.rs"})));
    assert_eq!(call.raw["_meta"]["claudeCode"]["toolName"], "Edit");
}

#[tokio::test]
async fn tool_call_update_has_only_the_sent_fields() {
    let update = update_from(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"tool_call_update","toolCallId":"toolu_01","status":"completed","content":[{"type":"diff","path":"/w/new.rs","oldText":null,"newText":"fn main() {}"}],"rawOutput":{"ok":true},"title":null}}}"#).await;
    let SessionUpdate::ToolCallUpdate(change) = update else {
        panic!("expected a tool call update, got {update:?}");
    };
    assert_eq!(change.tool_call_id, "toolu_01");
    assert_eq!(change.status, Some(ToolCallStatus::Completed));
    assert_eq!(change.title, None);
    assert_eq!(change.kind, None);
    assert_eq!(change.locations, None);
    assert_eq!(
        change.content,
        Some(vec![ToolCallContent::Diff {
            path: "/w/new.rs".into(),
            old_text: None,
            new_text: "fn main() {}".into(),
        }])
    );
    assert_eq!(change.raw_output, Some(json!({"ok": true})));
}

#[tokio::test]
async fn plan_commands_mode_and_config_options() {
    let plan = update_from(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"plan","entries":[{"content":"Read code","priority":"high","status":"completed"},{"content":"Write fix","priority":"medium","status":"in_progress","extra":1}]}}}"#).await;
    let SessionUpdate::Plan { entries } = plan else {
        panic!("expected a plan, got {plan:?}");
    };
    assert_eq!(entries[0].priority, PlanEntryPriority::High);
    assert_eq!(entries[1].status, PlanEntryStatus::InProgress);
    assert_eq!(entries[1].content, "Write fix");

    let commands = update_from(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"review","description":"Review changes","input":{"hint":"what to review"}},{"name":"init","description":"Create AGENTS.md","input":null}]}}}"#).await;
    let SessionUpdate::AvailableCommandsUpdate { commands } = commands else {
        panic!("expected commands, got {commands:?}");
    };
    assert_eq!(commands[0].name, "review");
    assert_eq!(commands[0].input, Some(json!({"hint": "what to review"})));
    assert_eq!(commands[1].input, None);

    let mode = update_from(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"current_mode_update","currentModeId":"plan"}}}"#).await;
    assert_eq!(mode, SessionUpdate::CurrentModeUpdate { current_mode_id: "plan".into() });

    let options = update_from(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"config_option_update","configOptions":[{"id":"thought_level","name":"Thinking","category":"thought_level","type":"select","currentValue":"high","options":[{"group":"g","options":[{"value":"high","name":"High"}]}]}]}}}"#).await;
    let SessionUpdate::ConfigOptionUpdate { config_options } = options else {
        panic!("expected config options, got {options:?}");
    };
    assert_eq!(config_options[0].id, "thought_level");
    assert_eq!(config_options[0].current_value, json!("high"));
    assert_eq!(config_options[0].options[0]["group"], "g");
}

#[tokio::test]
async fn session_info_and_usage() {
    let info = update_from(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"session_info_update","title":"Fix login bug","updatedAt":"2026-01-01T00:00:00Z"}}}"#).await;
    let SessionUpdate::SessionInfoUpdate { title, updated_at, .. } = info else {
        panic!("expected session info, got {info:?}");
    };
    assert_eq!(title.as_deref(), Some("Fix login bug"));
    assert_eq!(updated_at.as_deref(), Some("2026-01-01T00:00:00Z"));

    let usage = update_from(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"usage_update","used":53000,"size":200000,"cost":{"amount":0.045,"currency":"USD"}}}}"#).await;
    let SessionUpdate::UsageUpdate { used, size, cost, .. } = usage else {
        panic!("expected usage, got {usage:?}");
    };
    assert_eq!((used, size), (Some(53000), Some(200000)));
    assert_eq!(cost, Some(json!({"amount": 0.045, "currency": "USD"})));
}

#[tokio::test]
async fn an_unknown_update_kind_is_kept_and_the_connection_keeps_working() {
    let (_client, mut events, mut agent) = connect();
    agent.send_line(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"plan_removed","planId":"p1"}}}"#).await;
    agent.send_line(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"current_mode_update","currentModeId":"code"}}}"#).await;

    let AgentEvent::SessionUpdate { update, .. } = next_event(&mut events).await else {
        panic!("expected a session update");
    };
    assert_eq!(
        update,
        SessionUpdate::Unknown {
            kind: "plan_removed".into(),
            raw: json!({"sessionUpdate": "plan_removed", "planId": "p1"}),
        }
    );
    let AgentEvent::SessionUpdate { update, .. } = next_event(&mut events).await else {
        panic!("expected a session update");
    };
    assert_eq!(update, SessionUpdate::CurrentModeUpdate { current_mode_id: "code".into() });
}

#[tokio::test]
async fn a_malformed_known_update_is_a_protocol_error_not_fatal() {
    let (_client, mut events, mut agent) = connect();
    agent.send_line(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"tool_call","title":"no id"}}}"#).await;
    agent.send_line(r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"still here"}}}}"#).await;

    let AgentEvent::ProtocolError { message } = next_event(&mut events).await else {
        panic!("expected a protocol error");
    };
    assert!(message.contains("tool_call"), "{message}");
    let AgentEvent::SessionUpdate { update, .. } = next_event(&mut events).await else {
        panic!("expected a session update");
    };
    assert_eq!(
        update,
        SessionUpdate::AgentMessageChunk { content: ContentBlock::text("still here") }
    );
}

#[tokio::test]
async fn i20_a1_tagged_events_carry_the_offset_where_their_line_ends() {
    use tokio::io::AsyncWriteExt;
    let (client_end, mut agent) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(client_end);
    let (client, mut events) =
        kandev_acp::AcpClient::connect_tagged(read, write, kandev_acp::AcpConfig::default(), None);
    let chunk = |text: &str| {
        let update = json!({"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text}});
        let params = json!({"sessionId": "s", "update": update});
        format!("{}\n", json!({"jsonrpc": "2.0", "method": "session/update", "params": params}))
    };
    let (first, second) = (chunk("one"), chunk("two"));
    // Both lines in one write, the second split across two.
    let all = format!("{first}{second}");
    let (head, tail) = all.split_at(first.len() + 5);
    agent.write_all(head.as_bytes()).await.unwrap();
    let (end, event) = recv_tagged(&mut events).await;
    assert_eq!(end, first.len() as u64);
    assert!(matches!(event, AgentEvent::SessionUpdate { .. }), "{event:?}");
    agent.write_all(tail.as_bytes()).await.unwrap();
    let (end, _) = recv_tagged(&mut events).await;
    assert_eq!(end, all.len() as u64);
    assert_eq!(client.dispatched_through(), all.len() as u64);
    drop(agent);
    let (end, event) = recv_tagged(&mut events).await;
    assert!(matches!(event, AgentEvent::Closed), "{event:?}");
    assert_eq!(end, all.len() as u64);
}

async fn recv_tagged(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<(u64, AgentEvent)>,
) -> (u64, AgentEvent) {
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), events.recv());
    next.await.expect("an event in time").expect("open")
}
