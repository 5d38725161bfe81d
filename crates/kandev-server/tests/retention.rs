//! Lifecycle rule 47 over the WebSocket: a `since` older than what the event log still holds
//! gets `resync_required {topic, oldest_seq}` instead of a partial replay.

use crate::common;

use std::time::Duration;

use common::{TestServer, db_path};
use kandev_store::{Location, Retention, Store};
use serde_json::json;

#[tokio::test]
async fn l47_a_since_older_than_retention_gets_resync_required() {
    let server = TestServer::start().await;
    let mut ws = server.ws().await;
    let answer = ws.call("subscribe", json!({"topics": ["workspaces"]})).await;
    let since = answer["payload"]["topics"]["workspaces"].as_i64().unwrap();
    for name in ["one", "two", "three", "four"] {
        server.call("workspace.create", json!({"name": name})).await;
    }
    let mut created = vec![];
    while created.len() < 4 {
        created.push(ws.notification("workspace.created").await["seq"].as_i64().unwrap());
    }

    // Prune the log down to its newest two rows (the server's own pruner does the same on its
    // schedule; here the test runs it, on the same database, to know when it happened).
    let store = Store::open(Location::File(db_path(&server.dir))).await.unwrap();
    let kept = Retention { max_age: Duration::from_secs(3600), max_rows: 2 };
    assert!(store.prune_events(kept).await.unwrap().rows > 0);
    store.close().await;

    // A client back from far away: `since` is older than the oldest retained event.
    let mut late = server.ws().await;
    let id = late
        .request(
            "subscribe",
            json!({"topics": ["workspaces", "profiles"], "since": {"workspaces": since}}),
        )
        .await;
    let (before, reply) = late.reply(&id).await;
    assert_eq!(before.len(), 1, "only resync_required, no partial replay: {before:?}");
    let resync = &before[0];
    assert_eq!(resync["type"], "resync_required");
    assert_eq!(resync["topic"], "workspaces");
    let oldest = resync["oldest_seq"].as_i64().unwrap();
    assert!(oldest > created[0] && oldest <= created[3], "oldest retained: {resync}");
    assert_eq!(reply["type"], "response");
    let followed = reply["payload"]["topics"].as_object().unwrap();
    assert!(followed.contains_key("profiles"), "{reply}");
    assert!(!followed.contains_key("workspaces"), "a topic to resync is not followed: {reply}");

    // Resuming from what the log still holds replays without a gap.
    let id = late
        .request(
            "subscribe",
            json!({"topics": ["workspaces"], "since": {"workspaces": oldest - 1}}),
        )
        .await;
    let (replayed, reply) = late.reply(&id).await;
    assert!(replayed.iter().all(|f| f["type"] == "notification"), "{replayed:?}");
    assert_eq!(replayed.last().unwrap()["seq"], created[3]);
    assert_eq!(reply["payload"]["topics"]["workspaces"], created[3]);

    // As the client of rule 47 does: follow from now, and get what comes next.
    server.call("workspace.create", json!({"name": "five"})).await;
    let next = late.notification("workspace.created").await;
    assert_eq!(next["payload"]["workspace"]["name"], "five");
}
