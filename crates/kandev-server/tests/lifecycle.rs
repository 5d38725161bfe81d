//! Issue 4: the session lifecycle rules of docs/lifecycle.md, each test named after its rule,
//! driving the engine over the API with the mock agent and its failure flags.

use crate::common;

use std::time::{Duration, Instant};

use common::{TestServer, WAIT, of_kind, step_id};
use kandev_mock_agent::{CallKind, CallOutcome};
use serde_json::{Value, json};

async fn state(server: &TestServer, session: &str) -> Value {
    server.call("session.get", json!({"id": session})).await["session"].clone()
}

async fn mock_profile(server: &TestServer, flags: &[&str]) -> String {
    server.profile(json!({"name": format!("Mock {flags:?}"), "kind": "mock", "args": flags})).await
}

/// A task in Backlog with a session that is `CREATED` (not started).
async fn created_session(server: &TestServer, profile: Option<&str>) -> String {
    let (_, workflow) = server.kanban().await;
    let task = server
        .call("task.create", json!({"workflow_id": workflow["id"], "title": "t", "step_id": step_id(&workflow, "Backlog"), "agent_profile_id": profile}))
        .await;
    // A launch with a prompt starts the agent; without, it starts too — so create the
    // session through a launch and stop it, unless a CREATED session is needed (below).
    task["task"]["id"].as_str().unwrap().to_owned()
}

fn statuses(messages: &[Value]) -> Vec<String> {
    of_kind(messages, "status").iter().map(|m| m["content"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn l02_prompt_admission_depends_on_state() {
    let server = TestServer::start().await;
    let task = created_session(&server, None).await;
    // CREATED: a prompt starts the agent first.
    let launched = server.call("session.launch", json!({"task_id": task, "prompt": "first"})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    let messages = server.messages(&session).await;
    assert_eq!(of_kind(&messages, "agent").last().unwrap()["content"], "echo: first");
    // RUNNING: queued, or BUSY when the caller asks not to queue.
    server
        .call(
            "message.add",
            json!({"session_id": session, "content": "#!mock\nsleep 400\nsay slow"}),
        )
        .await;
    let queued =
        server.call("message.add", json!({"session_id": session, "content": "later"})).await;
    assert_eq!(queued["status"], "queued");
    let (status, body) = server
        .post("message.add", json!({"session_id": session, "content": "now", "queue": false}))
        .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("BUSY")));
}

#[tokio::test]
async fn l02_failed_sessions_need_an_explicit_resume() {
    let server = TestServer::start().await;
    let profile = mock_profile(&server, &["--fail-new", "internal"]).await;
    let task = created_session(&server, Some(&profile)).await;
    let launched = server.call("session.launch", json!({"task_id": task})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    let failed = server.wait_state(&session, "FAILED").await;
    assert_eq!(failed["last_error"]["code"], "agent_start_failed");
    let (status, body) =
        server.post("message.add", json!({"session_id": session, "content": "hi"})).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("CONFLICT")));
    assert!(body["message"].as_str().unwrap().contains("resume"));
    server.call("session.resume", json!({"id": session, "mode": "fresh"})).await;
    server.wait_state(&session, "FAILED").await;
    assert_eq!(server.counters().count(CallKind::New), 2, "the resume tried again");
}

#[tokio::test]
async fn l03_a_client_message_id_is_recorded_once() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let body = json!({"session_id": session, "content": "hello", "client_message_id": "c-1"});
    let first = server.call("message.add", body.clone()).await;
    let retry = server.call("message.add", body).await;
    assert_eq!(first["status"], "sent");
    assert_eq!(retry["status"], "duplicate");
    assert_eq!(retry["message"]["id"], first["message"]["id"]);
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    let users = of_kind(&server.messages(&session).await, "user").len();
    assert_eq!(users, 1);
    assert_eq!(server.counters().prompt(), 1, "sent to the agent once");
}

#[tokio::test]
async fn l04_a_failed_send_closes_the_turn_and_records_the_error() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let messages = server.turn(&session, "#!mock\nerror -32603 the model is on fire").await;
    let now = state(&server, &session).await;
    assert_eq!(now["state"], "WAITING_FOR_INPUT");
    assert_eq!(now["last_error"]["code"], "prompt_failed");
    assert!(now["last_error"]["message"].as_str().unwrap().contains("the model is on fire"));
    assert_eq!(of_kind(&messages, "error").len(), 1, "shown in the transcript");
}

#[tokio::test]
async fn l05_turn_end_returns_to_waiting_and_drains_the_queue() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    server
        .call(
            "message.add",
            json!({"session_id": session, "content": "#!mock\nsleep 200\nsay one"}),
        )
        .await;
    for text in ["two", "three"] {
        assert_eq!(
            server.call("message.add", json!({"session_id": session, "content": text})).await["status"],
            "queued"
        );
    }
    for _ in 0..3 {
        ws.notification("session.turn.completed").await;
    }
    let users: Vec<String> = of_kind(&server.messages(&session).await, "user")
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(&users[1..], ["two", "three"], "FIFO, one turn each");
    assert!(
        server.call("message.queue.list", json!({"session_id": session})).await["queue"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn l06_boot_ready_waits_for_input_without_a_turn() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let messages = server.messages(&session).await;
    assert!(messages.is_empty(), "no turn ran: {messages:?}");
    assert_eq!(server.counters().prompt(), 0);
}

#[tokio::test]
async fn l07_the_queue_survives_a_server_restart() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server
        .call("message.queue.auto_run.set", json!({"session_id": session, "enabled": false}))
        .await;
    for text in ["a", "b"] {
        server.call("message.queue.add", json!({"session_id": session, "content": text})).await;
    }
    let dir = server.stop().await;
    let server = TestServer::start_with(Default::default(), dir).await;
    let queue = server.call("message.queue.list", json!({"session_id": session})).await;
    let contents: Vec<&str> =
        queue["queue"].as_array().unwrap().iter().map(|q| q["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["a", "b"]);
    assert_eq!(state(&server, &session).await["auto_run"], false, "auto_run is persisted");
}

#[tokio::test]
async fn l08_the_queue_is_capped() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server
        .call("message.queue.auto_run.set", json!({"session_id": session, "enabled": false}))
        .await;
    for i in 0..10 {
        server
            .call("message.queue.add", json!({"session_id": session, "content": format!("m{i}")}))
            .await;
    }
    let (status, body) = server
        .post("message.queue.add", json!({"session_id": session, "content": "one too many"}))
        .await;
    assert_eq!((status, body["code"].as_str()), (429, Some("QUEUE_FULL")));
}

#[tokio::test]
async fn l09_with_auto_run_off_entries_wait_for_an_explicit_drain() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server
        .call("message.queue.auto_run.set", json!({"session_id": session, "enabled": false}))
        .await;
    server.call("message.queue.add", json!({"session_id": session, "content": "waiting"})).await;
    assert!(of_kind(&server.messages(&session).await, "user").is_empty(), "nothing ran");
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    server.call("message.queue.drain", json!({"session_id": session})).await;
    ws.notification("session.turn.completed").await;
    assert_eq!(of_kind(&server.messages(&session).await, "agent")[0]["content"], "echo: waiting");
}

#[tokio::test]
async fn l10_a_user_cancel_with_entries_pending_turns_auto_run_off() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server
        .call(
            "message.add",
            json!({"session_id": session, "content": "#!mock\nsleep 5000\nsay never"}),
        )
        .await;
    server.call("message.add", json!({"session_id": session, "content": "queued"})).await;
    server.call("agent.cancel", json!({"session_id": session})).await;
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    let now = state(&server, &session).await;
    assert_eq!(now["auto_run"], false);
    let queue = server.call("message.queue.list", json!({"session_id": session})).await;
    assert_eq!(
        queue["queue"].as_array().unwrap().len(),
        1,
        "the entry did not start behind the user's back"
    );
}

#[tokio::test]
async fn l12_cancel_sends_session_cancel_and_notes_it_once() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    server
        .call(
            "message.add",
            json!({"session_id": session, "content": "#!mock\nsleep 5000\nsay never"}),
        )
        .await;
    ws.notification("session.turn.started").await;
    server.call("agent.cancel", json!({"session_id": session})).await;
    let done = ws.notification("session.turn.completed").await;
    assert_eq!(done["payload"]["stop_reason"], "cancelled");
    let messages = server.messages(&session).await;
    assert_eq!(statuses(&messages), ["turn cancelled"]);
    assert_eq!(server.counters().cancel(), 1);
    assert_eq!(state(&server, &session).await["state"], "WAITING_FOR_INPUT");
}

#[tokio::test]
async fn l13_a_hung_cancel_escalates_and_the_next_prompt_works() {
    let server = TestServer::start().await; // cancel bound 500 ms in tests
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    server.call("message.add", json!({"session_id": session, "content": "#!mock\nhang"})).await;
    ws.notification("session.turn.started").await;
    let started = Instant::now();
    server.call("agent.cancel", json!({"session_id": session})).await;
    let done = ws.notification("session.turn.completed").await;
    assert_eq!(done["payload"]["stop_reason"], "cancelled");
    assert!(started.elapsed() < Duration::from_secs(5), "within the escalation bound");
    let notes = statuses(&server.messages(&session).await);
    assert!(notes.iter().any(|n| n.contains("did not stop in time")), "{notes:?}");
    let again = server.turn(&session, "still there?").await;
    assert_eq!(of_kind(&again, "agent").last().unwrap()["content"], "echo: still there?");
}

#[tokio::test]
async fn l14_cancel_without_a_live_execution_succeeds() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server.call("session.stop", json!({"id": session})).await;
    let cancelled = server.call("agent.cancel", json!({"session_id": session})).await;
    assert_eq!(cancelled["session"]["state"], "WAITING_FOR_INPUT");
}

#[tokio::test]
async fn l15_concurrent_cancels_join_one_operation() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    server
        .call(
            "message.add",
            json!({"session_id": session, "content": "#!mock\nsleep 5000\nsay never"}),
        )
        .await;
    ws.notification("session.turn.started").await;
    let body = json!({"session_id": session});
    let (a, b, c) = tokio::join!(
        server.post("agent.cancel", body.clone()),
        server.post("agent.cancel", body.clone()),
        server.post("agent.cancel", body)
    );
    assert_eq!((a.0, b.0, c.0), (200, 200, 200));
    ws.notification("session.turn.completed").await;
    assert_eq!(server.counters().cancel(), 1, "one ACP cancel");
    assert_eq!(
        statuses(&server.messages(&session).await),
        ["turn cancelled"],
        "one status message"
    );
}

#[tokio::test]
async fn l16_stop_leaves_the_session_resumable() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server.turn(&session, "remember me").await;
    let stopped = server.call("session.stop", json!({"id": session})).await;
    assert_eq!(stopped["session"]["state"], "WAITING_FOR_INPUT");
    let again = server.turn(&session, "back?").await;
    assert_eq!(of_kind(&again, "agent").last().unwrap()["content"], "echo: back?");
    assert_eq!(server.counters().succeeded(CallKind::Load), 1, "resumed with session/load");
}

#[tokio::test]
async fn l17_restart_reloads_the_same_conversation_and_reapplies_the_mode() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server.call("session.set_mode", json!({"id": session, "mode_id": "plan"})).await;
    let before = state(&server, &session).await["acp_session_id"].clone();
    server.call("session.resume", json!({"id": session, "mode": "load"})).await;
    let after = server.wait_state(&session, "WAITING_FOR_INPUT").await;
    assert_eq!(after["acp_session_id"], before, "same conversation");
    assert_eq!(after["session_mode"], "plan");
    let counters = server.counters();
    assert_eq!(counters.succeeded(CallKind::Load), 1);
    assert_eq!(
        counters.count(CallKind::SetMode),
        2,
        "set by the user, reapplied after the restart"
    );
}

#[tokio::test]
async fn l28_a_prompt_after_stop_resumes_lazily_with_session_load() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server.call("session.stop", json!({"id": session})).await;
    assert_eq!(server.counters().count(CallKind::Load), 0, "nothing launched until a prompt");
    server.turn(&session, "again").await;
    let counters = server.counters();
    assert_eq!((counters.count(CallKind::New), counters.succeeded(CallKind::Load)), (1, 1));
    let load = counters.calls().iter().find(|c| c.kind == CallKind::Load).unwrap();
    let prompt = counters.calls().iter().rfind(|c| c.kind == CallKind::Prompt).unwrap();
    assert_eq!(
        load.session_id, prompt.session_id,
        "the prompt went into the reloaded conversation"
    );
}

#[tokio::test]
async fn l29_without_load_capability_a_new_conversation_is_started_and_said() {
    let server = TestServer::start().await;
    let profile = mock_profile(&server, &["--no-load-session"]).await;
    let (_, session) = server.session(Some(&profile)).await;
    server.turn(&session, "first").await;
    server.call("session.stop", json!({"id": session})).await;
    let messages = server.turn(&session, "second").await;
    let counters = server.counters();
    assert_eq!((counters.count(CallKind::Load), counters.count(CallKind::New)), (0, 2));
    assert!(statuses(&messages).iter().any(|s| s.contains("new conversation")), "the user is told");
    assert_eq!(of_kind(&messages, "user").len(), 2, "the transcript stays visible");
}

/// Runs a session with `--fail-load kind`: first turn, stop, then a prompt that resumes.
async fn resume_with_failing_load(kind: &str) -> (TestServer, String, String) {
    let server = TestServer::start().await;
    let profile = mock_profile(&server, &["--fail-load", kind]).await;
    let (_, session) = server.session(Some(&profile)).await;
    server.turn(&session, "first").await;
    let token = state(&server, &session).await["acp_session_id"].as_str().unwrap().to_owned();
    server.call("session.stop", json!({"id": session})).await;
    server.call("message.add", json!({"session_id": session, "content": "after stop"})).await;
    (server, session, token)
}

#[tokio::test]
async fn l30_method_not_found_and_unknown_session_fall_back_to_a_new_conversation() {
    for kind in ["method-not-found", "unknown-session"] {
        let (server, session, token) = resume_with_failing_load(kind).await;
        server.wait_turns(&session, 2).await;
        let counters = server.counters();
        assert_eq!(
            (counters.failed(CallKind::Load), counters.count(CallKind::New)),
            (1, 2),
            "{kind}"
        );
        let now = state(&server, &session).await;
        assert_ne!(now["acp_session_id"], token.as_str(), "{kind}: a new conversation");
    }
}

#[tokio::test]
async fn l30_auth_internal_and_timeout_never_fall_back_and_keep_the_token() {
    for kind in ["auth", "internal", "timeout"] {
        let (server, session, token) = resume_with_failing_load(kind).await;
        let now = server.wait_last_error(&session).await;
        let deadline = Instant::now() + WAIT;
        assert!(!now["last_error"].is_null(), "{kind}: the resume failed visibly");
        let counters = server.counters();
        assert_eq!(counters.count(CallKind::New), 1, "{kind}: no fallback to session/new");
        assert_eq!(counters.count(CallKind::Load), 1, "{kind}");
        // A retry loads the same id (rule 30), and the token never changed (rule 31).
        server.call("message.add", json!({"session_id": session, "content": "retry"})).await;
        let loads: Vec<Option<String>> = loop {
            let counters = server.counters();
            let loads: Vec<_> = counters
                .calls()
                .iter()
                .filter(|c| c.kind == CallKind::Load)
                .map(|c| c.session_id.clone())
                .collect();
            if loads.len() == 2 || Instant::now() > deadline {
                break loads;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!(loads, vec![Some(token.clone()), Some(token.clone())], "{kind}");
        let counters = server.counters();
        assert!(
            counters
                .calls()
                .iter()
                .filter(|c| c.kind == CallKind::Load)
                .all(|c| c.outcome != CallOutcome::Ok),
            "{kind}"
        );
    }
}

#[tokio::test]
async fn l31_a_failed_fresh_start_keeps_the_old_token() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server.turn(&session, "hello").await;
    let token = state(&server, &session).await["acp_session_id"].clone();
    // Make the session's profile refuse session/new, then ask for a fresh conversation.
    let profile = state(&server, &session).await["agent_profile_id"].clone();
    server
        .call("agent.profile.update", json!({"id": profile, "args": ["--fail-new", "internal"]}))
        .await;
    server.call("session.resume", json!({"id": session, "mode": "fresh"})).await;
    let now = server.wait_last_error(&session).await;
    assert_eq!(now["last_error"]["code"], "agent_start_failed");
    assert_eq!(server.counters().failed(CallKind::New), 1);
    assert_eq!(now["resume_token"], token, "no failure blanked the token");
    // And the next prompt loads the old conversation again.
    server.call("agent.profile.update", json!({"id": profile, "args": []})).await;
    server.turn(&session, "still the same conversation?").await;
    assert_eq!(state(&server, &session).await["acp_session_id"], token);
}

#[tokio::test]
async fn l32_cancel_during_a_resume_stops_that_attempt_and_sends_no_prompt() {
    let server = TestServer::start().await;
    let profile = mock_profile(&server, &["--startup-delay-ms", "3000"]).await;
    let task = created_session(&server, Some(&profile)).await;
    let launched =
        server.call("session.launch", json!({"task_id": task, "prompt": "do not send me"})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    assert_eq!(state(&server, &session).await["state"], "STARTING");
    server.call("agent.cancel", json!({"session_id": session})).await;
    let now = state(&server, &session).await;
    assert_eq!(now["state"], "WAITING_FOR_INPUT");
    assert!(statuses(&server.messages(&session).await).contains(&"start cancelled".to_owned()));
    assert_eq!(server.counters().prompt(), 0, "no prompt was sent");
}

#[tokio::test]
async fn l33_a_client_disconnecting_does_not_cancel_its_turn() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    let id = ws
        .request(
            "message.add",
            json!({"session_id": session, "content": "#!mock\nsleep 300\nsay finished anyway"}),
        )
        .await;
    ws.reply(&id).await;
    drop(ws);
    let mut watcher = server.ws().await;
    let topic = format!("session:{session}");
    let id =
        watcher.request("subscribe", json!({"topics": [topic], "since": {topic.clone(): 0}})).await;
    let (replayed, _) = watcher.reply(&id).await;
    if !replayed.iter().any(|f| f["action"] == "session.turn.completed") {
        watcher.notification("session.turn.completed").await;
    }
    assert_eq!(
        of_kind(&server.messages(&session).await, "agent").last().unwrap()["content"],
        "finished anyway"
    );
}

#[tokio::test]
async fn l34_a_resume_failure_is_shown_once_with_its_epoch() {
    let (server, session, _) = resume_with_failing_load("auth").await;
    let now = server.wait_last_error(&session).await;
    assert_eq!(now["last_error"]["code"], "agent_auth_required");
    assert_eq!(now["last_error"]["details"]["epoch"], now["epoch"], "correlated to its attempt");
    let errors = of_kind(&server.messages(&session).await, "error").len();
    assert_eq!(errors, 1, "shown once");
}

#[tokio::test]
async fn l35_delete_succeeds_quickly_whatever_the_agent_is_doing() {
    let server = TestServer::start().await;
    let hang_on_cancel = mock_profile(&server, &["--hang-on-cancel"]).await;
    let slow_start = mock_profile(&server, &["--startup-delay-ms", "10000"]).await;
    let cases: [(Option<&str>, Option<&str>); 5] = [
        (None, None),
        (None, Some("#!mock\nhang")),
        (Some(&hang_on_cancel), Some("#!mock\nsleep 60000")),
        (None, Some("#!mock\nask_permission wait for me")),
        (Some(&slow_start), None),
    ];
    for (profile, script) in cases {
        let task = created_session(&server, profile).await;
        let launched =
            server.call("session.launch", json!({"task_id": task, "prompt": script})).await;
        let session = launched["session"]["id"].as_str().unwrap().to_owned();
        if script.is_some() {
            server.wait_state(&session, "RUNNING").await;
        }
        let started = Instant::now();
        server.call("session.delete", json!({"id": session})).await;
        assert!(started.elapsed() < Duration::from_secs(15), "{script:?}");
        let (status, _) = server.post("session.get", json!({"id": session})).await;
        assert_eq!(status, 404);
        let (status, _) = server.post("message.list", json!({"session_id": session})).await;
        assert_eq!(status, 404, "messages are gone with it");
    }
}

#[tokio::test]
async fn l40_a_quiet_turn_gets_one_stall_notice_and_a_silent_one_fails() {
    let server = TestServer::start_tuned(Default::default(), tempfile::tempdir().unwrap(), |c| {
        c.stall_after = Duration::from_millis(300);
    })
    .await;
    let (_, session) = server.session(None).await;
    let messages = server.turn(&session, "#!mock\nsay starting\nsleep 1000\nsay done").await;
    let notes: Vec<String> =
        statuses(&messages).into_iter().filter(|s| s.contains("no output")).collect();
    assert_eq!(notes.len(), 1, "one notice: {notes:?}");
    assert_eq!(of_kind(&messages, "agent").last().unwrap()["content"], "done", "no state change");

    let messages = server.turn(&session, "#!mock\nhang").await;
    let now = state(&server, &session).await;
    assert_eq!(now["last_error"]["code"], "turn_stalled", "{now}");
    assert!(!of_kind(&messages, "error").is_empty());
}

#[tokio::test]
async fn l41_l42_a_restart_reconciles_running_sessions_and_expires_permissions() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    server
        .call(
            "message.add",
            json!({"session_id": session, "content": "#!mock\nask_permission keep me"}),
        )
        .await;
    ws.notification("session.permission.requested").await;
    let dir = server.stop().await;

    let server = TestServer::start_with(Default::default(), dir).await;
    let now = state(&server, &session).await;
    assert_eq!(now["state"], "WAITING_FOR_INPUT");
    let messages = server.messages(&session).await;
    assert!(
        statuses(&messages).iter().any(|s| s.starts_with("interrupted")),
        "{:?}",
        statuses(&messages)
    );
    assert_eq!(of_kind(&messages, "permission_request")[0]["metadata"]["status"], "expired");
    let again = server.turn(&session, "resume please").await;
    assert_eq!(of_kind(&again, "agent").last().unwrap()["content"], "echo: resume please");
    assert_eq!(server.counters().succeeded(CallKind::Load), 1, "resumed lazily with session/load");
}

/// Rule 46: from the moment a resume is accepted until the agent is ready, the answer and
/// every `session.get` say `STARTING`; then `WAITING_FOR_INPUT`.
#[tokio::test]
async fn l46_resume_of_a_slow_starting_agent_says_starting_until_ready() {
    let server = TestServer::start().await;
    let slow = mock_profile(&server, &["--startup-delay-ms", "1500"]).await;
    let (_, session) = server.session(Some(&slow)).await;
    let initializes = server.counters().count(CallKind::Initialize);
    for mode in ["load", "fresh"] {
        let resumed = server.call("session.resume", json!({"id": session, "mode": mode})).await;
        assert_eq!(resumed["session"]["state"], "STARTING", "{mode}: the answer");
        let mut ws = server.ws().await;
        ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
        let mut seen = vec![];
        loop {
            let now = state(&server, &session).await;
            let current = now["state"].as_str().unwrap().to_owned();
            if seen.last() != Some(&current) {
                seen.push(current.clone());
            }
            if current != "STARTING" {
                break;
            }
            // Wait for the next change of the session rather than polling.
            ws.notification("session.state_changed").await;
        }
        assert_eq!(seen, ["STARTING", "WAITING_FOR_INPUT"], "{mode}");
    }
    assert_eq!(server.counters().count(CallKind::Initialize), initializes + 2);

    // A reset accepted while a lazy resume boots restarts that start on a new conversation:
    // still STARTING until the agent is ready, then the waiting prompt runs.
    server.call("session.stop", json!({"id": session})).await;
    let sent = server.call("message.add", json!({"session_id": session, "content": "hello"})).await;
    assert_eq!(sent["status"], "sent");
    let reset = server.call("session.reset_context", json!({"id": session})).await;
    assert_eq!(reset["session"]["state"], "STARTING");
    server.wait_turns(&session, 1).await;
    let now = server.wait_state(&session, "WAITING_FOR_INPUT").await;
    let counters = server.counters();
    assert_eq!(counters.sessions_prompted_with("hello"), [now["acp_session_id"].as_str().unwrap()]);
    assert_eq!(counters.count(CallKind::Load), 1, "the reset start used session/new");
}

/// Issue 12 finding 9: an idle agent is stopped after the idle timeout (a setting), never
/// during a turn, and the next message resumes its conversation with `session/load`.
#[tokio::test]
async fn i12_f9_an_idle_agent_is_stopped_and_the_next_message_resumes_it() {
    let server = TestServer::start_tuned(Default::default(), tempfile::tempdir().unwrap(), |c| {
        c.idle_timeout = Duration::from_millis(500);
    })
    .await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    // A turn three times longer than the idle timeout is not idleness.
    let script = "#!mock\nsay working\nsleep 1500\nsay still here";
    server.call("message.add", json!({"session_id": session, "content": script})).await;
    let idle_note = loop {
        let frame = ws.notification("session.message.added").await;
        let message = &frame["payload"]["message"];
        if message["content"].as_str().is_some_and(|c| c.contains("without activity")) {
            break message.clone();
        }
    };
    let messages = server.messages(&session).await;
    let reply =
        of_kind(&messages, "agent").into_iter().find(|m| m["content"] == "workingstill here");
    let reply = reply.expect("the long turn ended normally");
    assert!(
        reply["seq"].as_i64() < idle_note["seq"].as_i64(),
        "stopped after the turn, not during it"
    );
    let conversation = state(&server, &session).await;
    assert_eq!(conversation["state"], "WAITING_FOR_INPUT");

    let again = server.turn(&session, "back?").await;
    assert_eq!(of_kind(&again, "agent").last().unwrap()["content"], "echo: back?");
    let counters = server.counters();
    assert_eq!(counters.succeeded(CallKind::Load), 1, "resumed with session/load");
    // Stopped: no live conversation, the token to load kept.
    assert!(conversation["acp_session_id"].is_null(), "{conversation}");
    let token = conversation["resume_token"].as_str().unwrap();
    assert_eq!(counters.prompts_in(token).last(), Some(&"back?"), "in the same conversation");
}
