//! The wire contract (issue 13): every answer is exactly its action's declared response type,
//! and every notification the server and the engine publish is one of the typed
//! notifications, on the kind of topic api.md lists it under.

use crate::common;

use std::collections::{BTreeSet, HashMap};

use common::{TestServer, step_id};
use kandev_api_types::actions::{self, Action};
use kandev_api_types::requests as rq;
use kandev_api_types::{AgentKindDto, Notification};
use serde_json::{Value, json};

/// Calls `A` over HTTP with a typed request; the answer must read as `A::Response` and say
/// nothing more (it serializes back to the same JSON).
async fn typed_call<A: Action>(server: &TestServer, request: &A::Request) -> A::Response {
    let answer = server.call(A::NAME, serde_json::to_value(request).unwrap()).await;
    let typed: A::Response = serde_json::from_value(answer.clone())
        .unwrap_or_else(|err| panic!("{} answered {answer}: {err}", A::NAME));
    assert_eq!(serde_json::to_value(&typed).unwrap(), answer, "{} answered more", A::NAME);
    typed
}

/// Every notification stored for `topics`, replayed over the WebSocket from the start.
async fn replay_all(server: &TestServer, topics: &[String]) -> Vec<Value> {
    let mut ws = server.ws().await;
    let since: HashMap<&String, i64> = topics.iter().map(|t| (t, 0)).collect();
    let id = ws.request("subscribe", json!({"topics": topics, "since": since})).await;
    let (frames, reply) = ws.reply(&id).await;
    assert_eq!(reply["type"], "response", "{reply}");
    frames.into_iter().filter(|f| f["type"] == "notification").collect()
}

#[tokio::test]
async fn i13_every_answer_and_notification_has_its_declared_type() {
    let server = TestServer::start().await;

    // Workspaces and profiles.
    let workspace = typed_call::<actions::WorkspaceCreate>(
        &server,
        &rq::WorkspaceCreate { name: "Wire".into() },
    )
    .await
    .workspace;
    let update = rq::WorkspaceUpdate { id: workspace.id.clone(), name: "Wire 2".into() };
    typed_call::<actions::WorkspaceUpdate>(&server, &update).await;
    let spare = typed_call::<actions::WorkspaceCreate>(
        &server,
        &rq::WorkspaceCreate { name: "Spare".into() },
    )
    .await;
    typed_call::<actions::WorkspaceDelete>(&server, &rq::ById { id: spare.workspace.id }).await;
    typed_call::<actions::WorkspaceList>(&server, &rq::Page::default()).await;
    let profile: rq::ProfileCreate = serde_json::from_value(
        json!({"name": "Wire mock", "kind": "mock", "args": ["--reset-delay-ms", "1"]}),
    )
    .unwrap();
    let saved = typed_call::<actions::ProfileCreate>(&server, &profile).await;
    assert_eq!(saved.profile.kind, AgentKindDto::Mock);
    let rename: rq::ProfileUpdate =
        serde_json::from_value(json!({"id": saved.profile.id, "name": "Wire mock 2"})).unwrap();
    typed_call::<actions::ProfileUpdate>(&server, &rename).await;
    typed_call::<actions::ProfileList>(&server, &rq::Page::default()).await;
    typed_call::<actions::AgentKinds>(&server, &rq::Empty {}).await;
    let doomed: rq::ProfileCreate =
        serde_json::from_value(json!({"name": "Doomed", "kind": "mock"})).unwrap();
    let doomed = typed_call::<actions::ProfileCreate>(&server, &doomed).await.profile;
    typed_call::<actions::ProfileDelete>(&server, &rq::ById { id: doomed.id }).await;

    // A repository, a workflow and its steps.
    let repo = tempfile::tempdir().unwrap();
    std::fs::create_dir(repo.path().join(".git")).unwrap();
    std::fs::write(repo.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let add_repo: rq::RepositoryCreate = serde_json::from_value(
        json!({"workspace_id": workspace.id, "local_path": repo.path().display().to_string()}),
    )
    .unwrap();
    let repository = typed_call::<actions::RepositoryCreate>(&server, &add_repo).await.repository;
    let rename: rq::RepositoryUpdate =
        serde_json::from_value(json!({"id": repository.id, "name": "renamed"})).unwrap();
    typed_call::<actions::RepositoryUpdate>(&server, &rename).await;
    typed_call::<actions::RepositoryGet>(&server, &rq::ById { id: repository.id.clone() }).await;
    typed_call::<actions::RepositoryList>(
        &server,
        &rq::ByWorkspace { workspace_id: workspace.id.clone() },
    )
    .await;
    typed_call::<actions::RepositoryDelete>(&server, &rq::ById { id: repository.id }).await;
    typed_call::<actions::WorkflowTemplateList>(&server, &rq::Empty {}).await;
    let board: rq::WorkflowCreate = serde_json::from_value(
        json!({"workspace_id": workspace.id, "name": "Board", "template_id": "kanban"}),
    )
    .unwrap();
    let workflow = typed_call::<actions::WorkflowCreate>(&server, &board).await.workflow;
    let workflow_json = serde_json::to_value(&workflow).unwrap();
    let step: rq::StepCreate =
        serde_json::from_value(json!({"workflow_id": workflow.id, "name": "Extra"})).unwrap();
    let with_step = typed_call::<actions::StepCreate>(&server, &step).await.workflow;
    let extra = with_step.steps.iter().find(|s| s.name == "Extra").unwrap().id.clone();
    let recolor: rq::StepUpdate =
        serde_json::from_value(json!({"id": extra, "color": "#ff0000"})).unwrap();
    typed_call::<actions::StepUpdate>(&server, &recolor).await;
    let mut order: Vec<String> = with_step.steps.iter().map(|s| s.id.clone()).collect();
    order.reverse();
    let reorder = rq::StepReorder { workflow_id: workflow.id.clone(), step_ids: order };
    typed_call::<actions::StepReorder>(&server, &reorder).await;
    typed_call::<actions::StepDelete>(&server, &rq::ById { id: extra }).await;
    let export = rq::WorkflowExport { ids: vec![workflow.id.clone()] };
    let yaml = typed_call::<actions::WorkflowExport>(&server, &export).await.yaml;
    let import = rq::WorkflowImport { workspace_id: workspace.id.clone(), yaml };
    let imported = typed_call::<actions::WorkflowImport>(&server, &import).await.workflows;
    typed_call::<actions::WorkflowDelete>(&server, &rq::ById { id: imported[0].id.clone() }).await;
    typed_call::<actions::WorkflowList>(
        &server,
        &rq::ByWorkspace { workspace_id: workspace.id.clone() },
    )
    .await;

    // Tasks.
    let backlog = step_id(&workflow_json, "Backlog");
    let review = step_id(&workflow_json, "Review");
    let create: rq::TaskCreate = serde_json::from_value(
        json!({"workflow_id": workflow.id, "title": "Wire task", "step_id": backlog}),
    )
    .unwrap();
    let task = typed_call::<actions::TaskCreate>(&server, &create).await.task;
    let edit: rq::TaskUpdate =
        serde_json::from_value(json!({"id": task.id, "description": "typed"})).unwrap();
    typed_call::<actions::TaskUpdate>(&server, &edit).await;
    let to_review: rq::TaskMove =
        serde_json::from_value(json!({"id": task.id, "step_id": review})).unwrap();
    typed_call::<actions::TaskMove>(&server, &to_review).await;
    typed_call::<actions::TaskGet>(&server, &rq::ById { id: task.id.clone() }).await;
    let list: rq::TaskList =
        serde_json::from_value(json!({"workflow_id": workflow.id, "query": "wire"})).unwrap();
    assert_eq!(typed_call::<actions::TaskList>(&server, &list).await.tasks.len(), 1);
    typed_call::<actions::TaskTree>(&server, &rq::ByTask { task_id: task.id.clone() }).await;

    // A session: a turn with streamed text, usage, a permission, the queue, stop and delete.
    let launch: rq::SessionLaunch =
        serde_json::from_value(json!({"task_id": task.id, "agent_profile_id": saved.profile.id}))
            .unwrap();
    let session = typed_call::<actions::SessionLaunch>(&server, &launch).await.session;
    server.wait_state(&session.id, "WAITING_FOR_INPUT").await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{}", session.id)]})).await;
    let script = "#!mock\nsay hello\nusage 10 100\nask_permission Wire\nsay after";
    let add: rq::MessageAdd =
        serde_json::from_value(json!({"session_id": session.id, "content": script})).unwrap();
    typed_call::<actions::MessageAdd>(&server, &add).await;
    let requested = ws.notification("session.permission.requested").await;
    let request_id = requested["payload"]["request_id"].as_str().unwrap().to_owned();
    let option = requested["payload"]["message"]["metadata"]["options"][0]["option_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let queued: rq::QueueAdd =
        serde_json::from_value(json!({"session_id": session.id, "content": "later"})).unwrap();
    let queue = typed_call::<actions::QueueAdd>(&server, &queued).await.queue;
    let remove = rq::QueueRemove { session_id: session.id.clone(), id: queue[0].id.clone() };
    typed_call::<actions::QueueRemove>(&server, &remove).await;
    let respond: rq::PermissionRespond = serde_json::from_value(
        json!({"session_id": session.id, "request_id": request_id, "option_id": option}),
    )
    .unwrap();
    typed_call::<actions::PermissionRespond>(&server, &respond).await;
    ws.notification("session.turn.completed").await;
    let messages: rq::MessageList =
        serde_json::from_value(json!({"session_id": session.id})).unwrap();
    typed_call::<actions::MessageList>(&server, &messages).await;
    typed_call::<actions::QueueList>(&server, &rq::BySession { session_id: session.id.clone() })
        .await;
    typed_call::<actions::TaskSessionList>(&server, &rq::ByTask { task_id: task.id.clone() }).await;
    typed_call::<actions::SessionStop>(&server, &rq::ById { id: session.id.clone() }).await;
    typed_call::<actions::SessionGet>(&server, &rq::ById { id: session.id.clone() }).await;
    typed_call::<actions::SessionDelete>(&server, &rq::ById { id: session.id.clone() }).await;
    let archive: rq::TaskRemove = serde_json::from_value(json!({"id": task.id})).unwrap();
    typed_call::<actions::TaskArchive>(&server, &archive).await;
    typed_call::<actions::TaskDelete>(&server, &archive).await;

    // Everything published, read back from the log as a client sees it.
    let topics = vec![
        "workspaces".to_owned(),
        "profiles".to_owned(),
        format!("workspace:{}", workspace.id),
        format!("session:{}", session.id),
    ];
    let frames = replay_all(&server, &topics).await;
    let mut seen = BTreeSet::new();
    for frame in &frames {
        let (topic, action) = (frame["topic"].as_str().unwrap(), frame["action"].as_str().unwrap());
        let typed = Notification::from_parts(topic, action, &frame["payload"])
            .unwrap_or_else(|err| panic!("{err}: {frame}"));
        // Nothing more than the type says.
        let payload: Value = serde_json::from_str(typed.into_parts().payload.get()).unwrap();
        assert_eq!(payload, frame["payload"], "{action} says more");
        seen.insert(action.to_owned());
    }
    for action in [
        "workspace.created",
        "workspace.updated",
        "workspace.deleted",
        "agent.profile.created",
        "agent.profile.updated",
        "agent.profile.deleted",
        "repository.created",
        "repository.updated",
        "repository.deleted",
        "workflow.created",
        "workflow.updated",
        "workflow.deleted",
        "task.created",
        "task.updated",
        "task.moved",
        "task.archived",
        "task.deleted",
        "session.created",
        "session.state_changed",
        "session.turn.started",
        "session.turn.completed",
        "session.message.added",
        "session.message.updated",
        "session.queue.changed",
        "session.permission.requested",
        "session.permission.resolved",
        "session.usage",
        "session.deleted",
    ] {
        assert!(seen.contains(action), "no {action} among {seen:?}");
    }
    server.stop().await;
}
