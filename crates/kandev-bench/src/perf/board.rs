//! P3 and P4: a board of many tasks and messages (`task.list`, `message.list` and `search`
//! latency), then the server's start on that database (start to healthy, idle RSS).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::future::try_join_all;
use serde_json::{Value, json};

use super::shared::{live_sessions, read_turn};
use crate::harness::{self, Server, ms, percentile, subscribe};
use crate::{Ctx, Report};

/// P3's database, kept for P4.
pub struct Board {
    pub home: PathBuf,
    pub tasks: usize,
    pub messages: usize,
}

pub async fn p3(ctx: &Ctx, board: &mut Option<Board>) -> Result<Report> {
    let (tasks_n, workflows_n, messages_goal): (usize, usize, usize) =
        if ctx.quick { (2_000, 2, 20_000) } else { (20_000, 10, 1_000_000) };
    let mut report = Report::new(
        "P3",
        json!({"tasks": tasks_n, "workflows": workflows_n, "messages": messages_goal, "database": ctx.engine()}),
    );
    let home = ctx.home("p3")?;
    let server = harness::start(&ctx.kandev, &home, &ctx.database_args())?;
    let mut workflows = vec![];
    for w in 0..workflows_n {
        workflows.push(server.board(&format!("board {w}")).await?.0);
    }
    let per_board = tasks_n / workflows_n;
    let started = Instant::now();
    let ids: Vec<usize> = (0..tasks_n).collect();
    for batch in ids.chunks(64) {
        try_join_all(batch.iter().map(|i| {
            let wf = &workflows[i / per_board];
            server.call(
                "task.create",
                json!({"workflow_id": wf, "title": format!("task {i}"), "description": format!("board task number {i}")}),
            )
        }))
        .await?;
    }
    let create_s = started.elapsed().as_secs_f64();
    report.figure("task_create_per_s", (tasks_n as f64 / create_s).round());

    // Messages: one turn per session alternating `say` and `think`, so every directive is
    // its own message row (chunks of one kind in a row would join one row).
    let per_turn = 5_000usize;
    let turns = messages_goal.div_ceil(per_turn);
    let mut script = String::from("#!mock\n");
    for i in 0..per_turn / 2 {
        script.push_str(&format!("say answer {i}\nthink thought {i}\n"));
    }
    let msg_started = Instant::now();
    let sessions = live_sessions(&server, &workflows[0], turns.min(20)).await?;
    let mut probes = vec![];
    for round in 0..turns.div_ceil(sessions.len()) {
        let batch: Vec<&String> = sessions.iter().take(turns - round * sessions.len()).collect();
        for s in &batch {
            let mut ws = server.ws().await?;
            subscribe(&mut ws, &[format!("session:{s}")]).await?;
            server.call("message.add", json!({"session_id": s, "content": script})).await?;
            probes.push(ws);
        }
        // Read every subscriber at once: a client left unread for seconds while its queue is
        // full is told `resync_required` and no longer gets the topic (docs/api.md).
        try_join_all(probes.iter_mut().map(|ws| read_turn(ws, Duration::from_secs(600)))).await?;
        probes.clear();
    }
    let mut stored = 0;
    for s in &sessions {
        stored += server.messages(s).await?.len();
    }
    let msg_s = msg_started.elapsed().as_secs_f64();
    report.figure("messages_stored", stored);
    report.figure("messages_per_s", (stored as f64 / msg_s).round());
    report.check(
        stored >= messages_goal,
        format!("{stored} messages stored, wanted {messages_goal}"),
    );

    // task.list of a full board (2,000 tasks per board in both sizes when tasks/workflows
    // gives it; quick: 1,000 per board).
    let list = |wf: String| {
        let server = &server;
        async move {
            let (took, got) =
                server.call_timed("task.list", json!({"workflow_id": wf, "limit": 5000})).await?;
            Ok::<_, anyhow::Error>((ms(took), got["tasks"].as_array().map_or(0, Vec::len)))
        }
    };
    let mut sample = vec![];
    for i in 0..50 {
        let (t, count) = list(workflows[i % workflows.len()].clone()).await?;
        let want = per_board + if i % workflows.len() == 0 { sessions.len() } else { 0 };
        report.check(count == want, format!("task.list returned {count}, wanted {want}"));
        sample.push(t);
    }
    report.figure("board_size", per_board);
    report.figure("task_list_p50_ms", percentile(&mut sample, 50.0));
    report.figure("task_list_p99_ms", percentile(&mut sample, 99.0));
    let mut sample = vec![];
    for i in 0..100 {
        let s = &sessions[i % sessions.len()];
        let after = (i * 37 % (per_turn - 200)) as i64;
        let (took, page) = server
            .call_timed("message.list", json!({"session_id": s, "limit": 200, "after_seq": after}))
            .await?;
        sample.push(ms(took));
        let count = page["messages"].as_array().map_or(0, Vec::len);
        report.check(count == 200, format!("message.list page had {count}"));
    }
    report.figure("message_list_200_p50_ms", percentile(&mut sample, 50.0));
    report.figure("message_list_200_p99_ms", percentile(&mut sample, 99.0));
    search_figures(&server, &mut report, tasks_n, per_turn).await?;
    report.notes.push(format!(
        "messages are made by turns of {per_turn} alternating say/think directives (one row each), {} sessions streaming at once",
        sessions.len()
    ));
    drop(server);
    *board = Some(Board { home, tasks: tasks_n, messages: stored });
    Ok(report)
}

/// `search` over the P3 board: words of one task (title), of a few messages (a `thought`
/// number appears once per turn) and a word in half of all messages (`answer`), each query
/// checked to find what it must.
async fn search_figures(
    server: &Server,
    report: &mut Report,
    tasks_n: usize,
    per_turn: usize,
) -> Result<()> {
    let workspaces = server.call("workspace.list", json!({})).await?;
    let ws = workspaces["workspaces"][0]["id"].clone();
    let search = |query: String, kinds: Value| {
        let ws = ws.clone();
        async move {
            let (took, got) = server
                .call_timed(
                    "search",
                    json!({"workspace_id": ws, "query": query, "kinds": kinds, "limit": 20}),
                )
                .await?;
            Ok::<_, anyhow::Error>((ms(took), got["hits"].as_array().cloned().unwrap_or_default()))
        }
    };
    let mut selective = vec![];
    let mut common = vec![];
    for i in 0..100 {
        let task = i * 7919 % tasks_n;
        let (t, hits) = search(format!("\"board task number {task}\""), json!(["task"])).await?;
        report.check(
            hits.iter().any(|h| h["task_title"] == format!("task {task}")),
            format!("search for task {task} did not find it"),
        );
        selective.push(t);
        let thought = i * 31 % (per_turn / 2);
        let (t, hits) = search(format!("\"thought {thought}\""), json!(["message"])).await?;
        report.check(!hits.is_empty(), format!("search for thought {thought} found nothing"));
        selective.push(t);
        if i % 5 == 0 {
            let (t, hits) = search("answer".into(), Value::Null).await?;
            report.check(hits.len() == 20, format!("search for answer found {}", hits.len()));
            common.push(t);
        }
    }
    report.figure("search_selective_p50_ms", percentile(&mut selective, 50.0));
    report.figure("search_selective_p99_ms", percentile(&mut selective, 99.0));
    report.figure("search_common_word_p50_ms", percentile(&mut common, 50.0));
    report.figure("search_common_word_p99_ms", percentile(&mut common, 99.0));
    report.notes.push("search: 200 selective queries (a task's number in its description, a thought number in ~1 message per turn) and 20 of a word in half of all messages, 20 hits each".into());
    Ok(())
}

pub async fn p4(ctx: &Ctx, board: &mut Option<Board>) -> Result<Report> {
    if board.is_none() {
        let mut inner = None;
        let made = p3(ctx, &mut inner).await?;
        // P4 alone still shows the figures of the database it starts on.
        println!("{}", made.line());
        if !made.failures.is_empty() {
            bail!("building the P3 database failed: {:?}", made.failures);
        }
        *board = inner;
    }
    let board = board.as_ref().context("no board")?;
    let mut report =
        Report::new("P4", json!({"tasks": board.tasks, "messages": board.messages, "runs": 5}));
    let mut healthy = vec![];
    let mut rss = vec![];
    for _ in 0..5 {
        let started = Instant::now();
        let server = harness::start(&ctx.kandev, &board.home, &[])?;
        loop {
            let ok = server
                .http
                .get(format!("{}/api/v1/health", server.url))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("not healthy in 30 s");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        healthy.push(ms(started.elapsed()));
        tokio::time::sleep(Duration::from_millis(500)).await;
        rss.push(server.rss_kib() as f64);
    }
    report.figure("start_to_healthy_median_ms", percentile(&mut healthy, 50.0));
    report.figure("start_to_healthy_max_ms", percentile(&mut healthy, 100.0));
    report.figure("idle_rss_median_kib", percentile(&mut rss, 50.0));
    Ok(report)
}
