//! Issue 52 acceptance 2 and 3, through the real `kandev serve` with `kandev fake-tui` as the
//! agent's terminal UI in a PTY: its states read from its screen, prompts (a person's, a
//! workflow step's) typed into it, a permission question answered in its terminal, the
//! session going on after a `kill -9` of the server with the local runner, and the fake's
//! `create_task` through the MCP configuration Kandev handed it.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::Path;

use futures::{SinkExt, StreamExt};
use kandev_api_types::frame;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

mod support;

use support::{
    DEADLINE, KANDEV, Server, Watch, call, processes_with, task_on_first_step, try_call,
};

const LOCAL: [&str; 4] = ["--runner", "local", "--runner-grace", "60s"];

/// A task of the git repository `repo` whose session runs the built-in mock's terminal UI
/// (`kandev fake-tui`): `(task id, session id)`.
async fn tui_session(server: &Server, repo: &Path) -> (String, String) {
    let workspaces = call(server, "workspace.list", json!({})).await;
    let repository = json!({"workspace_id": workspaces["workspaces"][0]["id"],
        "local_path": repo, "name": "project"});
    let repository = call(server, "repository.create", repository).await;
    let fields =
        json!({"title": "Tidy the docs", "repository_ids": [repository["repository"]["id"]]});
    let task = task_on_first_step(server, fields).await["task"]["id"].as_str().unwrap().to_owned();
    let launched =
        call(server, "session.launch", json!({"task_id": task, "terminal_ui": true})).await;
    assert_eq!(launched["session"]["terminal_ui"], "mock", "{launched}");
    (task, launched["session"]["id"].as_str().unwrap().to_owned())
}

/// [`tui_session`] once its input box waits, with a watch of the session's topic:
/// `(task id, session id, watch)`.
async fn waiting_session(server: &Server, repo: &Path) -> (String, String, Watch) {
    let (task, id) = tui_session(server, repo).await;
    let mut watch = Watch::topics(server, &[format!("session:{id}")]).await;
    until_screen(&mut watch, server, &id, "waiting", "WAITING_FOR_INPUT").await;
    (task, id, watch)
}

async fn session(server: &Server, id: &str) -> Value {
    call(server, "session.get", json!({"id": id})).await["session"].clone()
}

/// Waits until the session's screen shows `screen` and its state is `state`.
async fn until_screen(watch: &mut Watch, server: &Server, id: &str, screen: &str, state: &str) {
    let what = format!("{id} shows {screen} ({state})");
    watch
        .until(&what, async || {
            let now = session(server, id).await;
            now["tui_screen"] == screen && now["state"] == state
        })
        .await;
}

/// Waits for the notification that the session's screen showed `screen` in `state` (it may
/// last too short to be read back).
async fn saw_screen(watch: &mut Watch, screen: &str, state: &str) {
    let what = format!("a session.state_changed to {state} showing {screen}");
    watch
        .notification(&what, |frame| {
            let session = &frame["payload"]["session"];
            frame["action"] == "session.state_changed"
                && session["tui_screen"] == screen
                && session["state"] == state
        })
        .await;
}

/// The terminal of a terminal-UI session, attached over the WebSocket.
struct Term {
    id: String,
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    output: String,
}

impl Term {
    async fn attach(server: &Server, id: &str) -> Term {
        let url = format!("{}/ws", server.url.replace("http", "ws"));
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let attach = json!({"id": "a", "type": "request", "action": "terminal.attach",
            "payload": {"terminal_id": id}});
        ws.send(Message::text(attach.to_string())).await.unwrap();
        Term { id: id.to_owned(), ws, output: String::new() }
    }

    /// Attaches once the session's program runs again (its terminal is made by the start).
    async fn attach_when_running(server: &Server, watch: &mut Watch, id: &str) -> Term {
        until_screen(watch, server, id, "waiting", "WAITING_FOR_INPUT").await;
        Term::attach(server, id).await
    }

    async fn type_in(&mut self, text: &str) {
        let input = frame::encode(frame::INPUT, &self.id, text.as_bytes()).unwrap();
        self.ws.send(Message::binary(input)).await.unwrap();
    }

    /// Reads the terminal's output until it holds `needle` (from the replay on).
    async fn shows(&mut self, needle: &str) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !self.output.contains(needle) {
            let next = tokio::time::timeout_at(deadline, self.ws.next()).await;
            let Ok(Some(Ok(message))) = next else {
                panic!("the terminal never showed {needle:?}:\n{}", self.output)
            };
            let Message::Binary(bytes) = message else { continue };
            if let Some((frame::OUTPUT, _, payload)) = frame::decode(&bytes) {
                self.output.push_str(&String::from_utf8_lossy(payload));
            }
        }
    }
}

async fn prompt(server: &Server, id: &str, text: &str) {
    call(server, "message.add", json!({"session_id": id, "content": text})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_2_l50_a_terminal_ui_sessions_states_come_from_its_screen_and_prompts_are_typed_in() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    let repo = kandev_testkit::remote_task::project_repo();
    let (task, id, mut watch) = waiting_session(&server, repo.path()).await;
    let running = session(&server, &id).await;
    let cwd = running["cwd"].as_str().unwrap();
    assert!(Path::new(cwd).join(".git").exists(), "it runs in the task's worktree: {cwd}");

    // A prompt is typed in: the spinner is working, then the answer and the input box.
    prompt(&server, &id, "hello there").await;
    saw_screen(&mut watch, "working", "RUNNING").await;
    until_screen(&mut watch, &server, &id, "waiting", "WAITING_FOR_INPUT").await;
    let mut term = Term::attach(&server, &id).await;
    term.shows("● echo: hello there").await;

    // A permission question needs its developer, and is answered in the terminal.
    prompt(&server, &id, "may I #permission").await;
    saw_screen(&mut watch, "permission", "RUNNING").await;
    let card = call(&server, "task.get", json!({"id": task})).await;
    assert_eq!(card["task"]["needs_you"], "permission", "{card}");
    term.type_in("1\r").await;
    term.shows("● allowed").await;
    until_screen(&mut watch, &server, &id, "waiting", "WAITING_FOR_INPUT").await;
    let card = call(&server, "task.get", json!({"id": task})).await;
    assert_eq!(card["task"]["needs_you"], Value::Null, "{card}");

    // What only an ACP agent does is refused, saying where to do it.
    let refused = try_call(&server, "session.set_mode", json!({"id": id, "mode_id": "plan"}));
    let (status, body) = support::refused(refused.await);
    assert_eq!(status, 409, "{body}");
    assert!(body["message"].as_str().unwrap().contains("in its terminal"), "{body}");

    // The transcript keeps what was typed in.
    let typed: Vec<Value> = support::messages(&server, &id)
        .await
        .into_iter()
        .filter(|m| m["kind"] == "user")
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(typed, [json!("hello there"), json!("may I #permission")]);

    // A stop ends the program: CANCELLED, and its terminal is gone; the card does not say
    // the task failed.
    call(&server, "session.stop", json!({"id": id})).await;
    watch.state(&server, &id, "CANCELLED").await;
    let card = call(&server, "task.get", json!({"id": task})).await;
    assert_eq!(card["task"]["state"], "WAITING_FOR_INPUT", "{card}");
    let gone = try_call(&server, "terminal.attach", json!({"terminal_id": id})).await;
    assert!(gone.is_err(), "{gone:?}");
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_2_l50_a_workflow_steps_prompt_and_review_comments_are_typed_into_a_terminal_ui_session()
 {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    let repo = kandev_testkit::remote_task::project_repo();
    let (task, id, mut watch) = waiting_session(&server, repo.path()).await;
    let card = call(&server, "task.get", json!({"id": task})).await;
    let workflow = call(&server, "workflow.get", json!({"id": card["task"]["workflow_id"]})).await;
    let next = workflow["workflow"]["steps"][1]["id"].clone();
    let after = workflow["workflow"]["steps"][2]["id"].clone();
    let step = json!({"id": next, "prompt": "Review the change: {{task_prompt}}",
        "events": {"on_enter": [{"type": "auto_start_agent"}],
                   "on_turn_complete": [{"type": "move_to_next"}]}});
    call(&server, "workflow.step.update", step).await;
    let workspace = format!("workspace:{}", card["task"]["workspace_id"].as_str().unwrap());
    let mut board = Watch::topics(&server, &[workspace]).await;

    call(&server, "task.move", json!({"id": task, "step_id": next})).await;
    let mut term = Term::attach(&server, &id).await;
    term.shows("● echo: Review the change: Tidy the docs").await;
    until_screen(&mut watch, &server, &id, "waiting", "WAITING_FOR_INPUT").await;
    // The agent's work on it ended: the step's on_turn_complete moved the task on.
    board
        .until("the task moves to the step after", async || {
            call(&server, "task.get", json!({"id": task})).await["task"]["step_id"] == after
        })
        .await;

    // A person's prompt starts a turn: the step's on_turn_start move is made (back, here).
    let back = json!({"id": after, "events": {"on_turn_start": [{"type": "move_to_previous"}]}});
    call(&server, "workflow.step.update", back).await;
    let stay = json!({"id": next, "events": {"on_enter": [{"type": "auto_start_agent"}]}});
    call(&server, "workflow.step.update", stay).await;

    // Review comments go to the task's primary session as one prompt: typed in too.
    let comment =
        json!({"task_id": task, "path": "README.md", "line": 1, "text": "say what it does"});
    call(&server, "review.comment.add", comment).await;
    call(&server, "review.submit", json!({"task_id": task})).await;
    term.shows("● echo: Please address these review comments:").await;
    term.shows("say what it does").await;
    board
        .until("the task moves back to the step before", async || {
            call(&server, "task.get", json!({"id": task})).await["task"]["step_id"] == next
        })
        .await;
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_2_l50_a_terminal_ui_session_goes_on_after_a_kill_9_of_the_server() {
    let home = tempfile::tempdir().unwrap();
    let mut server = KANDEV.start_with(home.path(), &LOCAL);
    let repo = kandev_testkit::remote_task::project_repo();
    let (_task, id, _watch) = waiting_session(&server, repo.path()).await;
    prompt(&server, &id, "before the crash").await;
    let mut term = Term::attach(&server, &id).await;
    term.shows("● echo: before the crash").await;
    // This test's program: its command line names its session's MCP configuration.
    let program = format!("sessions/{id}/tui");
    let before = processes_with(&program);
    assert_eq!(before.len(), 1, "one terminal UI runs: {before:?}");

    // The same address again: the program's MCP configuration names it.
    let addr = server.addr();
    server.kill_9();
    let restarted = KANDEV.launch(home.path(), &addr, &LOCAL, &[]);
    assert_eq!(processes_with(&program), before, "the same program runs on");
    let mut watch = Watch::topics(&restarted, &[format!("session:{id}")]).await;
    until_screen(&mut watch, &restarted, &id, "waiting", "WAITING_FOR_INPUT").await;
    // Its screen came back with the replay, and it takes prompts as before.
    let mut term = Term::attach(&restarted, &id).await;
    term.shows("● echo: before the crash").await;
    prompt(&restarted, &id, "after the crash").await;
    term.shows("● echo: after the crash").await;
    // Its MCP token was kept: the program still reaches Kandev's MCP.
    prompt(&restarted, &id, "#mcp create_task Filed after the crash").await;
    term.shows("● created:").await;
    call(&restarted, "session.stop", json!({"id": id})).await;
    watch.state(&restarted, &id, "CANCELLED").await;
    restarted.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_3_the_fake_tui_creates_a_task_through_the_mcp_config_kandev_handed_it() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    let repo = kandev_testkit::remote_task::project_repo();
    let (task, id, _watch) = waiting_session(&server, repo.path()).await;
    // The configuration is the session's own, private to this user.
    let config = home.path().join("sessions").join(&id).join("tui").join("mcp.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", config.display());

    prompt(&server, &id, "#mcp create_task Write the changelog").await;
    let mut term = Term::attach(&server, &id).await;
    term.shows("● created:").await;
    let card = call(&server, "task.get", json!({"id": task})).await;
    let tasks =
        call(&server, "task.list", json!({"workflow_id": card["task"]["workflow_id"]})).await;
    let titles: Vec<&str> =
        tasks["tasks"].as_array().unwrap().iter().map(|t| t["title"].as_str().unwrap()).collect();
    assert!(titles.contains(&"Write the changelog"), "{titles:?}\n{}", term.output);

    // Deleting the session ends the program and removes its configuration (and token).
    let program = format!("sessions/{id}/tui");
    assert_eq!(support::processes_with(&program).len(), 1);
    call(&server, "session.delete", json!({"id": id})).await;
    assert!(!config.exists(), "{}", config.display());
    support::eventually("the program ends", async || processes_with(&program).is_empty()).await;
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_2_l50_without_a_runner_the_terminal_ui_is_the_servers_child() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start_with(home.path(), &["--runner", "none"]);
    let repo = kandev_testkit::remote_task::project_repo();
    let (_task, id, _watch) = waiting_session(&server, repo.path()).await;
    prompt(&server, &id, "no runner here").await;
    let mut term = Term::attach(&server, &id).await;
    term.shows("● echo: no runner here").await;
    let program = format!("sessions/{id}/tui");
    let pid = processes_with(&program);
    assert_eq!(support::parent_of(pid[0]), server.pid(), "a child of the server");
    // A graceful stop of the server ends it.
    server.terminate();
    support::eventually("the program ends with the server", async || {
        processes_with(&program).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_2_l50_an_agent_without_screen_rules_gets_its_prompts_as_they_come_and_its_mcp_settings()
 {
    // A stand-in `gemini` on the server's PATH: it shows the settings file it was handed and
    // echoes each line it reads.
    let bin = tempfile::tempdir().unwrap();
    let gemini = bin.path().join("gemini");
    let script = "#!/bin/sh\necho \"settings: $(cat \"$GEMINI_CLI_SYSTEM_SETTINGS_PATH\")\"\n\
                  while read -r line; do echo \"got: $line\"; done\n";
    std::fs::write(&gemini, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&gemini, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap());
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.launch(home.path(), "127.0.0.1:0", &[], &[("PATH", path.as_str())]);
    let repo = kandev_testkit::remote_task::project_repo();
    let profile = json!({"name": "Gemini", "kind": "gemini"});
    let profile = call(&server, "agent.profile.create", profile).await["profile"]["id"].clone();
    let (task, _) = tui_session(&server, repo.path()).await;
    let launch = json!({"task_id": task, "agent_profile_id": profile, "terminal_ui": true});
    let launched = call(&server, "session.launch", launch).await;
    let id = launched["session"]["id"].as_str().unwrap().to_owned();
    let mut watch = Watch::topics(&server, &[format!("session:{id}")]).await;
    until_screen(&mut watch, &server, &id, "unknown", "WAITING_FOR_INPUT").await;
    let mut term = Term::attach(&server, &id).await;
    term.shows("\"httpUrl\":\"http://127.0.0.1:").await;
    // No rules say when its input waits: each prompt goes in, the next a little later.
    prompt(&server, &id, "first line").await;
    prompt(&server, &id, "second line").await;
    // Each as a bracketed paste, then Enter (the program's own echo, not the terminal's).
    term.shows("got: \u{1b}[200~first line\u{1b}[201~").await;
    term.shows("got: \u{1b}[200~second line\u{1b}[201~").await;
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_2_l50_a_stop_says_which_prompts_were_never_typed_and_a_restart_says_it_starts_blank() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    let repo = kandev_testkit::remote_task::project_repo();
    let (_task, id, mut watch) = waiting_session(&server, repo.path()).await;
    prompt(&server, &id, "please #permission").await;
    saw_screen(&mut watch, "permission", "RUNNING").await;
    // A message that must not wait is refused while the agent works.
    let now = json!({"session_id": id, "content": "not now", "queue": false});
    let (status, body) = support::refused(try_call(&server, "message.add", now).await);
    assert_eq!((status, body["code"].as_str()), (409, Some("BUSY")), "{body}");
    // One that may wait waits for the input box, which the stop comes before.
    prompt(&server, &id, "after the question").await;
    call(&server, "session.stop", json!({"id": id})).await;
    watch.state(&server, &id, "CANCELLED").await;
    assert_eq!(session(&server, &id).await["tui_screen"], Value::Null, "no program, no screen");
    let said = |stored: &[Value], text: &str| {
        stored
            .iter()
            .any(|m| m["kind"] == "status" && m["content"].as_str().unwrap().contains(text))
    };
    let stored = support::messages(&server, &id).await;
    assert!(said(&stored, "1 message(s) above were not typed in"), "{stored:?}");

    // A message starts the program again, and the transcript says it starts blank.
    prompt(&server, &id, "again").await;
    let mut term = Term::attach_when_running(&server, &mut watch, &id).await;
    term.shows("● echo: again").await;
    let stored = support::messages(&server, &id).await;
    assert!(said(&stored, "its terminal UI started again"), "{stored:?}");
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i52_2_l50_a_terminal_ui_that_is_not_installed_fails_its_start_saying_what_to_install() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.launch(home.path(), "127.0.0.1:0", &[], &[("PATH", "/usr/bin:/bin")]);
    let repo = kandev_testkit::remote_task::project_repo();
    let profile = json!({"name": "Claude", "kind": "claude"});
    let profile = call(&server, "agent.profile.create", profile).await["profile"]["id"].clone();
    let (task, _) = tui_session(&server, repo.path()).await;
    let launch = json!({"task_id": task, "agent_profile_id": profile, "terminal_ui": true});
    let id =
        call(&server, "session.launch", launch).await["session"]["id"].as_str().unwrap().to_owned();
    let mut watch = Watch::topics(&server, &[format!("session:{id}")]).await;
    watch.state(&server, &id, "FAILED").await;
    let error = session(&server, &id).await["last_error"]["message"].clone();
    let message = error.as_str().unwrap();
    assert!(message.contains("npm install -g @anthropic-ai/claude-code"), "{message}");
    server.terminate();
}
