//! Import: reads a workflow document leniently as YAML values and validates all of it, so
//! every problem is reported with its path instead of stopping at the first.

use std::collections::HashMap;

use kandev_domain::ship::MergeStrategy;
use kandev_domain::validate::{self, FieldError, MAX_STEPS};
use kandev_domain::workflow::{
    Action, Feedback, MAX_ATTEMPTS, StepEvents, StepSpec, Trigger, WorkflowSpec,
};

use crate::load::{self, Limits, Mapping, Value};
use crate::{DOCUMENT_PATH, FORMAT_KIND, FORMAT_VERSION, Problem};

/// Most problems listed; the last one then says how many more there were.
pub const MAX_PROBLEMS: usize = 100;

const DOCUMENT_FIELDS: &[&str] = &["version", "kind", "workflows"];
const WORKFLOW_FIELDS: &[&str] = &["name", "description", "steps"];
const STEP_FIELDS: &[&str] = &[
    "name",
    "color",
    "prompt",
    "is_start_step",
    "allow_manual_move",
    "cancel_triggers_turn_complete",
    "events",
];
/// Fields of the database entities that the portable format deliberately leaves out.
const NOT_PORTABLE: &[&str] = &[
    "id",
    "workspace_id",
    "workflow_id",
    "template_id",
    "position",
    "agent_profile_id",
    "created_at",
    "updated_at",
];

/// Parses and validates a workflow document within [`Limits::DEFAULT`]: every workflow, or
/// every problem found (at most [`MAX_PROBLEMS`] are listed).
pub fn import(yaml: &str) -> Result<Vec<WorkflowSpec>, Vec<Problem>> {
    import_with(yaml, &Limits::DEFAULT)
}

/// [`import`] within other limits. A document over a limit gets one problem at
/// [`DOCUMENT_PATH`] whose message names the limit; nothing of it is validated further.
pub fn import_with(yaml: &str, limits: &Limits) -> Result<Vec<WorkflowSpec>, Vec<Problem>> {
    let mut checker = Checker::default();
    let specs = match load::load(yaml, limits) {
        Ok(document) => checker.document(&document),
        Err(err) => {
            checker.problem(DOCUMENT_PATH, err.message);
            Vec::new()
        }
    };
    checker.finish(specs)
}

/// All action type names, in the order of docs/workflows.md.
fn every_action() -> [Action<()>; 17] {
    [
        Action::ResetAgentContext,
        Action::EnablePlanMode,
        Action::SetSessionMode { mode_id: String::new() },
        Action::AutoStartAgent,
        Action::MoveToNext,
        Action::MoveToPrevious,
        Action::MoveToStep(()),
        Action::DisablePlanMode,
        Action::Push,
        Action::CreatePullRequest,
        Action::Merge { strategy: MergeStrategy::Merge },
        Action::Rebase,
        Action::SendFeedback(Feedback::default()),
        Action::AutoMerge { strategy: MergeStrategy::Merge },
        Action::CommentIssue,
        Action::CloseIssue,
        Action::StartAttempts { count: 2 },
    ]
}

fn action_names(filter: impl Fn(&Action<()>) -> bool) -> String {
    every_action()
        .iter()
        .filter(|a| filter(a))
        .map(|a| a.type_name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The path of field `key` of the value at `path`; top-level fields are bare (`version`).
fn child(path: &str, key: &str) -> String {
    if path == DOCUMENT_PATH { key.to_owned() } else { format!("{path}.{key}") }
}

fn item(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

/// The fields of one mapping, after unknown fields were reported. `null` counts as absent.
struct Fields<'a> {
    map: &'a Mapping,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }
}

/// Collects problems while walking the document.
#[derive(Default)]
struct Checker {
    problems: Vec<Problem>,
    /// Problems found past [`MAX_PROBLEMS`], counted only.
    unlisted: usize,
}

impl Checker {
    fn problem(&mut self, path: impl Into<String>, message: impl Into<String>) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(Problem::new(path, message));
        } else {
            self.unlisted += 1;
        }
    }

    fn finish(mut self, specs: Vec<WorkflowSpec>) -> Result<Vec<WorkflowSpec>, Vec<Problem>> {
        if self.unlisted > 0 {
            let message = format!("{} more problems not listed; fix these first", self.unlisted);
            self.problems.push(Problem::new(DOCUMENT_PATH, message));
        }
        if self.problems.is_empty() { Ok(specs) } else { Err(self.problems) }
    }

    fn field_error(&mut self, path: &str, err: FieldError) {
        self.problem(path, err.problem);
    }

    /// `value` as a mapping whose keys are all among `known`; reports everything else.
    fn mapping<'a>(
        &mut self,
        path: &str,
        value: &'a Value,
        known: &[&str],
        shape: &str,
    ) -> Option<Fields<'a>> {
        let Some(map) = value.as_mapping() else {
            self.problem(path, format!("must be a mapping {shape}"));
            return None;
        };
        for key in map.keys() {
            match key.as_str() {
                None => self.problem(path, "field names must be strings"),
                Some(k) if known.contains(&k) => {}
                Some(k) if NOT_PORTABLE.contains(&k) => self.problem(
                    child(path, k),
                    "ids and positions are not part of the portable format; remove this field",
                ),
                Some(k) => self.problem(
                    child(path, k),
                    format!("unknown field `{k}`; expected one of {}", known.join(", ")),
                ),
            }
        }
        Some(Fields { map })
    }

    fn string<'a>(&mut self, path: &str, value: &'a Value) -> Option<&'a str> {
        let s = value.as_str();
        if s.is_none() {
            self.problem(path, "must be a string; quote it if it looks like a number or boolean");
        }
        s
    }

    /// A required name: present, a string, and valid by [`validate::name`]. Trimmed.
    fn name(&mut self, path: &str, value: Option<&Value>) -> Option<String> {
        let Some(value) = value else {
            self.problem(path, "is required");
            return None;
        };
        let raw = self.string(path, value)?;
        validate::name(path, raw).map_err(|err| self.field_error(path, err)).ok()
    }

    /// An optional text checked by `check` (one of [`validate`]'s); empty when absent.
    fn text(
        &mut self,
        path: &str,
        value: Option<&Value>,
        check: fn(&str, &str) -> Result<String, FieldError>,
    ) -> String {
        let Some(raw) = value.and_then(|v| self.string(path, v)) else { return String::new() };
        check(path, raw).unwrap_or_else(|err| {
            self.field_error(path, err);
            String::new()
        })
    }

    fn flag(&mut self, path: &str, value: Option<&Value>, default: bool) -> bool {
        match value {
            None => default,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.problem(path, "must be true or false");
                default
            }
        }
    }

    fn list<'a>(&mut self, path: &str, value: &'a Value, what: &str) -> Option<&'a [Value]> {
        let list = value.as_sequence();
        if list.is_none() {
            self.problem(path, format!("must be a list of {what}"));
        }
        list
    }

    fn document(&mut self, document: &Value) -> Vec<WorkflowSpec> {
        let shape = "with version, kind and workflows";
        let Some(fields) = self.mapping(DOCUMENT_PATH, document, DOCUMENT_FIELDS, shape) else {
            return Vec::new();
        };
        match fields.get("version") {
            None => {
                self.problem("version", format!("is required; write `version: {FORMAT_VERSION}`"))
            }
            Some(v) if v.as_u64() == Some(FORMAT_VERSION) => {}
            Some(v) => match v.number() {
                Some(n) => self.problem(
                    "version",
                    format!("unsupported version {n}; this kandev reads version {FORMAT_VERSION}"),
                ),
                None => self.problem("version", format!("must be the number {FORMAT_VERSION}")),
            },
        }
        match fields.get("kind") {
            None => self.problem("kind", format!("is required; write `kind: {FORMAT_KIND}`")),
            Some(v) if v.as_str() == Some(FORMAT_KIND) => {}
            Some(_) => self.problem("kind", format!("must be {FORMAT_KIND}")),
        }
        let Some(workflows) = fields.get("workflows") else {
            self.problem("workflows", "is required; list the workflows to import");
            return Vec::new();
        };
        let Some(workflows) = self.list("workflows", workflows, "workflows") else {
            return Vec::new();
        };
        workflows
            .iter()
            .enumerate()
            .filter_map(|(i, w)| self.workflow(&item("workflows", i), w))
            .collect()
    }

    fn workflow(&mut self, path: &str, value: &Value) -> Option<WorkflowSpec> {
        let fields = self.mapping(path, value, WORKFLOW_FIELDS, "with name and steps")?;
        let name = self.name(&child(path, "name"), fields.get("name"));
        let description = self.text(
            &child(path, "description"),
            fields.get("description"),
            validate::description,
        );
        let steps_path = child(path, "steps");
        let steps = match fields.get("steps") {
            None => {
                self.problem(&steps_path, "is required; list at least one step");
                Vec::new()
            }
            Some(steps) => self.steps(&steps_path, steps),
        };
        Some(WorkflowSpec { name: name.unwrap_or_default(), description, steps })
    }

    fn steps(&mut self, path: &str, value: &Value) -> Vec<StepSpec> {
        let Some(values) = self.list(path, value, "steps") else { return Vec::new() };
        if values.is_empty() {
            self.problem(path, "must list at least one step");
        }
        if values.len() > MAX_STEPS {
            self.problem(
                path,
                format!(
                    "has {} steps, over the limit of {MAX_STEPS} steps per workflow",
                    values.len()
                ),
            );
            return Vec::new();
        }
        // Names first, so `move_to_step` can name a step written further down.
        let names: Vec<Option<String>> = values.iter().map(step_name).collect();
        let mut first_named: HashMap<&str, usize> = HashMap::new();
        let mut start: Option<usize> = None;
        let mut steps = Vec::with_capacity(values.len());
        for (index, value) in values.iter().enumerate() {
            let step_path = item(path, index);
            let Some(fields) = self.mapping(&step_path, value, STEP_FIELDS, "with at least a name")
            else {
                continue;
            };
            let name_path = child(&step_path, "name");
            let name = self.name(&name_path, fields.get("name"));
            if let Some(name) = &name
                && let Some(Some(own)) = names.get(index)
            {
                let first = *first_named.entry(own.as_str()).or_insert(index);
                if first != index {
                    self.problem(
                        &name_path,
                        format!("duplicate step name `{name}` (also {path}[{first}]); rename one"),
                    );
                }
            }
            let color =
                self.text(&child(&step_path, "color"), fields.get("color"), validate::color);
            let prompt =
                self.text(&child(&step_path, "prompt"), fields.get("prompt"), validate::prompt);
            let start_path = child(&step_path, "is_start_step");
            let is_start_step = self.flag(&start_path, fields.get("is_start_step"), false);
            if is_start_step {
                match start {
                    Some(first) => self.problem(
                        &start_path,
                        format!("{path}[{first}] is already the start step; mark only one"),
                    ),
                    None => start = Some(index),
                }
            }
            let allow_manual_move = self.flag(
                &child(&step_path, "allow_manual_move"),
                fields.get("allow_manual_move"),
                true,
            );
            let cancel_triggers_turn_complete = self.flag(
                &child(&step_path, "cancel_triggers_turn_complete"),
                fields.get("cancel_triggers_turn_complete"),
                false,
            );
            let events = self.events(&child(&step_path, "events"), fields.get("events"), &names);
            steps.push(StepSpec {
                name: name.unwrap_or_default(),
                color,
                prompt,
                is_start_step,
                allow_manual_move,
                cancel_triggers_turn_complete,
                events,
            });
        }
        steps
    }

    fn events(
        &mut self,
        path: &str,
        value: Option<&Value>,
        names: &[Option<String>],
    ) -> StepEvents<usize> {
        let mut events = StepEvents::default();
        let Some(value) = value else { return events };
        let triggers: Vec<&str> = Trigger::ALL.iter().map(|t| t.as_str()).collect();
        let shape = "of triggers to actions, like `on_enter: [{type: auto_start_agent}]`";
        let Some(fields) = self.mapping(path, value, &triggers, shape) else { return events };
        for trigger in Trigger::ALL {
            let Some(list) = fields.get(trigger.as_str()) else { continue };
            let list_path = child(path, trigger.as_str());
            let Some(list) = self.list(&list_path, list, "actions") else { continue };
            *events.actions_mut(trigger) = list
                .iter()
                .enumerate()
                .filter_map(|(i, a)| self.action(&item(&list_path, i), trigger, a, names))
                .collect();
        }
        events
    }

    fn action(
        &mut self,
        path: &str,
        trigger: Trigger,
        value: &Value,
        names: &[Option<String>],
    ) -> Option<Action<usize>> {
        let type_path = child(path, "type");
        let type_name = value.get("type").and_then(Value::as_str);
        let template =
            type_name.and_then(|t| every_action().into_iter().find(|a| a.type_name() == t));
        let known: &[&str] = match &template {
            Some(Action::SetSessionMode { .. }) => &["type", "mode_id"],
            Some(Action::MoveToStep(())) => &["type", "step"],
            Some(Action::Merge { .. } | Action::AutoMerge { .. }) => &["type", "strategy"],
            Some(Action::SendFeedback(_)) => &["type", "max_rounds", "include_bots"],
            Some(Action::StartAttempts { .. }) => &["type", "count"],
            Some(_) => &["type"],
            // Without a known type, do not also complain about its other fields.
            None => &["type", "mode_id", "step", "strategy", "max_rounds", "include_bots", "count"],
        };
        let fields = self.mapping(path, value, known, "like `{type: auto_start_agent}`")?;
        let Some(template) = template else {
            match fields.get("type") {
                None => self.problem(type_path, "is required, like `{type: auto_start_agent}`"),
                Some(Value::String(t)) => self.problem(
                    type_path,
                    format!(
                        "unknown action type `{t}`; expected one of {}",
                        action_names(|_| true)
                    ),
                ),
                Some(_) => self.problem(type_path, "must be an action type name"),
            }
            return None;
        };
        let action = match template {
            Action::SetSessionMode { .. } => {
                let mode_id = self.name(&child(path, "mode_id"), fields.get("mode_id"));
                Action::SetSessionMode { mode_id: mode_id.unwrap_or_default() }
            }
            Action::MoveToStep(()) => {
                let target = self.target(&child(path, "step"), fields.get("step"), names);
                Action::MoveToStep(target.unwrap_or_default())
            }
            Action::Merge { .. } => {
                let strategy = self.strategy(&child(path, "strategy"), fields.get("strategy"));
                Action::Merge { strategy }
            }
            Action::AutoMerge { .. } => {
                let strategy = self.strategy(&child(path, "strategy"), fields.get("strategy"));
                Action::AutoMerge { strategy }
            }
            Action::SendFeedback(_) => {
                let rounds = self.rounds(&child(path, "max_rounds"), fields.get("max_rounds"));
                let bots =
                    self.flag(&child(path, "include_bots"), fields.get("include_bots"), false);
                Action::SendFeedback(Feedback { max_rounds: rounds, include_bots: bots })
            }
            Action::StartAttempts { .. } => {
                let count = self.attempts(&child(path, "count"), fields.get("count"));
                Action::StartAttempts { count }
            }
            other => other.map_target(|()| Ok::<usize, ()>(0)).ok()?,
        };
        if !trigger.allows(&action) {
            let t = trigger.as_str();
            self.problem(
                path,
                format!(
                    "{} is not allowed in {t}; {t} allows {}",
                    action.type_name(),
                    action_names(|a| trigger.allows(a))
                ),
            );
        }
        Some(action)
    }

    /// A `send_feedback` action's rounds: 1 to [`Feedback::MAX_ROUNDS`], 3 when absent.
    fn rounds(&mut self, path: &str, value: Option<&Value>) -> u32 {
        let Some(value) = value else { return Feedback::DEFAULT_ROUNDS };
        match value.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) if (1..=Feedback::MAX_ROUNDS).contains(&n) => n,
            _ => {
                let most = Feedback::MAX_ROUNDS;
                self.problem(path, format!("must be a whole number from 1 to {most}"));
                Feedback::DEFAULT_ROUNDS
            }
        }
    }

    /// A `start_attempts` action's count: 1 to `MAX_ATTEMPTS`, required.
    fn attempts(&mut self, path: &str, value: Option<&Value>) -> u32 {
        match value.and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok()) {
            Some(n) if (1..=MAX_ATTEMPTS).contains(&n) => n,
            _ => {
                self.problem(path, format!("must be a whole number from 1 to {MAX_ATTEMPTS}"));
                2
            }
        }
    }

    /// A `merge` action's strategy: `merge` (the default), `squash` or `fast_forward`.
    fn strategy(&mut self, path: &str, value: Option<&Value>) -> MergeStrategy {
        let Some(value) = value else { return MergeStrategy::Merge };
        let names = MergeStrategy::ALL.map(MergeStrategy::as_str).join(", ");
        match value.as_str().and_then(MergeStrategy::parse) {
            Some(strategy) => strategy,
            None => {
                self.problem(path, format!("must be one of {names}"));
                MergeStrategy::Merge
            }
        }
    }

    /// A `move_to_step` target: a step name of the same workflow or a 0-based position.
    fn target(
        &mut self,
        path: &str,
        value: Option<&Value>,
        names: &[Option<String>],
    ) -> Option<usize> {
        let range = match names.len() {
            0 => "a step name".to_owned(),
            n => format!("a step name or a position from 0 to {}", n - 1),
        };
        let Some(value) = value else {
            self.problem(path, format!("is required for move_to_step; write {range}"));
            return None;
        };
        match value {
            Value::String(name) => {
                let name = name.trim();
                let index = names.iter().position(|n| n.as_deref() == Some(name));
                if index.is_none() {
                    self.problem(
                        path,
                        format!("no step named `{name}` in this workflow; write {range}"),
                    );
                }
                index
            }
            Value::Int(_) | Value::Float(_) => {
                let index = value.as_u64().and_then(|i| usize::try_from(i).ok());
                let index = index.filter(|i| *i < names.len());
                if index.is_none() {
                    let n = value.number().unwrap_or_default();
                    self.problem(path, format!("position {n} is out of range; write {range}"));
                }
                index
            }
            _ => {
                self.problem(path, format!("must be {range}"));
                None
            }
        }
    }
}

/// The valid name of a step value, if it has one; problems are reported in the main pass.
fn step_name(value: &Value) -> Option<String> {
    let raw = value.get("name")?.as_str()?;
    validate::name("name", raw).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_names_follow_the_trigger_table() {
        assert_eq!(action_names(|a| Trigger::OnExit.allows(a)), "disable_plan_mode");
        assert_eq!(
            action_names(|a| Trigger::OnTurnStart.allows(a)),
            "move_to_next, move_to_previous, move_to_step"
        );
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let problems = import("version: 1\nworkflows: [a,\n").unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].path, DOCUMENT_PATH);
        assert!(problems[0].message.contains("line 3 column 1"), "{}", problems[0].message);
    }

    #[test]
    fn duplicate_keys_are_syntax_problems_with_a_location() {
        let problems = import("version: 1\nversion: 1\n").unwrap_err();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.starts_with("invalid yaml: duplicate key"));
        assert!(problems[0].message.contains(" at line "), "{}", problems[0].message);
    }
}
