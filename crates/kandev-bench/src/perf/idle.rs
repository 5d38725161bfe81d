//! P2: idle scale: many live agents behind the local runner and WebSocket clients; the
//! server's and the runner's RSS and a prompt's round trip among them.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::json;

use super::shared::{live_sessions, read_turn};
use crate::harness::{
    self, Server, Ws, agents_of, ms, percentile, processes_with, round2, subscribe,
};
use crate::{Ctx, Report};

/// One prompt round trip: `message.add` → the turn's `session.turn.completed` on the socket.
async fn round_trip(server: &Server, ws: &mut Ws, session: &str, text: &str) -> Result<f64> {
    let started = Instant::now();
    server.call("message.add", json!({"session_id": session, "content": text})).await?;
    let seen = read_turn(ws, Duration::from_secs(30)).await?;
    if seen.text != format!("echo: {text}") {
        bail!("round trip answered {:?}", seen.text);
    }
    Ok(ms(started.elapsed()))
}

pub async fn p2(ctx: &Ctx) -> Result<Report> {
    let (n, clients, prompts) = if ctx.quick { (20, 10, 20) } else { (1000, 20, 100) };
    let mut report = Report::new(
        "P2",
        json!({"sessions": n, "ws_clients": clients, "round_trips": prompts,
            "database": ctx.engine(), "runner": "local"}),
    );
    let home = ctx.home("p2")?;
    let mut args = vec!["--runner", "local", "--runner-grace", "10s"];
    args.extend(ctx.database_args());
    let server = harness::start(&ctx.kandev, &home, &args)?;
    let (workflow, _) = server.board("P2").await?;
    let empty_rss = server.rss_kib();
    let boot = Instant::now();
    let sessions = live_sessions(&server, &workflow, n).await?;
    report.figure("boot_all_s", round2(boot.elapsed().as_secs_f64()));
    let agents = agents_of(&home).len();
    report.check(agents == n, format!("{agents} agent processes for {n} sessions"));
    // The clients, each subscribed to a share of the sessions and to the workspace.
    let mut sockets = vec![];
    for c in 0..clients {
        let mut ws = server.ws().await?;
        let topics: Vec<String> =
            sessions.iter().skip(c).step_by(clients).map(|s| format!("session:{s}")).collect();
        subscribe(&mut ws, &topics).await?;
        sockets.push(ws);
    }
    let mut probe = server.ws().await?;
    subscribe(&mut probe, &[format!("session:{}", sessions[0])]).await?;
    let mut sample = vec![];
    for i in 0..prompts {
        sample.push(round_trip(&server, &mut probe, &sessions[0], &format!("ping {i}")).await?);
    }
    let rss = server.rss_kib();
    let runner = runner_of(&home);
    report.check(runner.len() == 1, format!("{} runner processes for the home", runner.len()));
    let runner_rss: u64 = runner.iter().map(|pid| harness::rss_kib(*pid)).sum();
    report.figure("agent_processes", agents);
    report.figure("runner_rss_kib", runner_rss);
    report.figure("server_rss_empty_kib", empty_rss);
    report.figure("server_rss_kib", rss);
    report.figure("round_trip_p50_ms", percentile(&mut sample, 50.0));
    report.figure("round_trip_p99_ms", percentile(&mut sample, 99.0));
    report.notes.push("round trip: message.add sent -> session.turn.completed received on a WS subscriber, echo reply verified".into());
    drop(sockets);
    Ok(report)
}

/// The local runner of a server home (its command line names `<home>/runner.sock`), without
/// the agents under it.
fn runner_of(home: &std::path::Path) -> Vec<u32> {
    let socket = home.join("runner.sock").display().to_string();
    let agents = agents_of(home);
    processes_with(&socket).into_iter().filter(|pid| !agents.contains(pid)).collect()
}
