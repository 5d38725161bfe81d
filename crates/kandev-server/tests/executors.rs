//! Issue 20 (scope 3): named executors (`local`, or `ssh` with host, port, user,
//! identity_file, known_hosts, remote_home) are created, checked, listed, updated, chosen by
//! a repository, and cannot be deleted while a repository uses them.

use crate::common;

use common::TestServer;
use serde_json::{Value, json};

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or_default()
}

/// Files that stand in for identity files: an executor's must exist (issue 45, item 3), and
/// nothing here connects.
const IDENTITY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/identity_a");
const OTHER_IDENTITY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/identity_b");

fn ssh() -> Value {
    json!({"host": " build1.example ", "port": 2222, "user": "build",
        "identity_file": IDENTITY, "known_hosts": "/root/.ssh/known_hosts",
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
        body["message"].as_str().unwrap().starts_with("SSH remote home must be an absolute path"),
        "{body}"
    );
    let mut bad = ssh();
    bad["host"] = json!("-oProxyCommand=sh");
    let (status, body) =
        server.post("executor.create", json!({"name": "b", "kind": "ssh", "ssh": bad})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    assert!(body["message"].as_str().unwrap().starts_with("SSH host"), "{body}");
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

/// Finding 5 of the SSH review: while a task has live worktrees on an SSH executor, the
/// executor cannot be deleted (even with no repository using it any more) nor moved to
/// another kind, host, port, user or remote home (the actions on those worktrees would act
/// on the wrong host); other settings may change, and once the worktrees are removed it may
/// go.
#[tokio::test]
async fn i20_d11_an_executor_with_live_worktrees_is_neither_deleted_nor_moved() {
    let server = TestServer::start().await;
    let created = server
        .call("executor.create", json!({"name": "build1", "kind": "ssh", "ssh": ssh()}))
        .await;
    let id = created["executor"]["id"].as_str().unwrap().to_owned();
    let (workspace_id, workflow) = server.kanban().await;
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
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "remote work",
                "step_id": workflow["steps"][0]["id"], "repository_ids": [repo_id]}),
        )
        .await;
    let task_id = task["task"]["id"].as_str().unwrap().to_owned();
    // What making its worktree on the build host records.
    let mut tx = server.store.begin_write().await.unwrap();
    let worktree = tx
        .insert_worktree(&kandev_store::NewWorktree {
            task_id: kandev_domain::TaskId::new(task_id.as_str()),
            repository_id: kandev_domain::RepositoryId::new(repo_id.as_str()),
            repository_path: "/home/build/.kandev/repos/r.git".into(),
            path: "/home/build/.kandev/worktrees/t/project".into(),
            branch: "task-1".into(),
            base_commit: "0".repeat(40),
            executor_id: Some(id.clone()),
            session_id: None,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();

    for (kind, changed) in [
        ("local", None),
        ("ssh", Some(("host", json!("build2.example")))),
        ("ssh", Some(("port", json!(2200)))),
        ("ssh", Some(("user", json!("other")))),
        ("ssh", Some(("remote_home", json!("/srv/kandev")))),
    ] {
        let mut payload = json!({"id": id, "kind": kind});
        if let Some((field, value)) = changed.clone() {
            let mut settings = ssh();
            settings[field] = value;
            payload["ssh"] = settings;
        }
        let (status, body) = server.post("executor.update", payload).await;
        assert_eq!((status, code(&body)), (409, "CONFLICT"), "{kind} {changed:?}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("remote work") && message.contains("archive"), "{body}");
    }
    let mut keys = ssh();
    keys["identity_file"] = json!(OTHER_IDENTITY);
    let updated = server.call("executor.update", json!({"id": id, "ssh": keys})).await;
    assert_eq!(updated["executor"]["ssh"]["identity_file"], OTHER_IDENTITY);

    server.call("repository.executor.set", json!({"repository_id": repo_id})).await;
    let (status, body) = server.post("executor.delete", json!({"id": id})).await;
    assert_eq!((status, code(&body)), (409, "CONFLICT"), "{body}");
    assert!(body["message"].as_str().unwrap().contains("remote work"), "{body}");

    let mut tx = server.store.begin_write().await.unwrap();
    tx.mark_worktree_removed(&worktree.id).await.unwrap();
    tx.commit().await.unwrap();
    server.call("executor.delete", json!({"id": id})).await;
}

/// Finding 6 of the SSH review: the disk usage of a worktree on an SSH executor's host is not
/// measured at the same path on this host (`bytes: null`), even when such a path exists here.
#[tokio::test]
async fn i20_d12_the_disk_usage_of_a_remote_worktree_is_not_measured_here() {
    let server = TestServer::start().await;
    let created = server
        .call("executor.create", json!({"name": "build1", "kind": "ssh", "ssh": ssh()}))
        .await;
    let id = created["executor"]["id"].as_str().unwrap().to_owned();
    let (workspace_id, workflow) = server.kanban().await;
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
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "remote work",
                "step_id": workflow["steps"][0]["id"], "repository_ids": [repo_id]}),
        )
        .await;
    let task_id = task["task"]["id"].as_str().unwrap().to_owned();
    // A folder of this host at the path the worktree has on the build host.
    let here = tempfile::tempdir().unwrap();
    std::fs::write(here.path().join("big.txt"), "x".repeat(10_000)).unwrap();
    let mut tx = server.store.begin_write().await.unwrap();
    tx.insert_worktree(&kandev_store::NewWorktree {
        task_id: kandev_domain::TaskId::new(task_id.as_str()),
        repository_id: kandev_domain::RepositoryId::new(repo_id.as_str()),
        repository_path: "/home/build/.kandev/repos/r.git".into(),
        path: here.path().display().to_string(),
        branch: "task-1".into(),
        base_commit: "0".repeat(40),
        executor_id: Some(id.clone()),
        session_id: None,
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let usage = server.call("repository.usage", json!({"id": repo_id})).await;
    assert_eq!(usage["worktrees"][0]["bytes"], Value::Null, "{usage}");
}

/// Finding 8 of the SSH review: two executors reaching the same runner (host, port, user and
/// remote home) would keep replacing each other's link: the second one is refused, at create
/// and at update; another remote home is fine.
#[tokio::test]
async fn i20_d13_a_second_executor_for_the_same_runner_is_refused() {
    let server = TestServer::start().await;
    server.call("executor.create", json!({"name": "build1", "kind": "ssh", "ssh": ssh()})).await;
    let (status, body) = server
        .post("executor.create", json!({"name": "build2", "kind": "ssh", "ssh": ssh()}))
        .await;
    assert_eq!((status, code(&body)), (409, "CONFLICT"), "{body}");
    assert!(body["message"].as_str().unwrap().contains("build1"), "{body}");
    let mut other = ssh();
    other["remote_home"] = json!("/home/build/.kandev2");
    let created = server
        .call("executor.create", json!({"name": "build2", "kind": "ssh", "ssh": other}))
        .await;
    let (status, body) = server
        .post("executor.update", json!({"id": created["executor"]["id"], "ssh": ssh()}))
        .await;
    assert_eq!((status, code(&body)), (409, "CONFLICT"), "{body}");
    // Its own settings again are no conflict with itself.
    let updated = server
        .call(
            "executor.update",
            json!({"id": created["executor"]["id"], "name": "b2", "ssh": other}),
        )
        .await;
    assert_eq!(updated["executor"]["name"], "b2");
}

/// Issue 45, item 3: an SSH executor whose identity file does not exist on the server's
/// machine is refused when it is saved (created, or updated with new settings), with a message
/// that names the file and says what to give instead, in words rather than field names; a
/// folder is refused too. Nothing is saved by a refusal.
#[tokio::test]
async fn i45_3_an_ssh_executor_whose_identity_file_does_not_exist_is_refused() {
    let server = TestServer::start().await;
    let missing = tempfile::tempdir().unwrap();
    let gone = missing.path().join("id_ed25519");
    let mut settings = ssh();
    settings["identity_file"] = json!(gone);
    let (status, body) = server
        .post("executor.create", json!({"name": "build1", "kind": "ssh", "ssh": settings}))
        .await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    assert_eq!(
        body["message"],
        format!(
            "identity file {} does not exist; give the path of a private key on this machine",
            gone.display()
        )
    );
    let listed = server.call("executor.list", json!({})).await;
    assert_eq!(listed["executors"], json!([]), "nothing was saved");

    let created = server
        .call("executor.create", json!({"name": "build1", "kind": "ssh", "ssh": ssh()}))
        .await;
    let id = created["executor"]["id"].clone();
    let mut folder = ssh();
    folder["identity_file"] = json!(missing.path());
    let (status, body) = server.post("executor.update", json!({"id": id, "ssh": folder})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.ends_with("is not a file; give the path of a private key on this machine"));
    let (status, body) =
        server.post("executor.update", json!({"id": id, "kind": "ssh", "ssh": settings})).await;
    assert_eq!((status, code(&body)), (422, "VALIDATION_ERROR"), "{body}");
    assert!(body["message"].as_str().unwrap().contains("does not exist"), "{body}");
    let listed = server.call("executor.list", json!({})).await;
    assert_eq!(listed["executors"][0]["ssh"]["identity_file"], IDENTITY, "kept as it was");
}
