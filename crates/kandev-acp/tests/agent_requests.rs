//! Agent → client requests: permissions and file access, answered later through responders.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

mod common;

use common::{connect, next_event};
use kandev_acp::{AgentEvent, ContentBlock, Outcome, PermissionOptionKind, SessionUpdate};
use serde_json::json;
use std::time::Duration;

const PERMISSION_LINE: &str = r#"{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":{"sessionId":"sess-1","toolCall":{"toolCallId":"toolu_9","title":"rm -rf build","kind":"execute","rawInput":{"command":"rm -rf build"}},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},{"optionId":"always","name":"Always allow","kind":"allow_always"},{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}"#;

#[tokio::test(start_paused = true)]
async fn a_permission_answered_minutes_later_does_not_block_other_traffic() {
    let (client, mut events, mut agent) = connect();
    agent.send_line(PERMISSION_LINE).await;
    let AgentEvent::PermissionRequest { session_id, tool_call, options, responder } =
        next_event(&mut events).await
    else {
        panic!("expected a permission request");
    };
    assert_eq!(session_id, "sess-1");
    assert_eq!(tool_call.tool_call_id.as_deref(), Some("toolu_9"));
    assert_eq!(tool_call.title.as_deref(), Some("rm -rf build"));
    assert_eq!(tool_call.raw["rawInput"]["command"], "rm -rf build");
    let kinds: Vec<_> = options.iter().map(|option| option.kind.clone()).collect();
    assert_eq!(
        kinds,
        [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
            PermissionOptionKind::RejectOnce
        ]
    );
    assert!(options[1].kind.is_allow() && !options[2].kind.is_allow());

    // While the permission is unanswered, updates still arrive ...
    agent
        .notify(
            "session/update",
            json!({"sessionId": "sess-1", "update": {"sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "waiting"}}}),
        )
        .await;
    let AgentEvent::SessionUpdate { update, .. } = next_event(&mut events).await else {
        panic!("expected a session update while the permission waits");
    };
    assert_eq!(update, SessionUpdate::AgentMessageChunk { content: ContentBlock::text("waiting") });

    // ... and calls still complete.
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.set_mode("sess-1", "plan").await }
    });
    let (id, _) = agent.expect_request("session/set_mode").await;
    agent.respond(&id, json!({})).await;
    call.await.unwrap().unwrap();

    tokio::time::advance(Duration::from_secs(10 * 60)).await;
    responder.respond(Outcome::Selected("always".into()));
    let answer = agent.recv().await;
    assert_eq!(answer["id"], "perm-1");
    assert_eq!(answer["result"], json!({"outcome": {"outcome": "selected", "optionId": "always"}}));
}

#[tokio::test]
async fn an_explicitly_cancelled_permission_answers_cancelled() {
    let (_client, mut events, mut agent) = connect();
    agent.send_line(PERMISSION_LINE).await;
    let AgentEvent::PermissionRequest { responder, .. } = next_event(&mut events).await else {
        panic!("expected a permission request");
    };
    responder.respond(Outcome::Cancelled);
    let answer = agent.recv().await;
    assert_eq!(answer["result"], json!({"outcome": {"outcome": "cancelled"}}));
}

#[tokio::test]
async fn a_dropped_permission_responder_answers_cancelled() {
    let (_client, mut events, mut agent) = connect();
    agent.send_line(PERMISSION_LINE).await;
    let event = next_event(&mut events).await;
    assert!(matches!(event, AgentEvent::PermissionRequest { .. }), "{event:?}");
    drop(event);
    let answer = agent.recv().await;
    assert_eq!(answer["id"], "perm-1");
    assert_eq!(answer["result"], json!({"outcome": {"outcome": "cancelled"}}));
}

#[tokio::test]
async fn without_an_event_receiver_permissions_are_cancelled() {
    let (_client, events, mut agent) = connect();
    drop(events);
    agent.send_line(PERMISSION_LINE).await;
    let answer = agent.recv().await;
    assert_eq!(answer["result"], json!({"outcome": {"outcome": "cancelled"}}));
}

#[tokio::test]
async fn read_text_file_is_delivered_and_answered() {
    let (_client, mut events, mut agent) = connect();
    agent
        .request(
            json!(11),
            "fs/read_text_file",
            json!({"sessionId": "sess-1", "path": "/w/a.txt", "line": 2, "limit": 10}),
        )
        .await;
    let AgentEvent::ReadTextFile { session_id, path, line, limit, responder } =
        next_event(&mut events).await
    else {
        panic!("expected a read request");
    };
    assert_eq!(
        (session_id.as_str(), path.as_str(), line, limit),
        ("sess-1", "/w/a.txt", Some(2), Some(10))
    );
    responder.respond(Ok("two\nthree".into()));
    let answer = agent.recv().await;
    assert_eq!(answer["id"], 11);
    assert_eq!(answer["result"], json!({"content": "two\nthree"}));
}

#[tokio::test]
async fn write_text_file_errors_and_drops_are_answered_as_errors() {
    let (_client, mut events, mut agent) = connect();
    let params = json!({"sessionId": "sess-1", "path": "/etc/passwd", "content": "x"});
    agent.request(json!(12), "fs/write_text_file", params.clone()).await;
    let AgentEvent::WriteTextFile { path, content, responder, .. } = next_event(&mut events).await
    else {
        panic!("expected a write request");
    };
    assert_eq!((path.as_str(), content.as_str()), ("/etc/passwd", "x"));
    responder.respond(Err((-32002, "outside the session directory".into())));
    let answer = agent.recv().await;
    assert_eq!(answer["id"], 12);
    assert_eq!(answer["error"]["code"], -32002);
    assert_eq!(answer["error"]["message"], "outside the session directory");

    agent.request(json!(13), "fs/write_text_file", params).await;
    drop(next_event(&mut events).await);
    let answer = agent.recv().await;
    assert_eq!(answer["id"], 13);
    assert_eq!(answer["error"]["code"], -32603);

    agent
        .request(
            json!(14),
            "fs/write_text_file",
            json!({"sessionId": "s", "path": "/w/ok", "content": ""}),
        )
        .await;
    let AgentEvent::WriteTextFile { responder, .. } = next_event(&mut events).await else {
        panic!("expected a write request");
    };
    responder.respond(Ok(()));
    let answer = agent.recv().await;
    assert_eq!(answer["id"], 14);
    assert_eq!(answer["result"], json!({}));
}

/// Issue 19: `terminal/*` calls become typed events answered with ACP's shapes.
#[tokio::test]
async fn i19_a1_terminal_calls_are_typed_events_answered_in_acp_shape() {
    use kandev_acp::{TerminalAnswer, TerminalExitStatus, TerminalRequest};
    let (_client, mut events, mut agent) = connect();
    agent
        .request(
            json!(1),
            "terminal/create",
            json!({"sessionId": "s", "command": "sh", "args": ["-c", "echo hi"],
                "env": [{"name": "A", "value": "1"}], "cwd": "/w/sub", "outputByteLimit": 10}),
        )
        .await;
    let AgentEvent::Terminal { session_id, request, responder } = next_event(&mut events).await
    else {
        panic!("expected a terminal request");
    };
    assert_eq!(session_id, "s");
    assert_eq!(
        request,
        TerminalRequest::Create {
            command: "sh".into(),
            args: vec!["-c".into(), "echo hi".into()],
            env: vec![("A".into(), "1".into())],
            cwd: Some("/w/sub".into()),
            output_byte_limit: Some(10),
        }
    );
    responder.respond(Ok(TerminalAnswer::Created { terminal_id: "t1".into() }));
    assert_eq!(agent.recv().await["result"], json!({"terminalId": "t1"}));

    agent.request(json!(2), "terminal/output", json!({"sessionId": "s", "terminalId": "t1"})).await;
    let AgentEvent::Terminal { request, responder, .. } = next_event(&mut events).await else {
        panic!("expected a terminal request");
    };
    assert_eq!(request, TerminalRequest::Output { terminal_id: "t1".into() });
    let exit = TerminalExitStatus { exit_code: Some(3), signal: None };
    responder.respond(Ok(TerminalAnswer::Output {
        output: "hi\n".into(),
        truncated: false,
        exit_status: Some(exit),
    }));
    assert_eq!(
        agent.recv().await["result"],
        json!({"output": "hi\n", "truncated": false, "exitStatus": {"exitCode": 3, "signal": null}})
    );

    for (id, method) in
        [(3, "terminal/wait_for_exit"), (4, "terminal/kill"), (5, "terminal/release")]
    {
        agent.request(json!(id), method, json!({"sessionId": "s", "terminalId": "t1"})).await;
        let AgentEvent::Terminal { responder, .. } = next_event(&mut events).await else {
            panic!("expected a terminal request for {method}");
        };
        drop(responder);
        assert_eq!(
            agent.recv().await["error"]["code"],
            -32603,
            "{method}: dropped answers an error"
        );
    }
    agent.request(json!(6), "terminal/output", json!({"sessionId": "s"})).await;
    assert_eq!(agent.recv().await["error"]["code"], -32602, "a missing terminal id is refused");
}
