//! Issue 2 acceptance 5: workflow YAML export and import over the API.

mod common;

use common::TestServer;
use serde_json::json;

#[tokio::test]
async fn export_then_import_round_trips_exactly() {
    let server = TestServer::start().await;
    let (workspace_id, _) = server.kanban().await;
    let mut ids = vec![];
    for template in ["plan-build", "feature-dev", "pr-review"] {
        let created = server
            .call(
                "workflow.create",
                json!({"workspace_id": workspace_id, "name": template, "template_id": template}),
            )
            .await;
        ids.push(created["workflow"]["id"].clone());
    }
    let exported = server.call("workflow.export", json!({"ids": ids})).await["yaml"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(exported.starts_with("version: 1\nkind: kandev-workflow\n"), "{exported}");
    let imported = server
        .call("workflow.import", json!({"workspace_id": workspace_id, "yaml": exported}))
        .await;
    let new_ids: Vec<_> =
        imported["workflows"].as_array().unwrap().iter().map(|w| w["id"].clone()).collect();
    assert_eq!(new_ids.len(), 3);
    assert_ne!(new_ids, ids, "import creates new workflows");
    let again = server.call("workflow.export", json!({"ids": new_ids})).await["yaml"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(again, exported, "byte-identical round trip");
}

#[tokio::test]
async fn an_invalid_document_reports_every_problem_and_imports_nothing() {
    let server = TestServer::start().await;
    let (workspace_id, _) = server.kanban().await;
    let before = server.call("workflow.list", json!({"workspace_id": workspace_id})).await;
    let yaml = r#"version: 1
kind: kandev-workflow
workflows:
  - name: Fine
    steps:
      - name: Only
  - name: Broken
    steps:
      - name: A
        is_start_step: true
        events:
          on_enter: [{type: teleport}]
      - name: ""
        is_start_step: true
        events:
          on_turn_complete: [{type: move_to_step, step: Nowhere}]
"#;
    let (status, body) =
        server.post("workflow.import", json!({"workspace_id": workspace_id, "yaml": yaml})).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    let problems = body["details"]["problems"].as_array().unwrap();
    let paths: Vec<&str> = problems.iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert!(problems.len() >= 4, "{problems:?}");
    for expected in [
        "workflows[1].steps[0].events.on_enter[0]",
        "workflows[1].steps[1].name",
        "workflows[1].steps[1].events.on_turn_complete[0]",
    ] {
        assert!(paths.iter().any(|p| p.starts_with(expected)), "missing {expected} in {paths:?}");
    }
    assert!(
        paths.iter().any(|p| p.contains("is_start_step") || p.starts_with("workflows[1]")),
        "{paths:?}"
    );
    let after = server.call("workflow.list", json!({"workspace_id": workspace_id})).await;
    assert_eq!(before, after, "nothing imported, not even the valid workflow");
}

#[tokio::test]
async fn step_edits_are_validated() {
    let server = TestServer::start().await;
    let (_, workflow) = server.kanban().await;
    let step = &workflow["steps"][0]["id"];
    let bad_trigger = json!({"id": step, "events": {"on_exit": [{"type": "auto_start_agent"}]}});
    let (status, body) = server.post("workflow.step.update", bad_trigger).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"].as_str().unwrap().contains("not allowed under on_exit"));
    let bad_target = json!({"id": step, "events": {"on_turn_complete": [{"type": "move_to_step", "step_id": "nope"}]}});
    assert_eq!(server.post("workflow.step.update", bad_target).await.0, 422);

    let target = &workflow["steps"][3]["id"];
    let good = json!({"id": step, "prompt": "do {{task_prompt}}", "events": {"on_turn_complete": [{"type": "move_to_step", "step_id": target}]}});
    let updated = server.call("workflow.step.update", good).await;
    assert_eq!(
        updated["workflow"]["steps"][0]["events"]["on_turn_complete"][0]["step_id"],
        *target
    );

    let added = server
        .call(
            "workflow.step.create",
            json!({"workflow_id": workflow["id"], "name": "QA", "position": 1}),
        )
        .await;
    let names: Vec<&str> = added["workflow"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Backlog", "QA", "In Progress", "Review", "Done"]);
    let qa = added["workflow"]["steps"][1]["id"].clone();
    let task = server
        .call("task.create", json!({"workflow_id": workflow["id"], "title": "t", "step_id": qa}))
        .await;
    let (status, body) = server.post("workflow.step.delete", json!({"id": qa})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("CONFLICT")),
        "a step with tasks is kept"
    );
    server.call("task.delete", json!({"id": task["task"]["id"]})).await;
    server.call("workflow.step.delete", json!({"id": qa})).await;
}
