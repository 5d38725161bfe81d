//! Issue 38, finding 1: one server per home and per SQLite database. A second `kandev serve`
//! on a home (or a database file) another server uses is refused at once, naming the first
//! one's pid, and touches nothing of it; the lock ends with the server, also with `kill -9`
//! while its local runner (which outlives it) runs on; `kandev user` works beside a server.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use serde_json::{Value, json};
use support::{KANDEV, Server, Watch, agents_of, call, launched_session};

mod support;

/// The local runner's grace is short enough that a failed test leaves nothing for long.
const LOCAL: [&str; 4] = ["--runner", "local", "--runner-grace", "60s"];

/// Runs `kandev serve` on `home` where it is expected to be refused; its exit status and
/// stderr. A server that starts instead (announces an address) is killed and fails the test.
fn refused_serve(home: &Path, extra: &[&str]) -> (ExitStatus, String) {
    let args: Vec<&str> =
        ["--addr", "127.0.0.1:0"].into_iter().chain(extra.iter().copied()).collect();
    let (mut child, line) =
        support::serve_first_line(KANDEV.command(), home, &args, Stdio::piped());
    // The first line is empty when the process ended without one.
    if line.contains("http://") {
        let _ = child.kill();
        let _ = child.wait();
        panic!("a second server started beside the first: {line}");
    }
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (status, stderr)
}

async fn answer(server: &Server, session: &str, prompt: &str) {
    let mut watch = Watch::sessions(server, &[session.to_owned()]).await;
    call(server, "message.add", json!({"session_id": session, "content": prompt})).await;
    let wanted = format!("echo: {prompt}");
    let answered = |m: &[Value]| m.iter().any(|m| m["content"] == wanted.as_str());
    watch.messages(server, session, &format!("the agent answers {prompt:?}"), answered).await;
}

#[tokio::test]
async fn i38_1_a_second_server_on_a_home_is_refused_and_the_first_is_untouched() {
    let home = tempfile::tempdir().unwrap();
    let mut first = KANDEV.start_with(home.path(), &LOCAL);
    let (_, session) = launched_session(&first, "one home").await;
    answer(&first, &session, "hello").await;
    let agents = agents_of(home.path());
    assert_eq!(agents.len(), 1, "the first server's agent runs");

    let (status, stderr) = refused_serve(home.path(), &LOCAL);
    assert!(!status.success(), "{status}: {stderr}");
    let wanted = format!(
        "another kandev server (pid {}) is using {}",
        first.child.id(),
        home.path().display()
    );
    assert!(stderr.contains(&wanted), "the refusal names the first server: {stderr}");
    assert!(stderr.contains("--home"), "it says what to do: {stderr}");

    // The first server serves on, with the same agent.
    assert_eq!(agents_of(home.path()), agents, "the first server's agent is untouched");
    answer(&first, &session, "still there").await;
    assert_eq!(agents_of(home.path()), agents, "the same agent answered");

    // The lock dies with the server, though its runner (and the agent) live on: a new
    // server starts at once and takes the agent over.
    first.kill_9();
    assert_eq!(agents_of(home.path()), agents, "the runner keeps the agent");
    let next = KANDEV.start_with(home.path(), &LOCAL);
    answer(&next, &session, "after the crash").await;
    next.terminate();
}

#[tokio::test]
async fn i38_1_a_second_server_on_a_sqlite_database_is_refused() {
    let data = tempfile::tempdir().unwrap();
    let database = data.path().join("team.db");
    let database = database.to_str().unwrap();
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let args = ["--runner", "none", "--database-url", database];
    let first = KANDEV.start_with(one.path(), &args);
    call(&first, "workspace.list", json!({})).await;

    let (status, stderr) = refused_serve(two.path(), &args);
    assert!(!status.success(), "{status}: {stderr}");
    let wanted = format!(
        "another kandev server (pid {}) is using the database {database}",
        first.child.id()
    );
    assert!(stderr.contains(&wanted), "the refusal names the first server: {stderr}");
    call(&first, "workspace.list", json!({})).await;
    first.terminate();
    // Stopped, it leaves the database to the next server.
    KANDEV.start_with(two.path(), &args).terminate();
}

#[tokio::test]
async fn i38_1_user_commands_work_beside_a_running_server() {
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start_with(home.path(), &["--runner", "none"]);
    call(&server, "workspace.list", json!({})).await;
    let user = |args: &[&str], stdin: &str| {
        let mut child = Command::new(KANDEV)
            .arg("user")
            .args(args)
            .env("KANDEV_HOME", home.path())
            .env_remove("KANDEV_DATABASE_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "kandev user {args:?}: {stderr}");
        String::from_utf8(output.stdout).unwrap()
    };
    user(&["add", "alice"], "correct horse battery\n");
    assert!(user(&["list"], "").contains("alice"));
    // The running server sees the user: a request without a login is refused now.
    let answer = reqwest::Client::new()
        .post(format!("{}/api/v1/workspace.list", server.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 401);
}
