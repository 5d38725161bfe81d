//! The harness every scenario shares: start the real `kandev serve` on a temp home, call
//! actions over HTTP, subscribe over WebSocket, read RSS, count agent processes.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A running `kandev serve`; killed (SIGKILL) and reaped on drop.
pub struct Server {
    pub child: Child,
    pub url: String,
    pub http: reqwest::Client,
    pub token: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `kandev serve --addr 127.0.0.1:0 --home <home>` plus `extra` arguments (an `--addr`
/// among them replaces the port 0); stderr goes to `<home>/../<home name>.log` (appended, so
/// restarts keep one log).
pub fn start(kandev: &Path, home: &Path, extra: &[&str]) -> Result<Server> {
    start_env(kandev, home, extra, &[])
}

/// [`start`] with extra environment variables for the server.
pub fn start_env(
    kandev: &Path,
    home: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Result<Server> {
    spawn_server(Command::new(kandev), home, extra, env)
}

/// [`start`] with the server's open-file limit lowered to `nofile` (`ulimit -n`).
pub fn start_nofile(kandev: &Path, home: &Path, extra: &[&str], nofile: u64) -> Result<Server> {
    let mut command = Command::new("sh");
    command.args(["-c", r#"ulimit -n "$0" && exec "$@""#]).arg(nofile.to_string()).arg(kandev);
    spawn_server(command, home, extra, &[])
}

fn spawn_server(
    mut command: Command,
    home: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Result<Server> {
    let log = home.with_extension("log");
    let stderr = std::fs::OpenOptions::new().create(true).append(true).open(&log)?;
    let mut child = command
        .arg("serve")
        // Port 0 unless the scenario names the address (P9 restarts on the same one).
        .args(if extra.contains(&"--addr") { &[][..] } else { &["--addr", "127.0.0.1:0"][..] })
        .arg("--home")
        .arg(home)
        // Scenarios measure agents as the server's children unless they ask for a runner
        // (the default `local` would leave runners behind killed servers for their grace).
        .args(if extra.contains(&"--runner") { &[][..] } else { &["--runner", "none"][..] })
        .args(extra)
        .envs(env.iter().copied())
        .env_remove("KANDEV_TOKEN")
        .env_remove("KANDEV_ADDR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {:?}", command.get_program()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = tx.send(line);
        // Keep draining so the server never blocks on a full pipe.
        let mut sink = String::new();
        while reader.read_line(&mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(30)).context("the server did not announce")?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or_else(|| anyhow!("no address in {line:?}"))?
        .trim_end_matches('/')
        .to_owned();
    let token = extra.windows(2).find(|w| w[0] == "--token").map(|w| w[1].to_owned());
    let http = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    Ok(Server { child, url, http, token })
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `POST /api/v1/<action>`; any error status is an error carrying the body.
    pub async fn call(&self, action: &str, payload: Value) -> Result<Value> {
        let (status, body) = self.call_raw(action, payload).await?;
        if status != 200 {
            bail!("{action} answered {status}: {body}");
        }
        Ok(body)
    }

    pub async fn call_raw(&self, action: &str, payload: Value) -> Result<(u16, Value)> {
        let (status, _, body) = self.call_clocked(action, payload).await?;
        Ok((status, body))
    }

    /// [`Server::call`] with the time from sending the request to the answer's last byte:
    /// what the server took, as `curl`'s total time. The bench's own parse of the answer
    /// (2–3 ms for a 2,000-card board's 650 KB) comes after the clock stops.
    pub async fn call_timed(&self, action: &str, payload: Value) -> Result<(Duration, Value)> {
        let (status, took, body) = self.call_clocked(action, payload).await?;
        if status != 200 {
            bail!("{action} answered {status}: {body}");
        }
        Ok((took, body))
    }

    async fn call_clocked(&self, action: &str, payload: Value) -> Result<(u16, Duration, Value)> {
        let mut request = self.http.post(format!("{}/api/v1/{action}", self.url)).json(&payload);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let started = Instant::now();
        let response = request.send().await?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await?;
        let took = started.elapsed();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((status, took, body))
    }

    pub async fn ws(&self) -> Result<Ws> {
        let (ws, _) =
            tokio_tungstenite::connect_async(format!("{}/ws", self.url.replace("http", "ws")))
                .await?;
        Ok(ws)
    }

    /// Server memory (VmRSS of the server process alone), in KiB.
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.pid())
    }

    /// A fresh board (Todo / In Progress / Done, no automation) in the default workspace:
    /// returns (workflow id, first step id).
    pub async fn board(&self, name: &str) -> Result<(String, String)> {
        let workspaces = self.call("workspace.list", json!({})).await?;
        let ws = str_of(&workspaces["workspaces"][0]["id"])?;
        let wf = self.call("workflow.create", json!({"workspace_id": ws, "name": name})).await?;
        let id = str_of(&wf["workflow"]["id"])?;
        let step = str_of(&wf["workflow"]["steps"][0]["id"])?;
        Ok((id, step))
    }

    /// A task with a session whose agent is up (`WAITING_FOR_INPUT`).
    pub async fn live_session(&self, workflow: &str, title: &str) -> Result<String> {
        let session = self.new_session(workflow, title, None).await?;
        self.wait_state(&session, &["WAITING_FOR_INPUT"], Duration::from_secs(60)).await?;
        Ok(session)
    }

    /// A task and a launched session (not waited for).
    pub async fn new_session(
        &self,
        workflow: &str,
        title: &str,
        profile: Option<&str>,
    ) -> Result<String> {
        self.launch(json!({"workflow_id": workflow, "title": title}), profile).await
    }

    /// [`Self::new_session`] of a task on `repository` (none: no repository).
    pub async fn new_session_on(
        &self,
        workflow: &str,
        title: &str,
        repository: Option<&str>,
    ) -> Result<String> {
        let mut task = json!({"workflow_id": workflow, "title": title});
        if let Some(repository) = repository {
            task["repository_ids"] = json!([repository]);
        }
        self.launch(task, None).await
    }

    async fn launch(&self, task: Value, profile: Option<&str>) -> Result<String> {
        let task = self.call("task.create", task).await?;
        let mut payload = json!({"task_id": task["task"]["id"]});
        if let Some(profile) = profile {
            payload["agent_profile_id"] = json!(profile);
        }
        let launched = self.call("session.launch", payload).await?;
        str_of(&launched["session"]["id"])
    }

    pub async fn session(&self, id: &str) -> Result<Value> {
        Ok(self.call("session.get", json!({"id": id})).await?["session"].clone())
    }

    /// Polls `session.get` until the state is one of `states`; returns the session.
    pub async fn wait_state(&self, id: &str, states: &[&str], within: Duration) -> Result<Value> {
        let started = Instant::now();
        loop {
            let session = self.session(id).await?;
            if states.iter().any(|s| session["state"] == *s) {
                return Ok(session);
            }
            if started.elapsed() > within {
                bail!("session {id} is {} after {within:?}, wanted {states:?}", session["state"]);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// All messages of a session (pages of 1000).
    pub async fn messages(&self, session: &str) -> Result<Vec<Value>> {
        let mut out = vec![];
        let mut after = 0i64;
        loop {
            let page = self
                .call(
                    "message.list",
                    json!({"session_id": session, "after_seq": after, "limit": 1000}),
                )
                .await?;
            let list = page["messages"].as_array().cloned().unwrap_or_default();
            let Some(last) = list.last() else { break };
            after = last["seq"].as_i64().context("message without seq")?;
            let full = list.len() == 1000;
            out.extend(list);
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// Kills the server with SIGKILL (no shutdown).
    pub fn kill9(&mut self) -> Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

pub fn str_of(v: &Value) -> Result<String> {
    v.as_str().map(str::to_owned).ok_or_else(|| anyhow!("expected a string, got {v}"))
}

pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Live (non-zombie) processes whose command line contains `needle` (the bench's temp home).
pub fn processes_with(needle: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return vec![] };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie =
                stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).contains(needle)
        })
        .collect()
}

/// Agent processes of a server home (their command line names `<home>/mock-agent`).
pub fn agents_of(home: &Path) -> Vec<u32> {
    processes_with(&home.join("mock-agent").display().to_string())
}

/// Waits until no agent process of `home` is left; returns the survivors if some remain.
pub async fn wait_no_agents(home: &Path, within: Duration) -> Vec<u32> {
    let started = Instant::now();
    loop {
        let left = agents_of(home);
        if left.is_empty() || started.elapsed() > within {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn subscribe(ws: &mut Ws, topics: &[String]) -> Result<()> {
    let frame = json!({"id": "sub", "type": "request", "action": "subscribe", "payload": {"topics": topics}});
    ws.send(Message::text(frame.to_string())).await?;
    // Wait for the subscribe response so nothing published afterwards is missed.
    loop {
        let frame = next_json(ws, Duration::from_secs(30)).await?;
        if frame["id"] == "sub" {
            if frame["type"] != "response" {
                bail!("subscribe failed: {frame}");
            }
            return Ok(());
        }
    }
}

/// The next text frame as JSON.
pub async fn next_json(ws: &mut Ws, within: Duration) -> Result<Value> {
    loop {
        let message = tokio::time::timeout(within, ws.next())
            .await
            .context("no frame in time")?
            .context("websocket closed")??;
        if let Message::Text(text) = message {
            return Ok(serde_json::from_str(&text)?);
        }
    }
}

/// Percentile (0..=100) of a sample, in the sample's unit; 0 for an empty sample.
pub fn percentile(sample: &mut [f64], p: f64) -> f64 {
    if sample.is_empty() {
        return 0.0;
    }
    sample.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (sample.len() - 1) as f64).round() as usize;
    sample[rank.min(sample.len() - 1)]
}

pub fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A git repository on `main` with one commit (a README), for tasks with a worktree.
pub fn git_repo() -> Result<tempfile::TempDir> {
    let repo = tempfile::tempdir()?;
    let git = |args: &[&str]| -> Result<()> {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["-c", "user.name=Kandev Bench", "-c", "user.email=bench@kandev.invalid"])
            .args(args)
            .status()?;
        if !status.success() {
            bail!("git {args:?} failed in {}", repo.path().display());
        }
        Ok(())
    };
    git(&["init", "-q", "-b", "main"])?;
    std::fs::write(repo.path().join("README.md"), "the project\n")?;
    git(&["add", "-A"])?;
    git(&["commit", "-q", "-m", "start"])?;
    Ok(repo)
}
