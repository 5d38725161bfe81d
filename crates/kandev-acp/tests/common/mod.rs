//! A scripted fake agent on the other end of an in-memory pipe, for driving `AcpClient`.

#![allow(dead_code)]

use std::time::Duration;

use kandev_acp::{AcpClient, AcpConfig, AgentEvent};
use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};
use tokio::sync::mpsc::UnboundedReceiver;

/// A client that joins a conversation in the middle ([`AcpClient::join`]), its tagged
/// events, and the agent.
pub fn join(first_id: u64) -> (AcpClient, UnboundedReceiver<(u64, AgentEvent)>, FakeAgent) {
    let (client_end, agent_end) = tokio::io::duplex(64 * 1024);
    let (client_read, client_write) = tokio::io::split(client_end);
    let (client, events) =
        AcpClient::join(client_read, client_write, AcpConfig::default(), first_id, None);
    let (agent_read, agent_write) = tokio::io::split(agent_end);
    let agent = FakeAgent { lines: BufReader::new(agent_read).lines(), writer: agent_write };
    (client, events, agent)
}

/// How long a test waits for something that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// The agent side of a connection: reads what the client wrote, writes raw lines back.
pub struct FakeAgent {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
}

pub fn connect() -> (AcpClient, UnboundedReceiver<AgentEvent>, FakeAgent) {
    connect_with(AcpConfig::default())
}

pub fn connect_with(config: AcpConfig) -> (AcpClient, UnboundedReceiver<AgentEvent>, FakeAgent) {
    let (client_end, agent_end) = tokio::io::duplex(64 * 1024);
    let (client_read, client_write) = tokio::io::split(client_end);
    let (client, events) = AcpClient::connect(client_read, client_write, config);
    let (agent_read, agent_write) = tokio::io::split(agent_end);
    let agent = FakeAgent { lines: BufReader::new(agent_read).lines(), writer: agent_write };
    (client, events, agent)
}

impl FakeAgent {
    /// The next message the client sent.
    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("client wrote nothing in time")
            .expect("reading from client failed")
            .expect("client closed the connection");
        serde_json::from_str(&line).expect("client wrote a line that is not json")
    }

    /// `None` once the client closed the agent's input.
    pub async fn recv_eof(&mut self) -> Option<String> {
        tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("client neither wrote nor closed in time")
            .expect("reading from client failed")
    }

    /// The next message, which must be a request for `method`; returns `(id, params)`.
    pub async fn expect_request(&mut self, method: &str) -> (Value, Value) {
        let message = self.recv().await;
        assert_eq!(message["jsonrpc"], "2.0", "{message}");
        assert_eq!(message["method"], method, "{message}");
        assert!(message.get("id").is_some(), "expected a request, got {message}");
        (message["id"].clone(), message["params"].clone())
    }

    pub async fn send_line(&mut self, line: &str) {
        self.writer.write_all(line.as_bytes()).await.unwrap();
        self.writer.write_all(b"\n").await.unwrap();
        self.writer.flush().await.unwrap();
    }

    /// Writes raw bytes as they are (no newline added), e.g. a line that is not UTF-8.
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
        self.writer.flush().await.unwrap();
    }

    /// Ends the agent's output (as an exiting agent does).
    pub async fn close_output(&mut self) {
        self.writer.shutdown().await.unwrap();
    }

    pub async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    pub async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result})).await;
    }

    pub async fn respond_error(&mut self, id: &Value, code: i64, message: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
            .await;
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params})).await;
    }

    pub async fn request(&mut self, id: Value, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
    }
}

/// The next event, failing the test if none arrives in time.
pub async fn next_event(events: &mut UnboundedReceiver<AgentEvent>) -> AgentEvent {
    tokio::time::timeout(PATIENCE, events.recv())
        .await
        .expect("no agent event in time")
        .expect("event channel ended")
}
