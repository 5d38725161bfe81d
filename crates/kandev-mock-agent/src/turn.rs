//! One prompt turn: runs the echo reply or a script, records the conversation, answers the prompt.

use std::future::Future;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::rpc::{self, RpcError};
use crate::script::{self, Directive, PlanEntry, Prompt};

/// The line written by the `garbage` directive.
pub const GARBAGE_LINE: &str = "mock garbage: this line is not json {";

/// How a turn ends.
enum End {
    /// Answer the prompt with this stop reason.
    Stop(String),
    /// Answer the prompt with this error.
    Error(RpcError),
    /// Never answer.
    Hang,
    /// End the run with this exit code.
    Crash(i32),
}

impl End {
    fn cancelled() -> End {
        End::Stop("cancelled".to_owned())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ChunkKind {
    User,
    Message,
    Thought,
}

impl ChunkKind {
    fn name(self) -> &'static str {
        match self {
            ChunkKind::User => "user_message_chunk",
            ChunkKind::Message => "agent_message_chunk",
            ChunkKind::Thought => "agent_thought_chunk",
        }
    }

    fn update(self, text: &str) -> Value {
        json!({ "sessionUpdate": self.name(), "content": { "type": "text", "text": text } })
    }
}

enum Entry {
    Chunk { kind: ChunkKind, text: String },
    Update(Value),
}

/// The turn's part of the conversation history not yet handed to the store. Consecutive
/// chunks of one kind are stored as one (the replay sends whole messages).
#[derive(Default)]
struct Recorder {
    entries: Vec<Entry>,
}

impl Recorder {
    fn chunk(&mut self, kind: ChunkKind, text: &str) {
        if let Some(Entry::Chunk { kind: last, text: buffered }) = self.entries.last_mut()
            && *last == kind
        {
            buffered.push_str(text);
            return;
        }
        self.entries.push(Entry::Chunk { kind, text: text.to_owned() });
    }

    fn update(&mut self, update: Value) {
        self.entries.push(Entry::Update(update));
    }

    fn take(&mut self) -> Vec<Value> {
        self.entries
            .drain(..)
            .map(|entry| match entry {
                Entry::Chunk { kind, text } => kind.update(&text),
                Entry::Update(update) => update,
            })
            .collect()
    }
}

/// A running prompt. Dropping it (end or abort) unregisters it from its session.
pub(crate) struct Turn {
    agent: Arc<Agent>,
    session_id: String,
    request_id: Value,
    turn_id: u64,
    cancel: CancellationToken,
    history: Recorder,
    /// Tool calls started by `tool` and not yet completed by `tool_done` (last is current).
    open_tools: Vec<String>,
    /// The `usage` the prompt's answer carries (a `usage` directive with token counts).
    answer_usage: Option<Value>,
    /// Permission requests of `ask_permission_later` not awaited yet, oldest first.
    asked: std::collections::VecDeque<(u64, crate::agent::ClientAnswer)>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        for (id, _) in self.asked.drain(..) {
            self.agent.forget_call(id);
        }
        self.agent.end_turn(&self.session_id, self.turn_id);
    }
}

fn new_tool_call_id() -> String {
    format!("tool_{}", uuid::Uuid::new_v4().simple())
}

/// `path` inside `cwd`, refusing anything that could leave it.
fn resolve_in(cwd: &Path, path: &str) -> Result<PathBuf, String> {
    let relative = Path::new(path);
    if relative.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err("path must not contain `..`".to_owned());
    }
    let resolved = cwd.join(relative);
    if !resolved.starts_with(cwd) {
        return Err("path is outside the session cwd".to_owned());
    }
    Ok(resolved)
}

/// What the agent says back about a permission answer (a line of its own).
fn permission_said(answer: Result<Value, RpcError>) -> String {
    match answer {
        Ok(result) => {
            let outcome = result.pointer("/outcome/outcome").and_then(Value::as_str);
            let option = result.pointer("/outcome/optionId").and_then(Value::as_str);
            match (outcome, option) {
                (Some("selected"), Some(option)) => format!("permission: {option}\n"),
                (Some("cancelled"), _) => "permission: cancelled\n".to_owned(),
                _ => format!("permission: unexpected answer {result}\n"),
            }
        }
        Err(error) => format!("permission: error {}\n", error.message),
    }
}

impl Turn {
    pub(crate) fn new(
        agent: Arc<Agent>,
        session_id: String,
        request_id: Value,
        turn_id: u64,
        cancel: CancellationToken,
    ) -> Turn {
        Turn {
            agent,
            session_id,
            request_id,
            turn_id,
            cancel,
            history: Recorder::default(),
            answer_usage: None,
            open_tools: Vec::new(),
            asked: std::collections::VecDeque::new(),
        }
    }

    /// Runs the turn to its end and answers the prompt (unless it hangs or crashes).
    /// Runs the prompt `text`; `attached` are the lines saying what other blocks it had,
    /// said first.
    pub(crate) async fn run(mut self, text: String, attached: Vec<String>) {
        self.history.chunk(ChunkKind::User, &text);
        for line in attached {
            self.say(&format!("{line}\n")).await;
        }
        let end = match script::parse_prompt(&text) {
            Ok(Prompt::Echo { reply }) => self.echo(&reply).await,
            Ok(Prompt::Script(directives)) => self.script(directives).await,
            Err(error) => End::Error(RpcError::invalid_params(error)),
        };
        self.flush_history();
        match end {
            End::Stop(reason) => {
                let mut answer = json!({ "stopReason": reason });
                if let Some(usage) = self.answer_usage.take() {
                    answer["usage"] = usage;
                }
                let line = rpc::response_line(&self.request_id, answer);
                self.agent.send(line).await;
            }
            End::Error(error) => {
                self.agent.send(rpc::error_line(&self.request_id, &error)).await;
            }
            End::Hang => std::future::pending::<()>().await,
            End::Crash(code) => {
                self.agent.crash(code).await;
                std::future::pending::<()>().await;
            }
        }
    }

    fn flush_history(&mut self) {
        let updates = self.history.take();
        if let Err(error) = self.agent.store.append(&self.session_id, &updates) {
            tracing::warn!(%error, session = %self.session_id, "cannot store history");
        }
    }

    /// Runs `future` unless the turn is cancelled first (`None`).
    async fn unless_cancelled<T>(&self, future: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            value = future => Some(value),
        }
    }

    /// Sends an update; `keep` also records it in the conversation history.
    async fn update(&mut self, update: Value, keep: bool) {
        self.agent.send_update(&self.session_id, &update).await;
        if keep {
            self.history.update(update);
        }
    }

    async fn chunk(&mut self, kind: ChunkKind, text: &str) {
        self.agent.send_update(&self.session_id, &kind.update(text)).await;
        self.history.chunk(kind, text);
    }

    async fn say(&mut self, text: &str) {
        self.chunk(ChunkKind::Message, text).await;
    }

    async fn echo(&mut self, reply: &str) -> End {
        for chunk in script::echo_chunks(reply) {
            if self.cancel.is_cancelled() {
                return End::cancelled();
            }
            self.say(chunk).await;
        }
        End::Stop("end_turn".to_owned())
    }

    async fn script(&mut self, directives: Vec<Directive>) -> End {
        for directive in directives {
            if self.cancel.is_cancelled() {
                return End::cancelled();
            }
            if let Some(end) = self.directive(directive).await {
                return end;
            }
        }
        End::Stop("end_turn".to_owned())
    }

    /// Runs one directive; `Some` ends the turn.
    async fn directive(&mut self, directive: Directive) -> Option<End> {
        match directive {
            Directive::Say(text) => self.say(&text).await,
            Directive::Selection => {
                let text = match self.agent.selection(&self.session_id) {
                    Some(s) => format!(
                        "selection: mode={} model={} thought_level={}",
                        s.mode, s.model, s.thought_level
                    ),
                    None => "selection: unknown session".to_owned(),
                };
                self.say(&text).await
            }
            Directive::Think(text) => self.chunk(ChunkKind::Thought, &text).await,
            Directive::Stream { count, bytes, stamp, every } => {
                let start = tokio::time::Instant::now();
                for index in 0..count {
                    if self.cancel.is_cancelled() {
                        return Some(End::cancelled());
                    }
                    if let Some(every) = every {
                        // Due times from the start, so the pace does not drift with the
                        // time each write takes.
                        let due =
                            start + every.saturating_mul(u32::try_from(index).unwrap_or(u32::MAX));
                        self.unless_cancelled(tokio::time::sleep_until(due)).await?;
                    }
                    if stamp {
                        let text = script::stamped_chunk_text(index, bytes, script::unix_micros());
                        let update = ChunkKind::Message.update(&text);
                        self.agent.send_stamped_update(&self.session_id, &update, &text).await;
                        self.history.chunk(ChunkKind::Message, &text);
                    } else {
                        self.say(&script::stream_chunk_text(index, bytes)).await;
                    }
                }
            }
            Directive::Sleep(duration) => {
                self.flush_history();
                self.unless_cancelled(tokio::time::sleep(duration)).await?;
            }
            Directive::Tool { kind, title } => {
                let id = new_tool_call_id();
                let update = json!({
                    "sessionUpdate": "tool_call",
                    "toolCallId": id,
                    "title": title,
                    "kind": kind,
                    "status": "in_progress",
                });
                self.update(update, true).await;
                self.open_tools.push(id);
            }
            Directive::ToolDone { failed } => match self.open_tools.pop() {
                Some(id) => {
                    let status = if failed { "failed" } else { "completed" };
                    let update = json!({
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": id,
                        "status": status,
                    });
                    self.update(update, true).await;
                }
                None => tracing::warn!("tool_done without an open tool call"),
            },
            Directive::Plan(entries) => {
                let entries: Vec<Value> = entries
                    .iter()
                    .map(|PlanEntry { status, content }| {
                        json!({"content": content, "priority": "medium", "status": status})
                    })
                    .collect();
                self.update(json!({"sessionUpdate": "plan", "entries": entries}), true).await;
            }
            Directive::AskPermission(title) => return self.ask_permission(&title).await,
            Directive::AskPermissionLater(title) => {
                let params = self.permission_params(&title);
                self.flush_history();
                let asked = self.agent.send_call("session/request_permission", params).await;
                self.asked.push_back(asked);
            }
            Directive::AwaitPermission => match self.asked.pop_front() {
                Some((id, answer)) => {
                    let answer = self.unless_cancelled(crate::agent::answer_of(answer)).await;
                    self.agent.forget_call(id);
                    let Some(answer) = answer else {
                        return Some(End::cancelled());
                    };
                    self.say(&permission_said(answer)).await;
                }
                None => tracing::warn!("await_permission without ask_permission_later"),
            },
            Directive::Write { path, content } => return self.write(&path, content).await,
            Directive::Read(path) => return self.read(&path).await,
            Directive::Mcp { server, tool, arguments } => {
                return self.mcp(&server, &tool, arguments).await;
            }
            Directive::Terminal { command, cwd, limit } => {
                return self.terminal(&command, cwd, limit).await;
            }
            Directive::Usage { used, size, tokens } => {
                let update = json!({"sessionUpdate": "usage_update", "used": used, "size": size});
                self.update(update, false).await;
                if let Some((input, output)) = tokens {
                    self.answer_usage = Some(json!({
                        "inputTokens": input,
                        "outputTokens": output,
                        "totalTokens": input + output,
                    }));
                }
            }
            Directive::Commands(commands) => {
                let list: Vec<Value> = commands
                    .iter()
                    .map(|(name, description, hint)| {
                        let mut command = json!({"name": name, "description": description});
                        if let Some(hint) = hint {
                            command["input"] = json!({"hint": hint});
                        }
                        command
                    })
                    .collect();
                let update = json!({
                    "sessionUpdate": "available_commands_update",
                    "availableCommands": list,
                });
                self.update(update, false).await;
            }
            Directive::Stop(reason) => return Some(End::Stop(reason)),
            Directive::Error { code, message } => {
                return Some(End::Error(RpcError::new(code, message)));
            }
            Directive::Crash(code) => return Some(End::Crash(code)),
            Directive::Hang => return Some(End::Hang),
            Directive::Garbage => self.agent.send(GARBAGE_LINE.to_owned()).await,
            Directive::BigLine(bytes) => {
                let text = "x".repeat(bytes);
                self.update(ChunkKind::Message.update(&text), false).await;
            }
        }
        None
    }

    fn permission_params(&self, title: &str) -> Value {
        let tool_call_id = self.open_tools.last().cloned().unwrap_or_else(new_tool_call_id);
        json!({
            "sessionId": self.session_id,
            "toolCall": {
                "toolCallId": tool_call_id,
                "title": title,
                "kind": "other",
                "status": "pending",
            },
            "options": [
                {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "reject_once", "name": "Reject once", "kind": "reject_once"},
            ],
        })
    }

    async fn ask_permission(&mut self, title: &str) -> Option<End> {
        let params = self.permission_params(title);
        self.flush_history();
        let answer = self
            .unless_cancelled(self.agent.call_client("session/request_permission", params))
            .await;
        let Some(answer) = answer else {
            return Some(End::cancelled());
        };
        self.say(&permission_said(answer)).await;
        None
    }

    async fn mcp(&mut self, server: &str, tool: &str, arguments: Value) -> Option<End> {
        let Some(found) = self.agent.mcp_server(&self.session_id, server) else {
            self.say(&format!("mcp {tool} failed: no MCP server {server:?} was given\n")).await;
            return None;
        };
        self.flush_history();
        // What the agent said before the call is on its stdout before the call goes out.
        self.agent.flushed().await;
        let Some(result) =
            self.unless_cancelled(crate::mcp::call_tool(&found, tool, arguments)).await
        else {
            return Some(End::cancelled());
        };
        let said = match result {
            Ok(result) => {
                let failed = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
                let shown = match result.get("structuredContent") {
                    Some(structured) => structured.to_string(),
                    None => result.get("content").cloned().unwrap_or_default().to_string(),
                };
                let outcome = if failed { "error" } else { "ok" };
                format!("mcp {tool} {outcome}: {shown}\n")
            }
            Err(why) => format!("mcp {tool} failed: {why}\n"),
        };
        self.say(&said).await;
        None
    }

    fn cwd(&self) -> Result<PathBuf, String> {
        self.agent.session_cwd(&self.session_id).ok_or_else(|| "session is gone".to_owned())
    }

    async fn write(&mut self, path: &str, content: String) -> Option<End> {
        let target = match self.cwd().and_then(|cwd| resolve_in(&cwd, path)) {
            Ok(target) => target,
            Err(error) => {
                self.say(&format!("write {path} failed: {error}")).await;
                return None;
            }
        };
        let result = if self.agent.client_caps().write_text_file {
            let params = json!({
                "sessionId": self.session_id,
                "path": target.to_string_lossy(),
                "content": content,
            });
            let call = self.agent.call_client("fs/write_text_file", params);
            match self.unless_cancelled(call).await {
                None => return Some(End::cancelled()),
                Some(result) => result.map(|_| ()).map_err(|e| e.message),
            }
        } else {
            write_file(&target, content.as_bytes()).await
        };
        if let Err(error) = result {
            self.say(&format!("write {path} failed: {error}")).await;
        }
        None
    }

    async fn read(&mut self, path: &str) -> Option<End> {
        let target = match self.cwd().and_then(|cwd| resolve_in(&cwd, path)) {
            Ok(target) => target,
            Err(error) => {
                self.say(&format!("read {path} failed: {error}")).await;
                return None;
            }
        };
        let result = if self.agent.client_caps().read_text_file {
            let params = json!({ "sessionId": self.session_id, "path": target.to_string_lossy() });
            let call = self.agent.call_client("fs/read_text_file", params);
            match self.unless_cancelled(call).await {
                None => return Some(End::cancelled()),
                Some(Ok(result)) => match result.get("content").and_then(Value::as_str) {
                    Some(content) => Ok(content.to_owned()),
                    None => Err("answer has no content".to_owned()),
                },
                Some(Err(error)) => Err(error.message),
            }
        } else {
            tokio::fs::read_to_string(&target).await.map_err(|e| e.to_string())
        };
        match result {
            Ok(content) => self.say(&content).await,
            Err(error) => self.say(&format!("read {path} failed: {error}")).await,
        }
        None
    }
}

impl Turn {
    /// The `terminal` directive: the client runs the command; its output and exit code are
    /// said back. A cancel ends the turn without releasing (the client kills on cancel).
    async fn terminal(
        &mut self,
        command: &str,
        cwd: Option<String>,
        limit: Option<u64>,
    ) -> Option<End> {
        if !self.agent.client_caps().terminal {
            self.say("terminal: the client does not support terminals").await;
            return None;
        }
        let mut params = json!({
            "sessionId": self.session_id,
            "command": "sh",
            "args": ["-c", command],
            "env": [],
        });
        if let Some(cwd) = cwd {
            params["cwd"] = json!(cwd);
        }
        if let Some(limit) = limit {
            params["outputByteLimit"] = json!(limit);
        }
        self.flush_history();
        let created =
            match self.unless_cancelled(self.agent.call_client("terminal/create", params)).await {
                None => return Some(End::cancelled()),
                Some(Err(error)) => {
                    self.say(&format!("terminal failed: {}", error.message)).await;
                    return None;
                }
                Some(Ok(created)) => created,
            };
        let Some(terminal_id) =
            created.get("terminalId").and_then(Value::as_str).map(str::to_owned)
        else {
            self.say("terminal failed: the answer has no terminalId").await;
            return None;
        };
        let tool_call_id = new_tool_call_id();
        let update = json!({
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": command,
            "kind": "execute",
            "status": "in_progress",
            "content": [{"type": "terminal", "terminalId": terminal_id}],
        });
        self.update(update, true).await;
        self.flush_history();
        let ids = json!({"sessionId": self.session_id, "terminalId": terminal_id});
        let waited = self.agent.call_client("terminal/wait_for_exit", ids.clone());
        let exit = match self.unless_cancelled(waited).await {
            None => return Some(End::cancelled()),
            Some(result) => result,
        };
        let output = self.agent.call_client("terminal/output", ids.clone()).await;
        let _ = self.agent.call_client("terminal/release", ids).await;
        let failed = exit.as_ref().map_or(true, |e| e.get("exitCode") != Some(&json!(0)));
        let status = if failed { "failed" } else { "completed" };
        let update = json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": status,
        });
        self.update(update, true).await;
        let said = match (exit, output) {
            (Ok(exit), Ok(output)) => {
                let text = output.get("output").and_then(Value::as_str).unwrap_or("");
                let truncated = output.get("truncated").and_then(Value::as_bool).unwrap_or(false);
                let code = exit.get("exitCode").filter(|c| !c.is_null());
                let ended = match (code, exit.get("signal").and_then(Value::as_str)) {
                    (Some(code), _) => format!("exited with code {code}"),
                    (None, Some(signal)) => format!("was killed by {signal}"),
                    (None, None) => "ended".to_owned(),
                };
                let cut = if truncated { " (truncated)" } else { "" };
                format!("terminal {ended}; output{cut}: {text}")
            }
            (Err(error), _) | (_, Err(error)) => format!("terminal failed: {}", error.message),
        };
        self.say(&said).await;
        None
    }
}

async fn write_file(target: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(|e| e.to_string())?;
    }
    tokio::fs::write(target, bytes).await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_cwd() {
        let cwd = Path::new("/work/repo");
        assert_eq!(resolve_in(cwd, "a/b.txt").unwrap(), PathBuf::from("/work/repo/a/b.txt"));
        assert_eq!(resolve_in(cwd, "/work/repo/c.txt").unwrap(), PathBuf::from("/work/repo/c.txt"));
        assert!(resolve_in(cwd, "../escape.txt").is_err());
        assert!(resolve_in(cwd, "/etc/passwd").is_err());
    }

    #[test]
    fn recorder_coalesces_consecutive_chunks_of_one_kind() {
        let mut recorder = Recorder::default();
        recorder.chunk(ChunkKind::User, "hi");
        recorder.chunk(ChunkKind::Message, "a");
        recorder.chunk(ChunkKind::Message, "b");
        recorder.update(json!({"sessionUpdate": "plan", "entries": []}));
        recorder.chunk(ChunkKind::Message, "c");
        let taken = recorder.take();
        assert_eq!(
            taken,
            vec![
                ChunkKind::User.update("hi"),
                ChunkKind::Message.update("ab"),
                json!({"sessionUpdate": "plan", "entries": []}),
                ChunkKind::Message.update("c"),
            ]
        );
        assert!(recorder.take().is_empty());
    }
}
