//! Issue 20 (scope 3): named executors (`local`, or `ssh` with host, port, user,
//! identity_file, known_hosts, remote_home) are created, checked, listed, updated, chosen by
//! a repository, and cannot be deleted while a repository uses them.

mod common;

use common::TestServer;
use serde_json::{Value, json};

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or_default()
}

fn ssh() -> Value {
    json!({"host": " build1.example ", "port": 2222, "user": "build",
        "identity_file": "/root/.ssh/id_ed25519", "known_hosts": "/root/.ssh/known_hosts",
        "remote_home": "/home/build/.kandev/"})
}

#[tokio::test]
async fn i20_s3_executors_are_created_checked_chosen_by_a_repository_and_kept_while_used() {
    let server = TestServer::start().await;
    let created = server
        .call("executor.create", json!({"name": "build1", "kind": "ssh", "ssh": ssh()}))
        .await;
    let executor = &created["executor"];
    let id = executor["id"].as_str().unwrap().to_owned();
    assert_eq!(executor["kind"], "ssh");
    assert_eq!(executor["ssh"]["host"], "build1.example", "trimmed");
    assert_eq!(executor["ssh"]["remote_home"], "/home/build/.kandev");
    assert_eq!(executor["repository_ids"], json!([]));
    server.call("executor.create", json!({"name": "here", "kind": "local"})).await;
    let listed = server.call("executor.list", json!({})).await;
    let names: Vec<&str> = listed["executors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["build1", "here"]);
    assert_eq!(listed["executors"][1]["ssh"], Value::Null);

    // Bad settings are refused, naming the field.
    let mut bad = ssh();
    bad["remote_home"] = json!("relative/dir");
    let (status, body) =
        server.post("executor.create", json!({"name": "b", "kind": "ssh", "ssh": bad})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    assert!(
        body["message"].as_str().unwrap().starts_with("ssh.remote_home must be an absolute path"),
        "{body}"
    );
    let mut bad = ssh();
    bad["host"] = json!("-oProxyCommand=sh");
    let (status, body) =
        server.post("executor.create", json!({"name": "b", "kind": "ssh", "ssh": bad})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    assert!(body["message"].as_str().unwrap().starts_with("ssh.host"), "{body}");
    let (status, body) = server.post("executor.create", json!({"name": "b", "kind": "ssh"})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    assert!(body["message"].as_str().unwrap().starts_with("ssh is required"), "{body}");
    let (status, body) =
        server.post("executor.create", json!({"name": "b", "kind": "local", "ssh": ssh()})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    let (status, body) =
        server.post("executor.create", json!({"name": "build1", "kind": "local"})).await;
    assert_eq!((status, code(&body)), (409, "CONFLICT"), "{body}");
    let (status, body) =
        server.post("executor.create", json!({"name": "b", "kind": "docker"})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");

    // Updates: a field left out is kept; settings of a local executor need kind ssh.
    let mut moved = ssh();
    moved["port"] = json!(22);
    let updated = server.call("executor.update", json!({"id": id, "ssh": moved})).await;
    assert_eq!(updated["executor"]["ssh"]["port"], 22);
    assert_eq!(updated["executor"]["name"], "build1");
    let here = listed["executors"][1]["id"].clone();
    let (status, body) = server.post("executor.update", json!({"id": here, "ssh": ssh()})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");

    // A repository chooses it; while used it cannot be deleted.
    let (workspace_id, _) = server.kanban().await;
    let repo_dir = tempfile::tempdir().unwrap();
    let init =
        std::process::Command::new("git").arg("init").arg("-q").arg(repo_dir.path()).status();
    assert!(init.unwrap().success());
    let repo = server
        .call(
            "repository.create",
            json!({"workspace_id": workspace_id, "local_path": repo_dir.path()}),
        )
        .await;
    let repo_id = repo["repository"]["id"].as_str().unwrap().to_owned();
    let chosen = server
        .call("repository.executor.set", json!({"repository_id": repo_id, "executor_id": id}))
        .await;
    assert_eq!(chosen["executor"]["id"], id.as_str());
    assert_eq!(chosen["executor"]["repository_ids"], json!([repo_id]));
    let (status, body) = server.post("executor.delete", json!({"id": id})).await;
    assert_eq!((status, code(&body)), (409, "CONFLICT"), "{body}");
    assert!(body["message"].as_str().unwrap().contains("used by 1 repositories"), "{body}");
    let (status, body) = server
        .post("repository.executor.set", json!({"repository_id": repo_id, "executor_id": "nope"}))
        .await;
    assert_eq!((status, code(&body)), (404, "NOT_FOUND"), "{body}");
    let local = server.call("repository.executor.set", json!({"repository_id": repo_id})).await;
    assert_eq!(local["executor"], Value::Null, "back to local");
    server.call("executor.delete", json!({"id": id})).await;
    let listed = server.call("executor.list", json!({})).await;
    assert_eq!(listed["executors"].as_array().unwrap().len(), 1);
}
