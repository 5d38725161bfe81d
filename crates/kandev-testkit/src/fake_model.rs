//! A fake model API on 127.0.0.1 for the real-agent interoperability tests: it answers the
//! OpenAI Chat Completions, OpenAI Responses and Anthropic Messages APIs (streamed as SSE or
//! not) with a fixed greeting that quotes the last user text, logs every request, and refuses
//! (and records) every attempt to reach another host through it as a proxy.
//!
//! Tool calls (Chat Completions only): a user text with the line
//! `CALL_TOOL <name> <json-arguments>` is answered with a call of the request's tool named
//! `<name>`, else of its one tool ending in `_<name>` (agents prefix MCP tools with their
//! server's name, e.g. OpenCode's `kandev_create_task`; runs of `_` count as one, so Qwen
//! Code's `mcp__kandev__create_task` ends in `_kandev_create_task` too); the tool's result is
//! then answered with [`TOOL_REPLY_PREFIX`] and the result's text.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Every reply starts with this.
pub const REPLY_PREFIX: &str = "Hello from the fake model";

/// The reply to a tool's result starts with this, followed by the result's text.
pub const TOOL_REPLY_PREFIX: &str = "Hello from the fake model. The tool answered: ";

/// The directive that asks the fake for a tool call (see the module's documentation).
pub const CALL_TOOL: &str = "CALL_TOOL";

/// The model id the agents are configured with.
pub const MODEL: &str = "fake-model";

/// The API key the agents are given (the fake accepts any).
pub const API_KEY: &str = "fake-key-for-kandev-interop";

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;

/// What the fake did with one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A model call it answered.
    Answered,
    /// An attempt to reach another host (proxy `CONNECT` or absolute URL), refused.
    Blocked,
    /// A request for the npm registry (agents that install plugins at run time), refused.
    Registry,
    /// Anything else, answered 404.
    Unknown,
}

/// One logged request.
#[derive(Clone, Debug)]
pub struct Logged {
    pub method: String,
    pub target: String,
    pub outcome: Outcome,
    /// For model calls: the API, the model, whether streamed, and the quoted user text.
    pub summary: String,
    /// For model calls: the user text the reply quotes.
    pub said: String,
    /// The request body (JSON), `null` when it was not JSON.
    pub body: Value,
}

impl std::fmt::Display for Logged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {} {} {}", self.outcome, self.method, self.target, self.summary)
    }
}

/// The running fake; stops when dropped.
pub struct FakeModel {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Logged>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeModel {
    /// Binds a random port on 127.0.0.1 and serves until dropped; every request is also
    /// printed to stderr as it arrives, prefixed with `label`.
    pub async fn start(label: &str) -> std::io::Result<FakeModel> {
        let label = label.to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::clone(&log);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let log = Arc::clone(&shared);
                let label = label.clone();
                tokio::spawn(async move {
                    if let Err(err) = serve_connection(stream, addr, &log, &label).await {
                        eprintln!("[fake-model {label}] connection error: {err}");
                    }
                });
            }
        });
        Ok(FakeModel { addr, log, task })
    }

    /// `http://127.0.0.1:PORT` (no trailing slash, no `/v1`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Logged> {
        self.log.lock().unwrap().clone()
    }

    /// The model calls answered so far.
    pub fn answered(&self) -> usize {
        self.requests().iter().filter(|r| r.outcome == Outcome::Answered).count()
    }

    /// The log as text, one request a line.
    pub fn log_text(&self) -> String {
        self.requests().iter().fold(String::new(), |mut out, r| {
            let _ = writeln!(out, "  {r}");
            out
        })
    }
}

struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

async fn serve_connection(
    stream: TcpStream,
    own: SocketAddr,
    log: &Mutex<Vec<Logged>>,
    label: &str,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    // One request per connection: every response says `Connection: close`.
    let Some(request) = read_request(&mut reader).await? else { return Ok(()) };
    let response = {
        let mut log = log.lock().unwrap();
        let n = log.len() + 1;
        let (logged, response) = respond(&request, own, n);
        eprintln!("[fake-model {label}] #{n} {logged}");
        log.push(logged);
        response
    };
    write.write_all(&response).await?;
    write.flush().await?;
    write.shutdown().await
}

async fn read_request<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<Request>> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        if reader.read_until(b'\n', &mut line).await? == 0 {
            return Ok(None);
        }
        if line == b"\r\n" || line == b"\n" {
            break;
        }
        head.extend_from_slice(&line);
        if head.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too large"));
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let method = first.next().unwrap_or_default().to_owned();
    let target = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut request = Request { method, target, headers, body: Vec::new() };
    if request.method == "CONNECT" {
        return Ok(Some(request));
    }
    if request.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).await?;
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .map_err(std::io::Error::other)?;
            if request.body.len() + size > MAX_BODY {
                return Err(std::io::Error::other("request body too large"));
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).await?;
            chunk.truncate(size);
            request.body.extend_from_slice(&chunk);
            if size == 0 {
                break;
            }
        }
    } else if let Some(length) = request.header("content-length") {
        let length: usize = length.parse().map_err(std::io::Error::other)?;
        if length > MAX_BODY {
            return Err(std::io::Error::other("request body too large"));
        }
        request.body = vec![0; length];
        reader.read_exact(&mut request.body).await?;
    }
    Ok(Some(request))
}

fn respond(request: &Request, own: SocketAddr, n: usize) -> (Logged, Vec<u8>) {
    let mut logged = Logged {
        method: request.method.clone(),
        target: request.target.clone(),
        outcome: Outcome::Unknown,
        summary: String::new(),
        said: String::new(),
        body: Value::Null,
    };
    // Proxy requests: CONNECT host:port, or an absolute URL for another host.
    let own_prefix = format!("http://{own}");
    let path = match request.target.strip_prefix(&own_prefix) {
        Some(rest) => rest.to_owned(),
        None if request.method == "CONNECT" || request.target.contains("://") => {
            logged.outcome = Outcome::Blocked;
            logged.summary = "refused: nothing may leave the machine".to_owned();
            return (logged, plain(403, "blocked by the kandev interop fake model\n"));
        }
        None => request.target.clone(),
    };
    let path = path.split('?').next().unwrap_or_default().to_owned();
    if path.starts_with("/npm/") {
        logged.outcome = Outcome::Registry;
        logged.summary = "refused: no registry at test time".to_owned();
        return (logged, json_response(404, &json!({"error": "Not found"})));
    }
    if let Some(encoding) = request.header("content-encoding") {
        logged.summary = format!("cannot read a body with content-encoding {encoding}");
        let response = json_response(415, &json!({"error": logged.summary}));
        return (logged, response);
    }
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    logged.body = body.clone();
    let model = body["model"].as_str().unwrap_or(MODEL).to_owned();
    let stream = body["stream"].as_bool().unwrap_or(false);
    let api = match (request.method.as_str(), path.as_str()) {
        ("POST", p) if p.ends_with("/chat/completions") => Api::Chat,
        ("POST", p) if p.ends_with("/responses") => Api::Responses,
        ("POST", p) if p.ends_with("/messages/count_tokens") => {
            logged.outcome = Outcome::Answered;
            logged.summary = "anthropic count_tokens".to_owned();
            return (logged, json_response(200, &json!({"input_tokens": 10})));
        }
        ("POST", p) if p.ends_with("/messages") => Api::Anthropic,
        ("GET", p) if p.ends_with("/models") => {
            logged.outcome = Outcome::Answered;
            logged.summary = "model list".to_owned();
            let models = json!({
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "kandev"}],
                "models": [],
            });
            return (logged, json_response(200, &models));
        }
        _ => return (logged, json_response(404, &json!({"error": "not found"}))),
    };
    if let Api::Chat = api
        && let Some((summary, answer)) = tool_turn(&body, n)
    {
        logged.outcome = Outcome::Answered;
        logged.summary = format!("{api:?} model={model} stream={stream} {summary}");
        let response = match (answer, stream) {
            (ChatAnswer::Call(call), true) => {
                sse(&chat_call_events(&model, &call, n), Framing::DataOnly)
            }
            (ChatAnswer::Call(call), false) => {
                json_response(200, &chat_call_message(&model, &call, n))
            }
            (ChatAnswer::Text(text), true) => {
                sse(&chat_events(&model, &text, n), Framing::DataOnly)
            }
            (ChatAnswer::Text(text), false) => json_response(200, &chat_message(&model, &text, n)),
        };
        return (logged, response);
    }
    let said = last_user_text(api, &body);
    let reply = format!("{REPLY_PREFIX}. You said: {said}");
    logged.outcome = Outcome::Answered;
    logged.summary = format!("{api:?} model={model} stream={stream} said={said:?}");
    logged.said = said;
    let response = match (api, stream) {
        (Api::Chat, true) => sse(&chat_events(&model, &reply, n), Framing::DataOnly),
        (Api::Chat, false) => json_response(200, &chat_message(&model, &reply, n)),
        (Api::Responses, _) => sse(&responses_events(&model, &reply, n), Framing::Named),
        (Api::Anthropic, true) => sse(&anthropic_events(&model, &reply, n), Framing::Named),
        (Api::Anthropic, false) => json_response(200, &anthropic_message(&model, &reply, n)),
    };
    (logged, response)
}

/// A tool call the fake makes: the tool's name as the request offered it, and its arguments.
struct ToolCall {
    name: String,
    arguments: String,
}

enum ChatAnswer {
    Call(ToolCall),
    Text(String),
}

/// The turn's answer when tools are involved: after a tool's result (the conversation ends
/// with a `tool` message), a reply quoting it; for a last user text with a [`CALL_TOOL`]
/// line, a call of that tool (or, when the request offers no such tool, a text saying so).
/// `None` otherwise. Returns a summary for the log too.
fn tool_turn(body: &Value, n: usize) -> Option<(String, ChatAnswer)> {
    let messages = body["messages"].as_array()?;
    let last = messages.last()?;
    if last["role"] == "tool" {
        let result = texts(&last["content"]).join(" ");
        let result: String = result.split_whitespace().collect::<Vec<_>>().join(" ");
        let result: String = result.chars().take(4000).collect();
        let summary = format!("tool result={:?}", result.chars().take(120).collect::<String>());
        return Some((summary, ChatAnswer::Text(format!("{TOOL_REPLY_PREFIX}{result}"))));
    }
    // The user's messages since the model last spoke (agents add context blocks as user
    // messages of their own).
    let text: Vec<String> = messages
        .iter()
        .rev()
        .take_while(|m| m["role"] == "user")
        .flat_map(|m| texts(&m["content"]))
        .collect();
    let text = text.join("\n");
    let line = text.lines().find_map(|l| l.trim().strip_prefix(CALL_TOOL))?;
    let (wanted, arguments) = line.trim().split_once(' ').unwrap_or((line.trim(), "{}"));
    let offered: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    let suffix = format!("_{}", single_underscores(wanted));
    let ending: Vec<&String> =
        offered.iter().filter(|o| single_underscores(o).ends_with(&suffix)).collect();
    let name = match (offered.iter().find(|o| *o == wanted), ending.as_slice()) {
        (Some(exact), _) => exact,
        (None, [one]) => *one,
        _ => {
            // Requests without tools (title generation) get a plain text.
            let text = format!("{REPLY_PREFIX}. No one tool {wanted} among {offered:?}");
            return Some((format!("no one tool {wanted}"), ChatAnswer::Text(text)));
        }
    };
    let summary = format!("tool call #{n} {name} {arguments}");
    let call = ToolCall { name: name.clone(), arguments: arguments.trim().to_owned() };
    Some((summary, ChatAnswer::Call(call)))
}

/// The name with each run of `_` made one (`mcp__kandev__create_task` is
/// `mcp_kandev_create_task`).
fn single_underscores(name: &str) -> String {
    name.split('_').filter(|part| !part.is_empty()).collect::<Vec<_>>().join("_")
}

fn chat_call_events(model: &str, call: &ToolCall, n: usize) -> Vec<Value> {
    let id = format!("chatcmpl-fake-{n}");
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let first = json!({"role": "assistant", "content": null, "tool_calls": [{
        "index": 0, "id": format!("call_fake_{n}"), "type": "function",
        "function": {"name": call.name, "arguments": ""}}]});
    let arguments =
        json!({"tool_calls": [{"index": 0, "function": {"arguments": call.arguments}}]});
    let mut last = chunk(json!({}), json!("tool_calls"));
    last["usage"] = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    vec![chunk(first, Value::Null), chunk(arguments, Value::Null), last]
}

fn chat_call_message(model: &str, call: &ToolCall, n: usize) -> Value {
    json!({
        "id": format!("chatcmpl-fake-{n}"), "object": "chat.completion", "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": format!("call_fake_{n}"), "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
}

#[derive(Clone, Copy, Debug)]
enum Api {
    Chat,
    Responses,
    Anthropic,
}

/// The last text the user wrote, whitespace collapsed, at most 200 characters. Agents add
/// context blocks (`<system-reminder>`, `<environment_context>`) as user text: those are
/// skipped while there is other user text.
fn last_user_text(api: Api, body: &Value) -> String {
    let items = match api {
        Api::Chat | Api::Anthropic => &body["messages"],
        Api::Responses => &body["input"],
    };
    let user_texts: Vec<String> = items
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| texts(&m["content"]))
        .collect();
    let text = user_texts
        .iter()
        .rev()
        .find(|t| !is_context(t))
        .or(user_texts.last())
        .cloned()
        .unwrap_or_default();
    text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(200).collect()
}

fn is_context(text: &str) -> bool {
    text.trim_start().starts_with('<')
}

fn texts(content: &Value) -> Vec<String> {
    match content {
        Value::String(s) => vec![s.clone()],
        Value::Array(parts) => {
            parts.iter().filter_map(|p| p["text"].as_str()).map(str::to_owned).collect()
        }
        _ => vec![],
    }
}

/// The reply in three streamed pieces.
fn pieces(reply: &str) -> Vec<String> {
    let words: Vec<&str> = reply.split_inclusive(' ').collect();
    let third = words.len().div_ceil(3).max(1);
    words.chunks(third).map(|c| c.concat()).collect()
}

fn chat_events(model: &str, reply: &str, n: usize) -> Vec<Value> {
    let id = format!("chatcmpl-fake-{n}");
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), Value::Null)];
    for piece in pieces(reply) {
        events.push(chunk(json!({"content": piece}), Value::Null));
    }
    let mut last = chunk(json!({}), json!("stop"));
    last["usage"] = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    events.push(last);
    events
}

fn chat_message(model: &str, reply: &str, n: usize) -> Value {
    json!({
        "id": format!("chatcmpl-fake-{n}"), "object": "chat.completion", "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
}

fn responses_events(model: &str, reply: &str, n: usize) -> Vec<Value> {
    let response_id = format!("resp_fake_{n}");
    let item_id = format!("msg_fake_{n}");
    let part = json!({"type": "output_text", "text": reply, "annotations": []});
    let item = json!({"type": "message", "id": item_id, "role": "assistant",
                      "status": "completed", "content": [part]});
    let usage = json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                       "total_tokens": 15});
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": response_id, "object": "response", "created_at": 0, "model": model,
               "status": status, "output": output, "usage": usage})
    };
    let mut events = vec![
        json!({"type": "response.created",
               "response": response("in_progress", json!([]), Value::Null)}),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "message", "id": item_id, "role": "assistant",
                        "status": "in_progress", "content": []}}),
        json!({"type": "response.content_part.added", "item_id": item_id, "output_index": 0,
               "content_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": []}}),
    ];
    for piece in pieces(reply) {
        events.push(json!({"type": "response.output_text.delta", "item_id": item_id,
                           "output_index": 0, "content_index": 0, "delta": piece}));
    }
    events.extend([
        json!({"type": "response.output_text.done", "item_id": item_id, "output_index": 0,
               "content_index": 0, "text": reply}),
        json!({"type": "response.content_part.done", "item_id": item_id, "output_index": 0,
               "content_index": 0, "part": part}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed",
               "response": response("completed", json!([item]), usage)}),
    ]);
    events
}

fn anthropic_events(model: &str, reply: &str, n: usize) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "message_start", "message": {
            "id": format!("msg_fake_{n}"), "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
    ];
    for piece in pieces(reply) {
        events.push(json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": piece}}));
    }
    events.extend([
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta",
               "delta": {"stop_reason": "end_turn", "stop_sequence": null},
               "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ]);
    events
}

fn anthropic_message(model: &str, reply: &str, n: usize) -> Value {
    json!({
        "id": format!("msg_fake_{n}"), "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn",
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5},
    })
}

/// How SSE events are framed.
#[derive(Clone, Copy)]
enum Framing {
    /// `data:` lines only, ended by `data: [DONE]` (Chat Completions).
    DataOnly,
    /// `event: <type>` before each `data:` line (Responses, Anthropic Messages).
    Named,
}

/// A complete SSE response (the body ends when the connection closes).
fn sse(events: &[Value], framing: Framing) -> Vec<u8> {
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Connection: close\r\n\r\n",
    );
    for data in events {
        if let (Framing::Named, Some(name)) = (framing, data["type"].as_str()) {
            let _ = writeln!(out, "event: {name}");
        }
        let _ = write!(out, "data: {data}\n\n");
    }
    if let Framing::DataOnly = framing {
        out.push_str("data: [DONE]\n\n");
    }
    out.into_bytes()
}

fn json_response(status: u16, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    let mut out = head(status, "application/json", body.len());
    out.extend_from_slice(body.as_bytes());
    out
}

fn plain(status: u16, body: &str) -> Vec<u8> {
    let mut out = head(status, "text/plain", body.len());
    out.extend_from_slice(body.as_bytes());
    out
}

fn head(status: u16, content_type: &str, length: usize) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Unsupported Media Type",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n\
         Connection: close\r\n\r\n"
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn called(offered: &[&str], line: &str) -> Option<String> {
        let tools: Vec<Value> =
            offered.iter().map(|n| json!({"type": "function", "function": {"name": n}})).collect();
        let body = json!({"messages": [{"role": "user", "content": line}], "tools": tools});
        match tool_turn(&body, 1)?.1 {
            ChatAnswer::Call(call) => Some(call.name),
            ChatAnswer::Text(_) => None,
        }
    }

    #[test]
    fn a_tool_is_found_by_its_server_prefixed_name_in_either_spelling() {
        let line = "CALL_TOOL kandev_create_task {}";
        let opencode = ["kandev_create_task", "board_create_task"];
        assert_eq!(called(&opencode, line).as_deref(), Some("kandev_create_task"));
        let qwen = ["mcp__kandev__create_task", "mcp__board__create_task"];
        assert_eq!(called(&qwen, line).as_deref(), Some("mcp__kandev__create_task"));
        assert_eq!(called(&["mcp__board__create_task"], line), None);
    }
}
