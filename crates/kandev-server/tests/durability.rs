//! Issue 12 finding 1 over the API: the disk fills while an agent streams. Writes are
//! refused with `UNAVAILABLE` (503) naming the disk, health says degraded, the server
//! recovers by itself when space returns, and every request that got a 200 is still there
//! after a restart. SQLite's `max_page_count` plays the full disk.

use crate::common;

use common::logs::captured_logs;
use common::*;
use kandev_store::{Location, Store};
use serde_json::{Value, json};

/// The first turn: the agent speaks, waits for a permission (the test fills the disk and then
/// answers), then streams into the full disk.
const FIRST_TURN: &str = "#!mock\nsay before the disk fills\nask_permission Fill the disk\n\
    stream 300 1000\nsay end of the first turn";
const CHUNKS: usize = 300;
const SECOND_TURN: &str =
    "#!mock\nsay the disk has room again\nstream 5 2000\nsay second turn done";

/// What the server acknowledged (answered 200 to) and so must keep.
#[derive(Default)]
struct Acknowledged {
    workspaces: Vec<String>,
    tasks: Vec<String>,
}

/// One API write: a workspace (small), or a task with a description too big for the pages
/// left. Returns the status and body; records what a 200 acknowledged.
async fn write(server: &TestServer, i: usize, board: &Value, acked: &mut Acknowledged) -> u16 {
    let (status, body) = if i.is_multiple_of(2) {
        server.post("workspace.create", json!({"name": format!("workspace {i}")})).await
    } else {
        let description = format!("task {i} {}", "d".repeat(16 * 1024));
        let task = json!({"workflow_id": board["workflow_id"], "step_id": board["step_id"],
            "title": format!("task {i}"), "description": description});
        server.post("task.create", task).await
    };
    match status {
        200 if i.is_multiple_of(2) => {
            acked.workspaces.push(body["workspace"]["id"].as_str().unwrap().into())
        }
        200 => acked.tasks.push(body["task"]["id"].as_str().unwrap().into()),
        503 => {
            let db = db_path(&server.dir).display().to_string();
            assert_eq!(body["code"], "UNAVAILABLE", "{body}");
            assert_eq!(
                body["message"],
                format!("the disk holding {db} is full: free some space; nothing was saved")
            );
        }
        other => panic!("write {i} answered {other}: {body}"),
    }
    status
}

async fn health(server: &TestServer) -> Value {
    reqwest::get(server.url("/api/v1/health")).await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i12_f1_a_full_disk_while_an_agent_streams_answers_503_and_keeps_every_200() {
    let server = TestServer::start().await;
    let db = db_path(&server.dir).display().to_string();
    let (task_id, session) = server.session(None).await;
    let board = server.call("task.get", json!({"id": task_id})).await["task"].clone();
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let sent = server.call("message.add", json!({"session_id": session, "content": FIRST_TURN}));
    assert_eq!(sent.await["status"], "sent");
    let requested = ws.notification("session.permission.requested").await["payload"].clone();
    let option = requested["message"]["metadata"]["options"][0]["option_id"].clone();

    // The disk fills, with room left for the answer (an answer that cannot be stored is not
    // sent: i38_10); then the agent streams into it while the API is used.
    let pages = server.store.page_count().await.unwrap();
    server.store.set_max_page_count(Some(pages + 4)).await.unwrap();
    let answer =
        json!({"session_id": session, "request_id": requested["request_id"], "option_id": option});
    let (answered, body) = server.post("permission.respond", answer).await;
    assert_eq!(answered, 200, "the answer fits in the room left: {body}");
    let mut acked = Acknowledged::default();
    let (mut refused, mut degraded) = (0, false);
    for i in 0..40 {
        if write(&server, i, &board, &mut acked).await == 503 {
            refused += 1;
            let health = health(&server).await;
            if health["status"] == "degraded" {
                assert_eq!(health["writes"], "failing", "{health}");
                assert!(health["reason"].as_str().unwrap().contains(&db), "{health}");
                degraded = true;
            }
        }
        if i >= 10 && refused >= 4 && degraded {
            break;
        }
    }
    assert!(refused >= 4, "writes were refused while the disk was full ({refused})");
    assert!(degraded, "health said degraded while writes failed");

    // Space returns: the server recovers without a restart.
    server.store.set_max_page_count(None).await.unwrap();
    for i in 100..106 {
        assert_eq!(
            write(&server, i, &board, &mut acked).await,
            200,
            "write {i} after space returned"
        );
    }
    let health = health(&server).await;
    assert_eq!((health["status"].as_str(), health["writes"].as_str()), (Some("ok"), Some("ok")));

    // The session is still usable: a new turn streams and is stored.
    loop {
        let (status, body) = server
            .post(
                "message.add",
                json!({"session_id": session, "content": SECOND_TURN, "queue": false}),
            )
            .await;
        if status == 200 {
            break;
        }
        assert_eq!(body["code"], "BUSY", "{body}");
        ws.notification("session.turn.completed").await; // the first turn is still running
    }
    server.wait_state(&session, "WAITING_FOR_INPUT").await;
    let said = |messages: &[Value], text: &str| {
        messages
            .iter()
            .any(|m| m["kind"] == "agent" && m["content"].as_str().unwrap().contains(text))
    };
    let messages = server.messages(&session).await;
    assert!(said(&messages, "second turn done"), "the second turn was stored");
    // The first turn's stream lost the chunks sent while the disk was full.
    let second = messages.iter().rposition(|m| m["kind"] == "user").unwrap();
    let stored_chunks: usize = messages[..second]
        .iter()
        .filter(|m| m["kind"] == "agent")
        .map(|m| m["content"].as_str().unwrap().matches('|').count())
        .sum();
    assert!(stored_chunks < CHUNKS, "the agent's writes failed while the disk was full");

    // Every 200 is durable: reopen the same file after a stop.
    let listed = server.call("workspace.list", json!({})).await;
    let dir = server.stop().await;
    let store = Store::open(Location::File(db_path(&dir))).await.unwrap();
    for id in &acked.workspaces {
        let found = store.get_workspace(&kandev_domain::WorkspaceId::new(id.as_str())).await;
        assert!(found.is_ok(), "acknowledged workspace {id} survived: {found:?}");
    }
    for id in &acked.tasks {
        let found = store.get_task(&kandev_domain::TaskId::new(id.as_str())).await;
        assert!(found.is_ok(), "acknowledged task {id} survived: {found:?}");
    }
    let workspaces = store.list_workspaces().await.unwrap();
    assert_eq!(workspaces.len(), listed["workspaces"].as_array().unwrap().len());
    let session_id = kandev_domain::SessionId::new(session.as_str());
    let stored = store.list_messages(&session_id, None, None, 1000).await.unwrap();
    assert!(
        stored.iter().any(|m| m.content.contains("before the disk fills")),
        "the agent's words from before the disk filled survived"
    );
    assert!(stored.iter().any(|m| m.content.contains("second turn done")));
    let users: Vec<&str> =
        stored.iter().filter(|m| m.kind().as_str() == "user").map(|m| m.content.as_str()).collect();
    assert_eq!(users, vec![FIRST_TURN, SECOND_TURN], "both acknowledged messages survived");
    let request = stored.iter().find(|m| m.kind().as_str() == "permission_request").unwrap();
    let kandev_domain::message_meta::MessageMeta::PermissionRequest(request) = &request.meta else {
        panic!("a permission request's metadata is a permission's: {request:?}")
    };
    assert_eq!(request.status, "approved", "the acknowledged answer survived");
    assert_eq!(store.get_session(&session_id).await.unwrap().state.as_str(), "WAITING_FOR_INPUT");
}

/// Fills "the disk": caps the database at its size, then writes small rows until three
/// writes in a row are refused, so the next write of any size finds no room.
async fn fill_the_disk(server: &TestServer) {
    let pages = server.store.page_count().await.unwrap();
    server.store.set_max_page_count(Some(pages)).await.unwrap();
    let mut refused_in_a_row = 0;
    for i in 0..10_000 {
        let name = format!("filler {i} {}", "f".repeat(150));
        let (status, body) = server.post("workspace.create", json!({"name": name})).await;
        match status {
            200 => refused_in_a_row = 0,
            503 => refused_in_a_row += 1,
            other => panic!("filling the disk: {other} {body}"),
        }
        if refused_in_a_row == 3 {
            return;
        }
    }
    panic!("the disk never filled");
}

/// Waits (bounded) until this test process has logged a line containing both texts.
async fn logged(first: &str, second: &str) {
    let logs = captured_logs();
    kandev_testkit::eventually_within(
        WAIT,
        format!("a log line of {first:?} with {second:?}"),
        async || {
            let text = logs.lock().unwrap();
            text.lines().any(|line| line.contains(first) && line.contains(second))
        },
    )
    .await;
}

/// Issue 38 item 10: a permission answer is stored first, then sent. One that cannot be
/// stored (a full disk) is refused, never reaches the agent, and can be given again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i38_10_a_permission_answer_that_cannot_be_stored_is_not_sent() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let script = "#!mock\nask_permission Write the file\nsay after the answer";
    let sent = server.call("message.add", json!({"session_id": session, "content": script}));
    assert_eq!(sent.await["status"], "sent");
    let requested = ws.notification("session.permission.requested").await["payload"].clone();
    let option = requested["message"]["metadata"]["options"][0]["option_id"].clone();
    let answer =
        json!({"session_id": session, "request_id": requested["request_id"], "option_id": option});

    fill_the_disk(&server).await;
    let (status, body) = server.post("permission.respond", answer.clone()).await;
    assert_eq!((status, body["code"].as_str()), (503, Some("UNAVAILABLE")), "{body}");

    // Room again: the request is still pending, so the same answer is taken now.
    server.store.set_max_page_count(None).await.unwrap();
    let (status, body) = server.post("permission.respond", answer).await;
    assert_eq!(status, 200, "the answer that was not stored can be given again: {body}");
    ws.notification("session.turn.completed").await;
    let messages = server.messages(&session).await;
    let said: Vec<&str> =
        of_kind(&messages, "agent").iter().map(|m| m["content"].as_str().unwrap()).collect();
    let answers = said.iter().map(|text| text.matches("permission: ").count()).sum::<usize>();
    assert_eq!(answers, 1, "the agent got exactly one answer: {said:?}");
    let request = of_kind(&messages, "permission_request")[0];
    assert_eq!(request["metadata"]["status"], "approved", "{request}");
}

/// Issue 38 item 11: when the last write of a turn fails (a full disk), the session does not
/// stay `RUNNING`: once writes work again it settles, without a restart and without any
/// other write to the session, in `WAITING_FOR_INPUT` with a `last_error` saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i38_11_a_turn_whose_end_cannot_be_written_settles_once_writes_work_again() {
    captured_logs();
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let script = "#!mock\nsay working\nsleep 60000\nsay never";
    let sent = server.call("message.add", json!({"session_id": session, "content": script}));
    assert_eq!(sent.await["status"], "sent");
    ws.notification("session.message.added").await; // the user's message
    ws.notification("session.message.added").await; // "working"

    fill_the_disk(&server).await;
    let (status, body) = server.post("agent.cancel", json!({"session_id": session})).await;
    assert_eq!(status, 200, "{body}");
    logged("closing the turn failed", &session).await;
    let stuck = server.call("session.get", json!({"id": session})).await;
    assert_eq!(stuck["session"]["state"], "RUNNING", "the end was not written: {stuck}");

    server.store.set_max_page_count(None).await.unwrap();
    let settled = server.wait_state(&session, "WAITING_FOR_INPUT").await;
    assert_eq!(settled["last_error"]["code"], "turn_end_not_saved", "{settled}");
    let message = settled["last_error"]["message"].as_str().unwrap();
    assert!(message.contains("is full"), "the error names the cause: {message}");
    // The turn is closed, and the session takes the next message.
    let messages = server.turn(&session, "#!mock\nsay next turn").await;
    assert!(of_kind(&messages, "agent").iter().any(|m| m["content"] == "next turn"));
}
