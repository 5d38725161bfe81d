//! Issue 19: dev servers — a repository's `dev_script` run in a task's worktree with `PORT`
//! set, several tasks at once, stopped with the task and with the server.

use crate::common;

use std::path::Path;

use common::{TestServer, git_repository as repository, group_members};
use kandev_testkit::eventually_within;
use kandev_testkit::wait::file_value;
use serde_json::json;

const DEV_SCRIPT: &str = "echo $$ > .devpid; echo \"serving on $PORT\"; exec python3 -m http.server \"$PORT\" --bind 127.0.0.1";

/// Waits (bounded) until the dev server answers HTTP (it announces nothing when it listens);
/// returns the body.
async fn wait_http(port: u64) -> String {
    let url = format!("http://127.0.0.1:{port}/index.html");
    eventually_within(common::WAIT, format!("{url} to answer"), async || {
        let response = reqwest::get(&url).await.ok().filter(|r| r.status().is_success())?;
        Some(response.text().await.unwrap())
    })
    .await
}

#[tokio::test]
async fn i19_a3_two_tasks_run_dev_servers_at_once_and_each_stops_with_its_owner() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let (_tmp, repo) = repository();
    let created = server
        .call(
            "repository.create",
            json!({"workspace_id": workspace_id, "local_path": repo, "dev_script": DEV_SCRIPT}),
        )
        .await;
    assert_eq!(created["repository"]["dev_script"], DEV_SCRIPT);
    let repo_id = created["repository"]["id"].as_str().unwrap().to_owned();
    let (first, first_dir) = server.task_with_worktree(&workflow, &repo_id).await;
    let (second, second_dir) = server.task_with_worktree(&workflow, &repo_id).await;

    let one = server.call("devserver.start", json!({"task_id": first})).await["dev_server"].clone();
    let two =
        server.call("devserver.start", json!({"task_id": second})).await["dev_server"].clone();
    let (port_one, port_two) = (one["port"].as_u64().unwrap(), two["port"].as_u64().unwrap());
    assert_ne!(port_one, port_two, "each dev server gets its own port");
    assert!((41000..=41999).contains(&port_one) && (41000..=41999).contains(&port_two));
    assert_eq!(one["url"], format!("http://localhost:{port_one}/"));
    assert_eq!(one["state"], "running");
    assert_eq!(wait_http(port_one).await, "dev server ok\n");
    assert_eq!(wait_http(port_two).await, "dev server ok\n");
    let again = server.call("devserver.start", json!({"task_id": first})).await;
    assert_eq!(again["dev_server"]["port"], port_one, "a running dev server is answered as is");

    let listed = server.call("devserver.list", json!({"task_id": first})).await;
    let log = listed["dev_servers"][0]["log"].as_str().unwrap().to_owned();
    assert!(log.contains(&format!("serving on {port_one}")), "the output is kept: {log}");

    let pgid_one = file_value::<i32>(&Path::new(&first_dir).join(".devpid")).await;
    let pgid_two = file_value::<i32>(&Path::new(&second_dir).join(".devpid")).await;
    server.call("task.archive", json!({"id": first, "force": true})).await;
    assert!(group_members(pgid_one).is_empty(), "archiving the task stopped its dev server");
    let listed = server.call("devserver.list", json!({"task_id": first})).await;
    assert_eq!(listed["dev_servers"], json!([]));
    assert_eq!(wait_http(port_two).await, "dev server ok\n", "the other task's still runs");

    server.stop().await;
    assert!(group_members(pgid_two).is_empty(), "stopping the server stopped the dev server");
}

#[tokio::test]
async fn i19_a3_stop_ends_a_dev_server_and_bad_requests_are_explained() {
    let server = TestServer::start().await;
    let (workspace_id, workflow) = server.kanban().await;
    let (_tmp, repo) = repository();
    let created = server
        .call("repository.create", json!({"workspace_id": workspace_id, "local_path": repo}))
        .await;
    let repo_id = created["repository"]["id"].as_str().unwrap().to_owned();
    let (task, dir) = server.task_with_worktree(&workflow, &repo_id).await;

    let (status, body) = server.post("devserver.start", json!({"task_id": task})).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"].as_str().unwrap().contains("no dev server command"), "{body}");
    server.call("repository.update", json!({"id": repo_id, "dev_script": DEV_SCRIPT})).await;
    let started = server.call("devserver.start", json!({"task_id": task})).await;
    let port = started["dev_server"]["port"].as_u64().unwrap();
    wait_http(port).await;
    let pgid = file_value::<i32>(&Path::new(&dir).join(".devpid")).await;
    let stopped = server.call("devserver.stop", json!({"task_id": task})).await;
    assert_eq!(stopped["dev_server"]["port"], port);
    assert!(group_members(pgid).is_empty(), "the stop answers once nothing of it runs");
    let (status, _) = server.post("devserver.stop", json!({"task_id": task})).await;
    assert_eq!(status, 404, "nothing left to stop");
}
