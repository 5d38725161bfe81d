//! Issue 12 finding 1: a full disk costs the failing write and nothing else. SQLite's
//! `max_page_count` plays the full disk; the database is a real file, reopened to check
//! what survived.

use kandev_domain::WorkspaceId;
use kandev_store::{Location, Store, StoreError, WriteState};

async fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(Location::File(dir.path().join("kandev.db"))).await.unwrap()
}

/// A name too big to fit in the pages left.
fn big(label: &str) -> String {
    format!("{label} {}", "x".repeat(64 * 1024))
}

/// Writes a workspace in its own transaction; `Ok` means the commit succeeded.
async fn create(store: &Store, name: &str) -> Result<WorkspaceId, StoreError> {
    let mut tx = store.begin_write().await?;
    let workspace = tx.insert_workspace(name).await?;
    tx.commit().await?;
    Ok(workspace.id)
}

async fn names(store: &Store) -> Vec<String> {
    store.list_workspaces().await.unwrap().into_iter().map(|w| w.name).collect()
}

/// The sequence of the probe: a write fails on a full disk (SQLite rolls its transaction
/// back by itself), space returns, an ordinary transaction is rolled back (a validation
/// error), and then writes commit. Before the fix the rollback left the connection inside
/// a transaction that was never committed again: later commits answered `Ok`, readers saw
/// nothing, and a restart lost it all.
#[tokio::test]
async fn i12_f1_a_full_disk_does_not_poison_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    create(&store, "before").await.unwrap();
    let pages = store.page_count().await.unwrap();
    store.set_max_page_count(Some(pages)).await.unwrap();

    let err = create(&store, &big("too big")).await.unwrap_err();
    let path = dir.path().join("kandev.db").display().to_string();
    assert!(matches!(&err, StoreError::DiskFull { path: p } if *p == path), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("the disk holding {path} is full: free some space; nothing was saved")
    );
    assert!(
        matches!(store.write_state(), WriteState::Failing { reason } if reason == err.to_string()),
        "the store reports failing writes"
    );

    store.set_max_page_count(None).await.unwrap();
    {
        let mut tx = store.begin_write().await.unwrap();
        tx.insert_workspace("rolled back").await.unwrap();
        // Dropped without commit, as a handler does on a validation error.
    }
    let mut acknowledged = vec![];
    for i in 0..3 {
        let id = create(&store, &format!("after {i}")).await.unwrap();
        let seen = store.get_workspace(&id).await;
        assert!(seen.is_ok(), "a committed write is visible to readers: {seen:?}");
        acknowledged.push(id);
    }
    assert_eq!(store.write_state(), WriteState::Ok, "a commit clears the failure");
    assert_eq!(names(&store).await, vec!["before", "after 0", "after 1", "after 2"]);

    store.close().await;
    let store = open(&dir).await;
    assert_eq!(names(&store).await, vec!["before", "after 0", "after 1", "after 2"]);
}

/// A transaction that hit a full disk is over: a caller that ignores the error and goes on
/// must not get its later statements committed one by one outside any transaction.
#[tokio::test]
async fn i12_f1_a_transaction_that_hit_a_full_disk_writes_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let pages = store.page_count().await.unwrap();
    store.set_max_page_count(Some(pages)).await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    let err = tx.insert_workspace(&big("too big")).await.unwrap_err();
    assert!(matches!(err, StoreError::DiskFull { .. }), "{err:?}");
    // Room for a small row is left: only the transaction's state can refuse it.
    let next = tx.insert_workspace("after the error").await;
    assert!(next.is_err(), "a broken transaction refuses further statements");
    assert!(tx.commit().await.is_err(), "a broken transaction cannot commit");
    assert!(names(&store).await.is_empty(), "nothing was written");
    store.close().await;
    assert!(names(&open(&dir).await).await.is_empty(), "nothing survives a restart either");
}

/// Every write that answered `Ok` while the disk filled and emptied is there after a
/// restart, and every failure was a `DiskFull`.
#[tokio::test]
async fn i12_f1_every_acknowledged_write_survives_filling_and_freeing_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let pages = store.page_count().await.unwrap();
    store.set_max_page_count(Some(pages + 4)).await.unwrap();
    let mut acknowledged = vec![];
    let mut failures = 0;
    for i in 0..60 {
        if i == 40 {
            store.set_max_page_count(None).await.unwrap();
        }
        // Growing names fill the pages left; every third transaction is abandoned.
        let name = format!("w{i} {}", "y".repeat(600 * (i % 7)));
        if i % 3 == 2 {
            if let Ok(mut tx) = store.begin_write().await {
                let _ = tx.insert_workspace(&name).await;
            }
            continue;
        }
        match create(&store, &name).await {
            Ok(_) => acknowledged.push(format!("w{i}")),
            Err(StoreError::DiskFull { .. }) => failures += 1,
            Err(other) => panic!("write {i} failed with {other:?}"),
        }
    }
    assert!(failures > 0, "the disk filled up");
    assert!(acknowledged.len() > 20, "writes went on: {}", acknowledged.len());
    acknowledged.sort();
    // Compared by label ("w12"), sorted, to keep a failure readable.
    let sorted = |names: Vec<String>| {
        let mut labels: Vec<String> =
            names.iter().map(|n| n.split(' ').next().unwrap_or_default().to_owned()).collect();
        labels.sort();
        labels
    };
    assert_eq!(sorted(names(&store).await), acknowledged);
    store.close().await;
    assert_eq!(sorted(names(&open(&dir).await).await), acknowledged);
}

/// Issue 15: the writer no longer stops to checkpoint every 1,000 pages of log (that stall
/// held every streamed write behind it: the tail of P1's write -> receive latency);
/// `Store::checkpoint`, which the server runs beside the writer, copies the log into the
/// database file, and what was written is all there after a reopen.
#[tokio::test]
async fn i15_the_writer_leaves_checkpoints_to_the_checkpointer() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    for i in 0..80 {
        create(&store, &big(&format!("w{i}"))).await.unwrap(); // ~17 pages each
    }
    let done = store.checkpoint().await.unwrap().expect("a database file has a checkpointer");
    assert!(done.wal_frames > 1_000, "the writer checkpointed by itself: {done:?}");
    assert_eq!(done.backfilled, done.wal_frames, "no reader held a snapshot: all copied");
    store.close().await;

    let store = open(&dir).await;
    assert_eq!(names(&store).await.len(), 80);
    assert_eq!(Store::in_memory().await.unwrap().checkpoint().await.unwrap(), None);
}

/// Issue 15: while writes go on, the server's checkpoint copies the
/// log but never finishes it, so the log grows through a burst; the writer must not take
/// over at 8,192 pages (32 MiB) as it did (one commit of P1's flood then took 50–70 ms).
/// Once the burst is over a checkpoint finishes, and the next commit rewinds the log and
/// cuts its file back to 64 MiB.
#[tokio::test]
async fn i15_a_burst_of_more_than_32_mib_of_log_is_left_to_the_checkpointer() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let mib = "x".repeat(1024 * 1024);
    for i in 0..72 {
        create(&store, &format!("w{i} {mib}")).await.unwrap(); // ~260 pages each
    }
    let done = store.checkpoint().await.unwrap().expect("a database file has a checkpointer");
    assert!(done.wal_frames > 16_384, "the writer checkpointed by itself: {done:?}");
    assert_eq!(done.backfilled, done.wal_frames, "no reader held a snapshot: all copied");

    let wal = dir.path().join("kandev.db-wal");
    let size = || std::fs::metadata(&wal).unwrap().len();
    assert!(size() > 64 << 20, "the burst's log: {} bytes", size());
    create(&store, "after").await.unwrap();
    assert!(size() <= 64 << 20, "the log rewound and cut back: {} bytes", size());
    store.close().await;
    assert_eq!(names(&open(&dir).await).await.len(), 73);
}
