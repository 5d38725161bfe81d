//! Prompts and turns: admitting a prompt through the one gate (rule 44), recording it in the
//! transaction that opens its turn or begins its start, sending it, and everything that ends
//! a turn (the agent's answer, an error, a stall) and what follows it.

use std::collections::HashMap;
use std::path::PathBuf;

use kandev_acp::{AcpError, ContentBlock, PromptResponse, StopReason};
use kandev_api_types::{Notification, SessionEvent};
use kandev_domain::attachment::AttachmentRef;
use kandev_domain::message_meta::{ErrorMeta, MessageMeta, StatusNote, UserMeta};
use kandev_domain::notify::NotificationKind;
use kandev_domain::session::SessionState;
use kandev_domain::transcript::{LastError, Message};
use kandev_domain::{QueuedPromptId, TurnId};
use kandev_store::{NewMessage, SessionUpdate, TurnUsagePart, WriteTx};
use serde_json::json;

use crate::api::{PromptOutcome, PromptRequest};
use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::handshake;
use crate::publish;
use crate::session::state::{
    Closed, Ending, Output, Phase, ResetPlan, SessionActor, Turn, UnsettledTurn,
};

/// When the end of a turn that failed to write is first tried again, and the longest wait
/// between tries (issue 38 item 11).
const SETTLE_FIRST_RETRY: std::time::Duration = std::time::Duration::from_millis(500);
const SETTLE_MAX_RETRY: std::time::Duration = std::time::Duration::from_secs(10);
use crate::write::add_message;

impl SessionActor {
    /// A prompt from the user or a workflow (`message.add`, a workflow's auto-start): sent
    /// when [`Self::can_start_turn`] allows, else queued (or refused when the caller asked
    /// not to queue).
    pub(super) async fn admit(
        &mut self,
        request: PromptRequest,
        queued_by: &'static str,
    ) -> Result<PromptOutcome> {
        if request.content.trim().is_empty() {
            return Err(EngineError::Validation("content is required".into()));
        }
        if self.phase.live().is_none() {
            // Before anything is recorded: this prompt would start an agent (issue 52).
            self.refuse_without_profile().await?;
        }
        if let Some(client_id) = &request.client_message_id {
            let mut tx = self.begin_write().await?;
            if let Some(existing) = tx.message_by_client_id(&self.session.id, client_id).await? {
                return Ok(PromptOutcome::Duplicate(existing));
            }
            if let Some(queued) = tx
                .list_queue(&self.session.id)
                .await?
                .into_iter()
                .find(|q| q.client_message_id.as_ref() == Some(client_id))
            {
                return Ok(PromptOutcome::Queued(queued));
            }
        }
        if self.can_start_turn().is_ok() && queued_by == "user" {
            // on_turn_start may move the task first (and reset the context on the way).
            Box::pin(self.on_user_turn_start()).await?;
        }
        match self.can_start_turn() {
            Ok(()) => self
                .record_and_send(
                    request.content,
                    request.attachments,
                    request.client_message_id,
                    None,
                )
                .await
                .map(PromptOutcome::Sent),
            Err(Closed::Ended(state)) => Err(EngineError::Conflict(format!(
                "the session is {}; resume it (load or fresh) before sending messages",
                state.as_str()
            ))),
            Err(Closed::Resetting) if !request.queue => Err(EngineError::ResetInProgress(
                "the agent's context is being reset; try again in a moment or queue the message"
                    .into(),
            )),
            Err(Closed::Turn) if !request.queue => Err(EngineError::Busy(
                "the agent is busy with a turn; wait, cancel it, or queue the message".into(),
            )),
            Err(Closed::Starting) if !request.queue => Err(EngineError::Busy(
                "the agent is starting; wait until it is ready, or queue the message".into(),
            )),
            Err(Closed::Unsettled) if !request.queue => Err(EngineError::Busy(
                "the end of the last turn could not be saved yet; free some disk space, then try again or queue the message".into(),
            )),
            Err(_) => self.enqueue(&request, queued_by).await.map(PromptOutcome::Queued),
        }
    }

    /// Records the user's message, then sends it, starting (or resuming) the agent first
    /// when no execution is live (rules 2, 28).
    /// With `from_queue`, the queue entry is removed in the same transaction that records the
    /// message, so an entry is never in both places or in neither (rule 7).
    pub(super) async fn record_and_send(
        &mut self,
        content: String,
        attachments: Vec<AttachmentRef>,
        client_message_id: Option<String>,
        from_queue: Option<&QueuedPromptId>,
    ) -> Result<Message> {
        if let Err(closed) = self.can_start_turn() {
            // Callers check the gate first; this keeps a slip from recording a stray message.
            return Err(EngineError::Conflict(format!("no turn can start now ({closed:?})")));
        }
        let mut tx = self.begin_write().await?;
        if let Some(id) = from_queue {
            tx.dequeue(&self.session.id, id).await?;
            let queue = tx.list_queue(&self.session.id).await?;
            publish::queue_changed(&mut tx, &self.session, &queue).await?;
        }
        let new = NewMessage {
            session_id: self.session.id.clone(),
            turn_id: None,
            content,
            meta: MessageMeta::User(UserMeta { attachments }),
            client_message_id,
        };
        let message = tx.insert_message(&new).await?;
        publish::message_added(&mut tx, &self.session.id, &message).await?;
        // The message, and the turn it opens or the start it waits for, in one transaction:
        // nobody ever sees it recorded while the session still says WAITING_FOR_INPUT.
        if matches!(self.phase, Phase::Ready(_)) {
            let turn = self.open_turn(&mut tx, &message).await?;
            self.finish(tx).await?;
            self.dispatch_turn(turn, message.clone());
        } else {
            let boot = self.bind_boot(&mut tx).await?;
            self.finish(tx).await?;
            self.spawn_boot(boot, Some(message.clone()), false);
        }
        Ok(message)
    }

    /// Opens the turn (`RUNNING`, rule 3) and sends the prompt as a child future.
    pub(super) async fn send_turn(&mut self, message: Message) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let turn = self.open_turn(&mut tx, &message).await?;
        self.finish(tx).await?;
        self.dispatch_turn(turn, message);
        Ok(())
    }

    /// The writes of a new turn in the caller's transaction: the turn row (in the session's
    /// current epoch: a context reset moves it on without a new execution) and `RUNNING`.
    /// Returns the turn and the request id its prompt goes out with (recorded with it: a
    /// server that re-adopts the agent after a restart awaits that answer, issue 20), and
    /// what a revert since the last turn left to tell the agent (taken here, issue 48).
    async fn open_turn(&mut self, tx: &mut WriteTx, message: &Message) -> Result<OpenedTurn> {
        let Phase::Ready(live) = &self.phase else {
            return Err(EngineError::Unavailable("the agent is not running".into()));
        };
        let prompt_id = live.client.reserve_id();
        let turn_id = tx.open_turn(&self.session.id, self.session.epoch).await?;
        tx.set_turn_prompt(&turn_id, prompt_id, &message.id).await?;
        self.write(
            tx,
            SessionUpdate { state: Some(SessionState::Running), ..SessionUpdate::default() },
        )
        .await?;
        let notice = tx.take_checkpoint_notice(&self.session.id).await?;
        let event = SessionEvent::TurnStarted {
            session_id: self.session.id.to_string(),
            turn_id: turn_id.to_string(),
            message_id: message.id.to_string(),
        };
        publish::notify(tx, Notification::session(&self.session.id, event)).await?;
        Ok(OpenedTurn { turn_id, prompt_id, notice })
    }

    /// Once [`Self::open_turn`] is committed: `Running`, and the prompt sent as a child
    /// future whose answer comes back through the event pump (after the turn's events).
    /// The child records the worktrees first (the checkpoint before the turn), and again once
    /// the agent answered, before the turn's end reaches the actor (issue 48); a turn
    /// cancelled before its prompt went out ends as cancelled without sending it.
    fn dispatch_turn(&mut self, opened: OpenedTurn, message: Message) {
        let OpenedTurn { turn_id, prompt_id, notice } = opened;
        let Phase::Ready(live) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return; // open_turn checked it
        };
        let epoch = self.session.epoch;
        let (client, acp_session_id) = (live.client.clone(), live.acp_session_id.clone());
        let ordered = live.ordered.clone();
        let accepts = live.accepts;
        let cancelled = tokio_util::sync::CancellationToken::new();
        let turn = Turn {
            id: turn_id.clone(),
            epoch,
            streaming: None,
            tool_calls: HashMap::new(),
            sent_at: tokio::time::Instant::now(),
            output: None,
            cancelled: cancelled.clone(),
        };
        self.phase = Phase::Running(live, turn);
        self.schedule_stall_check(epoch, turn_id.clone(), self.inner.config.stall_after);
        // Recorded, not written yet: a server that dies here leaves the prompt to the next
        // one, which sends it if the runner never took it (issue 38 item 12).
        crate::fault::after_commit("prompt");
        let source = PromptSource::of(self).with_notice(notice);
        let (inner, session) = (self.inner.clone(), self.session.clone());
        self.spawn(async move {
            crate::checkpoints::before_turn(&inner, &session, &turn_id).await;
            let result = if cancelled.is_cancelled() {
                Ok(PromptResponse { stop_reason: StopReason::Cancelled, usage: None, meta: None })
            } else {
                let blocks = source.blocks(&message, accepts).await;
                let key = Some(super::inputs::prompt_key(&turn_id));
                client.prompt_keyed(prompt_id, key, &acp_session_id, &blocks).await
            };
            if !matches!(&result, Err(err) if err.is_closed()) {
                crate::checkpoints::after_turn(&inner, &session.id, &turn_id).await;
            }
            let _ = ordered.send(Command::TurnDone { epoch, turn_id, result });
        });
    }

    pub(super) async fn on_turn_done(
        &mut self,
        epoch: i64,
        turn_id: TurnId,
        result: std::result::Result<PromptResponse, AcpError>,
    ) {
        if self.phase.turn_of(epoch, &turn_id).is_none() {
            tracing::debug!(session = %self.session.id, epoch, "ignored the end of a turn that is no longer open");
            return;
        }
        if matches!(&result, Err(err) if err.is_closed()) {
            return; // the exit watcher reports the crash
        }
        let Some((turn, ending)) = self.phase.end_turn() else { return };
        let (outcome, completed) = match result {
            Ok(response) => {
                let reason = response.stop_reason.as_str().to_owned();
                let cancelled = ending != Ending::Normally;
                let note = (ending == Ending::CancelledByUser).then(|| "turn cancelled".to_owned());
                let tokens = kandev_acp::quirks::prompt_usage(&response).map(|u| u.to_json());
                (self.finish_turn(turn, tokens, &reason, None, note).await, Some(cancelled))
            }
            Err(err) => {
                let info = self.session.agent_info.as_deref();
                let (code, message, details) = handshake::turn_failure(&err, info, epoch);
                let error = self.error(code, message.clone(), details);
                (self.finish_turn(turn, None, "error", Some((error, message)), None).await, None)
            }
        };
        self.log("closing the turn", outcome);
        // The agent may have committed or changed files: cards show the new git status.
        let (inner, task_id) = (self.inner.clone(), self.session.task_id.clone());
        self.spawn(async move { crate::workdir::status::refresh_status(&inner, &task_id).await });
        self.after_turn(ending, completed).await;
    }

    /// What follows the end of a turn: a reset waiting for it (rule 23), else the step's
    /// `on_turn_complete` (a cancel counts only with `cancel_triggers_turn_complete`), then
    /// the queue (rule 5). `completed`: the turn ended with a stop reason (`Some(cancelled)`).
    pub(super) async fn after_turn(&mut self, ending: Ending, completed: Option<bool>) {
        if ending == Ending::ForReset {
            if let Some(plan) = self.phase.take_reset_after_turn() {
                let result = self.continue_reset(plan).await;
                self.log("continuing the context reset", result);
            }
            return;
        }
        if let Some(cancelled) = completed {
            let counts = !cancelled || self.step_counts_cancel().await;
            if counts {
                let result = Box::pin(self.on_turn_complete()).await;
                self.log("running on_turn_complete", result);
            }
        }
        self.drain_queue().await;
    }

    /// A turn that ended with its agent (a crash, a stall): a reset waiting for it goes on
    /// without the agent (rule 21). The queue is not drained, which would restart an agent
    /// that just failed; the next message does.
    pub(super) async fn after_lost_turn(&mut self, reset: Option<ResetPlan>) {
        if let Some(plan) = reset {
            let result = self.continue_reset(plan).await;
            self.log("continuing the context reset", result);
        }
    }

    async fn step_counts_cancel(&self) -> bool {
        let Ok(task) = self.inner.store.get_task(&self.task.id).await else { return false };
        let Ok(workflow) = self.inner.store.get_workflow(&task.workflow_id).await else {
            return false;
        };
        workflow.step(&task.step_id).is_some_and(|s| s.cancel_triggers_turn_complete)
    }

    /// Closes `turn` (already out of the phase): expires pending permissions (rule 38), notes
    /// why, returns to `WAITING_FOR_INPUT` (rule 5). `tokens`: the token usage the agent's
    /// answer reported, stored on the turn (issue 18).
    pub(super) async fn finish_turn(
        &mut self,
        turn: Turn,
        tokens: Option<serde_json::Value>,
        stop_reason: &str,
        error: Option<(LastError, String)>,
        note: Option<String>,
    ) -> Result<()> {
        let end =
            TurnEnd { turn_id: turn.id, tokens, stop_reason: stop_reason.to_owned(), error, note };
        let written = self.write_turn_end_tx(&end).await;
        if let Err(err) = &written {
            // Issue 38 item 11: written again until it is, before anything else.
            self.unsettled = Some(UnsettledTurn {
                turn_id: end.turn_id,
                stop_reason: end.stop_reason,
                error: end.error,
                cause: err.to_string(),
                attempts: 0,
            });
            self.after(SETTLE_FIRST_RETRY, Command::SettleTurn);
        }
        written
    }

    /// The end of a turn in one transaction of its own; on failure the actor's copy of the
    /// session is what was committed before.
    async fn write_turn_end_tx(&mut self, end: &TurnEnd) -> Result<()> {
        let before = self.session.clone();
        let mut tx = self.begin_write().await?;
        let expired = self.expire_permissions(&mut tx, "expired").await?;
        let written = self.write_turn_end(&mut tx, end).await;
        let committed = match written {
            Ok(()) => self.finish(tx).await.map(drop).map_err(Into::into),
            Err(err) => Err(err),
        };
        if committed.is_err() {
            self.session = before;
        }
        expired.after_commit(self, committed)
    }

    /// Writes the end of a turn that could not be written when it ended (a full disk): the
    /// turn closed, `WAITING_FOR_INPUT` and a `last_error` saying what may be missing (the
    /// turn's own error, if it had one). Tried before every command while writes work and
    /// by a timer backing off to [`SETTLE_MAX_RETRY`] meanwhile; once written, what waits
    /// in the queue runs (the step's `on_turn_complete` does not: the turn's end was not
    /// known in time, and `last_error` tells the user).
    pub(super) async fn settle_turn(&mut self) {
        let Some(unsettled) = self.unsettled.take() else { return };
        let error = unsettled.error.clone().unwrap_or_else(|| {
            let message = format!(
                "the end of the agent's turn could not be saved at first ({}); part of its output may be missing",
                unsettled.cause
            );
            let details = json!({ "stop_reason": unsettled.stop_reason });
            (self.error("turn_end_not_saved", message.clone(), details), message)
        });
        let end = TurnEnd {
            turn_id: unsettled.turn_id.clone(),
            tokens: None,
            stop_reason: unsettled.stop_reason.clone(),
            error: Some(error),
            note: None,
        };
        match self.write_turn_end_tx(&end).await {
            Ok(()) => {
                tracing::info!(session = %self.session.id, "the end of the turn was written late");
                if matches!(self.phase, Phase::Ready(_) | Phase::Idle) {
                    self.drain_queue().await;
                }
            }
            Err(err) => {
                let attempts = unsettled.attempts + 1;
                tracing::debug!(session = %self.session.id, error = %err, attempts, "the end of the turn still cannot be written");
                let wait = SETTLE_FIRST_RETRY.saturating_mul(1 << attempts.min(5));
                self.unsettled = Some(UnsettledTurn { attempts, ..unsettled });
                self.after(wait.min(SETTLE_MAX_RETRY), Command::SettleTurn);
            }
        }
    }

    /// [`Self::finish_turn`]'s writes, but the expired permissions.
    async fn write_turn_end(&mut self, tx: &mut WriteTx, end: &TurnEnd) -> Result<()> {
        let TurnEnd { turn_id, tokens, stop_reason, error, note } = end;
        tx.close_turn(turn_id, stop_reason).await?;
        if let Some(tokens) = tokens {
            tx.set_turn_usage(turn_id, TurnUsagePart::Tokens, &tokens.to_string()).await?;
        }
        if let Some(text) = note {
            // Only a turn the user cancelled has a note (`Ending::CancelledByUser`).
            add_message(tx, &self.session, Some(turn_id), text, StatusNote::Cancelled).await?;
        }
        let mut update = SessionUpdate {
            state: Some(SessionState::WaitingForInput),
            ..SessionUpdate::default()
        };
        if let Some((last_error, text)) = error {
            let meta = ErrorMeta::code(&last_error.code);
            add_message(tx, &self.session, Some(turn_id), text, meta).await?;
            update.last_error = Some(Some(last_error.clone()));
        }
        self.write(tx, update).await?;
        let event = SessionEvent::TurnCompleted {
            session_id: self.session.id.to_string(),
            turn_id: turn_id.to_string(),
            stop_reason: stop_reason.clone(),
            tokens: tokens.clone().unwrap_or(serde_json::Value::Null),
        };
        let seq = publish::notify(tx, Notification::session(&self.session.id, event)).await?;
        let title = format!("{}: the agent's turn ended ({stop_reason})", self.task.title);
        let data = json!({ "turn_id": turn_id.to_string(), "stop_reason": stop_reason });
        let kind = NotificationKind::TurnCompleted;
        publish::attention(tx, kind, &self.session, seq, title, data).await?;
        Ok(())
    }

    fn schedule_stall_check(&self, epoch: i64, turn_id: TurnId, after: std::time::Duration) {
        self.after(after, Command::StallCheck { epoch, turn_id });
    }

    /// Rule 40: one notice after a quiet stretch; a turn with no output at all fails.
    pub(super) async fn on_stall_check(&mut self, epoch: i64, turn_id: TurnId) {
        let stall = self.inner.config.stall_after;
        let Some(turn) = self.phase.turn_of(epoch, &turn_id) else {
            return; // an older turn's timer creates nothing
        };
        let (sent_at, output) = (turn.sent_at, turn.output);
        let now = tokio::time::Instant::now();
        let Some(Output { last, stall_noticed }) = output else {
            if now.duration_since(sent_at) < stall {
                let wait = stall - now.duration_since(sent_at);
                return self.schedule_stall_check(epoch, turn_id, wait);
            }
            let minutes = stall.as_secs_f64() / 60.0;
            let message = format!(
                "the agent produced no output for {minutes:.1} minutes, so the turn was ended; send the message again or restart the agent"
            );
            let error = self.error("turn_stalled", message.clone(), json!({ "epoch": epoch }));
            let (turn, reset) = match self.stop_execution(false).await.turn() {
                Some((turn, by)) => (turn, by.into_reset()),
                None => return,
            };
            let result =
                self.finish_turn(turn, None, "stalled", Some((error, message)), None).await;
            self.log("failing a silent turn", result);
            return self.after_lost_turn(reset).await;
        };
        let quiet = now.duration_since(last);
        if quiet < stall {
            return self.schedule_stall_check(epoch, turn_id, stall - quiet);
        }
        if !stall_noticed {
            if let Some(Output { stall_noticed, .. }) =
                self.phase.turn_mut().and_then(|t| t.output.as_mut())
            {
                *stall_noticed = true;
            }
            let note = format!(
                "no output from the agent for {:.1} minutes; it may be stuck (you can cancel the turn)",
                stall.as_secs_f64() / 60.0
            );
            let note = (note, StatusNote::Stall.into());
            let result = self.commit(SessionUpdate::default(), Some(note)).await;
            self.log("noting a stall", result);
        }
    }
}

/// What a prompt's blocks are built from besides its message: the session's plan mode, its
/// working directory and task (attachments are linked on the agent's host).
pub(crate) struct PromptSource {
    inner: std::sync::Arc<crate::inner::Inner>,
    plan_mode: bool,
    /// What a revert since the last turn left to tell the agent, put before the message.
    notice: Option<String>,
    cwd: PathBuf,
    task_id: kandev_domain::TaskId,
}

impl PromptSource {
    pub(crate) fn of(actor: &SessionActor) -> Self {
        PromptSource {
            inner: actor.inner.clone(),
            plan_mode: actor.session.plan_mode,
            notice: None,
            cwd: PathBuf::from(&actor.session.cwd),
            task_id: actor.session.task_id.clone(),
        }
    }

    pub(crate) fn with_notice(self, notice: Option<String>) -> Self {
        PromptSource { notice, ..self }
    }

    /// The prompt's blocks: the message's text (after a revert's notice, and the plan-mode
    /// instruction in plan mode), then its attachments as the agent accepts them.
    pub(crate) async fn blocks(
        &self,
        message: &Message,
        accepts: kandev_domain::attachment::PromptAccepts,
    ) -> Vec<ContentBlock> {
        let mut text = if self.plan_mode {
            format!("{}\n\n{}", kandev_domain::workflow::PLAN_MODE_INSTRUCTION, message.content)
        } else {
            message.content.clone()
        };
        if let Some(notice) = &self.notice {
            text = format!("{notice}\n\n{text}");
        }
        let mut blocks = vec![ContentBlock::text(text)];
        let attached = message.meta.attachments().to_vec();
        if !attached.is_empty() {
            // A copy the agent is linked to is written on the agent's host.
            // Why the host cannot be reached is for the server log, not the agent.
            let site = crate::sites::site_of_task(&self.inner, &self.task_id)
                .await
                .map_err(|e| e.to_string());
            let home = &self.inner.config.home;
            blocks.extend(
                crate::attachments::blocks(home, &self.cwd, &site, &attached, accepts).await,
            );
        }
        blocks
    }
}

/// A turn [`SessionActor::open_turn`] wrote: its id, its prompt's request id, and the notice
/// of a revert the prompt carries.
struct OpenedTurn {
    turn_id: TurnId,
    prompt_id: u64,
    notice: Option<String>,
}

/// How a turn ended, as [`SessionActor::finish_turn`] writes it: its stop reason, the token
/// usage the agent's answer reported, an error (it becomes `last_error`), a status note.
struct TurnEnd {
    turn_id: TurnId,
    tokens: Option<serde_json::Value>,
    stop_reason: String,
    error: Option<(LastError, String)>,
    note: Option<String>,
}
