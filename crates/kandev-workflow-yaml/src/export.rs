//! Export: writes workflows in the one canonical form of the portable format (fixed field
//! order, defaults left out, `move_to_step` targets by step name).

use kandev_domain::StepId;
use kandev_domain::ship::MergeStrategy;
use kandev_domain::workflow::{Action, Feedback, StepEvents, Trigger, Workflow, WorkflowSpec};

use crate::scalar::{block_entry, inline};
use crate::{FORMAT_KIND, FORMAT_VERSION};

/// Writes stored workflows as a document. Steps are written in `position` order, and
/// `move_to_step` targets by the name of the step they point to.
///
/// Ids, timestamps, the template id and per-step agent profiles are not part of the portable
/// format and are left out. A target id that is not a step of the same workflow (a broken
/// reference) is written as the id itself, so importing the document reports it rather than
/// the export silently dropping the action.
pub fn export(workflows: &[Workflow]) -> String {
    let mut out = Writer::document(workflows.is_empty());
    for workflow in workflows {
        let mut steps: Vec<_> = workflow.steps.iter().collect();
        steps.sort_by_key(|s| s.position);
        let target = |id: &StepId| match steps.iter().find(|s| &s.id == id) {
            Some(step) => inline(&step.name),
            None => inline(id.as_str()),
        };
        out.workflow(&workflow.name, &workflow.description, steps.is_empty());
        for step in &steps {
            out.step(StepView {
                name: &step.name,
                color: &step.color,
                prompt: &step.prompt,
                is_start_step: step.is_start_step,
                allow_manual_move: step.allow_manual_move,
                cancel_triggers_turn_complete: step.cancel_triggers_turn_complete,
            });
            out.events(&step.events, &target);
        }
    }
    out.finish()
}

/// Writes workflow specs as a document; the inverse of [`crate::import`] for valid specs.
///
/// A target index outside the workflow's steps (only possible in a spec that would not pass
/// import) is written as that position, which import then reports as out of range.
pub fn export_specs(specs: &[WorkflowSpec]) -> String {
    let mut out = Writer::document(specs.is_empty());
    for spec in specs {
        let target = |index: &usize| match spec.steps.get(*index) {
            Some(step) => inline(&step.name),
            None => index.to_string(),
        };
        out.workflow(&spec.name, &spec.description, spec.steps.is_empty());
        for step in &spec.steps {
            out.step(StepView {
                name: &step.name,
                color: &step.color,
                prompt: &step.prompt,
                is_start_step: step.is_start_step,
                allow_manual_move: step.allow_manual_move,
                cancel_triggers_turn_complete: step.cancel_triggers_turn_complete,
            });
            out.events(&step.events, &target);
        }
    }
    out.finish()
}

/// The scalar fields of a step, whichever type it came from.
struct StepView<'a> {
    name: &'a str,
    color: &'a str,
    prompt: &'a str,
    is_start_step: bool,
    allow_manual_move: bool,
    cancel_triggers_turn_complete: bool,
}

/// Indentation of workflow fields (`  - name:` puts them at 4), step fields, and triggers.
const WORKFLOW_INDENT: usize = 4;
const STEP_INDENT: usize = 8;
const TRIGGER_INDENT: usize = 10;

struct Writer {
    out: String,
}

impl Writer {
    fn document(empty: bool) -> Self {
        let workflows = if empty { "workflows: []" } else { "workflows:" };
        Self { out: format!("version: {FORMAT_VERSION}\nkind: {FORMAT_KIND}\n{workflows}\n") }
    }

    fn workflow(&mut self, name: &str, description: &str, no_steps: bool) {
        self.out.push_str(&format!("  - name: {}\n", inline(name)));
        if !description.is_empty() {
            self.out.push_str(&block_entry(WORKFLOW_INDENT, "description", description));
        }
        let steps = if no_steps { "steps: []" } else { "steps:" };
        self.out.push_str(&format!("    {steps}\n"));
    }

    fn step(&mut self, step: StepView<'_>) {
        self.out.push_str(&format!("      - name: {}\n", inline(step.name)));
        if !step.color.is_empty() {
            self.out.push_str(&block_entry(STEP_INDENT, "color", step.color));
        }
        if !step.prompt.is_empty() {
            self.out.push_str(&block_entry(STEP_INDENT, "prompt", step.prompt));
        }
        // Each flag is written only when it differs from its default.
        let flags = [
            ("is_start_step", step.is_start_step, false),
            ("allow_manual_move", step.allow_manual_move, true),
            ("cancel_triggers_turn_complete", step.cancel_triggers_turn_complete, false),
        ];
        for (key, value, default) in flags {
            if value != default {
                self.out.push_str(&format!("{:STEP_INDENT$}{key}: {value}\n", ""));
            }
        }
    }

    fn events<S>(&mut self, events: &StepEvents<S>, target: &impl Fn(&S) -> String) {
        if events.is_empty() {
            return;
        }
        self.out.push_str(&format!("{:STEP_INDENT$}events:\n", ""));
        for trigger in Trigger::ALL {
            let actions = events.actions(trigger);
            if actions.is_empty() {
                continue;
            }
            let list: Vec<String> = actions.iter().map(|a| action(a, target)).collect();
            let key = trigger.as_str();
            self.out.push_str(&format!("{:TRIGGER_INDENT$}{key}: [{}]\n", "", list.join(", ")));
        }
    }

    fn finish(self) -> String {
        self.out
    }
}

/// One action as a flow mapping, like `{type: move_to_step, step: Review}`.
fn action<S>(action: &Action<S>, target: &impl Fn(&S) -> String) -> String {
    let type_name = action.type_name();
    match action {
        Action::SetSessionMode { mode_id } => {
            format!("{{type: {type_name}, mode_id: {}}}", inline(mode_id))
        }
        Action::MoveToStep(s) => format!("{{type: {type_name}, step: {}}}", target(s)),
        Action::StartAttempts { count } => format!("{{type: {type_name}, count: {count}}}"),
        // The default strategy is left out, like every other default.
        Action::Merge { strategy } | Action::AutoMerge { strategy }
            if *strategy != MergeStrategy::Merge =>
        {
            format!("{{type: {type_name}, strategy: {}}}", strategy.as_str())
        }
        Action::SendFeedback(f) if *f != Feedback::default() => format!(
            "{{type: {type_name}, max_rounds: {}, include_bots: {}}}",
            f.max_rounds, f.include_bots
        ),
        _ => format!("{{type: {type_name}}}"),
    }
}
