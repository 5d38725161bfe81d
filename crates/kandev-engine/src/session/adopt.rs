//! Rule 42's re-adopt branch (issue 20): after a restart with the local runner, the session
//! takes over the execution the last run left there instead of being interrupted. Its actor
//! joins the conversation in the middle (`AcpClient::join`: no handshake, request ids of this
//! server's run), gets the output the last run had not committed (the runner's replay,
//! minus the bytes of the first item already handled), and awaits the open turn's prompt by
//! the id recorded with the turn, which ends it as if this server had sent it.

use std::collections::HashMap;
use std::sync::Arc;

use kandev_acp::{AcpClient, AcpConfig, ContentBlock};
use kandev_domain::attachment::PromptAccepts;
use kandev_domain::message_meta::StatusNote;
use kandev_domain::session::SessionState;
use kandev_domain::transcript::MessageKind;
use kandev_domain::{MessageId, TurnId};
use kandev_store::SessionUpdate;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::launcher::{ExecutionControl, RunnerControl};
use crate::position::{Adoption, Track};
use crate::reconcile::INTERRUPTED;
use crate::session::inputs;
use crate::session::state::{Live, Output, Phase, SessionActor, Turn};
use crate::session::turn::PromptSource;

/// The pipe between the runner's stdout and the joined ACP reader.
const FEED: usize = 1 << 16;

impl SessionActor {
    /// The message the last run was streaming into when it stopped: the open turn's last
    /// message, if it is text or thought. The turn's text goes on in it, as if nothing
    /// happened (docs/lifecycle.md, rule 42's re-adopt branch), where it would otherwise
    /// begin a second message. Whatever the actor added to the turn after that message (a
    /// tool call, a permission request, a note) ended its stream for the last run too;
    /// notes from outside the turn (a task moved, a pull request changed) did not, and are
    /// not the turn's. Its limit: after an append that failed (a full disk) the last run
    /// began a new message, and this goes on in the old one. Unreadable: a new message.
    async fn streamed_into(&self, turn_id: &TurnId) -> Option<(MessageKind, MessageId)> {
        let last = match self.inner.store.last_message_of_turn(&self.session.id, turn_id).await {
            Ok(last) => last?,
            Err(err) => {
                tracing::warn!(session = %self.session.id, error = %err, "reading the message to continue failed");
                return None;
            }
        };
        let text = matches!(last.kind(), MessageKind::Agent | MessageKind::Thought);
        text.then_some((last.kind(), last.id))
    }

    pub(super) async fn adopt(&mut self, adoption: Adoption) -> Result<()> {
        let Adoption { epoch, execution, skip, ahead, run, turn, taken, here, .. } = adoption;
        let control: Arc<dyn ExecutionControl> = Arc::new(RunnerControl {
            control: execution.control,
            acks: execution.acks.clone(),
            here,
        });
        let (Phase::Idle, Some(acp_session_id)) =
            (&self.phase, self.session.acp_session_id.clone())
        else {
            control.stop(self.inner.config.stop_grace).await;
            // Reconciliation kept the session as it was for the adoption: without it, the
            // session reconciles as after any restart (unless something newer owns it).
            if matches!(self.phase, Phase::Idle) {
                let result = self.interrupted(epoch).await;
                self.log("reconciling a session that could not take its agent over", result);
            }
            return Err(EngineError::Conflict("the session cannot take the agent over".into()));
        };
        // The joined client reads a pipe fed from the runner's only once the open turn's
        // answer is awaited (the replay may hold it).
        let (acp_out, mut feed) = tokio::io::duplex(FEED);
        let config =
            // An SSH executor's agent is offered nothing of this host, as at its start.
            AcpConfig {
                request_timeout: self.inner.config.call_timeout,
                host_tools: here,
                ..AcpConfig::default()
            };
        let keys = Some(execution.keys.clone());
        let (client, events) = AcpClient::join(acp_out, execution.stdin, config, run << 32, keys);
        let cancel = CancellationToken::new();
        let (ordered, results) = mpsc::unbounded_channel();
        // Turns are of the session's epoch, the live execution keeps its own (they differ
        // after a live context reset).
        let turn_epoch = self.session.epoch;
        let open = match turn {
            Some(open) => {
                let turn_id = open.id.clone();
                let streaming = self.streamed_into(&turn_id).await;
                // Issue 38 item 12: a prompt the runner never took goes out now, with the id
                // recorded for it; one it took is awaited.
                let resend = match taken.contains(&inputs::prompt_key(&turn_id)) {
                    true => None,
                    false => self.prompt_to_send_again(open.prompt_message_id.as_ref()).await,
                };
                let (waiting, conversation) = (client.clone(), acp_session_id.clone());
                let prompt_id = open.prompt_id.unwrap_or_default(); // checked by `adoptable`
                let key = inputs::prompt_key(&turn_id);
                let mut answer = Box::pin(async move {
                    match resend {
                        Some(blocks) => {
                            waiting.prompt_keyed(prompt_id, Some(key), &conversation, &blocks).await
                        }
                        None => waiting.await_prompt(prompt_id).await,
                    }
                });
                // One poll registers the call (and queues a prompt sent again) before any
                // output is read or any other input is written.
                let _ = futures::poll!(&mut answer);
                let (ordered, id) = (ordered.clone(), turn_id.clone());
                let (inner, session_id) = (self.inner.clone(), self.session.id.clone());
                self.spawn(async move {
                    let result = answer.await;
                    if !matches!(&result, Err(err) if err.is_closed()) {
                        crate::checkpoints::after_turn(&inner, &session_id, &id).await;
                    }
                    let _ =
                        ordered.send(Command::TurnDone { epoch: turn_epoch, turn_id: id, result });
                });
                self.send_answers_again(&client, &turn_id, &taken).await;
                let turn = Turn {
                    id: turn_id,
                    epoch: turn_epoch,
                    streaming,
                    tool_calls: HashMap::new(),
                    sent_at: tokio::time::Instant::now(),
                    // Rule 40 counts from now: the agent spoke before (its answer may be all
                    // that is left), so quiet gets a notice, never `turn_stalled`.
                    output: Some(Output {
                        last: tokio::time::Instant::now(),
                        stall_noticed: false,
                    }),
                    cancelled: tokio_util::sync::CancellationToken::new(),
                };
                Some((turn, open.cancel_requested))
            }
            None => None,
        };
        let mut stdout = execution.stdout;
        self.spawn(async move {
            // What the last run handled of the first replayed item (`crate::position`).
            let mut handled = vec![0u8; usize::try_from(skip).unwrap_or(0)];
            if stdout.read_exact(&mut handled).await.is_err() {
                return;
            }
            let _ = tokio::io::copy(&mut stdout, &mut feed).await;
        });
        self.spawn_pump(epoch, events, results, cancel.clone());
        self.spawn_exit_watch(epoch, control.clone(), cancel.clone());
        let mcp_servers = match self.profile().await {
            Ok(profile) => profile.map(|p| p.mcp_servers).unwrap_or_default(),
            Err(_) => vec![],
        };
        let live = Live {
            epoch,
            client,
            control,
            acp_session_id,
            cancel,
            ordered,
            // Not known without the handshake: a live reset hands Kandev's MCP server over
            // stdio, attachments go as text.
            mcp_caps: crate::mcp::McpCaps::default(),
            mcp_servers,
            accepts: kandev_domain::attachment::PromptAccepts::default(),
            track: Some(Track { acks: execution.acks, skipped: skip, handled: 0, replayed: ahead }),
        };
        match open {
            Some((turn, cancelled)) => {
                let turn_id = turn.id.clone();
                let stall = Command::StallCheck { epoch: turn_epoch, turn_id: turn_id.clone() };
                self.after(self.inner.config.stall_after, stall);
                if !cancelled {
                    self.phase = Phase::Running(live, turn);
                    return Ok(());
                }
                // The user's cancel goes on (sent now if the runner never took it), bounded
                // like any cancel (rule 13).
                self.phase = Phase::Cancelling(live, turn);
                if !taken.contains(&inputs::cancel_key(&turn_id)) {
                    self.send_acp_cancel(Some(inputs::cancel_key(&turn_id)));
                }
                let escalate = Command::EscalateCancel { epoch: turn_epoch, turn_id };
                self.after(self.inner.config.cancel_timeout, escalate);
            }
            None => {
                self.phase = Phase::Ready(live);
                let idle_timeout = self.inner.config.idle_timeout;
                if !idle_timeout.is_zero() {
                    self.after(idle_timeout, Command::IdleCheck { epoch });
                }
            }
        }
        Ok(())
    }

    /// The blocks of the open turn's prompt, built again from its recorded message (`None`:
    /// no message recorded, or it cannot be read; the answer is then awaited as if the agent
    /// had the prompt). Attachments go as the agent accepts by default (the handshake's
    /// capabilities are not known after a restart).
    async fn prompt_to_send_again(&self, message: Option<&MessageId>) -> Option<Vec<ContentBlock>> {
        let message = match self.inner.store.get_message(message?).await {
            Ok(message) => message,
            Err(err) => {
                tracing::warn!(session = %self.session.id, error = %err, "reading the prompt to send again failed");
                return None;
            }
        };
        tracing::info!(session = %self.session.id, "the runner never took the open turn's prompt: sending it");
        let source = PromptSource::of(self);
        Some(source.blocks(&message, PromptAccepts::default()).await)
    }

    /// Sends again the permission answers of the open turn that the runner never took, in
    /// the order they were given.
    async fn send_answers_again(&self, client: &AcpClient, turn_id: &TurnId, taken: &[String]) {
        let replies = match self.inner.store.permission_replies(&self.session.id, turn_id).await {
            Ok(replies) => replies,
            Err(err) => {
                tracing::warn!(session = %self.session.id, error = %err, "reading the permission answers failed");
                return;
            }
        };
        for (request_id, reply) in replies {
            let key = inputs::answer_key(&request_id);
            if taken.contains(&key) {
                continue;
            }
            let Ok(reply) = serde_json::from_str::<serde_json::Value>(&reply) else {
                tracing::warn!(session = %self.session.id, request_id, "a recorded permission answer is not JSON");
                continue;
            };
            tracing::info!(session = %self.session.id, request_id, "the runner never took a permission answer: sending it");
            let (id, result) = (reply["id"].clone(), reply["result"].clone());
            let client = client.clone();
            let mut sent = Box::pin(async move { client.answer(id, result, key).await });
            // Queued now, in order; the write itself finishes in the background.
            if futures::poll!(&mut sent).is_pending() {
                self.spawn(async move {
                    let _ = sent.await;
                });
            }
        }
    }

    /// Rule 42 as after any restart, for a session whose execution (of `epoch`) was not
    /// taken over: its runtime row ends, its open turn is closed, and a busy session waits
    /// for input with the "interrupted" note.
    async fn interrupted(&mut self, epoch: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        tx.end_runtime(&self.session.id, epoch, "ended").await?;
        tx.forget_mcp_grants(&self.session.id).await?;
        let closed = tx.close_open_turns(&self.session.id, "interrupted").await?;
        let busy = matches!(self.session.state, SessionState::Starting | SessionState::Running);
        if !busy && closed == 0 {
            self.finish(tx).await?;
            return Ok(());
        }
        let update = SessionUpdate {
            state: busy.then_some(SessionState::WaitingForInput),
            acp_session_id: Some(None),
            ..SessionUpdate::default()
        };
        let note = (INTERRUPTED.to_owned(), StatusNote::Interrupted.into());
        self.commit_tx(tx, update, Some(note)).await
    }
}
