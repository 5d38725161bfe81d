//! Issue 12 finding 9 over the API: a step deleted while tasks move into it, and a search
//! text too long for SQLite, get clear 4xx answers, never a 500.

use crate::common;

use common::*;
use serde_json::{Value, json};

/// The probe: `workflow.step.delete` racing `task.move` into that step gave 86 of 100 moves a
/// 500 (foreign key). Each move must either land (and then the delete is refused) or be
/// refused itself with a clear code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i12_f9_step_delete_racing_task_move_answers_4xx_never_500() {
    let server = TestServer::start().await;
    let (_, workflow) = server.kanban().await;
    let backlog = step_id(&workflow, "Backlog");
    for round in 0..10 {
        let name = format!("Doomed {round}");
        let created = server
            .call("workflow.step.create", json!({"workflow_id": workflow["id"], "name": name}))
            .await;
        let doomed = step_id(&created["workflow"], &name);
        let mut tasks = vec![];
        for i in 0..8 {
            let task = json!({"workflow_id": workflow["id"], "step_id": backlog, "title": format!("t{i}")});
            tasks.push(server.call("task.create", task).await["task"]["id"].clone());
        }
        let moves =
            tasks.iter().map(|id| server.post("task.move", json!({"id": id, "step_id": doomed})));
        let delete = server.post("workflow.step.delete", json!({"id": doomed}));
        let (deleted, moved) = tokio::join!(delete, futures::future::join_all(moves));

        let mut landed = 0;
        for (status, body) in &moved {
            match status {
                200 => landed += 1,
                404 | 409 | 422 => assert!(is_clear_error(body), "{status}: {body}"),
                _ => panic!("a move answered {status}: {body}"),
            }
        }
        let (status, body) = deleted;
        if status == 200 {
            // The moves that landed before the delete would have blocked it.
            assert_eq!(landed, 0, "the step was deleted with tasks in it: {body}");
        } else {
            assert_eq!((status, body["code"].as_str()), (409, Some("CONFLICT")), "{body}");
            assert!(landed > 0, "the delete was refused for tasks that never arrived: {body}");
        }
        let listed = server
            .call("task.list", json!({"workflow_id": workflow["id"], "step_id": backlog}))
            .await;
        let in_backlog = listed["tasks"].as_array().unwrap().len();
        assert!(in_backlog + landed >= tasks.len(), "every task is in a step that exists");
        // Empty the backlog for the next round.
        for id in &tasks {
            server.call("task.delete", json!({"id": id})).await;
        }
    }
}

fn is_clear_error(body: &Value) -> bool {
    let message = body["message"].as_str().unwrap_or_default();
    ["NOT_FOUND", "CONFLICT", "VALIDATION_ERROR"].contains(&body["code"].as_str().unwrap_or(""))
        && message.contains("step")
}

/// The probe: a ~50,000-character query was a 500 (`LIKE pattern too complex`).
#[tokio::test]
async fn i12_f9_a_too_long_search_is_a_validation_error_naming_the_limit() {
    let server = TestServer::start().await;
    let (_, workflow) = server.kanban().await;
    for title in ["100% done", "1000 done"] {
        server.call("task.create", json!({"workflow_id": workflow["id"], "title": title})).await;
    }
    let list = |query: String| {
        server.post("task.list", json!({"workflow_id": workflow["id"], "query": query}))
    };
    let (status, body) = list("x".repeat(50_000)).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    assert_eq!(body["message"], "query is longer than 1000 characters");
    assert_eq!(body["details"]["field"], "query");

    let (status, body) = list("%".repeat(1000)).await;
    assert_eq!(status, 200, "the longest accepted query works: {body}");
    assert!(body["tasks"].as_array().unwrap().is_empty(), "`%` is matched literally");
    let (_, body) = list("0%".into()).await;
    let titles: Vec<&str> =
        body["tasks"].as_array().unwrap().iter().map(|t| t["title"].as_str().unwrap()).collect();
    assert_eq!(titles, vec!["100% done"]);
}
