//! P9, "a team's day, compressed" (issue 53): minutes of mixed load on one server with the
//! local runner — browser-like WebSocket clients that reconnect, live agents streaming in
//! bursts, task creations and moves, searches — and a `kill -9` and restart in the middle.
//! Nothing a client was told may be missing at the end; health, memory and throughput are
//! recorded over time as a CSV and an SVG plot. `load.rs` drives the writes, `clients.rs`
//! the subscribers, `record.rs` the timeline and the health probe, `checks.rs` the checks
//! after the run, `plot.rs` the files.

mod checks;
mod clients;
mod load;
mod plot;
mod record;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::shared::live_sessions;
use crate::harness::{self, Server, agents_of, ms, percentile, round2, str_of};
use crate::{Ctx, Report};

/// Each burst turn's script: 40 stamped chunks of 100 bytes, one every 25 ms (a second of
/// output), so every stored turn can be checked chunk by chunk.
const CHUNKS: u64 = 40;
const CHUNK_BYTES: usize = 100;
const SCRIPT: &str = "#!mock\nstream 40 100 stamp every 25";
/// A session is prompted again at the earliest this long after its last prompt (its turn
/// takes about a second), so prompts are not queued behind each other.
const COOLDOWN: Duration = Duration::from_secs(4);

/// The full run's length; shorter runs (`--minutes`) do not check that RSS is flat.
const FULL: Duration = Duration::from_secs(30 * 60);

/// The sizes of one run.
struct Sizes {
    duration: Duration,
    restart_at: Duration,
    /// One timeline row per `tick` (a multiple of `burst_every`, so the rows do not
    /// alternate between ticks with a burst and ticks without).
    tick: Duration,
    clients: usize,
    agents: usize,
    boards: usize,
    creates_per_s: f64,
    moves_per_s: f64,
    searches_per_s: f64,
    /// Every `burst_every`, `burst` idle sessions are prompted at once.
    burst_every: Duration,
    burst: usize,
    /// A client reconnects by itself about this often (on average); `None`: once, at a
    /// random time.
    reconnect_every: Option<Duration>,
}

impl Sizes {
    fn new(quick: bool, minutes: Option<u64>) -> Sizes {
        if quick && minutes.is_none() {
            return Sizes {
                duration: Duration::from_secs(40),
                // At 20.5 s, once a burst's turns are under way: the kill lands mid-turn.
                restart_at: Duration::from_millis(20_500),
                tick: Duration::from_secs(2),
                clients: 5,
                agents: 10,
                boards: 2,
                creates_per_s: 2.0,
                moves_per_s: 4.0,
                searches_per_s: 1.0,
                burst_every: Duration::from_secs(2),
                burst: 3,
                reconnect_every: None,
            };
        }
        let duration = minutes.map_or(FULL, |m| Duration::from_secs(m * 60));
        Sizes {
            duration,
            restart_at: duration / 2 + Duration::from_millis(500),
            tick: Duration::from_secs((duration.as_secs() / 180).clamp(2, 10) / 2 * 2),
            clients: 50,
            agents: 200,
            boards: 10,
            creates_per_s: 10.0,
            moves_per_s: 30.0,
            searches_per_s: 2.0,
            burst_every: Duration::from_secs(2),
            burst: 20,
            reconnect_every: Some(Duration::from_secs(180)),
        }
    }

    /// The stretch at the end over which server RSS must be flat: the last 10 minutes, or the
    /// last third of a shorter run.
    fn rss_window(&self) -> Duration {
        (self.duration / 3).min(Duration::from_secs(600))
    }
}

/// A board the load works on: its workflow and its steps.
#[derive(Clone)]
struct Board {
    id: String,
    steps: Vec<String>,
}

/// HTTP calls that survive the server's restart: a call either has an answer or is lost
/// (no answer came: the server was down, or the connection broke).
#[derive(Clone)]
struct Api {
    http: reqwest::Client,
    url: String,
}

enum Answer {
    Ok(Value),
    /// An answer that is not `200`: its status and body.
    Refused(u16, Value),
    /// No answer (connection refused or broken, timeout): not told.
    Lost,
}

impl Api {
    fn new(url: &str) -> Result<Api> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Api { http, url: url.to_owned() })
    }

    async fn call(&self, action: &str, payload: Value) -> Answer {
        let sent = self.http.post(format!("{}/api/v1/{action}", self.url)).json(&payload).send();
        let Ok(response) = sent.await else { return Answer::Lost };
        let status = response.status().as_u16();
        let Ok(bytes) = response.bytes().await else { return Answer::Lost };
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status == 200 { Answer::Ok(body) } else { Answer::Refused(status, body) }
    }
}

/// A small deterministic random source (SplitMix64), seeded per run; the seed is in the
/// report's params.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A spawned task that is aborted when dropped before it is joined: a run that fails
/// half-way leaves no client, generator or probe running behind it.
struct Owned<T>(Option<tokio::task::JoinHandle<T>>);

impl<T: Send + 'static> Owned<T> {
    fn spawn(task: impl Future<Output = T> + Send + 'static) -> Owned<T> {
        Owned(Some(tokio::spawn(task)))
    }

    async fn join(mut self) -> Result<T> {
        match self.0.take() {
            Some(handle) => Ok(handle.await?),
            None => bail!("a task joined twice"),
        }
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.abort();
        }
    }
}

/// Sends SIGTERM to the server and waits for it to end.
fn stop_gracefully(server: &mut Server) -> Result<()> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(server.pid())?),
        nix::sys::signal::Signal::SIGTERM,
    )?;
    server.child.wait()?;
    Ok(())
}

/// Starts the server without blocking the runtime's threads (the harness waits for its
/// announce line synchronously).
async fn start(kandev: &Path, home: &Path, args: Vec<String>) -> Result<Server> {
    let (kandev, home) = (kandev.to_owned(), home.to_owned());
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        harness::start(&kandev, &home, &args)
    })
    .await?
}

/// P9 (issue 53): a team's day, compressed. See docs/performance.md for what it does and
/// checks. `minutes` overrides the full run's 30 minutes (a medium run); `out` is where the
/// CSV and the SVG go (default: the bench's temp dir).
pub async fn p9(ctx: &Ctx, minutes: Option<u64>, out: Option<&Path>) -> Result<Report> {
    let sizes = Sizes::new(ctx.quick, minutes);
    let seed = super::shared::unix_micros();
    let mut report = Report::new(
        "P9",
        json!({"duration_s": sizes.duration.as_secs(), "restart_at_s": sizes.restart_at.as_secs_f64(),
               "ws_clients": sizes.clients, "agents": sizes.agents, "boards": sizes.boards,
               "creates_per_s": sizes.creates_per_s, "moves_per_s": sizes.moves_per_s,
               "searches_per_s": sizes.searches_per_s, "burst_sessions": sizes.burst,
               "burst_every_s": sizes.burst_every.as_secs_f64(), "turn_script": SCRIPT,
               "timeline_tick_s": sizes.tick.as_secs(), "database": ctx.engine(), "seed": seed}),
    );
    let home = ctx.home("p9")?;
    let mut args: Vec<String> =
        ["--runner", "local", "--runner-grace", "60s"].map(str::to_owned).to_vec();
    args.extend(ctx.database_args().into_iter().map(str::to_owned));
    let mut server = start(&ctx.kandev, &home, args.clone()).await?;
    let addr = server.url.trim_start_matches("http://").to_owned();
    args.extend(["--addr".to_owned(), addr]);

    // The boards the load works on, and one board for the agents' tasks (never moved).
    let workspaces = server.call("workspace.list", json!({})).await?;
    let workspace = str_of(&workspaces["workspaces"][0]["id"])?;
    let mut boards = vec![];
    for b in 0..sizes.boards {
        let made = server
            .call("workflow.create", json!({"workspace_id": workspace, "name": format!("P9 {b}")}))
            .await?;
        let steps = made["workflow"]["steps"]
            .as_array()
            .context("a workflow without steps")?
            .iter()
            .map(|s| str_of(&s["id"]))
            .collect::<Result<Vec<_>>>()?;
        if steps.len() < 2 {
            bail!("board {b} has {} steps; moves need two", steps.len());
        }
        boards.push(Board { id: str_of(&made["workflow"]["id"])?, steps });
    }
    let (agents_board, _) = server.board("P9 agents").await?;
    let boot = Instant::now();
    let sessions = live_sessions(&server, &agents_board, sizes.agents).await?;
    report.figure("boot_all_agents_s", round2(boot.elapsed().as_secs_f64()));
    let up = agents_of(&home).len();
    report.check(up == sizes.agents, format!("{up} of {} agents are up", sizes.agents));

    // The recorder and the health probe run from now to the end.
    let started = Instant::now();
    let (events, events_rx) = mpsc::unbounded_channel();
    let (stop_record, stop_record_rx) = watch::channel(false);
    let recorder = Owned::spawn(record::record(
        events_rx,
        stop_record_rx.clone(),
        record::Setup {
            started,
            tick: sizes.tick,
            server_pid: server.pid(),
            runner_socket: home.join("runner.sock").display().to_string(),
        },
    ));
    let prober = Owned::spawn(record::probe(server.url.clone(), events.clone(), stop_record_rx));

    // The clients connect and subscribe before any load, so they are told all of it.
    let mut rng = Rng(seed);
    let (stop_clients, stop_clients_rx) = watch::channel(false);
    let (ready, mut ready_rx) = mpsc::unbounded_channel();
    let mut client_tasks = vec![];
    let per_client = sessions.len().div_ceil(sizes.clients);
    for c in 0..sizes.clients {
        let plan = clients::Plan {
            ws_url: format!("{}/ws", server.url.replace("http", "ws")),
            api: Api::new(&server.url)?,
            board: boards[c % boards.len()].id.clone(),
            workspace_topic: format!("workspace:{workspace}"),
            sessions: sessions.iter().skip(c * per_client).take(per_client).cloned().collect(),
            reconnects: reconnect_plan(&sizes, &mut rng),
            started,
        };
        client_tasks.push(Owned::spawn(clients::run(
            plan,
            events.clone(),
            stop_clients_rx.clone(),
            ready.clone(),
        )));
    }
    for _ in 0..sizes.clients {
        tokio::time::timeout(Duration::from_secs(60), ready_rx.recv())
            .await
            .context("a client did not subscribe within 60 s")?;
    }

    let (stop_load, stop_load_rx) = watch::channel(false);
    let load = Owned::spawn(load::run(load::Plan {
        api: Api::new(&server.url)?,
        boards: boards.clone(),
        sessions: sessions.clone(),
        creates_per_s: sizes.creates_per_s,
        moves_per_s: sizes.moves_per_s,
        searches_per_s: sizes.searches_per_s,
        burst_every: sizes.burst_every,
        burst: sizes.burst,
        seed: rng.next(),
        events: events.clone(),
        stop: stop_load_rx,
    }));

    // The restart in the middle: an operator's crash-restart (kill -9, start again on the
    // same home and address); the runner keeps the agents and the server takes them over.
    tokio::time::sleep_until((started + sizes.restart_at).into()).await;
    // Mid-stream: the bursts run on the load's own clock, so wait for one (a turn lasts about
    // a second of every `burst_every`).
    let streaming = record::wait_turns_under_way(&events, sizes.burst_every * 3).await;
    report.check(streaming, "no turn was under way at the kill: the restart was not mid-stream");
    let killed = Instant::now();
    let _ = events.send(record::Event::Killed(killed));
    server.kill9()?;
    let kept = agents_of(&home).len();
    report.check(
        kept == sizes.agents,
        format!("the runner kept {kept} of {} agents across the kill", sizes.agents),
    );
    let mut server = start(&ctx.kandev, &home, args).await?;
    let announce_ms = ms(killed.elapsed());
    // The restarted server takes the runner's agents over before it listens.
    let log = std::fs::read_to_string(home.with_extension("log")).unwrap_or_default();
    let readopted = log.matches("re-adopted the agent of the last run").count();
    report.check(
        readopted == sizes.agents,
        format!("the restarted server re-adopted {readopted} of {} agents", sizes.agents),
    );
    let _ = events.send(record::Event::Restarted(server.pid()));

    tokio::time::sleep_until((started + sizes.duration).into()).await;
    let load_s = started.elapsed().as_secs_f64();
    stop_load.send_replace(true);
    let done = load.join().await?;
    // Every turn ends, then the clients read what is left before they stop.
    let idle = wait_all_idle(&server, &sessions, Duration::from_secs(120)).await;
    report.check(idle.is_ok(), format!("the sessions did not all end idle: {idle:?}"));
    let quiet = record::wait_quiet(&events, Duration::from_secs(1), Duration::from_secs(20)).await;
    report.check(quiet, "the clients were still told things 20 s after the load stopped");
    stop_clients.send_replace(true);
    let mut told = vec![];
    for task in client_tasks {
        told.push(task.join().await?);
    }
    stop_record.send_replace(true);
    let health = prober.join().await?;
    let recording = recorder.join().await?;
    let server_rss_end = server.rss_kib();

    let checked = checks::run(
        &server,
        &checks::Expected {
            boards: &boards,
            agents_board: &agents_board,
            sessions: &sessions,
            load: &done,
        },
        &told,
        &mut report,
    )
    .await?;
    let calls =
        std::fs::read_to_string(home.join("mock-agent").join("calls.log")).unwrap_or_default();
    let loads = calls.lines().filter(|l| l.contains("\"session/load\"")).count();
    report.check(loads == 0, format!("{loads} session/load calls (the runner kept the agents)"));

    // No orphan: a graceful stop ends the agents, and the runner with nothing left.
    stop_gracefully(&mut server)?;
    let left = harness::wait_no_agents(&home, Duration::from_secs(30)).await;
    report.check(left.is_empty(), format!("orphan agents {left:?} after a graceful stop"));
    let socket = home.join("runner.sock");
    let stopped = Instant::now();
    while socket.exists() && stopped.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    report.check(!socket.exists(), "the runner did not end after the graceful stop");

    // Figures: the run, the restart, health, memory, the files.
    report.figure("duration_s", round2(load_s));
    checked.figures(&mut report);
    done.figures(&mut report);
    clients::figures(&told, &mut report);
    let restart = health.split(killed);
    report.check(
        restart.failures_outside.is_empty(),
        format!(
            "{} health probes failed outside the restart: {:?}",
            restart.failures_outside.len(),
            restart.failures_outside.iter().take(3).collect::<Vec<_>>()
        ),
    );
    let mut outside = restart.latencies_outside.clone();
    let health_p99 = percentile(&mut outside, 99.0);
    report.figure("health_probes", health.samples.len());
    report.figure("health_p50_ms", percentile(&mut outside, 50.0));
    report.figure("health_p99_ms", health_p99);
    report.figure("health_max_ms", percentile(&mut outside, 100.0));
    report.figure("health_p99_target_met", health_p99 < 50.0);
    report.figure("health_failures_outside_restart", restart.failures_outside.len());
    report.figure("restart_window_failures", restart.window_failures);
    report.figure("restart_window_ms", restart.window_ms);
    report.figure("restart_kill_to_announce_ms", announce_ms);
    report.figure("restart_kill_to_healthy_ms", restart.window_ms);
    report.figure("agents_kept_at_kill", kept);
    report.figure("agents_readopted", readopted);
    report.figure("turns_in_flight_at_kill", recording.in_flight_at_kill);
    report.figure("restart_kill_to_turns_done_ms", recording.turns_done_ms);
    report.figure("session_loads", loads);
    report.figure("orphan_agents", left.len());

    // The timeline is the load's: the rows of the wind-down after it are left out.
    let rows: Vec<record::Row> = recording
        .rows
        .iter()
        .filter(|r| r.elapsed_s <= load_s + sizes.tick.as_secs_f64() / 2.0)
        .cloned()
        .collect();
    let rows = &rows;
    let window = sizes.rss_window().as_secs_f64();
    let (growth, mean) = plot::rss_growth(rows, load_s - window);
    let bound = (mean * 0.05).max(8.0 * 1024.0);
    let flat = growth < bound;
    report.figure("server_rss_start_kib", rows.first().map_or(0, |r| r.server_rss_kib));
    report.figure("server_rss_peak_kib", recording.server_rss_peak);
    report.figure("server_rss_end_kib", server_rss_end);
    report.figure("runner_rss_peak_kib", recording.runner_rss_peak);
    report.figure("rss_window_s", window.round());
    report.figure("rss_growth_last_10min_kib", growth.round());
    report.figure("rss_growth_bound_kib", bound.round());
    report.figure("rss_flat", flat);
    let dir = out.map_or_else(|| ctx.tmp.path().to_path_buf(), Path::to_path_buf);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let csv = dir.join(format!("p9-{}.csv", ctx.engine()));
    let svg: PathBuf = dir.join(format!("p9-{}.svg", ctx.engine()));
    plot::write_csv(&csv, rows)?;
    let title = format!(
        "P9 on {}: {} min, {} clients, {} agents, kill -9 and restart at {:.1} s",
        ctx.engine(),
        round2(sizes.duration.as_secs_f64() / 60.0),
        sizes.clients,
        sizes.agents,
        sizes.restart_at.as_secs_f64()
    );
    plot::write_svg(&svg, rows, &title, sizes.restart_at.as_secs_f64())?;
    report.figure("csv", csv.display().to_string());
    report.figure("plot", svg.display().to_string());
    if ctx.quick {
        report.notes.push(
            "quick: correctness only; health and RSS are reported, not checked at this size".into(),
        );
    } else if sizes.duration < FULL {
        report.notes.push(format!(
            "a run of {} min: RSS flatness is reported, checked only at the full {} min (a shorter run's last third begins soon after the restart, while the new server warms up)",
            sizes.duration.as_secs() / 60,
            FULL.as_secs() / 60
        ));
    } else {
        report.check(
            flat,
            format!(
                "server RSS grew {growth:.0} KiB over the last {window:.0} s (bound {bound:.0} KiB)"
            ),
        );
    }
    if out.is_none() {
        report.notes.push(
            "the CSV and the plot are in the bench's temp dir, removed at the end unless KANDEV_BENCH_KEEP=1 (or give --out DIR)".into(),
        );
    }
    Ok(report)
}

/// When each client reconnects by itself, as offsets from the start: every
/// `reconnect_every` on average, or once at a random time.
fn reconnect_plan(sizes: &Sizes, rng: &mut Rng) -> Vec<Duration> {
    match sizes.reconnect_every {
        None => vec![sizes.duration.mul_f64(0.15 + 0.7 * rng.unit())],
        Some(every) => {
            let mut at = Duration::ZERO;
            let mut plan = vec![];
            loop {
                at += every.mul_f64(0.5 + rng.unit());
                if at >= sizes.duration {
                    return plan;
                }
                plan.push(at);
            }
        }
    }
}

/// Waits until every session reads `WAITING_FOR_INPUT` twice in a row, 200 ms apart (a
/// queued prompt would have started in between).
async fn wait_all_idle(server: &Server, sessions: &[String], within: Duration) -> Result<()> {
    let started = Instant::now();
    let mut idle_before = false;
    loop {
        let mut busy = vec![];
        for s in sessions {
            let state = server.session(s).await?["state"].clone();
            if state != "WAITING_FOR_INPUT" {
                busy.push(format!("{s} {state}"));
            }
        }
        if busy.is_empty() && idle_before {
            return Ok(());
        }
        idle_before = busy.is_empty();
        if started.elapsed() > within {
            bail!("{} not idle after {within:?}: {:?}", busy.len(), &busy[..busy.len().min(3)]);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
