//! Starting the real `kandev serve` for process-level tests (on a free port, with a given
//! home, waiting (bounded) for the line that announces its address), and what those tests
//! share: calling actions, waiting on the server's notifications, finding its agents and its
//! runner among the machine's processes.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const KANDEV: &str = env!("CARGO_BIN_EXE_kandev");

/// A running server; killed when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `kandev serve --addr 127.0.0.1:0` on `home`; its log goes to `<home>/server.log`.
pub fn start(home: &Path) -> Server {
    start_with(home, &[])
}

/// [`start`] with more arguments for `kandev serve`; the log is appended to.
pub fn start_with(home: &Path, extra: &[&str]) -> Server {
    launch(home, "127.0.0.1:0", extra, &[])
}

/// Starts `kandev serve --addr <addr>` on `home` with more arguments and environment
/// variables; the log is appended to `<home>/server.log`.
pub fn launch(home: &Path, addr: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
    launch_with(Command::new(KANDEV), home, addr, extra, env)
}

/// [`start`] in a private mount namespace where `hidden` (a build host's remote home) is an
/// empty folder (a tmpfs over it): the server sees the build host's files as a server on
/// another machine would (not at all), so anything it did to them on its own host instead
/// of through the SSH link shows. The processes it starts over ssh see the real folder.
pub fn start_hiding(home: &Path, hidden: &Path) -> Server {
    let probe = Command::new("unshare").args(["--map-root-user", "--mount", "true"]).output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "this test needs unprivileged user and mount namespaces: `unshare --map-root-user \
             --mount true` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!(
            "this test needs unprivileged user and mount namespaces: cannot run `unshare` \
             (util-linux): {e}"
        ),
    }
    let mut command = Command::new("unshare");
    command
        .args(["--map-root-user", "--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount -t tmpfs -o size=1m kandev-hidden \"$0\" && exec \"$@\"")
        .arg(hidden)
        .arg(KANDEV);
    launch_with(command, home, "127.0.0.1:0", &[], &[])
}

/// [`launch`] with `command` (`kandev`, or what runs it) given `serve ...`.
fn launch_with(
    mut command: Command,
    home: &Path,
    addr: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Server {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.join("server.log"))
        .unwrap();
    command.envs(env.iter().copied());
    let args: Vec<&str> = ["--addr", addr].into_iter().chain(extra.iter().copied()).collect();
    let (mut child, line) = serve_first_line(command, home, &args, Stdio::from(log));
    let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) else {
        // Ended (or said something else) before announcing an address: say why.
        let status = match child.wait_timeout_or_kill() {
            Some(status) => status.to_string(),
            None => "still running".to_owned(),
        };
        let log = std::fs::read_to_string(home.join("server.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "the server did not announce an address (first stdout line {line:?}, {status}); \
             the end of {}:\n{}",
            home.join("server.log").display(),
            tail.join("\n")
        );
    };
    let url = url.to_owned();
    Server { child, url }
}

/// Starts `command serve <extra>` (`command` may carry more arguments and environment) on
/// `home` with its stderr going to `stderr`; the child and the first line it printed (its
/// address, or nothing when it ended first), bounded by [`DEADLINE`].
pub fn serve_first_line(
    mut command: Command,
    home: &Path,
    extra: &[&str],
    stderr: Stdio,
) -> (Child, String) {
    let mut child = command
        .arg("serve")
        .args(extra)
        .env("KANDEV_HOME", home)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(DEADLINE).expect("the server announces its address or ends");
    (child, line)
}

/// Waiting (up to 5 s) for a child that is expected to have ended.
trait WaitOrKill {
    /// The child's exit status, or `None` (then it is killed) when it runs on.
    fn wait_timeout_or_kill(&mut self) -> Option<std::process::ExitStatus>;
}

impl WaitOrKill for Child {
    fn wait_timeout_or_kill(&mut self) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.kill();
        let _ = self.wait();
        None
    }
}

/// How long a test waits for anything before it fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

impl Server {
    /// `kill -9` of the server (nothing of it runs any more when this returns).
    pub fn kill_9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// The address it listens on (`127.0.0.1:<port>`).
    pub fn addr(&self) -> String {
        self.url.trim_start_matches("http://").trim_end_matches('/').to_owned()
    }

    /// A graceful stop (SIGTERM), waiting for the server to end.
    pub fn terminate(mut self) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap();
    }
}

/// Runs an action over HTTP and returns its answer; a failure fails the test.
pub async fn call(server: &Server, action: &str, payload: serde_json::Value) -> serde_json::Value {
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/{action}", server.url))
        .json(&payload)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap();
    assert!(status.is_success(), "{action}: {body}");
    body
}

/// A task on the first board's first step with a launched session: `(task id, session id)`.
pub async fn launched_session(server: &Server, title: &str) -> (String, String) {
    launched_with(server, title, serde_json::json!({})).await
}

/// [`launched_session`] with more fields of `session.launch` (`agent_profile_id`, `prompt`).
pub async fn launched_with(
    server: &Server,
    title: &str,
    launch: serde_json::Value,
) -> (String, String) {
    use serde_json::json;
    let workspaces = call(server, "workspace.list", json!({})).await;
    let workflows =
        call(server, "workflow.list", json!({"workspace_id": workspaces["workspaces"][0]["id"]}))
            .await;
    let board = &workflows["workflows"][0];
    let task = call(
        server,
        "task.create",
        json!({"workflow_id": board["id"], "title": title, "step_id": board["steps"][0]["id"]}),
    )
    .await;
    let mut payload = launch;
    payload["task_id"] = task["task"]["id"].clone();
    let launched = call(server, "session.launch", payload).await;
    let task = task["task"]["id"].as_str().unwrap().to_owned();
    (task, launched["session"]["id"].as_str().unwrap().to_owned())
}

/// The session's transcript, oldest first.
pub async fn messages(server: &Server, session: &str) -> Vec<serde_json::Value> {
    let payload = serde_json::json!({"session_id": session, "limit": 1000});
    let listed = call(server, "message.list", payload).await;
    listed["messages"].as_array().unwrap().clone()
}

/// Everything the agent said in a transcript, in order.
pub fn agent_text(messages: &[serde_json::Value]) -> String {
    messages
        .iter()
        .filter(|m| m["kind"] == "agent")
        .map(|m| m["content"].as_str().unwrap())
        .collect()
}

/// The session's state (`RUNNING`, `WAITING_FOR_INPUT`, ...).
pub async fn state(server: &Server, session: &str) -> String {
    let got = call(server, "session.get", serde_json::json!({"id": session})).await;
    got["session"]["state"].as_str().unwrap().to_owned()
}

/// Live (not zombie) processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<u32> {
    process_argvs(needle).into_iter().map(|(pid, _)| pid).collect()
}

/// Live (not zombie) processes whose command line contains `needle`, with their argv.
pub fn process_argvs(needle: &str) -> Vec<(u32, Vec<String>)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie =
                stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            let argv: Vec<String> = String::from_utf8_lossy(&cmdline)
                .split('\0')
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect();
            (!zombie && argv.join(" ").contains(needle)).then_some((pid, argv))
        })
        .collect()
}

/// The mock agents started for this home (their command line names its state dir).
pub fn agents_of(home: &Path) -> Vec<u32> {
    processes_with(&home.join("mock-agent").display().to_string())
}

/// The runner of this home.
pub fn runners_of(home: &Path) -> Vec<u32> {
    processes_with(&format!("runner --socket {}", home.join("runner.sock").display()))
}

/// The parent of process `pid`.
pub fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Waits (bounded by [`DEADLINE`]) until `check` holds for processes the test does not own
/// (agents, the runner): their ends send no event a test could wait for, so this looks again
/// every 25 ms. Everything the server does is awaited through a [`Watch`] instead.
pub async fn processes_until(what: &str, mut check: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !check() {
        assert!(start.elapsed() < DEADLINE, "{what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A WebSocket following some topics of a server: a test checks its condition, then again
/// after each notification, until it holds (bounded by [`DEADLINE`]) — no polling.
pub struct Watch {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl Watch {
    /// Follows `session:<id>` of each session, once the server confirmed the subscription
    /// (so nothing that happens after this returns is missed).
    pub async fn sessions(server: &Server, sessions: &[String]) -> Watch {
        use futures::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let url = format!("{}/ws", server.url.replace("http", "ws"));
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let topics: Vec<String> = sessions.iter().map(|s| format!("session:{s}")).collect();
        let subscribe = serde_json::json!({"id": "watch", "type": "request", "action": "subscribe", "payload": {"topics": topics}});
        ws.send(Message::text(subscribe.to_string())).await.unwrap();
        loop {
            let frame = tokio::time::timeout(DEADLINE, ws.next()).await.unwrap().unwrap().unwrap();
            if let Message::Text(text) = frame
                && serde_json::from_str::<serde_json::Value>(&text).unwrap()["id"] == "watch"
            {
                return Watch { ws };
            }
        }
    }

    /// Waits until `check` gives a value: checked now and after every frame the server
    /// sends; fails with `what` past the deadline.
    pub async fn until<T, F>(&mut self, what: &str, mut check: impl FnMut() -> F) -> T
    where
        F: std::future::Future<Output = Option<T>>,
    {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            if let Some(value) = check().await {
                return value;
            }
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                // Frames that came meanwhile are taken too: one check for a burst.
                Ok(Some(Ok(_))) => {
                    while let Some(Some(Ok(_))) = futures::FutureExt::now_or_never(self.ws.next()) {
                    }
                }
                Ok(other) => panic!("{what}: the WebSocket ended: {other:?}"),
                Err(_) => {
                    if let Some(value) = check().await {
                        return value;
                    }
                    panic!("{what}");
                }
            }
        }
    }

    /// Waits until the server closes the WebSocket (it ended).
    pub async fn closed(&mut self, what: &str) {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Ok(Some(Ok(_))) => {}
                Ok(_) => return,
                Err(_) => panic!("{what}"),
            }
        }
    }

    /// Waits until the session is in `state`.
    pub async fn state(&mut self, server: &Server, session: &str, wanted: &str) {
        let what = format!("{session} gets to {wanted}");
        self.until(&what, || async { (state(server, session).await == wanted).then_some(()) })
            .await;
    }

    /// Waits until the session's transcript satisfies `ready`; returns it.
    pub async fn messages(
        &mut self,
        server: &Server,
        session: &str,
        what: &str,
        ready: impl Fn(&[serde_json::Value]) -> bool,
    ) -> Vec<serde_json::Value> {
        self.until(what, || async {
            let stored = messages(server, session).await;
            ready(&stored).then_some(stored)
        })
        .await
    }
}
