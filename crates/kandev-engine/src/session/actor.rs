//! The session actor's loop: the one owner of a session. Every mutation arrives in its inbox
//! as a [`Command`] and is handled here, one at a time; slow work runs as child futures that
//! report back to the inbox, tagged with the epoch they belong to, so stale results are
//! ignored. What each command does is in the sibling files (boot, turn, queue, control,
//! modes, reset, workflow, events, permissions).

use std::sync::Arc;
use std::time::Duration;

use kandev_acp::AgentEvent;
use kandev_domain::task::Task;
use kandev_domain::transcript::Session;
use tokio::sync::mpsc;

use crate::command::{Applied, Command};
use crate::error::Result;
use crate::inner::Inner;
use crate::session::state::SessionActor;

/// Starts a session's actor on its inbox, owned by the engine's task tracker. The engine
/// hands it to the shared state (`Inner::start_actor`): `handle::inbox` starts actors
/// without importing them.
pub(crate) fn start(
    inner: Arc<Inner>,
    session: Session,
    task: Task,
    me: mpsc::Sender<Command>,
    inbox: mpsc::Receiver<Command>,
) {
    let actor = SessionActor::new(inner.clone(), session, task, me);
    inner.tracker.spawn(actor.run(inbox));
}

impl SessionActor {
    pub async fn run(self, inbox: mpsc::Receiver<Command>) {
        let ended = self.ended.clone();
        self.serve(inbox).await;
        ended.cancel();
    }

    async fn serve(mut self, mut inbox: mpsc::Receiver<Command>) {
        loop {
            let next = match self.pending.as_ref().map(|p| p.due) {
                None => inbox.recv().await,
                Some(due) => tokio::select! {
                    biased;
                    command = inbox.recv() => command,
                    () = tokio::time::sleep_until(due) => {
                        self.flush_text().await;
                        continue;
                    }
                },
            };
            let Some(command) = next else { break };
            if !command.is_stream_chunk() {
                self.settle_text().await;
            }
            match command {
                Command::Delete { reply } => {
                    let result = self.delete().await;
                    let done = result.is_ok();
                    let _ = reply.send(result);
                    if done {
                        return;
                    }
                }
                Command::Shutdown { reply } => {
                    // A live reset in flight is not settled here: its stored intent is
                    // finished at the next startup (rule 45), like after `kill -9`.
                    self.stop_execution(true).await;
                    let _ = reply.send(());
                    return;
                }
                other => self.handle(other).await,
            }
        }
        self.settle_text().await;
        self.stop_execution(true).await;
    }

    async fn handle(&mut self, command: Command) {
        if !command.is_timer() {
            self.last_active = tokio::time::Instant::now();
        }
        // A turn whose end is not written yet is written before anything else changes the
        // session, as soon as writes work again (the timer retries meanwhile).
        if self.unsettled.is_some()
            && !matches!(command, Command::SettleTurn)
            && self.inner.store.write_state() == kandev_store::WriteState::Ok
        {
            self.settle_turn().await;
        }
        match command {
            Command::SettleTurn => self.settle_turn().await,
            Command::Start { reply } => {
                let result = self.start().await;
                let _ = reply.send(result);
            }
            Command::Resume { fresh, reply } => {
                let result = self.resume(fresh).await;
                let _ = reply.send(result);
            }
            Command::StallCheck { epoch, turn_id } => self.on_stall_check(epoch, turn_id).await,
            Command::IdleCheck { epoch } => self.on_idle_check(epoch).await,
            Command::StepEntered { from, to, cause, start_agent, reply } => {
                let result = self.enter_step(from, to, cause, start_agent).await;
                let _ = reply.send(result);
            }
            Command::ShipDone { plan, result } => {
                let outcome = self.on_ship_done(plan, result).await;
                self.log("continuing after a ship action", outcome);
            }
            Command::Reset { reply } => {
                let result = self.user_reset().await;
                let _ = reply.send(result);
            }
            Command::SetAttempt { attempt, reply } => {
                let result = self.set_attempt(attempt).await;
                let _ = reply.send(result);
            }
            Command::Revert { turn_id, discard, dry_run, reply } => {
                let result = self.revert(turn_id, discard, dry_run).await;
                let _ = reply.send(result);
            }
            Command::ResetDone { exec_epoch, result } => {
                self.on_reset_done(exec_epoch, result).await
            }
            Command::Prompt { request, queued_by, reply } => {
                let result = self.admit(request, queued_by).await;
                let _ = reply.send(result);
            }
            Command::Cancel { reply } => {
                let result = self.cancel().await;
                let _ = reply.send(result);
            }
            Command::Stop { reply } => self.stop(reply).await,
            Command::Rebind { profile, reply } => {
                let result = self.rebind(*profile).await;
                let _ = reply.send(result);
            }
            Command::Permission { request_id, answer, by, reply } => {
                let result = self.answer_permission(&request_id, answer, &by).await;
                let _ = reply.send(result);
            }
            Command::SetMode { mode_id, reply } => self.apply(Applied::Mode(mode_id), reply),
            Command::SetConfig { config_id, value, reply } => {
                self.apply(Applied::Config { id: config_id, value }, reply)
            }
            Command::Queue { change, reply } => {
                let result = self.change_queue(change).await;
                let _ = reply.send(result);
            }
            Command::Note { text, note, epoch, reply } => {
                let result = self.note(text, note, epoch).await;
                let _ = reply.send(result);
            }
            Command::AskUser { text, options, timeout_ms, reply } => {
                let (store, waiters) = (&self.inner.store, &self.inner.questions);
                let (id, task) = (&self.session.id, &self.session.task_id);
                let asked =
                    crate::question::ask(store, waiters, id, task, &text, &options, timeout_ms);
                let _ = reply.send(asked.await);
            }
            Command::Booted { epoch, result } => self.on_booted(epoch, result).await,
            Command::Adopt { adoption, reply } => {
                let result = self.adopt(*adoption).await;
                let _ = reply.send(result);
            }
            Command::Agent { epoch, at, event } => {
                if self.live_epoch() == Some(epoch) && self.is_current_conversation(&event) {
                    self.on_agent_event(at, event).await;
                } else {
                    tracing::debug!(session = %self.session.id, epoch, "ignored an event of an old execution");
                }
            }
            Command::TurnDone { epoch, turn_id, result } => {
                self.on_turn_done(epoch, turn_id, result).await
            }
            Command::Exited { epoch, exit, stderr } => self.on_exited(epoch, exit, stderr).await,
            Command::EscalateCancel { epoch, turn_id } => self.on_escalate(epoch, turn_id).await,
            Command::TerminalOutput { message, terminal_id, output } => {
                let result = self.on_terminal_output(message, terminal_id, output).await;
                self.log("streaming a terminal's output", result);
            }
            Command::TerminalExited { terminal_id, output, responder } => {
                self.on_terminal_exited(terminal_id, output, responder).await
            }
            Command::Authenticate { method_id, reply } => self.authenticate(method_id, reply).await,
            Command::Authenticated { epoch, method_id, result, reply } => {
                let outcome = self.on_authenticated(epoch, method_id, result).await;
                let _ = reply.send(outcome);
            }
            Command::Applied { epoch, change, result, reply } => {
                let outcome = self.on_applied(epoch, change, result).await;
                let _ = reply.send(outcome);
            }
            Command::Delete { .. } | Command::Shutdown { .. } => {}
        }
    }

    /// Rule 22: events of a conversation the session has left (after a context reset on the
    /// same process) are dropped.
    fn is_current_conversation(&self, event: &AgentEvent) -> bool {
        let Some(live) = self.phase.live() else { return false };
        // While a live reset waits for `session/new`, the conversation being replaced has no
        // turn any more: whatever it still says is stale, before or after the new id lands.
        let replacing = self.phase.is_replacing_conversation();
        match event {
            AgentEvent::SessionUpdate { session_id, .. }
            | AgentEvent::PermissionRequest { session_id, .. }
            | AgentEvent::Terminal { session_id, .. } => {
                session_id == &live.acp_session_id && !replacing
            }
            _ => true,
        }
    }

    /// Spawns a child future owned by the engine's tracker.
    pub fn spawn(&self, future: impl std::future::Future<Output = ()> + Send + 'static) {
        self.inner.tracker.spawn(future);
    }

    pub fn sender(&self) -> mpsc::Sender<Command> {
        self.me.clone()
    }

    /// Sends `command` to this actor after `delay`, unless the actor has ended by then.
    pub fn after(&self, delay: Duration, command: Command) {
        let inbox = self.sender();
        let ended = self.ended.clone();
        self.spawn(async move {
            tokio::select! {
                _ = ended.cancelled() => {}
                _ = tokio::time::sleep(delay) => {
                    let _ = inbox.send(command).await;
                }
            }
        });
    }

    /// Logs a failed write; the actor keeps going (the next write re-reads the row).
    pub fn log(&self, what: &str, result: Result<()>) {
        if let Err(err) = result {
            tracing::error!(session = %self.session.id, error = %err, "{what} failed");
        }
    }
}
