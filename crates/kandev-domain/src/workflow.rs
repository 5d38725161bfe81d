//! Workflows (boards), their steps, and the step triggers and actions of docs/workflows.md.

use crate::ship::MergeStrategy;
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

impl Step {
    /// Whether entering the step starts work by itself: it starts the agent or attempts, so a
    /// task without a session gets one to run its entry (issue 48).
    pub fn starts_work(&self) -> bool {
        self.events
            .on_enter
            .iter()
            .any(|a| matches!(a, Action::AutoStartAgent | Action::StartAttempts { .. }))
    }
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
    /// The task's pull request was merged (seen by polling the forge, or `task.pr.get`).
    OnPrMerged,
    /// The task's pull request was closed without being merged.
    OnPrClosed,
    /// A check of the pull request's head commit failed (once per commit).
    OnPrChecksFailed,
    /// Every check of the pull request's head commit passed (once per commit).
    OnPrChecksPassed,
    /// A reviewer asked for changes or left new review comments (once per new review).
    OnPrReview,
}

impl Trigger {
    pub const ALL: [Trigger; 9] = [
        Trigger::OnEnter,
        Trigger::OnTurnStart,
        Trigger::OnTurnComplete,
        Trigger::OnExit,
        Trigger::OnPrMerged,
        Trigger::OnPrClosed,
        Trigger::OnPrChecksFailed,
        Trigger::OnPrChecksPassed,
        Trigger::OnPrReview,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::OnEnter => "on_enter",
            Trigger::OnTurnStart => "on_turn_start",
            Trigger::OnTurnComplete => "on_turn_complete",
            Trigger::OnExit => "on_exit",
            Trigger::OnPrMerged => "on_pr_merged",
            Trigger::OnPrClosed => "on_pr_closed",
            Trigger::OnPrChecksFailed => "on_pr_checks_failed",
            Trigger::OnPrChecksPassed => "on_pr_checks_passed",
            Trigger::OnPrReview => "on_pr_review",
        }
    }

    pub fn parse(value: &str) -> Option<Trigger> {
        Trigger::ALL.into_iter().find(|t| t.as_str() == value)
    }

    /// Whether `action` may be listed under this trigger (the table in docs/workflows.md).
    /// Ship actions run where the agent is not working in the worktree: when a task enters a
    /// step (before `auto_start_agent`, when written before it) and after a turn.
    pub fn allows<S>(self, action: &Action<S>) -> bool {
        use Action::*;
        match self {
            Trigger::OnEnter => {
                matches!(
                    action,
                    ResetAgentContext
                        | EnablePlanMode
                        | SetSessionMode { .. }
                        | AutoStartAgent
                        | StartAttempts { .. }
                ) || action.is_ship()
            }
            Trigger::OnTurnStart => matches!(action, MoveToNext | MoveToPrevious | MoveToStep(_)),
            Trigger::OnTurnComplete => {
                matches!(action, MoveToNext | MoveToPrevious | MoveToStep(_) | DisablePlanMode)
                    || action.is_ship()
            }
            Trigger::OnExit => matches!(action, DisablePlanMode),
            Trigger::OnPrMerged => matches!(
                action,
                MoveToNext | MoveToPrevious | MoveToStep(_) | CommentIssue | CloseIssue
            ),
            Trigger::OnPrClosed => {
                matches!(action, MoveToNext | MoveToPrevious | MoveToStep(_) | CommentIssue)
            }
            Trigger::OnPrChecksFailed | Trigger::OnPrReview => {
                matches!(action, MoveToNext | MoveToPrevious | MoveToStep(_) | SendFeedback(_))
            }
            Trigger::OnPrChecksPassed => {
                matches!(action, MoveToNext | MoveToPrevious | MoveToStep(_) | AutoMerge { .. })
            }
        }
    }
}

/// How `send_feedback` sends the forge's feedback to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feedback {
    /// Feedback messages sent for a task at most; past them the task needs its developer.
    pub max_rounds: u32,
    /// Whether review comments of bots count as reviews (off: they are ignored).
    pub include_bots: bool,
}

impl Feedback {
    /// Rounds when a workflow does not say.
    pub const DEFAULT_ROUNDS: u32 = 3;
    /// The most rounds a workflow may allow.
    pub const MAX_ROUNDS: u32 = 20;
}

impl Default for Feedback {
    fn default() -> Self {
        Feedback { max_rounds: Feedback::DEFAULT_ROUNDS, include_bots: false }
    }
}

/// Why a task entered a step; recorded as the move's trigger in the task's step history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// Moved by `on_pr_merged`.
    PrMerged,
    /// Moved by `on_pr_closed`.
    PrClosed,
    /// Moved by `on_pr_checks_failed`.
    PrChecksFailed,
    /// Moved by `on_pr_checks_passed`.
    PrChecksPassed,
    /// Moved by `on_pr_review`.
    PrReview,
}

impl EntryCause {
    pub const ALL: [EntryCause; 9] = [
        EntryCause::Created,
        EntryCause::Manual,
        EntryCause::TurnStart,
        EntryCause::TurnComplete,
        EntryCause::PrMerged,
        EntryCause::PrClosed,
        EntryCause::PrChecksFailed,
        EntryCause::PrChecksPassed,
        EntryCause::PrReview,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EntryCause::Created => "created",
            EntryCause::Manual => "manual",
            EntryCause::TurnStart => "on_turn_start",
            EntryCause::TurnComplete => "on_turn_complete",
            EntryCause::PrMerged => "on_pr_merged",
            EntryCause::PrClosed => "on_pr_closed",
            EntryCause::PrChecksFailed => "on_pr_checks_failed",
            EntryCause::PrChecksPassed => "on_pr_checks_passed",
            EntryCause::PrReview => "on_pr_review",
        }
    }

    pub fn parse(value: &str) -> Option<EntryCause> {
        EntryCause::ALL.into_iter().find(|c| c.as_str() == value)
    }
}

/// A step action. `S` is how `move_to_step` names its target: a [`StepId`] in the
/// database, a step name in the portable YAML format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<S> {
    ResetAgentContext,
    EnablePlanMode,
    DisablePlanMode,
    SetSessionMode {
        mode_id: String,
    },
    AutoStartAgent,
    MoveToNext,
    MoveToPrevious,
    MoveToStep(S),
    /// Pushes the task branch to `origin` (never forced).
    Push,
    /// Opens a pull (merge) request on the repository's forge, pushing first if needed.
    CreatePullRequest,
    /// Merges the task branch into its base branch in the main repository.
    Merge {
        strategy: MergeStrategy,
    },
    /// Rebases the task branch onto the current tip of its base.
    Rebase,
    /// Queues the failed checks (their jobs' log tails) or the review comments to the agent,
    /// at most `max_rounds` times per task (`on_pr_checks_failed`, `on_pr_review`).
    SendFeedback(Feedback),
    /// Merges the pull request on its forge once its checks passed and its required
    /// approvals are met; otherwise records why not (`on_pr_checks_passed`).
    AutoMerge {
        strategy: MergeStrategy,
    },
    /// Comments on the issue the task was made from with its pull requests' links and
    /// states (`on_pr_merged`, `on_pr_closed`; docs/intake.md).
    CommentIssue,
    /// Closes the issue the task was made from (`on_pr_merged`).
    CloseIssue,
    /// Starts `count` attempts of the task (issue 48; `on_enter`): sessions of the step's
    /// profile (else the task's) on the step's prompt, each in a worktree of its own.
    StartAttempts {
        count: u32,
    },
}

/// Most attempts one action or call starts.
pub const MAX_ATTEMPTS: u32 = 6;

impl<S> Action<S> {
    /// A ship action: it changes branches, remotes or the forge (docs/shipping.md).
    pub fn is_ship(&self) -> bool {
        matches!(
            self,
            Action::Push | Action::CreatePullRequest | Action::Merge { .. } | Action::Rebase
        )
    }

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
            Action::Push => "push",
            Action::CreatePullRequest => "create_pull_request",
            Action::Merge { .. } => "merge",
            Action::Rebase => "rebase",
            Action::SendFeedback(_) => "send_feedback",
            Action::AutoMerge { .. } => "auto_merge",
            Action::CommentIssue => "comment_issue",
            Action::CloseIssue => "close_issue",
            Action::StartAttempts { .. } => "start_attempts",
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
            Action::Push => Action::Push,
            Action::CreatePullRequest => Action::CreatePullRequest,
            Action::Merge { strategy } => Action::Merge { strategy },
            Action::Rebase => Action::Rebase,
            Action::SendFeedback(feedback) => Action::SendFeedback(feedback),
            Action::AutoMerge { strategy } => Action::AutoMerge { strategy },
            Action::CommentIssue => Action::CommentIssue,
            Action::CloseIssue => Action::CloseIssue,
            Action::StartAttempts { count } => Action::StartAttempts { count },
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
    pub on_pr_merged: Vec<Action<S>>,
    pub on_pr_closed: Vec<Action<S>>,
    pub on_pr_checks_failed: Vec<Action<S>>,
    pub on_pr_checks_passed: Vec<Action<S>>,
    pub on_pr_review: Vec<Action<S>>,
}

impl<S> Default for StepEvents<S> {
    fn default() -> Self {
        Self {
            on_enter: vec![],
            on_turn_start: vec![],
            on_turn_complete: vec![],
            on_exit: vec![],
            on_pr_merged: vec![],
            on_pr_closed: vec![],
            on_pr_checks_failed: vec![],
            on_pr_checks_passed: vec![],
            on_pr_review: vec![],
        }
    }
}

impl<S> StepEvents<S> {
    pub fn actions(&self, trigger: Trigger) -> &[Action<S>] {
        match trigger {
            Trigger::OnEnter => &self.on_enter,
            Trigger::OnTurnStart => &self.on_turn_start,
            Trigger::OnTurnComplete => &self.on_turn_complete,
            Trigger::OnExit => &self.on_exit,
            Trigger::OnPrMerged => &self.on_pr_merged,
            Trigger::OnPrClosed => &self.on_pr_closed,
            Trigger::OnPrChecksFailed => &self.on_pr_checks_failed,
            Trigger::OnPrChecksPassed => &self.on_pr_checks_passed,
            Trigger::OnPrReview => &self.on_pr_review,
        }
    }

    pub fn actions_mut(&mut self, trigger: Trigger) -> &mut Vec<Action<S>> {
        match trigger {
            Trigger::OnEnter => &mut self.on_enter,
            Trigger::OnTurnStart => &mut self.on_turn_start,
            Trigger::OnTurnComplete => &mut self.on_turn_complete,
            Trigger::OnExit => &mut self.on_exit,
            Trigger::OnPrMerged => &mut self.on_pr_merged,
            Trigger::OnPrClosed => &mut self.on_pr_closed,
            Trigger::OnPrChecksFailed => &mut self.on_pr_checks_failed,
            Trigger::OnPrChecksPassed => &mut self.on_pr_checks_passed,
            Trigger::OnPrReview => &mut self.on_pr_review,
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
            on_pr_merged: map(self.on_pr_merged)?,
            on_pr_closed: map(self.on_pr_closed)?,
            on_pr_checks_failed: map(self.on_pr_checks_failed)?,
            on_pr_checks_passed: map(self.on_pr_checks_passed)?,
            on_pr_review: map(self.on_pr_review)?,
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
            Action::Push,
            Action::CreatePullRequest,
            Action::Merge { strategy: MergeStrategy::Squash },
            Action::Rebase,
            Action::SendFeedback(Feedback::default()),
            Action::AutoMerge { strategy: MergeStrategy::Merge },
            Action::CommentIssue,
            Action::CloseIssue,
            Action::StartAttempts { count: 3 },
        ]
    }

    /// The trigger/action table of docs/workflows.md, written out: (trigger, allowed action names).
    const TABLE: &[(Trigger, &[&str])] = &[
        (
            Trigger::OnEnter,
            &[
                "reset_agent_context",
                "enable_plan_mode",
                "set_session_mode",
                "auto_start_agent",
                "start_attempts",
                "push",
                "create_pull_request",
                "merge",
                "rebase",
            ],
        ),
        (Trigger::OnTurnStart, &["move_to_next", "move_to_previous", "move_to_step"]),
        (
            Trigger::OnTurnComplete,
            &[
                "move_to_next",
                "move_to_previous",
                "move_to_step",
                "disable_plan_mode",
                "push",
                "create_pull_request",
                "merge",
                "rebase",
            ],
        ),
        (Trigger::OnExit, &["disable_plan_mode"]),
        (
            Trigger::OnPrMerged,
            &["move_to_next", "move_to_previous", "move_to_step", "comment_issue", "close_issue"],
        ),
        (
            Trigger::OnPrClosed,
            &["move_to_next", "move_to_previous", "move_to_step", "comment_issue"],
        ),
        (
            Trigger::OnPrChecksFailed,
            &["move_to_next", "move_to_previous", "move_to_step", "send_feedback"],
        ),
        (
            Trigger::OnPrChecksPassed,
            &["move_to_next", "move_to_previous", "move_to_step", "auto_merge"],
        ),
        (
            Trigger::OnPrReview,
            &["move_to_next", "move_to_previous", "move_to_step", "send_feedback"],
        ),
    ];

    #[test]
    fn trigger_allows_exactly_the_documented_actions() {
        assert_eq!(TABLE.len(), Trigger::ALL.len(), "every trigger is in the table");
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

    #[test]
    fn entry_causes_round_trip() {
        for c in EntryCause::ALL {
            assert_eq!(EntryCause::parse(c.as_str()), Some(c));
        }
        assert_eq!(EntryCause::parse("user"), None);
    }
}

/// Where a move action leads from `from` in `workflow`, if anywhere (a move past either end
/// of the board, or to an unknown step, leads nowhere).
pub fn move_target<'w>(
    workflow: &'w Workflow,
    from: &StepId,
    action: &Action<StepId>,
) -> Option<&'w Step> {
    let mut steps: Vec<&Step> = workflow.steps.iter().collect();
    steps.sort_by_key(|s| s.position);
    let index = steps.iter().position(|s| &s.id == from)?;
    let target = match action {
        Action::MoveToNext => steps.get(index + 1).copied(),
        Action::MoveToPrevious => index.checked_sub(1).and_then(|i| steps.get(i).copied()),
        Action::MoveToStep(id) => steps.iter().find(|s| &s.id == id).copied(),
        _ => None,
    };
    target.filter(|t| &t.id != from)
}

/// The first move a trigger yields for a step (at most one move per trigger).
pub fn first_move<'w>(workflow: &'w Workflow, step: &Step, trigger: Trigger) -> Option<&'w Step> {
    step.events
        .actions(trigger)
        .iter()
        .filter(|a| {
            matches!(a, Action::MoveToNext | Action::MoveToPrevious | Action::MoveToStep(_))
        })
        .find_map(|a| move_target(workflow, &step.id, a))
}

/// The prompt a step sends: its own with `{{task_prompt}}` filled in, or the task's.
pub fn step_prompt(step: &Step, task_prompt: &str) -> String {
    if step.prompt.trim().is_empty() {
        task_prompt.to_owned()
    } else {
        step.prompt.replace(TASK_PROMPT_PLACEHOLDER, task_prompt)
    }
}

/// What plan mode adds in front of every prompt.
pub const PLAN_MODE_INSTRUCTION: &str =
    "[plan mode] Make a plan for the request below. Do not change any files yet.";

#[cfg(test)]
mod trigger_tests {
    use super::*;
    use crate::Timestamp;

    fn step(id: &str, position: u32, events: StepEvents<StepId>) -> Step {
        Step {
            id: StepId::new(id),
            workflow_id: WorkflowId::new("w"),
            name: id.to_uppercase(),
            position,
            color: String::new(),
            prompt: String::new(),
            is_start_step: position == 0,
            allow_manual_move: true,
            agent_profile_id: None,
            cancel_triggers_turn_complete: false,
            events,
        }
    }

    fn board(steps: Vec<Step>) -> Workflow {
        Workflow {
            id: WorkflowId::new("w"),
            workspace_id: WorkspaceId::new("ws"),
            name: "b".into(),
            description: String::new(),
            template_id: None,
            steps,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        }
    }

    #[test]
    fn move_targets_follow_the_board_order() {
        let w = board(vec![
            step("a", 0, Default::default()),
            step("b", 1, Default::default()),
            step("c", 2, Default::default()),
        ]);
        let cases: &[(&str, Action<StepId>, Option<&str>)] = &[
            ("a", Action::MoveToNext, Some("b")),
            ("c", Action::MoveToNext, None),
            ("b", Action::MoveToPrevious, Some("a")),
            ("a", Action::MoveToPrevious, None),
            ("a", Action::MoveToStep(StepId::new("c")), Some("c")),
            ("a", Action::MoveToStep(StepId::new("a")), None),
            ("a", Action::MoveToStep(StepId::new("zz")), None),
            ("a", Action::AutoStartAgent, None),
        ];
        for (from, action, expected) in cases {
            let got = move_target(&w, &StepId::new(*from), action).map(|s| s.id.as_str());
            assert_eq!(got, *expected, "{from} {action:?}");
        }
    }

    #[test]
    fn a_trigger_yields_at_most_one_move() {
        let events = StepEvents {
            on_turn_complete: vec![
                Action::DisablePlanMode,
                Action::MoveToNext,
                Action::MoveToPrevious,
            ],
            ..Default::default()
        };
        let w = board(vec![
            step("a", 0, Default::default()),
            step("b", 1, events),
            step("c", 2, Default::default()),
        ]);
        let b = &w.steps[1];
        assert_eq!(first_move(&w, b, Trigger::OnTurnComplete).map(|s| s.id.as_str()), Some("c"));
        assert_eq!(first_move(&w, b, Trigger::OnTurnStart), None);
    }

    #[test]
    fn step_prompts_fill_in_the_task_prompt() {
        let mut s = step("a", 0, Default::default());
        assert_eq!(step_prompt(&s, "Fix it"), "Fix it");
        s.prompt = "Plan: {{task_prompt}}".into();
        assert_eq!(step_prompt(&s, "Fix it"), "Plan: Fix it");
    }
}
