//! P9's load: task creations, moves and searches at fixed rates, and prompts to the live
//! agents in bursts. Every generator goes on across the restart: a request without an answer
//! is retried (a move or a prompt, which are idempotent: the same step, the same
//! `client_message_id`) or given up (a creation: never counted as told). A task belongs to
//! one mover, so its moves never race and its last answered move is its final step.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::MissedTickBehavior;

use super::record::{Event, Kind, Outcome};
use super::{Answer, Api, Board, COOLDOWN, Owned, Rng, SCRIPT};
use crate::Report;

pub(super) struct Plan {
    pub api: Api,
    pub boards: Vec<Board>,
    pub sessions: Vec<String>,
    pub creates_per_s: f64,
    pub moves_per_s: f64,
    pub searches_per_s: f64,
    pub burst_every: Duration,
    pub burst: usize,
    pub seed: u64,
    pub events: mpsc::UnboundedSender<Event>,
    pub stop: watch::Receiver<bool>,
}

/// What the load was told.
#[derive(Default)]
pub(super) struct Done {
    /// Every task whose creation was answered → its step after its last answered move.
    pub steps: HashMap<String, String>,
    /// Tasks whose last move was never answered (the run ended first): step unknown.
    pub uncertain: usize,
    pub creates: usize,
    pub moves: usize,
    pub searches: usize,
    /// Searches for an existing task that did not find it.
    pub search_misses: Vec<String>,
    /// Per session, the `client_message_id`s of its answered prompts.
    pub prompts: HashMap<String, Vec<String>>,
    /// Answers that were errors (the first few) and how many.
    pub refused: Vec<String>,
    pub refused_count: usize,
    pub lost: usize,
}

impl Done {
    fn merge(&mut self, other: Done) {
        self.steps.extend(other.steps);
        self.uncertain += other.uncertain;
        self.creates += other.creates;
        self.moves += other.moves;
        self.searches += other.searches;
        self.search_misses.extend(other.search_misses);
        for (session, ids) in other.prompts {
            self.prompts.entry(session).or_default().extend(ids);
        }
        self.refused.extend(other.refused);
        self.refused.truncate(5);
        self.refused_count += other.refused_count;
        self.lost += other.lost;
    }

    fn refused(&mut self, action: &str, status: u16, body: &Value) {
        self.refused_count += 1;
        if self.refused.len() < 5 {
            self.refused.push(format!("{action} answered {status}: {body}"));
        }
    }

    pub(super) fn figures(&self, report: &mut Report) {
        report.check(
            self.refused_count == 0,
            format!("{} requests answered with an error: {:?}", self.refused_count, self.refused),
        );
        report.check(
            self.search_misses.is_empty(),
            format!(
                "{} searches did not find their task: {:?}",
                self.search_misses.len(),
                &self.search_misses[..self.search_misses.len().min(3)]
            ),
        );
        report.figure("tasks_created", self.creates);
        report.figure("moves_answered", self.moves);
        report.figure("searches", self.searches);
        report.figure("prompts_answered", self.prompts.values().map(Vec::len).sum::<usize>());
        report.figure("tasks_last_move_unanswered", self.uncertain);
        report.figure("requests_lost", self.lost);
        report.figure("requests_refused", self.refused_count);
    }
}

/// A request sent until it is answered; `None` when `stop` came while it had none (for
/// `persist`, only after 30 s more of trying: a move's or prompt's answer matters).
async fn until_answered(
    shared: &Shared,
    kind: Kind,
    action: &str,
    payload: &Value,
    persist: bool,
    lost: &mut usize,
) -> Option<Answer> {
    let mut backoff = Duration::from_millis(50);
    let mut stopped: Option<Instant> = None;
    loop {
        let answer = shared.api.call(action, payload.clone()).await;
        let outcome = match &answer {
            Answer::Ok(_) => Outcome::Answered,
            Answer::Refused(..) => Outcome::Refused,
            Answer::Lost => Outcome::Lost,
        };
        let _ = shared.events.send(Event::Action(kind, outcome));
        if !matches!(answer, Answer::Lost) {
            return Some(answer);
        }
        *lost += 1;
        if *shared.stop.borrow() {
            let since = *stopped.get_or_insert_with(Instant::now);
            if !persist || since.elapsed() > Duration::from_secs(30) {
                return None;
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// What each generator shares.
#[derive(Clone)]
struct Shared {
    api: Api,
    events: mpsc::UnboundedSender<Event>,
    stop: watch::Receiver<bool>,
}

/// A paced loop: one tick every `per_s`-th of a second until `stop`; a tick that comes late
/// is not made up for.
fn pacer(per_s: f64) -> tokio::time::Interval {
    let mut every = tokio::time::interval(Duration::from_secs_f64(1.0 / per_s));
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    every
}

/// A task a mover owns: its board and the step it was last answered to be in.
struct Card {
    id: String,
    board: usize,
    step: String,
}

/// Runs every generator until `stop`; what they were told.
pub(super) async fn run(plan: Plan) -> Done {
    let ctx =
        Shared { api: plan.api.clone(), events: plan.events.clone(), stop: plan.stop.clone() };
    let mut rng = Rng(plan.seed);
    // Movers: about 10 moves a second each; creators: 5 creations a second each.
    let movers = (plan.moves_per_s / 10.0).ceil().max(1.0) as usize;
    let creators = (plan.creates_per_s / 5.0).ceil().max(1.0) as usize;
    let (mut to_movers, mut mover_tasks) = (vec![], vec![]);
    for m in 0..movers {
        let (tx, rx) = mpsc::unbounded_channel();
        to_movers.push(tx);
        let boards = plan.boards.clone();
        let per_s = plan.moves_per_s / movers as f64;
        mover_tasks.push(Owned::spawn(mover(
            ctx.clone(),
            boards,
            rx,
            per_s,
            rng.next() + m as u64,
        )));
    }
    let (to_searcher, searcher_rx) = mpsc::unbounded_channel();
    let searcher =
        Owned::spawn(searcher(ctx.clone(), searcher_rx, plan.searches_per_s, rng.next()));
    let mut creator_tasks = vec![];
    for c in 0..creators {
        let ctx = ctx.clone();
        let (boards, to_movers, to_searcher) =
            (plan.boards.clone(), to_movers.clone(), to_searcher.clone());
        let per_s = plan.creates_per_s / creators as f64;
        creator_tasks.push(Owned::spawn(async move {
            let mut done = Done::default();
            let mut every = pacer(per_s);
            let mut stop = ctx.stop.clone();
            let mut k = 0usize;
            loop {
                tokio::select! {
                    _ = stop.changed() => break,
                    _ = every.tick() => {}
                }
                let n = c + k * creators;
                k += 1;
                let board = n % boards.len();
                let payload = json!({"workflow_id": boards[board].id, "title": format!("p9 task {n}"),
                                     "description": format!("day task number {n}")});
                let mut lost = 0;
                match until_answered(&ctx, Kind::Create, "task.create", &payload, false, &mut lost)
                    .await
                {
                    Some(Answer::Ok(body)) => {
                        let (Some(id), Some(step)) =
                            (body["task"]["id"].as_str(), body["task"]["step_id"].as_str())
                        else {
                            done.refused("task.create", 200, &body);
                            continue;
                        };
                        done.creates += 1;
                        let owned = Card { id: id.to_owned(), board, step: step.to_owned() };
                        let _ = to_searcher.send((id.to_owned(), n, Instant::now()));
                        let _ = to_movers[n % to_movers.len()].send(owned);
                    }
                    Some(Answer::Refused(status, body)) => done.refused("task.create", status, &body),
                    Some(Answer::Lost) | None => {}
                }
                done.lost += lost;
            }
            done
        }));
    }
    drop((to_movers, to_searcher));
    let prompter = Owned::spawn(prompter(
        ctx.clone(),
        plan.sessions,
        plan.burst_every,
        plan.burst,
        rng.next(),
    ));
    let mut done = Done::default();
    // Creators first: the movers take every answered task before they end.
    for task in creator_tasks.into_iter().chain(mover_tasks).chain([searcher, prompter]) {
        match task.join().await {
            Ok(part) => done.merge(part),
            Err(err) => done.refused("a generator", 0, &json!(err.to_string())),
        }
    }
    done
}

/// Moves the tasks it owns at `per_s`, one at a time, each to another step of its board.
async fn mover(
    ctx: Shared,
    boards: Vec<Board>,
    mut new: mpsc::UnboundedReceiver<Card>,
    per_s: f64,
    seed: u64,
) -> Done {
    let mut done = Done::default();
    let mut rng = Rng(seed);
    let mut owned: Vec<Card> = vec![];
    let mut every = pacer(per_s);
    let mut stop = ctx.stop.clone();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = every.tick() => {}
        }
        while let Ok(task) = new.try_recv() {
            owned.push(task);
        }
        if owned.is_empty() {
            continue;
        }
        let i = rng.below(owned.len());
        let steps = &boards[owned[i].board].steps;
        let others: Vec<&String> = steps.iter().filter(|s| **s != owned[i].step).collect();
        let to = others[rng.below(others.len())].clone();
        let payload = json!({"id": owned[i].id, "step_id": to});
        match until_answered(&ctx, Kind::Move, "task.move", &payload, true, &mut done.lost).await {
            Some(Answer::Ok(_)) => {
                done.moves += 1;
                owned[i].step = to;
            }
            Some(Answer::Refused(status, body)) => done.refused("task.move", status, &body),
            Some(Answer::Lost) | None => {
                // Moved or not: its step is unknown, so it is left out of the check.
                done.uncertain += 1;
                owned.swap_remove(i);
            }
        }
    }
    // The creators are done (or end soon): take every task they were answered for.
    while let Some(task) = new.recv().await {
        owned.push(task);
    }
    done.steps = owned.into_iter().map(|t| (t.id, t.step)).collect();
    done
}

/// Searches at `per_s` for a task created at least a second ago, by the number in its
/// description; the task must be among the hits.
async fn searcher(
    ctx: Shared,
    mut new: mpsc::UnboundedReceiver<(String, usize, Instant)>,
    per_s: f64,
    seed: u64,
) -> Done {
    let mut done = Done::default();
    let mut rng = Rng(seed);
    let mut created: Vec<(String, usize, Instant)> = vec![];
    let workspace = match ctx.api.call("workspace.list", json!({})).await {
        Answer::Ok(body) => body["workspaces"][0]["id"].clone(),
        _ => Value::Null,
    };
    let mut every = pacer(per_s);
    let mut stop = ctx.stop.clone();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = every.tick() => {}
        }
        while let Ok(task) = new.try_recv() {
            created.push(task);
        }
        let old = created.partition_point(|(_, _, at)| at.elapsed() > Duration::from_secs(1));
        if old == 0 {
            continue;
        }
        let (id, n, _) = &created[rng.below(old)];
        let payload = json!({"workspace_id": workspace, "query": format!("\"day task number {n}\""),
                             "kinds": ["task"], "limit": 5});
        match ctx.api.call("search", payload).await {
            Answer::Ok(body) => {
                let _ = ctx.events.send(Event::Action(Kind::Search, Outcome::Answered));
                done.searches += 1;
                let hits = body["hits"].as_array().cloned().unwrap_or_default();
                if !hits.iter().any(|h| h["task_id"] == id.as_str()) {
                    done.search_misses.push(format!("task {n} ({id}): {} hits", hits.len()));
                }
            }
            Answer::Refused(status, body) => {
                let _ = ctx.events.send(Event::Action(Kind::Search, Outcome::Refused));
                done.refused("search", status, &body);
            }
            Answer::Lost => {
                let _ = ctx.events.send(Event::Action(Kind::Search, Outcome::Lost));
                done.lost += 1;
            }
        }
    }
    done
}

/// Every `every`, prompts `burst` sessions not prompted within [`COOLDOWN`] with the
/// streaming script, all at once; each prompt is sent until answered, with one
/// `client_message_id`, so a retry never makes a second turn.
async fn prompter(
    ctx: Shared,
    sessions: Vec<String>,
    every: Duration,
    burst: usize,
    seed: u64,
) -> Done {
    let mut done = Done::default();
    let mut rng = Rng(seed);
    let mut last: Vec<Option<Instant>> = vec![None; sessions.len()];
    let mut pace = tokio::time::interval(every);
    pace.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut stop = ctx.stop.clone();
    let mut k = 0usize;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = pace.tick() => {}
        }
        let mut idle: Vec<usize> = (0..sessions.len())
            .filter(|i| last[*i].is_none_or(|t| t.elapsed() > COOLDOWN))
            .collect();
        let mut chosen = vec![];
        while chosen.len() < burst && !idle.is_empty() {
            chosen.push(idle.swap_remove(rng.below(idle.len())));
        }
        let sends = chosen.iter().map(|&i| {
            k += 1;
            let id = format!("p9-{i}-{k}");
            let payload =
                json!({"session_id": sessions[i], "content": SCRIPT, "client_message_id": id});
            let ctx = &ctx;
            async move {
                let mut lost = 0;
                let answer =
                    until_answered(ctx, Kind::Prompt, "message.add", &payload, true, &mut lost)
                        .await;
                (i, id, answer, lost)
            }
        });
        for (i, id, answer, lost) in futures::future::join_all(sends.collect::<Vec<_>>()).await {
            done.lost += lost;
            last[i] = Some(Instant::now());
            match answer {
                Some(Answer::Ok(_)) => {
                    let _ = ctx.events.send(Event::Prompted(sessions[i].clone()));
                    done.prompts.entry(sessions[i].clone()).or_default().push(id);
                }
                Some(Answer::Refused(status, body)) => done.refused("message.add", status, &body),
                Some(Answer::Lost) | None => {}
            }
        }
    }
    done
}
