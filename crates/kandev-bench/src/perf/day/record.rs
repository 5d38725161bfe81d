//! P9's recorder: one task owns every counter and turns what the load, the clients and the
//! health probe report into one timeline row per tick (memory, health, throughput), and
//! times the restart. The health probe is its own task on its own connection.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::MissedTickBehavior;

use crate::harness::{self, ms, percentile, round2};

/// What one request of the load is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Kind {
    Create,
    Move,
    Search,
    Prompt,
    /// A client's board load (`task.list`).
    Board,
}

/// How a request ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Outcome {
    Answered,
    /// Answered with an error status.
    Refused,
    /// No answer.
    Lost,
}

pub(super) enum Event {
    Action(Kind, Outcome),
    /// A notification told to a client, with the bytes of agent text it carried.
    Told {
        agent_bytes: u64,
    },
    /// A client's connection went up (+1) or down (-1).
    Connected(i64),
    /// A health probe: its latency in ms, or why it failed.
    Health(Result<f64, String>),
    /// A prompt was answered for this session; its turn is under way.
    Prompted(String),
    /// A client was told that this session's turn completed.
    TurnCompleted(String),
    /// The server is killed now.
    Killed(Instant),
    /// The server runs again as this process.
    Restarted(u32),
    /// When was a client last told something?
    LastTold(oneshot::Sender<Option<Instant>>),
    /// How many sessions have a turn under way (answered, its completion not told yet)?
    TurnsUnderWay(oneshot::Sender<usize>),
}

/// One row of the timeline: the tick's figures (rates are per second over the tick).
#[derive(Clone, Debug)]
pub(super) struct Row {
    pub elapsed_s: f64,
    pub server_rss_kib: u64,
    pub runner_rss_kib: u64,
    pub health_p50_ms: f64,
    pub health_p99_ms: f64,
    pub health_probes: usize,
    pub health_failures: usize,
    pub creates_per_s: f64,
    pub moves_per_s: f64,
    pub searches_per_s: f64,
    pub prompts_per_s: f64,
    pub notifications_per_s: f64,
    pub agent_chunks_per_s: f64,
    pub errors_per_s: f64,
    pub clients_connected: i64,
}

pub(super) struct Setup {
    pub started: Instant,
    pub tick: Duration,
    pub server_pid: u32,
    /// The local runner's socket path, which its command line names.
    pub runner_socket: String,
}

/// What the recorder kept.
pub(super) struct Recording {
    pub rows: Vec<Row>,
    pub server_rss_peak: u64,
    pub runner_rss_peak: u64,
    /// Sessions whose turn was under way at the kill.
    pub in_flight_at_kill: usize,
    /// Kill → every turn under way at the kill told completed (`None`: not all were).
    pub turns_done_ms: Option<f64>,
}

/// The tick's counters.
#[derive(Default)]
struct Window {
    answered: HashMap<Kind, u64>,
    errors: u64,
    told: u64,
    agent_bytes: u64,
    health: Vec<f64>,
    health_failures: usize,
}

/// Runs until `stop`; owns every counter (the only task that does).
pub(super) async fn record(
    mut events: mpsc::UnboundedReceiver<Event>,
    mut stop: watch::Receiver<bool>,
    setup: Setup,
) -> Recording {
    let mut tick = tokio::time::interval_at((setup.started + setup.tick).into(), setup.tick);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut sample = tokio::time::interval(Duration::from_secs(1));
    let mut server_pid = setup.server_pid;
    let mut recording = Recording {
        rows: vec![],
        server_rss_peak: 0,
        runner_rss_peak: 0,
        in_flight_at_kill: 0,
        turns_done_ms: None,
    };
    let mut window = Window::default();
    let mut window_start = setup.started;
    let mut connected = 0i64;
    let mut last_told: Option<Instant> = None;
    // Per session, prompts answered minus turns told completed.
    let mut busy: HashMap<String, i64> = HashMap::new();
    let mut in_flight: Option<(Instant, HashSet<String>)> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            event = events.recv() => {
                let Some(event) = event else { break };
                match event {
                    Event::Action(kind, Outcome::Answered) => {
                        *window.answered.entry(kind).or_default() += 1;
                    }
                    Event::Action(_, _) => window.errors += 1,
                    Event::Told { agent_bytes } => {
                        window.told += 1;
                        window.agent_bytes += agent_bytes;
                        last_told = Some(Instant::now());
                    }
                    Event::Connected(delta) => connected += delta,
                    Event::Health(Ok(latency)) => window.health.push(latency),
                    Event::Health(Err(_)) => window.health_failures += 1,
                    Event::Prompted(session) => *busy.entry(session).or_default() += 1,
                    Event::TurnCompleted(session) => {
                        *busy.entry(session.clone()).or_default() -= 1;
                        if let Some((killed, waiting)) = &mut in_flight
                            && waiting.remove(&session)
                            && waiting.is_empty()
                        {
                            recording.turns_done_ms = Some(ms(killed.elapsed()));
                        }
                    }
                    Event::Killed(at) => {
                        let waiting: HashSet<String> =
                            busy.iter().filter(|(_, n)| **n > 0).map(|(s, _)| s.clone()).collect();
                        recording.in_flight_at_kill = waiting.len();
                        if waiting.is_empty() {
                            recording.turns_done_ms = Some(0.0);
                        }
                        in_flight = Some((at, waiting));
                    }
                    Event::Restarted(pid) => server_pid = pid,
                    Event::LastTold(answer) => {
                        let _ = answer.send(last_told);
                    }
                    Event::TurnsUnderWay(answer) => {
                        let _ = answer.send(busy.values().filter(|n| **n > 0).count());
                    }
                }
            }
            _ = sample.tick() => {
                recording.server_rss_peak =
                    recording.server_rss_peak.max(harness::rss_kib(server_pid));
            }
            _ = tick.tick() => {
                let now = Instant::now();
                let span = (now - window_start).as_secs_f64().max(1e-3);
                let runner_rss_kib: u64 = harness::processes_with(&setup.runner_socket)
                    .into_iter()
                    .map(harness::rss_kib)
                    .sum();
                let server_rss_kib = harness::rss_kib(server_pid);
                recording.server_rss_peak = recording.server_rss_peak.max(server_rss_kib);
                recording.runner_rss_peak = recording.runner_rss_peak.max(runner_rss_kib);
                let rate = |n: u64| round2(n as f64 / span);
                let answered = |kind| rate(window.answered.get(&kind).copied().unwrap_or(0));
                recording.rows.push(Row {
                    elapsed_s: round2((now - setup.started).as_secs_f64()),
                    server_rss_kib,
                    runner_rss_kib,
                    health_p50_ms: percentile(&mut window.health, 50.0),
                    health_p99_ms: percentile(&mut window.health, 99.0),
                    health_probes: window.health.len() + window.health_failures,
                    health_failures: window.health_failures,
                    creates_per_s: answered(Kind::Create),
                    moves_per_s: answered(Kind::Move),
                    searches_per_s: answered(Kind::Search),
                    prompts_per_s: answered(Kind::Prompt),
                    notifications_per_s: rate(window.told),
                    agent_chunks_per_s: round2(
                        window.agent_bytes as f64 / super::CHUNK_BYTES as f64 / span,
                    ),
                    errors_per_s: rate(window.errors),
                    clients_connected: connected,
                });
                window = Window::default();
                window_start = now;
            }
        }
    }
    recording
}

/// Waits until some session has a turn under way (true), or `within` passed (false).
pub(super) async fn wait_turns_under_way(
    events: &mpsc::UnboundedSender<Event>,
    within: Duration,
) -> bool {
    let pause = Duration::from_millis(20);
    ask_until(events, Event::TurnsUnderWay, |n| *n > 0, pause, within).await
}

/// Waits until no client was told anything for `quiet` (true), or `within` passed (false).
pub(super) async fn wait_quiet(
    events: &mpsc::UnboundedSender<Event>,
    quiet: Duration,
    within: Duration,
) -> bool {
    let is_quiet = |last: &Option<Instant>| last.is_none_or(|l| l.elapsed() >= quiet);
    ask_until(events, Event::LastTold, is_quiet, quiet / 4, within).await
}

/// Asks the recorder (`ask`) every `pause` until `done` holds of its answer (true), or
/// `within` passed or the recorder is gone (false).
async fn ask_until<T>(
    events: &mpsc::UnboundedSender<Event>,
    ask: impl Fn(oneshot::Sender<T>) -> Event,
    done: impl Fn(&T) -> bool,
    pause: Duration,
    within: Duration,
) -> bool {
    let started = Instant::now();
    while started.elapsed() < within {
        let (answer, asked) = oneshot::channel();
        if events.send(ask(answer)).is_err() {
            return false;
        }
        match asked.await {
            Ok(answer) if done(&answer) => return true,
            Ok(_) => tokio::time::sleep(pause).await,
            Err(_) => return false,
        }
    }
    false
}

/// Every health probe of the run: when it started, when it ended, and its latency in ms or
/// why it failed.
pub(super) struct Health {
    pub samples: Vec<(Instant, Instant, Result<f64, String>)>,
}

/// The probes split at the restart: the window holds every probe that ended after the kill
/// and started before the first probe answered after it ended.
pub(super) struct RestartSplit {
    pub latencies_outside: Vec<f64>,
    pub failures_outside: Vec<String>,
    pub window_failures: usize,
    pub window_ms: Option<f64>,
}

impl Health {
    pub(super) fn split(&self, killed: Instant) -> RestartSplit {
        let healthy = self
            .samples
            .iter()
            .find(|(start, _, result)| *start >= killed && result.is_ok())
            .map(|(_, end, _)| *end);
        let mut split = RestartSplit {
            latencies_outside: vec![],
            failures_outside: vec![],
            window_failures: 0,
            window_ms: healthy.map(|h| ms(h - killed)),
        };
        for (start, end, result) in &self.samples {
            let inside = *end >= killed && healthy.is_none_or(|h| *start < h);
            match (inside, result) {
                (true, Ok(_)) => {}
                (true, Err(_)) => split.window_failures += 1,
                (false, Ok(latency)) => split.latencies_outside.push(*latency),
                (false, Err(why)) => split.failures_outside.push(why.clone()),
            }
        }
        split
    }
}

/// `GET /api/v1/health` every 100 ms on its own connection (kept alive; a new one after the
/// restart), until `stop`.
pub(super) async fn probe(
    url: String,
    events: mpsc::UnboundedSender<Event>,
    mut stop: watch::Receiver<bool>,
) -> Health {
    let mut health = Health { samples: vec![] };
    let Ok(client) = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(5))
        .build()
    else {
        return health;
    };
    let mut every = tokio::time::interval(Duration::from_millis(100));
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = every.tick() => {}
        }
        let start = Instant::now();
        let result = match client.get(format!("{url}/api/v1/health")).send().await {
            Ok(r) if r.status().is_success() => match r.bytes().await {
                Ok(_) => Ok(ms(start.elapsed())),
                Err(e) => Err(format!("health body: {e}")),
            },
            Ok(r) => Err(format!("health answered {}", r.status())),
            Err(e) => Err(format!("health failed: {e}")),
        };
        let _ = events.send(Event::Health(result.clone()));
        health.samples.push((start, Instant::now(), result));
    }
    health
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_restart_window_runs_from_the_kill_to_the_first_answer_after_it() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let killed = at(1_000);
        let failed = || Err("health failed".to_owned());
        let health = Health {
            samples: vec![
                (at(800), at(805), Ok(5.0)),
                // In flight when the server was killed: the restart's, not a failure outside.
                (at(998), at(1_001), failed()),
                (at(1_100), at(1_101), failed()),
                (at(1_200), at(1_230), Ok(30.0)),
                (at(1_300), at(1_302), Ok(2.0)),
                (at(1_400), at(1_401), failed()),
            ],
        };
        let split = health.split(killed);
        assert_eq!(split.window_failures, 2);
        assert_eq!(split.window_ms, Some(230.0));
        assert_eq!(split.latencies_outside, vec![5.0, 2.0]);
        assert_eq!(split.failures_outside, vec!["health failed".to_owned()]);
    }
}
