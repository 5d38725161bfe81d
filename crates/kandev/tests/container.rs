//! Issue 42, the container executor on a real engine: Podman from Debian with the project's
//! `scripts/containers.conf` and a test image built without a registry
//! (`kandev_testkit::container`: busybox and the libraries this build's `kandev` needs). A
//! task whose repository uses a container executor runs its agent in a container of its own,
//! with no network and none of the host's files but its worktree; a missing engine, image or
//! glibc fails the session and nothing runs on the host.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::{Path, PathBuf};
use std::process::Command;

use kandev_testkit::container::Podman;
use serde_json::{Value, json};

mod support;

use kandev_mock_agent::script::stream_chunk_text;
use support::{
    KANDEV, Server, Watch, agent_text, agents_of, call, eventually, messages, process_argvs, state,
    turn_done,
};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn podman() -> Podman {
    Podman::new(&workspace(), &workspace().join("target/containers"))
}

#[test]
fn i42_s6_the_test_image_runs_this_kandev_without_a_network_or_the_hosts_files_and_is_built_once() {
    let podman = podman();
    let image = podman.test_image(KANDEV.path());
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("secret.txt");
    std::fs::write(&secret, "not for the container").unwrap();
    let mount = format!("{}:/opt/kandev/kandev:ro", KANDEV.path().display());
    let script = format!(
        "/opt/kandev/kandev --version; hostname; ls /sys/class/net; cat {} || echo unreadable",
        secret.display()
    );
    let output = podman.run(&[
        "run",
        "--rm",
        "--network",
        "none",
        "--hostname",
        "kandev-task",
        "-v",
        &mount,
        &image,
        "/bin/sh",
        "-c",
        &script,
    ]);
    let seen = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = seen.lines().collect();
    let version = Command::new(KANDEV.path()).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    assert_eq!(lines, [version.trim(), "kandev-task", "lo", "unreadable"], "{seen}");

    // Built once per set of files: asked again, the same image, not a new import.
    let id = |name: &str| podman.run(&["image", "inspect", "--format", "{{.Id}}", name]).stdout;
    let before = id(&image);
    assert_eq!(podman.test_image(KANDEV.path()), image);
    assert_eq!(id(&image), before, "the test image was imported again");
}

/// A server whose Podman commands use the tests' configuration and store, a repository on
/// `main` whose executor is a container executor with `container` settings, and a task on
/// it whose session is launched.
/// (Bind `home` and `_repo` when taking it apart: a `..` drops them, and the folders with
/// them while the server uses them.)
struct Setup {
    podman: Podman,
    home: tempfile::TempDir,
    /// Kept alive with the server: its path is the repository's.
    _repo: tempfile::TempDir,
    server: Server,
    repository: Value,
    /// Removes the task's container however the test ends.
    _gone: Removed,
    task: String,
    session: String,
}

async fn setup(container: Value) -> Setup {
    setup_with(container, json!({})).await
}

/// [`setup`] with more fields of the repository (`setup_script`).
async fn setup_with(container: Value, repository_fields: Value) -> Setup {
    let podman = podman();
    let home = tempfile::tempdir().unwrap();
    let repo = kandev_testkit::remote_task::project_repo();
    let env = podman_env(&podman);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = KANDEV.launch(home.path(), "127.0.0.1:0", &[], &env);
    let workspaces = call(&server, "workspace.list", json!({})).await;
    let workspace = &workspaces["workspaces"][0]["id"];
    let mut fields =
        json!({"workspace_id": workspace, "local_path": repo.path(), "name": "project"});
    fields.as_object_mut().unwrap().extend(repository_fields.as_object().unwrap().clone());
    let repository = call(&server, "repository.create", fields).await;
    let repository = repository["repository"]["id"].clone();
    let executor = call(
        &server,
        "executor.create",
        json!({"name": "sandbox", "kind": "container", "container": container}),
    )
    .await;
    call(
        &server,
        "repository.executor.set",
        json!({"repository_id": repository, "executor_id": executor["executor"]["id"]}),
    )
    .await;
    let (task, session) = add_task(&server, &repository, "boxed work").await;
    let _gone = Removed(format!("kandev-{task}"));
    Setup { podman, home, _repo: repo, server, repository, _gone, task, session }
}

/// A task of `repository` on the first board's first step, its session launched.
async fn add_task(server: &Server, repository: &Value, title: &str) -> (String, String) {
    let workspaces = call(server, "workspace.list", json!({})).await;
    let workspace = &workspaces["workspaces"][0]["id"];
    let workflows = call(server, "workflow.list", json!({"workspace_id": workspace})).await;
    let board = &workflows["workflows"][0];
    let task = call(
        server,
        "task.create",
        json!({"workflow_id": board["id"], "title": title, "step_id": board["steps"][0]["id"],
            "repository_ids": [repository]}),
    )
    .await;
    let task = task["task"]["id"].as_str().unwrap().to_owned();
    let launched = call(server, "session.launch", json!({"task_id": task})).await;
    (task, launched["session"]["id"].as_str().unwrap().to_owned())
}

/// A container removed when this is dropped (a failed test leaves none behind).
struct Removed(String);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = podman().command().args(["rm", "--force", "--time", "0", &self.0]).output();
    }
}

/// The processes on this host whose argv holds `needle` and that run in `container`.
fn processes_in(podman: &Podman, container: &str, needle: &str) -> Vec<u32> {
    let id = podman.command().args(["inspect", "--format", "{{.Id}}", container]).output().unwrap();
    let id = String::from_utf8_lossy(&id.stdout).trim().to_owned();
    assert!(!id.is_empty(), "no container {container}");
    process_argvs(needle)
        .into_iter()
        .filter(|(pid, _)| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(&id))
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// `podman exec <container> sh -c <script>`: its stdout and whether it succeeded.
fn exec(podman: &Podman, container: &str, script: &str) -> (bool, String) {
    let output =
        podman.command().args(["exec", container, "/bin/sh", "-c", script]).output().unwrap();
    (output.status.success(), String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn container_exists(podman: &Podman, name: &str) -> bool {
    podman.command().args(["container", "exists", name]).status().unwrap().success()
}

#[tokio::test]
async fn i42_a1_a2_a_task_on_a_container_executor_runs_its_agent_in_its_own_container_without_a_network()
 {
    let image = podman().test_image(KANDEV.path());
    // The setup script and the dev server run in the container too.
    let setup_script = json!({"setup_script": "echo \"set up in $(hostname)\" > setup.txt",
        "dev_script": "exec busybox httpd -f -p 127.0.0.1:$PORT -h ."});
    let Setup { podman, home, _repo, server, _gone, task, session, .. } =
        setup_with(json!({"image": image}), setup_script).await;
    let script = "#!mock\nwrite notes.txt written in the container\\n\nsay wrote it";
    agent_up(&server, &session).await;
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    turn_done(&server, &session, 1).await;
    let stored = messages(&server, &session).await;
    assert!(agent_text(&stored).contains("wrote it"), "{stored:#?}");

    // The agent is the container's copy of kandev (a path that exists only in there), in
    // the task's own container; the file it wrote is in the worktree on this host.
    let container = format!("kandev-{task}");
    let agents = processes_in(&podman, &container, "/opt/kandev/kandev mock-agent");
    assert_eq!(agents.len(), 1, "one agent, in the container: {agents:?}");
    assert!(!Path::new("/opt/kandev/kandev").exists(), "that path is the container's");
    assert!(agents_of(home.path()).is_empty(), "no agent runs on this host");
    // The server reaches the container's runner on its socket, with no `exec` relay.
    let runners = processes_in(&podman, &container, "kandev runner --socket /kandev-home/");
    assert_eq!(runners.len(), 1, "one runner, in the container: {runners:?}");
    let relays = processes_in(&podman, &container, "runner --stdio");
    assert!(relays.is_empty(), "no exec relay: {relays:?}");
    let runner_dir = home.path().join("containers").join(&container);
    assert!(runner_dir.join("runner.sock").exists(), "the runner's folder is the server's");
    let (ok, top) = exec(&podman, &container, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '");
    assert!(ok && top.contains("mock-agent"), "the agent runs in {container}: {top}");
    let got = call(&server, "session.get", json!({"id": session})).await;
    let cwd = PathBuf::from(got["session"]["cwd"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(cwd.join("notes.txt")).unwrap(),
        "written in the container\n"
    );
    let set_up = std::fs::read_to_string(cwd.join("setup.txt")).unwrap();
    assert_eq!(set_up.trim(), format!("set up in {container}"), "the setup script's host");
    let (_, hostname) = exec(&podman, &container, "hostname");
    assert_eq!(hostname, container, "the container is named after the task");

    // Acceptance 2: nothing of the server's home or the host user's home is there, and with
    // network `none` the server's port cannot be reached; the worktree is.
    let database = home.path().join("kandev.db");
    assert!(database.exists());
    for outside in [database.display().to_string(), std::env::var("HOME").unwrap()] {
        let (readable, _) =
            exec(&podman, &container, &format!("cat '{outside}' || ls '{outside}'"));
        assert!(!readable, "{outside} is visible in the container");
    }
    let (ok, worktree) = exec(&podman, &container, &format!("cat '{}/notes.txt'", cwd.display()));
    assert!(ok && worktree == "written in the container", "{worktree}");
    let (_, interfaces) = exec(&podman, &container, "ls /sys/class/net");
    assert_eq!(interfaces, "lo", "network none: loopback only");
    // The server's port in the container is the MCP relay, which leads to `/mcp` alone: the
    // rest of the API (open to a local request without a token) is out of reach.
    // (busybox's static wget crashes in the test image: the requests are written by hand.)
    let port = server.addr().rsplit_once(':').unwrap().1.to_owned();
    let request = |head: &str| {
        format!(
            "printf '{head}\\r\\nHost: 127.0.0.1:{port}\\r\\nContent-Type: application/json\\r\\n\
             Content-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{{}}' | nc -w 3 127.0.0.1 {port}"
        )
    };
    for head in ["POST /api/v1/workspace.list HTTP/1.1", "GET /api/v1/health HTTP/1.1"] {
        let (_, answer) = exec(&podman, &container, &request(head));
        let status = answer.lines().next().unwrap_or_default().to_owned();
        assert!(
            status.starts_with("HTTP/1.1 "),
            "{head}: no HTTP answer through the relay: {answer}"
        );
        assert!(!status.contains(" 200 "), "{head} answers in the container: {answer}");
    }
    // Git's metadata is read-only there: nothing the agent writes makes this host's git
    // (run in the worktree) run its commands.
    let own = std::fs::read_to_string(cwd.join(".git")).unwrap();
    let own = own.trim().strip_prefix("gitdir: ").unwrap().to_owned();
    for path in [cwd.join(".git").display().to_string(), format!("{own}/commondir")] {
        let (written, _) = exec(&podman, &container, &format!("echo x >> '{path}'"));
        assert!(!written, "{path} is writable in the container");
    }

    // ...while the agent still reaches Kandev's MCP tools, relayed over the runner link.
    let script = "#!mock\nmcp kandev get_task {}";
    call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    turn_done(&server, &session, 2).await;
    let said = agent_text(&messages(&server, &session).await);
    assert!(said.contains("mcp get_task ok:"), "an MCP tool call from the container: {said}");
    assert!(said.contains("boxed work"), "the tool answers with the task: {said}");

    // A terminal of the task is a shell in its container, in the worktree.
    // The typed line reads `a""t:`: only the shell's answer has `at:`.
    let line = r#"echo "a""t:$(hostname):$PWD:""#;
    let answer = terminal_says(&server, &task, line, &format!("at:{container}:")).await;
    assert!(answer.contains(&format!("at:{container}:{}:", cwd.display())), "{answer}");

    // The dev server listens on the container's loopback; this host's 127.0.0.1 reaches it
    // through the relay.
    let dev = call(&server, "devserver.start", json!({"task_id": task})).await;
    let url = dev["dev_server"]["url"].as_str().unwrap().to_owned();
    let served = eventually("the dev server answers through the relay", || async {
        let got = reqwest::get(format!("{url}/notes.txt")).await.ok()?;
        got.status().is_success().then_some(())?;
        got.text().await.ok()
    })
    .await;
    assert_eq!(served, "written in the container\n", "{dev}");
    call(&server, "devserver.stop", json!({"task_id": task})).await;

    // The diff and a commit, on this host's worktree.
    let changes = call(&server, "task.changes", json!({"task_id": task})).await;
    let paths: Vec<&str> =
        changes["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["notes.txt", "setup.txt"], "{changes}");
    let committed =
        call(&server, "task.commit", json!({"task_id": task, "message": "add the notes"})).await;
    assert!(committed["commits"][0]["sha"].is_string(), "{committed}");

    // Deleting the task removes its container and the agent in it.
    call(&server, "task.delete", json!({"id": task, "force": true})).await;
    assert!(!container_exists(&podman, &container), "{container} is left after the task is gone");
    assert!(!runner_dir.exists(), "the container's folder is removed with it");
    eventually("no agent is left", || async { !support::alive(agents[0]) }).await;
    server.terminate();
}

/// Waits until the session's agent is up; a failed start fails the test with its error.
async fn agent_up(server: &Server, session: &str) {
    eventually("the agent starts", || async {
        let got = call(server, "session.get", json!({"id": session})).await;
        let now = &got["session"]["state"];
        assert_ne!(now, "FAILED", "the start failed: {}", got["session"]["last_error"]);
        (now == "WAITING_FOR_INPUT").then_some(())
    })
    .await;
}

/// The session's failure text: waits until it has failed.
async fn failure_of(server: &Server, session: &str) -> String {
    eventually("the session fails", || async {
        let got = call(server, "session.get", json!({"id": session})).await;
        (got["session"]["state"] == "FAILED").then(|| got["session"]["last_error"].to_string())
    })
    .await
}

#[tokio::test]
async fn i42_a4_no_image_no_engine_or_no_glibc_fail_the_session_with_what_to_do_and_nothing_runs_on_the_host()
 {
    let podman = podman();
    let cases = [
        (json!({"image": "localhost/kandev-missing:1"}), "is not on this host"),
        (json!({"image": "localhost/any:1", "engine": "docker"}), "no container engine runs here"),
        (json!({"image": podman.busybox_image()}), "kandev does not run in the image"),
    ];
    for (settings, expected) in cases {
        let Setup { home, _repo, server, _gone, session, task, .. } = setup(settings.clone()).await;
        let failure = failure_of(&server, &session).await;
        assert!(failure.contains(expected), "{settings}: {failure}");
        assert!(agents_of(home.path()).is_empty(), "{settings}: an agent runs on this host");
        let cwd = call(&server, "session.get", json!({"id": session})).await;
        let cwd = PathBuf::from(cwd["session"]["cwd"].as_str().unwrap());
        assert!(!cwd.join("notes.txt").exists());
        assert!(
            !container_exists(&podman, &format!("kandev-{task}")),
            "{settings}: a container is left"
        );
    }
}

#[tokio::test]
async fn i42_s1_executor_check_says_each_step_and_what_fixes_it() {
    let podman = podman();
    let image = podman.test_image(KANDEV.path());
    let Setup { home: _home, _repo, server, _gone, .. } = setup(json!({"image": image})).await;
    let executors = call(&server, "executor.list", json!({})).await;
    let id = executors["executors"][0]["id"].clone();
    let checked = call(&server, "executor.check", json!({"id": id})).await;
    assert_eq!(checked["ok"], true, "{checked}");
    let steps: Vec<&str> =
        checked["steps"].as_array().unwrap().iter().map(|s| s["what"].as_str().unwrap()).collect();
    assert_eq!(steps, ["engine", "image", "kandev"], "{checked}");

    for (image, failed_step, fix) in [
        ("localhost/kandev-missing:1".to_owned(), "image", "pull"),
        (podman.busybox_image(), "kandev", "glibc"),
    ] {
        call(&server, "executor.update", json!({"id": id, "container": {"image": image}})).await;
        let checked = call(&server, "executor.check", json!({"id": id})).await;
        assert_eq!(checked["ok"], false, "{checked}");
        let last = checked["steps"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["what"], failed_step, "{checked}");
        assert!(last["detail"].as_str().unwrap().contains(fix), "{checked}");
    }
}

/// The server's environment for Podman (the tests' configuration and store).
fn podman_env(podman: &Podman) -> Vec<(&'static str, String)> {
    podman.env().iter().map(|(k, v)| (*k, v.display().to_string())).collect()
}

#[tokio::test]
async fn i42_a3_kill_9_during_streaming_turns_in_containers_then_restart_every_turn_completes_once()
{
    const CHUNKS: u64 = 150;
    const BYTES: usize = 24;
    let image = podman().test_image(KANDEV.path());
    let Setup { podman, home, _repo, mut server, repository, _gone, task, session } =
        setup(json!({"image": image})).await;
    let mut tasks = vec![(task, session, _gone)];
    for i in 0..2 {
        let (task, session) = add_task(&server, &repository, &format!("r6-{i}")).await;
        let gone = Removed(format!("kandev-{task}"));
        tasks.push((task, session, gone));
    }
    let script = format!("#!mock\nstream {CHUNKS} {BYTES} every 20");
    let sessions: Vec<String> = tasks.iter().map(|(_, s, _)| s.clone()).collect();
    let mut watch = Watch::sessions(&server, &sessions).await;
    for session in &sessions {
        call(&server, "message.add", json!({"session_id": session, "content": script})).await;
    }
    for session in &sessions {
        let what = format!("the turn of {session} streams");
        watch.messages(&server, session, &what, |m| agent_text(m).len() >= BYTES * 10).await;
    }
    let agents: Vec<Vec<u32>> = tasks
        .iter()
        .map(|(task, ..)| processes_in(&podman, &format!("kandev-{task}"), "mock-agent"))
        .collect();
    let counts: Vec<usize> = agents.iter().map(Vec::len).collect();
    assert_eq!(counts, [1, 1, 1], "one agent in each task's container");
    server.kill_9();

    let env = podman_env(&podman);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let restarted = KANDEV.launch(home.path(), "127.0.0.1:0", &[], &env);
    let mut watch = Watch::sessions(&restarted, &sessions).await;
    let expected: String = (0..CHUNKS).map(|i| stream_chunk_text(i, BYTES)).collect();
    for ((task, session, _), before) in tasks.iter().zip(&agents) {
        let what = format!("the turn of {session} completes");
        watch
            .until(&what, || async {
                let now = state(&restarted, session).await;
                assert!(now == "RUNNING" || now == "WAITING_FOR_INPUT", "{session}: {now}");
                (now == "WAITING_FOR_INPUT").then_some(())
            })
            .await;
        let stored = messages(&restarted, session).await;
        assert_eq!(agent_text(&stored), expected, "every chunk once, in order, in {session}");
        let turns = call(&restarted, "session.turn.list", json!({"session_id": session})).await;
        assert_eq!(turns["turns"].as_array().unwrap().len(), 1, "one turn in {session}");
        // The same agent process: re-adopted in its container, not started again (no load).
        let after = processes_in(&podman, &format!("kandev-{task}"), "mock-agent");
        assert_eq!(&after, before, "the agent of {task} is the one before the kill");
    }
    for (task, ..) in &tasks {
        call(&restarted, "task.delete", json!({"id": task, "force": true})).await;
        assert!(!container_exists(&podman, &format!("kandev-{task}")), "the container of {task}");
    }
    for pid in agents.iter().flatten() {
        let pid = *pid;
        eventually("no agent is left", || async move { !support::alive(pid) }).await;
    }
}

/// Issue 45 item 13: a dev server in a task's container survives a `kill -9` of the server;
/// the restarted one takes it over, its log kept, and makes its relay from this host again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i45_13_a_dev_server_in_a_container_goes_on_after_a_kill_9_and_is_reached_again() {
    let image = podman().test_image(KANDEV.path());
    let script = json!({"dev_script":
        "echo \"serving in $(hostname)\"; exec busybox httpd -f -p 127.0.0.1:$PORT -h ."});
    let Setup { podman, home, _repo, mut server, _gone, task, session, .. } =
        setup_with(json!({"image": image}), script).await;
    agent_up(&server, &session).await;
    let dev = call(&server, "devserver.start", json!({"task_id": task})).await;
    let url = dev["dev_server"]["url"].as_str().unwrap().to_owned();
    let fetch = |url: String| async move {
        let got = reqwest::get(format!("{url}README.md")).await.ok()?;
        got.status().is_success().then_some(())?;
        got.text().await.ok()
    };
    let before = eventually("the dev server answers", || fetch(url.clone())).await;
    let container = format!("kandev-{task}");
    let httpd = processes_in(&podman, &container, "busybox httpd");
    assert_eq!(httpd.len(), 1, "{httpd:?}");
    server.kill_9();

    let env = podman_env(&podman);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let restarted = KANDEV.launch(home.path(), "127.0.0.1:0", &[], &env);
    let listed = call(&restarted, "devserver.list", json!({"task_id": task})).await;
    let kept = &listed["dev_servers"][0];
    assert_eq!(kept["url"], url, "{listed}");
    assert_eq!(kept["state"], "running", "{listed}");
    let what = "the log from before the restart";
    let log = eventually(what, || async {
        let listed = call(&restarted, "devserver.list", json!({"task_id": task})).await;
        let log = listed["dev_servers"][0]["log"].as_str().unwrap_or_default().to_owned();
        log.contains(&format!("serving in {container}")).then_some(log)
    })
    .await;
    assert_eq!(log.matches("serving in").count(), 1, "once: {log}");
    let after = eventually("the relay is made again", || fetch(url.clone())).await;
    assert_eq!(after, before);
    let same = processes_in(&podman, &container, "busybox httpd");
    assert_eq!(same, httpd, "the same dev server, not started again");
    call(&restarted, "devserver.stop", json!({"task_id": task})).await;
    eventually("the dev server is gone", || async {
        processes_in(&podman, &container, "busybox httpd").is_empty().then_some(())
    })
    .await;
    call(&restarted, "task.delete", json!({"id": task, "force": true})).await;
    restarted.terminate();
}

/// Opens a terminal of `task`, types `line` in it and returns the output once it holds
/// `needle` and the line after it.
async fn terminal_says(server: &Server, task: &str, line: &str, needle: &str) -> String {
    use futures::{SinkExt, StreamExt};
    use kandev_api_types::frame;
    use tokio_tungstenite::tungstenite::Message;
    let opened =
        call(server, "terminal.open", json!({"task_id": task, "cols": 100, "rows": 30})).await;
    let id = opened["terminal"]["id"].as_str().unwrap().to_owned();
    let url = format!("{}/ws", server.url.replace("http", "ws"));
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let attach = json!({"id": "a", "type": "request", "action": "terminal.attach",
        "payload": {"terminal_id": id}});
    ws.send(Message::text(attach.to_string())).await.unwrap();
    let input = frame::encode(frame::INPUT, &id, format!("{line}\n").as_bytes()).unwrap();
    ws.send(Message::binary(input)).await.unwrap();
    let mut output = String::new();
    let deadline = tokio::time::Instant::now() + support::DEADLINE;
    while !output.split_once(needle).is_some_and(|(_, after)| after.contains('\n')) {
        let next = tokio::time::timeout_at(deadline, ws.next()).await;
        let Ok(Some(Ok(message))) = next else { panic!("no {needle} from the terminal: {output}") };
        let Message::Binary(bytes) = message else { continue };
        if let Some((frame::OUTPUT, _, payload)) = frame::decode(&bytes) {
            output.push_str(&String::from_utf8_lossy(payload));
        }
    }
    call(server, "terminal.close", json!({"terminal_id": id})).await;
    output
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i42_a2_with_host_ports_only_those_ports_of_the_host_are_reachable() {
    use tokio::io::AsyncWriteExt;
    let allowed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    // The port not allowed answers too: reaching it would show.
    let other_port = other.local_addr().unwrap().port();
    let _other = tokio::spawn(async move {
        while let Ok((mut socket, _)) = other.accept().await {
            let _ = socket.write_all(b"not allowed\n").await;
        }
    });
    let allowed_port = allowed.local_addr().unwrap().port();
    let image = podman().test_image(KANDEV.path());
    let settings = json!({"image": image, "network": "host_ports", "host_ports": [allowed_port]});
    let Setup { podman, home: _home, _repo, server, _gone, task, session, .. } =
        setup(settings).await;
    // The relays start with the container's link: once the agent is up.
    agent_up(&server, &session).await;
    let answer = tokio::spawn(async move {
        let (mut socket, _) = allowed.accept().await.unwrap();
        socket.write_all(b"from the host\n").await.unwrap();
    });
    let container = format!("kandev-{task}");
    let ask = |port: u16| {
        let (podman, container) = (&podman, &container);
        async move {
            let script = format!("nc -w 3 127.0.0.1 {port} </dev/null");
            tokio::task::block_in_place(|| exec(podman, container, &script))
        }
    };
    let (reached, said) = ask(allowed_port).await;
    tokio::time::timeout(support::DEADLINE, answer).await.unwrap().unwrap();
    assert!(reached && said == "from the host", "port {allowed_port}: {reached} {said:?}");
    let (reached, said) = ask(other_port).await;
    assert!(!reached && said.is_empty(), "port {other_port} is not allowed: {said:?}");
    let (_, interfaces) = exec(&podman, &container, "ls /sys/class/net");
    assert_eq!(interfaces, "lo", "no network but the relays");
    // A graceful stop does not wait for the relays: they end with the runner link.
    server.terminate();
}

#[tokio::test]
async fn i42_s2_a_container_whose_task_is_gone_is_removed_at_startup() {
    let image = podman().test_image(KANDEV.path());
    let Setup { podman, home, _repo, mut server, _gone, task, session, .. } =
        setup(json!({"image": image})).await;
    agent_up(&server, &session).await;
    let container = format!("kandev-{task}");
    assert!(container_exists(&podman, &container));
    server.kill_9();
    // The task is deleted while no server runs: nothing removed its container.
    {
        let location = kandev_store::Location::File(home.path().join("kandev.db"));
        let store = kandev_store::Store::open(location).await.unwrap();
        let mut tx = store.begin_write().await.unwrap();
        tx.delete_task(&kandev_domain::TaskId::new(task.clone())).await.unwrap();
        tx.commit().await.unwrap();
        store.close().await;
    }
    assert!(container_exists(&podman, &container), "still there while no server runs");
    let env = podman_env(&podman);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let restarted = KANDEV.launch(home.path(), "127.0.0.1:0", &[], &env);
    call(&restarted, "workspace.list", json!({})).await;
    assert!(!container_exists(&podman, &container), "removed at startup");
    let runner_dir = home.path().join("containers").join(&container);
    assert!(!runner_dir.exists(), "its folder is removed with it");
    restarted.terminate();
}

/// The runner's folder is the agent's home, so the agent can put anything at its socket's
/// path, a symlink to a socket of this host included: the server must never speak the runner
/// protocol to what listens there unless it runs in the container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i42_s3_a_symlink_at_the_runner_socket_never_leads_the_server_out_of_the_container() {
    use tokio::io::AsyncReadExt;
    let image = podman().test_image(KANDEV.path());
    let Setup { podman, home: _home, _repo, mut server, _gone, task, session, .. } =
        setup(json!({"image": image})).await;
    agent_up(&server, &session).await;
    let container = format!("kandev-{task}");
    // A socket of this host, as a host runner's would be.
    let host = tempfile::tempdir().unwrap();
    let bait = host.path().join("host-runner.sock");
    let listener = tokio::net::UnixListener::bind(&bait).unwrap();
    // The agent's move: the socket's path made a symlink to it, the runner killed, so the
    // server connects again.
    let runners = processes_in(&podman, &container, "kandev runner --socket /kandev-home/");
    assert_eq!(runners.len(), 1, "{runners:?}");
    let (ok, _) =
        exec(&podman, &container, &format!("ln -sf '{}' /kandev-home/runner.sock", bait.display()));
    assert!(ok, "the agent can replace its home's files");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(runners[0] as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // The server does connect (the test would prove nothing otherwise)...
    let (mut stream, _) =
        tokio::time::timeout(support::DEADLINE, listener.accept()).await.unwrap().unwrap();
    // ...and sends nothing: what listens is not in the container.
    let mut got = vec![];
    let read = tokio::time::timeout(support::DEADLINE, stream.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the server kept the connection open");
    assert!(got.is_empty(), "the server spoke to a socket outside the container: {got:?}");
    // Not a graceful stop: it would wait out the stop bound of an agent whose runner is gone.
    server.kill_9();
}

#[tokio::test]
async fn i42_s1_changed_settings_make_the_container_again_at_the_next_session_start() {
    let image = podman().test_image(KANDEV.path());
    let shared = tempfile::tempdir().unwrap();
    std::fs::write(shared.path().join("token.txt"), "mounted\n").unwrap();
    let Setup { podman, home: _home, _repo, server, _gone, task, session, .. } =
        setup(json!({"image": image})).await;
    agent_up(&server, &session).await;
    let container = format!("kandev-{task}");
    let read = format!("cat '{}/token.txt'", shared.path().display());
    assert!(!exec(&podman, &container, &read).0, "not mounted yet");

    let executors = call(&server, "executor.list", json!({})).await;
    let id = executors["executors"][0]["id"].clone();
    let mounts = json!([shared.path()]);
    call(
        &server,
        "executor.update",
        json!({"id": id, "container": {"image": image, "mounts": mounts}}),
    )
    .await;
    // A running container keeps what it was made with until a session starts.
    assert!(!exec(&podman, &container, &read).0, "a running container is not changed");
    let next = call(&server, "session.launch", json!({"task_id": task})).await;
    let next = next["session"]["id"].as_str().unwrap().to_owned();
    agent_up(&server, &next).await;
    let (ok, said) = exec(&podman, &container, &read);
    assert!(ok && said == "mounted", "made again with the new mount: {said:?}");
    server.terminate();
}

/// Issue 51 scope 3 in a real container: a profile's version that Kandev installed (under
/// `$KANDEV_HOME/agents`, put there by hand: the install itself is `agent_install.rs`'s)
/// runs in the task's container, which sees that folder read-only at the same path.
#[tokio::test]
async fn i51_3_a_profile_s_installed_version_runs_in_the_task_s_container_read_only() {
    let image = podman().test_image(KANDEV.path());
    let Setup { podman, home, _repo, server, _gone, task, session, .. } =
        setup(json!({"image": image})).await;
    agent_up(&server, &session).await;
    // The stand-in notes its version and whether it can write beside itself, in the
    // worktree (its working directory), then is the container's kandev mock agent.
    let bin = home.path().join("agents/qwen/4.0.0/node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = "#!/bin/sh\necho 4.0.0 >> ran.txt\n\
        if touch \"$(dirname \"$0\")/written\" 2>/dev/null; then echo writable >> ran.txt; \
        else echo read-only >> ran.txt; fi\nexec /opt/kandev/kandev mock-agent\n";
    std::fs::write(bin.join("qwen"), script).unwrap();
    std::fs::set_permissions(bin.join("qwen"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let profile = json!({"name": "Qwen 4", "kind": "qwen", "agent_version": "4.0.0"});
    let saved = call(&server, "agent.profile.create", profile).await;
    assert_eq!(saved["installed"], true, "{saved}");
    let launch = json!({"task_id": task, "agent_profile_id": saved["profile"]["id"],
        "prompt": "hello from the box"});
    let launched = call(&server, "session.launch", launch).await;
    let pinned = launched["session"]["id"].as_str().unwrap().to_owned();
    turn_done(&server, &pinned, 1).await;
    assert!(agent_text(&messages(&server, &pinned).await).contains("hello from the box"));

    let got = call(&server, "session.get", json!({"id": pinned})).await;
    let cwd = PathBuf::from(got["session"]["cwd"].as_str().unwrap());
    let ran = std::fs::read_to_string(cwd.join("ran.txt")).unwrap();
    assert_eq!(ran, "4.0.0\nread-only\n", "the installed version ran, read-only");
    assert!(!bin.join("written").exists());
    let container = format!("kandev-{task}");
    let agents = processes_in(&podman, &container, "/opt/kandev/kandev mock-agent");
    assert_eq!(agents.len(), 2, "both agents in the container: {agents:?}");
    server.terminate();
}
