//! R5: security: the bind without a token, the token, foreign origins, path traversal on a
//! task's folder, and secrets kept out of the log and the responses.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::harness::{self, str_of};
use crate::{Ctx, Report};

pub async fn r5(ctx: &Ctx) -> Result<Report> {
    let mut report = Report::new("R5", json!({}));
    let mut figures = json!({});

    // 1. A non-loopback bind without a token is refused.
    let home = ctx.home("r5-bind")?;
    let mut child = std::process::Command::new(&ctx.kandev)
        .args(["serve", "--addr", "0.0.0.0:0", "--home"])
        .arg(&home)
        .env_remove("KANDEV_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let started = Instant::now();
    let refused = loop {
        if let Some(status) = child.try_wait()? {
            break !status.success();
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    figures["non_loopback_without_token_refused"] = json!(refused);
    report.check(refused, "serve --addr 0.0.0.0:0 without a token did not exit with an error");

    // 2. Token: none and wrong get 401, right gets 200.
    let home = ctx.home("r5-token")?;
    let server = harness::start(&ctx.kandev, &home, &["--token", "right-token-42"])?;
    let url = format!("{}/api/v1/workspace.list", server.url);
    let none = server.http.post(&url).json(&json!({})).send().await?.status().as_u16();
    let wrong = server
        .http
        .post(&url)
        .bearer_auth("wrong")
        .json(&json!({}))
        .send()
        .await?
        .status()
        .as_u16();
    let right = server
        .http
        .post(&url)
        .bearer_auth("right-token-42")
        .json(&json!({}))
        .send()
        .await?
        .status()
        .as_u16();
    figures["token"] = json!({"none": none, "wrong": wrong, "right": right});
    report.check(
        none == 401 && wrong == 401 && right == 200,
        format!("token statuses none {none}, wrong {wrong}, right {right}"),
    );
    drop(server);

    // 3. Foreign Origin: WS upgrade and HTTP refused; same origin works.
    let home = ctx.home("r5")?;
    let server = harness::start_env(&ctx.kandev, &home, &[], &[("RUST_LOG", "debug")])?;
    let mut request = format!("{}/ws", server.url.replace("http", "ws")).into_client_request()?;
    request.headers_mut().insert("Origin", "http://evil.example".parse()?);
    let ws_refused = tokio_tungstenite::connect_async(request).await.is_err();
    let http_origin = server
        .http
        .post(format!("{}/api/v1/workspace.list", server.url))
        .header("Origin", "http://evil.example")
        .json(&json!({}))
        .send()
        .await?
        .status()
        .as_u16();
    let mut request = format!("{}/ws", server.url.replace("http", "ws")).into_client_request()?;
    request.headers_mut().insert("Origin", server.url.parse()?);
    let same_ok = tokio_tungstenite::connect_async(request).await.is_ok();
    figures["foreign_origin"] =
        json!({"ws_refused": ws_refused, "http_status": http_origin, "same_origin_ws_ok": same_ok});
    report.check(
        ws_refused && http_origin == 403 && same_ok,
        format!("origin checks: {}", figures["foreign_origin"]),
    );

    // 4. Path traversal on a task's plain folder.
    let (workflow, _) = server.board("R5").await?;
    let task =
        server.call("task.create", json!({"workflow_id": workflow, "title": "files"})).await?;
    let task_id = str_of(&task["task"]["id"])?;
    let session = server
        .call("session.launch", json!({"task_id": task_id, "prompt": "#!mock\nwrite ok.txt hello"}))
        .await?;
    let session_id = str_of(&session["session"]["id"])?;
    let folder = home.join("tasks").join(&task_id);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !folder.join("ok.txt").exists() {
        if Instant::now() > deadline {
            bail!("the agent did not write ok.txt in {}", folder.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(home.join("outside.txt"), "outside")?;
    std::os::unix::fs::symlink(home.join("outside.txt"), folder.join("link.txt"))?;
    let read = server.call("task.file.read", json!({"task_id": task_id, "path": "ok.txt"})).await?;
    report.check(read["content"] == "hello", format!("a legitimate read answered {read}"));
    let mut traversal = json!({});
    for path in ["../x", "../../outside.txt", "/etc/passwd", "link.txt", "a/../../x", ".git/config"]
    {
        let (status, body) =
            server.call_raw("task.file.read", json!({"task_id": task_id, "path": path})).await?;
        traversal[path] = json!(status);
        report.check(
            status == 403 && body["code"] == "FORBIDDEN",
            format!("task.file.read {path}: {status} {body}"),
        );
    }
    figures["path_traversal_status"] = traversal;

    // 5. Secrets stay out of the log (the server runs with RUST_LOG=debug) and responses.
    let secret = "sk-secret-123456789";
    let profile = server
        .call("agent.profile.create", json!({"name": "secret", "kind": "mock", "env": [{"name": "API_KEY", "value": secret}]}))
        .await?;
    let profile_id = str_of(&profile["profile"]["id"])?;
    let task =
        server.call("task.create", json!({"workflow_id": workflow, "title": "secret"})).await?;
    let launched = server
        .call("session.launch", json!({"task_id": task["task"]["id"], "agent_profile_id": profile_id, "prompt": "hello"}))
        .await?;
    let secret_session = str_of(&launched["session"]["id"])?;
    server.wait_state(&secret_session, &["WAITING_FOR_INPUT"], Duration::from_secs(30)).await?;
    let listed = server.call("agent.profile.list", json!({})).await?;
    let in_response = listed.to_string().contains(secret) || profile.to_string().contains(secret);
    server.call("session.delete", json!({"id": secret_session})).await?;
    server.call("session.delete", json!({"id": session_id})).await?;
    drop(server);
    let log = std::fs::read_to_string(home.with_extension("log")).unwrap_or_default();
    let in_log = log.contains(secret);
    figures["secrets"] = json!({"log_bytes": log.len(), "secret_in_log": in_log, "secret_in_responses": in_response});
    report.check(!log.is_empty(), "the server log is empty (nothing checked)");
    report.check(!in_log, "the secret appears in the server log");
    report.check(!in_response, "the secret appears in an API response");
    report.figures = figures;
    Ok(report)
}
