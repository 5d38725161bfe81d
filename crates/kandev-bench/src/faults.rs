//! The fault harness: R1 (kill -9 cycles), R2 (agent faults), R4 (hostile input), R5
//! (security), R6 (kill -9 with the local runner: turns go on). Each ends with pass/fail and the figures behind it.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::harness::{self, Server, Ws, ms, next_json, str_of, subscribe};
use crate::{Ctx, Report};

/// A slow streamed turn: many small chunks with pauses, so a kill lands mid-stream.
fn slow_script(tag: usize) -> String {
    let mut script = String::from("#!mock\n");
    for i in 0..300 {
        script.push_str(&format!("say c{tag}-{i:03};\nsleep 10\n"));
    }
    script
}

/// Agent text told to one subscriber: message id -> text so far; and sessions that got any.
async fn collect_told(
    ws: &mut Ws,
    told: &mut HashMap<String, String>,
    sessions_seen: &mut HashMap<String, usize>,
    want_per_session: usize,
    sessions: usize,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while sessions_seen.len() < sessions || sessions_seen.values().any(|n| *n < want_per_session) {
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = next_json(ws, left).await.context("waiting for streamed chunks")?;
        let session = frame["topic"].as_str().unwrap_or("").trim_start_matches("session:");
        match frame["action"].as_str() {
            Some("session.message.added") if frame["payload"]["message"]["kind"] == "agent" => {
                let m = &frame["payload"]["message"];
                told.insert(str_of(&m["id"])?, str_of(&m["content"])?);
                *sessions_seen.entry(session.to_owned()).or_default() += 1;
            }
            Some("session.message.updated") if frame["payload"]["delta"].is_string() => {
                let id = str_of(&frame["payload"]["message_id"])?;
                told.entry(id)
                    .or_default()
                    .push_str(frame["payload"]["delta"].as_str().unwrap_or(""));
                *sessions_seen.entry(session.to_owned()).or_default() += 1;
            }
            _ => {}
        }
    }
    Ok(())
}

/// After a restart: every session reconciled, everything told is stored.
async fn verify_reconciled(
    server: &Server,
    sessions: &[String],
    told: &HashMap<String, String>,
    report: &mut Report,
    cycle: usize,
) -> Result<usize> {
    let mut missing = 0;
    for s in sessions {
        let session = server.session(s).await?;
        report.check(
            session["state"] == "WAITING_FOR_INPUT",
            format!("cycle {cycle}: session {s} is {} after restart", session["state"]),
        );
        let messages = server.messages(s).await?;
        let stored: HashMap<String, String> = messages
            .iter()
            .filter(|m| m["kind"] == "agent")
            .filter_map(|m| Some((m["id"].as_str()?.to_owned(), m["content"].as_str()?.to_owned())))
            .collect();
        let interrupted = messages.iter().any(|m| {
            m["kind"] == "status"
                && m["content"].as_str().is_some_and(|c| c.starts_with("interrupted"))
        });
        report.check(interrupted, format!("cycle {cycle}: no interrupted note in {s}"));
        for (id, seen) in told {
            if stored.get(id).is_some_and(|content| !content.starts_with(seen.as_str())) {
                missing += 1;
            }
        }
    }
    // Every told message must belong to one of the sessions.
    let mut all_ids = 0;
    for s in sessions {
        all_ids += server
            .messages(s)
            .await?
            .iter()
            .filter(|m| m["id"].as_str().is_some_and(|id| told.contains_key(id)))
            .count();
    }
    missing += told.len() - all_ids.min(told.len());
    Ok(missing)
}

pub async fn r1(ctx: &Ctx) -> Result<Report> {
    let (cycles, sessions_n) = if ctx.quick { (3, 5) } else { (20, 20) };
    let mut report = Report::new(
        "R1",
        json!({"cycles": cycles, "streaming_sessions": sessions_n, "database": ctx.engine()}),
    );
    let home = ctx.home("r1")?;
    let database = ctx.database_args();
    let mut server = harness::start(&ctx.kandev, &home, &database)?;
    let (workflow, _) = server.board("R1").await?;
    let mut sessions = vec![];
    for i in 0..sessions_n {
        sessions.push(server.live_session(&workflow, &format!("r1 {i}")).await?);
    }
    let mut told_total = 0;
    let mut missing_total = 0;
    let mut orphans_max = 0;
    let mut restart_ms = vec![];
    for cycle in 0..cycles {
        let mut ws = server.ws().await?;
        let topics: Vec<String> = sessions.iter().map(|s| format!("session:{s}")).collect();
        subscribe(&mut ws, &topics).await?;
        for s in &sessions {
            server
                .call("message.add", json!({"session_id": s, "content": slow_script(cycle)}))
                .await?;
        }
        let mut told = HashMap::new();
        let mut seen = HashMap::new();
        collect_told(&mut ws, &mut told, &mut seen, 5, sessions_n).await?;
        server.kill9()?;
        drop(ws);
        let started = Instant::now();
        server = harness::start(&ctx.kandev, &home, &database)?;
        restart_ms.push(ms(started.elapsed()));
        let missing = verify_reconciled(&server, &sessions, &told, &mut report, cycle).await?;
        told_total += told.len();
        missing_total += missing;
        let left = harness::wait_no_agents(&home, Duration::from_secs(20)).await;
        orphans_max = orphans_max.max(left.len());
        report.check(left.is_empty(), format!("cycle {cycle}: orphan agents {left:?}"));
    }
    // Every session resumes on the next prompt.
    let mut resumed = 0;
    for s in &sessions {
        server.call("message.add", json!({"session_id": s, "content": "are you back"})).await?;
    }
    let started = Instant::now();
    for s in &sessions {
        loop {
            let messages = server.messages(s).await?;
            if messages.iter().any(|m| m["content"] == "echo: are you back") {
                resumed += 1;
                break;
            }
            if started.elapsed() > Duration::from_secs(60) {
                report.failures.push(format!("session {s} did not resume"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    report.check(
        missing_total == 0,
        format!("{missing_total} told messages missing or shorter in the store"),
    );
    report.figure("messages_told", told_total);
    report.figure("messages_missing", missing_total);
    report.figure("orphan_agents_max", orphans_max);
    report.figure("sessions_resumed", resumed);
    report.figure("restart_to_announce_p50_ms", harness::percentile(&mut restart_ms, 50.0));
    Ok(report)
}

/// The text of chunk `index` of the mock agent's `stream` directive (as
/// `kandev_mock_agent::script::stream_chunk_text`: the bench talks to the binary only).
fn stream_chunk(index: u64, bytes: usize) -> String {
    let mut text = format!("{index:06}|");
    if text.len() >= bytes {
        text.truncate(bytes);
        return text;
    }
    let fill = char::from(b'a' + (index % 26) as u8);
    text.extend(std::iter::repeat_n(fill, bytes - text.len()));
    text
}

fn agent_text(messages: &[Value]) -> String {
    messages.iter().filter(|m| m["kind"] == "agent").filter_map(|m| m["content"].as_str()).collect()
}

/// Where R6's agents run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum R6On {
    /// Behind the local runner (`serve --runner local`).
    LocalRunner,
    /// On an SSH executor: a real sshd on loopback, the build host being this machine with a
    /// remote home of its own (issue 39).
    Ssh,
}

/// Where R6's agents are and how to reach them.
struct R6Place {
    /// The folder under which the agents keep their state (`mock-agent/`) and the runner its
    /// socket: the server's home, or the SSH executor's remote home.
    agents_home: std::path::PathBuf,
    server_args: Vec<&'static str>,
    /// The repository the tasks use (SSH: the executor's), if any.
    repository: Option<String>,
    /// Kept for the scenario's length.
    _sshd: Option<crate::sshd::Sshd>,
    _repo: Option<tempfile::TempDir>,
}

/// R6 (issue 20, `../shared/spec/targets.md`): `kill -9` of a server during streaming turns,
/// then a restart. Each turn must complete without `session/load` and without an
/// "interrupted" note, with every chunk the agent wrote stored exactly once; after a graceful
/// stop no agent and no runner is left. The agents run behind the local runner, or on an SSH
/// executor (`r6-ssh`: the same guarantees through the one runner stack).
pub async fn r6(ctx: &Ctx, on: R6On) -> Result<Report> {
    let turns = if ctx.quick { 5 } else { 20 };
    let (chunks, bytes) = (150u64, 24usize);
    let name = if on == R6On::Ssh { "R6-ssh" } else { "R6" };
    let params = json!({"streaming_turns": turns, "chunks": chunks, "chunk_bytes": bytes});
    let mut report = Report::new(name, params);
    let home = ctx.home(&name.to_lowercase())?;
    let mut place = match on {
        R6On::LocalRunner => R6Place {
            agents_home: home.clone(),
            server_args: vec!["--runner", "local", "--runner-grace", "60s"],
            repository: None,
            _sshd: None,
            _repo: None,
        },
        R6On::Ssh => {
            let sshd = tokio::task::spawn_blocking(crate::sshd::Sshd::start)
                .await
                .map_err(|e| anyhow::anyhow!("the sshd for R6-ssh did not start: {e}"))?;
            R6Place {
                agents_home: ctx.home("r6-ssh-remote")?,
                server_args: vec![],
                repository: None,
                _sshd: Some(sshd),
                _repo: Some(git_repo()?),
            }
        }
    };
    let mut server = harness::start(&ctx.kandev, &home, &place.server_args)?;
    if let (Some(sshd), Some(repo)) = (&place._sshd, &place._repo) {
        place.repository =
            Some(ssh_repository(&server, sshd, &place.agents_home, repo.path()).await?);
    }
    let (workflow, _) = server.board(name).await?;
    let mut sessions = vec![];
    for i in 0..turns {
        let title = format!("r6 {i}");
        let session = server.new_session_on(&workflow, &title, place.repository.as_deref()).await?;
        server.wait_state(&session, &["WAITING_FOR_INPUT"], Duration::from_secs(60)).await?;
        sessions.push(session);
    }
    let script = format!("#!mock\nstream {chunks} {bytes} every 20");
    for s in &sessions {
        server.call("message.add", json!({"session_id": s, "content": script})).await?;
    }
    let started = Instant::now();
    for s in &sessions {
        while agent_text(&server.messages(s).await?).len() < bytes * 10 {
            if started.elapsed() > Duration::from_secs(60) {
                bail!("the turn of {s} does not stream");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    server.kill9()?;
    let kept = harness::agents_of(&place.agents_home).len();
    report.check(kept == turns, format!("the runner kept {kept} of {turns} agents"));
    let restarted = Instant::now();
    let server = harness::start(&ctx.kandev, &home, &place.server_args)?;
    let restart_ms = ms(restarted.elapsed());
    let expected: String = (0..chunks).map(|i| stream_chunk(i, bytes)).collect();
    let (mut completed, mut exact, mut notes) = (0, 0, 0);
    for s in &sessions {
        let state = server.wait_state(s, &["WAITING_FOR_INPUT"], Duration::from_secs(60)).await;
        completed += usize::from(state.is_ok());
        let messages = server.messages(s).await?;
        exact += usize::from(agent_text(&messages) == expected);
        notes += messages
            .iter()
            .filter(|m| {
                m["kind"] == "status"
                    && m["content"].as_str().is_some_and(|c| c.starts_with("interrupted"))
            })
            .count();
    }
    let all_turns_ms = ms(restarted.elapsed());
    let calls = std::fs::read_to_string(place.agents_home.join("mock-agent").join("calls.log"))
        .unwrap_or_default();
    let loads = calls.lines().filter(|l| l.contains("\"session/load\"")).count();
    report.check(completed == turns, format!("{completed} of {turns} turns completed"));
    report.check(exact == turns, format!("{exact} of {turns} transcripts hold every chunk once"));
    report.check(notes == 0, format!("{notes} interrupted notes"));
    report.check(loads == 0, format!("{loads} session/load calls"));
    // No orphan: a graceful stop ends the agents, and the runner with nothing left.
    let mut server = server;
    std::process::Command::new("kill").arg("-TERM").arg(server.pid().to_string()).status()?;
    server.child.wait()?;
    let left = harness::wait_no_agents(&place.agents_home, Duration::from_secs(20)).await;
    report.check(left.is_empty(), format!("orphan agents {left:?}"));
    let socket = place.agents_home.join("runner.sock");
    let runner_gone = {
        let started = Instant::now();
        while socket.exists() && started.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        !socket.exists()
    };
    report.check(runner_gone, "the runner did not end after the graceful stop");
    report.figure("turns_completed", completed);
    report.figure("transcripts_exact", exact);
    report.figure("session_loads", loads);
    report.figure("orphan_agents", left.len());
    report.figure("restart_to_announce_ms", restart_ms);
    report.figure("restart_to_all_turns_done_ms", all_turns_ms);
    Ok(report)
}

/// A git repository on `main` with one commit.
fn git_repo() -> Result<tempfile::TempDir> {
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

/// Registers `repo` as a repository whose executor is an SSH executor for `sshd` with
/// `remote_home`; returns the repository's id.
async fn ssh_repository(
    server: &Server,
    sshd: &crate::sshd::Sshd,
    remote_home: &std::path::Path,
    repo: &std::path::Path,
) -> Result<String> {
    let workspaces = server.call("workspace.list", json!({})).await?;
    let workspace = str_of(&workspaces["workspaces"][0]["id"])?;
    let repository = server
        .call(
            "repository.create",
            json!({"workspace_id": workspace, "local_path": repo, "name": "r6-ssh"}),
        )
        .await?;
    let repository = str_of(&repository["repository"]["id"])?;
    let ssh = json!({"host": "127.0.0.1", "port": sshd.port, "user": sshd.user,
        "identity_file": sshd.identity, "known_hosts": sshd.known_hosts,
        "remote_home": remote_home});
    let executor = server
        .call("executor.create", json!({"name": "r6-build", "kind": "ssh", "ssh": ssh}))
        .await?;
    server
        .call(
            "repository.executor.set",
            json!({"repository_id": repository, "executor_id": executor["executor"]["id"]}),
        )
        .await?;
    Ok(repository)
}

/// How an R2 case is expected to end.
#[derive(Clone, Copy)]
enum Expect {
    /// The reply `echo: <prompt>` arrives, no error.
    Reply,
    /// Idle (`WAITING_FOR_INPUT`) again, no matter the error.
    Idle,
    /// `last_error` set with a readable message, session idle or failed.
    Error,
}

struct Case {
    name: &'static str,
    args: &'static [&'static str],
    /// Stop the agent first so the prompt resumes with `session/load`.
    stop_first: bool,
    script: &'static str,
    cancel: bool,
    expect: Expect,
    bound: Duration,
}

pub async fn r2(ctx: &Ctx) -> Result<Report> {
    let s = Duration::from_secs;
    let cases = vec![
        Case {
            name: "crash_mid_turn",
            args: &[],
            stop_first: false,
            script: "#!mock\nsay before\ncrash 3",
            cancel: false,
            expect: Expect::Error,
            bound: s(10),
        },
        Case {
            name: "hang_then_cancel",
            args: &[],
            stop_first: false,
            script: "#!mock\nsay before\nhang",
            cancel: true,
            expect: Expect::Idle,
            bound: s(15),
        },
        Case {
            name: "hang_on_cancel",
            args: &["--hang-on-cancel"],
            stop_first: false,
            script: "#!mock\nsay before\nsleep 60000",
            cancel: true,
            expect: Expect::Idle,
            bound: s(15),
        },
        Case {
            name: "garbage_line",
            args: &[],
            stop_first: false,
            script: "#!mock\ngarbage\nsay after",
            cancel: false,
            expect: Expect::Idle,
            bound: s(10),
        },
        Case {
            name: "line_16_mib",
            args: &[],
            stop_first: false,
            script: "#!mock\nbigline 16777216\nsay after",
            cancel: false,
            expect: Expect::Idle,
            bound: s(30),
        },
        Case {
            name: "startup_delay_2s",
            args: &["--startup-delay-ms", "2000"],
            stop_first: false,
            script: "hello",
            cancel: false,
            expect: Expect::Reply,
            bound: s(10),
        },
        Case {
            name: "never_answers_initialize",
            args: &["--startup-delay-ms", "3600000"],
            stop_first: false,
            script: "hello",
            cancel: false,
            expect: Expect::Error,
            bound: s(75),
        },
        Case {
            name: "fail_load_method_not_found",
            args: &["--fail-load", "method-not-found"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Reply,
            bound: s(10),
        },
        Case {
            name: "fail_load_unknown_session",
            args: &["--fail-load", "unknown-session"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Reply,
            bound: s(10),
        },
        Case {
            name: "fail_load_auth",
            args: &["--fail-load", "auth"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Error,
            bound: s(10),
        },
        Case {
            name: "fail_load_internal",
            args: &["--fail-load", "internal"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Error,
            bound: s(10),
        },
        Case {
            name: "fail_load_timeout",
            args: &["--fail-load", "timeout"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Error,
            bound: s(75),
        },
    ];
    let mut report =
        Report::new("R2", json!({"cases": cases.iter().map(|c| c.name).collect::<Vec<_>>()}));
    let home = ctx.home("r2")?;
    let server = harness::start(&ctx.kandev, &home, &[])?;
    let (workflow, _) = server.board("R2").await?;
    let results =
        futures::future::join_all(cases.iter().map(|c| run_case(&server, &workflow, c))).await;
    let mut figures = json!({});
    for (case, result) in cases.iter().zip(results) {
        match result {
            Ok(outcome) => {
                if let Some(problem) = &outcome.problem {
                    report.failures.push(format!("{}: {problem}", case.name));
                }
                figures[case.name] = outcome.figures;
            }
            Err(e) => report.failures.push(format!("{}: {e:#}", case.name)),
        }
    }
    report.figures = figures;
    let left = harness::wait_no_agents(&home, Duration::from_secs(20)).await;
    report.check(left.is_empty(), format!("agents left after deleting every session: {left:?}"));
    Ok(report)
}

struct Outcome {
    figures: Value,
    problem: Option<String>,
}

async fn run_case(server: &Server, workflow: &str, case: &Case) -> Result<Outcome> {
    let mut profile = None;
    if !case.args.is_empty() {
        let made = server
            .call(
                "agent.profile.create",
                json!({"name": format!("r2 {}", case.name), "kind": "mock", "args": case.args}),
            )
            .await?;
        profile = Some(str_of(&made["profile"]["id"])?);
    }
    let task =
        server.call("task.create", json!({"workflow_id": workflow, "title": case.name})).await?;
    let mut launch = json!({"task_id": task["task"]["id"]});
    if let Some(p) = &profile {
        launch["agent_profile_id"] = json!(p);
    }
    let boots_with_prompt = matches!(case.name, "startup_delay_2s" | "never_answers_initialize");
    if boots_with_prompt {
        launch["prompt"] = json!(case.script);
    }
    let started = Instant::now();
    let session = str_of(&server.call("session.launch", launch).await?["session"]["id"])?;
    if !boots_with_prompt {
        server.wait_state(&session, &["WAITING_FOR_INPUT"], Duration::from_secs(30)).await?;
        if case.stop_first {
            server.call("session.stop", json!({"id": session})).await?;
            server.wait_state(&session, &["WAITING_FOR_INPUT"], Duration::from_secs(30)).await?;
        }
    }
    let mut started_at = started;
    if !boots_with_prompt {
        started_at = Instant::now();
        server.call("message.add", json!({"session_id": session, "content": case.script})).await?;
    }
    if case.cancel {
        server.wait_state(&session, &["RUNNING"], Duration::from_secs(10)).await?;
        // Let the agent start the turn before cancelling.
        tokio::time::sleep(Duration::from_millis(200)).await;
        started_at = Instant::now();
        server.call("agent.cancel", json!({"session_id": session})).await?;
    }
    let mut problem = None;
    let final_session;
    loop {
        let s = server.session(&session).await?;
        let state = s["state"].as_str().unwrap_or("").to_owned();
        let idle = state == "WAITING_FOR_INPUT";
        let done = match case.expect {
            Expect::Reply => {
                idle && server
                    .messages(&session)
                    .await?
                    .iter()
                    .any(|m| m["content"] == "echo: hello")
            }
            Expect::Idle => idle,
            Expect::Error => (idle || state == "FAILED") && !s["last_error"].is_null(),
        };
        if done {
            final_session = s;
            break;
        }
        if started_at.elapsed() > case.bound {
            problem = Some(format!(
                "not settled within {:?}: state {state}, last_error {}",
                case.bound, s["last_error"]
            ));
            final_session = s;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = ms(started_at.elapsed());
    let error = &final_session["last_error"];
    if problem.is_none() {
        match case.expect {
            Expect::Reply if !error.is_null() => {
                problem = Some(format!("unexpected error {error}"))
            }
            Expect::Error => {
                let message = error["message"].as_str().unwrap_or("");
                if message.trim().is_empty()
                    || message.len() > 4096
                    || error["code"].as_str().is_none()
                {
                    problem = Some(format!("unreadable error {error}"));
                }
            }
            _ => {}
        }
    }
    if case.name == "startup_delay_2s" && elapsed < 2000.0 {
        problem = Some(format!("answered after {elapsed} ms, before the 2 s delay"));
    }
    // The session can be deleted, whatever happened.
    let deleted = Instant::now();
    let delete = server.call("session.delete", json!({"id": session})).await;
    let delete_ms = ms(deleted.elapsed());
    let (status, _) = server.call_raw("session.get", json!({"id": session})).await?;
    if delete.is_err() || status != 404 {
        problem
            .get_or_insert(format!("delete failed ({delete:?}) or session still there ({status})"));
    }
    Ok(Outcome {
        figures: json!({
            "state": final_session["state"],
            "last_error_code": error["code"],
            "last_error": error["message"],
            "settled_ms": elapsed,
            "bound_ms": case.bound.as_millis() as u64,
            "delete_ms": delete_ms,
        }),
        problem,
    })
}

/// A structured error body: `{code, message}` strings.
fn structured(body: &Value) -> bool {
    body["code"].is_string() && body["message"].is_string()
}

/// Hostile HTTP request number `i`: (action path, body bytes).
fn hostile_http(i: u64, ids: &[String]) -> (String, Vec<u8>) {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let id = &ids[(i as usize) % ids.len()];
    match i % 12 {
        0 => ("task.create".into(), b"{\"workflow_id\": ".to_vec()),
        1 => {
            ("task.create".into(), json!({"workflow_id": 5, "title": []}).to_string().into_bytes())
        }
        2 => (format!("no.such.action{}", i % 7), b"{}".to_vec()),
        3 => ("task.get".into(), json!({"id": format!("nope-{i}")}).to_string().into_bytes()),
        4 => ("session.get".into(), json!({"id": format!("../../{i}")}).to_string().into_bytes()),
        5 => ("message.list".into(), format!("{{\"session_id\": {}}}", deep(2_000)).into_bytes()),
        6 => {
            ("task.list".into(), json!({"workflow_id": id, "bogus": true}).to_string().into_bytes())
        }
        7 => (
            "message.add".into(),
            json!({"session_id": "x", "content": 12}).to_string().into_bytes(),
        ),
        8 => (
            "task.move".into(),
            json!({"id": "\u{0000}\u{ffff}", "step_id": null}).to_string().into_bytes(),
        ),
        9 => (
            "workflow.import".into(),
            json!({"workspace_id": "w", "yaml": "a: [b"}).to_string().into_bytes(),
        ),
        10 => ("task.create".into(), vec![0xff, 0xfe, 0x00, 0x7b]),
        _ => ("task.list".into(), json!({"workflow_id": id, "limit": -1}).to_string().into_bytes()),
    }
}

/// R4's YAML bombs: (kind, document, a fragment the refusal's message must contain).
fn yaml_bombs() -> Vec<(&'static str, String, &'static str)> {
    const HEADER: &str = "version: 1\nkind: kandev-workflow\n";
    // One big scalar behind 1,000 aliases: the probe's file had 1 MB (1 GB expanded).
    let fan_out = |scalar: usize| {
        let mut yaml = format!(
            "{HEADER}workflows:\n  - name: Bomb\n    description: &big \"{}\"\n    steps:\n",
            "x".repeat(scalar)
        );
        for i in 0..1_000 {
            yaml.push_str(&format!("      - {{name: s{i}, prompt: *big}}\n"));
        }
        yaml
    };
    let mut laughs = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..10 {
        let refs = vec![format!("*a{}", level - 1); 10].join(", ");
        laughs.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
    }
    let aliases = format!("a: &a x\nb: [{}]\n", vec!["*a"; 1_001].join(", "));
    let depth = 97_500; // the probe's 195 KB
    let keys: String = (0..20_000).map(|i| format!("k{i}: x, ")).collect();
    vec![
        ("alias fan-out of 200 KB", fan_out(200_000), "expanded size limit"),
        ("alias fan-out of 1 MB", fan_out(1_000_000), "size limit"),
        ("billion laughs", laughs, "expanded size limit"),
        ("many aliases", aliases, "alias limit"),
        ("deep flow", format!("{}{}", "[".repeat(depth), "]".repeat(depth)), "depth limit"),
        ("deep block", format!("{}x", "- ".repeat(depth)), "depth limit"),
        ("oversize", format!("{HEADER}# {}\n", "x".repeat(2 << 20)), "size limit"),
        // Under the size limit but slow to read (the scanner buffers the whole flow mapping):
        // it loads the parser; refused for its content (or its parse time on a slow machine).
        ("big flow mapping", format!("{HEADER}workflows: [[{{{keys}}}]]\n"), ""),
    ]
}

/// R4's bomb phase: `workers` clients each import every bomb `rounds` times while health is
/// polled every 10 ms. Every bomb must get a 422 `VALIDATION_ERROR` naming its limit, and
/// health must answer with p99 under 100 ms throughout.
async fn r4_yaml_bombs(server: &Arc<Server>, report: &mut Report, rounds: usize) -> Result<()> {
    let workspaces = server.call("workspace.list", json!({})).await?;
    let workspace_id = str_of(&workspaces["workspaces"][0]["id"])?;
    let bodies: Arc<Vec<(&'static str, String, &'static str)>> = Arc::new(
        yaml_bombs()
            .into_iter()
            .map(|(kind, yaml, limit)| {
                (kind, json!({"workspace_id": workspace_id, "yaml": yaml}).to_string(), limit)
            })
            .collect(),
    );
    let workers = 4;
    let done = Arc::new(AtomicU64::new(0));
    let mut jobs = vec![];
    for w in 0..workers {
        let (server, bodies, done) = (server.clone(), bodies.clone(), done.clone());
        jobs.push(tokio::spawn(async move {
            let mut refused = 0u64;
            let mut wrong = vec![];
            for round in 0..rounds {
                for k in 0..bodies.len() {
                    // Workers start at different bombs, so different kinds overlap.
                    let (kind, body, limit) = &bodies[(k + w + round) % bodies.len()];
                    let answer = server
                        .http
                        .post(format!("{}/api/v1/workflow.import", server.url))
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .send()
                        .await;
                    let (status, answer) = match answer {
                        Ok(r) => {
                            (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
                        }
                        Err(e) => (0, json!(e.to_string())),
                    };
                    let message = answer["message"].as_str().unwrap_or_default();
                    if status == 422
                        && answer["code"] == "VALIDATION_ERROR"
                        && message.contains(limit)
                    {
                        refused += 1;
                    } else {
                        wrong.push(format!("{kind}: {status} {message:.200}"));
                    }
                }
            }
            done.fetch_add(1, Ordering::Relaxed);
            (refused, wrong)
        }));
    }
    let mut latencies = vec![];
    let mut health_failures = 0u64;
    let started = Instant::now();
    while done.load(Ordering::Relaxed) < workers as u64 {
        let asked = Instant::now();
        let health = server.http.get(format!("{}/api/v1/health", server.url)).send().await;
        latencies.push(ms(asked.elapsed()));
        if !health.is_ok_and(|r| r.status().is_success()) {
            health_failures += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed();
    let (mut refused, mut wrong) = (0, vec![]);
    for job in jobs {
        let (r, w) = job.await?;
        refused += r;
        wrong.extend(w);
    }
    let total = (workers * rounds * bodies.len()) as u64;
    let p99 = harness::percentile(&mut latencies, 99.0);
    let max = latencies.iter().copied().fold(0.0, f64::max);
    report.check(
        refused == total,
        format!(
            "{} of {total} YAML bombs were not refused naming their limit, e.g. {:?}",
            total - refused,
            wrong.first()
        ),
    );
    report.check(
        health_failures == 0,
        format!("health failed {health_failures} times during the YAML bombs"),
    );
    report.check(
        p99 < 100.0,
        format!("health p99 {p99} ms during the YAML bombs (must be < 100 ms)"),
    );
    report.figure("yaml_bombs", total);
    report.figure("yaml_bombs_refused", refused);
    report.figure("yaml_bomb_phase_s", harness::round2(elapsed.as_secs_f64()));
    report.figure("health_probes_during_bombs", latencies.len());
    report.figure("health_p99_ms_during_bombs", p99);
    report.figure("health_max_ms_during_bombs", max);
    Ok(())
}

pub async fn r4(ctx: &Ctx) -> Result<Report> {
    let total: u64 = if ctx.quick { 5_000 } else { 100_000 };
    let mut report =
        Report::new("R4", json!({"requests": total, "http_share": 0.5, "ws_share": 0.5}));
    let home = ctx.home("r4")?;
    let server = Arc::new(harness::start(&ctx.kandev, &home, &[])?);
    let (workflow, _) = server.board("R4").await?;
    let ids = vec![workflow.clone()];
    let rss_before = server.rss_kib();
    let started = Instant::now();
    let bad = Arc::new(AtomicU64::new(0));
    let server_errors = Arc::new(AtomicU64::new(0));
    let mut samples = vec![];

    // HTTP half: 16 workers.
    let http_total = total / 2;
    let workers = 16;
    let mut jobs = vec![];
    for w in 0..workers {
        let server = server.clone();
        let ids = ids.clone();
        let bad = bad.clone();
        let server_errors = server_errors.clone();
        jobs.push(tokio::spawn(async move {
            let mut sample = None;
            let mut i = w;
            while i < http_total {
                let (action, body) = hostile_http(i, &ids);
                let response = server
                    .http
                    .post(format!("{}/api/v1/{action}", server.url))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await;
                match response {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let body: Value = r.json().await.unwrap_or(Value::Null);
                        if status >= 500 {
                            server_errors.fetch_add(1, Ordering::Relaxed);
                        }
                        if !(400..500).contains(&status) || !structured(&body) {
                            bad.fetch_add(1, Ordering::Relaxed);
                            sample.get_or_insert(format!("http #{i}: {status} {body}"));
                        }
                    }
                    Err(e) => {
                        bad.fetch_add(1, Ordering::Relaxed);
                        sample.get_or_insert(format!("http #{i}: {e}"));
                    }
                }
                i += workers;
            }
            sample
        }));
    }
    // A few huge bodies (over the 4 MiB limit).
    for _ in 0..4 {
        let body = format!("{{\"title\": \"{}\"}}", "x".repeat(5 << 20));
        let (status, answer) = {
            let r = server
                .http
                .post(format!("{}/api/v1/task.create", server.url))
                .body(body)
                .send()
                .await?;
            (r.status().as_u16(), r.json::<Value>().await.unwrap_or(Value::Null))
        };
        report.check(
            status == 400 && structured(&answer),
            format!("huge body answered {status} {answer}"),
        );
    }

    // WS half: 8 connections, pipelined batches of 50 frames.
    let ws_total = total - http_total;
    let conns = 8u64;
    for c in 0..conns {
        let mut ws = server.ws().await?;
        let bad = bad.clone();
        let ids = ids.clone();
        jobs.push(tokio::spawn(async move {
            let mut sample = None;
            let mut i = c;
            while i < ws_total {
                let mut sent = 0;
                while sent < 50 && i < ws_total {
                    let (action, body) = hostile_http(i, &ids);
                    let payload: Value = serde_json::from_slice(&body)
                        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
                    let frame = match i % 5 {
                        0 => json!({"id": format!("r{i}"), "type": "request", "payload": payload}).to_string(),
                        1 => json!({"id": format!("r{i}"), "type": "request", "action": 42, "payload": payload}).to_string(),
                        _ => json!({"id": format!("r{i}"), "type": "request", "action": action, "payload": payload}).to_string(),
                    };
                    if ws.send(Message::text(frame)).await.is_err() {
                        return Some(format!("ws {c}: send failed"));
                    }
                    sent += 1;
                    i += conns;
                }
                for _ in 0..sent {
                    match next_json(&mut ws, Duration::from_secs(30)).await {
                        Ok(frame) => {
                            if frame["type"] != "error" || !structured(&frame["payload"]) {
                                bad.fetch_add(1, Ordering::Relaxed);
                                sample.get_or_insert(format!("ws: {frame}"));
                            }
                        }
                        Err(e) => {
                            bad.fetch_add(1, Ordering::Relaxed);
                            return Some(format!("ws {c}: {e:#}"));
                        }
                    }
                }
            }
            // Malformed frames: not JSON, then binary; the socket must stay usable.
            for frame in [Message::text("{not json"), Message::binary(vec![0u8, 159, 146, 150])] {
                let _ = ws.send(frame).await;
            }
            let ping = json!({"id": "alive", "type": "request", "action": "workspace.list", "payload": {}});
            let _ = ws.send(Message::text(ping.to_string())).await;
            loop {
                match next_json(&mut ws, Duration::from_secs(10)).await {
                    Ok(frame) if frame["id"] == "alive" => break,
                    Ok(_) => {}
                    Err(e) => return Some(format!("ws {c}: socket unusable after malformed frames: {e:#}")),
                }
            }
            sample
        }));
    }
    for job in jobs {
        if let Some(s) = job.await? {
            samples.push(s);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    r4_yaml_bombs(&server, &mut report, if ctx.quick { 2 } else { 10 }).await?;
    let health = server.http.get(format!("{}/api/v1/health", server.url)).send().await;
    let alive = health.is_ok_and(|r| r.status().is_success());
    let still_works = server.call("workflow.list", json!({"workspace_id": server.call("workspace.list", json!({})).await?["workspaces"][0]["id"]})).await.is_ok();
    let rss_after = server.rss_kib();
    let bad = bad.load(Ordering::Relaxed);
    report
        .check(bad == 0, format!("{bad} answers were not structured 4xx errors; e.g. {samples:?}"));
    report.check(alive && still_works, "the server is alive and answers after the barrage");
    // targets.md R4 (issue 38 item 4): after the run, under 1.5x the idle RSS + 32 MiB.
    let bounded = rss_after < rss_before * 3 / 2 + 32 * 1024;
    report.check(
        bounded,
        format!("RSS grew from {rss_before} to {rss_after} KiB (bound 1.5x + 32 MiB)"),
    );
    report.figure("requests", total + 4);
    report.figure("requests_per_s", (total as f64 / elapsed).round());
    report.figure("unstructured_or_non_4xx", bad);
    report.figure("server_5xx", server_errors.load(Ordering::Relaxed));
    report.figure("rss_before_kib", rss_before);
    report.figure("rss_after_kib", rss_after);
    report.figure("alive", alive);
    report.notes.push("a deterministic mix (12 kinds: truncated and non-UTF-8 JSON, wrong types, unknown fields and actions, invalid and traversal-like ids, 2,000-deep nesting, bad YAML, negative limits; WS frames also without or with a numeric action), 4 bodies over 4 MiB, then non-JSON and binary WS frames; not a coverage-guided fuzzer".into());
    report.notes.push("then YAML bombs (alias fan-out of a 200 KB and of a 1 MB scalar, billion laughs, 1,001 aliases, 195 KB of flow and of block nesting, 2 MiB, a legal but slow 240 KB flow mapping) from 4 clients while health is polled every 10 ms".into());
    Ok(report)
}

pub async fn r5(ctx: &Ctx) -> Result<Report> {
    let mut report = Report::new("R5", json!({}));
    let mut figures = json!({});

    // 1. A non-loopback bind without a token is refused.
    let home = ctx.home("r5-bind")?;
    let mut child = std::process::Command::new(&ctx.kandev)
        .args(["serve", "--addr", "0.0.0.0:0", "--home"])
        .arg(&home)
        .env_remove("KANDEV_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let started = Instant::now();
    let refused = loop {
        if let Some(status) = child.try_wait()? {
            break !status.success();
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    figures["non_loopback_without_token_refused"] = json!(refused);
    report.check(refused, "serve --addr 0.0.0.0:0 without a token did not exit with an error");

    // 2. Token: none and wrong get 401, right gets 200.
    let home = ctx.home("r5-token")?;
    let server = harness::start(&ctx.kandev, &home, &["--token", "right-token-42"])?;
    let url = format!("{}/api/v1/workspace.list", server.url);
    let none = server.http.post(&url).json(&json!({})).send().await?.status().as_u16();
    let wrong = server
        .http
        .post(&url)
        .bearer_auth("wrong")
        .json(&json!({}))
        .send()
        .await?
        .status()
        .as_u16();
    let right = server
        .http
        .post(&url)
        .bearer_auth("right-token-42")
        .json(&json!({}))
        .send()
        .await?
        .status()
        .as_u16();
    figures["token"] = json!({"none": none, "wrong": wrong, "right": right});
    report.check(
        none == 401 && wrong == 401 && right == 200,
        format!("token statuses none {none}, wrong {wrong}, right {right}"),
    );
    drop(server);

    // 3. Foreign Origin: WS upgrade and HTTP refused; same origin works.
    let home = ctx.home("r5")?;
    let server = harness::start_env(&ctx.kandev, &home, &[], &[("RUST_LOG", "debug")])?;
    let mut request = format!("{}/ws", server.url.replace("http", "ws")).into_client_request()?;
    request.headers_mut().insert("Origin", "http://evil.example".parse()?);
    let ws_refused = tokio_tungstenite::connect_async(request).await.is_err();
    let http_origin = server
        .http
        .post(format!("{}/api/v1/workspace.list", server.url))
        .header("Origin", "http://evil.example")
        .json(&json!({}))
        .send()
        .await?
        .status()
        .as_u16();
    let mut request = format!("{}/ws", server.url.replace("http", "ws")).into_client_request()?;
    request.headers_mut().insert("Origin", server.url.parse()?);
    let same_ok = tokio_tungstenite::connect_async(request).await.is_ok();
    figures["foreign_origin"] =
        json!({"ws_refused": ws_refused, "http_status": http_origin, "same_origin_ws_ok": same_ok});
    report.check(
        ws_refused && http_origin == 403 && same_ok,
        format!("origin checks: {}", figures["foreign_origin"]),
    );

    // 4. Path traversal on a task's plain folder.
    let (workflow, _) = server.board("R5").await?;
    let task =
        server.call("task.create", json!({"workflow_id": workflow, "title": "files"})).await?;
    let task_id = str_of(&task["task"]["id"])?;
    let session = server
        .call("session.launch", json!({"task_id": task_id, "prompt": "#!mock\nwrite ok.txt hello"}))
        .await?;
    let session_id = str_of(&session["session"]["id"])?;
    let folder = home.join("tasks").join(&task_id);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !folder.join("ok.txt").exists() {
        if Instant::now() > deadline {
            bail!("the agent did not write ok.txt in {}", folder.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(home.join("outside.txt"), "outside")?;
    std::os::unix::fs::symlink(home.join("outside.txt"), folder.join("link.txt"))?;
    let read = server.call("task.file.read", json!({"task_id": task_id, "path": "ok.txt"})).await?;
    report.check(read["content"] == "hello", format!("a legitimate read answered {read}"));
    let mut traversal = json!({});
    for path in ["../x", "../../outside.txt", "/etc/passwd", "link.txt", "a/../../x", ".git/config"]
    {
        let (status, body) =
            server.call_raw("task.file.read", json!({"task_id": task_id, "path": path})).await?;
        traversal[path] = json!(status);
        report.check(
            status == 403 && body["code"] == "FORBIDDEN",
            format!("task.file.read {path}: {status} {body}"),
        );
    }
    figures["path_traversal_status"] = traversal;

    // 5. Secrets stay out of the log (the server runs with RUST_LOG=debug) and responses.
    let secret = "sk-secret-123456789";
    let profile = server
        .call("agent.profile.create", json!({"name": "secret", "kind": "mock", "env": [{"name": "API_KEY", "value": secret}]}))
        .await?;
    let profile_id = str_of(&profile["profile"]["id"])?;
    let task =
        server.call("task.create", json!({"workflow_id": workflow, "title": "secret"})).await?;
    let launched = server
        .call("session.launch", json!({"task_id": task["task"]["id"], "agent_profile_id": profile_id, "prompt": "hello"}))
        .await?;
    let secret_session = str_of(&launched["session"]["id"])?;
    server.wait_state(&secret_session, &["WAITING_FOR_INPUT"], Duration::from_secs(30)).await?;
    let listed = server.call("agent.profile.list", json!({})).await?;
    let in_response = listed.to_string().contains(secret) || profile.to_string().contains(secret);
    server.call("session.delete", json!({"id": secret_session})).await?;
    server.call("session.delete", json!({"id": session_id})).await?;
    drop(server);
    let log = std::fs::read_to_string(home.with_extension("log")).unwrap_or_default();
    let in_log = log.contains(secret);
    figures["secrets"] = json!({"log_bytes": log.len(), "secret_in_log": in_log, "secret_in_responses": in_response});
    report.check(!log.is_empty(), "the server log is empty (nothing checked)");
    report.check(!in_log, "the secret appears in the server log");
    report.check(!in_response, "the secret appears in an API response");
    report.figures = figures;
    Ok(report)
}
