//! The agent's ACP terminals (`terminal/*`, docs/terminals.md): commands run for the agent in
//! the session's working directory (a `cwd` outside it is refused like a file path), each in
//! a process group of its own that the session owns. Their output is bounded (ACP
//! `outputByteLimit`, default 1 MiB, cut at a UTF-8 boundary) and, once a tool call shows a
//! terminal, streamed into that tool call's message (`metadata.terminals[<id>]`) and kept
//! there when it ends. Cancel, stop, reset, delete and the agent's exit kill them all.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kandev_acp::{TerminalAnswer, TerminalExitStatus, TerminalRequest, TerminalResponder};
use kandev_domain::MessageId;
use kandev_domain::message_meta::{MessageMeta, TerminalMeta};
use kandev_runtime::confine::{PathError, Root};
use kandev_runtime::terminal::{
    CommandSpec, DEFAULT_OUTPUT_LIMIT, TerminalExit, TerminalOutput, run_command,
};

use crate::command::Command;
use crate::error::Result;
use crate::files::{FAILED, REFUSED};
use crate::publish;
use crate::session::state::SessionActor;

/// Largest `outputByteLimit` honoured (a larger one is lowered to this): 16 MiB.
const MAX_OUTPUT_LIMIT: u64 = 16 * 1024 * 1024;

/// Shortest pause between two transcript updates of one terminal's output.
const STREAM_INTERVAL: Duration = Duration::from_millis(100);

fn exit_status(exit: TerminalExit) -> TerminalExitStatus {
    TerminalExitStatus { exit_code: exit.exit_code, signal: exit.signal }
}

fn unknown(id: &str) -> (i64, String) {
    (REFUSED, format!("unknown terminal `{id}`; create one with terminal/create first"))
}

/// The command's working directory: the session's, or `cwd` beneath it.
fn confined_cwd(root: &str, cwd: Option<&str>) -> std::result::Result<Root, (i64, String)> {
    let root = Root::open(&PathBuf::from(root))
        .map_err(|e| (FAILED, format!("the working directory is not available: {e}")))?;
    let Some(cwd) = cwd else { return Ok(root) };
    let refused = |e: PathError| match e {
        PathError::Forbidden { .. } => (REFUSED, format!("terminal cwd refused: {e}")),
        other => (FAILED, format!("terminal cwd: {other}")),
    };
    let path = root.agent_path(cwd).map_err(refused)?;
    root.subdir(&path).map_err(refused)
}

/// A terminal's state as kept in its tool call's metadata.
fn output_meta(output: &TerminalOutput) -> TerminalMeta {
    TerminalMeta {
        output: output.output.clone(),
        truncated: output.truncated,
        exit_code: output.exit.as_ref().and_then(|e| e.exit_code).map(i64::from),
        signal: output.exit.as_ref().and_then(|e| e.signal.clone()),
        exited: output.exit.is_some(),
    }
}

impl SessionActor {
    pub(super) fn on_terminal(&mut self, request: TerminalRequest, responder: TerminalResponder) {
        match request {
            TerminalRequest::Create { command, args, env, cwd, output_byte_limit } => {
                let result = self.create_terminal(command, args, env, cwd, output_byte_limit);
                responder
                    .respond(result.map(|terminal_id| TerminalAnswer::Created { terminal_id }));
            }
            TerminalRequest::Output { terminal_id } => {
                let answer = self.terminals.get(&terminal_id).map(|t| {
                    let output = t.output();
                    TerminalAnswer::Output {
                        output: output.output,
                        truncated: output.truncated,
                        exit_status: output.exit.map(exit_status),
                    }
                });
                responder.respond(answer.ok_or_else(|| unknown(&terminal_id)));
            }
            TerminalRequest::WaitForExit { terminal_id } => {
                match self.terminals.get(&terminal_id) {
                    // The answer goes through the actor, so the tool call keeps the final output
                    // before the agent hears of the exit.
                    Some(terminal) => {
                        let inbox = self.sender();
                        self.spawn(async move {
                            terminal.wait().await;
                            let output = terminal.output();
                            let _ = inbox
                                .send(Command::TerminalExited { terminal_id, output, responder })
                                .await;
                        })
                    }
                    None => responder.respond(Err(unknown(&terminal_id))),
                }
            }
            TerminalRequest::Kill { terminal_id } => match self.terminals.get(&terminal_id) {
                Some(terminal) => self.spawn(async move {
                    terminal.kill().await;
                    responder.respond(Ok(TerminalAnswer::Done));
                }),
                None => responder.respond(Err(unknown(&terminal_id))),
            },
            TerminalRequest::Release { terminal_id } => {
                match self.terminals.running.remove(&terminal_id) {
                    Some(terminal) => self.spawn(async move {
                        terminal.kill().await;
                        responder.respond(Ok(TerminalAnswer::Done));
                    }),
                    None => responder.respond(Err(unknown(&terminal_id))),
                }
            }
        }
    }

    fn create_terminal(
        &mut self,
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
        limit: Option<u64>,
    ) -> std::result::Result<String, (i64, String)> {
        if !self.agent_on_this_host() {
            return Err(crate::files::off_host("terminal/create"));
        }
        let root = confined_cwd(&self.session.cwd, cwd.as_deref())?;
        let limit = limit.map_or(DEFAULT_OUTPUT_LIMIT, |l| {
            usize::try_from(l.min(MAX_OUTPUT_LIMIT)).unwrap_or(DEFAULT_OUTPUT_LIMIT)
        });
        let spec = CommandSpec {
            program: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env,
            output_limit: limit,
        };
        let terminal = run_command(&spec, &root).map_err(|e| (FAILED, e.to_string()))?;
        let id = format!("term_{}", uuid::Uuid::new_v4().simple());
        tracing::debug!(session = %self.session.id, terminal = id, pid = terminal.pid(), "agent terminal started");
        self.terminals.running.insert(id.clone(), Arc::new(terminal));
        Ok(id)
    }

    /// Kills the session's terminals (cancel, stop, reset, delete, the agent's exit).
    pub(super) fn kill_terminals(&mut self) {
        let tracker = self.inner.tracker.clone();
        self.terminals.kill_all(|terminal| {
            tracker.spawn(async move { terminal.kill().await });
        });
    }

    /// A tool call `message` shows these terminals: their output is streamed into it.
    pub(super) fn follow_terminals(&mut self, message: &MessageId, terminal_ids: &[String]) {
        for terminal_id in terminal_ids {
            if self.terminals.followed.contains_key(terminal_id) {
                continue;
            }
            let Some(terminal) = self.terminals.get(terminal_id) else {
                tracing::debug!(session = %self.session.id, terminal = terminal_id, "a tool call shows a terminal Kandev did not create");
                continue;
            };
            self.terminals.followed.insert(terminal_id.clone(), message.clone());
            let (inbox, ended) = (self.sender(), self.ended.clone());
            let (message, terminal_id) = (message.clone(), terminal_id.clone());
            self.spawn(async move {
                let mut changes = terminal.changes();
                loop {
                    let exited = terminal.output().exit.is_some();
                    let command = Command::TerminalOutput {
                        message: message.clone(),
                        terminal_id: terminal_id.clone(),
                        output: terminal.output(),
                    };
                    if inbox.send(command).await.is_err() || exited {
                        return;
                    }
                    tokio::select! {
                        _ = ended.cancelled() => return,
                        changed = changes.changed() => if changed.is_err() {
                            // The terminal is gone: send its last state once more.
                            let command = Command::TerminalOutput {
                                message, terminal_id, output: terminal.output(),
                            };
                            let _ = inbox.send(command).await;
                            return;
                        },
                    }
                    tokio::time::sleep(STREAM_INTERVAL).await;
                }
            });
        }
    }

    /// A waited-for terminal exited: its tool call keeps the final output, then the agent
    /// is answered.
    pub(super) async fn on_terminal_exited(
        &mut self,
        terminal_id: String,
        output: TerminalOutput,
        responder: TerminalResponder,
    ) {
        if let Some(message) = self.terminals.followed.get(&terminal_id).cloned() {
            let result = self.on_terminal_output(message, terminal_id, output.clone()).await;
            self.log("keeping a terminal's output", result);
        }
        let exit =
            output.exit.map_or(TerminalExitStatus { exit_code: None, signal: None }, exit_status);
        responder.respond(Ok(TerminalAnswer::Exited(exit)));
    }

    /// Writes a terminal's output into its tool call's message.
    pub(super) async fn on_terminal_output(
        &mut self,
        message: MessageId,
        terminal_id: String,
        output: TerminalOutput,
    ) -> Result<()> {
        let mut meta = self.inner.store.get_message(&message).await?.meta;
        let MessageMeta::ToolCall(call) = &mut meta else {
            let corrupt = format!("message {message} has no readable tool call metadata");
            return Err(crate::error::EngineError::Store(kandev_store::StoreError::Corrupt(
                corrupt,
            )));
        };
        call.terminals.insert(terminal_id, output_meta(&output));
        let mut tx = self.begin_write().await?;
        let changed = tx.set_message(&message, None, &meta).await?;
        publish::message_changed(&mut tx, &self.session, &changed).await?;
        self.finish(tx).await?;
        Ok(())
    }
}
