//! Issue 18 (scope 2 and 3): saved prompts (a workspace library, `{{prompt:name}}` in step
//! prompts), and the session controls besides mode and model: rename, set the primary
//! session, retry the last user message.

use crate::common;

use common::{TestServer, of_kind, step_id};
use serde_json::{Value, json};

async fn workspace_id(server: &TestServer) -> String {
    let workspaces = server.call("workspace.list", json!({})).await;
    workspaces["workspaces"][0]["id"].as_str().unwrap().to_owned()
}

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn i18_s1_saved_prompts_are_created_listed_updated_and_deleted_with_checked_names() {
    let server = TestServer::start().await;
    let ws = workspace_id(&server).await;
    let created = server
        .call(
            "prompt.create",
            json!({"workspace_id": ws, "name": " review ", "body": "Check the tests"}),
        )
        .await;
    let id = created["prompt"]["id"].as_str().unwrap().to_owned();
    assert_eq!(created["prompt"]["name"], "review", "trimmed");
    server.call("prompt.create", json!({"workspace_id": ws, "name": "a-first", "body": "x"})).await;
    let list = server.call("prompt.list", json!({"workspace_id": ws})).await;
    let names: Vec<&str> =
        list["prompts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a-first", "review"], "by name");

    let (status, body) = server
        .post("prompt.create", json!({"workspace_id": ws, "name": "review", "body": "again"}))
        .await;
    assert_eq!((status, code(&body)), (409, "CONFLICT"), "{body}");
    assert!(body["message"].as_str().unwrap().contains("already exists"), "{body}");
    let (status, body) = server
        .post("prompt.create", json!({"workspace_id": ws, "name": "two words", "body": "x"}))
        .await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    assert!(body["message"].as_str().unwrap().starts_with("name may hold only"), "{body}");
    let (status, body) = server
        .post("prompt.create", json!({"workspace_id": ws, "name": "empty", "body": " "}))
        .await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    let (status, body) = server.post("prompt.update", json!({"id": id, "name": "a-first"})).await;
    assert_eq!((status, code(&body)), (409, "CONFLICT"), "renaming onto a taken name: {body}");

    let updated =
        server.call("prompt.update", json!({"id": id, "body": "Check the tests twice"})).await;
    assert_eq!(updated["prompt"]["name"], "review", "a field left out is kept");
    assert_eq!(updated["prompt"]["body"], "Check the tests twice");
    server.call("prompt.delete", json!({"id": id})).await;
    let (status, body) = server.post("prompt.delete", json!({"id": id})).await;
    assert_eq!((status, code(&body)), (404, "NOT_FOUND"), "{body}");
    let list = server.call("prompt.list", json!({"workspace_id": ws})).await;
    assert_eq!(list["prompts"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn i18_s1_a_step_prompt_expands_saved_prompts_and_notes_unknown_names() {
    let server = TestServer::start().await;
    let ws = workspace_id(&server).await;
    server
        .call(
            "prompt.create",
            json!({"workspace_id": ws, "name": "checklist", "body": "run the tests"}),
        )
        .await;
    let created = server
        .call("workflow.create", json!({"workspace_id": ws, "name": "k", "template_id": "kanban"}))
        .await;
    let workflow = created["workflow"].clone();
    let in_progress = step_id(&workflow, "In Progress");
    server
        .call(
            "workflow.step.update",
            json!({"id": in_progress, "prompt": "{{task_prompt}}: {{prompt:checklist}}, then {{prompt:nope}}"}),
        )
        .await;
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "Fix it", "step_id": in_progress}),
        )
        .await;
    let session = task["session"]["id"].as_str().unwrap().to_owned();
    server.wait_turns(&session, 1).await;
    let messages = server.messages(&session).await;
    assert_eq!(
        of_kind(&messages, "user")[0]["content"],
        "Fix it: run the tests, then {{prompt:nope}}",
        "the saved prompt is filled in, an unknown name is left as written"
    );
    let notes = of_kind(&messages, "status");
    assert!(
        notes.iter().any(|m| m["content"]
            .as_str()
            .unwrap()
            .contains("no saved prompt for {{prompt:nope}}")),
        "a visible note names the unknown prompt: {notes:?}"
    );
}

#[tokio::test]
async fn i18_d1_a_step_prompt_whose_expansion_passes_the_message_limit_is_sent_as_written() {
    let server = TestServer::start().await;
    let ws = workspace_id(&server).await;
    let body = "b".repeat(60 * 1024);
    server.call("prompt.create", json!({"workspace_id": ws, "name": "big", "body": body})).await;
    let created = server
        .call("workflow.create", json!({"workspace_id": ws, "name": "k", "template_id": "kanban"}))
        .await;
    let workflow = created["workflow"].clone();
    let in_progress = step_id(&workflow, "In Progress");
    // 20 references to a 60 KiB body: 1.2 MB, past the 1 MiB limit of a message.
    let prompt = "{{prompt:big}}".repeat(20);
    server.call("workflow.step.update", json!({"id": in_progress, "prompt": prompt})).await;
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "Fix it", "step_id": in_progress}),
        )
        .await;
    let session = task["session"]["id"].as_str().unwrap().to_owned();
    server.wait_turns(&session, 1).await;
    let messages = server.messages(&session).await;
    assert_eq!(of_kind(&messages, "user")[0]["content"], prompt.as_str(), "sent as written");
    let notes = of_kind(&messages, "status");
    assert!(
        notes.iter().any(|m| m["content"].as_str().unwrap().contains("longer than 1 MiB")),
        "a visible note says the expansion is too long: {notes:?}"
    );
}

#[tokio::test]
async fn i18_s2_a_session_is_renamed_and_an_empty_name_clears_it() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let mut board = server.ws().await;
    board
        .call(
            "subscribe",
            json!({"topics": [format!("workspace:{}", workspace_id(&server).await)]}),
        )
        .await;
    let renamed = server.call("session.rename", json!({"id": session, "name": " Reviewer "})).await;
    assert_eq!(renamed["session"]["name"], "Reviewer");
    // The session's own start may still announce itself (no name yet) before the rename's
    // frame: the rename must come, each wait bounded by the socket's timeout.
    loop {
        let frame = ws.notification("session.updated").await;
        if frame["payload"]["session"]["name"] == "Reviewer" {
            break;
        }
        assert!(frame["payload"]["session"]["name"].is_null(), "announced: {frame}");
    }
    let frame = board.notification("session.renamed").await;
    assert_eq!(frame["payload"]["session"]["name"], "Reviewer", "the task page's tabs hear it");
    // A turn (runtime writes of the session row) keeps the name.
    server.turn(&session, "hello").await;
    let got = server.call("session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["name"], "Reviewer");
    let (status, body) =
        server.post("session.rename", json!({"id": session, "name": "x".repeat(201)})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    let cleared = server.call("session.rename", json!({"id": session, "name": ""})).await;
    assert!(cleared["session"]["name"].is_null());
    let (status, body) = server.post("session.rename", json!({"id": "nope", "name": "x"})).await;
    assert_eq!((status, code(&body)), (404, "NOT_FOUND"), "{body}");
}

#[tokio::test]
async fn i18_s2_another_session_becomes_the_primary_session() {
    let server = TestServer::start().await;
    let (task, first) = server.session(None).await;
    let launched = server.call("session.launch", json!({"task_id": task})).await;
    let second = launched["session"]["id"].as_str().unwrap().to_owned();
    let got = server.call("task.get", json!({"id": task})).await;
    assert_eq!(got["task"]["primary_session_id"], first.as_str(), "the first stays primary");
    let answer = server.call("session.set_primary", json!({"id": second})).await;
    assert_eq!(answer["task"]["primary_session_id"], second.as_str());
    let got = server.call("task.get", json!({"id": task})).await;
    assert_eq!(got["task"]["primary_session_id"], second.as_str(), "stored");
    let (status, body) = server.post("session.set_primary", json!({"id": "nope"})).await;
    assert_eq!((status, code(&body)), (404, "NOT_FOUND"), "{body}");
}

#[tokio::test]
async fn i18_s2_retry_resends_the_last_user_message_once_and_refuses_while_its_turn_runs() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let (status, body) = server.post("session.retry", json!({"id": session})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "nothing to retry: {body}");

    let prompt = "#!mock\nask_permission hold";
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    server.call("message.add", json!({"session_id": session, "content": prompt})).await;
    ws.notification("session.permission.requested").await;
    let (status, body) = server.post("session.retry", json!({"id": session})).await;
    assert_eq!((status, code(&body)), (409, "BUSY"), "refused during a turn: {body}");
    assert!(body["message"].as_str().unwrap().contains("retry when it has ended"), "{body}");
    server.call("agent.cancel", json!({"session_id": session})).await;
    ws.notification("session.turn.completed").await;

    let retried = server.call("session.retry", json!({"id": session})).await;
    assert_eq!(retried["message"]["kind"], "user");
    assert_eq!(retried["message"]["content"], prompt, "the same text, as a new message");
    ws.notification("session.permission.requested").await;
    let (status, body) = server.post("session.retry", json!({"id": session})).await;
    assert_eq!((status, code(&body)), (409, "BUSY"), "a second retry never double-sends: {body}");
    server.call("agent.cancel", json!({"session_id": session})).await;
    ws.notification("session.turn.completed").await;

    let messages = server.messages(&session).await;
    let sent: Vec<&Value> =
        of_kind(&messages, "user").into_iter().filter(|m| m["content"] == prompt).collect();
    assert_eq!(sent.len(), 2, "the original and one retry");
    assert_eq!(server.counters().prompt(), 2, "the agent got two prompts");
}

#[tokio::test]
async fn i18_s3_a_config_option_other_than_model_is_offered_set_and_confirmed_by_the_agent() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let got = server.call("session.get", json!({"id": session})).await;
    let info = &got["session"]["agent_info"];
    assert_eq!(info["title"], "Kandev mock agent", "the header shows the agent's title");
    assert!(!info["version"].as_str().unwrap_or_default().is_empty(), "and its version");
    let thinking = info["config_options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "thought_level")
        .expect("the mock offers a thought level")
        .clone();
    assert_eq!(thinking["name"], "Thinking");
    assert_eq!(thinking["options"].as_array().unwrap().len(), 3);
    assert_eq!(got["session"]["config_options"]["thought_level"], "medium");

    let set = server
        .call(
            "session.set_config_option",
            json!({"id": session, "config_id": "thought_level", "value": "high"}),
        )
        .await;
    assert_eq!(set["session"]["config_options"]["thought_level"], "high");
    let messages = server.turn(&session, "#!mock\nselection").await;
    let said = of_kind(&messages, "agent").last().unwrap()["content"].clone();
    assert_eq!(
        said, "selection: mode=default model=mock-fast thought_level=high",
        "the agent holds it"
    );

    let (status, body) = server
        .post(
            "session.set_config_option",
            json!({"id": session, "config_id": "thought_level", "value": "extreme"}),
        )
        .await;
    assert_eq!((status, code(&body)), (409, "CONFLICT"), "{body}");
    let got = server.call("session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["config_options"]["thought_level"], "high", "unchanged");
}
