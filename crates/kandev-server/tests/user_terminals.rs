//! Issue 19, acceptance 2 and 5: user terminals — a shell in a PTY in the task's worktree,
//! its input and output as binary WebSocket frames, the recent output replayed after a
//! reconnect, several per task, and nothing left running after `task.archive`, the server's
//! shutdown, or (at the next start) a server that died without cleaning up.

use crate::common;

use common::{TestServer, Ws, git_repository, group_members, group_of, session_members};
use futures::{SinkExt, StreamExt};
use kandev_api_types::frame;
use kandev_testkit::eventually_within;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// A server with a repository and a task that has a worktree; returns the task id and the
/// worktree path.
async fn task(server: &TestServer) -> (String, String, tempfile::TempDir) {
    let (workspace_id, workflow) = server.kanban().await;
    let (tmp, repo) = git_repository();
    let created = server
        .call("repository.create", json!({"workspace_id": workspace_id, "local_path": repo}))
        .await;
    let repo_id = created["repository"]["id"].as_str().unwrap().to_owned();
    let (task_id, dir) = server.task_with_worktree(&workflow, &repo_id).await;
    (task_id, dir, tmp)
}

async fn send_frame(ws: &mut Ws, kind: u8, id: &str, payload: &[u8]) {
    let bytes = frame::encode(kind, id, payload).unwrap();
    ws.stream.send(Message::binary(bytes)).await.unwrap();
}

async fn type_line(ws: &mut Ws, id: &str, line: &str) {
    send_frame(ws, frame::INPUT, id, format!("{line}\n").as_bytes()).await;
}

/// What a client saw of one terminal: its output, and its exit once told.
#[derive(Default)]
struct Screen {
    output: String,
    exit: Option<Value>,
}

/// Reads frames until the terminal `id`'s output contains `needle` (or it exits, when
/// `needle` is `None`); JSON frames are skipped.
async fn read_until(ws: &mut Ws, id: &str, screen: &mut Screen, needle: Option<&str>) {
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        match needle {
            Some(needle) if screen.output.contains(needle) => return,
            None if screen.exit.is_some() => return,
            _ => {}
        }
        let next = tokio::time::timeout_at(deadline, ws.stream.next()).await;
        let Ok(Some(Ok(message))) = next else {
            panic!("waited for {needle:?} of {id}; the screen reads: {}", screen.output);
        };
        let Message::Binary(bytes) = message else { continue };
        let (kind, from, payload) = frame::decode(&bytes).expect("a terminal frame");
        assert_eq!(from, id, "only the attached terminal streams");
        match kind {
            frame::OUTPUT => screen.output.push_str(&String::from_utf8_lossy(payload)),
            frame::EXIT => screen.exit = Some(serde_json::from_slice(payload).unwrap()),
            frame::SKIPPED => {}
            other => panic!("unexpected frame kind {other:#x}"),
        }
    }
}

/// The number after `tag` in the output (`pid:123`).
fn number_after(output: &str, tag: &str) -> i32 {
    let after = output.rsplit(tag).next().unwrap();
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("no number after {tag} in {output}"))
}

/// Waits (bounded) until none of the session `sid` runs (processes this test does not own:
/// their ends announce nothing).
async fn wait_session_gone(sid: i32) {
    let what = format!("session {sid} to end");
    eventually_within(common::WAIT, what, async || session_members(sid).is_empty()).await;
}

#[tokio::test]
async fn i19_a2_a_terminal_runs_in_the_worktree_replays_after_a_reconnect_and_dies_with_the_task() {
    let server = TestServer::start().await;
    let (task_id, worktree, _tmp) = task(&server).await;
    let mut ws = server.ws().await;
    let opened =
        ws.call("terminal.open", json!({"task_id": task_id, "cols": 100, "rows": 30})).await;
    assert_eq!(opened["type"], "response", "{opened}");
    let terminal = opened["payload"]["terminal"].clone();
    let id = terminal["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (terminal["task_id"].as_str(), terminal["state"].as_str()),
        (Some(&*task_id), Some("running"))
    );
    let attached = ws.call("terminal.attach", json!({"terminal_id": id})).await;
    assert_eq!(attached["payload"]["terminal"]["id"], id, "{attached}");

    let mut screen = Screen::default();
    // The echoed command lines read `p""wd` and `pi""d`: only the output has `pwd:`, `pid:`.
    type_line(&mut ws, &id, r#"echo "p""wd:$PWD:"; echo "pi""d:$$""#).await;
    read_until(&mut ws, &id, &mut screen, Some(&format!("pwd:{worktree}:"))).await;
    read_until(&mut ws, &id, &mut screen, Some("pid:")).await;
    type_line(&mut ws, &id, "stty size").await;
    read_until(&mut ws, &id, &mut screen, Some("30 100")).await;
    send_frame(&mut ws, frame::RESIZE, &id, &[0, 120, 0, 40]).await;
    type_line(&mut ws, &id, "stty size").await;
    read_until(&mut ws, &id, &mut screen, Some("40 120")).await;
    type_line(&mut ws, &id, r#"sleep 600 & echo "jo""b:$!""#).await;
    read_until(&mut ws, &id, &mut screen, Some("job:")).await;
    let shell = number_after(&screen.output, "pid:");
    let job = number_after(&screen.output, "job:");
    let job_group = group_of(job).expect("the job runs");
    assert!(session_members(shell).contains(&job), "the job is in the shell's session");

    // A second terminal of the same task, and a client that reconnects to the first.
    let second = server
        .call("terminal.open", json!({"task_id": task_id, "cols": 80, "rows": 24}))
        .await["terminal"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    drop(ws);
    let mut ws = server.ws().await;
    ws.call("terminal.attach", json!({"terminal_id": id})).await;
    let mut replayed = Screen::default();
    read_until(&mut ws, &id, &mut replayed, Some("40 120")).await;
    assert!(
        replayed.output.contains(&format!("pwd:{worktree}:")),
        "the earlier output is replayed first: {}",
        replayed.output
    );
    let listed = server.call("terminal.list", json!({"task_id": task_id})).await;
    let ids: Vec<&str> =
        listed["terminals"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [id.as_str(), second.as_str()], "several per task, oldest first");

    server.call("task.archive", json!({"id": task_id, "force": true})).await;
    assert!(group_members(shell).is_empty(), "no shell process is left");
    assert!(group_members(job_group).is_empty(), "no job of the shell is left");
    assert!(session_members(shell).is_empty(), "nothing of the shell's session is left");
    read_until(&mut ws, &id, &mut replayed, None).await;
    assert_eq!(replayed.exit.unwrap()["signal"], "SIGKILL", "the attached client is told");
    let listed = server.call("terminal.list", json!({"task_id": task_id})).await;
    assert_eq!(listed["terminals"], json!([]));
    server.stop().await;
}

#[tokio::test]
async fn i19_a2_close_and_server_stop_end_terminals_and_bad_requests_are_explained() {
    let server = TestServer::start().await;
    let (task_id, _worktree, _tmp) = task(&server).await;
    let (status, body) =
        server.post("terminal.open", json!({"task_id": task_id, "cols": 0, "rows": 24})).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"].as_str().unwrap().contains("between 1 and 1000"), "{body}");
    let (status, _) =
        server.post("terminal.open", json!({"task_id": "nope", "cols": 80, "rows": 24})).await;
    assert_eq!(status, 404);
    let (status, body) = server.post("terminal.attach", json!({"terminal_id": "x"})).await;
    assert_eq!(status, 400);
    assert!(body["message"].as_str().unwrap().contains("/ws"), "{body}");

    let mut ws = server.ws().await;
    let missing = ws.call("terminal.attach", json!({"terminal_id": "term_nope"})).await;
    assert_eq!(
        (missing["type"].as_str(), missing["payload"]["code"].as_str()),
        (Some("error"), Some("NOT_FOUND"))
    );
    send_frame(&mut ws, frame::INPUT, "term_nope", b"ls\n").await;
    let refused = ws.next().await;
    assert_eq!(
        (refused["action"].as_str(), refused["payload"]["code"].as_str()),
        (Some("terminal.input"), Some("NOT_FOUND")),
        "{refused}"
    );

    let open = |cols| json!({"task_id": task_id, "cols": cols, "rows": 24});
    let first =
        server.call("terminal.open", open(80)).await["terminal"]["id"].as_str().unwrap().to_owned();
    let kept =
        server.call("terminal.open", open(81)).await["terminal"]["id"].as_str().unwrap().to_owned();
    let mut pids = vec![];
    for id in [&first, &kept] {
        ws.call("terminal.attach", json!({"terminal_id": id})).await;
        type_line(&mut ws, id, r#"echo "pi""d:$$""#).await;
        let mut screen = Screen::default();
        read_until(&mut ws, id, &mut screen, Some("pid:")).await;
        pids.push(number_after(&screen.output, "pid:"));
        ws.call("terminal.detach", json!({"terminal_id": id})).await;
    }
    let closed = server.call("terminal.close", json!({"terminal_id": first})).await;
    assert_eq!(closed["terminal"]["id"], first);
    assert!(session_members(pids[0]).is_empty(), "close answers once nothing of it runs");
    assert!(!session_members(pids[1]).is_empty(), "the other terminal still runs");
    let (status, _) = server.post("terminal.close", json!({"terminal_id": first})).await;
    assert_eq!(status, 404, "closed already");

    // The record the next start would reap from, then a clean stop that leaves nothing.
    let recorded: Vec<i32> =
        server.store.child_processes().await.unwrap().iter().map(|c| c.pgid).collect();
    assert_eq!(recorded, [pids[1]], "only the running terminal is recorded");
    drop(ws);
    let dir = server.stop().await;
    assert!(session_members(pids[1]).is_empty(), "stopping the server closed the terminal");
    let server = TestServer::start_with(Default::default(), dir).await;
    assert!(server.store.child_processes().await.unwrap().is_empty());
    server.stop().await;
}

/// A server that died without closing its terminals and dev servers (`kill -9`): the next
/// start kills the shells it recorded, with their jobs, and the dev servers' groups.
#[tokio::test]
async fn i19_a5_the_next_start_reaps_a_shell_and_a_dev_server_a_killed_server_left() {
    let server = TestServer::start().await;
    let (task_id, worktree, _tmp) = task(&server).await;
    let task = server.call("task.get", json!({"id": task_id})).await;
    let repo_id = task["task"]["repository_ids"][0].clone();
    let script = "echo $$ > .devpid; exec sleep 600";
    server.call("repository.update", json!({"id": repo_id, "dev_script": script})).await;
    server.call("devserver.start", json!({"task_id": task_id})).await;
    let mut ws = server.ws().await;
    let opened =
        ws.call("terminal.open", json!({"task_id": task_id, "cols": 80, "rows": 24})).await;
    let id = opened["payload"]["terminal"]["id"].as_str().unwrap().to_owned();
    ws.call("terminal.attach", json!({"terminal_id": id})).await;
    type_line(&mut ws, &id, r#"sleep 600 & echo "pi""d:$$""#).await;
    let mut screen = Screen::default();
    read_until(&mut ws, &id, &mut screen, Some("pid:")).await;
    let shell = number_after(&screen.output, "pid:");
    let devpid = std::path::Path::new(&worktree).join(".devpid");
    let dev_group: i32 = kandev_testkit::wait::file_value(&devpid).await;
    // The first server is abandoned without any shutdown, as after `kill -9`; a second one
    // starts on a copy of its data.
    let dir = tempfile::tempdir().unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let from = format!("{}{suffix}", common::db_path(&server.dir).display());
        if std::path::Path::new(&from).exists() {
            std::fs::copy(&from, format!("{}{suffix}", common::db_path(&dir).display())).unwrap();
        }
    }
    assert!(!session_members(shell).is_empty(), "the shell still runs");
    assert!(!group_members(dev_group).is_empty(), "the dev server still runs");
    let restarted = TestServer::start_with(Default::default(), dir).await;
    wait_session_gone(shell).await;
    let what = "the dev server's group to end";
    eventually_within(common::WAIT, what, async || group_members(dev_group).is_empty()).await;
    assert!(restarted.store.child_processes().await.unwrap().is_empty(), "and both are forgotten");
    restarted.stop().await;
    drop(ws);
    server.stop().await;
}
