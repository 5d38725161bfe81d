//! P1: streaming: concurrent sessions flooding chunks to two subscribers each, against the
//! raw limit of the same agents read over bare pipes; throughput, latency, and every chunk
//! seen once and stored.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::future::try_join_all;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::shared::{
    chunk_stamp, first_wrong_chunk, live_sessions, read_stamped_turn, rss_sampler,
    stamped_stream_ok, unix_micros,
};
use crate::harness::{self, Server, ms, percentile, round2, str_of, subscribe};
use crate::{Ctx, Report};

pub async fn p1(ctx: &Ctx) -> Result<Report> {
    let (sessions_n, chunks, bytes) = if ctx.quick { (5, 200, 100) } else { (50, 2000, 100) };
    let mut report = Report::new(
        "P1",
        json!({"sessions": sessions_n, "chunks": chunks, "chunk_bytes": bytes, "subscribers_per_session": 2,
            "database": ctx.engine()}),
    );
    // Stamped chunks: each carries its write time, for the write -> receive latency.
    let script = format!("#!mock\nstream {chunks} {bytes} stamp");

    // The raw limit first (same agents, same script, piped into a bare line parser).
    let raw_home = ctx.home("p1-raw")?;
    let raw = raw_limit(&ctx.kandev, &raw_home, sessions_n, &script, chunks, bytes).await?;
    report.check(raw.ok, "the raw agents streamed exactly the expected text");
    // The same agents paced as below, read raw: the latency this machine gives a bare reader
    // of 50 agents writing a chunk every 2 ms each (the paced figures' floor).
    let paced_script = format!("#!mock\nstream {} {bytes} stamp every 2", chunks / 2);
    let raw_paced_home = ctx.home("p1-raw-paced")?;
    let mut raw_paced =
        raw_limit(&ctx.kandev, &raw_paced_home, sessions_n, &paced_script, chunks / 2, bytes)
            .await?;
    report.check(raw_paced.ok, "the raw paced agents streamed exactly the expected text");

    let home = ctx.home("p1")?;
    let server = harness::start(&ctx.kandev, &home, &ctx.database_args())?;
    let (workflow, _) = server.board("P1").await?;
    let sessions = live_sessions(&server, &workflow, sessions_n).await?;
    let idle_rss = server.rss_kib();

    let running = Arc::new(AtomicBool::new(true));
    let sampler = rss_sampler(server.pid(), running.clone());
    let flood = streamed_turn(&server, &sessions, &script, chunks, bytes).await?;
    running.store(false, Ordering::Relaxed);
    let peak_rss = sampler.await?;
    report.failures.extend(flood.failures.iter().cloned());
    let elapsed = (flood.end - flood.started).as_secs_f64();
    check_transcripts(&mut report, &server, &sessions, &[&flood], "").await?;
    // The same sessions again, the chunks paced as a model writes tokens (a chunk every
    // 2 ms per session, about half the server's flood throughput on 2 cores): the latency
    // of a stream the server keeps up with, where the flood's is the pipe's queueing.
    let mut paced = streamed_turn(&server, &sessions, &paced_script, chunks / 2, bytes).await?;
    report.failures.extend(paced.failures.iter().map(|f| format!("paced: {f}")));
    // Says whether text a subscriber of the paced turn missed was stored anyway.
    check_transcripts(&mut report, &server, &sessions, &[&flood, &paced], "paced: ").await?;
    let total = (sessions_n as u64 * chunks * bytes as u64) as f64;
    let throughput = total / elapsed;
    let (mut gaps, mut latencies, mut first_chunk) =
        (flood.gaps, flood.latencies, flood.first_chunk);
    let mut raw_latencies = raw.latencies;
    report.figure("sessions_verified", sessions.len());
    report.figure(
        "subscribers_with_lost_or_duplicated_chunks",
        flood.lost_or_dup + paced.lost_or_dup,
    );
    report.figure("bytes_streamed", total);
    report.figure("elapsed_s", round2(elapsed));
    report.figure("throughput_bytes_per_s", throughput.round());
    report.figure("raw_throughput_bytes_per_s", raw.throughput.round());
    report.figure("ratio_to_raw", (throughput / raw.throughput * 1e4).round() / 1e4);
    report.figure("chunk_gap_p50_ms", percentile(&mut gaps, 50.0));
    report.figure("chunk_gap_p99_ms", percentile(&mut gaps, 99.0));
    report.figure("write_to_receive_p50_ms", percentile(&mut latencies, 50.0));
    report.figure("write_to_receive_p99_ms", percentile(&mut latencies, 99.0));
    report.figure("write_to_receive_max_ms", percentile(&mut latencies, 100.0));
    report.figure("raw_write_to_receive_p50_ms", percentile(&mut raw_latencies, 50.0));
    report.figure("raw_write_to_receive_p99_ms", percentile(&mut raw_latencies, 99.0));
    report.figure("paced_write_to_receive_p50_ms", percentile(&mut paced.latencies, 50.0));
    report.figure("paced_write_to_receive_p99_ms", percentile(&mut paced.latencies, 99.0));
    report.figure("paced_write_to_receive_max_ms", percentile(&mut paced.latencies, 100.0));
    report.figure("raw_paced_write_to_receive_p50_ms", percentile(&mut raw_paced.latencies, 50.0));
    report.figure("raw_paced_write_to_receive_p99_ms", percentile(&mut raw_paced.latencies, 99.0));
    report.figure("prompt_to_first_chunk_p50_ms", percentile(&mut first_chunk, 50.0));
    report.figure("prompt_to_first_chunk_p99_ms", percentile(&mut first_chunk, 99.0));
    report.figure("server_rss_idle_kib", idle_rss);
    report.figure("server_rss_peak_kib", peak_rss);
    report.notes.push(
        "latency: write_to_receive_* is the mock agent's write of a chunk (its stamp, `stream ... stamp`) -> the subscriber's receipt of the frame completing it, on the same machine's clock; raw_write_to_receive_* the same for the raw reader (the agents flood their pipes: queueing in the pipe is in both); paced_* a second turn of half the chunks written every 2 ms per session (raw_paced_* the same agents and script read by the raw reader); chunk_gap_* is the spacing between consecutive frames at one subscriber (frames carry coalesced chunks), prompt_to_first_chunk_* is message.add sent -> first chunk received".into(),
    );
    Ok(report)
}

/// What every subscriber of a [`streamed_turn`] saw, checked and merged.
pub(super) struct Streamed {
    pub(super) started: Instant,
    pub(super) end: Instant,
    /// What each subscriber saw, per session.
    pub(super) per_session: HashMap<String, Vec<String>>,
    gaps: Vec<f64>,
    pub(super) latencies: Vec<f64>,
    first_chunk: Vec<f64>,
    pub(super) lost_or_dup: usize,
    pub(super) failures: Vec<String>,
}

/// One turn of `script` (a `stream {chunks} {bytes} stamp ...`) on every session at once,
/// two fresh subscribers each; every subscriber must see exactly the expected chunks.
pub(super) async fn streamed_turn(
    server: &Server,
    sessions: &[String],
    script: &str,
    chunks: u64,
    bytes: usize,
) -> Result<Streamed> {
    let mut readers = vec![];
    for session in sessions {
        for _ in 0..2 {
            let mut ws = server.ws().await?;
            subscribe(&mut ws, &[format!("session:{session}")]).await?;
            readers.push((session.clone(), ws));
        }
    }
    let tasks: Vec<_> = readers
        .into_iter()
        .map(|(session, mut ws)| {
            tokio::spawn(async move {
                let seen = read_stamped_turn(&mut ws, Duration::from_secs(600), Some(bytes)).await;
                (session, seen)
            })
        })
        .collect();
    let started = Instant::now();
    let adds = try_join_all(sessions.iter().map(|s| {
        let sent = Instant::now();
        async move {
            server.call("message.add", json!({"session_id": s, "content": script})).await?;
            Ok::<_, anyhow::Error>((s.clone(), sent))
        }
    }))
    .await?;
    let sent_at: HashMap<String, Instant> = adds.into_iter().collect();
    let mut out = Streamed {
        started,
        end: started,
        per_session: HashMap::new(),
        gaps: vec![],
        latencies: vec![],
        first_chunk: vec![],
        lost_or_dup: 0,
        failures: vec![],
    };
    for task in tasks {
        let (session, seen) = task.await?;
        let seen = seen.with_context(|| format!("subscriber of {session}"))?;
        if !stamped_stream_ok(&seen.text, chunks, bytes) {
            out.lost_or_dup += 1;
            let wrong = first_wrong_chunk(&seen.text, chunks, bytes);
            out.failures.push(format!(
                "session {session}: a subscriber saw {} bytes in {} frames, not the {} expected chunks in order (first wrong: chunk {})",
                seen.text.len(),
                seen.chunks,
                chunks,
                wrong.map_or("none".to_owned(), |i| i.to_string())
            ));
        }
        out.gaps.extend(seen.gaps);
        out.latencies.extend(seen.latencies);
        if let (Some(first), Some(sent)) = (seen.first, sent_at.get(&session)) {
            out.first_chunk.push(ms(first - *sent));
        }
        out.end = out.end.max(seen.last.unwrap_or(out.end));
        out.per_session.entry(session).or_default().push(seen.text);
    }
    Ok(out)
}

/// Checks that each session's stored agent text is what every subscriber of the last of
/// `turns` saw, after what the first subscriber of each earlier turn saw.
async fn check_transcripts(
    report: &mut Report,
    server: &Server,
    sessions: &[String],
    turns: &[&Streamed],
    label: &str,
) -> Result<()> {
    let Some((last, earlier)) = turns.split_last() else { return Ok(()) };
    for session in sessions {
        let messages = server.messages(session).await?;
        let stored: String = messages
            .iter()
            .filter(|m| m["kind"] == "agent")
            .filter_map(|m| m["content"].as_str())
            .collect();
        let told = |turn: &Streamed| turn.per_session.get(session).cloned().unwrap_or_default();
        let before: String = earlier.iter().filter_map(|t| told(t).into_iter().next()).collect();
        for text in told(last) {
            let expected = format!("{before}{text}");
            report.check(
                expected == stored,
                format!(
                    "{label}session {session}: the stored transcript ({} bytes) differs from what a subscriber saw ({} bytes)",
                    stored.len(),
                    expected.len()
                ),
            );
        }
    }
    Ok(())
}

struct Raw {
    throughput: f64,
    ok: bool,
    /// Agent write -> this reader's receipt, per chunk, in ms.
    latencies: Vec<f64>,
}

/// The raw limit: the same mock agents run directly, driven over ACP on pipes by this
/// process, which only parses each line and collects the chunk text.
async fn raw_limit(
    kandev: &std::path::Path,
    home: &std::path::Path,
    n: usize,
    script: &str,
    chunks: u64,
    chunk_bytes: usize,
) -> Result<Raw> {
    let mut agents = vec![];
    for i in 0..n {
        let state = home.join(format!("agent-{i}"));
        std::fs::create_dir_all(&state)?;
        let mut child = tokio::process::Command::new(kandev)
            .arg("mock-agent")
            .arg("--state-dir")
            .arg(&state)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let mut stdin = child.stdin.take().context("stdin")?;
        let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        let send = |id: u64, method: &str, params: Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
                + "\n"
        };
        stdin
            .write_all(
                send(1, "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}))
                    .as_bytes(),
            )
            .await?;
        wait_response(&mut lines, 1).await?;
        stdin
            .write_all(send(2, "session/new", json!({"cwd": state, "mcpServers": []})).as_bytes())
            .await?;
        let new = wait_response(&mut lines, 2).await?;
        let acp = str_of(&new["result"]["sessionId"])?;
        agents.push((child, stdin, lines, acp));
    }
    let started = Instant::now();
    let bytes = Arc::new(AtomicU64::new(0));
    let runs = agents.into_iter().map(|(child, mut stdin, mut lines, acp)| {
        let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
            "params": {"sessionId": acp, "prompt": [{"type": "text", "text": script}]}})
        .to_string()
            + "\n";
        let bytes = bytes.clone();
        async move {
            stdin.write_all(prompt.as_bytes()).await?;
            let mut text = String::new();
            let mut latencies = vec![];
            while let Some(line) = lines.next_line().await? {
                let received = unix_micros();
                let frame: Value = serde_json::from_str(&line)?;
                if frame["id"] == 3 {
                    break;
                }
                let update = &frame["params"]["update"];
                if let Some(t) = update["content"]["text"].as_str()
                    && update["sessionUpdate"] == "agent_message_chunk"
                {
                    if let Some(stamp) = chunk_stamp(t) {
                        latencies.push(received.saturating_sub(stamp) as f64 / 1000.0);
                    }
                    text.push_str(t);
                }
            }
            bytes.fetch_add(text.len() as u64, Ordering::Relaxed);
            drop(child);
            Ok::<_, anyhow::Error>((text, latencies))
        }
    });
    let runs = try_join_all(runs).await?;
    let elapsed = started.elapsed().as_secs_f64();
    Ok(Raw {
        throughput: bytes.load(Ordering::Relaxed) as f64 / elapsed,
        ok: runs.iter().all(|(t, _)| stamped_stream_ok(t, chunks, chunk_bytes)),
        latencies: runs.into_iter().flat_map(|(_, l)| l).collect(),
    })
}

async fn wait_response(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    id: u64,
) -> Result<Value> {
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .context("the raw agent did not answer")??
            .context("the raw agent exited")?;
        let frame: Value = serde_json::from_str(&line)?;
        if frame["id"] == id {
            if frame.get("error").is_some() {
                bail!("raw agent answered an error: {frame}");
            }
            return Ok(frame);
        }
    }
}
