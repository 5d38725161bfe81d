//! R6: `kill -9` of a server whose agents run behind the local runner, or on an SSH executor
//! (R6-ssh): the turns go on, every chunk is stored once, nothing is left after a stop.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::{Value, json};

use crate::harness::{self, Server, ms, str_of};
use crate::{Ctx, Report};

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
                _repo: Some(harness::git_repo()?),
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
    let expected = crate::perf::shared::expected_stream(chunks, bytes);
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
