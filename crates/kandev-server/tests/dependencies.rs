//! Issue 17 acceptance 5: subtasks and dependencies. A task blocked by an unfinished task
//! does not auto-start; when its last blocker is done (last step, or archived) the waiting
//! start runs exactly once; a cycle is refused, naming it; deleting a blocker frees the task.

use crate::common;

use common::{TestServer, step_id};
use serde_json::{Value, json};

async fn task(server: &TestServer, workflow: &Value, title: &str, extra: Value) -> Value {
    let mut body = json!({"workflow_id": workflow["id"], "title": title});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    server.call("task.create", body).await
}

#[tokio::test]
async fn i17_a5_a_blocked_task_waits_and_starts_once_when_its_blocker_is_done() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let backlog = step_id(&workflow, "Backlog");
    let blocker = task(&server, &workflow, "blocker", json!({"step_id": backlog})).await;
    let blocker_id = blocker["task"]["id"].as_str().unwrap().to_owned();
    // Kanban's start step (In Progress) auto-starts its agent: this one must wait.
    let blocked = task(&server, &workflow, "blocked", json!({"blocked_by": [blocker_id]})).await;
    let blocked_id = blocked["task"]["id"].as_str().unwrap().to_owned();
    assert!(blocked["session"].is_null(), "no start while blocked: {blocked}");
    assert_eq!(blocked["task"]["blocked_by"], json!([blocker_id]));
    let sessions = server.call("task.session.list", json!({"task_id": blocked_id})).await;
    assert_eq!(sessions["sessions"], json!([]));

    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("workspace:{workspace_id}")]})).await;
    // Not done yet: Review is not the last step.
    let review = step_id(&workflow, "Review");
    server.call("task.move", json!({"id": blocker_id, "step_id": review})).await;
    let done = step_id(&workflow, "Done");
    server.call("task.move", json!({"id": blocker_id, "step_id": done})).await;
    let started = loop {
        let frame = ws.notification("session.created").await;
        if frame["payload"]["session"]["task_id"] == blocked_id.as_str() {
            break frame;
        }
    };
    let session_id = started["payload"]["session"]["id"].as_str().unwrap().to_owned();
    server.wait_turns(&session_id, 1).await;
    // Out of Done and back again: the start already ran, it does not run twice.
    server.call("task.move", json!({"id": blocker_id, "step_id": review})).await;
    server.call("task.move", json!({"id": blocker_id, "step_id": done})).await;
    let sessions = server.call("task.session.list", json!({"task_id": blocked_id})).await;
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 1, "started exactly once");
    let messages = server.messages(&session_id).await;
    let users: Vec<&Value> = messages.iter().filter(|m| m["kind"] == "user").collect();
    assert_eq!(users.len(), 1, "the step prompt was sent once: {users:?}");
}

#[tokio::test]
async fn i17_a5_a_dependency_cycle_is_refused_naming_it() {
    let server = TestServer::start().await;
    let (_, workflow) = server.kanban().await;
    let backlog = step_id(&workflow, "Backlog");
    let a = task(&server, &workflow, "alpha", json!({"step_id": backlog})).await;
    let a_id = a["task"]["id"].as_str().unwrap().to_owned();
    let b =
        task(&server, &workflow, "beta", json!({"step_id": backlog, "blocked_by": [a_id]})).await;
    let b_id = b["task"]["id"].as_str().unwrap().to_owned();
    let c =
        task(&server, &workflow, "gamma", json!({"step_id": backlog, "blocked_by": [b_id]})).await;
    let c_id = c["task"]["id"].as_str().unwrap().to_owned();
    let (status, body) =
        server.post("task.update", json!({"id": a_id, "blocked_by": [c_id]})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["code"], "VALIDATION_ERROR");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("cycle") && ["alpha", "gamma", "beta"].iter().all(|t| message.contains(t)),
        "the cycle is named: {message}"
    );
    let (status, body) =
        server.post("task.update", json!({"id": a_id, "blocked_by": [a_id]})).await;
    assert_eq!(status, 422, "a task cannot block itself: {body}");
    let (status, body) = server.post("task.update", json!({"id": a_id, "parent_id": c_id})).await;
    assert_eq!(status, 200, "parents are a separate relation: {body}");
    let (status, body) = server.post("task.update", json!({"id": c_id, "parent_id": a_id})).await;
    assert_eq!(status, 422, "a parent cycle is refused too: {body}");
    let unchanged = server.call("task.get", json!({"id": a_id})).await;
    assert_eq!(unchanged["task"]["blocked_by"], json!([]), "nothing changed");
}

#[tokio::test]
async fn i17_a5_deleting_a_blocker_frees_the_task_and_deleting_a_parent_keeps_its_subtasks() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let backlog = step_id(&workflow, "Backlog");
    let parent = task(&server, &workflow, "parent", json!({"step_id": backlog})).await;
    let parent_id = parent["task"]["id"].as_str().unwrap().to_owned();
    let child = task(
        &server,
        &workflow,
        "child",
        json!({"step_id": backlog, "parent_id": parent_id, "blocked_by": [parent_id]}),
    )
    .await;
    let child_id = child["task"]["id"].as_str().unwrap().to_owned();
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("workspace:{workspace_id}")]})).await;
    server.call("task.delete", json!({"id": parent_id})).await;
    let updated = loop {
        let frame = ws.notification("task.updated").await;
        if frame["payload"]["task"]["id"] == child_id.as_str() {
            break frame;
        }
    };
    assert!(updated["payload"]["task"]["parent_id"].is_null(), "{updated}");
    assert_eq!(updated["payload"]["task"]["blocked_by"], json!([]), "an event says so");
}
