//! Export → import → export round trips: byte-identical documents and equal specs.

use kandev_domain::workflow::{Action, Step, StepEvents, StepSpec, Workflow, WorkflowSpec};
use kandev_domain::{StepId, Timestamp, WorkflowId, WorkspaceId};
use kandev_workflow_yaml::{export, export_specs, import, templates};

/// Imports, exports, and checks both directions of the round trip; returns the export.
fn assert_round_trip(specs: &[WorkflowSpec]) -> String {
    let yaml = export_specs(specs);
    let imported = import(&yaml).unwrap_or_else(|p| panic!("{p:#?}\nin:\n{yaml}"));
    assert_eq!(imported, specs, "import(export(x)) != x for:\n{yaml}");
    assert_eq!(export_specs(&imported), yaml, "export is not stable");
    yaml
}

#[test]
fn every_template_round_trips_exactly() {
    for t in templates() {
        assert_round_trip(std::slice::from_ref(&t.spec));
    }
    let all: Vec<_> = templates().into_iter().map(|t| t.spec).collect();
    assert_round_trip(&all);
}

/// A hand-written document using every feature, in a loose style: flow and block lists,
/// a position target, a target written before its step, defaults spelled out.
const HAND_WRITTEN: &str = r##"
kind: kandev-workflow
version: 1
workflows:
- name: "  Release train  "
  description: |
    Ship it.
    Carefully.
  steps:
  - name: Inbox
    allow_manual_move: true
    events: {}
  - name: Triage
    color: '#0ea5e9'
    is_start_step: true
    cancel_triggers_turn_complete: true
    prompt: "Triage: {{task_prompt}}"
    events:
      on_enter:
        - type: set_session_mode
          mode_id: architect
        - {type: auto_start_agent}
      on_turn_complete:
        - {type: move_to_step, step: 3}
      on_turn_start: []
  - name: "Fix, then test"
    allow_manual_move: false
    events:
      on_turn_start: [{type: move_to_next}]
      on_turn_complete: [{type: disable_plan_mode}, {type: move_to_step, step: "  Inbox "}]
      on_exit: [{type: disable_plan_mode}]
  - name: Verify
    prompt: ~
- name: Second
  steps:
  - name: "true"
    events:
      on_turn_start: [{type: move_to_step, step: "true"}]
"##;

const HAND_WRITTEN_CANONICAL: &str = r##"version: 1
kind: kandev-workflow
workflows:
  - name: Release train
    description: |
      Ship it.
      Carefully.
    steps:
      - name: Inbox
      - name: Triage
        color: "#0ea5e9"
        prompt: "Triage: {{task_prompt}}"
        is_start_step: true
        cancel_triggers_turn_complete: true
        events:
          on_enter: [{type: set_session_mode, mode_id: architect}, {type: auto_start_agent}]
          on_turn_complete: [{type: move_to_step, step: Verify}]
      - name: "Fix, then test"
        allow_manual_move: false
        events:
          on_turn_start: [{type: move_to_next}]
          on_turn_complete: [{type: disable_plan_mode}, {type: move_to_step, step: Inbox}]
          on_exit: [{type: disable_plan_mode}]
      - name: Verify
  - name: Second
    steps:
      - name: "true"
        events:
          on_turn_start: [{type: move_to_step, step: "true"}]
"##;

#[test]
fn hand_written_document_imports_and_exports_in_canonical_form() {
    let specs = import(HAND_WRITTEN).unwrap();
    assert_eq!(specs.len(), 2);
    let release = &specs[0];
    assert_eq!(release.name, "Release train");
    assert_eq!(release.description, "Ship it.\nCarefully.\n");
    let triage = &release.steps[1];
    assert!(triage.is_start_step && triage.cancel_triggers_turn_complete);
    assert_eq!(
        triage.events.on_enter,
        [Action::SetSessionMode { mode_id: "architect".into() }, Action::AutoStartAgent]
    );
    assert_eq!(triage.events.on_turn_complete, [Action::MoveToStep(3)]);
    assert!(!release.steps[2].allow_manual_move);
    assert_eq!(release.steps[2].events.on_turn_complete[1], Action::MoveToStep(0));
    assert_eq!(specs[1].steps[0].events.on_turn_start, [Action::MoveToStep(0)]);

    assert_eq!(export_specs(&specs), HAND_WRITTEN_CANONICAL);
    assert_eq!(assert_round_trip(&specs), HAND_WRITTEN_CANONICAL);
}

#[test]
fn awkward_strings_round_trip() {
    let awkward = [
        "no",
        "42",
        "-1.5",
        "null",
        "a: b",
        "x #y",
        "[list]",
        "{map}",
        "quote \" backslash \\",
        "ünïcödé 日本 🚀",
    ];
    let steps: Vec<StepSpec> = awkward
        .iter()
        .enumerate()
        .map(|(i, name)| StepSpec {
            color: (*name).to_owned(),
            // Even steps get a prompt that must be quoted, odd ones a literal block.
            prompt: match i % 2 {
                0 => format!("{name}\n\n  indented\t{name}\nbell \u{7} nel \u{85}\n\n"),
                _ => format!("{name}\n\n  indented\t{name}\nlast\n\n"),
            },
            events: StepEvents {
                on_enter: vec![Action::SetSessionMode { mode_id: (*name).to_owned() }],
                on_turn_complete: vec![Action::MoveToStep(awkward.len() - 1 - i)],
                ..StepEvents::default()
            },
            ..StepSpec::named(*name)
        })
        .collect();
    let description = " leading space\r\nand a carriage return ".to_owned();
    let yaml = assert_round_trip(&[WorkflowSpec { name: "Awkward".into(), description, steps }]);
    assert!(
        yaml.contains("        prompt: |+\n          42\n\n            indented\t42\n"),
        "{yaml}"
    );
}

#[test]
fn an_empty_export_round_trips() {
    assert_eq!(export_specs(&[]), "version: 1\nkind: kandev-workflow\nworkflows: []\n");
    assert_eq!(import(&export_specs(&[])), Ok(vec![]));
}

/// Stores a spec as a domain workflow the way the store would: ids, positions, targets by id.
fn stored(spec: &WorkflowSpec) -> Workflow {
    let workflow_id = WorkflowId::new("wf-1");
    let step_id = |i: usize| StepId::new(format!("step-{i}"));
    let steps = spec
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| Step {
            id: step_id(i),
            workflow_id: workflow_id.clone(),
            name: s.name.clone(),
            position: u32::try_from(i).unwrap(),
            color: s.color.clone(),
            prompt: s.prompt.clone(),
            is_start_step: s.is_start_step,
            allow_manual_move: s.allow_manual_move,
            agent_profile_id: None,
            cancel_triggers_turn_complete: s.cancel_triggers_turn_complete,
            events: s.events.clone().map_targets(|i| Ok::<_, ()>(step_id(i))).unwrap(),
        })
        .collect();
    Workflow {
        id: workflow_id,
        workspace_id: WorkspaceId::new("ws-1"),
        name: spec.name.clone(),
        description: spec.description.clone(),
        template_id: None,
        steps,
        created_at: Timestamp(0),
        updated_at: Timestamp(0),
    }
}

#[test]
fn stored_workflows_export_like_their_specs_whatever_the_step_order() {
    let specs: Vec<_> = templates().into_iter().map(|t| t.spec).collect();
    let mut workflows: Vec<_> = specs.iter().map(stored).collect();
    for w in &mut workflows {
        w.steps.reverse();
    }
    let yaml = export(&workflows);
    assert_eq!(yaml, export_specs(&specs));
    assert_eq!(import(&yaml).unwrap(), specs);
}

#[test]
fn a_dangling_target_id_is_exported_so_that_import_reports_it() {
    let spec = templates().remove(0).spec;
    let mut workflow = stored(&spec);
    workflow.steps[1].events.on_turn_complete = vec![Action::MoveToStep(StepId::new("gone"))];
    let problems = import(&export(&[workflow])).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].path, "workflows[0].steps[1].events.on_turn_complete[0].step");
}
