//! Issue 17 scope 6: a profile's own MCP servers (stdio, http, sse) reach the agent after
//! Kandev's own, shown masked, validated naming the field, and kept out of logs, the transcript
//! and an agent's stderr.

use crate::common;

use std::path::Path;

use common::logs::captured_logs;
use common::mcp::{mcp_said, script, wait_session};
use common::{TestServer, of_kind, step_id};
use kandev_server::ServerConfig;
use serde_json::{Value, json};

/// Issue 17 scope 6: a profile's extra MCP servers (stdio, http, sse). `board` is Kandev's
/// own `/mcp` reached as an outside client with the server token in a header, so the agent
/// can show that it got the header's real value by calling a tool through it.
fn extra_servers(server: &TestServer) -> Value {
    json!([
        {"name": "files", "command": "/usr/bin/mcp-files", "args": ["--root", "/w"],
         "env": [{"name": "FILES_KEY", "value": "stdio-secret-4711"}]},
        {"name": "board", "url": server.url("/mcp"),
         "headers": [{"name": "Authorization", "value": "Bearer server-secret"}]},
        {"name": "legacy", "url": server.url("/sse"), "transport": "sse"},
    ])
}

/// The `mcpServers` lists the mock agent was handed, oldest first.
fn handed(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[tokio::test]
async fn i17_s6_profile_mcp_servers_reach_the_agent_after_kandevs_own_and_stay_masked() {
    let logs = captured_logs();
    let config = ServerConfig { token: Some("server-secret".into()), ..ServerConfig::default() };
    let server = TestServer::start_with(config, tempfile::tempdir().unwrap()).await;
    let log = server.dir.path().join("mcp.log");
    let args = json!(["--mcp-log", log.display().to_string()]);
    let created = server
        .call(
            "agent.profile.create",
            json!({"name": "With servers", "kind": "mock", "args": args,
                   "mcp_servers": extra_servers(&server)}),
        )
        .await;
    let profile = created["profile"]["id"].as_str().unwrap().to_owned();

    // Shown masked, like env, in the answer and in the list.
    let masked = json!([
        {"name": "files", "command": "/usr/bin/mcp-files", "args": ["--root", "/w"],
         "env": [{"name": "FILES_KEY", "value": "********"}]},
        {"name": "board", "url": server.url("/mcp"), "transport": "http",
         "headers": [{"name": "Authorization", "value": "********"}]},
        {"name": "legacy", "url": server.url("/sse"), "transport": "sse", "headers": []},
    ]);
    assert_eq!(created["profile"]["mcp_servers"], masked);
    let listed = server.call("agent.profile.list", json!({})).await;
    let shown = listed["profiles"].as_array().unwrap().iter().find(|p| p["id"] == profile.as_str());
    assert_eq!(shown.unwrap()["mcp_servers"], masked);

    // The agent gets Kandev's server first, then the profile's with their real values; the
    // sse one is left out (the mock takes http only), and the transcript says so.
    let (task_id, session_id) = server.session(Some(&profile)).await;
    let first = handed(&log);
    let servers = first[0].as_array().unwrap();
    let names: Vec<&str> = servers.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["kandev", "files", "board"], "{servers:?}");
    assert_eq!(
        servers[1],
        json!({"name": "files", "command": "/usr/bin/mcp-files", "args": ["--root", "/w"],
               "env": [{"name": "FILES_KEY", "value": "stdio-secret-4711"}]})
    );
    assert_eq!(
        servers[2],
        json!({"type": "http", "name": "board", "url": server.url("/mcp"),
               "headers": [{"name": "Authorization", "value": "Bearer server-secret"}]})
    );
    let statuses: Vec<String> = of_kind(&server.messages(&session_id).await, "status")
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        statuses.iter().any(|s| s.contains("not handed to the agent") && s.ends_with(": legacy")),
        "{statuses:?}"
    );

    // The agent reaches the extra http server with the header it was given.
    let line = format!(r#"mcp board add_note {{"text":"via board","session_id":"{session_id}"}}"#);
    let said = mcp_said(&server.turn(&session_id, &script(&[line])).await);
    assert!(said.len() == 1 && said[0].starts_with("mcp add_note ok:"), "{said:?}");

    // A live context reset's session/new hands them again, with the new token.
    let epoch = server.call("session.get", json!({"id": session_id})).await["session"]["epoch"]
        .as_i64()
        .unwrap();
    server.call("session.reset_context", json!({"id": session_id})).await;
    let token = Some("server-secret");
    wait_session(&server, token, &session_id, |s| s["epoch"].as_i64() > Some(epoch)).await;
    let reset = handed(&log);
    assert_eq!(reset.len(), 2, "the reset's session/new: {reset:?}");
    assert_ne!(reset[1][0], reset[0][0], "a new token for Kandev's own server");
    let extras = |servers: &Value| servers.as_array().unwrap()[1..].to_vec();
    assert_eq!(extras(&reset[1]), extras(&reset[0]), "the profile's servers again");

    // An update that sends the masks back keeps the values, and a resumed agent gets them
    // again (session/load).
    let mut kept = masked.clone();
    kept[1]["headers"][0]["value"] = json!("********");
    kept.as_array_mut().unwrap().pop();
    let updated =
        server.call("agent.profile.update", json!({"id": profile, "mcp_servers": kept})).await;
    assert_eq!(updated["profile"]["mcp_servers"].as_array().unwrap().len(), 2);
    server.call("session.stop", json!({"id": session_id})).await;
    server.call("session.resume", json!({"id": session_id})).await;
    server.wait_state(&session_id, "WAITING_FOR_INPUT").await;
    let again = handed(&log).last().unwrap().clone();
    assert_eq!(again[1]["env"][0]["value"], "stdio-secret-4711", "{again}");
    assert_eq!(again[2]["headers"][0]["value"], "Bearer server-secret", "{again}");
    assert!(server.call("task.get", json!({"id": task_id})).await["task"].is_object());

    let logs = logs.lock().unwrap().clone();
    assert!(!logs.contains("stdio-secret-4711"), "a stdio server's env value was logged");
    assert!(!logs.contains("Bearer server-secret"), "a header value was logged");
}

#[tokio::test]
async fn i17_s6_an_agent_without_mcp_over_http_gets_only_the_stdio_servers() {
    let bridge =
        kandev_engine::AgentCommand { program: "kandev".into(), args: vec![], flags: vec![] };
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_tuned(ServerConfig::default(), dir, |engine| {
        engine.mcp_bridge = Some(bridge);
    })
    .await;
    let log = server.dir.path().join("mcp.log");
    let args = json!(["--no-mcp-http", "--mcp-log", log.display().to_string()]);
    let profile = server
        .profile(json!({"name": "Stdio only", "kind": "mock", "args": args,
                        "mcp_servers": extra_servers(&server)}))
        .await;
    server.session(Some(&profile)).await;
    let servers = handed(&log)[0].clone();
    let names: Vec<&str> =
        servers.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["kandev", "files"], "{servers}");
    assert_eq!(servers[0]["args"][0], "mcp-bridge", "Kandev's own through the bridge");
}

#[tokio::test]
async fn i17_s6_bad_profile_mcp_servers_get_a_validation_error_naming_the_field() {
    let server = TestServer::start().await;
    let cases = [
        (json!([{"name": "x"}]), "MCP servers 1 needs a command"),
        (
            json!([{"name": "x", "command": "a", "url": "http://127.0.0.1:1/mcp"}]),
            "has both a command and a URL",
        ),
        (json!([{"name": "kandev", "command": "a"}]), "Kandev's own server"),
        (json!([{"name": "bad name", "command": "a"}]), "not a valid server name"),
        (json!([{"name": "a", "command": "x"}, {"name": "A", "command": "y"}]), "used twice"),
        (json!([{"name": "x", "command": "  "}]), "MCP servers 1 command is empty"),
        (json!([{"name": "x", "url": "ftp://host/mcp"}]), "MCP servers 1 URL is not an http"),
        (
            json!([{"name": "x", "url": "http://127.0.0.1:1/mcp",
                    "headers": [{"name": "Bad Header", "value": "v"}]}]),
            "MCP servers 1 headers 1",
        ),
        (
            json!([{"name": "x", "url": "http://127.0.0.1:1/mcp",
                    "env": [{"name": "A", "value": "v"}]}]),
            "MCP servers 1 env does not belong",
        ),
        (
            json!([{"name": "x", "command": "a", "env": [{"name": "1A", "value": "v"}]}]),
            "MCP servers 1 env 1",
        ),
        (
            json!([{"name": "x", "command": "a", "env": [{"name": "A", "value": "********"}]}]),
            "is the mask",
        ),
        (json!([{"name": "x", "url": "http://h/mcp", "transport": "ws"}]), "transport"),
        (json!([{"name": "x", "command": "a", "cmd": "b"}]), "cmd"),
    ];
    for (servers, expected) in cases {
        let body = json!({"name": "P", "kind": "mock", "mcp_servers": servers});
        let (status, answer) = server.post("agent.profile.create", body).await;
        assert_eq!((status, answer["code"].as_str()), (422, Some("VALIDATION_ERROR")), "{answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(expected), "{servers}: {message}");
        // Named in words, the field as the request spells it in the details (issue 45); a
        // payload that does not decode (only a program sends one) names its path.
        let undecoded = answer["details"]["path"].is_string();
        assert!(undecoded || !message.contains("mcp_servers"), "{servers}: {message}");
    }
    let profiles = server.call("agent.profile.list", json!({})).await;
    assert_eq!(profiles["profiles"].as_array().unwrap().len(), 1, "only the seeded Mock");
    let mock = profiles["profiles"][0]["id"].clone();
    let (status, answer) = server
        .post(
            "agent.profile.update",
            json!({"id": mock, "mcp_servers": [{"name": "x", "command": "a",
                   "env": [{"name": "A", "value": "********"}]}]}),
        )
        .await;
    assert_eq!(status, 422, "an update cannot keep a value the server never had: {answer}");
}

/// Issue 17 scope 6, "masked like env": an agent that prints the `session/new` it got (its
/// MCP token, the env and header values of the profile's MCP servers) to stderr and fails
/// does not get them into `last_error.details.stderr` or the transcript.
#[tokio::test]
async fn i17_s6_an_agent_printing_its_mcp_servers_does_not_leak_their_secrets() {
    let server = TestServer::start().await;
    let answer = r#"{"jsonrpc":"2.0","id":ID,"result":{"protocolVersion":1,"agentCapabilities":{"mcpCapabilities":{"http":true}}}}"#;
    let script = format!(
        "read -r init; id=$(echo \"$init\" | sed 's/.*\"id\":\\([0-9]*\\).*/\\1/'); \
         echo '{answer}' | sed \"s/ID/$id/\"; read -r new; echo \"got: $new\" >&2; exit 3"
    );
    let profile = server
        .profile(json!({
            "name": "Chatty", "kind": "custom", "command": "/bin/sh", "args": ["-c", script],
            "mcp_servers": extra_servers(&server),
        }))
        .await;
    let (_, workflow) = server.kanban().await;
    let task = server
        .call(
            "task.create",
            json!({"workflow_id": workflow["id"], "title": "T",
                   "step_id": step_id(&workflow, "Backlog")}),
        )
        .await;
    let launched = server
        .call("session.launch", json!({"task_id": task["task"]["id"], "agent_profile_id": profile}))
        .await;
    let session = launched["session"]["id"].as_str().unwrap().to_owned();
    let failed = server.wait_state(&session, "FAILED").await;
    let stderr = failed["last_error"]["details"]["stderr"].as_str().unwrap_or_default();
    assert!(stderr.contains("got: ") && stderr.contains("mcpServers"), "{failed}");
    assert!(stderr.contains("[redacted]"), "the stderr is shown, scrubbed: {stderr}");
    let messages = Value::Array(server.messages(&session).await).to_string();
    for text in [stderr, &messages] {
        assert!(!text.contains("stdio-secret-4711"), "an env value leaked: {text}");
        assert!(!text.contains("server-secret"), "a header value leaked: {text}");
        assert!(!text.contains("kst_"), "the session token leaked: {text}");
    }
}
