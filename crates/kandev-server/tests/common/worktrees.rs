//! What the worktree tests (`worktrees.rs`, `worktree_files.rs`, `worktree_setup.rs`) share:
//! git in a directory, a repository in a temp dir, and a board whose tasks use repositories.

use std::path::{Path, PathBuf};

use kandev_testkit::git::init;
use serde_json::{Value, json};

use super::{TestServer, step_id};

/// A repository on `main` with a local identity; `commit` adds README.md in a first commit.
pub fn repository(commit: bool) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    init(&repo);
    if commit {
        kandev_testkit::git::commit(&repo, &[("README.md", "hello\n")], "initial");
    }
    (tmp, repo)
}

pub struct Board<'a> {
    pub server: &'a TestServer,
    pub workspace_id: String,
    pub workflow: Value,
}

impl<'a> Board<'a> {
    pub async fn new(server: &'a TestServer) -> Board<'a> {
        let (workspace_id, workflow) = server.kanban().await;
        Board { server, workspace_id, workflow }
    }

    /// Registers a repository; `extra` adds fields such as `setup_script`.
    pub async fn repository(&self, path: &Path, extra: Value) -> String {
        let mut body = json!({"workspace_id": self.workspace_id, "local_path": path});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        let created = self.server.call("repository.create", body).await;
        created["repository"]["id"].as_str().unwrap().to_owned()
    }

    /// A task in Backlog (nothing starts by itself).
    pub async fn task(&self, title: &str, repository_ids: &[&str]) -> String {
        let backlog = step_id(&self.workflow, "Backlog");
        let created = self
            .server
            .call(
                "task.create",
                json!({"workflow_id": self.workflow["id"], "title": title, "step_id": backlog,
                       "repository_ids": repository_ids}),
            )
            .await;
        created["task"]["id"].as_str().unwrap().to_owned()
    }

    /// Launches a session; returns it as the launch answered.
    pub async fn launch(&self, task_id: &str) -> Value {
        self.server.call("session.launch", json!({"task_id": task_id})).await["session"].clone()
    }

    /// Launches a session and waits until its agent is ready; returns (session id, cwd).
    pub async fn started(&self, task_id: &str) -> (String, PathBuf) {
        let session = self.launch(task_id).await;
        assert_ne!(session["state"], "FAILED", "{session}");
        let id = session["id"].as_str().unwrap().to_owned();
        self.server.wait_state(&id, "WAITING_FOR_INPUT").await;
        (id, PathBuf::from(session["cwd"].as_str().unwrap()))
    }
}

pub fn paths(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap().to_owned()).collect()
}
