//! The built-in workflow templates: YAML files under `templates/`, embedded in the binary and
//! read with [`crate::import`] like any user document.

use kandev_domain::workflow::WorkflowSpec;

use crate::import;

/// A built-in workflow a user can create a board from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// Stable id, stored as the workflow's `template_id`.
    pub id: &'static str,
    pub name: &'static str,
    pub description: String,
    pub spec: WorkflowSpec,
}

/// (id, name, document) of every template, in the order they are offered.
const SOURCES: [(&str, &str, &str); 5] = [
    ("kanban", "Kanban", include_str!("../templates/kanban.yaml")),
    ("plan-build", "Plan & Build", include_str!("../templates/plan-build.yaml")),
    ("feature-dev", "Feature Dev", include_str!("../templates/feature-dev.yaml")),
    ("pr-review", "PR Review", include_str!("../templates/pr-review.yaml")),
    ("ship", "Ship", include_str!("../templates/ship.yaml")),
];

/// Every built-in template: kanban, plan-build, feature-dev, pr-review, ship.
pub fn templates() -> Vec<Template> {
    SOURCES.iter().filter_map(|source| build(*source)).collect()
}

/// The built-in template with this id.
pub fn template(id: &str) -> Option<Template> {
    SOURCES.iter().find(|(source_id, _, _)| *source_id == id).and_then(|source| build(*source))
}

/// Reads one template document. The tests below prove every embedded document imports
/// cleanly, so `None` (a template left out) cannot ship unnoticed.
fn build((id, name, yaml): (&'static str, &'static str, &'static str)) -> Option<Template> {
    let mut specs = import(yaml).ok()?;
    let spec = specs.pop().filter(|_| specs.is_empty())?;
    Some(Template { id, name, description: spec.description.clone(), spec })
}

#[cfg(test)]
mod tests {
    use kandev_domain::workflow::{Action, StepSpec, Trigger};

    use super::*;
    use crate::export_specs;

    fn step<'a>(template: &'a Template, name: &str) -> &'a StepSpec {
        template.spec.steps.iter().find(|s| s.name == name).unwrap()
    }

    fn index(template: &Template, name: &str) -> usize {
        template.spec.steps.iter().position(|s| s.name == name).unwrap()
    }

    fn step_names(template: &Template) -> Vec<&str> {
        template.spec.steps.iter().map(|s| s.name.as_str()).collect()
    }

    fn start_step(template: &Template) -> &str {
        let starts: Vec<_> = template.spec.steps.iter().filter(|s| s.is_start_step).collect();
        assert_eq!(starts.len(), 1, "{} marks exactly one start step", template.id);
        &starts[0].name
    }

    #[test]
    fn every_template_document_imports_without_problems() {
        for (id, _, yaml) in SOURCES {
            let specs = import(yaml).unwrap_or_else(|problems| panic!("{id}: {problems:?}"));
            assert_eq!(specs.len(), 1, "{id} holds one workflow");
        }
    }

    #[test]
    fn templates_come_in_order_with_names_matching_their_documents() {
        let all = templates();
        let ids: Vec<_> = all.iter().map(|t| t.id).collect();
        assert_eq!(ids, ["kanban", "plan-build", "feature-dev", "pr-review", "ship"]);
        for t in &all {
            assert_eq!(t.name, t.spec.name);
            assert_eq!(t.description, t.spec.description);
            assert!(!t.description.is_empty(), "{} has a description", t.id);
            assert_eq!(template(t.id).as_ref(), Some(t));
        }
        assert_eq!(template("scrum"), None);
    }

    #[test]
    fn template_documents_are_written_in_canonical_form() {
        for (id, _, yaml) in SOURCES {
            let specs = import(yaml).unwrap();
            assert_eq!(export_specs(&specs), yaml, "{id} is not in the form export writes");
        }
    }

    #[test]
    fn step_colors_are_hex_and_distinct_within_each_template() {
        for t in templates() {
            let mut colors: Vec<&str> = t.spec.steps.iter().map(|s| s.color.as_str()).collect();
            for c in &colors {
                assert!(
                    c.len() == 7
                        && c.starts_with('#')
                        && c[1..].chars().all(|c| c.is_ascii_hexdigit()),
                    "{}: {c}",
                    t.id
                );
            }
            colors.sort();
            colors.dedup();
            assert_eq!(colors.len(), t.spec.steps.len(), "{} repeats a color", t.id);
        }
    }

    #[test]
    fn kanban_matches_the_spec_table() {
        let t = template("kanban").unwrap();
        assert_eq!(step_names(&t), ["Backlog", "In Progress", "Review", "Done"]);
        assert_eq!(start_step(&t), "In Progress");
        let in_progress = step(&t, "In Progress");
        assert_eq!(in_progress.prompt, "{{task_prompt}}");
        assert_eq!(in_progress.events.on_enter, [Action::AutoStartAgent]);
        assert_eq!(in_progress.events.on_turn_complete, [Action::MoveToStep(index(&t, "Review"))]);
        assert_eq!(step(&t, "Review").events.on_turn_start, [Action::MoveToPrevious]);
        assert!(step(&t, "Backlog").events.is_empty() && step(&t, "Done").events.is_empty());
    }

    #[test]
    fn plan_build_matches_the_spec_table() {
        let t = template("plan-build").unwrap();
        assert_eq!(step_names(&t), ["Todo", "Plan", "Build", "Review", "Done"]);
        assert_eq!(start_step(&t), "Plan");
        let plan = step(&t, "Plan");
        assert!(plan.prompt.contains("{{task_prompt}}"));
        assert_eq!(plan.events.on_enter, [Action::EnablePlanMode, Action::AutoStartAgent]);
        assert_eq!(plan.events.on_exit, [Action::DisablePlanMode]);
        let build = step(&t, "Build");
        assert!(build.prompt.contains("{{task_prompt}}"));
        assert_eq!(build.events.on_enter, [Action::ResetAgentContext, Action::AutoStartAgent]);
        assert_eq!(build.events.on_turn_complete, [Action::MoveToStep(index(&t, "Review"))]);
    }

    #[test]
    fn feature_dev_matches_the_spec_table() {
        let t = template("feature-dev").unwrap();
        assert_eq!(step_names(&t), ["Todo", "Spec", "Work", "Review", "QA", "Done"]);
        assert_eq!(start_step(&t), "Spec");
        let spec = step(&t, "Spec");
        assert_eq!(spec.events.on_enter, [Action::EnablePlanMode, Action::AutoStartAgent]);
        assert_eq!(spec.events.on_exit, [Action::DisablePlanMode]);
        assert_eq!(step(&t, "Work").events.on_enter, [Action::AutoStartAgent]);
        let review = step(&t, "Review");
        assert_eq!(review.events.on_enter, [Action::ResetAgentContext, Action::AutoStartAgent]);
        assert!(review.prompt.contains("{{task_prompt}}") && review.prompt.contains("review"));
    }

    #[test]
    fn pr_review_matches_the_spec_table() {
        let t = template("pr-review").unwrap();
        assert_eq!(step_names(&t), ["Waiting", "Review", "Done"]);
        assert_eq!(start_step(&t), "Review");
        let review = step(&t, "Review");
        assert_eq!(review.events.on_enter, [Action::AutoStartAgent]);
        assert!(review.prompt.contains("{{task_prompt}}"));
    }

    #[test]
    fn i16_s1_ship_opens_a_pull_request_and_follows_its_state() {
        let t = template("ship").unwrap();
        assert_eq!(step_names(&t), ["Todo", "Plan", "Build", "Review", "PR", "Done"]);
        assert_eq!(start_step(&t), "Plan");
        let build = step(&t, "Build");
        assert!(build.prompt.contains("{{task_prompt}}") && build.prompt.contains("Commit"));
        assert_eq!(build.events.on_turn_complete, [Action::MoveToStep(index(&t, "Review"))]);
        let pr = step(&t, "PR");
        assert_eq!(pr.events.on_enter, [Action::CreatePullRequest]);
        assert_eq!(pr.events.on_pr_merged, [Action::MoveToStep(index(&t, "Done"))]);
        assert_eq!(pr.events.on_pr_closed, [Action::MoveToStep(index(&t, "Review"))]);
    }

    #[test]
    fn templates_place_every_action_under_a_trigger_that_allows_it() {
        for t in templates() {
            for s in &t.spec.steps {
                assert!(s.events.misplaced().is_empty(), "{} / {}", t.id, s.name);
                for trigger in Trigger::ALL {
                    for a in s.events.actions(trigger) {
                        if let Action::MoveToStep(i) = a {
                            assert!(*i < t.spec.steps.len());
                        }
                    }
                }
            }
        }
    }
}
