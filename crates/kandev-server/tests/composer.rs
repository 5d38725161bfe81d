//! Issue 18 (composer): attachments uploaded, stored once by content hash, checked against
//! their limits, sent to the agent as the blocks its `promptCapabilities` accept, and kept on
//! queued messages through a restart.

mod common;

use common::{TestServer, of_kind};
use serde_json::{Value, json};

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
