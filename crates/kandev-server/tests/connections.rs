//! Issue 12 finding 3: slow and idle clients. A WebSocket subscriber that does not read is
//! told `resync_required` (and its queue dropped) or cut; silent connections are closed after
//! the read timeout; the connection cap refuses cleanly and leaves room for health. Issue 38
//! item 3: one that reads too slowly for what it follows is told `resync_required` too.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{TestServer, WAIT, Ws};
use futures::StreamExt;
use kandev_server::ServerConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// A WebSocket client whose socket takes in very little unread data, so a client that stops
/// reading is felt by the server after a few kilobytes instead of megabytes.
async fn narrow_ws(addr: SocketAddr) -> Ws {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = tokio_tungstenite::MaybeTlsStream::Plain(socket.connect(addr).await.unwrap());
    let (stream, _) =
        tokio_tungstenite::client_async(format!("ws://{addr}/ws"), tcp).await.unwrap();
    Ws::new(stream)
}

/// The client under test keeps not reading for `how_long`: this pause is the behaviour being
/// tested (a stalled client), not a wait for something to happen.
async fn stall(how_long: Duration) {
    tokio::time::sleep(how_long).await;
}

/// Streams about 600 KB of agent text in one turn and waits (as a reading subscriber) for its end.
async fn stream_a_turn(server: &TestServer, session: &str) {
    let mut reader = server.ws().await;
    reader.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let sent = server
        .call("message.add", json!({"session_id": session, "content": "#!mock\nstream 150 4096"}))
        .await;
    assert_eq!(sent["status"], "sent", "{sent}");
    reader.notification("session.turn.completed").await;
}

async fn health(server: &TestServer) -> u16 {
    let client = reqwest::Client::new();
    let response = tokio::time::timeout(WAIT, client.get(server.url("/api/v1/health")).send())
        .await
        .expect("health answers in time")
        .expect("health answers");
    response.status().as_u16()
}

#[tokio::test]
async fn i12_f3_a_subscriber_that_does_not_read_is_told_to_resync_and_the_server_keeps_serving() {
    let config = ServerConfig {
        send_buffer_bytes: 16 * 1024,
        ws_queue_bytes: 64 * 1024,
        ws_queue_wait: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    let (_, session) = server.session(None).await;
    let topic = format!("session:{session}");
    let mut idle = narrow_ws(server.addr).await;
    idle.call("subscribe", json!({"topics": [topic]})).await;

    // The idle client reads nothing while the agent streams, and a while after.
    stream_a_turn(&server, &session).await;
    stall(Duration::from_millis(600)).await;
    assert_eq!(health(&server).await, 200, "the server keeps serving");

    // Now it reads what reached it: some notifications, then `resync_required`, then no more
    // notifications of that topic (it is no longer followed).
    let mut notifications = 0;
    let resync = loop {
        let frame = idle.next().await;
        match frame["type"].as_str() {
            Some("notification") => notifications += 1,
            Some("resync_required") => break frame,
            _ => panic!("unexpected frame {frame}"),
        }
    };
    assert_eq!(resync["topic"], topic.as_str());
    assert!(resync["oldest_seq"].as_i64().is_some_and(|s| s > 0), "{resync}");
    assert!(notifications < 150, "the queue was dropped, not delivered: {notifications}");
    let id = idle.request("workspace.list", json!({})).await;
    let (after, reply) = idle.reply(&id).await;
    assert_eq!(reply["type"], "response");
    assert!(
        after.iter().all(|f| f["topic"] != topic.as_str()),
        "nothing of the topic after resync_required: {after:?}"
    );

    // As rule 47 says, it subscribes again from now and works as before.
    let answer = idle.call("subscribe", json!({"topics": [topic]})).await;
    assert!(answer["payload"]["topics"][&topic].as_i64().is_some(), "{answer}");
    server.call("message.add", json!({"session_id": session, "content": "again"})).await;
    idle.notification("session.turn.completed").await;
}

#[tokio::test]
async fn i12_f3_a_client_that_never_reads_is_disconnected_after_the_write_timeout() {
    let config = ServerConfig {
        send_buffer_bytes: 16 * 1024,
        ws_queue_bytes: 64 * 1024,
        ws_queue_wait: Duration::from_millis(200),
        write_timeout: Duration::from_millis(500),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    let (_, session) = server.session(None).await;
    let mut idle = narrow_ws(server.addr).await;
    idle.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    stream_a_turn(&server, &session).await;
    // Reading now drains what the kernel held, then the connection is over.
    stall(Duration::from_millis(1500)).await;
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match idle.stream.next().await {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the server closed the connection of a client that did not read");
    assert_eq!(health(&server).await, 200);
}

/// Reads until the peer closes; returns what it sent and how long that took.
async fn read_to_close(stream: &mut TcpStream) -> (String, Duration) {
    let started = Instant::now();
    let mut got = vec![];
    let read = tokio::time::timeout(WAIT, stream.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the server closed the connection within {WAIT:?}");
    (String::from_utf8_lossy(&got).into_owned(), started.elapsed())
}

#[tokio::test]
async fn i12_f3_a_silent_or_half_sent_request_is_closed_after_the_read_timeout() {
    let timeout = Duration::from_millis(300);
    let config = ServerConfig { read_timeout: timeout, ..ServerConfig::default() };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;

    // No byte at all.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let (_, took) = read_to_close(&mut silent).await;
    assert!(took >= timeout - Duration::from_millis(50), "closed after the timeout: {took:?}");

    // Half a request head.
    let mut half = TcpStream::connect(server.addr).await.unwrap();
    half.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    read_to_close(&mut half).await;

    // A head, then half of the body it announced.
    let mut body = TcpStream::connect(server.addr).await.unwrap();
    let head = "POST /api/v1/workspace.list HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                content-type: application/json\r\ncontent-length: 100\r\n\r\n{\"limit\"";
    body.write_all(head.as_bytes()).await.unwrap();
    let (answer, _) = read_to_close(&mut body).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("did not arrive"), "{answer}");

    // A keep-alive connection left idle after its answer is closed too.
    let mut idle = TcpStream::connect(server.addr).await.unwrap();
    idle.write_all(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let (answer, _) = read_to_close(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(health(&server).await, 200);
}

#[tokio::test]
async fn i12_f3_the_connection_cap_refuses_cleanly_and_health_answers_when_released() {
    let config = ServerConfig { max_connections: 4, ..ServerConfig::default() };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;

    // Silent connections never keep health out: at the cap the oldest silent one goes.
    let mut silent = vec![];
    for _ in 0..8 {
        silent.push(TcpStream::connect(server.addr).await.unwrap());
    }
    assert_eq!(health(&server).await, 200, "silent connections make room");
    let (closed, _) = read_to_close(&mut silent[0]).await;
    assert!(closed.is_empty(), "the oldest silent connection was closed without an answer");
    drop(silent);

    // Four WebSockets are busy for good: a fifth connection gets a fast 503.
    let mut sockets = vec![];
    for _ in 0..4 {
        sockets.push(server.ws().await);
    }
    let mut refused = TcpStream::connect(server.addr).await.unwrap();
    let (answer, took) = read_to_close(&mut refused).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"code\":\"UNAVAILABLE\""), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
    assert!(took < Duration::from_secs(1), "refused at once: {took:?}");

    // One WebSocket leaves: health answers again.
    let mut gone = sockets.pop().unwrap();
    gone.stream.close(None).await.unwrap();
    while gone.stream.next().await.is_some() {}
    let started = Instant::now();
    loop {
        let mut probe = TcpStream::connect(server.addr).await.unwrap();
        probe
            .write_all(
                b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            )
            .await
            .unwrap();
        let (answer, _) = read_to_close(&mut probe).await;
        if answer.starts_with("HTTP/1.1 200") {
            let body: Value =
                serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
            assert_eq!(body["status"], "ok");
            break;
        }
        // The server may still be closing the socket the client just closed.
        assert!(started.elapsed() < WAIT, "health never answered after a release: {answer}");
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn i12_f3_a_client_that_leaves_its_answers_unread_is_disconnected() {
    let config = ServerConfig {
        send_buffer_bytes: 16 * 1024,
        ws_queue_bytes: 64 * 1024,
        ws_queue_wait: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    let mut idle = narrow_ws(server.addr).await;
    // Answers cannot be dropped like notifications: past the queue, the client is cut.
    for _ in 0..300 {
        idle.request("workflow.template.list", json!({})).await;
    }
    stall(Duration::from_millis(600)).await;
    let mut answers = 0;
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match idle.stream.next().await {
                Some(Ok(Message::Text(_))) => answers += 1,
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection was closed");
    assert!(answers < 300, "not every answer was queued: {answers}");
    assert_eq!(health(&server).await, 200);
}

/// The agent text a subscriber was told: the agent messages' first content and every delta
/// appended to them, in order, until the turn ended.
async fn agent_text_until_the_turn_ends(ws: &mut Ws) -> String {
    let (mut text, mut agent) = (String::new(), vec![]);
    loop {
        let frame = ws.next().await;
        let payload = &frame["payload"];
        match frame["action"].as_str() {
            Some("session.message.added") if payload["message"]["kind"] == "agent" => {
                agent.push(payload["message"]["id"].clone());
                text.push_str(payload["message"]["content"].as_str().unwrap());
            }
            Some("session.message.updated") if agent.contains(&payload["message_id"]) => {
                text.push_str(payload["delta"].as_str().unwrap_or_default());
            }
            Some("session.turn.completed") => return text,
            _ => {}
        }
    }
}

/// Issue 38 item 3: a subscriber that reads, but more slowly than the agent writes (here it
/// reads nothing until the turn is over, well within the wait for room), is told to resync
/// once more bytes wait for it than its bound (counting frames alone, it would never be
/// told, and the server would hold or re-read the whole stream for it). A fast reader beside
/// it gets every byte.
#[tokio::test]
async fn i38_3_a_slow_reader_past_its_byte_bound_is_told_to_resync_and_a_fast_one_gets_everything()
{
    let config = ServerConfig {
        send_buffer_bytes: 16 * 1024,
        ws_queue_bytes: 4 * 1024,
        // Far longer than the test: running out of this wait is not what tells it.
        ws_queue_wait: Duration::from_secs(600),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    let (_, session) = server.session(None).await;
    let topic = format!("session:{session}");
    let mut slow = narrow_ws(server.addr).await;
    slow.call("subscribe", json!({"topics": [topic]})).await;
    let mut fast = server.ws().await;
    fast.call("subscribe", json!({"topics": [topic]})).await;

    // Paced, so the stream is many notifications (streamed text is coalesced for 5 ms): a
    // frame larger than the whole bound still fits an empty queue. A chunk every 20 ms: the
    // fast reader falls past its bound (16 chunks) only if it stalls for 320 ms; at 5 ms a
    // CI machine under load stalled it that long (it was told to resync and the test timed
    // out), while the slow reader, reading nothing, passes the bound either way.
    let script = "#!mock\nstream 150 4096 every 20";
    let sent = server.call("message.add", json!({"session_id": session, "content": script})).await;
    assert_eq!(sent["status"], "sent", "{sent}");
    let told = agent_text_until_the_turn_ends(&mut fast).await;
    let stored = server.messages(&session).await;
    let agent = common::of_kind(&stored, "agent");
    assert_eq!(agent.len(), 1);
    assert_eq!(told.len(), 150 * 4096, "the fast reader got every byte");
    assert_eq!(told, agent[0]["content"].as_str().unwrap(), "in order");

    // The slow reader reads now: what reached it, then `resync_required`, not the stream.
    let mut bytes = 0;
    let resync = loop {
        let frame = slow.next().await;
        match (frame["type"].as_str(), frame["action"].as_str()) {
            (Some("resync_required"), _) => break frame,
            (_, Some("session.turn.completed")) => {
                panic!("the slow reader was never told to resync: it was sent {bytes} bytes")
            }
            _ => bytes += frame.to_string().len(),
        }
    };
    assert_eq!(resync["topic"], topic.as_str());
    assert!(bytes < 150 * 4096 / 2, "it was not sent the stream: {bytes} bytes");

    // It subscribes again from now and is served as before.
    slow.call("subscribe", json!({"topics": [topic]})).await;
    server.call("message.add", json!({"session_id": session, "content": "again"})).await;
    slow.notification("session.turn.completed").await;
}

/// R4 found it (flaky in CI): a body over the 4 MiB limit was answered as soon as the limit
/// was passed and the connection closed with the rest unread, so the kernel reset it and the
/// client lost the 400 that says what was wrong. The rest is now read (up to a bound) first.
#[tokio::test]
async fn i12_d1_an_oversized_body_is_read_to_its_end_so_the_client_gets_the_400() {
    let server = TestServer::start().await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let body_len = (4 << 20) + (16 << 20);
    let head = format!(
        "POST /api/v1/task.create HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: {body_len}\r\nconnection: close\r\n\r\n",
        server.addr
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 64 * 1024];
    let mut sent = 0;
    while sent < body_len {
        let n = chunk.len().min(body_len - sent);
        tokio::time::timeout(WAIT, tcp.write_all(&chunk[..n]))
            .await
            .expect("the server keeps reading")
            .expect("the server reads the whole body instead of resetting the connection");
        sent += n;
    }
    let (answer, _) = read_to_close(&mut tcp).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("larger than 4 MiB"), "{answer}");
}
