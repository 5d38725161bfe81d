//! R8, slow and idle clients (issue 12 finding 3): non-reading WebSocket subscribers and
//! half-open connections held while an agent streams; the server must stay within its memory
//! bound and keep answering. Then a flood of half-open connections past the server's
//! open-file limit: `accept` meets EMFILE and health must still answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::MaybeTlsStream;
use tokio_tungstenite::tungstenite::Message;

use crate::harness::{self, Server, Ws, ms, percentile, subscribe};
use crate::perf::{expected_stream, read_turn, rss_sampler};
use crate::{Ctx, Report};

/// How long the stalled subscribers keep not reading after the stream: longer than the
/// server's default WebSocket queue wait (`ServerConfig::ws_queue_wait`, 5 s).
const STALL: Duration = Duration::from_secs(6);

struct Sizes {
    subscribers: usize,
    half_open: usize,
    /// The stream: `messages` agent messages of `chunks` chunks of `chunk_bytes` each.
    messages: usize,
    chunks: u64,
    chunk_bytes: usize,
    /// The server's open-file limit (`ulimit -n`; 1024 is a common default).
    nofile: u64,
}

/// The EMFILE phase: the server's open-file limit, and the half-open connections that
/// exceed it (its connection cap is set above the limit on purpose).
const EMFILE_NOFILE: u64 = 64;
const EMFILE_FLOOD: usize = 150;

/// A WebSocket subscriber that reads its subscribe answer, then nothing; its socket takes in
/// little unread data, as a stalled client's would.
async fn stalled_subscriber(server: &Server, topic: &str) -> Result<Ws> {
    let addr = server.url.trim_start_matches("http://").parse()?;
    let socket = TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(4096)?;
    let tcp = MaybeTlsStream::Plain(socket.connect(addr).await?);
    let url = format!("{}/ws", server.url.replace("http", "ws"));
    let (mut ws, _) = tokio_tungstenite::client_async(url, tcp).await?;
    subscribe(&mut ws, &[topic.to_owned()]).await?;
    Ok(ws)
}

/// What a stalled subscriber got once it reads again: told to resync, cut, or neither.
async fn drain(mut ws: Ws) -> &'static str {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, ws.next()).await {
            Err(_) => return "neither",
            Ok(None | Some(Err(_)) | Some(Ok(Message::Close(_)))) => return "cut",
            Ok(Some(Ok(Message::Text(text)))) => {
                let frame: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                if frame["type"] == "resync_required" {
                    return "resync_required";
                }
            }
            Ok(Some(Ok(_))) => {}
        }
    }
}

/// One health request on a new connection: its latency, or why it failed.
async fn health(url: &str) -> Result<Duration, String> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    match client.get(format!("{url}/api/v1/health")).send().await {
        Ok(r) if r.status().is_success() => Ok(started.elapsed()),
        Ok(r) => Err(format!("health answered {}", r.status())),
        Err(e) => Err(format!("health failed: {e}")),
    }
}

pub async fn r8(ctx: &Ctx) -> Result<Report> {
    let sizes = if ctx.quick {
        Sizes {
            subscribers: 20,
            half_open: 60,
            messages: 16,
            chunks: 64,
            chunk_bytes: 1024,
            nofile: 1024,
        }
    } else {
        Sizes {
            subscribers: 200,
            half_open: 300,
            messages: 96,
            chunks: 64,
            chunk_bytes: 1024,
            nofile: 1024,
        }
    };
    let mut report = Report::new(
        "R8",
        json!({"stalled_subscribers": sizes.subscribers, "half_open_connections": sizes.half_open,
               "stream_bytes": sizes.messages as u64 * sizes.chunks * sizes.chunk_bytes as u64,
               "stream_messages": sizes.messages, "server_nofile": sizes.nofile}),
    );
    let home = ctx.home("r8")?;
    let server = harness::start_nofile(&ctx.kandev, &home, &[], sizes.nofile)?;
    let (workflow, _) = server.board("R8").await?;
    let session = server.live_session(&workflow, "r8").await?;
    let topic = format!("session:{session}");
    let rss_idle = server.rss_kib();

    let mut stalled = vec![];
    for _ in 0..sizes.subscribers {
        stalled.push(stalled_subscriber(&server, &topic).await.context("a stalled subscriber")?);
    }
    let mut reader = server.ws().await?;
    subscribe(&mut reader, std::slice::from_ref(&topic)).await?;
    // Half-open: half send nothing, half a request head that never ends.
    let addr: std::net::SocketAddr = server.url.trim_start_matches("http://").parse()?;
    let mut half_open = vec![];
    for i in 0..sizes.half_open {
        let mut stream = TcpStream::connect(addr).await?;
        if i % 2 == 1 {
            stream.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n").await?;
        }
        half_open.push(stream);
    }
    let rss_held = server.rss_kib();

    let running = Arc::new(AtomicBool::new(true));
    let sampler = rss_sampler(server.pid(), running.clone());
    let prober = {
        let url = server.url.clone();
        let running = running.clone();
        tokio::spawn(async move {
            let (mut latencies, mut failures) = (vec![], vec![]);
            while running.load(Ordering::Relaxed) {
                match health(&url).await {
                    Ok(took) => latencies.push(ms(took)),
                    Err(e) => failures.push(e),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (latencies, failures)
        })
    };
    // Agent messages of 64 KiB: one 6 MB message would measure the store's appends (each
    // chunk rewrites and re-reads the whole row), not the connections.
    let mut script = String::from("#!mock\n");
    for _ in 0..sizes.messages {
        script.push_str(&format!("stream {} {}\nthink next\n", sizes.chunks, sizes.chunk_bytes));
    }
    let started = Instant::now();
    server.call("message.add", json!({"session_id": session, "content": script})).await?;
    let seen = read_turn(&mut reader, Duration::from_secs(600)).await;
    let stream_s = started.elapsed().as_secs_f64();
    // The stalled clients stay stalled past the server's queue wait (5 s by default), so the
    // server has had to decide about each of them.
    tokio::time::sleep(STALL).await;
    running.store(false, Ordering::Relaxed);
    let rss_peak = sampler.await?;
    let (mut latencies, health_failures) = prober.await?;
    let seen = seen.context("the reading subscriber")?;
    report.check(
        seen.text == expected_stream(sizes.chunks, sizes.chunk_bytes).repeat(sizes.messages),
        format!(
            "the reading subscriber saw {} bytes, not the whole stream in order",
            seen.text.len()
        ),
    );
    report.check(
        health_failures.is_empty() && !latencies.is_empty(),
        format!(
            "health did not always answer: {:?}",
            health_failures.iter().take(3).collect::<Vec<_>>()
        ),
    );

    // The stalled subscribers read again: each was told to resync or was cut.
    let outcomes = futures::future::join_all(stalled.into_iter().map(drain)).await;
    let told = outcomes.iter().filter(|o| **o == "resync_required").count();
    let cut = outcomes.iter().filter(|o| **o == "cut").count();
    report.check(
        told + cut == outcomes.len(),
        format!(
            "{} of {} stalled subscribers were neither told to resync nor cut",
            outcomes.len() - told - cut,
            outcomes.len()
        ),
    );
    let half_open_closed = half_open_closed(&mut half_open);
    drop(half_open);
    let after = health(&server.url).await;
    report.check(after.is_ok(), format!("health after the clients left: {after:?}"));
    let rss_after = server.rss_kib();
    if !ctx.quick {
        report.check(
            rss_peak < 200 * 1024,
            format!("server RSS peaked at {rss_peak} KiB (bound 200 MiB)"),
        );
        report.check(
            rss_after < 200 * 1024,
            format!("server RSS is {rss_after} KiB after the clients left (bound 200 MiB)"),
        );
    }

    report.figure("stream_s", (stream_s * 100.0).round() / 100.0);
    report.figure("health_probes", latencies.len());
    report.figure("health_p50_ms", percentile(&mut latencies, 50.0));
    report.figure("health_p99_ms", percentile(&mut latencies, 99.0));
    report.figure("stalled_told_resync", told);
    report.figure("stalled_cut", cut);
    report.figure("half_open_closed_by_server", half_open_closed);
    report.figure("rss_idle_kib", rss_idle);
    report.figure("rss_clients_held_kib", rss_held);
    report.figure("rss_peak_kib", rss_peak);
    report.figure("rss_after_clients_left_kib", rss_after);
    drop(server);
    slow_readers(ctx, &mut report).await?;
    accept_under_emfile(ctx, &mut report).await?;
    report.notes.push(format!(
        "the server runs with `ulimit -n {}` (its default cap is then 512 connections); stalled subscribers have a 4 KiB receive buffer and stay stalled 6 s after the stream; the EMFILE phase runs a second server under `ulimit -n {EMFILE_NOFILE}` with `--max-connections 1000` and {EMFILE_FLOOD} half-open connections",
        sizes.nofile
    ));
    Ok(report)
}

/// The slow-reader phase's stream and clients (issue 38 item 3).
struct SlowSizes {
    readers: usize,
    /// The stream: `messages` agent messages of `chunks` chunks of 1 KiB each.
    messages: usize,
    chunks: u64,
    /// How long the readers go on reading after the stream is over.
    linger: Duration,
    /// How long after the readers left the server's RSS is read.
    settle: Duration,
}

/// How fast each slow reader reads, in bytes a second.
const SLOW_RATE: f64 = 64.0 * 1024.0;

/// What one slow reader saw: the bytes it read, how often it was told to resync (it then
/// subscribes again from now, as a live view would), whether the server cut it, and any
/// gap inside what it was sent (a chunk whose message `length` does not follow the one
/// before it).
#[derive(Default)]
struct SlowSeen {
    bytes: u64,
    resyncs: usize,
    cut: bool,
    completed: bool,
    gaps: Vec<String>,
}

/// Reads `topic` at [`SLOW_RATE`] until `stop`, then leaves (drops the socket).
async fn slow_reader(mut ws: Ws, topic: String, stop: Arc<tokio::sync::Notify>) -> SlowSeen {
    let mut seen = SlowSeen::default();
    let started = Instant::now();
    // Each message's length so far, as the frames of the current subscription told it.
    let mut lengths: std::collections::HashMap<String, u64> = Default::default();
    let stopped = stop.notified();
    tokio::pin!(stopped);
    loop {
        let message = tokio::select! {
            () = &mut stopped => break,
            message = ws.next() => message,
        };
        let text = match message {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                seen.cut = true;
                break;
            }
            Some(Ok(_)) => continue,
        };
        seen.bytes += text.len() as u64;
        let frame: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let payload = &frame["payload"];
        match (frame["type"].as_str(), frame["action"].as_str()) {
            (Some("resync_required"), _) => {
                seen.resyncs += 1;
                lengths.clear();
                let again = json!({"id": "again", "type": "request", "action": "subscribe",
                                   "payload": {"topics": [topic]}});
                if futures::SinkExt::send(&mut ws, Message::text(again.to_string())).await.is_err()
                {
                    seen.cut = true;
                    break;
                }
            }
            (_, Some("session.message.added")) => {
                let content = payload["message"]["content"].as_str().unwrap_or_default();
                if let Some(id) = payload["message"]["id"].as_str() {
                    lengths.insert(id.to_owned(), content.len() as u64);
                }
            }
            (_, Some("session.message.updated")) if payload["delta"].is_string() => {
                let id = payload["message_id"].as_str().unwrap_or_default().to_owned();
                let delta = payload["delta"].as_str().unwrap_or_default().len() as u64;
                let length = payload["length"].as_u64().unwrap_or_default();
                if let Some(before) = lengths.insert(id.clone(), length)
                    && before + delta != length
                    && seen.gaps.len() < 3
                {
                    seen.gaps.push(format!("message {id}: {before} + {delta} != {length}"));
                }
            }
            (_, Some("session.turn.completed")) => seen.completed = true,
            _ => {}
        }
        let due = Duration::from_secs_f64(seen.bytes as f64 / SLOW_RATE);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            tokio::select! {
                () = &mut stopped => break,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
    seen
}

/// Slow readers (issue 38 item 3): subscribers that read, but at [`SLOW_RATE`], while an agent
/// streams far faster. Each connection's queue is bounded in bytes, so a reader that falls
/// past it is told to resync (or cut); the server's RSS stays bounded and comes back after
/// they leave, health keeps answering, and a fast reader beside them gets the whole stream.
async fn slow_readers(ctx: &Ctx, report: &mut Report) -> Result<()> {
    let sizes = if ctx.quick {
        SlowSizes {
            readers: 20,
            messages: 2,
            chunks: 1024,
            linger: Duration::from_millis(500),
            settle: Duration::from_secs(1),
        }
    } else {
        SlowSizes {
            readers: 200,
            messages: 20,
            chunks: 1024,
            linger: Duration::from_secs(5),
            settle: Duration::from_secs(10),
        }
    };
    let home = ctx.home("r8-slow")?;
    let server = harness::start_nofile(&ctx.kandev, &home, &[], 1024)?;
    let (workflow, _) = server.board("R8 slow").await?;
    let session = server.live_session(&workflow, "r8 slow").await?;
    let topic = format!("session:{session}");
    let rss_idle = server.rss_kib();

    let stop = Arc::new(tokio::sync::Notify::new());
    let mut readers = vec![];
    for _ in 0..sizes.readers {
        let mut ws = server.ws().await?;
        subscribe(&mut ws, std::slice::from_ref(&topic)).await?;
        readers.push(tokio::spawn(slow_reader(ws, topic.clone(), stop.clone())));
    }
    let mut fast = server.ws().await?;
    subscribe(&mut fast, std::slice::from_ref(&topic)).await?;

    let running = Arc::new(AtomicBool::new(true));
    let sampler = rss_sampler(server.pid(), running.clone());
    let prober = {
        let url = server.url.clone();
        let running = running.clone();
        tokio::spawn(async move {
            let (mut latencies, mut failures) = (vec![], vec![]);
            while running.load(Ordering::Relaxed) {
                match health(&url).await {
                    Ok(took) => latencies.push(ms(took)),
                    Err(e) => failures.push(e),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (latencies, failures)
        })
    };
    let mut script = String::from("#!mock\n");
    for _ in 0..sizes.messages {
        script.push_str(&format!("stream {} 1024\nthink next\n", sizes.chunks));
    }
    let started = Instant::now();
    server.call("message.add", json!({"session_id": session, "content": script})).await?;
    let seen = read_turn(&mut fast, Duration::from_secs(600)).await;
    // The readers leave once the stream is over (the fast reader may have been told to
    // resync before it); the memory must come back.
    server.wait_state(&session, &["WAITING_FOR_INPUT"], Duration::from_secs(600)).await?;
    let stream_s = started.elapsed().as_secs_f64();
    // The readers go on reading a while (the server goes on writing to them), then leave.
    tokio::time::sleep(sizes.linger).await;
    stop.notify_waiters();
    let mut outcomes = vec![];
    for reader in readers {
        outcomes.push(reader.await?);
    }
    let rss_left = server.rss_kib();
    tokio::time::sleep(sizes.settle).await;
    let rss_after = server.rss_kib();
    running.store(false, Ordering::Relaxed);
    let rss_peak = sampler.await?;
    let (mut latencies, failures) = prober.await?;

    // The fast reader gets the whole stream in order, unless the server, busy writing to the
    // slow readers on a small machine, fell past its bound for it too: then it is told to
    // resync like them (a reader that fails otherwise is an error).
    let fast_told_resync = match seen {
        Ok(seen) => {
            report.check(
                seen.text == expected_stream(sizes.chunks, 1024).repeat(sizes.messages),
                format!(
                    "the fast reader beside the slow ones saw {} bytes, not the whole stream in order",
                    seen.text.len()
                ),
            );
            false
        }
        Err(err) if format!("{err:#}").contains("resync_required") => true,
        Err(err) => return Err(err.context("the fast reader beside the slow ones")),
    };
    report.figure("slow_fast_reader_told_resync", fast_told_resync);
    let gaps: Vec<&String> = outcomes.iter().flat_map(|o| &o.gaps).take(3).collect();
    report.check(gaps.is_empty(), format!("slow readers were sent text with gaps: {gaps:?}"));
    report.check(
        failures.is_empty() && !latencies.is_empty(),
        format!(
            "health did not always answer beside the slow readers: {:?}",
            failures.iter().take(3).collect::<Vec<_>>()
        ),
    );
    let p99 = percentile(&mut latencies, 99.0);
    if !ctx.quick {
        report.check(
            rss_peak < 200 * 1024,
            format!("with slow readers the server's RSS peaked at {rss_peak} KiB (bound 200 MiB)"),
        );
        report.check(
            rss_after < 2 * rss_idle,
            format!(
                "{} s after the slow readers left the server's RSS is {rss_after} KiB, not under twice the idle {rss_idle} KiB",
                sizes.settle.as_secs()
            ),
        );
        report.check(
            p99 < 100.0,
            format!("health p99 {p99} ms beside the slow readers (must be < 100 ms)"),
        );
    }
    let bytes: Vec<u64> = outcomes.iter().map(|o| o.bytes).collect();
    // A slow reader rarely reads as far as its `resync_required` (megabytes of the stream
    // wait before it in the kernel's buffers): the server's log counts what it told.
    let log = std::fs::read_to_string(home.with_extension("log")).unwrap_or_default();
    report.figure("slow_shed_logged", log.matches("fell behind; it must resync").count());
    report.figure("slow_readers", sizes.readers);
    report.figure("slow_stream_bytes", sizes.messages as u64 * sizes.chunks * 1024);
    report.figure("slow_stream_s", harness::round2(stream_s));
    report.figure("slow_told_resync", outcomes.iter().filter(|o| o.resyncs > 0).count());
    report.figure("slow_resyncs", outcomes.iter().map(|o| o.resyncs).sum::<usize>());
    report.figure("slow_cut", outcomes.iter().filter(|o| o.cut).count());
    report.figure("slow_saw_turn_end", outcomes.iter().filter(|o| o.completed).count());
    report.figure("slow_read_bytes_max", bytes.iter().copied().max().unwrap_or(0));
    report.figure("slow_health_probes", latencies.len());
    report.figure("slow_health_p50_ms", percentile(&mut latencies, 50.0));
    report.figure("slow_health_p99_ms", p99);
    report.figure("slow_rss_idle_kib", rss_idle);
    report.figure("slow_rss_peak_kib", rss_peak);
    report.figure("slow_rss_when_left_kib", rss_left);
    report.figure("slow_rss_after_kib", rss_after);
    report.notes.push(format!(
        "slow-reader phase: {} subscribers read at {} KiB/s each (a subscriber told to resync subscribes again from now) while the agent streams {} messages of {} KiB; they leave {} s after the stream ends, and the RSS is read {} s later",
        sizes.readers,
        SLOW_RATE as u64 / 1024,
        sizes.messages,
        sizes.chunks,
        sizes.linger.as_secs_f64(),
        sizes.settle.as_secs()
    ));
    Ok(())
}

/// More half-open connections than the server has file descriptors: every health probe on
/// a new connection must still be answered, and the accept loop must have met EMFILE.
async fn accept_under_emfile(ctx: &Ctx, report: &mut Report) -> Result<()> {
    let home = ctx.home("r8-emfile")?;
    let server =
        harness::start_nofile(&ctx.kandev, &home, &["--max-connections", "1000"], EMFILE_NOFILE)?;
    let addr: std::net::SocketAddr = server.url.trim_start_matches("http://").parse()?;
    let mut flood = vec![];
    for _ in 0..EMFILE_FLOOD {
        flood.push(TcpStream::connect(addr).await?);
    }
    let mut latencies = vec![];
    let mut failures = vec![];
    for _ in 0..20 {
        match health(&server.url).await {
            Ok(took) => latencies.push(ms(took)),
            Err(e) => failures.push(e),
        }
    }
    let log = std::fs::read_to_string(home.with_extension("log")).unwrap_or_default();
    let emfile = log.matches("cannot accept a connection").count();
    report.check(failures.is_empty(), format!("health under EMFILE: {failures:?}"));
    report.check(emfile > 0, "the EMFILE phase never made accept fail (nothing was tested)");
    report.figure("emfile_health_p99_ms", percentile(&mut latencies, 99.0));
    report.figure("emfile_accept_failures_logged", emfile);
    drop(flood);
    Ok(())
}

/// How many half-open connections the server has closed by now (read gives EOF or an error).
fn half_open_closed(streams: &mut [TcpStream]) -> usize {
    let mut closed = 0;
    for stream in streams.iter_mut() {
        let mut buf = [0u8; 1024];
        match stream.try_read(&mut buf) {
            Ok(_) => closed += 1, // EOF (0) or a refusal answer: the server is done with it
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => closed += 1,
        }
    }
    closed
}
