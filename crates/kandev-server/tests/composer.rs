//! Issue 18 (composer): attachments uploaded, stored once by content hash, checked against
//! their limits, sent to the agent as the blocks its `promptCapabilities` accept, and kept on
//! queued messages through a restart.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::{TestServer, WAIT, of_kind};
use kandev_server::ServerConfig;
use kandev_testkit::eventually_within;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A small PNG-looking file (the mock agent only counts the bytes it receives).
fn png() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..=255u8).cycle().take(1000));
    bytes
}

async fn upload(server: &TestServer, name: &str, mime: &str, bytes: Vec<u8>) -> Value {
    let (status, body) = server.upload(name, mime, bytes).await;
    assert_eq!(status, 200, "upload failed: {body}");
    body["attachment"].clone()
}

/// Sends `content` with `attachments` and waits for the turn; returns the agent's text.
async fn turn_with(
    server: &TestServer,
    session: &str,
    content: &str,
    attachments: Value,
) -> String {
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let sent = server
        .call(
            "message.add",
            json!({"session_id": session, "content": content, "attachments": attachments}),
        )
        .await;
    assert_eq!(sent["status"], "sent", "{sent}");
    ws.notification("session.turn.completed").await;
    agent_text(server, session).await
}

async fn agent_text(server: &TestServer, session: &str) -> String {
    let messages = server.messages(session).await;
    of_kind(&messages, "agent").iter().map(|m| m["content"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn i18_a1_an_image_reaches_an_agent_that_takes_images_as_an_image_block() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let attachment = upload(&server, "shot.png", "image/png", png()).await;
    assert_eq!(attachment["size"], 1008);
    assert_eq!(attachment["mime"], "image/png");
    let id = attachment["id"].as_str().unwrap();
    let stored = server.dir.path().join("attachments").join(id);
    assert_eq!(std::fs::read(&stored).unwrap(), png(), "stored under its hash in KANDEV_HOME");
    // The same bytes under another name are stored once.
    let again = upload(&server, "other.png", "image/png", png()).await;
    assert_eq!(again["id"], attachment["id"]);
    assert_eq!(std::fs::read_dir(server.dir.path().join("attachments")).unwrap().count(), 1);

    let reply = turn_with(&server, &session, "look", json!([attachment])).await;
    assert!(reply.contains("received image image/png 1008 bytes"), "{reply}");
    let messages = server.messages(&session).await;
    let user = of_kind(&messages, "user")[0];
    assert_eq!(user["metadata"]["attachments"], json!([attachment]), "the transcript keeps it");
}

#[tokio::test]
async fn i18_a1_without_image_support_an_image_is_a_resource_link_to_a_copy_in_the_worktree() {
    let server = TestServer::start().await;
    let profile =
        server.profile(json!({"name": "No images", "kind": "mock", "args": ["--no-image"]})).await;
    let (_, session) = server.session(Some(&profile)).await;
    let attachment = upload(&server, "../my shot.png", "image/png", png()).await;
    let reply = turn_with(&server, &session, "look", json!([attachment])).await;
    let line = reply.lines().find(|l| l.starts_with("received ")).unwrap_or_default();
    let uri = line.strip_prefix("received resource_link file://").unwrap_or_else(|| {
        panic!("expected a resource_link, got {reply:?}");
    });
    let cwd = server.call("session.get", json!({"id": session})).await["session"]["cwd"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = attachment["id"].as_str().unwrap();
    let expected = format!("{cwd}/.kandev/attachments/{}-my_shot.png", &id[..12]);
    assert_eq!(uri, expected, "copied inside the working directory under a safe name");
    assert_eq!(std::fs::read(uri).unwrap(), png());
    let ignore = std::fs::read_to_string(format!("{cwd}/.kandev/.gitignore")).unwrap();
    assert_eq!(ignore, "*\n", "the copies stay out of git");
}

#[tokio::test]
async fn i18_a1_a_text_file_is_embedded_as_a_resource() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let attachment = upload(&server, "notes.md", "text/markdown", b"# notes\n".to_vec()).await;
    let reply = turn_with(&server, &session, "read", json!([attachment])).await;
    let id = attachment["id"].as_str().unwrap();
    assert!(
        reply.contains(&format!("received resource attachment:///{id}/notes.md 8 bytes")),
        "{reply}"
    );
}

#[tokio::test]
async fn i18_a1_oversize_and_too_many_attachments_are_refused_naming_the_limit() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let (status, body) =
        server.upload("big.bin", "application/octet-stream", vec![7; 20 * 1024 * 1024 + 1]).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("20 MiB (the attachment size limit)"), "{message}");
    // Exactly at the limit is fine.
    let (status, _) =
        server.upload("edge.bin", "application/octet-stream", vec![7; 20 * 1024 * 1024]).await;
    assert_eq!(status, 200);

    let one = upload(&server, "a.png", "image/png", png()).await;
    let eleven: Vec<Value> = (0..11).map(|_| one.clone()).collect();
    for action in ["message.add", "message.queue.add"] {
        let (status, body) = server
            .post(action, json!({"session_id": session, "content": "x", "attachments": eleven}))
            .await;
        assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("more than 10 (the attachments per message limit)"), "{message}");
    }
    let unknown = json!([{"id": "0".repeat(64), "name": "x.png", "mime": "image/png", "size": 1}]);
    let (status, body) = server
        .post("message.add", json!({"session_id": session, "content": "x", "attachments": unknown}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(body["message"].as_str().unwrap().contains("upload the file"), "{body}");
    let (status, body) = server.upload("", "image/png", png()).await;
    assert_eq!((status, body["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{body}");
    assert!(server.messages(&session).await.is_empty(), "nothing refused was recorded");
}

#[tokio::test]
async fn i18_a1_a_queued_message_keeps_its_attachments_through_a_restart() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    server
        .call("message.queue.auto_run.set", json!({"session_id": session, "enabled": false}))
        .await;
    let attachment = upload(&server, "shot.png", "image/png", png()).await;
    server
        .call(
            "message.queue.add",
            json!({"session_id": session, "content": "later", "attachments": [attachment]}),
        )
        .await;
    let dir = server.stop().await;
    let server = TestServer::start_with(Default::default(), dir).await;
    let queue = server.call("message.queue.list", json!({"session_id": session})).await;
    assert_eq!(queue["queue"][0]["attachments"], json!([attachment]), "{queue}");

    server
        .call("message.queue.auto_run.set", json!({"session_id": session, "enabled": true}))
        .await;
    server.wait_turns(&session, 1).await;
    let reply = agent_text(&server, &session).await;
    assert!(reply.contains("received image image/png 1008 bytes"), "{reply}");
    let messages = server.messages(&session).await;
    assert_eq!(of_kind(&messages, "user")[0]["metadata"]["attachments"], json!([attachment]));
}

#[tokio::test]
async fn i18_a2_the_agents_commands_are_stored_per_session_and_listed() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    // The mock offers its commands as soon as a conversation opens.
    let names = |s: &Value| -> Vec<String> {
        s["available_commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let current = server.call("session.get", json!({"id": session})).await["session"].clone();
    if names(&current).is_empty() {
        loop {
            let frame = ws.notification("session.updated").await;
            if !names(&frame["payload"]["session"]).is_empty() {
                break;
            }
        }
    }
    let current = server.call("session.get", json!({"id": session})).await["session"].clone();
    assert_eq!(names(&current), ["echo", "script"]);
    assert_eq!(
        current["available_commands"][0],
        json!({"name": "echo", "description": "Echo the first line back", "input_hint": "text"})
    );

    // A `commands` directive replaces the list; the session announces it.
    let script = "#!mock\ncommands review:Review the changes:path; deploy:Ship it\nsay ok";
    server.turn(&session, script).await;
    let current = server.call("session.get", json!({"id": session})).await["session"].clone();
    assert_eq!(
        current["available_commands"],
        json!([
            {"name": "review", "description": "Review the changes", "input_hint": "path"},
            {"name": "deploy", "description": "Ship it", "input_hint": null},
        ])
    );
    // Choosing one sends `/name args` as the message: the agent receives exactly that.
    let messages = server.turn(&session, "/review src/main.rs").await;
    let agent: Vec<&str> =
        of_kind(&messages, "agent").iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert!(agent.contains(&"echo: /review src/main.rs"), "{agent:?}");

    let dir = server.stop().await;
    let server = TestServer::start_with(Default::default(), dir).await;
    let reloaded = server.call("session.get", json!({"id": session})).await["session"].clone();
    assert_eq!(names(&reloaded), ["review", "deploy"], "kept through a restart");
}

#[tokio::test]
async fn i18_a3_usage_reported_by_the_agent_is_stored_per_turn_and_kept_after_reload() {
    let server = TestServer::start().await;
    let (_, session) = server.session(None).await;
    let mut ws = server.ws().await;
    ws.call("subscribe", json!({"topics": [format!("session:{session}")]})).await;
    let sent = server
        .call(
            "message.add",
            json!({"session_id": session, "content": "#!mock\nusage 1200 200000 900 300\nsay ok"}),
        )
        .await;
    assert_eq!(sent["status"], "sent");
    let completed = ws.notification("session.turn.completed").await;
    assert_eq!(completed["payload"]["tokens"]["total_tokens"], 1200, "{completed}");
    server.turn(&session, "no usage this time").await;

    let dir = server.stop().await;
    let server = TestServer::start_with(Default::default(), dir).await;
    let turns = server.call("session.turn.list", json!({"session_id": session})).await;
    let turns = turns["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert_eq!(turns[0]["usage"]["context"], json!({"used": 1200, "size": 200000, "cost": null}));
    assert_eq!(turns[0]["usage"]["tokens"]["input_tokens"], 900);
    assert_eq!(turns[0]["usage"]["tokens"]["output_tokens"], 300);
    assert_eq!(turns[0]["stop_reason"], "end_turn");
    assert_eq!(turns[1]["usage"], Value::Null, "a turn without a report has none");
    let session = server.call("session.get", json!({"id": session})).await["session"].clone();
    assert_eq!(session["context_window"]["used"], 1200, "the latest context stays on the session");
}

#[tokio::test]
async fn i18_a5_a_stored_image_is_served_for_thumbnails_and_nothing_else_runs_inline() {
    let server = TestServer::start().await;
    let id =
        upload(&server, "shot.png", "image/png", png()).await["id"].as_str().unwrap().to_owned();
    let get = |query: &str| {
        let url = server.url(&format!("/api/v1/attachment/{id}{query}"));
        async move { reqwest::get(url).await.unwrap() }
    };
    let shown = get("?mime=image/png").await;
    assert_eq!(shown.status(), 200);
    assert_eq!(shown.headers()["content-type"], "image/png");
    assert_eq!(shown.headers()["x-content-type-options"], "nosniff");
    assert_eq!(shown.bytes().await.unwrap().to_vec(), png());
    for query in ["?mime=image/svg+xml", "?mime=text/html", ""] {
        let download = get(query).await;
        assert_eq!(download.headers()["content-type"], "application/octet-stream", "{query}");
        assert_eq!(download.headers()["content-disposition"], "attachment");
    }
    let missing =
        reqwest::get(server.url(&format!("/api/v1/attachment/{}", "0".repeat(64)))).await.unwrap();
    assert_eq!(missing.status(), 404);
    let traversal =
        reqwest::get(server.url("/api/v1/attachment/..%2F..%2Fkandev.db")).await.unwrap();
    assert_eq!(traversal.status(), 404);
}

/// A server whose attachment settings `tune` adjusts.
async fn server_with(tune: impl FnOnce(&mut kandev_engine::AttachmentSettings)) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    TestServer::start_tuned(ServerConfig::default(), dir, |config| tune(&mut config.attachments))
        .await
}

/// An upload over a raw socket: the request head of a `total`-byte body and its first bytes;
/// the rest follows with [`finish_upload`].
async fn start_upload(server: &TestServer, name: &str, total: usize, first: &[u8]) -> TcpStream {
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /api/v1/attachment.upload?name={name} HTTP/1.1\r\nhost: {}\r\n\
         content-type: application/octet-stream\r\nx-kandev-upload: 1\r\n\
         content-length: {total}\r\nconnection: close\r\n\r\n",
        server.addr
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(first).await.unwrap();
    socket
}

/// Sends the rest of the body; the answer's status and JSON body.
async fn finish_upload(mut socket: TcpStream, rest: &[u8]) -> (u16, Value) {
    socket.write_all(rest).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, socket.read_to_end(&mut answer)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&answer);
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn attachments_dir(server: &TestServer) -> PathBuf {
    server.dir.path().join("attachments")
}

/// The sizes of the upload files being written (`.<uuid>.part`) in `dir`.
fn parts(dir: &Path) -> Vec<u64> {
    let Ok(entries) = std::fs::read_dir(dir) else { return vec![] };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .collect()
}

/// Issue 38, item 5: an upload is written to disk as it arrives (hashed on the way), never
/// held whole in memory: half a body is already in a file while the rest is on its way.
#[tokio::test]
async fn i38_5_an_upload_is_written_to_disk_as_it_arrives() {
    let server = TestServer::start().await;
    let body: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let (first, rest) = body.split_at(2 * 1024 * 1024);
    let socket = start_upload(&server, "big.bin", body.len(), first).await;
    let dir = attachments_dir(&server);
    eventually_within(WAIT, "half the body in a file", async || {
        parts(&dir).iter().any(|&n| n >= 1024 * 1024)
    })
    .await;
    let (status, answer) = finish_upload(socket, rest).await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["attachment"]["id"].as_str().unwrap();
    assert_eq!(std::fs::read(dir.join(id)).unwrap(), body, "stored whole under its hash");
    assert!(parts(&dir).is_empty(), "no part file is left");
}

/// Issue 38, item 5: uploads at once are bounded; past the bound an upload waits for a slot,
/// and is answered `BUSY` when none frees in time. A slot frees when its upload ends.
#[tokio::test]
async fn i38_5_uploads_at_once_are_bounded() {
    let server = server_with(|a| {
        a.at_once = 1;
        a.slot_wait = Duration::from_millis(200);
    })
    .await;
    let dir = attachments_dir(&server);
    let holder = start_upload(&server, "slow.bin", 2048, &[1; 1024]).await;
    eventually_within(WAIT, "the first upload writing", async || !parts(&dir).is_empty()).await;
    let (status, body) = server.upload("b.txt", "text/plain", b"second".to_vec()).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("BUSY")), "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("uploads at once") && message.contains("try again"), "{message}");
    let (status, answer) = finish_upload(holder, &[1; 1024]).await;
    assert_eq!(status, 200, "{answer}");
    let (status, body) = server.upload("b.txt", "text/plain", b"second".to_vec()).await;
    assert_eq!(status, 200, "the slot is free again: {body}");
}

/// Issue 38, item 5: the attachments of a home have a quota (`serve --attachment-quota`); an
/// upload past it is refused saying what to do and leaves nothing; a file already stored
/// uploads again (it costs nothing).
#[tokio::test]
async fn i38_5_an_upload_past_the_quota_is_refused_saying_what_to_do() {
    let server = server_with(|a| a.quota = 1024 * 1024).await;
    let first = vec![1u8; 600 * 1024];
    let (status, body) = server.upload("a.bin", "application/octet-stream", first.clone()).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.upload("again.bin", "application/octet-stream", first).await;
    assert_eq!(status, 200, "the same file again adds nothing: {body}");
    let (status, body) =
        server.upload("b.bin", "application/octet-stream", vec![2u8; 600 * 1024]).await;
    assert_eq!((status, body["code"].as_str()), (503, Some("UNAVAILABLE")), "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("quota") && message.contains("--attachment-quota"), "{message}");
    let dir = attachments_dir(&server);
    let files = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(files, 1, "only the first file is stored, no part file is left");
}

/// Sets a file's modification time `age` in the past.
fn age(path: &Path, age: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

/// Issue 38, item 5: uploads no stored message or queued prompt names are removed once a day
/// old; those a message or a queued prompt names stay, and so do recent ones.
#[tokio::test]
async fn i38_5_unreferenced_uploads_older_than_a_day_are_removed() {
    let server = server_with(|a| a.sweep_every = Duration::from_millis(50)).await;
    let (_, session) = server.session(None).await;
    server
        .call("message.queue.auto_run.set", json!({"session_id": session, "enabled": false}))
        .await;
    let in_message = upload(&server, "m.txt", "text/plain", b"in a message".to_vec()).await;
    let in_queue = upload(&server, "q.txt", "text/plain", b"in the queue".to_vec()).await;
    turn_with(&server, &session, "see", json!([in_message])).await;
    server
        .call(
            "message.queue.add",
            json!({"session_id": session, "content": "later", "attachments": [in_queue]}),
        )
        .await;
    let orphan = upload(&server, "o.txt", "text/plain", b"named by nothing".to_vec()).await;
    let fresh = upload(&server, "f.txt", "text/plain", b"named by nothing yet".to_vec()).await;
    let again = upload(&server, "a.txt", "text/plain", b"uploaded twice".to_vec()).await;
    let dir = attachments_dir(&server);
    let path = |a: &Value| dir.join(a["id"].as_str().unwrap());
    let two_days = Duration::from_secs(2 * 24 * 3600);
    // An old upload uploaded again is new again (its message may name it next).
    age(&path(&again), two_days);
    let twice = upload(&server, "a.txt", "text/plain", b"uploaded twice".to_vec()).await;
    assert_eq!(twice["id"], again["id"], "the same file");
    // The kept ones first: when the orphan is gone, a sweep saw them old too.
    age(&path(&in_message), two_days);
    age(&path(&in_queue), two_days);
    age(&path(&orphan), two_days);
    eventually_within(WAIT, "the old unreferenced upload removed", async || {
        !path(&orphan).exists()
    })
    .await;
    let kept = [
        ("in a message", &in_message),
        ("queued", &in_queue),
        ("new", &fresh),
        ("uploaded again", &again),
    ];
    for (what, kept) in kept {
        assert!(path(kept).exists(), "the upload {what} is kept");
    }
}

/// Issue 38, item 5: the sweep gives the quota back: a full quota refuses an upload until an
/// old upload nothing names is removed, then takes it.
#[tokio::test]
async fn i38_5_the_sweep_gives_the_quota_back() {
    let server = server_with(|a| {
        a.quota = 1024 * 1024;
        a.sweep_every = Duration::from_millis(50);
    })
    .await;
    let old = upload(&server, "old.bin", "application/octet-stream", vec![1; 600 * 1024]).await;
    let next = vec![2u8; 600 * 1024];
    let (status, body) = server.upload("next.bin", "application/octet-stream", next.clone()).await;
    assert_eq!(status, 503, "the quota is full: {body}");
    let path = attachments_dir(&server).join(old["id"].as_str().unwrap());
    age(&path, Duration::from_secs(2 * 24 * 3600));
    eventually_within(WAIT, "the old upload removed", async || !path.exists()).await;
    let (status, body) = server.upload("next.bin", "application/octet-stream", next).await;
    assert_eq!(status, 200, "room again: {body}");
}
