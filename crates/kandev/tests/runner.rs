//! Issue 20 with the real binary: `serve --runner local` runs agents in a `kandev runner`
//! process that outlives the server; a restarted server takes over what the last run left
//! (rule 42's re-adopt branch; streaming turns: readopt.rs), and a runner whose server is
//! gone past the grace period kills its agents and ends.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::time::Duration;

use serde_json::{Value, json};
use support::{
    KANDEV, Server, Watch, agents_of, call, eventually, launched_session, parent_of, runners_of,
};

mod support;

const DEADLINE: Duration = support::DEADLINE;

/// A task with a started session whose agent answered one prompt.
async fn session_with_agent(server: &Server, prompt: &str) -> String {
    let (_, session) = launched_session(server, "runner").await;
    call(server, "message.add", json!({"session_id": session, "content": prompt})).await;
    wait_for_answer(server, &session, &format!("echo: {prompt}")).await;
    session
}

async fn wait_for_answer(server: &Server, session: &str, answer: &str) {
    let mut watch = Watch::sessions(server, &[session.to_owned()]).await;
    let answered = |m: &[Value]| m.iter().any(|m| m["content"] == answer);
    watch.messages(server, session, &format!("the agent answers {answer:?}"), answered).await;
}

#[tokio::test]
async fn i20_s2_local_runner_owns_the_agents_and_a_restart_leaves_no_orphan() {
    let home = tempfile::tempdir().unwrap();
    let local = ["--runner", "local", "--runner-grace", "60s"];
    let mut server = KANDEV.start_with(home.path(), &local);
    let session = session_with_agent(&server, "hello runner").await;
    let runners = runners_of(home.path());
    assert_eq!(runners.len(), 1, "one runner for the home");
    let agents = agents_of(home.path());
    assert_eq!(agents.len(), 1);
    assert_eq!(parent_of(agents[0]), runners[0], "the agent is the runner's child");

    // kill -9: the runner and its agent stay (grace period).
    server.kill_9();
    assert_eq!(agents_of(home.path()), agents, "the agent outlives the killed server");

    // The restarted server reuses the runner and takes the waiting agent over (rule 42's
    // re-adopt branch): the same process answers the next prompt, without session/load.
    let restarted = KANDEV.start_with(home.path(), &local);
    assert_eq!(runners_of(home.path()), runners, "the same runner serves the new server");
    let got = call(&restarted, "session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["state"], "WAITING_FOR_INPUT");
    call(&restarted, "message.add", json!({"session_id": session, "content": "again"})).await;
    wait_for_answer(&restarted, &session, "echo: again").await;
    assert_eq!(agents_of(home.path()), agents, "the same agent");
    let counters = kandev_mock_agent::Counters::read(&home.path().join("mock-agent")).unwrap();
    assert_eq!(counters.count(kandev_mock_agent::CallKind::Load), 0, "no session/load");

    // A graceful stop stops the agent; the runner, with nothing left, ends too.
    restarted.terminate();
    eventually("no agent is left", async || agents_of(home.path()).is_empty()).await;
    eventually("the runner ends", async || runners_of(home.path()).is_empty()).await;
    assert!(!home.path().join("runner.sock").exists());
}

#[tokio::test]
async fn i20_a2_a_runner_whose_server_is_gone_past_the_grace_period_kills_its_agents() {
    let home = tempfile::tempdir().unwrap();
    let mut server = KANDEV.start_with(home.path(), &["--runner", "local", "--runner-grace", "1s"]);
    session_with_agent(&server, "hello").await;
    let agents = agents_of(home.path());
    assert_eq!(agents.len(), 1);
    server.kill_9();
    eventually("the agent is killed after the grace period", async || {
        agents_of(home.path()).is_empty()
    })
    .await;
    eventually("the runner ends", async || runners_of(home.path()).is_empty()).await;
}

/// `kandev runner --stdio` (what an SSH channel runs): started, it relays to a runner on the
/// socket; a dropped channel is a server-away period, and the next channel takes the
/// execution over with the output it missed, after the last acknowledged item, once.
#[tokio::test]
async fn i20_s1_the_protocol_runs_over_stdio_and_a_dropped_channel_replays() {
    use kandev_runtime::runner::{RunnerClient, SpawnSpec};
    use tokio::io::AsyncReadExt;

    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("runner.sock");
    let flag = dir.path().join("go-on");
    let relay = || {
        let mut child = tokio::process::Command::new(KANDEV)
            .args(["runner", "--stdio", "--grace", "30s", "--socket"])
            .arg(&socket)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let io = tokio::io::join(child.stdout.take().unwrap(), child.stdin.take().unwrap());
        (child, io)
    };
    let (mut first, io) = relay();
    let (client, listed) = RunnerClient::connect(io).await.unwrap();
    assert!(listed.is_empty());
    let script = format!(
        "echo one; while [ ! -f {} ]; do sleep 0.02; done; echo two; exec sleep 600",
        flag.display()
    );
    let spec = SpawnSpec {
        program: "sh".into(),
        args: vec!["-c".into(), script],
        env: vec![],
        cwd: dir.path().to_path_buf(),
        secrets: vec![],
        pty: None,
        scrollback: 0,
    };
    let mut execution = client.spawn("s", spec).await.unwrap();
    let mut one = [0u8; 4];
    tokio::time::timeout(DEADLINE, execution.stdout.read_exact(&mut one)).await.unwrap().unwrap();
    assert_eq!(&one, b"one\n");
    first.kill().await.unwrap(); // the channel drops
    client.closed().await;
    std::fs::write(&flag, "").unwrap(); // the agent writes while nobody listens

    let (_second, io) = relay();
    let (client, listed) = RunnerClient::connect(io).await.unwrap();
    assert_eq!(listed.len(), 1, "the runner kept the execution");
    assert_eq!(listed[0].pid, execution.control.pid());
    let expected = if listed[0].acked == 0 { "one\ntwo\n" } else { "two\n" };
    let mut adopted = client.attach(&listed[0]);
    let mut got = vec![0u8; expected.len()];
    tokio::time::timeout(DEADLINE, adopted.stdout.read_exact(&mut got)).await.unwrap().unwrap();
    assert_eq!(String::from_utf8(got).unwrap(), expected);
    let exit = tokio::time::timeout(DEADLINE, adopted.control.stop(Duration::from_millis(200)))
        .await
        .unwrap();
    assert_eq!(exit.signal(), Some(15));
    client.close();
    // With nothing left to keep, the runner ends when its owner goes.
    eventually("the runner ends", async || !socket.exists()).await;
}

/// A runner whose socket is gone (its home deleted) can never get a server again: it ends
/// with its agents instead of waiting for the grace period.
#[tokio::test]
async fn i20_s2_a_runner_whose_socket_is_gone_ends_with_its_agents() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().to_path_buf();
    let mut server = KANDEV.start_with(&path, &["--runner", "local", "--runner-grace", "10m"]);
    session_with_agent(&server, "hello").await;
    assert_eq!(agents_of(&path).len(), 1);
    assert_eq!(runners_of(&path).len(), 1);
    server.kill_9();
    drop(home); // deletes the socket with the home
    eventually("the agent is gone", async || agents_of(&path).is_empty()).await;
    eventually("the runner ends", async || runners_of(&path).is_empty()).await;
}

/// Issue 38 item 2: a runner killed with `kill -9` (an OOM kill, say) mid-turn ends that turn
/// as `agent_exited`; without a server restart, a new runner is started and connected to, and
/// the next message resumes the session on it and gets a reply.
#[tokio::test]
async fn i38_2_a_runner_killed_mid_turn_is_replaced_and_the_next_message_gets_a_reply() {
    let home = tempfile::tempdir().unwrap();
    let server = KANDEV.start_with(home.path(), &["--runner", "local", "--runner-grace", "60s"]);
    let session = session_with_agent(&server, "before").await;
    let mut watch = Watch::sessions(&server, std::slice::from_ref(&session)).await;
    let long = "#!mock\nsay working\nsleep 60000\nsay never";
    call(&server, "message.add", json!({"session_id": session, "content": long})).await;
    let working = |m: &[Value]| m.iter().any(|m| m["content"] == "working");
    watch.messages(&server, &session, "the turn is under way", working).await;
    let runners = runners_of(home.path());
    assert_eq!(runners.len(), 1, "one runner for the home");

    let status =
        std::process::Command::new("kill").args(["-9", &runners[0].to_string()]).status().unwrap();
    assert!(status.success());
    watch.state(&server, &session, "WAITING_FOR_INPUT").await;
    let got = call(&server, "session.get", json!({"id": session})).await;
    assert_eq!(got["session"]["last_error"]["code"], "agent_exited", "{got}");
    let said = got["session"]["last_error"]["message"].as_str().unwrap();
    assert_eq!(
        said,
        "the agent was lost (the connection to the runner was lost); send a message to start it again"
    );

    call(&server, "message.add", json!({"session_id": session, "content": "after"})).await;
    wait_for_answer(&server, &session, "echo: after").await;
    let now = runners_of(home.path());
    assert_eq!(now.len(), 1, "one new runner");
    assert_ne!(now, runners, "a new runner process");
    let agents = agents_of(home.path());
    assert_eq!(agents.len(), 1);
    assert_eq!(parent_of(agents[0]), now[0], "the new agent is the new runner's child");
}
