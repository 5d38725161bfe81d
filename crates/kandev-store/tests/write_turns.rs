//! Issue 15: the group writer of streamed text and the other writers take turns at the
//! store's one write gate (`Store::begin_stream_write`): a streamed group waits behind at
//! most one other transaction, and each other writer behind at most one group, where the
//! gate's first-come order held text behind every writer queued before it.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

use std::time::Duration;

use kandev_store::Store;
use tokio::sync::{mpsc, oneshot};

const WAIT: Duration = Duration::from_secs(10);

/// Lets every spawned task run until it waits (the test's runtime has one thread).
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// A writer that says its name once its transaction is open and commits when released.
fn writer(
    store: &Store,
    name: &'static str,
    stream: bool,
    opened: &mpsc::UnboundedSender<&'static str>,
) -> oneshot::Sender<()> {
    let (release, released) = oneshot::channel();
    let (store, opened) = (store.clone(), opened.clone());
    tokio::spawn(async move {
        let tx = if stream { store.begin_stream_write().await } else { store.begin_write().await };
        let tx = tx.unwrap();
        opened.send(name).unwrap();
        let _ = released.await;
        tx.commit().await.unwrap();
    });
    release
}

async fn next(opened: &mut mpsc::UnboundedReceiver<&'static str>) -> &'static str {
    tokio::time::timeout(WAIT, opened.recv()).await.expect("a writer's turn").unwrap()
}

#[tokio::test]
async fn i15_the_stream_writer_and_the_other_writers_take_turns_at_the_gate() {
    let store = Store::in_memory().await.unwrap();
    let (opened_tx, mut opened) = mpsc::unbounded_channel();
    let writing = store.begin_write().await.unwrap();
    let first = writer(&store, "first", false, &opened_tx);
    settle().await;
    let second = writer(&store, "second", false, &opened_tx);
    settle().await;
    let group = writer(&store, "group", true, &opened_tx);
    settle().await;
    assert!(opened.try_recv().is_err(), "nobody writes while a transaction is open");

    writing.commit().await.unwrap();
    assert_eq!(next(&mut opened).await, "group", "before the writers queued before it");
    settle().await;
    let next_group = writer(&store, "next group", true, &opened_tx);
    settle().await;
    group.send(()).unwrap();
    assert_eq!(next(&mut opened).await, "first", "the one writer between two groups");
    first.send(()).unwrap();
    assert_eq!(next(&mut opened).await, "next group", "before the second writer");
    next_group.send(()).unwrap();
    assert_eq!(next(&mut opened).await, "second");
    second.send(()).unwrap();
}
