//! Lifecycle rule 47: the event log is bounded. Pruning keeps the newest rows, by age and by
//! count, in short batches that never hold writers back, and the store says which `since`
//! can no longer be replayed.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use kandev_domain::{Clock, IdGenerator, Timestamp};
use kandev_store::{PRUNE_BATCH, Retention, Store};

mod common;
use common::TestDb;
use serde_json::json;

const DAY_MS: i64 = 24 * 3600 * 1000;

/// A clock the test moves by hand.
#[derive(Default)]
struct StepClock(AtomicI64);

impl Clock for StepClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

struct Counter(AtomicI64);

impl IdGenerator for Counter {
    fn next_id(&self) -> String {
        format!("id-{}", self.0.fetch_add(1, Ordering::SeqCst))
    }
}

async fn open(db: &TestDb, clock: Arc<StepClock>) -> Store {
    db.open_with(clock, Arc::new(Counter(AtomicI64::new(0)))).await
}

/// Writes `n` events of `topic` in one transaction; returns their seqs.
async fn emit(store: &Store, topic: &str, n: usize) -> Vec<i64> {
    let mut tx = store.begin_write().await.unwrap();
    let mut seqs = vec![];
    for i in 0..n {
        seqs.push(tx.emit(topic, "test.event", json!({"i": i})).await.unwrap());
    }
    tx.commit().await.unwrap();
    seqs
}

async fn stored(store: &Store, topic: &str) -> Vec<i64> {
    let events = store.events_since(&[topic.to_owned()], &HashMap::new(), 1_000_000).await.unwrap();
    events.iter().map(|e| e.seq).collect()
}

on_both_engines! {
async fn l47_pruning_keeps_the_newest_rows_by_age_and_by_count(db: TestDb) {
    let clock = Arc::new(StepClock::default());
    let store = open(&db, clock.clone()).await;
    let week = Retention { max_age: Duration::from_secs(7 * 24 * 3600), max_rows: 1_000_000 };

    let old = emit(&store, "session:a", 1200).await; // day 0
    clock.0.store(5 * DAY_MS, Ordering::SeqCst);
    let recent = emit(&store, "session:b", 300).await; // day 5
    clock.0.store(8 * DAY_MS, Ordering::SeqCst);

    // Day 8: everything from day 0 is older than a week; day 5 stays.
    let pruned = store.prune_events(week).await.unwrap();
    assert_eq!(pruned.rows, 1200);
    assert!(pruned.batches >= 1200 / PRUNE_BATCH as u64, "small batches: {pruned:?}");
    assert_eq!(pruned.through_seq, *old.last().unwrap());
    assert!(stored(&store, "session:a").await.is_empty());
    assert_eq!(stored(&store, "session:b").await, recent);

    // By count: only the newest 100 rows stay.
    let pruned = store.prune_events(Retention { max_rows: 100, ..week }).await.unwrap();
    assert_eq!(pruned.rows, 200);
    assert_eq!(stored(&store, "session:b").await, recent[200..].to_vec());

    // Pruning everything keeps the numbering: the next event continues after the last one.
    clock.0.store(30 * DAY_MS, Ordering::SeqCst);
    store.prune_events(week).await.unwrap();
    assert!(stored(&store, "session:b").await.is_empty());
    let last = *recent.last().unwrap();
    assert_eq!(store.last_seq().await.unwrap(), last);
    assert_eq!(store.oldest_seq("session:b").await.unwrap(), last + 1);
    assert_eq!(emit(&store, "session:b", 1).await, vec![last + 1]);
    assert_eq!(store.prune_events(week).await.unwrap().rows, 0, "nothing due: nothing done");
}
}

on_both_engines! {
async fn l47_a_since_the_log_no_longer_holds_is_reported_with_the_oldest_seq(db: TestDb) {
    let clock = Arc::new(StepClock::default());
    let store = open(&db, clock.clone()).await;
    let a_old = emit(&store, "session:a", 10).await;
    let b_old = emit(&store, "session:b", 10).await;
    clock.0.store(10 * DAY_MS, Ordering::SeqCst);
    let a_new = emit(&store, "session:a", 5).await;
    let quiet = store.last_seq().await.unwrap(); // session:c has no event at all
    store.prune_events(Retention::default()).await.unwrap();

    let since = HashMap::from([
        ("session:a".to_owned(), a_old[3]), // its later events were pruned
        ("session:b".to_owned(), b_old[3]), // likewise, and it has none left
        ("session:c".to_owned(), 0),        // older than the log: a gap is possible
        ("workspaces".to_owned(), *b_old.last().unwrap()), // exactly where pruning stopped
    ]);
    let gaps = store.unreplayable(&since).await.unwrap();
    assert_eq!(gaps.get("session:a"), Some(&a_new[0]), "oldest retained event of the topic");
    assert_eq!(gaps.get("session:b"), Some(&(quiet + 1)), "none retained: the next seq");
    assert_eq!(gaps.get("session:c"), Some(&(quiet + 1)));
    assert!(!gaps.contains_key("workspaces"), "nothing after it was pruned");
    // Resuming from just before the oldest retained event replays without a gap.
    let resume = HashMap::from([("session:a".to_owned(), a_new[0] - 1)]);
    assert!(store.unreplayable(&resume).await.unwrap().is_empty());
}
}

on_both_engines! {
async fn l47_pruning_does_not_block_writers(db: TestDb) {
    let clock = Arc::new(StepClock::default());
    let store = open(&db, clock.clone()).await;
    for _ in 0..20 {
        emit(&store, "session:old", 1000).await;
    }
    clock.0.store(30 * DAY_MS, Ordering::SeqCst);

    let pruner = {
        let store = store.clone();
        tokio::spawn(async move { store.prune_events(Retention::default()).await.unwrap() })
    };
    // A writer keeps writing while the pass runs; each write waits at most one batch.
    let mut during = 0;
    let mut slowest = Duration::ZERO;
    while !pruner.is_finished() {
        let started = std::time::Instant::now();
        emit(&store, "session:new", 1).await;
        slowest = slowest.max(started.elapsed());
        during += 1;
    }
    let pruned = pruner.await.unwrap();
    assert_eq!(pruned.rows, 20_000);
    assert!(pruned.batches >= 40, "{pruned:?}");
    assert!(during >= 10, "writers got in between the batches: {during} writes during the pass");
    assert!(slowest < Duration::from_secs(1), "the slowest write waited {slowest:?}");
    assert_eq!(stored(&store, "session:new").await.len(), during);
}
}

on_both_engines! {
async fn i15_a4_pruning_the_event_log_leaves_kept_board_answers_valid(db: TestDb) {
    // A pass over a log past its bound is hundreds of batches; each made every kept
    // `task.list` answer stale (the cards version moved) though no card changed.
    let clock = Arc::new(StepClock::default());
    let store = open(&db, clock.clone()).await;
    emit(&store, "session:a", 1200).await;
    let before = store.cards_version();
    let week = Retention { max_age: Duration::from_secs(7 * 24 * 3600), max_rows: 100 };
    let pruned = store.prune_events(week).await.unwrap();
    assert_eq!(pruned.rows, 1100);
    assert_eq!(store.cards_version(), before, "pruning events changes no card");
}
}
