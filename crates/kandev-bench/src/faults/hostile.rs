//! R4: hostile input over HTTP and WebSocket, then YAML bombs: only structured 4xx errors,
//! the server alive and its memory bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::SinkExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::harness::{self, Server, ms, next_json, str_of};
use crate::{Ctx, Report};

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
