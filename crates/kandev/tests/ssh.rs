//! Issue 20, the SSH executor's transport against a real OpenSSH server (kandev_testkit::sshd):
//! host keys are checked and an unknown one is refused with how to trust it, the remote
//! `kandev` is installed or replaced when of another version, and an ACP turn of the mock
//! agent runs through `kandev runner --stdio` on the far side; the connection dropped five
//! times mid-stream loses and duplicates nothing (R7 at the runtime level).

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::path::Path;
use std::time::Duration;

use kandev_runtime::runner::ssh::{Backoff, Installed, SshError, SshRunner, connect_link};
use kandev_runtime::runner::{AckPolicy, RemoteExecution, SpawnSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod support;

use kandev_testkit::sshd::Sshd;
use support::{KANDEV, call, eventually_within};

const WAIT: Duration = Duration::from_secs(60);

fn runner(sshd: &Sshd, remote_home: &Path) -> SshRunner {
    SshRunner::new(sshd.settings(remote_home), KANDEV.path().into(), Duration::from_secs(60))
}

/// Waits, within [`WAIT`], until the remote runner of `remote_home` ended: it removes its
/// socket file when it does. The runner is another process on the far side of ssh that
/// tells this test nothing when it ends, so its socket file is polled (bounded, with a
/// clear failure).
async fn runner_ends(remote_home: &Path) {
    runner_ends_within(remote_home, WAIT).await;
}

/// [`runner_ends`] with its own bound.
async fn runner_ends_within(remote_home: &Path, bound: Duration) {
    let socket = remote_home.join("runner.sock");
    let what = format!("the remote runner to end (to remove {})", socket.display());
    eventually_within(bound, what, async || !socket.exists()).await;
}

async fn local_version() -> String {
    let out = tokio::process::Command::new(KANDEV).arg("--version").output().await.unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test]
async fn i20_a4_an_unknown_host_key_is_refused_with_how_to_trust_it() {
    let sshd = Sshd::start();
    let remote = tempfile::tempdir().unwrap();
    let mut settings = sshd.settings(remote.path());
    let known_hosts = sshd.dir.path().join("empty_known_hosts");
    std::fs::write(&known_hosts, "").unwrap();
    settings.known_hosts = known_hosts.clone();
    let ssh = SshRunner::new(settings, KANDEV.path().into(), Duration::from_secs(60));

    let err = tokio::time::timeout(WAIT, ssh.connect()).await.unwrap().err().expect("refused");
    assert!(matches!(err, SshError::UnknownHostKey { .. }), "{err:?}\nsshd: {}", sshd.log());
    let message = err.to_string();
    let advice = format!("ssh-keyscan -p {} 127.0.0.1 >> {}", sshd.port, known_hosts.display());
    assert!(message.contains(&advice), "{message}");
    assert!(!remote.path().join("bin").exists(), "nothing was installed on an untrusted host");
    assert!(std::fs::read_to_string(&known_hosts).unwrap().is_empty(), "the key was not added");

    // The advice works: after it, the host is reached.
    let keyscan = std::process::Command::new("sh").arg("-c").arg(&advice).output().unwrap();
    assert!(keyscan.status.success(), "{keyscan:?}");
    assert_eq!(ssh.remote_version().await.unwrap(), None, "reached; no kandev there yet");
}

/// A known host whose key changed is refused too, with how to remove the old key.
#[tokio::test]
async fn i20_a4_a_changed_host_key_is_refused_with_how_to_replace_it() {
    let sshd = Sshd::start();
    let remote = tempfile::tempdir().unwrap();
    let other = sshd.dir.path().join("other_key");
    let keygen = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .status()
        .unwrap();
    assert!(keygen.success());
    let public = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let key: Vec<&str> = public.split_whitespace().take(2).collect();
    let known_hosts = sshd.dir.path().join("stale_known_hosts");
    std::fs::write(&known_hosts, format!("[127.0.0.1]:{} {}\n", sshd.port, key.join(" "))).unwrap();
    let mut settings = sshd.settings(remote.path());
    settings.known_hosts = known_hosts.clone();
    let ssh = SshRunner::new(settings, KANDEV.path().into(), Duration::from_secs(60));
    let err = tokio::time::timeout(WAIT, ssh.connect()).await.unwrap().err().expect("refused");
    assert!(matches!(err, SshError::ChangedHostKey { .. }), "{err:?}");
    let message = err.to_string();
    let advice = format!("ssh-keygen -f {} -R '[127.0.0.1]:{}'", known_hosts.display(), sshd.port);
    assert!(message.contains(&advice), "{message}");
    assert!(!remote.path().join("bin").exists(), "nothing was installed");
}

#[tokio::test]
async fn i20_a4_a_remote_kandev_of_another_version_is_replaced() {
    let sshd = Sshd::start();
    let remote = tempfile::tempdir().unwrap();
    let bin = remote.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let old = bin.join("kandev");
    std::fs::write(&old, "#!/bin/sh\necho kandev 0.0.1\n").unwrap();
    std::process::Command::new("chmod").arg("755").arg(&old).status().unwrap();
    let ssh = runner(&sshd, remote.path());
    assert_eq!(ssh.remote_version().await.unwrap().as_deref(), Some("kandev 0.0.1"));

    let installed = tokio::time::timeout(WAIT, ssh.install()).await.unwrap().unwrap();
    assert_eq!(installed, Installed::Copied { previous: Some("kandev 0.0.1".into()) });
    let version = local_version().await;
    assert_eq!(ssh.remote_version().await.unwrap(), Some(version));
    assert_eq!(ssh.install().await.unwrap(), Installed::Present, "the same version stays");
    let leftovers: Vec<_> =
        std::fs::read_dir(&bin).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers, vec![std::ffi::OsString::from("kandev")], "no upload file is left");

    // Where it cannot be installed, the start fails and says why.
    let blocked = tempfile::tempdir().unwrap();
    std::fs::write(blocked.path().join("bin"), "a file where bin/ should be").unwrap();
    let err = runner(&sshd, blocked.path()).connect().await.err().expect("cannot install");
    assert!(matches!(err, SshError::Install { .. }), "{err:?}");
    assert!(err.to_string().starts_with("cannot install kandev on"), "{err}");
}

/// A remote `kandev` of the right version whose runner never answers (a live sshd, a remote
/// command that reads and says nothing): the handshake times out within its bound with a
/// transient error that says so, and reconnecting gives up after its attempts instead of
/// hanging.
#[tokio::test]
async fn i20_d1_a_runner_that_never_answers_times_out_the_handshake() {
    let sshd = Sshd::start();
    let remote = tempfile::tempdir().unwrap();
    let bin = remote.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let silent = bin.join("kandev");
    let version = local_version().await;
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\ncat >/dev/null\n"
    );
    std::fs::write(&silent, script).unwrap();
    std::process::Command::new("chmod").arg("755").arg(&silent).status().unwrap();
    let bound = Duration::from_secs(2);
    let ssh = runner(&sshd, remote.path()).with_handshake_timeout(bound);

    let start = std::time::Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(20), ssh.connect()).await;
    let err = match outcome {
        Ok(Err(err)) => err,
        Ok(Ok(_)) => panic!("a silent runner cannot complete a handshake"),
        Err(_) => panic!("the handshake is not bounded: still waiting after 20 s"),
    };
    assert!(matches!(err, SshError::Timeout { .. }), "{err:?}");
    assert!(err.is_transient(), "a later attempt may find the runner answering");
    let text = err.to_string();
    assert!(text.contains("handshake") && text.contains("never answered"), "{text}");
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}", start.elapsed());

    let backoff =
        Backoff { first: Duration::from_millis(10), max: Duration::from_millis(10), attempts: 2 };
    let again = tokio::time::timeout(Duration::from_secs(30), ssh.reconnect(backoff))
        .await
        .expect("reconnecting moves on after its attempts");
    assert!(matches!(again, Err(SshError::Timeout { .. })), "{:?}", again.err());
}

/// Reads ACP messages (JSON lines) from an execution's stdout; the stream goes on across
/// executions (the same agent re-attached after a reconnect).
struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    /// The next whole message, or `None` at the end of `execution`'s stdout.
    async fn next(&mut self, execution: &mut RemoteExecution) -> Option<Value> {
        loop {
            if let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).expect("a JSON line"));
            }
            let mut chunk = [0u8; 8192];
            let n = tokio::time::timeout(WAIT, execution.stdout.read(&mut chunk))
                .await
                .expect("output in time")
                .unwrap();
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

async fn send(execution: &mut RemoteExecution, message: Value) {
    let mut line = serde_json::to_vec(&message).unwrap();
    line.push(b'\n');
    execution.stdin.write_all(&line).await.unwrap();
}

/// Waits for the answer to request `id`.
async fn answer(lines: &mut Lines, execution: &mut RemoteExecution, id: u64) -> Value {
    loop {
        let message = lines.next(execution).await.expect("the agent answers");
        if message["id"] == id && message.get("method").is_none() {
            return message;
        }
    }
}

/// The answer that allows a `session/request_permission` request.
fn allow(request: &Value) -> Value {
    let option = request["params"]["options"][0]["optionId"].clone();
    json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": option}}})
}

/// What one agent message adds to the test's record: a streamed chunk's number, or a
/// permission request to answer.
fn record(message: &Value, chunks: &mut Vec<u64>, said: &mut Vec<String>, gates: &mut Vec<Value>) {
    if message["method"] == "session/request_permission" {
        gates.push(message.clone());
        return;
    }
    let update = &message["params"]["update"];
    if update["sessionUpdate"] == "agent_message_chunk" {
        let text = update["content"]["text"].as_str().unwrap();
        match text.split_once('|') {
            Some((number, _)) if number.len() == 6 => chunks.push(number.parse().unwrap()),
            _ => said.push(text.to_owned()),
        }
    }
}

/// R7 at the runtime level: the turn streams six batches of paced chunks with a permission
/// gate between batches (so the turn cannot end before the test let it go five times); a few
/// chunks after each gate is answered, the `ssh` client is killed mid-stream, the connection
/// comes back with back-off and the same agent is re-attached after the last item this side
/// took. Every chunk arrives once, in order.
#[tokio::test]
async fn i20_r7_an_acp_turn_over_ssh_survives_five_dropped_connections() {
    const BATCH: u64 = 40;
    const DROPS: usize = 5;
    let sshd = Sshd::start();
    let remote = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let ssh = runner(&sshd, remote.path());
    let mut connection = tokio::time::timeout(WAIT, ssh.connect()).await.unwrap().unwrap();
    assert!(connection.executions.is_empty());
    let spec = SpawnSpec {
        program: ssh.remote_kandev(),
        args: vec!["mock-agent".into()],
        env: vec![],
        cwd: work.path().to_path_buf(),
        secrets: vec![],
        pty: None,
        scrollback: 0,
    };
    let mut agent =
        connection.client.spawn_with("agent-1", spec, AckPolicy::OnDelivery).await.unwrap();
    let pid = agent.control.pid();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(exe, remote.path().join("bin/kandev"), "the agent runs the remote copy");

    let mut lines = Lines { buf: Vec::new() };
    send(
        &mut agent,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    )
    .await;
    let init = answer(&mut lines, &mut agent, 1).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    send(
        &mut agent,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": work.path(), "mcpServers": []}}),
    )
    .await;
    let new = answer(&mut lines, &mut agent, 2).await;
    let session = new["result"]["sessionId"].clone();
    assert!(session.is_string(), "{new}");
    let mut script = String::from("#!mock");
    for gate in 0..DROPS {
        script.push_str(&format!("\nstream {BATCH} 48 every 10\nask_permission gate {gate}"));
    }
    script.push_str(&format!("\nstream {BATCH} 48 every 10"));
    send(
        &mut agent,
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": script}]}}),
    )
    .await;

    let (mut chunks, mut said, mut gates) = (Vec::new(), Vec::new(), Vec::new());
    let mut drops = 0;
    let mut drop_at: Option<usize> = None;
    let mut retired = Vec::new();
    let stop = loop {
        // A gate seen (here or in the old pipe's rest) is answered on the live connection.
        for gate in gates.drain(..) {
            send(&mut agent, allow(&gate)).await;
            if drops < DROPS {
                drop_at = Some(chunks.len() + 3);
            }
        }
        let message = lines.next(&mut agent).await.expect("the agent's output goes on");
        if message["id"] == 3 && message.get("method").is_none() {
            break message;
        }
        record(&message, &mut chunks, &mut said, &mut gates);
        if drop_at.is_some_and(|at| chunks.len() >= at) {
            drop_at = None;
            drops += 1;
            connection.drop_transport().await;
            // What was delivered before the drop is still read from the old pipe.
            while let Some(message) = lines.next(&mut agent).await {
                assert_ne!(message["id"], 3, "the turn cannot end before its gates are answered");
                record(&message, &mut chunks, &mut said, &mut gates);
            }
            let committed = agent.acks.committed();
            let backoff = Backoff {
                first: Duration::from_millis(50),
                max: Duration::from_secs(1),
                attempts: 20,
            };
            connection = tokio::time::timeout(WAIT, ssh.reconnect(backoff)).await.unwrap().unwrap();
            let listed = connection
                .executions
                .iter()
                .find(|e| e.exec == "agent-1")
                .expect("the runner kept the agent")
                .clone();
            assert_eq!(listed.pid, pid, "the same agent");
            let adopted = connection.client.attach_with(&listed, AckPolicy::OnDelivery, committed);
            retired.push(std::mem::replace(&mut agent, adopted));
        }
    };
    assert_eq!(drops, DROPS, "every drop happened mid-turn");
    assert_eq!(stop["result"]["stopReason"], "end_turn", "{stop}");
    let expected: Vec<u64> = (0..=DROPS).flat_map(|_| 0..BATCH).collect();
    assert_eq!(chunks, expected, "every chunk exactly once, in order");
    let allowed: Vec<&String> = said.iter().filter(|t| t.starts_with("permission:")).collect();
    assert_eq!(allowed.len(), DROPS, "each gate answered once: {said:?}");

    // The agent is stopped through the last connection; the runner, left with nothing, ends.
    let exit =
        tokio::time::timeout(WAIT, agent.control.stop(Duration::from_millis(500))).await.unwrap();
    assert!(exit.signal().is_some() || exit.code().is_some(), "{exit:?}");
    connection.client.close();
    runner_ends(remote.path()).await;
    drop(retired);
}

/// The same turn through a reconnecting runner connection: it reopens each dropped connection by itself
/// and the execution's one stdout goes on across the drops; every chunk once, in order.
#[tokio::test]
async fn i20_r7_a_linked_execution_goes_on_across_five_dropped_connections() {
    linked_turn_with_drops(DropAt::ChunksAfterAnswer).await;
}

/// Input is exactly-once across drops too (protocol 2): each permission answer is written
/// and the `ssh` client killed right away, before the runner acknowledged it (and maybe
/// before it left): the answer still reaches the agent, once, and the turn ends.
#[tokio::test]
async fn i20_d5_a_permission_answer_written_as_the_ssh_client_is_killed_reaches_the_agent() {
    linked_turn_with_drops(DropAt::Answer).await;
}

/// When a linked turn's connection is dropped, after each permission answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DropAt {
    /// A few chunks after the answer.
    ChunksAfterAnswer,
    /// Right after the answer is written.
    Answer,
}

async fn linked_turn_with_drops(at: DropAt) {
    const BATCH: u64 = 40;
    const DROPS: usize = 5;
    let sshd = Sshd::start();
    let remote = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let ssh = runner(&sshd, remote.path());
    let backoff =
        Backoff { first: Duration::from_millis(50), max: Duration::from_secs(1), attempts: 20 };
    let (link, held) =
        tokio::time::timeout(WAIT, connect_link(ssh.clone(), backoff)).await.unwrap().unwrap();
    assert!(held.is_empty());
    let spec = SpawnSpec {
        program: ssh.remote_kandev(),
        args: vec!["mock-agent".into()],
        env: vec![],
        cwd: work.path().to_path_buf(),
        secrets: vec![],
        pty: None,
        scrollback: 0,
    };
    let name = match at {
        DropAt::ChunksAfterAnswer => "agent-r7-linked",
        DropAt::Answer => "agent-d5",
    };
    let mut agent = link.spawn(name, spec).await.unwrap();
    let mut lines = Lines { buf: Vec::new() };
    let next = async |agent: &mut RemoteExecution, lines: &mut Lines| -> Value {
        loop {
            if let Some(end) = lines.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = lines.buf.drain(..=end).collect();
                return serde_json::from_slice(&line).expect("a JSON line");
            }
            let mut chunk = [0u8; 8192];
            let n = tokio::time::timeout(WAIT, agent.stdout.read(&mut chunk))
                .await
                .expect("output in time")
                .unwrap();
            assert!(n > 0, "the linked stdout goes on until the agent exits");
            lines.buf.extend_from_slice(&chunk[..n]);
        }
    };
    let write = async |agent: &mut RemoteExecution, message: Value| {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        agent.stdin.write_all(&line).await.unwrap();
    };
    write(
        &mut agent,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    )
    .await;
    let session = loop {
        let message = next(&mut agent, &mut lines).await;
        if message["id"] == 1 {
            write(
                &mut agent,
                json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": work.path(), "mcpServers": []}}),
            )
            .await;
        }
        if message["id"] == 2 {
            break message["result"]["sessionId"].clone();
        }
    };
    let mut script = String::from("#!mock");
    for gate in 0..DROPS {
        script.push_str(&format!("\nstream {BATCH} 48 every 10\nask_permission gate {gate}"));
    }
    script.push_str(&format!("\nstream {BATCH} 48 every 10"));
    write(
        &mut agent,
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": script}]}}),
    )
    .await;

    let (mut chunks, mut said, mut gates) = (Vec::new(), Vec::new(), Vec::new());
    let mut drop_at: Option<usize> = None;
    let mut drops = 0;
    let stop = loop {
        for gate in gates.drain(..) {
            write(&mut agent, allow(&gate)).await;
            if drops < DROPS && at == DropAt::Answer {
                drops += 1;
                link.drop_transport();
            } else if drops < DROPS {
                drop_at = Some(chunks.len() + 3);
            }
        }
        let message = next(&mut agent, &mut lines).await;
        if message["id"] == 3 && message.get("method").is_none() {
            break message;
        }
        record(&message, &mut chunks, &mut said, &mut gates);
        if drop_at.is_some_and(|at| chunks.len() >= at) {
            drop_at = None;
            drops += 1;
            link.drop_transport();
        }
    };
    assert_eq!(drops, DROPS);
    assert_eq!(stop["result"]["stopReason"], "end_turn", "{stop}");
    assert_eq!(link.connections(), 1 + DROPS as u64, "every drop was a new connection");
    let expected: Vec<u64> = (0..=DROPS).flat_map(|_| 0..BATCH).collect();
    assert_eq!(chunks, expected, "every chunk exactly once, in order");
    assert_eq!(said.iter().filter(|t| t.starts_with("permission:")).count(), DROPS);

    let exit =
        tokio::time::timeout(WAIT, agent.control.stop(Duration::from_millis(500))).await.unwrap();
    assert!(exit.signal().is_some() || exit.code().is_some(), "{exit:?}");
    drop(link);
    runner_ends(remote.path()).await;
}

/// A link dropped right after its agent's exit arrived lets the remote runner end at once
/// (it has nothing left to keep), well within its grace: the exit's acknowledgement reaches
/// the runner before the `ssh` client goes. CI once saw the runner keep the finished
/// execution for its whole grace: the acknowledgement died with the killed `ssh` client.
#[tokio::test]
async fn i20_d14_a_link_dropped_right_after_an_exit_lets_the_runner_end_at_once() {
    const ROUNDS: usize = 5;
    let sshd = Sshd::start();
    let remote = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // The grace (60 s) is far longer than the bound below: the runner must not wait it out.
    let ssh = runner(&sshd, remote.path());
    for round in 0..ROUNDS {
        let (link, held) =
            tokio::time::timeout(WAIT, connect_link(ssh.clone(), Backoff::default()))
                .await
                .unwrap()
                .unwrap();
        assert!(held.is_empty(), "round {round}: {held:?}");
        let spec = exits_with_3(work.path());
        let agent = link.spawn(&format!("agent-d14-{round}"), spec).await.unwrap();
        let exit = tokio::time::timeout(WAIT, agent.control.wait()).await.unwrap();
        assert_eq!(exit.code(), Some(3), "round {round}: {exit:?}");
        drop(link);
        runner_ends_within(remote.path(), Duration::from_secs(10)).await;
    }
}

/// An agent that exits with code 3 at once, in `cwd`.
fn exits_with_3(cwd: &Path) -> SpawnSpec {
    SpawnSpec {
        program: "sh".into(),
        args: vec!["-c".into(), "exit 3".into()],
        env: vec![],
        cwd: cwd.to_path_buf(),
        secrets: vec![],
        pty: None,
        scrollback: 0,
    }
}

/// A link closed with `finish()` right before its runtime ends (a server shutting down) lets
/// the remote runner end at once: `finish()` waits for the clean close, which carries the
/// exit's acknowledgement. A link only dropped closes in a task the ending runtime cuts
/// short: `ssh` is killed with the acknowledgement and the runner keeps the execution for
/// its whole grace (review finding: shutdown never closed the links).
#[test]
fn i20_d22_a_link_closed_before_its_runtime_ends_lets_the_runner_end_at_once() {
    let sshd = Sshd::start();
    let remote = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let ssh = runner(&sshd, remote.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (link, _) = tokio::time::timeout(WAIT, connect_link(ssh, Backoff::default()))
            .await
            .unwrap()
            .unwrap();
        let spec = exits_with_3(work.path());
        let agent = link.spawn("agent-d22", spec).await.unwrap();
        let exit = tokio::time::timeout(WAIT, agent.control.wait()).await.unwrap();
        assert_eq!(exit.code(), Some(3), "{exit:?}");
        tokio::time::timeout(WAIT, link.finish()).await.unwrap();
    });
    drop(runtime);
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(runner_ends_within(remote.path(), Duration::from_secs(10)));
}

/// `executor.check` through the real server: an unknown host key is an answer that says how
/// to trust it; once trusted, the server's binary is installed, then found present.
#[tokio::test]
async fn i20_a4_executor_check_refuses_an_unknown_host_and_installs_kandev() {
    let sshd = Sshd::start();
    let home = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let server = KANDEV.start(home.path());
    let untrusted = sshd.dir.path().join("untrusted_known_hosts");
    std::fs::write(&untrusted, "").unwrap();
    let settings = sshd.settings(remote.path());
    let ssh = json!({"host": settings.host, "port": settings.port, "user": settings.user,
        "identity_file": settings.identity_file, "known_hosts": untrusted,
        "remote_home": settings.remote_home});
    let created =
        call(&server, "executor.create", json!({"name": "sshd", "kind": "ssh", "ssh": ssh})).await;
    let id = created["executor"]["id"].clone();

    let checked = call(&server, "executor.check", json!({"id": id})).await;
    assert_eq!(checked["ok"], false, "{checked}");
    let message = checked["message"].as_str().unwrap();
    assert!(message.contains(&format!("ssh-keyscan -p {} 127.0.0.1 >>", sshd.port)), "{message}");

    let mut trusted = ssh.clone();
    trusted["known_hosts"] = json!(sshd.known_hosts);
    call(&server, "executor.update", json!({"id": id, "ssh": trusted})).await;
    let checked = call(&server, "executor.check", json!({"id": id})).await;
    assert_eq!(checked["ok"], true, "{checked}");
    assert_eq!(checked["copied"], true);
    assert_eq!(checked["previous_version"], Value::Null, "there was none");
    assert_eq!(checked["remote_version"], local_version().await.as_str());
    let again = call(&server, "executor.check", json!({"id": id})).await;
    assert_eq!((again["ok"].clone(), again["copied"].clone()), (json!(true), json!(false)));
    // The runner the check started, with nothing to keep, ends.
    runner_ends(remote.path()).await;
}

/// The remote home, where the runner's socket is bound, is owner-only after
/// `executor.check` even when it existed open to others (the remote umask does not decide),
/// and the check installs this server's own binary.
#[tokio::test]
async fn i20_d4_executor_check_leaves_the_remote_home_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let sshd = Sshd::start();
    let home = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    std::fs::set_permissions(remote.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = KANDEV.start(home.path());
    let settings = sshd.settings(remote.path());
    let ssh = json!({"host": settings.host, "port": settings.port, "user": settings.user,
        "identity_file": settings.identity_file, "known_hosts": sshd.known_hosts,
        "remote_home": settings.remote_home});
    let created =
        call(&server, "executor.create", json!({"name": "sshd", "kind": "ssh", "ssh": ssh})).await;
    let id = created["executor"]["id"].clone();
    let checked = call(&server, "executor.check", json!({"id": id})).await;
    assert_eq!(checked["ok"], true, "{checked}");
    assert_eq!(checked["remote_version"], local_version().await.as_str());
    let mode = std::fs::metadata(remote.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "remote_home is {mode:o}");
    runner_ends(remote.path()).await;
}
