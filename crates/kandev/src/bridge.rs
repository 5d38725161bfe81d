//! `kandev mcp-bridge`: a stdio ⇄ HTTP bridge to Kandev's MCP server, for agents that only
//! take stdio MCP servers. Each JSON-RPC line read on stdin is posted to `--url` with the
//! session token (`KANDEV_MCP_TOKEN`, as Kandev hands it over, or `--token`); each message of
//! the answer (plain JSON or SSE) is written to stdout as one line. Calls run concurrently,
//! so a blocking `ask_user` does not hold the others back. The token is never printed.

use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

#[derive(Args, Debug)]
pub struct BridgeArgs {
    /// Kandev's MCP endpoint, e.g. http://127.0.0.1:38429/mcp
    #[arg(long)]
    pub url: String,
    /// The bearer token (a session token `kst_…`, or the server's token).
    #[arg(long, env = "KANDEV_MCP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

pub async fn run(args: BridgeArgs) -> Result<()> {
    let client = reqwest::Client::new();
    let stdout = Arc::new(Mutex::new(tokio::io::stdout()));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut calls = JoinSet::new();
    while let Some(line) = lines.next_line().await.context("cannot read stdin")? {
        if line.trim().is_empty() {
            continue;
        }
        let (client, stdout) = (client.clone(), stdout.clone());
        let (url, token) = (args.url.clone(), args.token.clone());
        calls.spawn(async move {
            let answers = forward(&client, &url, token.as_deref(), &line).await;
            let mut out = stdout.lock().await;
            for answer in answers {
                let text = format!("{answer}\n");
                if out.write_all(text.as_bytes()).await.is_err() || out.flush().await.is_err() {
                    return;
                }
            }
        });
        while calls.try_join_next().is_some() {}
    }
    while calls.join_next().await.is_some() {}
    Ok(())
}

/// Posts one message; returns the messages to write back (none for a notification).
async fn forward(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    line: &str,
) -> Vec<Value> {
    let id = serde_json::from_str::<Value>(line).ok().and_then(|m| m.get("id").cloned());
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(line.to_owned());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let failure = |message: String| match &id {
        Some(id) => {
            vec![json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}})]
        }
        None => vec![],
    };
    let response = match request.send().await {
        Ok(response) => response,
        Err(err) => return failure(format!("cannot reach kandev at {url}: {err}")),
    };
    let status = response.status();
    let sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = match response.text().await {
        Ok(body) => body,
        Err(err) => return failure(format!("kandev's answer broke off: {err}")),
    };
    let mut messages: Vec<Value> = if sse {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    } else {
        serde_json::from_str(&body).map(|v| vec![v]).unwrap_or_default()
    };
    // A refusal (401) answers with id null: give it the request's id so the caller sees it.
    for message in &mut messages {
        let refused =
            message.get("error").is_some() && message.get("id").is_none_or(Value::is_null);
        if refused && let (Some(object), Some(id)) = (message.as_object_mut(), &id) {
            object.insert("id".into(), id.clone());
        }
    }
    if messages.is_empty() && !status.is_success() {
        return failure(format!("kandev answered http {}", status.as_u16()));
    }
    if id.is_none() {
        return vec![];
    }
    messages
}
