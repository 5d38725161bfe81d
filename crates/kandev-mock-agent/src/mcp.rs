//! The mock agent's MCP client, for the `mcp <server> <tool> <json>` directive: it calls a
//! tool of one of the MCP servers the client handed over in `session/new` / `session/load`
//! (`mcpServers`), the way real agents do. The http form (`{type: "http", name, url,
//! headers}`) is spoken over Streamable HTTP with plain JSON or SSE answers; the stdio form
//! (`{name, command, args, env}`) starts the server as a child process, as agents do, and
//! speaks line-delimited JSON-RPC to it. Deliberately small: `initialize`,
//! `notifications/initialized`, one `tools/call`.
//!
//! This is the one place outside the runtime crate that starts a process (the tidy test
//! names it): a stdio MCP server is started by its agent, and the mock plays the agent.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The protocol version the mock asks for.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// An MCP server as the client described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum McpServer {
    Http { name: String, url: String, headers: Vec<(String, String)> },
    Stdio { name: String, command: String, args: Vec<String>, env: Vec<(String, String)> },
}

impl McpServer {
    pub(crate) fn name(&self) -> &str {
        match self {
            McpServer::Http { name, .. } | McpServer::Stdio { name, .. } => name,
        }
    }
}

fn pairs(value: Option<&Value>) -> Vec<(String, String)> {
    let items = value.and_then(Value::as_array).cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|item| {
            let name = item.get("name")?.as_str()?;
            let value = item.get("value")?.as_str()?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect()
}

/// The servers of an `mcpServers` array; entries the mock cannot use are skipped.
pub(crate) fn parse_servers(value: Option<&Value>) -> Vec<McpServer> {
    let items = value.and_then(Value::as_array).cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|item| {
            let name = item.get("name")?.as_str()?.to_owned();
            if let Some(url) = item.get("url").and_then(Value::as_str) {
                return Some(McpServer::Http {
                    name,
                    url: url.to_owned(),
                    headers: pairs(item.get("headers")),
                });
            }
            let command = item.get("command")?.as_str()?.to_owned();
            let args = item
                .get("args")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            Some(McpServer::Stdio { name, command, args, env: pairs(item.get("env")) })
        })
        .collect()
}

/// Calls `tool` with `arguments`: the `tools/call` result (`content`, `structuredContent`,
/// `isError`), or why the call did not get one.
pub(crate) async fn call_tool(
    server: &McpServer,
    tool: &str,
    arguments: Value,
) -> Result<Value, String> {
    match server {
        McpServer::Http { url, headers, .. } => http_call(url, headers, tool, arguments).await,
        McpServer::Stdio { command, args, env, .. } => {
            stdio_call(command, args, env, tool, arguments).await
        }
    }
}

fn initialize() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": { "name": "kandev-mock-agent", "version": env!("CARGO_PKG_VERSION") },
        },
    })
}

fn initialized() -> Value {
    json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })
}

fn tools_call(tool: &str, arguments: Value) -> Value {
    json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": tool, "arguments": arguments },
    })
}

/// The JSON-RPC `result` of an answer, or its error as text.
fn result_of(answer: Value) -> Result<Value, String> {
    if let Some(error) = answer.get("error") {
        let message = error.get("message").and_then(Value::as_str).unwrap_or("no message");
        return Err(format!("error {}: {message}", error.get("code").unwrap_or(&Value::Null)));
    }
    answer.get("result").cloned().ok_or_else(|| format!("an answer without a result: {answer}"))
}

async fn http_call(
    url: &str,
    headers: &[(String, String)],
    tool: &str,
    arguments: Value,
) -> Result<Value, String> {
    let client = reqwest::Client::new();
    let post = |body: Value, version: bool| {
        let mut request = client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string());
        if version {
            request = request.header("mcp-protocol-version", PROTOCOL_VERSION);
        }
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request
    };
    let answer = |response: reqwest::Response| async move {
        let status = response.status();
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = response.text().await.map_err(|e| e.to_string())?;
        let text = if sse {
            // The last `data:` line that holds a JSON-RPC answer.
            body.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .rfind(|d| d.contains("\"jsonrpc\""))
                .unwrap_or_default()
                .to_owned()
        } else {
            body
        };
        let value: Value = serde_json::from_str(&text)
            .map_err(|_| format!("http {}: {}", status.as_u16(), text.trim()))?;
        if !status.is_success() {
            let message = value.pointer("/error/message").and_then(Value::as_str);
            return Err(format!("http {}: {}", status.as_u16(), message.unwrap_or(text.trim())));
        }
        result_of(value)
    };
    let response = post(initialize(), false).send().await.map_err(|e| e.to_string())?;
    answer(response).await?;
    let sent = post(initialized(), true).send().await.map_err(|e| e.to_string())?;
    if !sent.status().is_success() {
        return Err(format!("http {} to notifications/initialized", sent.status().as_u16()));
    }
    let response =
        post(tools_call(tool, arguments), true).send().await.map_err(|e| e.to_string())?;
    answer(response).await
}

async fn stdio_call(
    command: &str,
    args: &[String],
    env: &[(String, String)],
    tool: &str,
    arguments: Value,
) -> Result<Value, String> {
    #[expect(
        clippy::disallowed_methods,
        reason = "an agent starts the stdio MCP servers it is handed, as every agent does"
    )]
    let mut child = tokio::process::Command::new(command)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {command}: {e}"))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the server's pipes are missing".to_owned());
    };
    let mut lines = BufReader::new(stdout).lines();
    let mut send = async |message: Value| {
        let line = format!("{message}\n");
        stdin.write_all(line.as_bytes()).await.map_err(|e| e.to_string())
    };
    let mut answer_to = async |id: i64| -> Result<Value, String> {
        loop {
            let line = lines.next_line().await.map_err(|e| e.to_string())?;
            let line = line.ok_or_else(|| "the server closed its output".to_owned())?;
            let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
            if message.get("id").and_then(Value::as_i64) == Some(id) {
                return result_of(message);
            }
        }
    };
    send(initialize()).await?;
    answer_to(1).await?;
    send(initialized()).await?;
    send(tools_call(tool, arguments)).await?;
    let result = answer_to(2).await;
    let _ = child.kill().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_of_mcp_servers_parse() {
        let servers = json!([
            {"type": "http", "name": "kandev", "url": "http://127.0.0.1:1/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer t"}]},
            {"name": "other", "command": "/bin/x", "args": ["a"], "env": [{"name": "K", "value": "v"}]},
            {"name": "broken"},
        ]);
        assert_eq!(
            parse_servers(Some(&servers)),
            vec![
                McpServer::Http {
                    name: "kandev".into(),
                    url: "http://127.0.0.1:1/mcp".into(),
                    headers: vec![("Authorization".into(), "Bearer t".into())],
                },
                McpServer::Stdio {
                    name: "other".into(),
                    command: "/bin/x".into(),
                    args: vec!["a".into()],
                    env: vec![("K".into(), "v".into())],
                },
            ]
        );
    }
}
