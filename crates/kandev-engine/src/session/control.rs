//! Control of the session's execution: cancel (rules 10-15), stop (rule 16), delete (rule
//! 35), and the execution ending by itself (an exit, an idle timeout). One teardown,
//! [`SessionActor::end_phase`], takes the phase apart for all of them.

use std::sync::Arc;

use kandev_domain::TurnId;
use kandev_domain::message_meta::StatusNote;
use kandev_domain::session::SessionState;
use kandev_runtime::ExitInfo;
use kandev_store::SessionUpdate;
use serde_json::json;

use crate::command::{Command, Reply};
use crate::error::Result;
use crate::launcher::ExecutionControl;
use crate::session::boot::tail_lines;
use crate::session::state::{
    CancelledBy, Ending, InFlight, Phase, Reset, ResetStage, SessionActor, Taken,
};

impl SessionActor {
    /// Takes the phase apart, leaving it `Idle`: a start in progress is cancelled; a live
    /// execution's event pump and ACP connection are closed and its runtime row ended with
    /// `status`. Its process is returned, not stopped yet: the caller stops it, waiting or
    /// not (an exited one needs nothing). Returns what was in flight.
    pub(super) async fn end_phase(
        &mut self,
        status: &str,
    ) -> (Option<Arc<dyn ExecutionControl>>, InFlight) {
        self.kill_terminals();
        match self.phase.take() {
            Taken::Nothing => (None, InFlight::Nothing),
            Taken::Boot(boot) => {
                boot.cancel.cancel();
                (None, InFlight::Nothing)
            }
            Taken::Live(live, in_flight) => {
                live.cancel.cancel();
                live.client.close();
                let ended: Result<()> = async {
                    let mut tx = self.begin_write().await?;
                    tx.end_runtime(&self.session.id, live.epoch, status).await?;
                    // No agent runs for the session now: its page offers no Stop and says
                    // so (issue 45 item 11).
                    let gone = SessionUpdate { acp_session_id: Some(None), ..Default::default() };
                    self.write(&mut tx, gone).await?;
                    self.finish(tx).await?;
                    Ok(())
                }
                .await;
                self.log("recording the end of the agent", ended);
                (Some(live.control), in_flight)
            }
        }
    }

    /// Ends the execution (if any): [`Self::end_phase`], then its process is stopped (TERM,
    /// grace, KILL of its group); with `wait`, this returns after it is gone. Returns what
    /// was in flight, for the caller to settle.
    pub(super) async fn stop_execution(&mut self, wait: bool) -> InFlight {
        let (control, in_flight) = self.end_phase("stopped").await;
        if let Some(control) = control {
            let grace = self.inner.config.stop_grace;
            if wait {
                control.stop(grace).await;
            } else {
                self.spawn(async move {
                    control.stop(grace).await;
                });
            }
        }
        in_flight
    }

    /// Cancels the running turn (rule 12) or the start in progress (rule 32); succeeds when
    /// nothing runs (rule 14) and joins a cancel in flight (rule 15).
    pub(super) async fn cancel(&mut self) -> Result<()> {
        match &self.phase {
            Phase::Booting(_) => {
                // Rule 32: cancel stops exactly this start attempt and sends no prompt; rule 10:
                // what was queued behind it does not start behind the user's back either.
                self.stop_execution(false).await;
                self.turn_auto_run_off_if_queued().await?;
                let note = ("start cancelled".to_owned(), StatusNote::Cancelled.into());
                let update = SessionUpdate {
                    state: Some(SessionState::WaitingForInput),
                    ..SessionUpdate::default()
                };
                self.commit(update, Some(note)).await
            }
            Phase::Running(..) => {
                let Some((turn_id, epoch)) = self.phase.cancel_turn() else { return Ok(()) };
                self.kill_terminals();
                self.turn_auto_run_off_if_queued().await?;
                let mut tx = self.begin_write().await?;
                // Recorded with the turn: a server that re-adopts the agent goes on cancelling
                // (issue 38 item 12).
                tx.request_turn_cancel(&turn_id).await?;
                let expired = self.expire_permissions(&mut tx, "cancelled").await?;
                let committed = self.finish(tx).await.map(drop).map_err(Into::into);
                // Not stored: the requests stay pending (the turn's end expires them), and the
                // cancel goes out all the same.
                let stored = expired.after_commit(self, committed);
                self.log("expiring the permission requests of a cancelled turn", stored);
                crate::fault::after_commit("cancel");
                self.send_acp_cancel(Some(super::inputs::cancel_key(&turn_id)));
                let timeout = self.inner.config.cancel_timeout;
                self.after(timeout, Command::EscalateCancel { epoch, turn_id });
                Ok(())
            }
            // Rule 15: join the cancel in flight (the user's, or the engine's own for a reset).
            // Rule 10 either way: what is queued must not start behind the user's back after.
            Phase::Cancelling(..)
            | Phase::Resetting(_, Reset { stage: ResetStage::AfterTurn(_), .. }) => {
                self.turn_auto_run_off_if_queued().await
            }
            Phase::Idle | Phase::Ready(_) | Phase::Resetting(..) => {
                // Nothing runs: reconcile a stale RUNNING (rule 14).
                if self.session.state == SessionState::Running {
                    let update = SessionUpdate {
                        state: Some(SessionState::WaitingForInput),
                        ..SessionUpdate::default()
                    };
                    self.commit(update, None).await?;
                }
                Ok(())
            }
        }
    }

    /// Sends ACP `session/cancel` to the live agent (as a child future).
    /// `key` names the user's cancel (`session/inputs.rs`); the engine's own cancels (a
    /// reset's) are not sent again after a restart and have none.
    pub(super) fn send_acp_cancel(&self, key: Option<String>) {
        if let Some(live) = self.phase.live() {
            let (client, acp_session_id) = (live.client.clone(), live.acp_session_id.clone());
            self.spawn(async move {
                if let Err(err) = client.cancel_keyed(&acp_session_id, key).await {
                    tracing::debug!(error = %err, "session/cancel could not be sent");
                }
            });
        }
    }

    /// Rule 10: after a user's cancel, the next queued entry must not start behind the
    /// user's back.
    async fn turn_auto_run_off_if_queued(&mut self) -> Result<()> {
        let queue_waiting = !self.inner.store.list_queue(&self.session.id).await?.is_empty();
        if queue_waiting && self.session.auto_run {
            self.commit(SessionUpdate { auto_run: Some(false), ..SessionUpdate::default() }, None)
                .await?;
        }
        Ok(())
    }

    /// The agent ignored the cancel (rule 13): end the turn here, fence and replace the
    /// execution; the next prompt starts it again.
    pub(super) async fn on_escalate(&mut self, epoch: i64, turn_id: TurnId) {
        let cancelling = matches!(self.phase, Phase::Cancelling(..) | Phase::Resetting(..));
        if !cancelling || self.phase.turn_of(epoch, &turn_id).is_none() {
            return;
        }
        let Some((turn, by)) = self.stop_execution(false).await.turn() else { return };
        let note = match by {
            CancelledBy::Reset(_) => "the agent did not stop in time, so it was restarted",
            _ => "turn cancelled (the agent did not stop in time, so it was restarted)",
        };
        let result = self.finish_turn(turn, None, "cancelled", None, Some(note.to_owned())).await;
        self.log("ending a hung turn", result);
        match by.into_reset() {
            // Without the agent the reset goes on lazily (rule 21).
            Some(plan) => self.after_lost_turn(Some(plan)).await,
            None => self.after_turn(Ending::CancelledByUser, Some(true)).await,
        }
    }

    /// `session.stop`: ends the execution and leaves the session resumable (rule 16); the
    /// answer goes out once the process is gone.
    pub(super) async fn stop(&mut self, reply: Reply<()>) {
        let (control, in_flight) = self.end_phase("stopped").await;
        let (result, reset) = match in_flight {
            InFlight::Turn(turn, by) => {
                let note = Some("agent stopped".to_owned());
                (
                    self.finish_turn(turn, None, "cancelled", None, note).await,
                    by.into_reset().map(Ok),
                )
            }
            other => {
                let reset = match other {
                    InFlight::LiveReset(plan) => Some(Err(plan)),
                    _ => None,
                };
                let busy =
                    matches!(self.session.state, SessionState::Starting | SessionState::Running);
                let update = SessionUpdate {
                    state: busy.then_some(SessionState::WaitingForInput),
                    ..SessionUpdate::default()
                };
                // Issue 14 defect 3: a stop the transcript does not show looks like nothing
                // happened; a live agent's end is noted (stopping nothing notes nothing).
                let note = control.is_some().then(|| {
                    let text = "agent stopped; the next message resumes the conversation";
                    (text.to_owned(), StatusNote::Stopped.into())
                });
                let result =
                    if busy || note.is_some() { self.commit(update, note).await } else { Ok(()) };
                (result, reset)
            }
        };
        // A reset waiting for this execution: without an agent it finishes lazily (rule 21);
        // one already talking to the stopped agent cannot finish and is settled as failed.
        match reset {
            Some(Ok(plan)) => {
                let settled = self.continue_reset(plan).await;
                self.log("finishing a context reset without the agent", settled);
            }
            Some(Err(plan)) => {
                let why = "the agent was stopped during the context reset".to_owned();
                let settled = self.reset_failed(plan, why).await;
                self.log("settling an abandoned context reset", settled);
            }
            None => {}
        }
        match (result, control) {
            (Err(err), _) => {
                let _ = reply.send(Err(err));
            }
            (Ok(()), None) => {
                let _ = reply.send(Ok(()));
            }
            (Ok(()), Some(control)) => {
                let grace = self.inner.config.stop_grace;
                self.spawn(async move {
                    control.stop(grace).await;
                    let _ = reply.send(Ok(()));
                });
            }
        }
    }

    /// The agent's process ended by itself: a turn it had open ends with its error, a reset
    /// waiting for that turn goes on without the agent (rule 21), one in the middle of
    /// `session/new` fails (rule 25).
    pub(super) async fn on_exited(&mut self, epoch: i64, exit: ExitInfo, stderr: String) {
        if self.live_epoch() != Some(epoch) {
            return;
        }
        // The process is gone: nothing to stop.
        let (control, in_flight) = self.end_phase("exited").await;
        self.exit_settled(epoch, exit, stderr, in_flight).await;
        // Only now the runner forgets the execution: its exit acknowledges all its output.
        if let Some(control) = control {
            control.exit_handled();
        }
    }

    /// [`Self::on_exited`] once the phase has ended: what was in flight, and the error.
    async fn exit_settled(
        &mut self,
        epoch: i64,
        exit: ExitInfo,
        stderr: String,
        in_flight: InFlight,
    ) {
        let message = match &exit {
            // Its end was not seen (the runner holding it was lost): say what is known.
            ExitInfo::Unknown { reason } => {
                format!("the agent was lost ({reason}); send a message to start it again")
            }
            _ => format!("the agent {exit}; send a message to start it again"),
        };
        let details =
            json!({ "epoch": epoch, "exit": exit.to_string(), "stderr": tail_lines(&stderr, 20) });
        let error = self.error("agent_exited", message.clone(), details);
        match in_flight {
            InFlight::Turn(turn, by) => {
                let result = self
                    .finish_turn(turn, None, "agent_exited", Some((error, message)), None)
                    .await;
                self.log("closing the turn of an exited agent", result);
                self.after_lost_turn(by.into_reset()).await;
                return;
            }
            InFlight::LiveReset(plan) => {
                let why = "the agent exited during the context reset".to_owned();
                let result = self.reset_failed(plan, why).await;
                self.log("settling an abandoned context reset", result);
            }
            InFlight::Nothing => {}
        }
        if !exit.success() {
            let update =
                SessionUpdate { last_error: Some(Some(error)), ..SessionUpdate::default() };
            let result = self.commit(update, None).await;
            self.log("recording the agent's exit", result);
        }
    }

    /// Issue 12 finding 9: an agent that has done nothing for the idle timeout (no turn, no
    /// reset, no permission request waiting, no command) is stopped, as `session.stop` would;
    /// the session keeps waiting for input with its token, and the next message resumes the
    /// conversation with `session/load` (rule 28). Re-armed until then.
    pub(super) async fn on_idle_check(&mut self, epoch: i64) {
        if self.live_epoch() != Some(epoch) {
            return; // that execution is gone: its checks end with it
        }
        let timeout = self.inner.config.idle_timeout;
        let idle_for = self.last_active.elapsed();
        let busy = !matches!(self.phase, Phase::Ready(_)) || !self.permissions.is_empty();
        if busy || idle_for < timeout {
            let wait = if busy { timeout } else { timeout - idle_for };
            return self.after(wait, Command::IdleCheck { epoch });
        }
        self.stop_execution(false).await;
        let minutes = timeout.as_secs_f64() / 60.0;
        let note = format!(
            "the agent was stopped after {minutes:.1} minutes without activity; the next message resumes the conversation"
        );
        let note = (note, StatusNote::Idle.into());
        let result = self.commit(SessionUpdate::default(), Some(note)).await;
        self.log("noting an idle stop", result);
    }

    /// `session.delete` (rule 35): stops any execution, answers pending permission requests
    /// `cancelled`, deletes the session and its transcript. The actor ends after it.
    pub(super) async fn delete(&mut self) -> Result<()> {
        self.stop_execution(true).await;
        for (_, pending) in self.permissions.drain() {
            pending.responder.respond(kandev_acp::Outcome::Cancelled);
        }
        let mut tx = self.begin_write().await?;
        crate::write::delete_session(&mut tx, &self.session.id, &self.task).await?;
        self.finish(tx).await?;
        Ok(())
    }
}
