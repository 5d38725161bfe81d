//! A task whose one repository uses an SSH executor, made through the real server's API and
//! its session launched (shared by the SSH session tests).

use std::path::Path;

use serde_json::{Value, json};

use crate::server::{Server, call};
use crate::sshd::Sshd;

/// A repository on `main` with one commit (a README), for [`launch`].
pub fn project_repo() -> tempfile::TempDir {
    crate::git::repo_with(&[("README.md", "the project\n")])
}

/// The ids of a task made by [`launch`].
pub struct RemoteTask {
    pub repository: Value,
    pub task: String,
    pub session: String,
}

/// Registers `repo` as the repository `project`, an SSH executor `build1` for `sshd` with
/// `remote_home` as its remote home, makes it the repository's executor, creates a task on
/// the first board's first step and launches its session.
pub async fn launch(server: &Server, sshd: &Sshd, remote_home: &Path, repo: &Path) -> RemoteTask {
    let workspaces = call(server, "workspace.list", json!({})).await;
    let workspace = &workspaces["workspaces"][0]["id"];
    let repository = call(
        server,
        "repository.create",
        json!({"workspace_id": workspace, "local_path": repo, "name": "project"}),
    )
    .await;
    let repository = repository["repository"]["id"].clone();
    let s = sshd.settings(remote_home);
    let ssh = json!({"host": s.host, "port": s.port, "user": s.user,
        "identity_file": s.identity_file, "known_hosts": s.known_hosts,
        "remote_home": s.remote_home});
    let executor =
        call(server, "executor.create", json!({"name": "build1", "kind": "ssh", "ssh": ssh})).await;
    call(
        server,
        "repository.executor.set",
        json!({"repository_id": repository, "executor_id": executor["executor"]["id"]}),
    )
    .await;
    let workflows = call(server, "workflow.list", json!({"workspace_id": workspace})).await;
    let board = &workflows["workflows"][0];
    let task = call(
        server,
        "task.create",
        json!({"workflow_id": board["id"], "title": "remote work", "step_id": board["steps"][0]["id"],
            "repository_ids": [repository]}),
    )
    .await;
    let task = task["task"]["id"].as_str().unwrap().to_owned();
    let launched = call(server, "session.launch", json!({"task_id": task})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    RemoteTask { repository, task, session }
}
