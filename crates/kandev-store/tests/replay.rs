//! Issue 21, acceptance 3: with concurrent writers, every subscriber sees the global event
//! `seq` gap-free and in commit order, and a replay from the log gives the same sequence;
//! on PostgreSQL as on SQLite. Rolled-back writes (a whole transaction, or one member of a
//! group commit) leave no gap.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kandev_store::{Event, Store};
use tokio::sync::broadcast;

mod common;

const WRITERS: usize = 6;
const WRITES: usize = 15;

/// One writer's work: single events, batches, a rolled-back transaction and a rolled-back
/// group member, interleaved with the other writers.
async fn write(store: Store, writer: usize) -> usize {
    let topic = format!("writer:{writer}");
    let mut emitted = 0;
    for i in 0..WRITES {
        let mut tx = store.begin_write().await.unwrap();
        match i % 4 {
            0 => {
                tx.emit(topic.clone(), "one", serde_json::json!({ "i": i })).await.unwrap();
                emitted += 1;
            }
            1 => {
                let batch = (0..3)
                    .map(|j| {
                        (topic.clone(), "batch".to_owned(), serde_json::json!({ "j": j }).into())
                    })
                    .collect();
                tx.emit_batch(batch).await.unwrap();
                emitted += 3;
            }
            2 => {
                // A member that fails is undone; the one before it stays.
                tx.emit(topic.clone(), "kept", serde_json::json!({})).await.unwrap();
                let member = tx.savepoint().await.unwrap();
                tx.emit(topic.clone(), "undone", serde_json::json!({})).await.unwrap();
                tx.rollback_to(member).await.unwrap();
                emitted += 1;
            }
            _ => {
                // Dropped without commit: rolled back.
                tx.emit(topic.clone(), "lost", serde_json::json!({})).await.unwrap();
                drop(tx);
                tokio::task::yield_now().await;
                continue;
            }
        }
        tx.commit().await.unwrap();
        tokio::task::yield_now().await;
    }
    emitted
}

async fn collect(mut events: broadcast::Receiver<Arc<Event>>, total: usize) -> Vec<Arc<Event>> {
    let mut seen = Vec::with_capacity(total);
    while seen.len() < total {
        let event = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("the events arrive")
            .expect("no subscriber lags at this volume");
        seen.push(event);
    }
    seen
}

on_both_engines! {
async fn i21_a3_concurrent_writers_publish_a_gap_free_seq_in_commit_order(db: TestDb) {
    let store = db.open().await;
    let start = store.last_seq().await.unwrap();
    let subscribers: Vec<_> = (0..3).map(|_| store.subscribe()).collect();
    let writers: Vec<_> =
        (0..WRITERS).map(|w| tokio::spawn(write(store.clone(), w))).collect();
    let mut total = 0;
    for writer in writers {
        total += writer.await.unwrap();
    }
    assert_eq!(total, WRITERS * (WRITES / 4 * 5 + 5), "the workload is as planned");
    let expected: Vec<i64> = (start + 1..=start + total as i64).collect();
    let mut seen_by_all = vec![];
    for subscriber in subscribers {
        let seen = collect(subscriber, total).await;
        let seqs: Vec<i64> = seen.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, expected, "every subscriber sees 1, 2, 3, ... with no gap");
        assert!(seen.iter().all(|e| e.action != "undone" && e.action != "lost"));
        seen_by_all.push(seen);
    }
    assert!(seen_by_all.windows(2).all(|w| w[0] == w[1]), "all subscribers see the same");
    // Within a writer, its events come in the order it committed them.
    for w in 0..WRITERS {
        let topic = format!("writer:{w}");
        let actions: Vec<&str> = seen_by_all[0]
            .iter()
            .filter(|e| e.topic == topic)
            .map(|e| e.action.as_str())
            .collect();
        assert_eq!(&actions[..5], ["one", "batch", "batch", "batch", "kept"], "{topic}");
    }
    // A replay from the log is the same sequence.
    let topics: Vec<String> = (0..WRITERS).map(|w| format!("writer:{w}")).collect();
    let replay = store.events_since(&topics, &HashMap::new(), 10_000).await.unwrap();
    let live: Vec<Event> = seen_by_all[0].iter().map(|e| Event::clone(e)).collect();
    assert_eq!(replay, live);
    assert_eq!(store.last_seq().await.unwrap(), start + total as i64);
}
}
