//! Issue 2 acceptance 2 and 3: a board built over HTTP, live notifications with replay, and
//! a restart that loses nothing.

use crate::common;

use common::{TestServer, step_id};
use serde_json::{Value, json};

fn titles_in(tasks: &Value, step: &str) -> Vec<String> {
    tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["step_id"] == step)
        .map(|t| t["title"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn board_over_http_moves_and_reorders() {
    let server = TestServer::start().await;
    let workspace = server.call("workspace.create", json!({"name": "Acme"})).await;
    let workspace_id = workspace["workspace"]["id"].as_str().unwrap();
    let workflow = server
        .call(
            "workflow.create",
            json!({"workspace_id": workspace_id, "name": "Board", "template_id": "kanban"}),
        )
        .await["workflow"]
        .clone();
    let names: Vec<&str> =
        workflow["steps"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Backlog", "In Progress", "Review", "Done"]);
    let (backlog, review) = (step_id(&workflow, "Backlog"), step_id(&workflow, "Review"));

    let mut ids = vec![];
    for title in ["one", "two", "three"] {
        let task = server
            .call(
                "task.create",
                json!({"workflow_id": workflow["id"], "title": title, "step_id": backlog}),
            )
            .await;
        ids.push(task["task"]["id"].as_str().unwrap().to_owned());
    }
    server.call("task.move", json!({"id": ids[1], "step_id": review})).await;
    let reordered =
        server.call("task.move", json!({"id": ids[2], "step_id": backlog, "position": 0})).await;
    assert_eq!(reordered["task"]["position"], 0);

    let tasks = server.call("task.list", json!({"workflow_id": workflow["id"]})).await;
    assert_eq!(titles_in(&tasks, &backlog), ["three", "one"]);
    assert_eq!(titles_in(&tasks, &review), ["two"]);
    let positions: Vec<u64> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["step_id"] == backlog)
        .map(|t| t["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [0, 1]);

    let found =
        server.call("task.list", json!({"workflow_id": workflow["id"], "query": "THR"})).await;
    assert_eq!(found["tasks"].as_array().unwrap().len(), 1, "search is case-insensitive");

    server.call("task.archive", json!({"id": ids[0]})).await;
    let visible = server.call("task.list", json!({"workflow_id": workflow["id"]})).await;
    assert_eq!(visible["tasks"].as_array().unwrap().len(), 2, "archived tasks are hidden");
    let all = server
        .call("task.list", json!({"workflow_id": workflow["id"], "include_archived": true}))
        .await;
    assert_eq!(all["tasks"].as_array().unwrap().len(), 3);
    server.call("task.delete", json!({"id": ids[0]})).await;
    let (status, body) = server.post("task.get", json!({"id": ids[0]})).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("NOT_FOUND")));
}

#[tokio::test]
async fn task_list_pages_with_a_cursor() {
    let server = TestServer::start().await;
    let (_, workflow) = server.kanban().await;
    for i in 0..5 {
        server
            .call("task.create", json!({"workflow_id": workflow["id"], "title": format!("t{i}"), "step_id": workflow["steps"][0]["id"]}))
            .await;
    }
    let first = server.call("task.list", json!({"workflow_id": workflow["id"], "limit": 3})).await;
    assert_eq!(first["tasks"].as_array().unwrap().len(), 3);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = server
        .call("task.list", json!({"workflow_id": workflow["id"], "limit": 3, "cursor": cursor}))
        .await;
    assert_eq!(second["tasks"].as_array().unwrap().len(), 2);
    assert!(second["next_cursor"].is_null());
}

#[tokio::test]
async fn subscribers_get_increasing_seq_and_replay_exactly_what_they_missed() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let topic = format!("workspace:{workspace_id}");
    let review = step_id(&workflow, "Review");

    let mut ws = server.ws().await;
    let subscribed = ws.call("subscribe", json!({"topics": [topic]})).await;
    assert_eq!(subscribed["type"], "response");

    let created =
        server.call("task.create", json!({"workflow_id": workflow["id"], "title": "a", "step_id": workflow["steps"][0]["id"]})).await;
    let task_id = created["task"]["id"].as_str().unwrap();
    server.call("task.move", json!({"id": task_id, "step_id": review})).await;
    let first = ws.notification("task.created").await;
    let second = ws.notification("task.moved").await;
    assert_eq!(first["topic"], topic.as_str());
    assert_eq!(second["payload"]["task"]["step_id"], review.as_str());
    let (s1, s2) = (first["seq"].as_i64().unwrap(), second["seq"].as_i64().unwrap());
    assert!(s2 > s1, "seq increases: {s1} then {s2}");
    drop(ws);

    // While disconnected: three more changes.
    for title in ["b", "c"] {
        server.call("task.create", json!({"workflow_id": workflow["id"], "title": title, "step_id": workflow["steps"][0]["id"]})).await;
    }
    server.call("task.update", json!({"id": task_id, "title": "a2"})).await;

    let mut again = server.ws().await;
    let id =
        again.request("subscribe", json!({"topics": [topic], "since": {topic.clone(): s2}})).await;
    let (replayed, reply) = again.reply(&id).await;
    let actions: Vec<&str> = replayed.iter().map(|n| n["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        ["task.created", "task.created", "task.updated"],
        "exactly what was missed"
    );
    let seqs: Vec<i64> = replayed.iter().map(|n| n["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]) && seqs[0] > s2, "{seqs:?}");
    assert_eq!(reply["payload"]["topics"][&topic], *seqs.last().unwrap());

    // Live after replay, with no duplicate of the replayed ones.
    server.call("task.create", json!({"workflow_id": workflow["id"], "title": "d", "step_id": workflow["steps"][0]["id"]})).await;
    let live = again.notification("task.created").await;
    assert_eq!(live["payload"]["task"]["title"], "d");
    assert!(live["seq"].as_i64().unwrap() > *seqs.last().unwrap());
}

#[tokio::test]
async fn restart_loses_nothing() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let review = step_id(&workflow, "Review");
    let task =
        server.call("task.create", json!({"workflow_id": workflow["id"], "title": "kept", "step_id": workflow["steps"][0]["id"]})).await;
    server.call("task.move", json!({"id": task["task"]["id"], "step_id": review})).await;
    let before = server.call("task.list", json!({"workflow_id": workflow["id"]})).await;
    let exported = server.call("workflow.export", json!({"ids": [workflow["id"]]})).await;
    let dir = server.stop().await;

    let server = TestServer::start_with(Default::default(), dir).await;
    let after = server.call("task.list", json!({"workflow_id": workflow["id"]})).await;
    assert_eq!(before, after);
    assert_eq!(server.call("workflow.export", json!({"ids": [workflow["id"]]})).await, exported);
    let workspaces = server.call("workspace.list", json!({})).await;
    assert_eq!(
        workspaces["workspaces"].as_array().unwrap().len(),
        1,
        "first-run seeding runs once"
    );

    // The event log survives too: a subscriber can replay from before the restart.
    let topic = format!("workspace:{workspace_id}");
    let mut ws = server.ws().await;
    let id = ws.request("subscribe", json!({"topics": [topic], "since": {topic.clone(): 0}})).await;
    let (replayed, _) = ws.reply(&id).await;
    let actions: Vec<&str> = replayed.iter().map(|n| n["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["workflow.created", "task.created", "task.moved"]);
}

#[tokio::test]
async fn health_reports_status_version_and_db() {
    let server = TestServer::start().await;
    let body: Value =
        reqwest::get(server.url("/api/v1/health")).await.unwrap().json().await.unwrap();
    assert_eq!(body["status"], "ok");
    assert_eq!(body["db"], "ok");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
}

/// What `task.list` of `workflow_id` would answer if nothing were kept: the cards read from
/// the store now, as JSON.
async fn fresh_cards(server: &TestServer, workflow_id: &str) -> Value {
    let filter = kandev_store::TaskFilter {
        workflow_id: Some(kandev_domain::WorkflowId::new(workflow_id)),
        step_id: None,
        query: None,
        include_archived: false,
        limit: 1000,
        offset: 0,
    };
    let cards = server.store.list_cards(&filter).await.unwrap();
    let cards: Vec<kandev_api_types::TaskCardDto> =
        cards.into_iter().map(kandev_api_types::TaskCardDto::from).collect();
    serde_json::to_value(cards).unwrap()
}

/// `task.list` of the board, checked against the store's cards read afresh (no stale card),
/// and asked twice: the second answer must be the same text (it is the kept one), and
/// reading must not move the cards version. A session's engine may still write on its own
/// (the agent's commands and mode arrive just after its start; on PostgreSQL every such
/// write counts as a card change), so a round during which the version moved is asked
/// again: a read that moved it itself would move it every time.
async fn listed(server: &TestServer, workflow_id: &str) -> Value {
    for _ in 0..5 {
        let first = server.call("task.list", json!({"workflow_id": workflow_id})).await;
        let version = server.store.cards_version();
        let again = server.call("task.list", json!({"workflow_id": workflow_id})).await;
        let fresh = fresh_cards(server, workflow_id).await;
        if server.store.cards_version() != version {
            continue;
        }
        assert_eq!(first, again);
        assert_eq!(first["tasks"], fresh, "a stale card");
        return first;
    }
    panic!("the cards version moved during each of 5 reads: reading changes it");
}

fn card<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["tasks"].as_array().unwrap().iter().find(|t| t["id"] == id).unwrap()
}

/// Issue 15 acceptance 4: `task.list` answers are kept while no card changes
/// (`board_cache.rs`); every kind of change a card shows, made through each write path (the
/// API's handlers, the engine's session work, the store's writer directly), is in the next
/// `task.list`.
#[tokio::test]
async fn i15_a4_every_change_a_card_shows_is_in_the_next_task_list() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let wf = workflow["id"].as_str().unwrap().to_owned();
    let (backlog, review) = (step_id(&workflow, "Backlog"), step_id(&workflow, "Review"));
    listed(&server, &wf).await;

    // Created.
    let mut ids = vec![];
    for title in ["one", "two", "three"] {
        let task = server
            .call("task.create", json!({"workflow_id": wf, "title": title, "step_id": backlog}))
            .await;
        ids.push(task["task"]["id"].as_str().unwrap().to_owned());
        assert!(
            listed(&server, &wf).await["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["title"] == title)
        );
    }
    // Renamed.
    server.call("task.update", json!({"id": ids[0], "title": "uno"})).await;
    assert_eq!(card(&listed(&server, &wf).await, &ids[0])["title"], "uno");
    // Moved to another step, then within its step.
    server.call("task.move", json!({"id": ids[1], "step_id": review})).await;
    assert_eq!(card(&listed(&server, &wf).await, &ids[1])["step_id"], review.as_str());
    server.call("task.move", json!({"id": ids[2], "step_id": backlog, "position": 0})).await;
    assert_eq!(card(&listed(&server, &wf).await, &ids[2])["position"], 0);
    // Blocked, then a subtask.
    server.call("task.update", json!({"id": ids[0], "blocked_by": [ids[1]]})).await;
    assert_eq!(card(&listed(&server, &wf).await, &ids[0])["blocked_by"], json!([ids[1]]));
    server.call("task.update", json!({"id": ids[2], "parent_id": ids[0]})).await;
    assert_eq!(card(&listed(&server, &wf).await, &ids[2])["parent_id"], ids[0].as_str());
    // A repository linked.
    let dir = tempfile::tempdir().unwrap();
    kandev_testkit::git::init(dir.path());
    kandev_testkit::git::git(dir.path(), &["commit", "-q", "--allow-empty", "-m", "i"]);
    let repository = server
        .call(
            "repository.create",
            json!({"workspace_id": workspace_id, "local_path": dir.path().display().to_string()}),
        )
        .await["repository"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    server.call("task.update", json!({"id": ids[1], "repository_ids": [repository]})).await;
    assert_eq!(card(&listed(&server, &wf).await, &ids[1])["repository_ids"], json!([repository]));
    // Its git summary, written by the store's writer as the engine does.
    let mut tx = server.store.begin_write().await.unwrap();
    let summary = kandev_domain::ship::GitSummary {
        ahead: 3,
        behind: 1,
        dirty: 2,
        conflicts: 0,
        pr_state: None,
        merged: false,
    };
    tx.set_git_summary(&kandev_domain::TaskId::new(ids[1].clone()), &summary).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(card(&listed(&server, &wf).await, &ids[1])["git"]["ahead"], 3);
    // A session: its start and its turns change the card's state and primary session (the
    // engine's own writes).
    let launched = server.call("session.launch", json!({"task_id": ids[0]})).await;
    let session_id = launched["session"]["id"].as_str().unwrap().to_owned();
    server.wait_state(&session_id, "WAITING_FOR_INPUT").await;
    let after_start = listed(&server, &wf).await;
    assert_eq!(card(&after_start, &ids[0])["primary_session_id"], session_id.as_str());
    server.turn(&session_id, "hello").await;
    listed(&server, &wf).await;
    // The steps reordered: the cards' order follows.
    let mut steps: Vec<String> = workflow["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    steps.reverse();
    server.call("workflow.step.reorder", json!({"workflow_id": wf, "step_ids": steps})).await;
    assert_eq!(listed(&server, &wf).await["tasks"][0]["step_id"], review.as_str());
    // Archived, then deleted.
    server.call("task.archive", json!({"id": ids[2]})).await;
    let archived = listed(&server, &wf).await;
    assert!(archived["tasks"].as_array().unwrap().iter().all(|t| t["id"] != ids[2].as_str()));
    server.call("task.unarchive", json!({"id": ids[2]})).await;
    listed(&server, &wf).await;
    server.call("task.delete", json!({"id": ids[1]})).await;
    let deleted = listed(&server, &wf).await;
    assert!(deleted["tasks"].as_array().unwrap().iter().all(|t| t["id"] != ids[1].as_str()));
}

/// Task folders cannot be made from now on: a plain file stands where they go (those made so
/// far are moved aside).
fn break_task_folders(server: &TestServer) {
    let tasks = server.dir.path().join("tasks");
    if tasks.is_dir() {
        std::fs::rename(&tasks, server.dir.path().join("tasks-aside")).unwrap();
    }
    std::fs::write(tasks, b"not a folder").unwrap();
}

/// Issue 40, scope 3: a task and its first start are one use case. Before, the handler
/// committed the task, then asked the engine to start it: a refused start answered an error
/// and left the task on the board all the same.
#[tokio::test]
async fn i40_s3_a_task_whose_start_is_refused_is_not_left_on_the_board() {
    let server = TestServer::start().await;
    let (_, workflow) = server.kanban().await;
    break_task_folders(&server);

    let create = json!({"workflow_id": workflow["id"], "title": "t", "start_agent": true});
    let (status, body) = server.post("task.create", create).await;

    assert_ne!(status, 200, "refused: {body}");
    let tasks = server.call("task.list", json!({"workflow_id": workflow["id"]})).await;
    assert_eq!(tasks["tasks"], json!([]), "no task was left behind");
}

/// Issue 40, scope 3: an archive is one use case, and what follows it (starting the tasks
/// that waited for it) is not its outcome. Before, the handler committed the archive, then
/// answered the error of a waiting task's start: the caller was told the archive failed.
#[tokio::test]
async fn i40_s3_an_archive_stands_when_a_task_it_unblocks_cannot_start() {
    let server = TestServer::start().await;
    let (_, workflow) = server.kanban().await;
    let blocker =
        server.call("task.create", json!({"workflow_id": workflow["id"], "title": "b"})).await;
    let blocker_id = blocker["task"]["id"].clone();
    let waiting = json!({
        "workflow_id": workflow["id"], "title": "w", "start_agent": true, "blocked_by": [blocker_id]
    });
    let waiting = server.call("task.create", waiting).await;
    assert_eq!(waiting["session"], Value::Null, "its start waits for its blocker");
    break_task_folders(&server);

    let (status, body) = server.post("task.archive", json!({"id": blocker_id})).await;

    assert_eq!(status, 200, "{body}");
    assert!(body["task"]["archived_at"].is_string(), "{body}");
    let task = server.call("task.get", json!({"id": blocker_id})).await;
    assert_ne!(task["task"]["archived_at"], Value::Null, "archived");
}
