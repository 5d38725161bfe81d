//! Workflow execution inside a session's actor (workflows.md, docs/lifecycle.md section D): the
//! actions of `on_enter`, `on_turn_start`, `on_turn_complete` and `on_exit` of the task's
//! step. Which actions a trigger yields is decided by the domain crate; moves are recorded
//! by [`crate::workflow`]; a step with its own agent profile is handed over to that
//! profile's session.

use std::collections::VecDeque;

use kandev_domain::StepId;
use kandev_domain::message_meta::{ErrorMeta, StatusNote};
use kandev_domain::session::SessionState;
use kandev_domain::workflow::{
    Action, EntryCause, Step, Trigger, Workflow, first_move, step_prompt,
};

use kandev_store::SessionUpdate;
use serde_json::json;

use crate::api::PromptRequest;
use crate::command::{Command, ShipEvent, ShipPlan};
use crate::error::{EngineError, Result};
use crate::saved_prompts::{expand_saved_prompts, missing_prompts_note, too_large_note};
use crate::session::state::{ResetPlan, SessionActor};
use crate::workflow::{enter_step_in_primary, record_trigger_move, ship_then_report};

impl SessionActor {
    /// Runs `on_exit` of the step the task left and `on_enter` of the one it entered.
    pub(super) async fn enter_step(
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
            let task_id = self.task.id.clone();
            let handover =
                enter_step_in_primary(self.inner.clone(), task_id.clone(), from, to, cause);
            self.spawn(async move {
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
    pub(super) async fn run_entry_actions(
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
                    let plan = ResetPlan { step: Some(Box::new(step)), then: actions, cause };
                    return Box::pin(self.begin_reset(plan)).await;
                }
                Action::EnablePlanMode => self.set_plan_mode(true).await?,
                Action::DisablePlanMode => self.set_plan_mode(false).await?,
                Action::SetSessionMode { mode_id } => self.prefer_mode(mode_id).await?,
                Action::AutoStartAgent if cause == EntryCause::TurnStart => {}
                Action::AutoStartAgent => {
                    let prompt = step_prompt(&step, &self.task.prompt());
                    let expanded =
                        expand_saved_prompts(&self.inner.store, &self.task, prompt).await?;
                    let missing = expanded.missing;
                    if !missing.is_empty() {
                        let text = missing_prompts_note(&missing);
                        let note = StatusNote::UnknownSavedPrompt { names: missing };
                        self.note(text, note, None).await?;
                    }
                    if let Some(too_large) = expanded.too_large {
                        let note = StatusNote::SavedPromptsTooLarge;
                        self.note(too_large_note(too_large), note, None).await?;
                    }
                    let request = PromptRequest::text(expanded.text);
                    match Box::pin(self.admit(request, "workflow")).await {
                        Ok(_) | Err(EngineError::Busy(_)) => {}
                        Err(err) => return Err(err),
                    }
                }
                Action::StartAttempts { count } => {
                    let prompt = step_prompt(&step, &self.task.prompt());
                    let expanded =
                        expand_saved_prompts(&self.inner.store, &self.task, prompt).await?;
                    self.start_attempts(&step, count, expanded.text);
                }
                // Forge actions run from the forge's triggers, never on entry (`allows`).
                Action::MoveToNext
                | Action::MoveToPrevious
                | Action::MoveToStep(_)
                | Action::SendFeedback(_)
                | Action::AutoMerge { .. }
                | Action::CommentIssue
                | Action::CloseIssue => {}
                action @ (Action::Push
                | Action::CreatePullRequest
                | Action::Merge { .. }
                | Action::Rebase) => {
                    let event = ShipEvent::Enter(cause);
                    self.start_ship(ShipPlan {
                        step: Box::new(step),
                        action,
                        then: actions,
                        event,
                    });
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// A step's `start_attempts`: the attempts start outside the actor (they take the task's
    /// lock and ask their own actors); a note in this transcript says what became of them.
    fn start_attempts(&self, step: &Step, count: u32, prompt: String) {
        let profile_id = step.agent_profile_id.clone();
        let request =
            crate::api::AttemptRequest { profile_id, prompt: Some(prompt), started_by: None };
        let requests = vec![request; count as usize];
        let (inner, task_id, me) = (self.inner.clone(), self.task.id.clone(), self.sender());
        let epoch = self.session.epoch;
        self.spawn(async move {
            let (text, note) = match crate::attempts::start(&inner, &task_id, requests).await {
                Ok(sessions) => (
                    format!("started {} attempts, each on a branch of its own", sessions.len()),
                    StatusNote::Attempts {
                        outcome: "started".into(),
                        sessions: sessions.iter().map(|s| s.id.to_string()).collect(),
                    },
                ),
                Err(err) => (
                    format!("could not start the step's attempts: {err}"),
                    StatusNote::Attempts { outcome: "failed".into(), sessions: vec![] },
                ),
            };
            let (reply, _) = tokio::sync::oneshot::channel();
            let _ = me.send(Command::Note { text, note, epoch: Some(epoch), reply }).await;
        });
    }

    /// Starts a ship action outside the actor; its result comes back as
    /// [`crate::command::Command::ShipDone`], and the actions behind it wait.
    fn start_ship(&self, plan: ShipPlan) {
        let run = ship_then_report(
            self.inner.clone(),
            self.task.id.clone(),
            self.session.id.clone(),
            plan,
        );
        self.spawn(run);
    }

    /// A ship action ended: on success a status note and the event's remaining actions (if
    /// the task is still in the step); on failure `last_error` with code `ship_failed` and
    /// nothing more of that event (like a failed context reset).
    pub(super) async fn on_ship_done(
        &mut self,
        plan: ShipPlan,
        result: Result<String>,
    ) -> Result<()> {
        let ShipPlan { step, action, then, event } = plan;
        let name = action.type_name();
        let done = match result {
            Ok(done) => done,
            Err(err) => {
                let details = match &err {
                    EngineError::Refused { details, .. } => details.clone(),
                    _ => serde_json::Value::Null,
                };
                let message = format!(
                    "the {name} action of step {} failed: {err}; the rest of its {} actions did not run",
                    step.name,
                    event.trigger()
                );
                let error = self.error(
                    "ship_failed",
                    message.clone(),
                    json!({ "step": step.name, "action": name, "trigger": event.trigger(), "details": details }),
                );
                let update =
                    SessionUpdate { last_error: Some(Some(error)), ..SessionUpdate::default() };
                let meta =
                    ErrorMeta { action: Some(name.to_owned()), ..ErrorMeta::code("ship_failed") };
                let note = (message, meta.into());
                return self.commit(update, Some(note)).await;
            }
        };
        let text = format!("workflow step {}: {done}", step.name);
        let note = (text, StatusNote::ShipAction { action: name.to_owned() }.into());
        self.commit(SessionUpdate::default(), Some(note)).await?;
        self.task = self.inner.store.get_task(&self.task.id).await?;
        if self.task.step_id != step.id {
            return Ok(()); // the task moved on meanwhile: the rest belonged to the old step
        }
        match event {
            ShipEvent::Enter(cause) => self.run_entry_actions(*step, then, cause).await,
            ShipEvent::TurnComplete => self.run_turn_complete_actions(*step, then).await,
        }
    }

    /// `on_turn_complete` of the task's step, once per turn (rule 5).
    pub(super) async fn on_turn_complete(&mut self) -> Result<()> {
        let task = self.inner.store.get_task(&self.task.id).await?;
        if task.primary_session_id.as_ref() != Some(&self.session.id) {
            return Ok(()); // workflows drive the primary session only
        }
        let workflow = self.inner.store.get_workflow(&task.workflow_id).await?;
        let Some(step) = workflow.step(&task.step_id).cloned() else { return Ok(()) };
        let actions = step.events.on_turn_complete.iter().cloned().collect();
        self.run_turn_complete_actions(step, actions).await
    }

    /// The actions of `on_turn_complete` in order, then its move (at most one, made after
    /// the other actions and only when none of them failed). A ship action suspends the rest
    /// until it ends.
    async fn run_turn_complete_actions(
        &mut self,
        step: Step,
        mut actions: VecDeque<Action<StepId>>,
    ) -> Result<()> {
        while let Some(action) = actions.pop_front() {
            match action {
                Action::DisablePlanMode => self.set_plan_mode(false).await?,
                action if action.is_ship() => {
                    let event = ShipEvent::TurnComplete;
                    self.start_ship(ShipPlan {
                        step: Box::new(step),
                        action,
                        then: actions,
                        event,
                    });
                    return Ok(());
                }
                _ => {}
            }
        }
        let workflow = self.inner.store.workflow_of_step(&step.id).await?;
        self.follow_move(&workflow, &step, Trigger::OnTurnComplete, EntryCause::TurnComplete).await
    }

    /// `on_turn_start` of the task's step when the user sends a message.
    pub(super) async fn on_user_turn_start(&mut self) -> Result<()> {
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
        let from = step.id.clone();
        let moved =
            record_trigger_move(&self.inner, &self.task.id, &from, &target, cause, actor).await?;
        if moved.is_none() {
            return Ok(()); // moved meanwhile: this trigger belonged to the step it left
        }
        self.enter_step(Some(from), target, cause, false).await
    }
}
