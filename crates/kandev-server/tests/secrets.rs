//! Issue 50: how a profile references a secret, and what a start says when it cannot have
//! one. (The secret reaching real agents, locally and over SSH, rotation and backups are
//! checked through the real binary: `crates/kandev/tests/secrets.rs`.)

use crate::common;

use common::TestServer;
use serde_json::json;

#[tokio::test]
async fn i50_a_reference_is_a_name_and_a_value_or_a_secret_not_both() {
    let server = TestServer::start().await;
    let both = json!({"name": "P", "kind": "mock",
        "env": [{"name": "KEY", "value": "plain", "secret": "STORED"}]});
    let (status, body) = server.post("agent.profile.create", both).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"].as_str().unwrap().contains("both a value and a secret"), "{body}");
    let bad =
        json!({"name": "P", "kind": "mock", "env": [{"name": "KEY", "secret": "not-a-name"}]});
    let (status, body) = server.post("agent.profile.create", bad).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"].as_str().unwrap().contains("the secret may hold only"), "{body}");

    // A reference keeps its shape through an update that sends it back.
    let good = json!({"name": "P", "kind": "mock",
        "env": [{"name": "KEY", "secret": "STORED"}, {"name": "PLAIN", "value": "v"}]});
    let created = server.call("agent.profile.create", good).await;
    let env = created["profile"]["env"].clone();
    assert_eq!(
        env,
        json!([{"name": "KEY", "value": "", "secret": "STORED"}, {"name": "PLAIN", "value": "********"}])
    );
    let id = created["profile"]["id"].clone();
    let updated = server.call("agent.profile.update", json!({"id": id, "env": env})).await;
    assert_eq!(updated["profile"]["env"], created["profile"]["env"], "{updated}");
}

#[tokio::test]
async fn i50_a_start_without_its_secret_is_refused_and_says_where_to_add_it() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let profile = server
        .call(
            "agent.profile.create",
            json!({"name": "needs a key", "kind": "mock",
                "env": [{"name": "KEY", "secret": "NOT_SET_ANYWHERE"}]}),
        )
        .await;
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "t",
                "step_id": common::step_id(&workflow, "Backlog")}),
        )
        .await;
    let launch =
        json!({"task_id": task["task"]["id"], "agent_profile_id": profile["profile"]["id"]});
    let (status, body) = server.post("session.launch", launch.clone()).await;
    assert_eq!(status, 422, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("NOT_SET_ANYWHERE") && message.contains("Settings → Secrets"),
        "{body}"
    );
    let sessions = server.call("task.session.list", json!({"task_id": task["task"]["id"]})).await;
    assert_eq!(sessions["sessions"], json!([]), "no session that never ran is left: {sessions}");

    // Set for the workspace, the same start goes.
    server
        .call(
            "secret.set",
            json!({"workspace_id": workspace_id, "name": "NOT_SET_ANYWHERE", "value": "now set"}),
        )
        .await;
    let (status, body) = server.post("session.launch", launch).await;
    assert_eq!(status, 200, "{body}");
}
