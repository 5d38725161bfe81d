//! Issue 21, acceptance 4: `kandev db copy` moves a database with tasks, sessions, messages
//! and a queue from SQLite to PostgreSQL (to another SQLite file when `KANDEV_TEST_PG_URL` is
//! unset), and a server on the copy answers the same board, transcript and queue.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use support::{KANDEV, Server, Watch, call, messages, state};

mod support;

/// What a client sees: the board, each session and its transcript and queue.
async fn snapshot(server: &Server, workflow: &Value, session: &str) -> Value {
    json!({
        "tasks": call(server, "task.list", json!({"workflow_id": workflow})).await,
        "session": call(server, "session.get", json!({"id": session})).await,
        "messages": call(server, "message.list", json!({"session_id": session, "limit": 1000})).await,
        "queue": call(server, "message.queue.list", json!({"session_id": session})).await,
    })
}

/// The copy's target: a fresh PostgreSQL database, or a SQLite file when the run opted out
/// of PostgreSQL (`KANDEV_TEST_NO_PG=1`); neither set fails, saying what to do.
async fn target(dir: &Path) -> String {
    match std::env::var("KANDEV_TEST_PG_URL") {
        Ok(admin) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let name = format!("kandev_copy_{}_{nanos}", std::process::id());
            kandev_store::create_postgres_database(&admin, &name).await.unwrap()
        }
        Err(_) => {
            assert!(
                std::env::var_os("KANDEV_TEST_NO_PG").is_some(),
                "this test needs PostgreSQL: run ./scripts/test (it starts one), or eval \
                 \"$(./scripts/pg start)\" first, or set KANDEV_TEST_NO_PG=1 to test SQLite only"
            );
            eprintln!("KANDEV_TEST_NO_PG is set: copying to another sqlite file");
            dir.join("copy.db").display().to_string()
        }
    }
}

#[tokio::test]
async fn i21_a4_a_server_on_the_copy_shows_the_same_board_transcript_and_queue() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    let workspaces = call(&server, "workspace.list", json!({})).await;
    let workflows =
        call(&server, "workflow.list", json!({"workspace_id": workspaces["workspaces"][0]["id"]}))
            .await;
    let board = &workflows["workflows"][0];
    for title in ["first", "second"] {
        call(
            &server,
            "task.create",
            json!({"workflow_id": board["id"], "title": title, "step_id": board["steps"][0]["id"]}),
        )
        .await;
    }
    let task = call(
        &server,
        "task.create",
        json!({"workflow_id": board["id"], "title": "talks", "step_id": board["steps"][1]["id"]}),
    )
    .await;
    let launched = call(&server, "session.launch", json!({"task_id": task["task"]["id"]})).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    call(&server, "message.add", json!({"session_id": session, "content": "hello there"})).await;
    watch
        .until("the agent answers", async || {
            let stored = messages(&server, &session).await;
            let answered = stored.iter().any(|m| m["content"] == "echo: hello there");
            answered && state(&server, &session).await == "WAITING_FOR_INPUT"
        })
        .await;
    drop(watch);
    call(&server, "message.queue.auto_run.set", json!({"session_id": session, "enabled": false}))
        .await;
    call(&server, "message.queue.add", json!({"session_id": session, "content": "later, please"}))
        .await;
    // The agent stopped first: a shutdown would record that it stopped after the snapshot.
    call(&server, "session.stop", json!({"id": session})).await;
    let before = snapshot(&server, &board["id"], &session).await;
    assert_eq!(before["queue"]["queue"].as_array().unwrap().len(), 1);
    assert_eq!(before["tasks"]["tasks"].as_array().unwrap().len(), 3);
    server.terminate();

    let to = target(home.path()).await;
    let from = home.path().join("kandev.db").display().to_string();
    let copy = Command::new(KANDEV).args(["db", "copy", "--from", &from, "--to", &to]).output();
    let copy = copy.unwrap();
    let out = String::from_utf8_lossy(&copy.stdout);
    assert!(copy.status.success(), "{out}{}", String::from_utf8_lossy(&copy.stderr));
    assert!(out.contains("every table's row count matches"), "{out}");
    assert!(out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["3", "tasks"]));

    // The server on the copy: another home (no file of the first), the copied database.
    let home2 = tempfile::tempdir().unwrap();
    let server = KANDEV.start_with(home2.path(), &["--database-url", &to]);
    let after = snapshot(&server, &board["id"], &session).await;
    assert_eq!(after, before);
    server.terminate();

    // A copy into a database that has data is refused, and says why.
    let again = Command::new(KANDEV).args(["db", "copy", "--from", &from, "--to", &to]).output();
    let again = again.unwrap();
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("already has data"), "{err}");
}
