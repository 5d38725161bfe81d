//! Issue 17, acceptance 2: an agent asks its developer over MCP (`ask_user`). The question is
//! answered from the API, cancelled with the turn, expired by a restart; it makes the task need
//! its developer and is a notification record; text streamed before it stays before it.

use crate::common;

use common::logs::captured_logs;
use common::mcp::{Setup, mcp_said, script, session_ws, setup};
use common::{TestServer, of_kind};
use kandev_server::ServerConfig;
use serde_json::{Value, json};

/// Sends a script that asks a question; returns the question once it is announced, with a
/// WebSocket on the session's topic.
async fn ask(s: &Setup, args: &str) -> (common::Ws, Value) {
    let mut ws = session_ws(&s.server, None, &s.session_id).await;
    let content = script(&[format!("mcp kandev ask_user {args}")]);
    let sent =
        s.server.call("message.add", json!({"session_id": s.session_id, "content": content})).await;
    assert_eq!(sent["status"], "sent");
    let asked = ws.notification("session.question.asked").await;
    (ws, asked["payload"]["question"].clone())
}

/// Issue 14 scope (needs-you) with issue 17's questions: a pending question makes the task
/// need its developer, and answering it ends that.
#[tokio::test]
async fn i14_a_pending_question_makes_the_task_need_you_until_answered() {
    let s = setup(ServerConfig::default()).await;
    let (mut ws, question) = ask(&s, r#"{"question":"Ship it?","options":["yes","no"]}"#).await;
    let task = s.server.call("task.get", json!({"id": s.task_id})).await;
    assert_eq!(task["task"]["needs_you"], "question", "{task}");
    s.server.call("question.answer", json!({"id": question["id"], "answer": "yes"})).await;
    ws.notification("session.turn.completed").await;
    let task = s.server.call("task.get", json!({"id": s.task_id})).await;
    assert_eq!(task["task"]["needs_you"], Value::Null, "{task}");
}

/// Issue 18 scope 5: an `ask_user` question is a durable notification record (for the
/// browser, webhooks and ntfy) carrying the seq of `session.question.asked`.
#[tokio::test]
async fn i18_an_ask_user_question_is_a_notification_record_with_the_seq_of_its_event() {
    let s = setup(ServerConfig::default()).await;
    let mut ws = session_ws(&s.server, None, &s.session_id).await;
    let content =
        script(&[r#"mcp kandev ask_user {"question":"Ship it?\nreally","options":["yes","no"]}"#
            .to_owned()]);
    s.server.call("message.add", json!({"session_id": s.session_id, "content": content})).await;
    let asked = ws.notification("session.question.asked").await;
    let list = s.server.call("notification.list", json!({})).await;
    let records: Vec<&Value> = list["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "question_asked")
        .collect();
    assert_eq!(records.len(), 1, "{list}");
    let record = records[0];
    assert_eq!(record["seq"], asked["seq"], "the seq of session.question.asked: {record}");
    assert_eq!(record["session_id"], s.session_id.as_str());
    assert!(record["title"].as_str().unwrap().ends_with(": the agent asks: Ship it?"), "{record}");
    assert_eq!(record["data"]["options"], json!(["yes", "no"]));
    assert_eq!(record["data"]["question_id"], asked["payload"]["question"]["id"]);
}

#[tokio::test]
async fn i17_a2_an_answer_from_the_api_reaches_the_agent_once() {
    let s = setup(ServerConfig::default()).await;
    let (mut ws, question) =
        ask(&s, r#"{"question":"Which color?","options":["red","blue"]}"#).await;
    assert_eq!(question["status"], "pending");
    assert_eq!(question["options"], json!(["red", "blue"]));
    let listed = s.server.call("question.list", json!({"session_id": s.session_id})).await;
    assert_eq!(listed["questions"][0]["question"], "Which color?", "durable: {listed}");
    let (status, body) =
        s.server.post("question.answer", json!({"id": question["id"], "answer": "green"})).await;
    assert_eq!(status, 422, "an answer outside the options is refused: {body}");
    let answered =
        s.server.call("question.answer", json!({"id": question["id"], "answer": "blue"})).await;
    assert_eq!(answered["question"]["status"], "answered");
    ws.notification("session.turn.completed").await;
    let said = mcp_said(&s.server.messages(&s.session_id).await);
    assert_eq!(said, [r#"mcp ask_user ok: {"answer":"blue"}"#], "the tool call got the answer");
    let (status, body) =
        s.server.post("question.answer", json!({"id": question["id"], "answer": "red"})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "ALREADY_RESOLVED");
}

#[tokio::test]
async fn i17_a2_a_turn_cancel_cancels_the_question_and_the_call() {
    let s = setup(ServerConfig::default()).await;
    let (mut ws, question) = ask(&s, r#"{"question":"Proceed?"}"#).await;
    s.server.call("agent.cancel", json!({"session_id": s.session_id})).await;
    let resolved = ws.notification("session.question.resolved").await;
    assert_eq!(resolved["payload"]["question"]["status"], "cancelled");
    ws.notification("session.turn.completed").await;
    let (status, body) =
        s.server.post("question.answer", json!({"id": question["id"], "answer": "yes"})).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("ALREADY_RESOLVED")), "{body}");
}

#[tokio::test]
async fn i17_a2_a_pending_question_expires_when_the_server_restarts() {
    let s = setup(ServerConfig::default()).await;
    let (_ws, question) = ask(&s, r#"{"question":"Still there?"}"#).await;
    let session_id = s.session_id.clone();
    let dir = s.server.stop().await;
    let server = TestServer::start_with(ServerConfig::default(), dir).await;
    let listed = server.call("question.list", json!({"session_id": session_id})).await;
    assert_eq!(listed["questions"][0]["id"], question["id"]);
    assert_eq!(listed["questions"][0]["status"], "expired", "{listed}");
    let (status, body) =
        server.post("question.answer", json!({"id": question["id"], "answer": "yes"})).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("ALREADY_RESOLVED")), "{body}");
}

/// Waits (bounded) until the server logged `count` authenticated MCP requests.
async fn wait_mcp_requests(count: usize) {
    let logs = captured_logs();
    let what = "the agent's MCP requests to reach the server";
    kandev_testkit::eventually_within(common::WAIT, what, async || {
        logs.lock().unwrap().matches("MCP call").count() >= count
    })
    .await;
}

/// Issue 15 review: streamed text is written by the group writer without the session
/// waiting for it, the question by the MCP call; the text the agent streamed before asking
/// is still stored and told before the question, so the transcript keeps the agent's order.
/// The test holds the store's write gate from the first told chunk until the question's
/// call arrived, so the rest of the text is still queued when it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i15_d2_text_streamed_before_an_ask_user_question_is_stored_and_told_before_it() {
    captured_logs();
    let s = setup(ServerConfig::default()).await;
    let mut ws = session_ws(&s.server, None, &s.session_id).await;
    let before = s.server.messages(&s.session_id).await.len();
    let content = script(&[
        "stream 400 100 every 1".to_owned(),
        r#"mcp kandev ask_user {"question":"Go on?"}"#.to_owned(),
    ]);
    s.server.call("message.add", json!({"session_id": s.session_id, "content": content})).await;
    let mut told = 0;
    let asked = loop {
        let frame = ws.next().await;
        let payload = &frame["payload"];
        match frame["action"].as_str() {
            Some("session.question.asked") => break frame,
            Some("session.message.added") if payload["message"]["kind"] == "agent" => {
                told += payload["message"]["content"].as_str().unwrap().len();
                // The first chunk is stored: hold the writer back until the question came.
                let held = s.server.store.begin_write().await.unwrap();
                wait_mcp_requests(3).await; // initialize, initialized, tools/call
                drop(held);
            }
            Some("session.message.updated") if payload["kind"] == "agent" => {
                told += payload["delta"].as_str().unwrap().len();
            }
            _ => {}
        }
    };
    assert_eq!(told, 400 * 100, "all the text streamed before the question was told before it");
    let messages = s.server.messages(&s.session_id).await;
    let agent = of_kind(&messages[before..], "agent");
    let streamed = agent[0]["content"].as_str().unwrap();
    assert_eq!(streamed.len(), 400 * 100, "and stored");
    assert!(agent[0]["seq"].as_i64().unwrap() < asked["seq"].as_i64().unwrap());
    let question = &asked["payload"]["question"];
    s.server.call("question.answer", json!({"id": question["id"], "answer": "yes"})).await;
    ws.notification("session.turn.completed").await;
}
