//! `session/cancel` during sleep and permission waits, and `--hang-on-cancel`.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

mod support;

use kandev_mock_agent::{CallKind, Counters, MockConfig};
use serde_json::json;
use support::{Client, message_texts, script, temp_dir, updates_of};

#[tokio::test]
async fn cancel_during_sleep_ends_the_turn_cancelled_promptly() {
    let dir = temp_dir("cancel-sleep");
    let state = temp_dir("cancel-sleep-state");
    let mut client = Client::with_state(state.path());
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    // A ten-minute sleep: only the cancel can end this turn within the test's wait.
    let id = client.prompt(&session, &script(&["say started", "sleep 600000", "say never"])).await;
    assert_eq!(client.next().await["params"]["update"]["content"]["text"], "started");
    client.cancel(&session).await;
    let (before, answer) = client.until_response(id).await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(answer["result"]["stopReason"], "cancelled");

    // The session takes the next prompt normally.
    let (_, answer) = client.prompt_turn(&session, "next").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.close().await;
    let counters = Counters::read(state.path()).unwrap();
    assert_eq!(counters.cancel(), 1);
    assert_eq!(counters.succeeded(CallKind::Cancel), 1);
    assert_eq!(counters.prompt(), 2);
}

#[tokio::test]
async fn cancel_during_a_permission_wait_ends_the_turn_and_ignores_the_late_answer() {
    let dir = temp_dir("cancel-permission");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    let id = client.prompt(&session, &script(&["ask_permission Push to main", "say never"])).await;
    let request = client.next().await;
    assert_eq!(request["method"], "session/request_permission");
    client.cancel(&session).await;
    client.respond(&request["id"], json!({"outcome": {"outcome": "cancelled"}})).await;
    let (before, answer) = client.until_response(id).await;
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(answer["result"]["stopReason"], "cancelled");
    let (_, answer) = client.prompt_turn(&session, "still alive").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    client.close().await;
}

#[tokio::test]
async fn cancel_as_a_request_is_answered() {
    let dir = temp_dir("cancel-request");
    let mut client = Client::start(MockConfig::default());
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    let (_, answer) = client.call("session/cancel", json!({"sessionId": session})).await;
    assert_eq!(answer["result"], json!({}));
    client.close().await;
}

#[tokio::test(start_paused = true)]
async fn hang_on_cancel_keeps_the_turn_going_to_its_normal_end() {
    let dir = temp_dir("hang-on-cancel");
    let mut client = Client::start(MockConfig { hang_on_cancel: true, ..MockConfig::default() });
    client.initialize().await;
    let session = client.new_session(dir.path()).await;
    let id = client.prompt(&session, &script(&["say started", "sleep 5000", "say done"])).await;
    assert_eq!(client.next().await["params"]["update"]["content"]["text"], "started");
    let cancelled_at = tokio::time::Instant::now();
    client.cancel(&session).await;
    let (before, answer) = client.until_response(id).await;
    assert_eq!(message_texts(&updates_of(&before)), ["done"]);
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert!(cancelled_at.elapsed() >= std::time::Duration::from_millis(4000));
    client.close().await;
}
