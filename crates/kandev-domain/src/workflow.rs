//! Workflows (boards), their steps, and the step triggers and actions of workflows.md.

use crate::{AgentProfileId, StepId, Timestamp, WorkflowId, WorkspaceId};

/// A board: an ordered list of steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    pub id: WorkflowId,
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub description: String,
    /// The built-in template it was created from, if any.
    pub template_id: Option<String>,
    pub steps: Vec<Step>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Workflow {
    /// The step new tasks go to: the one marked as start step, else the first.
    pub fn start_step(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.is_start_step).or_else(|| self.steps.first())
    }

    pub fn step(&self, id: &StepId) -> Option<&Step> {
        self.steps.iter().find(|s| &s.id == id)
    }
}

/// A column of a board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub id: StepId,
    pub workflow_id: WorkflowId,
    pub name: String,
    pub position: u32,
    pub color: String,
    /// The step prompt; may contain `{{task_prompt}}`. Empty when the step has none.
    pub prompt: String,
    pub is_start_step: bool,
    pub allow_manual_move: bool,
    pub agent_profile_id: Option<AgentProfileId>,
    pub cancel_triggers_turn_complete: bool,
    pub events: StepEvents<StepId>,
}

/// A workflow to be created: from a template, an import, or the API. Step targets of
/// `move_to_step` are indexes into `steps`, resolved to ids when the workflow is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowSpec {
    pub name: String,
    pub description: String,
    pub steps: Vec<StepSpec>,
}

/// A step to be created, in the order of [`WorkflowSpec::steps`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepSpec {
    pub name: String,
    pub color: String,
    pub prompt: String,
    pub is_start_step: bool,
    pub allow_manual_move: bool,
    pub cancel_triggers_turn_complete: bool,
    pub events: StepEvents<usize>,
}

impl StepSpec {
    /// A plain step with no prompt and no actions.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            color: String::new(),
            prompt: String::new(),
            is_start_step: false,
            allow_manual_move: true,
            cancel_triggers_turn_complete: false,
            events: StepEvents::default(),
        }
    }
}

/// The placeholder in step prompts replaced by the task's title and description.
pub const TASK_PROMPT_PLACEHOLDER: &str = "{{task_prompt}}";

/// When a step's actions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Trigger {
    OnEnter,
    OnTurnStart,
    OnTurnComplete,
    OnExit,
}

impl Trigger {
    pub const ALL: [Trigger; 4] =
        [Trigger::OnEnter, Trigger::OnTurnStart, Trigger::OnTurnComplete, Trigger::OnExit];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::OnEnter => "on_enter",
            Trigger::OnTurnStart => "on_turn_start",
            Trigger::OnTurnComplete => "on_turn_complete",
            Trigger::OnExit => "on_exit",
        }
    }

    pub fn parse(value: &str) -> Option<Trigger> {
        Trigger::ALL.into_iter().find(|t| t.as_str() == value)
    }

    /// Whether `action` may be listed under this trigger (the table in workflows.md).
    pub fn allows<S>(self, action: &Action<S>) -> bool {
        use Action::*;
        match self {
            Trigger::OnEnter => matches!(
                action,
                ResetAgentContext | EnablePlanMode | SetSessionMode { .. } | AutoStartAgent
            ),
            Trigger::OnTurnStart => matches!(action, MoveToNext | MoveToPrevious | MoveToStep(_)),
            Trigger::OnTurnComplete => {
                matches!(action, MoveToNext | MoveToPrevious | MoveToStep(_) | DisablePlanMode)
            }
            Trigger::OnExit => matches!(action, DisablePlanMode),
        }
    }
}

/// A step action. `S` is how `move_to_step` names its target: a [`StepId`] in the
/// database, a step name in the portable YAML format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<S> {
    ResetAgentContext,
    EnablePlanMode,
    DisablePlanMode,
    SetSessionMode { mode_id: String },
    AutoStartAgent,
    MoveToNext,
    MoveToPrevious,
    MoveToStep(S),
}

impl<S> Action<S> {
    /// The action's type name as written in YAML and JSON.
    pub fn type_name(&self) -> &'static str {
        match self {
            Action::ResetAgentContext => "reset_agent_context",
            Action::EnablePlanMode => "enable_plan_mode",
            Action::DisablePlanMode => "disable_plan_mode",
            Action::SetSessionMode { .. } => "set_session_mode",
            Action::AutoStartAgent => "auto_start_agent",
            Action::MoveToNext => "move_to_next",
            Action::MoveToPrevious => "move_to_previous",
            Action::MoveToStep(_) => "move_to_step",
        }
    }

    /// Rewrites the `move_to_step` target, keeping every other action as it is.
    pub fn map_target<T, E>(self, f: impl FnOnce(S) -> Result<T, E>) -> Result<Action<T>, E> {
        Ok(match self {
            Action::ResetAgentContext => Action::ResetAgentContext,
            Action::EnablePlanMode => Action::EnablePlanMode,
            Action::DisablePlanMode => Action::DisablePlanMode,
            Action::SetSessionMode { mode_id } => Action::SetSessionMode { mode_id },
            Action::AutoStartAgent => Action::AutoStartAgent,
            Action::MoveToNext => Action::MoveToNext,
            Action::MoveToPrevious => Action::MoveToPrevious,
            Action::MoveToStep(s) => Action::MoveToStep(f(s)?),
        })
    }
}

/// The actions of a step, per trigger, in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepEvents<S> {
    pub on_enter: Vec<Action<S>>,
    pub on_turn_start: Vec<Action<S>>,
    pub on_turn_complete: Vec<Action<S>>,
    pub on_exit: Vec<Action<S>>,
}

impl<S> Default for StepEvents<S> {
    fn default() -> Self {
        Self { on_enter: vec![], on_turn_start: vec![], on_turn_complete: vec![], on_exit: vec![] }
    }
}

impl<S> StepEvents<S> {
    pub fn actions(&self, trigger: Trigger) -> &[Action<S>] {
        match trigger {
            Trigger::OnEnter => &self.on_enter,
            Trigger::OnTurnStart => &self.on_turn_start,
            Trigger::OnTurnComplete => &self.on_turn_complete,
            Trigger::OnExit => &self.on_exit,
        }
    }

    pub fn actions_mut(&mut self, trigger: Trigger) -> &mut Vec<Action<S>> {
        match trigger {
            Trigger::OnEnter => &mut self.on_enter,
            Trigger::OnTurnStart => &mut self.on_turn_start,
            Trigger::OnTurnComplete => &mut self.on_turn_complete,
            Trigger::OnExit => &mut self.on_exit,
        }
    }

    pub fn is_empty(&self) -> bool {
        Trigger::ALL.iter().all(|t| self.actions(*t).is_empty())
    }

    /// Every action listed under a trigger that does not allow it.
    pub fn misplaced(&self) -> Vec<(Trigger, usize, &Action<S>)> {
        Trigger::ALL
            .iter()
            .flat_map(|t| {
                self.actions(*t)
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| !t.allows(*a))
                    .map(|(i, a)| (*t, i, a))
            })
            .collect()
    }

    /// Rewrites every `move_to_step` target.
    pub fn map_targets<T, E>(
        self,
        mut f: impl FnMut(S) -> Result<T, E>,
    ) -> Result<StepEvents<T>, E> {
        let mut map = |list: Vec<Action<S>>| -> Result<Vec<Action<T>>, E> {
            list.into_iter().map(|a| a.map_target(&mut f)).collect()
        };
        Ok(StepEvents {
            on_enter: map(self.on_enter)?,
            on_turn_start: map(self.on_turn_start)?,
            on_turn_complete: map(self.on_turn_complete)?,
            on_exit: map(self.on_exit)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_action() -> Vec<Action<u32>> {
        vec![
            Action::ResetAgentContext,
            Action::EnablePlanMode,
            Action::DisablePlanMode,
            Action::SetSessionMode { mode_id: "plan".into() },
            Action::AutoStartAgent,
            Action::MoveToNext,
            Action::MoveToPrevious,
            Action::MoveToStep(1),
        ]
    }

    /// The trigger/action table of workflows.md, written out: (trigger, allowed action names).
    const TABLE: &[(Trigger, &[&str])] = &[
        (
            Trigger::OnEnter,
            &["reset_agent_context", "enable_plan_mode", "set_session_mode", "auto_start_agent"],
        ),
        (Trigger::OnTurnStart, &["move_to_next", "move_to_previous", "move_to_step"]),
        (
            Trigger::OnTurnComplete,
            &["move_to_next", "move_to_previous", "move_to_step", "disable_plan_mode"],
        ),
        (Trigger::OnExit, &["disable_plan_mode"]),
    ];

    #[test]
    fn trigger_allows_exactly_the_documented_actions() {
        for (trigger, allowed) in TABLE {
            for action in every_action() {
                let expected = allowed.contains(&action.type_name());
                assert_eq!(trigger.allows(&action), expected, "{trigger:?} / {action:?}");
            }
        }
    }

    #[test]
    fn misplaced_actions_are_reported_with_trigger_and_index() {
        let events = StepEvents::<u32> {
            on_exit: vec![Action::DisablePlanMode, Action::AutoStartAgent],
            ..Default::default()
        };
        let misplaced = events.misplaced();
        assert_eq!(misplaced.len(), 1);
        assert_eq!(misplaced[0].0, Trigger::OnExit);
        assert_eq!(misplaced[0].1, 1);
    }

    #[test]
    fn trigger_names_round_trip() {
        for t in Trigger::ALL {
            assert_eq!(Trigger::parse(t.as_str()), Some(t));
        }
        assert_eq!(Trigger::parse("on_lunch"), None);
    }
}
