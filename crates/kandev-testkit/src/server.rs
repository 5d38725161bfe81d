//! Starting the real `kandev serve` for process-level tests (on a free port, with a given
//! home, waiting (bounded) for the line that announces its address), and what those tests
//! share: calling actions, waiting on the server's notifications, finding its agents and its
//! runner among the machine's processes.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

pub use crate::wait::{DEADLINE, Done, eventually, eventually_within};

/// The `kandev` binary under test. Its path comes from the test crate that builds it
/// (`env!("CARGO_BIN_EXE_kandev")` exists only in the kandev crate's own tests): its
/// `tests/support/mod.rs` names it once as `KANDEV`.
#[derive(Clone, Copy, Debug)]
pub struct Kandev(&'static str);

impl Kandev {
    pub const fn at(path: &'static str) -> Kandev {
        Kandev(path)
    }

    pub fn path(&self) -> &'static Path {
        Path::new(self.0)
    }

    /// A command running the binary, to be given its arguments.
    pub fn command(&self) -> Command {
        Command::new(self.0)
    }

    /// Starts `kandev serve --addr 127.0.0.1:0` on `home`; its log goes to `<home>/server.log`.
    pub fn start(&self, home: &Path) -> Server {
        self.start_with(home, &[])
    }

    /// [`Kandev::start`] with more arguments for `kandev serve`; the log is appended to.
    pub fn start_with(&self, home: &Path, extra: &[&str]) -> Server {
        self.launch(home, "127.0.0.1:0", extra, &[])
    }

    /// Starts `kandev serve --addr <addr>` on `home` with more arguments and environment
    /// variables; the log is appended to `<home>/server.log`.
    pub fn launch(&self, home: &Path, addr: &str, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut command = self.command();
        command.envs(env.iter().copied());
        serve(command, home, addr, extra)
    }

    /// [`Kandev::start`] in a private mount namespace where `hidden` (a build host's remote
    /// home) is an empty folder (a tmpfs over it): the server sees the build host's files as a
    /// server on another machine would (not at all), so anything it did to them on its own
    /// host instead of through the SSH link shows. The processes it starts over ssh see the
    /// real folder.
    pub fn start_hiding(&self, home: &Path, hidden: &Path) -> Server {
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
            .arg(self.0);
        serve(command, home, "127.0.0.1:0", &[])
    }
}

/// `Command::new(KANDEV)`, `format!("{KANDEV}")`: the binary's path.
impl AsRef<OsStr> for Kandev {
    fn as_ref(&self) -> &OsStr {
        OsStr::new(self.0)
    }
}

impl std::fmt::Display for Kandev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// A running server; killed when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
    /// Its log (`<home>/server.log`).
    pub log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `command serve --addr <addr> <extra>` (`command` is `kandev`, or what runs it, with
/// the environment it was given) on `home`, its log appended to `<home>/server.log`, and
/// waits (bounded) for the address it announces.
pub fn serve(command: Command, home: &Path, addr: &str, extra: &[&str]) -> Server {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.join("server.log"))
        .unwrap();
    let args: Vec<&str> = ["--addr", addr].into_iter().chain(extra.iter().copied()).collect();
    let (mut child, line) = serve_first_line(command, home, &args, Stdio::from(log));
    let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) else {
        // Ended (or said something else) before announcing an address: say why.
        let status = match exited_within(&mut child, Duration::from_secs(5)) {
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
    Server { child, url, log: home.join("server.log") }
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
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = tx.send(line);
        // Whatever else it prints is read too, so it never writes into a closed pipe.
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    });
    let line = rx.recv_timeout(DEADLINE).expect("the server announces its address or ends");
    (child, line)
}

/// Waits up to `within` for `child` to end (its exit is the event: a thread waits for it
/// without reaping it, so `child` still owns its status); kills it when it runs on (`None`).
pub fn exited_within(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
        while waitid(Id::Pid(pid), flags) == Err(nix::errno::Errno::EINTR) {}
        let _ = tx.send(());
    });
    let ended = rx.recv_timeout(within).is_ok();
    if !ended {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    ended.then_some(status)
}

impl Server {
    /// `kill -9` of the server (nothing of it runs any more when this returns).
    pub fn kill_9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The address it listens on (`127.0.0.1:<port>`).
    pub fn addr(&self) -> String {
        self.url.trim_start_matches("http://").trim_end_matches('/').to_owned()
    }

    /// A graceful stop (SIGTERM), waiting for the server to end; fails the test when it does
    /// not within [`DEADLINE`].
    pub fn terminate(mut self) {
        assert!(self.stop(DEADLINE).is_some(), "the server stops on SIGTERM");
    }

    /// SIGTERM, then up to `within` for the server to end: its exit status, or `None` when it
    /// ran on and was killed.
    pub fn stop(&mut self, within: Duration) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        exited_within(&mut self.child, within)
    }
}

/// Runs an action over HTTP and returns its answer; a failure fails the test.
pub async fn call(server: &Server, action: &str, payload: serde_json::Value) -> serde_json::Value {
    try_call(server, action, payload).await.unwrap_or_else(|e| panic!("{action}: {e}"))
}

/// Why an action gave no answer: refused (an error status and its body), or none came.
#[derive(Debug)]
pub enum CallError {
    Refused { status: u16, body: serde_json::Value },
    NoAnswer(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Refused { status, body } => write!(f, "refused ({status}): {body}"),
            CallError::NoAnswer(why) => write!(f, "no answer: {why}"),
        }
    }
}

/// [`call`] for a test that expects a refusal, or reports a failure its own way. The client
/// uses no proxy (the server is on loopback whatever the environment says).
pub async fn try_call(
    server: &Server,
    action: &str,
    payload: serde_json::Value,
) -> Result<serde_json::Value, CallError> {
    let no_answer = |e: reqwest::Error| CallError::NoAnswer(e.to_string());
    let client = reqwest::Client::builder().no_proxy().build().map_err(no_answer)?;
    let url = format!("{}/api/v1/{action}", server.url);
    let response = client.post(url).json(&payload).send().await.map_err(no_answer)?;
    let status = response.status();
    let body: serde_json::Value = response.json().await.map_err(no_answer)?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(CallError::Refused { status: status.as_u16(), body })
    }
}

/// The status and body of a call that must be refused; any other outcome fails the test.
pub fn refused(result: Result<serde_json::Value, CallError>) -> (u16, serde_json::Value) {
    match result {
        Err(CallError::Refused { status, body }) => (status, body),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A task on the first workspace's first board, in its first step, with `fields` added to
/// `task.create`'s (`title`, `repository_ids`, ...): the answer (`task`, `session`).
pub async fn task_on_first_step(server: &Server, fields: serde_json::Value) -> serde_json::Value {
    use serde_json::json;
    let workspaces = call(server, "workspace.list", json!({})).await;
    let workflows =
        call(server, "workflow.list", json!({"workspace_id": workspaces["workspaces"][0]["id"]}))
            .await;
    let board = &workflows["workflows"][0];
    let mut payload = json!({"workflow_id": board["id"], "step_id": board["steps"][0]["id"]});
    payload.as_object_mut().unwrap().extend(fields.as_object().cloned().unwrap_or_default());
    call(server, "task.create", payload).await
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
    let task = task_on_first_step(server, serde_json::json!({"title": title})).await;
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

/// Waits until the session's `turns`-th turn is over (every turn has a stop reason) and the
/// session waits for input, following its notifications; fails at once when the session
/// leaves the running states, and past [`DEADLINE`], with its transcript and the end of the
/// server's log.
pub async fn turn_done(server: &Server, session: &str, turns: usize) {
    use serde_json::json;
    let mut watch = Watch::sessions(server, &[session.to_owned()]).await;
    let what = format!("turn {turns} of {session} completes");
    let mut now = String::new();
    let settled = watch
        .within(DEADLINE, &what, async || {
            let listed = call(server, "session.turn.list", json!({"session_id": session})).await;
            let listed = listed["turns"].as_array().unwrap().clone();
            let ended = listed.len() == turns && listed.iter().all(|t| !t["stop_reason"].is_null());
            now = state(server, session).await;
            let running = matches!(now.as_str(), "RUNNING" | "STARTING" | "CREATED");
            let waiting = now == "WAITING_FOR_INPUT";
            (ended && waiting || !running && !waiting).then_some(())
        })
        .await;
    if settled.is_none() || now != "WAITING_FOR_INPUT" {
        panic!(
            "{what}: no, the session is {now}: {:#}\nthe end of the server's log:\n{}",
            serde_json::Value::Array(messages(server, session).await),
            server.log_tail(60)
        );
    }
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

/// Whether process `pid` runs (it exists and is not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        state.is_some_and(|s| s != "Z" && s != "X")
    })
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
        let topics: Vec<String> = sessions.iter().map(|s| format!("session:{s}")).collect();
        Watch::topics(server, &topics).await
    }

    /// Follows `topics` (`session:<id>`, `workspace:<id>`, ...), once the server confirmed
    /// the subscription.
    pub async fn topics(server: &Server, topics: &[String]) -> Watch {
        use futures::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let url = format!("{}/ws", server.url.replace("http", "ws"));
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
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
    /// sends; fails with `what` past [`DEADLINE`].
    pub async fn until<D: Done>(&mut self, what: &str, check: impl AsyncFnMut() -> D) -> D::Value {
        match self.within(DEADLINE, what, check).await {
            Some(value) => value,
            None => panic!("timed out after {DEADLINE:?} waiting for: {what}"),
        }
    }

    /// [`Watch::until`] bounded by `within`, `None` past it (after one last check), for a
    /// test that says more than a timeout would when it fails.
    pub async fn within<D: Done>(
        &mut self,
        within: Duration,
        what: &str,
        mut check: impl AsyncFnMut() -> D,
    ) -> Option<D::Value> {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(value) = check().await.done() {
                return Some(value);
            }
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                // Frames that came meanwhile are taken too: one check for a burst.
                Ok(Some(Ok(_))) => {
                    while let Some(Some(Ok(_))) = futures::FutureExt::now_or_never(self.ws.next()) {
                    }
                }
                Ok(other) => panic!("{what}: the WebSocket ended: {other:?}"),
                Err(_) => return check().await.done(),
            }
        }
    }

    /// Waits for a notification frame (its JSON) that `wanted` accepts, and returns it: for
    /// a state that may last too short for [`Watch::until`] to see it by reading it again.
    pub async fn notification(
        &mut self,
        what: &str,
        wanted: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        use futures::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let next = tokio::time::timeout_at(deadline, self.ws.next()).await;
            let Ok(Some(Ok(message))) = next else {
                panic!("timed out after {DEADLINE:?} waiting for: {what} ({next:?})")
            };
            let Message::Text(text) = message else { continue };
            let Ok(frame) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
            if frame["type"] == "notification" && wanted(&frame) {
                return frame;
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
        self.until(&what, async || state(server, session).await == wanted).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_ends_is_awaited_and_one_that_runs_on_is_killed() {
        let mut quick = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        let status = exited_within(&mut quick, DEADLINE).expect("it ended");
        assert_eq!(status.code(), Some(3), "its own status, not reaped by the waiter");
        let mut slow = Command::new("sleep").arg("600").spawn().unwrap();
        assert_eq!(exited_within(&mut slow, Duration::from_millis(50)), None);
        assert!(!alive(slow.id()), "killed and reaped");
    }
}
