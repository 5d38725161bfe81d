//! Workflow execution (workflows.md, lifecycle section D): moving tasks between steps, the
//! actions of `on_enter`, `on_turn_start`, `on_turn_complete` and `on_exit`, plan mode, and
//! the context reset with its failure containment. The decisions about which actions a
//! trigger yields are pure (domain crate); this module carries them out, inside the session
//! actor that owns the task's primary session.

use std::collections::VecDeque;

use kandev_api_types::TaskDto;
use kandev_domain::session::SessionState;
use kandev_domain::task::Task;
use kandev_domain::transcript::{LastError, MessageKind};
use kandev_domain::workflow::{Action, Step, Trigger, Workflow, first_move, step_prompt};
use kandev_domain::{StepId, TaskId};
use kandev_store::{ResetIntent, SessionUpdate};
use serde_json::json;

use crate::actor::{SessionActor, add_message};
use crate::{EngineError, Inner, PromptRequest, Result, publish};

/// Why a task entered a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryCause {
    /// Created into it.
    Created,
    /// Moved by someone (board drag, API, CLI).
    Manual,
    /// Moved by `on_turn_start`: the user's message is the turn that starts in the new step,
    /// so `auto_start_agent` sends nothing.
    TurnStart,
    /// Moved by `on_turn_complete`.
    TurnComplete,
}

impl EntryCause {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryCause::Created => "created",
            EntryCause::Manual => "manual",
            EntryCause::TurnStart => "on_turn_start",
            EntryCause::TurnComplete => "on_turn_complete",
        }
    }
}

/// A context reset in progress, and the step-entry actions waiting behind it (rule 18).
pub(crate) struct ResetInProgress {
    /// The step that asked for it; `None` for the user's reset button.
    pub step: Option<Step>,
    pub then: VecDeque<Action<StepId>>,
    pub cause: EntryCause,
    /// Waiting for an internal cancel of the running turn to settle (rule 23).
    pub waiting_for_turn: bool,
}

/// Moves a task in the store and announces it; returns the task and the step it left.
pub(crate) async fn record_move(
    inner: &Inner,
    task_id: &TaskId,
    to: &StepId,
    position: Option<usize>,
    cause: EntryCause,
    actor: &str,
) -> Result<(Task, StepId)> {
    let before = inner.store.get_task(task_id).await?;
    let mut tx = inner.store.begin_write().await?;
    let moved = tx.move_task(task_id, to, position, cause.as_str(), actor).await?;
    let payload = json!({ "task": TaskDto::from(&moved), "from_step_id": before.step_id.to_string(), "trigger": cause.as_str() });
    tx.emit(publish::workspace_topic(&moved), "task.moved", payload).await?;
    tx.commit().await?;
    Ok((moved, before.step_id))
}

impl SessionActor {
    /// Runs `on_exit` of the step the task left and `on_enter` of the one it entered.
    pub(crate) async fn enter_step(
        &mut self,
        from: Option<StepId>,
        to: StepId,
        cause: EntryCause,
        start_agent: bool,
    ) -> Result<()> {
        let workflow = self.inner.store.workflow_of_step(&to).await?;
        self.task = self.inner.store.get_task(&self.task.id).await?;
        if let Some(left) = from.as_ref().and_then(|f| workflow.step(f)) {
            for action in &left.events.on_exit {
                if matches!(action, Action::DisablePlanMode) {
                    self.set_plan_mode(false).await?;
                }
            }
        }
        let Some(step) = workflow.step(&to).cloned() else { return Ok(()) };
        if let Some(profile) = &step.agent_profile_id
            && self.session.agent_profile_id.as_ref() != Some(profile)
        {
            // The step works with its own agent: a session of that profile takes over.
            let engine = crate::Engine::from_inner(self.inner.clone());
            let task_id = self.task.id.clone();
            let handover = engine.enter_step_in_primary(task_id.clone(), from, to, cause);
            self.inner_tracker_spawn(async move {
                if let Err(err) = handover.await {
                    tracing::error!(task = %task_id, error = %err, "handing the step over failed");
                }
            });
            return Ok(());
        }
        let mut actions: VecDeque<Action<StepId>> = step.events.on_enter.iter().cloned().collect();
        if start_agent && !actions.contains(&Action::AutoStartAgent) {
            actions.push_back(Action::AutoStartAgent);
        }
        self.run_entry_actions(step, actions, cause).await
    }

    /// Runs entry actions in order; a reset suspends the rest until it settles.
    pub(crate) async fn run_entry_actions(
        &mut self,
        step: Step,
        mut actions: VecDeque<Action<StepId>>,
        cause: EntryCause,
    ) -> Result<()> {
        while let Some(action) = actions.pop_front() {
            match action {
                Action::ResetAgentContext => {
                    if self.session.state == SessionState::Created {
                        continue; // rule 19: the first start is already fresh
                    }
                    let reset = ResetInProgress {
                        step: Some(step),
                        then: actions,
                        cause,
                        waiting_for_turn: false,
                    };
                    return Box::pin(self.begin_reset(reset)).await;
                }
                Action::EnablePlanMode => self.set_plan_mode(true).await?,
                Action::DisablePlanMode => self.set_plan_mode(false).await?,
                Action::SetSessionMode { mode_id } => self.prefer_mode(mode_id).await?,
                Action::AutoStartAgent if cause == EntryCause::TurnStart => {}
                Action::AutoStartAgent => {
                    let prompt = step_prompt(&step, &self.task.prompt());
                    let request =
                        PromptRequest { content: prompt, client_message_id: None, queue: true };
                    match Box::pin(self.admit(request, "workflow")).await {
                        Ok(_) | Err(EngineError::Busy(_)) => {}
                        Err(err) => return Err(err),
                    }
                }
                Action::MoveToNext | Action::MoveToPrevious | Action::MoveToStep(_) => {}
            }
        }
        Ok(())
    }

    async fn set_plan_mode(&mut self, on: bool) -> Result<()> {
        if self.session.plan_mode == on {
            return Ok(());
        }
        self.commit(SessionUpdate { plan_mode: Some(on), ..SessionUpdate::default() }, None).await
    }

    /// Persists the mode for the next start, and asks a running agent to switch now.
    async fn prefer_mode(&mut self, mode_id: String) -> Result<()> {
        self.commit(
            SessionUpdate { session_mode: Some(Some(mode_id.clone())), ..SessionUpdate::default() },
            None,
        )
        .await?;
        self.switch_mode_now(mode_id);
        Ok(())
    }

    /// `on_turn_complete` of the task's step, once per turn (rule 5).
    pub(crate) async fn on_turn_complete(&mut self) -> Result<()> {
        let task = self.inner.store.get_task(&self.task.id).await?;
        if task.primary_session_id.as_ref() != Some(&self.session.id) {
            return Ok(()); // workflows drive the primary session only
        }
        let workflow = self.inner.store.get_workflow(&task.workflow_id).await?;
        let Some(step) = workflow.step(&task.step_id).cloned() else { return Ok(()) };
        for action in &step.events.on_turn_complete {
            if matches!(action, Action::DisablePlanMode) {
                self.set_plan_mode(false).await?;
            }
        }
        self.follow_move(&workflow, &step, Trigger::OnTurnComplete, EntryCause::TurnComplete).await
    }

    /// `on_turn_start` of the task's step when the user sends a message.
    pub(crate) async fn on_user_turn_start(&mut self) -> Result<()> {
        let task = self.inner.store.get_task(&self.task.id).await?;
        if task.primary_session_id.as_ref() != Some(&self.session.id) {
            return Ok(());
        }
        let workflow = self.inner.store.get_workflow(&task.workflow_id).await?;
        let Some(step) = workflow.step(&task.step_id).cloned() else { return Ok(()) };
        self.follow_move(&workflow, &step, Trigger::OnTurnStart, EntryCause::TurnStart).await
    }

    /// At most one move per trigger; the entered step's actions run right after.
    async fn follow_move(
        &mut self,
        workflow: &Workflow,
        step: &Step,
        trigger: Trigger,
        cause: EntryCause,
    ) -> Result<()> {
        let Some(target) = first_move(workflow, step, trigger) else { return Ok(()) };
        let target = target.id.clone();
        let actor = if trigger == Trigger::OnTurnStart { "user" } else { "agent" };
        let (_, from) =
            record_move(&self.inner, &self.task.id, &target, None, cause, actor).await?;
        self.enter_step(Some(from), target, cause, false).await
    }

    // ------------------------------------------------------------ context reset (rules 18-27)

    /// Starts a reset: quiesces a running turn first, then resets live or lazily.
    pub(crate) async fn begin_reset(&mut self, mut reset: ResetInProgress) -> Result<()> {
        if self.resetting.is_some() {
            return Err(EngineError::ResetInProgress("a context reset is already running".into()));
        }
        // Rule 45: stored before any agent is contacted, deleted when the reset settles.
        let cause = if reset.step.is_some() { reset.cause.as_str() } else { USER_RESET };
        let mut tx = self.inner.store.begin_write().await?;
        let step = reset.step.as_ref().map(|s| &s.id);
        tx.record_reset(&self.session.id, step, self.session.epoch, cause).await?;
        tx.commit().await?;
        if self.cancel_internally() {
            reset.waiting_for_turn = true;
            self.resetting = Some(reset);
            return Ok(());
        }
        self.resetting = Some(reset);
        self.continue_reset().await
    }

    /// Called when nothing runs any more: resets a live conversation (`session/new` on the
    /// same process, bounded) or, without one, just forgets the old conversation.
    pub(crate) async fn continue_reset(&mut self) -> Result<()> {
        if let Some(reset) = self.resetting.as_mut() {
            reset.waiting_for_turn = false;
        }
        if self.start_live_reset() {
            return Ok(()); // the result comes back as Command::ResetDone
        }
        // A start in progress is superseded: it starts again below, on a new conversation,
        // with the prompt that was waiting for it (the session stays STARTING, rule 46).
        let restart = self.cancel_boot();
        let cleared = self.forget_conversation().await;
        if let Some(prompt) = restart {
            self.begin_boot(prompt, cleared.is_ok()).await?;
        }
        match cleared {
            Ok(()) => self.reset_succeeded(None).await,
            Err(err) => {
                self.reset_failed(format!("the old conversation could not be cleared: {err}")).await
            }
        }
    }

    /// The lazy reset (rule 21): a new epoch, no token, no conversation id, no context window.
    async fn forget_conversation(&mut self) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        let epoch = tx.bump_epoch(&self.session.id, self.session.epoch).await?;
        let before = self.session.epoch;
        self.session.epoch = epoch;
        let update = SessionUpdate {
            acp_session_id: Some(None),
            resume_token: Some(None),
            context_window: Some(None),
            ..SessionUpdate::default()
        };
        let written = match self.write(&mut tx, update).await {
            Ok(()) => tx.commit().await.map(drop).map_err(EngineError::from),
            Err(err) => Err(err),
        };
        if written.is_err() {
            self.session.epoch = before; // nothing was committed
        }
        written
    }

    /// After a successful reset: a divider in the transcript, then the waiting actions.
    pub(crate) async fn reset_succeeded(&mut self, note: Option<&str>) -> Result<()> {
        let Some(reset) = self.resetting.take() else { return Ok(()) };
        let text = divider(reset.step.as_ref());
        let text = note.map(|n| format!("{text} ({n})")).unwrap_or(text);
        let mut tx = self.inner.store.begin_write().await?;
        tx.clear_reset(&self.session.id).await?;
        self.commit_tx(
            tx,
            SessionUpdate::default(),
            Some((MessageKind::Status, text, json!({ "reason": "context_reset" }))),
        )
        .await?;
        if let Some(step) = reset.step {
            self.run_entry_actions(step, reset.then, reset.cause).await?;
        }
        // What waited for the reset runs now, unless a step prompt just took the turn.
        self.drain_queue().await;
        Ok(())
    }

    /// Rule 25: no prompt, no divider, `last_error` with the step and the cause, waiting.
    pub(crate) async fn reset_failed(&mut self, cause: String) -> Result<()> {
        let Some(reset) = self.resetting.take() else { return Ok(()) };
        let message = match &reset.step {
            Some(step) => format!(
                "the context reset for step {} failed: {cause}; the step prompt was not sent",
                step.name
            ),
            None => format!("the context reset failed: {cause}"),
        };
        let step_name = reset.step.as_ref().map(|s| s.name.clone());
        let error = self.error(
            "workflow_context_reset_failed",
            message.clone(),
            json!({ "step": step_name, "epoch": self.session.epoch }),
        );
        // Only a state nothing backs any more goes back to waiting (rule 46).
        let state = match self.session.state {
            SessionState::Starting if !self.is_booting() => Some(SessionState::WaitingForInput),
            SessionState::Running if self.turn.is_none() => Some(SessionState::WaitingForInput),
            _ => None,
        };
        let update =
            SessionUpdate { state, last_error: Some(Some(error)), ..SessionUpdate::default() };
        let mut tx = self.inner.store.begin_write().await?;
        tx.clear_reset(&self.session.id).await?;
        self.commit_tx(
            tx,
            update,
            Some((MessageKind::Error, message, json!({ "code": "workflow_context_reset_failed" }))),
        )
        .await
    }
}

/// The cause stored for the user's reset button.
const USER_RESET: &str = "user";

/// The transcript's divider after a reset.
fn divider(step: Option<&Step>) -> String {
    match step {
        Some(step) => {
            format!("context reset for step {}: the agent starts a fresh conversation", step.name)
        }
        None => "context reset: the agent starts a fresh conversation".to_owned(),
    }
}

/// Rule 45: a reset that was accepted but never settled (the server stopped in the middle,
/// gracefully or not) is finished at startup, without any agent: a new epoch, no token, no
/// conversation id or context window, the divider, then what the step does after the reset
/// (plan mode, session mode, and its prompt queued once, `queued_by = workflow`; no agent is
/// started, rule 42). When the step no longer exists it is recorded as failed (rule 25).
/// Clearing the stored intent is part of the same transaction, so it happens once.
pub(crate) async fn settle_after_restart(inner: &Inner, intent: &ResetIntent) -> Result<()> {
    let session = inner.store.get_session(&intent.session_id).await?;
    let task = inner.store.get_task(&session.task_id).await?;
    let workflow = inner.store.get_workflow(&task.workflow_id).await?;
    let step = intent.step_id.as_ref().and_then(|id| workflow.step(id)).cloned();
    let mut tx = inner.store.begin_write().await?;
    tx.clear_reset(&session.id).await?;
    if intent.step_id.is_some() && step.is_none() {
        let message = "the context reset of a step that no longer exists failed: the server \
                       stopped during it; the step prompt was not sent"
            .to_owned();
        let error = LastError {
            code: "workflow_context_reset_failed".into(),
            message: message.clone(),
            details: Some(
                json!({ "step": null, "epoch": session.epoch, "cause": "server_restart" })
                    .to_string(),
            ),
            at: inner.store.now(),
        };
        let update = SessionUpdate { last_error: Some(Some(error)), ..SessionUpdate::default() };
        let session = tx.update_session(&session.id, session.epoch, &update).await?;
        publish::session_event(&mut tx, &session, "session.updated").await?;
        let last_error = session.last_error.as_ref().map(kandev_api_types::LastErrorDto::from);
        tx.emit(
            publish::session_topic(&session),
            "session.error",
            json!({ "session_id": session.id.to_string(), "last_error": last_error }),
        )
        .await?;
        let metadata = json!({ "code": "workflow_context_reset_failed" });
        add_message(&mut tx, &session, None, MessageKind::Error, &message, metadata).await?;
        tx.commit().await?;
        return Ok(());
    }
    let epoch = tx.bump_epoch(&session.id, session.epoch).await?;
    let mut update = SessionUpdate {
        acp_session_id: Some(None),
        resume_token: Some(None),
        context_window: Some(None),
        ..SessionUpdate::default()
    };
    let mut prompt = None;
    if let Some(step) = &step {
        let after_reset = step
            .events
            .on_enter
            .iter()
            .skip_while(|a| !matches!(a, Action::ResetAgentContext))
            .skip(1);
        for action in after_reset {
            match action {
                Action::EnablePlanMode => update.plan_mode = Some(true),
                Action::DisablePlanMode => update.plan_mode = Some(false),
                Action::SetSessionMode { mode_id } => {
                    update.session_mode = Some(Some(mode_id.clone()))
                }
                Action::AutoStartAgent if intent.cause != EntryCause::TurnStart.as_str() => {
                    prompt = Some(step_prompt(step, &task.prompt()))
                }
                _ => {}
            }
        }
    }
    let session = tx.update_session(&session.id, epoch, &update).await?;
    publish::session_event(&mut tx, &session, "session.updated").await?;
    let text = format!("{} (finished after the server restarted)", divider(step.as_ref()));
    let metadata = json!({ "reason": "context_reset" });
    add_message(&mut tx, &session, None, MessageKind::Status, &text, metadata).await?;
    if let Some(prompt) = prompt {
        tx.enqueue(&session.id, &prompt, None, "workflow").await?;
        let queue = tx.list_queue(&session.id).await?;
        publish::queue_changed(&mut tx, &session, &queue).await?;
    }
    tx.commit().await?;
    Ok(())
}
