//! Test client for the in-process mock agent: raw JSON lines over `tokio::io::duplex` pipes.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use kandev_mock_agent::{MockConfig, MockError, RunOutcome, run};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::task::JoinHandle;

pub use kandev_testkit::{DEADLINE, temp_dir};

/// The client end of one mock agent run.
pub struct Client {
    to_agent: Option<DuplexStream>,
    from_agent: BufReader<DuplexStream>,
    run: JoinHandle<Result<RunOutcome, MockError>>,
    next_id: u64,
}

impl Client {
    /// Starts `run(config)` on a task, connected to this client.
    pub fn start(config: MockConfig) -> Client {
        let (to_agent, agent_in) = tokio::io::duplex(1 << 20);
        let (agent_out, from_agent) = tokio::io::duplex(1 << 20);
        let run = tokio::spawn(run(config, agent_in, agent_out));
        Client { to_agent: Some(to_agent), from_agent: BufReader::new(from_agent), run, next_id: 1 }
    }

    /// A client whose agent keeps state in `dir`.
    pub fn with_state(dir: &Path) -> Client {
        Client::start(MockConfig { state_dir: Some(dir.to_owned()), ..MockConfig::default() })
    }

    pub async fn send_raw(&mut self, line: &str) {
        let writer = self.to_agent.as_mut().expect("input already closed");
        writer.write_all(line.as_bytes()).await.unwrap();
        writer.write_all(b"\n").await.unwrap();
    }

    pub async fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string()).await;
    }

    /// Sends a request and returns its id.
    pub async fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        id
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params})).await;
    }

    /// Answers a request the agent sent.
    pub async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result})).await;
    }

    /// The next raw line, or `None` if nothing comes within `wait` (or the output ended).
    pub async fn try_next_line(&mut self, wait: Duration) -> Option<String> {
        let mut line = String::new();
        match tokio::time::timeout(wait, self.from_agent.read_line(&mut line)).await {
            Ok(Ok(0)) | Err(_) => None,
            Ok(Ok(_)) => Some(line.trim_end_matches('\n').to_owned()),
            Ok(Err(error)) => panic!("reading agent output: {error}"),
        }
    }

    pub async fn next_line(&mut self) -> String {
        self.try_next_line(DEADLINE).await.expect("no line from the agent in time")
    }

    /// The next message, parsed.
    pub async fn next(&mut self) -> Value {
        let line = self.next_line().await;
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not json ({e}): {line}"))
    }

    /// Reads messages until the answer to `id`; returns the messages before it and the answer.
    pub async fn until_response(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return (before, message);
            }
            before.push(message);
        }
    }

    /// Sends a request and waits for its answer; returns the messages before it and the answer.
    pub async fn call(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.request(method, params).await;
        self.until_response(id).await
    }

    /// `initialize` with no fs capabilities; returns the result.
    pub async fn initialize(&mut self) -> Value {
        self.initialize_with(json!({})).await
    }

    pub async fn initialize_with(&mut self, client_capabilities: Value) -> Value {
        let params = json!({
            "protocolVersion": 1,
            "clientCapabilities": client_capabilities,
            "clientInfo": {"name": "test", "version": "0"},
        });
        let (before, answer) = self.call("initialize", params).await;
        assert!(before.is_empty(), "{before:?}");
        answer["result"].clone()
    }

    /// `session/new` in `cwd`; returns the session id (the `available_commands_update` that
    /// follows is consumed).
    pub async fn new_session(&mut self, cwd: &Path) -> String {
        let (_, answer) = self.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await;
        let id = answer["result"]["sessionId"].as_str().expect("session id").to_owned();
        let commands = self.next().await;
        assert_eq!(commands["params"]["update"]["sessionUpdate"], "available_commands_update");
        id
    }

    /// Sends a prompt with one text block; returns the request id.
    pub async fn prompt(&mut self, session_id: &str, text: &str) -> u64 {
        let params = json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]});
        self.request("session/prompt", params).await
    }

    /// Prompts and waits for the answer; returns the `update` objects before it and the answer.
    pub async fn prompt_turn(&mut self, session_id: &str, text: &str) -> (Vec<Value>, Value) {
        let id = self.prompt(session_id, text).await;
        let (before, answer) = self.until_response(id).await;
        (updates_of(&before), answer)
    }

    pub async fn cancel(&mut self, session_id: &str) {
        self.notify("session/cancel", json!({"sessionId": session_id})).await;
    }

    /// Closes the agent's input and returns how the run ended.
    pub async fn close(mut self) -> RunOutcome {
        self.to_agent = None;
        self.finish().await
    }

    /// Waits for the run to end on its own (e.g. `crash`).
    pub async fn finish(self) -> RunOutcome {
        tokio::time::timeout(DEADLINE, self.run)
            .await
            .expect("run did not end in time")
            .expect("run task panicked")
            .expect("run failed")
    }
}

/// The `update` objects of `session/update` notifications (panics on anything else).
pub fn updates_of(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            assert_eq!(m["method"], "session/update", "unexpected message {m}");
            m["params"]["update"].clone()
        })
        .collect()
}

/// The texts of `agent_message_chunk` updates.
pub fn message_texts(updates: &[Value]) -> Vec<String> {
    chunk_texts(updates, "agent_message_chunk")
}

pub fn chunk_texts(updates: &[Value], kind: &str) -> Vec<String> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .map(|u| u["content"]["text"].as_str().unwrap().to_owned())
        .collect()
}

/// A `#!mock` script prompt from directive lines.
pub fn script(lines: &[&str]) -> String {
    format!("#!mock\n{}", lines.join("\n"))
}
