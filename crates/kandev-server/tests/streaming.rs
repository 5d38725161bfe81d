//! Issue 15: streamed text is coalesced, told only once stored, and replayed with `since`
//! without gap or duplicate across coalesced flushes; `search` over the API.

use crate::common;

use common::{TestServer, of_kind};
use serde_json::{Value, json};

/// The session's notifications from `since` (0: all) until its first `session.turn.completed`.
async fn frames_since(server: &TestServer, session: &str, since: i64) -> Vec<Value> {
    let mut ws = server.ws().await;
    let topic = format!("session:{session}");
    let id =
        ws.request("subscribe", json!({"topics": [topic], "since": {topic.clone(): since}})).await;
    let (mut frames, reply) = ws.reply(&id).await;
    assert_eq!(reply["type"], "response", "{reply}");
    while !frames.iter().any(|f| f["action"] == "session.turn.completed") {
        frames.push(ws.next().await);
    }
    frames.retain(|f| f["type"] == "notification");
    frames
}

/// `(seq, delta)` of the streamed-text notifications of the agent's message `id`.
fn deltas(frames: &[Value], id: &str) -> Vec<(i64, String)> {
    frames
        .iter()
        .filter(|f| f["action"] == "session.message.updated" && f["payload"]["message_id"] == id)
        .filter_map(|f| Some((f["seq"].as_i64()?, f["payload"]["delta"].as_str()?.to_owned())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i15_a3_replay_across_coalesced_flushes_has_no_gap_or_duplicate() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let before = server.messages(&session).await.len();
    // 200 KB in two bursts: flushed by size (64 KiB) within a burst and by time between them.
    let messages =
        server.turn(&session, "#!mock\nstream 1000 100\nsleep 30\nstream 1000 100").await;
    let agent = of_kind(&messages[before..], "agent");
    assert_eq!(agent.len(), 1, "one streamed message");
    let stored = agent[0]["content"].as_str().unwrap().to_owned();
    assert_eq!(stored.len(), 2000 * 100);
    let id = agent[0]["id"].as_str().unwrap();

    let all = frames_since(&server, &session, 0).await;
    let added = all
        .iter()
        .find(|f| f["action"] == "session.message.added" && f["payload"]["message"]["id"] == id)
        .expect("the message was announced");
    let first = added["payload"]["message"]["content"].as_str().unwrap().to_owned();
    let updates = deltas(&all, id);
    assert!(updates.len() >= 2, "the stream was written in several flushes: {}", updates.len());
    assert!(
        updates.len() < 1999,
        "chunks were coalesced ({} notifications for 2,000 chunks)",
        updates.len()
    );
    let told: String =
        std::iter::once(first.clone()).chain(updates.iter().map(|(_, d)| d.clone())).collect();
    assert_eq!(told, stored, "what was told is what was stored, in order");
    assert!(updates.windows(2).all(|w| w[0].0 < w[1].0), "seqs increase");

    // A client that saw the text up to each flush and reconnects with `since` gets exactly
    // the deltas after it, in order, none twice, continuing its text.
    for cut in [0, updates.len() / 2, updates.len() - 1] {
        let (since, _) = updates[cut];
        let replayed = deltas(&frames_since(&server, &session, since).await, id);
        assert_eq!(replayed, updates[cut + 1..].to_vec(), "since {since}");
        let seen: String = std::iter::once(first.clone())
            .chain(updates[..=cut].iter().map(|(_, d)| d.clone()))
            .chain(replayed.iter().map(|(_, d)| d.clone()))
            .collect();
        assert_eq!(seen, stored, "since {since}");
    }
}

#[tokio::test]
async fn i15_a6_search_finds_a_task_by_its_agents_words_and_refuses_bad_syntax() {
    let server = TestServer::start().await;
    let (task, session) = server.session(None).await;
    let messages = server.turn(&session, "#!mock\nsay the platypus sleeps").await;
    let reply = of_kind(&messages, "agent").last().unwrap()["id"].clone();
    let workspace =
        server.call("task.get", json!({"id": task})).await["task"]["workspace_id"].clone();
    let found =
        server.call("search", json!({"workspace_id": workspace, "query": "platypus"})).await;
    let hits = found["hits"].as_array().unwrap();
    let agent_hit = hits
        .iter()
        .find(|h| h["kind"] == "message" && h["message_id"] == reply)
        .expect("a hit in the agent's message");
    assert_eq!(agent_hit["task_id"], task.as_str());
    assert_eq!(agent_hit["session_id"], session.as_str());
    let marked: Vec<&Value> = agent_hit["snippet"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["highlight"] == true)
        .collect();
    assert_eq!(marked.len(), 1);
    assert_eq!(marked[0]["text"], "platypus");

    let only_tasks = server
        .call("search", json!({"workspace_id": workspace, "query": "platypus", "kinds": ["task"]}))
        .await;
    assert_eq!(only_tasks["hits"].as_array().unwrap().len(), 0);

    for bad in ["\"unterminated", "NOT", "(a OR"] {
        let (status, body) =
            server.post("search", json!({"workspace_id": workspace, "query": bad})).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some("VALIDATION_ERROR")),
            "{bad}: {body}"
        );
        assert!(body["message"].as_str().unwrap().contains("not valid"), "{body}");
    }
    let (status, body) =
        server.post("search", json!({"workspace_id": workspace, "query": "  "})).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
}
