//! Issue 3: agent sessions over the API with the mock agent: streamed turns, follow-ups,
//! every update kind as a typed message, permissions, agent faults, file confinement.

use crate::common;

use common::{TestServer, of_kind, step_id};
use serde_json::{Value, json};

#[tokio::test]
async fn a_started_task_streams_its_reply_over_websocket_and_stores_both_turns() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let backlog = step_id(&workflow, "Backlog");
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("workspace:{workspace_id}")]})).await;
    let created = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "Say hello", "step_id": backlog, "start_agent": true}),
        )
        .await;
    let session_id = created["session"]["id"].as_str().unwrap().to_owned();
    let session_created = ws.notification("session.created").await;
    assert_eq!(session_created["payload"]["session"]["id"], session_id.as_str());

    let mut live = server.ws().await;
    let topic = format!("session:{session_id}");
    let id =
        live.request("subscribe", json!({"topics": [topic], "since": {topic.clone(): 0}})).await;
    let (mut frames, _) = live.reply(&id).await;
    loop {
        if frames.iter().any(|f| f["action"] == "session.turn.completed") {
            break;
        }
        frames.push(live.next().await);
    }
    let streamed: String = frames
        .iter()
        .filter(|f| {
            f["action"] == "session.message.added" && f["payload"]["message"]["kind"] == "agent"
        })
        .map(|f| f["payload"]["message"]["content"].as_str().unwrap().to_owned())
        .chain(
            frames
                .iter()
                .filter(|f| f["action"] == "session.message.updated")
                .filter_map(|f| f["payload"]["delta"].as_str().map(str::to_owned)),
        )
        .collect();
    assert_eq!(streamed, "echo: Say hello", "the reply arrived over the WebSocket");

    let messages = server.turn(&session_id, "second question").await;
    let summary: Vec<(String, String)> = messages
        .iter()
        .map(|m| {
            (m["kind"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("user".into(), "Say hello".into()),
            ("agent".into(), "echo: Say hello".into()),
            ("user".into(), "second question".into()),
            ("agent".into(), "echo: second question".into()),
        ]
    );
    let seqs: Vec<i64> = messages.iter().map(|m| m["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let task = server.call("task.get", json!({"id": created["task"]["id"]})).await;
    assert_eq!(task["task"]["primary_session_id"], session_id.as_str());
    assert_eq!(task["task"]["state"], "WAITING_FOR_INPUT");
}

#[tokio::test]
async fn every_update_kind_is_stored_as_its_typed_message() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let script = "#!mock\nthink pondering\nsay part one\nsay ;two\ntool edit Edit main.rs\ntool_done\nplan completed:read code; in_progress:write fix\nusage 1200 200000\nsay done";
    let messages = server.turn(&session, script).await;
    let thought = of_kind(&messages, "thought");
    assert_eq!(thought[0]["content"], "pondering");
    let agent = of_kind(&messages, "agent");
    assert_eq!(agent[0]["content"], "part one;two", "chunks coalesce into one message");
    assert_eq!(agent.last().unwrap()["content"], "done");
    let tool = of_kind(&messages, "tool_call")[0];
    assert_eq!(
        (tool["content"].as_str(), tool["metadata"]["kind"].as_str()),
        (Some("Edit main.rs"), Some("edit"))
    );
    assert_eq!(tool["metadata"]["status"], "completed", "the tool_call_update completed it");
    let plan = of_kind(&messages, "plan")[0];
    let entries = plan["metadata"]["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        (entries[0]["status"].as_str(), entries[0]["content"].as_str()),
        (Some("completed"), Some("read code"))
    );
    let usage = of_kind(&messages, "usage")[0];
    assert_eq!(
        (usage["metadata"]["used"].as_u64(), usage["metadata"]["size"].as_u64()),
        (Some(1200), Some(200000))
    );
    let got = server.call("session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["context_window"]["used"], 1200);
}

async fn permission_request(server: &TestServer, session: &str) -> Value {
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let sent = server
        .call("message.add", json!({"session_id": session, "content": "#!mock\nask_permission Delete the build folder\nsay after"}))
        .await;
    assert_eq!(sent["status"], "sent");
    ws.notification("session.permission.requested").await["payload"].clone()
}

#[tokio::test]
async fn permissions_are_stored_answered_once_and_audited() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let requested = permission_request(&server, &session).await;
    let request_id = requested["request_id"].as_str().unwrap();
    let message = &requested["message"];
    assert_eq!(message["kind"], "permission_request");
    assert_eq!(message["metadata"]["status"], "pending");
    let options: Vec<&str> = message["metadata"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["option_id"].as_str().unwrap())
        .collect();
    assert!(!options.is_empty());
    let stored = server.messages(&session).await;
    assert_eq!(
        of_kind(&stored, "permission_request")[0]["metadata"]["request_id"],
        request_id,
        "persisted before the answer"
    );
    let session_state = server.call("session.get", json!({"id": session})).await;
    assert_eq!(session_state["session"]["state"], "RUNNING", "waiting for the user");

    let (status, body) = server
        .post(
            "permission.respond",
            json!({"session_id": session, "request_id": request_id, "option_id": "not-offered"}),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")));

    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let answered = server
        .call(
            "permission.respond",
            json!({"session_id": session, "request_id": request_id, "option_id": options[0]}),
        )
        .await;
    assert_eq!(answered["message"]["metadata"]["status"], "approved");
    ws.notification("session.turn.completed").await;
    let after = server.messages(&session).await;
    let said: Vec<&str> =
        of_kind(&after, "agent").iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert!(said.iter().any(|t| t.contains("after")), "the agent continued: {said:?}");

    let (status, body) = server
        .post(
            "permission.respond",
            json!({"session_id": session, "request_id": request_id, "option_id": options[0]}),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("ALREADY_RESOLVED")));
    let (status, body) = server
        .post(
            "permission.respond",
            json!({"session_id": session, "request_id": "nope", "option_id": options[0]}),
        )
        .await;
    assert_eq!((status, body["code"].as_str()), (404, Some("NOT_FOUND")));
}

#[tokio::test]
async fn auto_approve_profiles_answer_by_themselves_and_say_so() {
    let server = TestServer::start().await;
    let profile =
        server.profile(json!({"name": "Mock auto", "kind": "mock", "auto_approve": true})).await;
    let (_, session) = server.session(Some(&profile)).await;
    let messages = server.turn(&session, "#!mock\nask_permission Run tests\nsay finished").await;
    let request = of_kind(&messages, "permission_request")[0];
    assert_eq!(request["metadata"]["status"], "approved");
    assert_eq!(
        request["metadata"]["answered_by"], "auto_approve",
        "the answer is in the transcript"
    );
}

#[tokio::test]
async fn a_cancelled_turn_expires_its_pending_permission() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let requested = permission_request(&server, &session).await;
    let request_id = requested["request_id"].as_str().unwrap();
    server.call("agent.cancel", json!({"session_id": session})).await;
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    let messages = server.messages(&session).await;
    let request = of_kind(&messages, "permission_request")[0];
    assert_eq!(request["metadata"]["status"], "cancelled");
    let (status, _) = server
        .post(
            "permission.respond",
            json!({"session_id": session, "request_id": request_id, "option_id": "allow"}),
        )
        .await;
    assert_eq!(status, 409);
}

async fn last_error(server: &TestServer, session: &str) -> Value {
    server.call("session.get", json!({"id": session})).await["session"]["last_error"].clone()
}

#[tokio::test]
async fn garbage_output_is_reported_and_the_turn_goes_on() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let messages = server.turn(&session, "#!mock\ngarbage\nsay still here").await;
    assert_eq!(of_kind(&messages, "agent").last().unwrap()["content"], "still here");
    let error = last_error(&server, &session).await;
    assert_eq!(error["code"], "agent_protocol_error", "{error}");
    assert!(error["message"].as_str().unwrap().contains("not valid ACP"));
    let got = server.call("session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["state"], "WAITING_FOR_INPUT");
}

#[tokio::test]
async fn a_16_mib_line_is_skipped_without_taking_the_server_down() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let messages = server.turn(&session, "#!mock\nbigline 16777216\nsay after the big line").await;
    assert_eq!(of_kind(&messages, "agent").last().unwrap()["content"], "after the big line");
    assert_eq!(last_error(&server, &session).await["code"], "agent_protocol_error");
    let health = server.call("workspace.list", json!({})).await;
    assert!(health["workspaces"].is_array());
}

#[tokio::test]
async fn a_crash_mid_turn_ends_the_turn_with_a_readable_error_and_the_next_prompt_restarts() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let messages = server.turn(&session, "#!mock\nsay working\ncrash 3").await;
    let error = last_error(&server, &session).await;
    assert_eq!(error["code"], "agent_exited", "{error}");
    assert!(error["message"].as_str().unwrap().contains("exited with code 3"), "{error}");
    assert!(!of_kind(&messages, "error").is_empty(), "the error is in the transcript");
    let got = server.call("session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["state"], "WAITING_FOR_INPUT");

    let again = server.turn(&session, "are you back").await;
    assert_eq!(of_kind(&again, "agent").last().unwrap()["content"], "echo: are you back");
}

#[tokio::test]
async fn an_agent_command_that_does_not_exist_fails_the_start_readably() {
    let server = TestServer::start().await;
    let profile = server
        .profile(json!({"name": "Broken", "kind": "custom", "command": "/no/such/agent-binary"}))
        .await;
    let (_, workflow) = server.kanban().await;
    let task = server.call("task.create", json!({"workflow_id": workflow["id"], "title": "t", "step_id": step_id(&workflow, "Backlog")})).await;
    let launched = server
        .call("session.launch", json!({"task_id": task["task"]["id"], "agent_profile_id": profile}))
        .await;
    let session = launched["session"]["id"].as_str().unwrap();
    let failed = server.wait_state(session, "FAILED").await;
    let message = failed["last_error"]["message"].as_str().unwrap();
    assert!(
        message.contains("/no/such/agent-binary") && message.contains("not found"),
        "{message}"
    );
    let (status, body) =
        server.post("message.add", json!({"session_id": session, "content": "hi"})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("CONFLICT")),
        "a failed session needs a resume"
    );
    server.call("session.delete", json!({"id": session})).await;
}

#[tokio::test]
async fn the_agent_cannot_write_outside_its_working_directory() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let cwd = server.call("session.get", json!({"id": session})).await["session"]["cwd"]
        .as_str()
        .unwrap()
        .to_owned();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), std::path::Path::new(&cwd).join("escape")).unwrap();
    let target = outside.path().join("abs.txt");
    let script = format!(
        "#!mock\nwrite inside.txt fine\nwrite ../outside.txt nope\nwrite {} nope\nwrite escape/link.txt nope",
        target.display()
    );
    let messages = server.turn(&session, &script).await;
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&cwd).join("inside.txt")).unwrap(),
        "fine"
    );
    assert!(!std::path::Path::new(&cwd).join("../outside.txt").exists(), "`..` refused");
    assert!(!target.exists(), "absolute path outside refused");
    assert!(!outside.path().join("link.txt").exists(), "symlink out refused");
    let said: String =
        of_kind(&messages, "agent").iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert!(said.contains("outside"), "the agent was told why: {said}");
}

/// Issue 12, finding 4: agent writes through a dangling symlink that points outside are
/// refused and create nothing there; agent reads of a hard link to an outside file are
/// refused; a symlink inside the working directory still works.
#[tokio::test]
async fn i12_f4_agent_file_requests_never_reach_outside_through_links() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let cwd = server.call("session.get", json!({"id": session})).await["session"]["cwd"]
        .as_str()
        .unwrap()
        .to_owned();
    let cwd = std::path::Path::new(&cwd);
    let outside = tempfile::Builder::new().tempdir_in(server.dir.path()).unwrap();
    let created = outside.path().join("created.txt");
    std::os::unix::fs::symlink(&created, cwd.join("dangling")).unwrap();
    std::os::unix::fs::symlink("../../outside-rel.txt", cwd.join("dangling-relative")).unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    std::fs::hard_link(&secret, cwd.join("linked.txt")).unwrap();
    std::os::unix::fs::symlink("inside.txt", cwd.join("alias")).unwrap();

    let script = "#!mock\nwrite dangling nope\nwrite dangling-relative nope\nwrite linked.txt overwritten\nread linked.txt\nwrite alias via the alias\nread inside.txt";
    let messages = server.turn(&session, script).await;
    let said: String =
        of_kind(&messages, "agent").iter().map(|m| m["content"].as_str().unwrap()).collect();

    assert!(!created.exists(), "nothing created outside through a dangling symlink");
    assert!(!cwd.join("../../outside-rel.txt").exists());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "top secret", "not written through");
    assert!(!said.contains("top secret"), "the agent never read the outside file: {said}");
    assert!(said.contains("write dangling failed"), "{said}");
    assert!(said.contains("read linked.txt failed") && said.contains("hard link"), "{said}");
    assert!(said.contains("via the alias"), "a symlink inside still works: {said}");
}

#[tokio::test]
async fn a_busy_session_queues_and_runs_the_queue_in_order() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    server
        .call(
            "message.add",
            json!({"session_id": session, "content": "#!mock\nsleep 300\nsay first"}),
        )
        .await;
    let queued =
        server.call("message.add", json!({"session_id": session, "content": "second"})).await;
    assert_eq!(queued["status"], "queued");
    let (status, body) = server
        .post("message.add", json!({"session_id": session, "content": "x", "queue": false}))
        .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("BUSY")));
    ws.notification("session.turn.completed").await;
    ws.notification("session.turn.completed").await;
    let messages = server.messages(&session).await;
    let users: Vec<&str> =
        of_kind(&messages, "user").iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(users.len(), 2);
    assert_eq!(users[1], "second");
    assert_eq!(of_kind(&messages, "agent").last().unwrap()["content"], "echo: second");
}

/// A minimal ACP agent in `sh`: answers initialize and session/new, then for each prompt
/// sends an update kind no spec knows, one text chunk, and ends the turn.
const UNKNOWN_KIND_AGENT: &str = r#"
id() { echo "$1" | sed 's/.*"id":\([0-9]*\).*/\1/'; }
read -r l; echo "{\"jsonrpc\":\"2.0\",\"id\":$(id "$l"),\"result\":{\"protocolVersion\":1,\"agentCapabilities\":{}}}"
read -r l; echo "{\"jsonrpc\":\"2.0\",\"id\":$(id "$l"),\"result\":{\"sessionId\":\"s1\"}}"
while read -r l; do
  case "$l" in *session/prompt*)
    echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"brand_new_kind","x":1}}}'
    echo '{"jsonrpc":"2.0","method":"_vendor/ping","params":{}}'
    echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"still fine"}}}}'
    echo "{\"jsonrpc\":\"2.0\",\"id\":$(id "$l"),\"result\":{\"stopReason\":\"end_turn\"}}";;
  esac
done
"#;

#[tokio::test]
async fn an_unknown_update_kind_is_ignored_and_the_turn_goes_on() {
    let server = TestServer::start().await;
    let profile = server.profile(json!({"name": "sh agent", "kind": "custom", "command": "sh", "args": ["-c", UNKNOWN_KIND_AGENT]})).await;
    let (_, session) = server.session(Some(&profile)).await;
    let messages = server.turn(&session, "hello").await;
    let kinds: Vec<&str> = messages.iter().map(|m| m["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "agent"], "nothing stored for the unknown kind");
    assert_eq!(messages[1]["content"], "still fine");
    assert!(last_error(&server, &session).await.is_null(), "not an error");
}

#[tokio::test]
async fn l39_modes_and_options_need_a_live_conversation_and_are_persisted() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let moded = server.call("session.set_mode", json!({"id": session, "mode_id": "plan"})).await;
    assert_eq!(moded["session"]["session_mode"], "plan");
    let model = kandev_mock_agent::MODELS[1].0;
    let set = server
        .call(
            "session.set_config_option",
            json!({"id": session, "config_id": "model", "value": model}),
        )
        .await;
    assert_eq!(set["session"]["model"], model);
    assert_eq!(set["session"]["config_options"]["model"], model);
    server.call("session.stop", json!({"id": session})).await;
    let (status, body) =
        server.post("session.set_mode", json!({"id": session, "mode_id": "default"})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("CONFLICT")),
        "needs an initialized conversation"
    );
    // Kept across a resume: the restarted agent gets the model, then the mode, again.
    server.turn(&session, "still planning?").await;
    let counters = server.counters();
    assert_eq!(counters.count(kandev_mock_agent::CallKind::SetMode), 2);
    assert_eq!(counters.count(kandev_mock_agent::CallKind::SetConfigOption), 2);
    let (status, body) =
        server.post("session.set_mode", json!({"id": session, "mode_id": "no-such-mode"})).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("CONFLICT")), "{body}");
}
