//! R1: `kill -9` of the server mid-stream, cycle after cycle; after each restart every session
//! is reconciled and everything told to a subscriber is stored.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

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
