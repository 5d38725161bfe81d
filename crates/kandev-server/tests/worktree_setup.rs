//! Issue 6 and issue 12, finding 7: a repository's setup script runs in the session's own
//! work: its failure fails the start with its exit code and output, it streams, outlives the
//! client that started it, is killed with its process group by a stop, never races an
//! archive into removing a new agent's worktree, and has a configurable bound.

use crate::common;

use std::path::{Path, PathBuf};

use common::worktrees::{Board, repository};
use common::{TestServer, of_kind, step_id};
use kandev_testkit::git::git;
use serde_json::{Value, json};

#[tokio::test]
async fn i6_a_failing_setup_script_fails_the_start_with_its_exit_code_and_output() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let script = "echo installing dependencies\necho 'npm ERR! missing package.json' >&2\nexit 7";
    let repo_id = board.repository(&repo, json!({"setup_script": script})).await;
    let task = board.task("Set up", &[&repo_id]).await;

    let launched = board.launch(&task).await;
    assert_eq!(launched["state"], "STARTING", "the setup runs in the session's start");
    let session = server.wait_state(launched["id"].as_str().unwrap(), "FAILED").await;
    let error = &session["last_error"];
    assert_eq!(error["code"], "setup_script_failed");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("exit code 7"), "{message}");
    assert!(message.contains("installing dependencies"), "{message}");
    assert!(message.contains("npm ERR! missing package.json"), "{message}");
    assert_eq!(error["details"]["exit_code"], 7);
    let id = session["id"].as_str().unwrap();
    let stored = server.call("session.get", json!({"id": id})).await;
    assert_eq!(stored["session"]["state"], "FAILED");
    let messages = server.messages(id).await;
    assert!(of_kind(&messages, "error")[0]["content"].as_str().unwrap().contains("exit code 7"));
    assert!(of_kind(&messages, "agent").is_empty(), "no agent ran");
    let card = server.call("task.get", json!({"id": task})).await;
    assert_eq!(card["task"]["state"], "FAILED");

    // Fixed, the next launch reuses the worktree and runs the script again.
    server.call("repository.update", json!({"id": repo_id, "setup_script": "echo fixed"})).await;
    let retry = board.launch(&task).await;
    assert_eq!(retry["cwd"], session["cwd"]);
    server.wait_state(retry["id"].as_str().unwrap(), "WAITING_FOR_INPUT").await;
}

/// A setup script that announces itself, records each run in `control/runs`, and then
/// blocks until `control/release` exists; its background `sleep` writes `control/bg.pid`
/// (it dies with the script's process group). From the second run on it passes at once.
fn blocking_setup(control: &Path) -> String {
    let c = control.display();
    format!(
        "echo setup-started; echo run >> '{c}/runs'\n\
         if [ \"$(wc -l < '{c}/runs')\" -ge 2 ]; then echo setup-done; exit 0; fi\n\
         sleep 300 & echo $! > '{c}/bg.pid'\n\
         while [ ! -f '{c}/release' ]; do sleep 0.02; done; echo setup-done"
    )
}

fn runs(control: &Path) -> usize {
    std::fs::read_to_string(control.join("runs")).map(|r| r.lines().count()).unwrap_or(0)
}

/// Waits (bounded) until a message of the session contains `needle`, following the
/// session's notifications (streamed appends included).
async fn wait_output(server: &TestServer, session: &str, needle: &str) -> Vec<Value> {
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    loop {
        let messages = server.messages(session).await;
        if messages.iter().any(|m| m["content"].as_str().unwrap_or("").contains(needle)) {
            return messages;
        }
        ws.next().await;
    }
}

/// Waits (bounded) until the process is gone (or a zombie waiting to be reaped): a process
/// this test does not own, whose end announces nothing.
async fn wait_gone(pid: i32) {
    let what = format!("process {pid} to end");
    kandev_testkit::eventually_within(common::WAIT, what, async || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
        stat.is_empty() || state == Some("Z")
    })
    .await;
}

/// Sends a request and hangs up without reading the answer (a closed browser tab).
async fn post_and_hang_up(server: &TestServer, action: &str, body: Value) {
    use tokio::io::AsyncWriteExt;
    let body = body.to_string();
    let request = format!(
        "POST /api/v1/{action} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        server.addr,
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.shutdown().await.unwrap();
    drop(stream);
}

/// `task.create {start_agent: true}` answers at once with the session `STARTING` while the
/// setup script runs in the session's own work; its output shows up as it comes; a client
/// that hangs up does not cancel it; the agent starts when the script ends.
#[tokio::test]
async fn i12_f7_setup_runs_in_the_session_streams_and_outlives_its_client() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let control = tempfile::tempdir().unwrap();
    let repo_id =
        board.repository(&repo, json!({"setup_script": blocking_setup(control.path())})).await;
    let create = json!({"workflow_id": board.workflow["id"], "title": "Slow setup",
                        "step_id": step_id(&board.workflow, "Backlog"),
                        "repository_ids": [repo_id], "start_agent": true});

    // Hung up on mid-request: the task and its start go on all the same.
    post_and_hang_up(&server, "task.create", create.clone()).await;
    let deadline = std::time::Instant::now() + common::WAIT;
    let session = loop {
        let list = server.call("task.list", json!({"workflow_id": board.workflow["id"]})).await;
        let primary =
            list["tasks"].as_array().unwrap().first().map(|t| t["primary_session_id"].clone());
        if let Some(Value::String(id)) = primary {
            break id;
        }
        assert!(std::time::Instant::now() < deadline, "the task and its session were created");
        tokio::task::yield_now().await;
    };
    let messages = wait_output(&server, &session, "setup-started").await;
    assert_eq!(runs(control.path()), 1);
    let now = server.call("session.get", json!({"id": session})).await;
    assert_eq!(now["session"]["state"], "STARTING", "STARTING while the setup runs (rule 46)");
    assert!(
        !messages.iter().any(|m| m["content"].as_str().unwrap().contains("setup-done")),
        "the output is streamed before the script ends"
    );
    std::fs::write(control.path().join("release"), "").unwrap();
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    let messages = server.turn(&session, "hello").await;
    assert_eq!(of_kind(&messages, "agent").last().unwrap()["content"], "echo: hello");
    assert!(statuses(&messages).iter().any(|s| s.contains("finished (exit code 0)")));

    // A client that waits gets its answer at once, STARTING, while the script still runs.
    std::fs::remove_file(control.path().join("runs")).unwrap();
    std::fs::remove_file(control.path().join("release")).unwrap();
    let second = json!({"workflow_id": board.workflow["id"], "title": "Another",
                        "step_id": step_id(&board.workflow, "Backlog"),
                        "repository_ids": [repo_id], "start_agent": true});
    let created = tokio::time::timeout(common::WAIT, server.call("task.create", second))
        .await
        .expect("task.create answers without waiting for the setup script");
    assert_eq!(created["session"]["state"], "STARTING");
    let id = created["session"]["id"].as_str().unwrap();
    wait_output(&server, id, "setup-started").await;
    std::fs::write(control.path().join("release"), "").unwrap();
    server.wait_state(id, "WAITING_FOR_INPUT").await;
}

fn statuses(messages: &[Value]) -> Vec<String> {
    of_kind(messages, "status").iter().map(|m| m["content"].as_str().unwrap().to_owned()).collect()
}

/// `session.stop` during the setup script kills its process group and leaves the session
/// resumable; the next start runs the script again.
#[tokio::test]
async fn i12_f7_stop_during_setup_kills_it_and_the_next_start_runs_it_again() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let control = tempfile::tempdir().unwrap();
    let repo_id =
        board.repository(&repo, json!({"setup_script": blocking_setup(control.path())})).await;
    let task = board.task("Stop me", &[&repo_id]).await;
    let launched = tokio::time::timeout(common::WAIT, board.launch(&task))
        .await
        .expect("the launch answers without waiting for the setup script");
    let session = launched["id"].as_str().unwrap().to_owned();
    let background = kandev_testkit::wait::file_value::<i32>(&control.path().join("bg.pid")).await;

    let stopped = server.call("session.stop", json!({"id": session})).await;
    assert_eq!(stopped["session"]["state"], "WAITING_FOR_INPUT");
    wait_gone(background).await;
    let messages = wait_output(&server, &session, "was stopped").await;
    assert!(of_kind(&messages, "agent").is_empty(), "no agent started");
    assert_eq!(server.counters().count(kandev_mock_agent::CallKind::Initialize), 0);

    let messages = server.turn(&session, "after the stop").await;
    assert_eq!(runs(control.path()), 2, "the next start ran the setup script again");
    assert_eq!(of_kind(&messages, "agent").last().unwrap()["content"], "echo: after the stop");
}

/// An archive while a start prepares the worktree cancels that start instead of waiting for
/// its setup script or removing the worktree under a new agent; a later start makes the
/// worktree again and its agent works in it.
#[tokio::test]
async fn i12_f7_an_archive_racing_a_launch_never_removes_the_new_agents_worktree() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let control = tempfile::tempdir().unwrap();
    let repo_id =
        board.repository(&repo, json!({"setup_script": blocking_setup(control.path())})).await;
    let task = board.task("Archive me", &[&repo_id]).await;
    let launched = tokio::time::timeout(common::WAIT, board.launch(&task)).await.unwrap();
    let session = launched["id"].as_str().unwrap().to_owned();
    let cwd = PathBuf::from(launched["cwd"].as_str().unwrap());
    let background = kandev_testkit::wait::file_value::<i32>(&control.path().join("bg.pid")).await;

    let archived = tokio::time::timeout(
        common::WAIT,
        server.call("task.archive", json!({"id": task, "force": true})),
    )
    .await
    .expect("the archive does not wait for the setup script");
    assert_eq!(archived["worktrees_removed"], json!([cwd.display().to_string()]));
    wait_gone(background).await;
    assert!(!cwd.exists());
    assert_eq!(server.counters().count(kandev_mock_agent::CallKind::Initialize), 0);

    // The next start prepares the worktree again (and its setup), and the agent works there.
    server.turn(&session, "#!mock\nwrite after.txt made by the new agent").await;
    assert_eq!(
        std::fs::read_to_string(cwd.join("after.txt")).unwrap(),
        "made by the new agent",
        "the new agent's worktree exists"
    );
    assert_eq!(runs(control.path()), 2);
}

/// `session.resume` of a session whose worktree could not be made prepares it again.
#[tokio::test]
async fn i12_f7_resume_prepares_a_working_directory_that_failed_to_be_made() {
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({"default_branch": "release"})).await;
    let task = board.task("Later", &[&repo_id]).await;
    let launched = board.launch(&task).await;
    let session = launched["id"].as_str().unwrap().to_owned();
    let cwd = PathBuf::from(launched["cwd"].as_str().unwrap());
    let failed = server.wait_state(&session, "FAILED").await;
    assert_eq!(failed["last_error"]["code"], "worktree_failed");
    assert!(!cwd.exists());

    git(&repo, &["branch", "release"]);
    let resumed = server.call("session.resume", json!({"id": session, "mode": "fresh"})).await;
    assert_eq!(resumed["session"]["state"], "STARTING");
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    assert!(cwd.join("README.md").exists(), "the worktree was made by the resume");
    let messages = server.turn(&session, "#!mock\nwrite here.txt yes").await;
    assert!(statuses(&messages).iter().any(|s| s.contains("created worktree")));
    assert_eq!(std::fs::read_to_string(cwd.join("here.txt")).unwrap(), "yes");
}

/// The setup script's bound is a setting (`kandev serve --setup-timeout`).
#[tokio::test]
async fn i12_f7_the_setup_timeout_is_a_setting() {
    let server = TestServer::start_tuned(Default::default(), tempfile::tempdir().unwrap(), |c| {
        c.setup_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let repo_id = board.repository(&repo, json!({"setup_script": "echo slow; sleep 30"})).await;
    let task = board.task("Too slow", &[&repo_id]).await;
    let launched = board.launch(&task).await;
    let failed = server.wait_state(launched["id"].as_str().unwrap(), "FAILED").await;
    assert_eq!(failed["last_error"]["code"], "setup_script_failed");
    assert!(
        failed["last_error"]["message"].as_str().unwrap().contains("did not finish"),
        "{failed}"
    );
}

/// Issue 45 item 1: a repository sets its own script time limit (`script_timeout_s`), which
/// wins over the server's; 0 gives it back; more than a day is refused in words.
#[tokio::test]
async fn i45_1_a_repository_sets_its_own_script_time_limit() {
    let server = TestServer::start_tuned(Default::default(), tempfile::tempdir().unwrap(), |c| {
        c.setup_timeout = std::time::Duration::from_secs(600);
    })
    .await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let fields = json!({"setup_script": "echo slow; sleep 30", "script_timeout_s": 1});
    let repo_id = board.repository(&repo, fields).await;
    let task = board.task("Too slow for its repository", &[&repo_id]).await;
    let launched = board.launch(&task).await;
    let failed = server.wait_state(launched["id"].as_str().unwrap(), "FAILED").await;
    assert_eq!(failed["last_error"]["code"], "setup_script_failed");
    let message = failed["last_error"]["message"].as_str().unwrap();
    assert!(message.contains("did not finish within 1s"), "{message}");

    let cleared = json!({"id": repo_id, "script_timeout_s": 0});
    let updated = server.call("repository.update", cleared).await;
    assert_eq!(updated["repository"]["script_timeout_s"], 0, "{updated}");
    let refused = json!({"id": repo_id, "script_timeout_s": 86_401});
    let (status, body) = server.post("repository.update", refused).await;
    assert_eq!(status, 422, "{body}");
    let text = body["message"].as_str().unwrap();
    assert!(text.starts_with("script timeout is more than a day"), "{text}");
    assert!(!text.contains("script_timeout_s"), "no field names in error text: {text}");
}

/// Issue 50 scope 3: a repository's setup and cleanup scripts get the secrets it names as
/// environment variables (its own secret before its workspace's), and nothing Kandev shows
/// of the scripts holds the value; a name with no secret stops the script, saying so.
#[tokio::test]
async fn i50_3_scripts_get_the_repositorys_secrets_as_environment_variables() {
    const VALUE: &str = "sk-i50-script-c81d";
    let server = TestServer::start().await;
    let board = Board::new(&server).await;
    let (_tmp, repo) = repository(true);
    let out = tempfile::tempdir().unwrap();
    let cleanup_file = out.path().join("cleanup.txt");
    let fields = json!({
        "setup_script": "printf '%s' \"$I50_SCRIPT_KEY\" > from-setup.txt; echo set up",
        "cleanup_script": format!("printf '%s' \"$I50_SCRIPT_KEY\" > '{}'", cleanup_file.display()),
        "script_secrets": ["I50_SCRIPT_KEY"],
    });
    let repo_id = board.repository(&repo, fields).await;
    let task = board.task("Scripts with a secret", &[&repo_id]).await;

    // Not set anywhere yet: the setup does not run, and says which secret is missing.
    let launched = board.launch(&task).await;
    let session = launched["id"].as_str().unwrap().to_owned();
    let failed = server.wait_state(&session, "FAILED").await;
    let message = failed["last_error"]["message"].as_str().unwrap();
    assert!(
        message.contains("I50_SCRIPT_KEY") && message.contains("Settings → Secrets"),
        "{failed}"
    );

    let ws = board.workspace_id.clone();
    let secret = |scope: Value, value: &str| {
        let mut body = scope;
        body["name"] = json!("I50_SCRIPT_KEY");
        body["value"] = json!(value);
        body
    };
    server.call("secret.set", secret(json!({"workspace_id": ws}), "the workspace's")).await;
    server
        .call("secret.set", secret(json!({"workspace_id": ws, "repository_id": repo_id}), VALUE))
        .await;
    server.call("session.resume", json!({"id": session, "mode": "fresh"})).await;
    let worktree = wait_output(&server, &session, "set up").await;
    let got = server.call("session.get", json!({"id": session})).await;
    let cwd = PathBuf::from(got["session"]["cwd"].as_str().unwrap());
    assert_eq!(std::fs::read_to_string(cwd.join("from-setup.txt")).unwrap(), VALUE);
    assert!(!serde_json::to_string(&worktree).unwrap().contains(VALUE), "the transcript");

    server.call("session.stop", json!({"id": session})).await;
    std::fs::remove_file(cwd.join("from-setup.txt")).unwrap();
    let archived = server.call("task.archive", json!({"id": task})).await;
    assert_eq!(archived["worktrees_kept"], json!([]), "{archived}");
    assert_eq!(std::fs::read_to_string(&cleanup_file).unwrap(), VALUE, "the cleanup script");
}
