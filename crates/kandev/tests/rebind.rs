//! Issue 52 acceptance 1 and lifecycle rule 49, through the real `kandev serve` with real mock agent processes:
//! `session.rebind` moves a session to another profile in the same worktree, and the new
//! agent's first prompt carries the summary of the conversation; a session whose profile
//! was deleted is refused a start (never another agent in its place) and can be rebound.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::Path;

use serde_json::{Value, json};

mod support;

use support::{
    KANDEV, Server, agent_text, call, messages, refused, task_on_first_step, try_call, turn_done,
};

/// A mock profile whose agent logs each `session/new` to `log` (so a test sees which
/// profile's process started).
async fn mock_profile(server: &Server, name: &str, log: &Path) -> Value {
    let args = json!(["--mcp-log", log.display().to_string()]);
    let saved =
        call(server, "agent.profile.create", json!({"name": name, "kind": "mock", "args": args}))
            .await;
    saved["profile"]["id"].clone()
}

fn lines(file: &Path) -> usize {
    std::fs::read_to_string(file).map(|t| t.lines().count()).unwrap_or(0)
}

/// A task of the git repository `repo` (so its sessions work in a worktree): its id.
async fn task_of(server: &Server, repo: &Path, title: &str) -> Value {
    let workspaces = call(server, "workspace.list", json!({})).await;
    let repository = json!({"workspace_id": workspaces["workspaces"][0]["id"],
        "local_path": repo, "name": "project"});
    let repository = call(server, "repository.create", repository).await;
    let fields = json!({"title": title, "description": "It loops on submit.",
        "repository_ids": [repository["repository"]["id"]]});
    task_on_first_step(server, fields).await["task"]["id"].clone()
}

/// A task of `repo`, its session launched with `profile` and `prompt`, to the end of its
/// first turn.
async fn task_with_session(server: &Server, repo: &Path, profile: &Value, prompt: &str) -> String {
    let task = task_of(server, repo, "Fix the login page").await;
    let launch = json!({"task_id": task, "agent_profile_id": profile, "prompt": prompt});
    let launched = call(server, "session.launch", launch).await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    turn_done(server, &session, 1).await;
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_1_l49_a_rebound_session_goes_on_in_its_worktree_and_the_new_agent_gets_the_summary() {
    let dir = kandev_testkit::temp_dir("rebind");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let server = KANDEV.start(&home);
    let repo = kandev_testkit::remote_task::project_repo();
    let (log_a, log_b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    let (a, b) = (
        mock_profile(&server, "Agent A", &log_a).await,
        mock_profile(&server, "Agent B", &log_b).await,
    );
    let script = "#!mock\nwrite notes.txt written by A\\n\nsay wrote the notes";
    let session = task_with_session(&server, repo.path(), &a, script).await;
    let before = call(&server, "session.get", json!({"id": session})).await["session"].clone();
    let cwd = before["cwd"].as_str().unwrap().to_owned();
    assert!(Path::new(&cwd).join("notes.txt").is_file());
    assert_eq!((lines(&log_a), lines(&log_b)), (1, 0));

    let rebound =
        call(&server, "session.rebind", json!({"session_id": session, "profile_id": b})).await;
    assert_eq!(rebound["session"]["agent_profile_id"], b, "{rebound}");
    turn_done(&server, &session, 2).await;

    // The same session, worktree and transcript; agent B's process started, A's did not again.
    let after = call(&server, "session.get", json!({"id": session})).await["session"].clone();
    assert_eq!(after["cwd"], cwd.as_str());
    assert_eq!(
        std::fs::read_to_string(Path::new(&cwd).join("notes.txt")).unwrap(),
        "written by A\n"
    );
    assert_eq!((lines(&log_a), lines(&log_b)), (1, 1), "B's agent started once, A's not again");
    assert_ne!(after["resume_token"], before["resume_token"], "B does not load A's conversation");
    let stored = messages(&server, &session).await;
    let note =
        stored.iter().find(|m| m["metadata"]["reason"] == "rebound").expect("a note says so");
    assert_eq!(
        (&note["metadata"]["from"], &note["metadata"]["to"]),
        (&json!("Agent A"), &json!("Agent B"))
    );
    // The handoff is B's first prompt: the task, and the conversation so far, in order.
    let users: Vec<&str> = stored
        .iter()
        .filter(|m| m["kind"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users.len(), 2, "{users:#?}");
    let handoff = users[1];
    assert!(
        handoff
            .starts_with("You are taking over this task from another agent (Agent A (Mock agent))"),
        "{handoff}"
    );
    assert!(handoff.contains("Task: Fix the login page\nIt loops on submit."), "{handoff}");
    let (asked, answered) =
        (handoff.find("User: #!mock").unwrap(), handoff.find("Agent: wrote the notes").unwrap());
    assert!(asked < answered, "{handoff}");
    // And B answered it (the mock echoes a prompt's first line).
    assert!(agent_text(&stored).contains("echo: You are taking over this task"), "{stored:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_1_l49_a_session_of_a_deleted_profile_is_refused_a_start_and_can_be_rebound() {
    let dir = kandev_testkit::temp_dir("rebind-deleted");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let server = KANDEV.start(&home);
    let repo = kandev_testkit::remote_task::project_repo();
    let (log_c, log_b) = (dir.path().join("c.log"), dir.path().join("b.log"));
    let (c, b) = (
        mock_profile(&server, "Agent C", &log_c).await,
        mock_profile(&server, "Agent B", &log_b).await,
    );
    let session = task_with_session(&server, repo.path(), &c, "hello C").await;
    call(&server, "session.stop", json!({"id": session})).await;
    call(&server, "agent.profile.delete", json!({"id": c})).await;

    let got = call(&server, "session.get", json!({"id": session})).await["session"].clone();
    assert_eq!(
        (&got["agent_profile_id"], &got["deleted_profile"]),
        (&Value::Null, &json!("Agent C"))
    );
    let go_on = json!({"session_id": session, "content": "go on"});
    let (status, body) = refused(try_call(&server, "message.add", go_on).await);
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("Agent C of this session was deleted"),
        "{body}"
    );
    assert_eq!(lines(&log_c), 1, "no agent started in its place");

    call(&server, "session.rebind", json!({"session_id": session, "profile_id": b})).await;
    turn_done(&server, &session, 2).await;
    let got = call(&server, "session.get", json!({"id": session})).await["session"].clone();
    assert_eq!((&got["agent_profile_id"], &got["deleted_profile"]), (&b, &Value::Null));
    let stored = messages(&server, &session).await;
    let handoff = stored.iter().rev().find(|m| m["kind"] == "user").unwrap();
    let handoff = handoff["content"].as_str().unwrap();
    assert!(
        handoff.contains("(the deleted profile Agent C)") && handoff.contains("User: hello C"),
        "{handoff}"
    );
    assert_eq!(lines(&log_b), 1);
    // An unknown profile is a clear error, and the session stays as it is.
    let unknown = json!({"session_id": session, "profile_id": "no-such-profile"});
    let (status, body) = refused(try_call(&server, "session.rebind", unknown).await);
    assert_eq!(status, 422, "{body}");
}

/// A session whose start failed (its agent cannot be found) is the one most worth moving:
/// `FAILED` goes on with the other agent. Moving to the profile it already runs is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_1_l49_a_failed_session_is_rebound_and_a_move_to_its_own_profile_is_refused() {
    let dir = kandev_testkit::temp_dir("rebind-failed");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let server = KANDEV.start(&home);
    let repo = kandev_testkit::remote_task::project_repo();
    let broken = json!({"name": "Broken", "kind": "custom", "command": "/no/such/agent"});
    let broken = call(&server, "agent.profile.create", broken).await["profile"]["id"].clone();
    let b = mock_profile(&server, "Agent B", &dir.path().join("b.log")).await;
    let task = task_of(&server, repo.path(), "Broken start").await;
    let launch = json!({"task_id": task, "agent_profile_id": broken, "prompt": "hello"});
    let session =
        call(&server, "session.launch", launch).await["session"]["id"].as_str().unwrap().to_owned();
    let mut watch = support::Watch::sessions(&server, std::slice::from_ref(&session)).await;
    watch.state(&server, &session, "FAILED").await;

    let same = json!({"session_id": session, "profile_id": broken});
    let (status, body) = refused(try_call(&server, "session.rebind", same).await);
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("already runs the profile Broken"),
        "{body}"
    );

    call(&server, "session.rebind", json!({"session_id": session, "profile_id": b})).await;
    watch
        .until("agent B answers the handoff", async || {
            let got = call(&server, "session.get", json!({"id": session})).await["session"].clone();
            let answered = agent_text(&messages(&server, &session).await)
                .contains("echo: You are taking over");
            answered && got["state"] == "WAITING_FOR_INPUT" && got["last_error"].is_null()
        })
        .await;
}
