//! Import validation: one case per rule, each checking the exact paths reported, and a
//! document with many problems that reports all of them and imports nothing.

use kandev_domain::ship::MergeStrategy;
use kandev_domain::workflow::{Action, Feedback};
use kandev_workflow_yaml::{DOCUMENT_PATH, Problem, export_specs, import};

const HEADER: &str = "version: 1\nkind: kandev-workflow\n";

/// A document with the standard header and one workflow whose steps are `steps`.
fn with_steps(steps: &str) -> String {
    format!("{HEADER}workflows:\n  - name: Board\n    steps:\n{steps}")
}

struct Case {
    rule: &'static str,
    yaml: String,
    /// Every expected problem: (path, a fragment of its message), in order.
    expected: &'static [(&'static str, &'static str)],
}

fn case(
    rule: &'static str,
    yaml: impl Into<String>,
    expected: &'static [(&'static str, &'static str)],
) -> Case {
    Case { rule, yaml: yaml.into(), expected }
}

fn cases() -> Vec<Case> {
    vec![
        case(
            "yaml syntax error",
            "version: 1\nworkflows: [\n  - name: x\n",
            &[(DOCUMENT_PATH, "line 3 column")],
        ),
        case("document is not a mapping", "- 1\n", &[(DOCUMENT_PATH, "must be a mapping")]),
        case("empty document", "", &[(DOCUMENT_PATH, "must be a mapping")]),
        case(
            "wrong version",
            "version: 2\nkind: kandev-workflow\nworkflows: []\n",
            &[("version", "unsupported version 2")],
        ),
        case(
            "version is a string",
            "version: \"1\"\nkind: kandev-workflow\nworkflows: []\n",
            &[("version", "must be the number 1")],
        ),
        case(
            "missing version and kind",
            "workflows: []\n",
            &[("version", "is required"), ("kind", "is required")],
        ),
        case(
            "wrong kind",
            "version: 1\nkind: board\nworkflows: []\n",
            &[("kind", "must be kandev-workflow")],
        ),
        case("missing workflows", HEADER, &[("workflows", "is required")]),
        case(
            "workflows is not a list",
            format!("{HEADER}workflows: {{name: x}}\n"),
            &[("workflows", "must be a list of workflows")],
        ),
        case(
            "workflow is not a mapping",
            format!("{HEADER}workflows: [Board]\n"),
            &[("workflows[0]", "must be a mapping")],
        ),
        case(
            "missing workflow name",
            format!("{HEADER}workflows:\n  - steps: [{{name: A}}]\n"),
            &[("workflows[0].name", "is required")],
        ),
        case(
            "empty workflow name",
            format!("{HEADER}workflows:\n  - name: \"  \"\n    steps: [{{name: A}}]\n"),
            &[("workflows[0].name", "is required")],
        ),
        case(
            "workflow name is not a string",
            format!("{HEADER}workflows:\n  - name: 2024\n    steps: [{{name: A}}]\n"),
            &[("workflows[0].name", "must be a string")],
        ),
        case(
            "missing steps",
            format!("{HEADER}workflows:\n  - name: Board\n"),
            &[("workflows[0].steps", "is required")],
        ),
        case(
            "no steps",
            format!("{HEADER}workflows:\n  - name: Board\n    steps: []\n"),
            &[("workflows[0].steps", "at least one step")],
        ),
        case(
            "missing step name",
            with_steps("      - name: A\n      - color: \"#fff\"\n"),
            &[("workflows[0].steps[1].name", "is required")],
        ),
        case(
            "empty step name",
            with_steps("      - name: A\n      - name: \"\"\n"),
            &[("workflows[0].steps[1].name", "is required")],
        ),
        case(
            "step name too long",
            with_steps(&format!("      - name: {}\n", "x".repeat(201))),
            &[("workflows[0].steps[0].name", "longer than 200")],
        ),
        case(
            "duplicate step names",
            with_steps("      - name: A\n      - name: B\n      - name: \" A\"\n"),
            &[(
                "workflows[0].steps[2].name",
                "duplicate step name `A` (also workflows[0].steps[0])",
            )],
        ),
        case(
            "two start steps",
            with_steps(
                "      - name: A\n        is_start_step: true\n      - name: B\n        is_start_step: true\n",
            ),
            &[(
                "workflows[0].steps[1].is_start_step",
                "workflows[0].steps[0] is already the start step",
            )],
        ),
        case(
            "flag is not a boolean",
            with_steps("      - name: A\n        allow_manual_move: \"no\"\n"),
            &[("workflows[0].steps[0].allow_manual_move", "must be true or false")],
        ),
        case(
            "unknown action type",
            with_steps(
                "      - name: A\n        events:\n          on_enter: [{type: launch_rocket}]\n",
            ),
            &[(
                "workflows[0].steps[0].events.on_enter[0].type",
                "unknown action type `launch_rocket`",
            )],
        ),
        case(
            "missing action type",
            with_steps("      - name: A\n        events:\n          on_enter: [{mode_id: plan}]\n"),
            &[("workflows[0].steps[0].events.on_enter[0].type", "is required")],
        ),
        case(
            "action is not a mapping",
            with_steps(
                "      - name: A\n        events:\n          on_enter: [auto_start_agent]\n",
            ),
            &[(
                "workflows[0].steps[0].events.on_enter[0]",
                "must be a mapping like `{type: auto_start_agent}`",
            )],
        ),
        case(
            "action under a trigger that does not allow it",
            with_steps(
                "      - name: A\n        events:\n          on_exit: [{type: disable_plan_mode}, {type: auto_start_agent}]\n",
            ),
            &[(
                "workflows[0].steps[0].events.on_exit[1]",
                "auto_start_agent is not allowed in on_exit; on_exit allows disable_plan_mode",
            )],
        ),
        case(
            "move on enter is not allowed",
            with_steps(
                "      - name: A\n        events:\n          on_enter: [{type: move_to_step, step: A}]\n",
            ),
            &[(
                "workflows[0].steps[0].events.on_enter[0]",
                "move_to_step is not allowed in on_enter",
            )],
        ),
        case(
            "move_to_step to an unknown step",
            with_steps(
                "      - name: A\n        events:\n          on_turn_complete: [{type: move_to_step, step: Reveiw}]\n      - name: Review\n",
            ),
            &[(
                "workflows[0].steps[0].events.on_turn_complete[0].step",
                "no step named `Reveiw` in this workflow; write a step name or a position from 0 to 1",
            )],
        ),
        case(
            "move_to_step to an out-of-range position",
            with_steps(
                "      - name: A\n        events:\n          on_turn_start: [{type: move_to_step, step: 2}]\n      - name: B\n",
            ),
            &[("workflows[0].steps[0].events.on_turn_start[0].step", "position 2 is out of range")],
        ),
        case(
            "move_to_step to a negative position",
            with_steps(
                "      - name: A\n        events:\n          on_turn_start: [{type: move_to_step, step: -1}]\n",
            ),
            &[(
                "workflows[0].steps[0].events.on_turn_start[0].step",
                "position -1 is out of range",
            )],
        ),
        case(
            "move_to_step without a step",
            with_steps(
                "      - name: A\n        events:\n          on_turn_start: [{type: move_to_step}]\n",
            ),
            &[(
                "workflows[0].steps[0].events.on_turn_start[0].step",
                "is required for move_to_step",
            )],
        ),
        case(
            "set_session_mode without a mode_id",
            with_steps(
                "      - name: A\n        events:\n          on_enter: [{type: set_session_mode}]\n",
            ),
            &[("workflows[0].steps[0].events.on_enter[0].mode_id", "is required")],
        ),
        case(
            "set_session_mode with an empty mode_id",
            with_steps(
                "      - name: A\n        events:\n          on_enter: [{type: set_session_mode, mode_id: \"\"}]\n",
            ),
            &[("workflows[0].steps[0].events.on_enter[0].mode_id", "is required")],
        ),
        case(
            "unknown top-level field",
            format!("{HEADER}workflows: []\nauthor: me\n"),
            &[("author", "unknown field `author`; expected one of version, kind, workflows")],
        ),
        case(
            "unknown workflow field",
            format!(
                "{HEADER}workflows:\n  - name: Board\n    colour: red\n    steps: [{{name: A}}]\n"
            ),
            &[("workflows[0].colour", "unknown field `colour`")],
        ),
        case(
            "unknown step field",
            with_steps("      - name: A\n        colour: red\n"),
            &[(
                "workflows[0].steps[0].colour",
                "unknown field `colour`; expected one of name, color,",
            )],
        ),
        case(
            "database fields are not portable",
            with_steps("      - name: A\n        id: step-1\n        position: 0\n"),
            &[
                ("workflows[0].steps[0].id", "not part of the portable format"),
                ("workflows[0].steps[0].position", "not part of the portable format"),
            ],
        ),
        case(
            "unknown trigger",
            with_steps(
                "      - name: A\n        events:\n          on_lunch: [{type: auto_start_agent}]\n",
            ),
            &[(
                "workflows[0].steps[0].events.on_lunch",
                "unknown field `on_lunch`; expected one of on_enter,",
            )],
        ),
        case(
            "unknown action field",
            with_steps(
                "      - name: A\n        events:\n          on_enter: [{type: auto_start_agent, step: A}]\n",
            ),
            &[(
                "workflows[0].steps[0].events.on_enter[0].step",
                "unknown field `step`; expected one of type",
            )],
        ),
        case(
            "trigger is not a list",
            with_steps(
                "      - name: A\n        events:\n          on_enter: {type: auto_start_agent}\n",
            ),
            &[("workflows[0].steps[0].events.on_enter", "must be a list of actions")],
        ),
    ]
}

fn paths_and_messages(problems: &[Problem]) -> Vec<(&str, &str)> {
    problems.iter().map(|p| (p.path.as_str(), p.message.as_str())).collect()
}

#[test]
fn each_rule_reports_exactly_its_problems() {
    for case in cases() {
        let problems = match import(&case.yaml) {
            Ok(specs) => panic!("{}: imported {specs:?}", case.rule),
            Err(problems) => problems,
        };
        let got = paths_and_messages(&problems);
        assert_eq!(got.len(), case.expected.len(), "{}: {got:#?}", case.rule);
        for ((path, message), (want_path, fragment)) in got.iter().zip(case.expected) {
            assert_eq!(path, want_path, "{}: {got:#?}", case.rule);
            assert!(message.contains(fragment), "{}: {message:?} lacks {fragment:?}", case.rule);
        }
    }
}

#[test]
fn messages_are_lowercase_without_trailing_period() {
    for case in cases() {
        for problem in import(&case.yaml).unwrap_err() {
            let first = problem.message.chars().next().unwrap();
            assert!(!first.is_uppercase(), "{}: {problem}", case.rule);
            assert!(!problem.message.ends_with('.'), "{}: {problem}", case.rule);
        }
    }
}

const MANY_PROBLEMS: &str = r#"version: 1
kind: kandev-workflow
workflows:
  - name: Good
    steps:
      - name: Only
  - name: ""
    steps:
      - name: Plan
        is_start_step: true
        events:
          on_enter: [{type: enable_plan_mode}, {type: auto_start}]
          on_exit: [{type: auto_start_agent}]
      - name: Build
        is_start_step: true
        events:
          on_turn_complete: [{type: move_to_step, step: Review}]
      - name: Plan
        events:
          on_enter: [{type: set_session_mode}]
  - name: Empty
    steps: []
"#;

#[test]
fn a_document_with_many_problems_reports_all_of_them_and_imports_nothing() {
    let problems = import(MANY_PROBLEMS).unwrap_err();
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "workflows[1].name",
            "workflows[1].steps[0].events.on_enter[1].type",
            "workflows[1].steps[0].events.on_exit[0]",
            "workflows[1].steps[1].is_start_step",
            "workflows[1].steps[1].events.on_turn_complete[0].step",
            "workflows[1].steps[2].name",
            "workflows[1].steps[2].events.on_enter[0].mode_id",
            "workflows[2].steps",
        ],
        "{problems:#?}"
    );
    assert_eq!(
        problems[1].to_string(),
        "workflows[1].steps[0].events.on_enter[1].type: unknown action type `auto_start`; \
         expected one of reset_agent_context, enable_plan_mode, set_session_mode, \
         auto_start_agent, move_to_next, move_to_previous, move_to_step, disable_plan_mode, \
         push, create_pull_request, merge, rebase, send_feedback, auto_merge, comment_issue, close_issue, start_attempts"
    );
}

#[test]
fn a_workflow_without_a_marked_start_step_is_valid() {
    let specs = import(&with_steps("      - name: A\n      - name: B\n")).unwrap();
    assert!(specs[0].steps.iter().all(|s| !s.is_start_step));
}

#[test]
fn move_to_step_may_name_a_later_step_or_a_position() {
    let yaml = with_steps(
        "      - name: A\n        events:\n          on_turn_complete: [{type: move_to_step, step: C}]\n          on_turn_start: [{type: move_to_step, step: 1}]\n      - name: B\n      - name: C\n",
    );
    let specs = import(&yaml).unwrap();
    assert_eq!(specs[0].steps[0].events.on_turn_complete, [Action::MoveToStep(2)]);
    assert_eq!(specs[0].steps[0].events.on_turn_start, [Action::MoveToStep(1)]);
}

#[test]
fn null_optional_fields_count_as_absent() {
    let yaml = with_steps(
        "      - name: A\n        color:\n        prompt: ~\n        events:\n          on_enter:\n",
    );
    let specs = import(&yaml).unwrap();
    let step = &specs[0].steps[0];
    assert!(step.color.is_empty() && step.prompt.is_empty() && step.events.is_empty());
    assert!(step.allow_manual_move);
}

#[test]
fn i16_s2_ship_actions_import_with_their_strategy_and_only_where_allowed() {
    let yaml = with_steps(
        "      - name: A\n        events:\n          on_enter: [{type: rebase}, {type: push}]\n          on_turn_complete: [{type: merge, strategy: squash}, {type: create_pull_request}]\n          on_pr_merged: [{type: move_to_next}]\n      - name: B\n",
    );
    let specs = import(&yaml).unwrap();
    let events = &specs[0].steps[0].events;
    assert_eq!(events.on_enter, [Action::Rebase, Action::Push]);
    assert_eq!(
        events.on_turn_complete,
        [Action::Merge { strategy: MergeStrategy::Squash }, Action::CreatePullRequest]
    );
    assert_eq!(events.on_pr_merged, [Action::MoveToNext]);
    assert_eq!(export_specs(&specs), yaml, "export writes it back the same");

    let problems = import(&with_steps(
        "      - name: A\n        events:\n          on_exit: [{type: push}]\n          on_pr_closed: [{type: merge, strategy: octopus}, {type: rebase}]\n",
    ))
    .unwrap_err();
    let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "workflows[0].steps[0].events.on_exit[0]",
            "workflows[0].steps[0].events.on_pr_closed[0].strategy",
            "workflows[0].steps[0].events.on_pr_closed[0]",
            "workflows[0].steps[0].events.on_pr_closed[1]",
        ],
        "{problems:#?}"
    );
    assert!(problems[1].message.contains("merge, squash, fast_forward"), "{}", problems[1].message);
}

#[test]
fn i46_forge_actions_import_with_their_settings_and_only_where_allowed() {
    let yaml = with_steps(
        "      - name: A\n        events:\n          on_pr_checks_failed: [{type: send_feedback, max_rounds: 5, include_bots: true}]\n          on_pr_checks_passed: [{type: auto_merge, strategy: squash}, {type: move_to_next}]\n          on_pr_review: [{type: send_feedback}]\n      - name: B\n",
    );
    let specs = import(&yaml).unwrap();
    let events = &specs[0].steps[0].events;
    let asked = Feedback { max_rounds: 5, include_bots: true };
    assert_eq!(events.on_pr_checks_failed, [Action::SendFeedback(asked)]);
    assert_eq!(
        events.on_pr_checks_passed,
        [Action::AutoMerge { strategy: MergeStrategy::Squash }, Action::MoveToNext]
    );
    assert_eq!(events.on_pr_review, [Action::SendFeedback(Feedback::default())]);
    assert_eq!(export_specs(&specs), yaml, "export writes it back the same");

    let problems = import(&with_steps(
        "      - name: A\n        events:\n          on_pr_checks_failed: [{type: send_feedback, max_rounds: 0}, {type: auto_merge}]\n          on_enter: [{type: send_feedback}]\n",
    ))
    .unwrap_err();
    let found: Vec<(&str, &str)> =
        problems.iter().map(|p| (p.path.as_str(), p.message.as_str())).collect();
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(
        found.iter().any(|(path, message)| path.ends_with("on_enter[0]")
            && message.contains("send_feedback is not allowed in on_enter")),
        "{found:#?}"
    );
    assert!(
        found.iter().any(|(path, message)| path.ends_with("on_pr_checks_failed[0].max_rounds")
            && message.contains("from 1 to 20")),
        "{found:#?}"
    );
    assert!(found.iter().any(|(path, _)| path.ends_with("on_pr_checks_failed[1]")), "{found:#?}");
}

#[test]
fn i47_write_back_actions_import_under_the_pull_request_triggers_only() {
    let yaml = with_steps(
        "      - name: A\n        events:\n          on_pr_merged: [{type: comment_issue}, {type: close_issue}, {type: move_to_next}]\n          on_pr_closed: [{type: comment_issue}]\n      - name: B\n",
    );
    let specs = import(&yaml).unwrap();
    let events = &specs[0].steps[0].events;
    assert_eq!(events.on_pr_merged, [Action::CommentIssue, Action::CloseIssue, Action::MoveToNext]);
    assert_eq!(events.on_pr_closed, [Action::CommentIssue]);
    assert_eq!(export_specs(&specs), yaml, "export writes it back the same");

    let problems = import(&with_steps(
        "      - name: A\n        events:\n          on_pr_closed: [{type: close_issue}]\n          on_turn_complete: [{type: comment_issue}]\n",
    ))
    .unwrap_err();
    let found: Vec<(&str, &str)> =
        problems.iter().map(|p| (p.path.as_str(), p.message.as_str())).collect();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found.iter().any(|(path, message)| path.ends_with("on_pr_closed[0]")
            && message.contains("close_issue is not allowed in on_pr_closed")),
        "{found:#?}"
    );
    assert!(found.iter().any(|(path, _)| path.ends_with("on_turn_complete[0]")), "{found:#?}");
}
