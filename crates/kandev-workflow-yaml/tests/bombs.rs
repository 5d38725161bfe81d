//! Issue 12, finding 2: hostile documents (alias fan-out of a big scalar, billion laughs,
//! deep nesting, oversize input, oversize fields) are refused quickly with one problem that
//! names the limit, and nothing of them is built.

use std::time::Duration;

use kandev_domain::validate::{MAX_DESCRIPTION_BYTES, MAX_PROMPT_BYTES, MAX_STEPS};
use kandev_workflow_yaml::{DOCUMENT_PATH, Limits, Problem, import, import_with};

const HEADER: &str = "version: 1\nkind: kandev-workflow\n";

/// The default limits without the time limit, so that a slow debug build on a loaded machine
/// cannot turn a refusal into a different one. How long a refusal takes is measured by the
/// fault harness (R4 in docs/performance.md), not asserted here.
fn limits() -> Limits {
    Limits { max_time: Duration::from_secs(600), ..Limits::DEFAULT }
}

/// Imports `yaml`, which must be refused with exactly one problem at the document containing
/// `limit`; returns the message.
fn refused_for(yaml: &str, limit: &str) -> String {
    let problems = import_with(yaml, &limits()).expect_err("a bomb must be refused");
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let Problem { path, message } = &problems[0];
    assert_eq!(path, DOCUMENT_PATH);
    assert!(message.contains(limit), "{message:?} does not name {limit:?}");
    message.clone()
}

/// One workflow whose `n` steps all have `prompt: *big`, the anchor holding `scalar_bytes`.
fn alias_fan_out(scalar_bytes: usize, n: usize) -> String {
    let mut yaml = format!("{HEADER}x-big: &big \"{}\"\n", "x".repeat(scalar_bytes));
    // `x-big` is not a document field, but the limit is hit before fields are checked.
    yaml.push_str("workflows:\n  - name: Bomb\n    steps:\n");
    for i in 0..n {
        yaml.push_str(&format!("      - {{name: s{i}, prompt: *big}}\n"));
    }
    yaml
}

#[test]
fn i12_f2_alias_fan_out_of_a_1_mb_scalar_is_refused() {
    // The probe's document (4.7 GB of RSS before the fix): over the size limit already.
    refused_for(&alias_fan_out(1_000_000, 1_000), "size limit of 256 KiB");
}

#[test]
fn i12_f2_alias_fan_out_of_a_167_kb_scalar_is_refused_by_expanded_size() {
    // Accepted before the fix: 1,000 steps of 167 KB prompts, 167 MB stored.
    let yaml = alias_fan_out(167_000, 1_000);
    assert!(yaml.len() <= Limits::DEFAULT.max_bytes, "under the size limit");
    refused_for(&yaml, "expanded size limit");
}

#[test]
fn i12_f2_billion_laughs_is_refused() {
    let mut yaml = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..10 {
        let refs = vec![format!("*a{}", level - 1); 10].join(", ");
        yaml.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
    }
    refused_for(&yaml, "expanded size limit");
}

#[test]
fn i12_f2_many_small_aliases_are_refused_by_the_alias_limit() {
    let refs = vec!["*a"; Limits::DEFAULT.max_aliases + 1].join(", ");
    refused_for(&format!("a: &a x\nb: [{refs}]\n"), "alias limit");
}

#[test]
fn i12_f2_deep_nesting_is_refused_by_the_depth_limit() {
    // The probe's 195 KB of brackets, in flow and in block style (up to the size limit).
    let n = 97_500.min(Limits::DEFAULT.max_bytes / 2 - 100);
    refused_for(&format!("{}{}", "[".repeat(n), "]".repeat(n)), "depth limit");
    refused_for(&format!("{HEADER}workflows: {}{}", "[".repeat(n), "]".repeat(n)), "depth limit");
    refused_for(&format!("{}x", "- ".repeat(n)), "depth limit");
    let block: String = (0..40).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect();
    refused_for(&block, "depth limit");
}

#[test]
fn i12_f2_oversize_input_is_refused_by_the_size_limit() {
    let yaml = format!("{HEADER}# {}\nworkflows: []\n", "x".repeat(Limits::DEFAULT.max_bytes));
    refused_for(&yaml, "size limit of 256 KiB");
}

fn one_step(step_fields: &str) -> String {
    format!("{HEADER}workflows:\n  - name: Board\n    steps:\n      - name: A\n{step_fields}")
}

#[test]
fn i12_f2_oversize_fields_are_refused_naming_their_limit() {
    let prompt = one_step(&format!("        prompt: {}\n", "x".repeat(MAX_PROMPT_BYTES + 1)));
    let problems = import(&prompt).unwrap_err();
    assert_eq!(problems[0].path, "workflows[0].steps[0].prompt");
    assert!(problems[0].message.contains("longer than 64 KiB (the prompt limit)"), "{problems:?}");
    assert!(
        import(&one_step(&format!("        prompt: {}\n", "x".repeat(MAX_PROMPT_BYTES)))).is_ok()
    );

    let description = format!(
        "{HEADER}workflows:\n  - name: B\n    description: {}\n    steps: [{{name: A}}]\n",
        "x".repeat(MAX_DESCRIPTION_BYTES + 1)
    );
    let problems = import(&description).unwrap_err();
    assert_eq!(problems[0].path, "workflows[0].description");
    assert!(problems[0].message.contains("the description limit"), "{problems:?}");

    let color = one_step(&format!("        color: \"{}\"\n", "x".repeat(100)));
    assert_eq!(import(&color).unwrap_err()[0].path, "workflows[0].steps[0].color");

    let name =
        format!("{HEADER}workflows:\n  - name: \"\\u202eexe.txt\"\n    steps: [{{name: A}}]\n");
    let problems = import(&name).unwrap_err();
    assert_eq!(problems[0].path, "workflows[0].name");
    assert!(problems[0].message.contains("bidirectional"), "{problems:?}");

    let steps: String = (0..=MAX_STEPS).map(|i| format!("      - name: s{i}\n")).collect();
    let many = format!("{HEADER}workflows:\n  - name: B\n    steps:\n{steps}");
    let problems = import(&many).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert!(problems[0].message.contains("limit of 100 steps"), "{problems:?}");
}

#[test]
fn i12_f2_problems_are_listed_up_to_a_bound() {
    let fields: String = (0..5_000).map(|i| format!("  bogus{i}: 1\n")).collect();
    let yaml = format!("{HEADER}workflows:\n- name: B\n  steps: [{{name: A}}]\n{fields}");
    let problems = import(&yaml).unwrap_err();
    assert_eq!(problems.len(), kandev_workflow_yaml::MAX_PROBLEMS + 1);
    assert!(problems.last().unwrap().message.contains("4900 more problems"), "{problems:?}");
}

#[test]
fn i12_f2_a_flow_collection_of_the_size_limit_is_read_to_the_end() {
    // The scanner may look ahead to the end of a flow collection before its first event:
    // the worst case for the time of one event, bounded by the size limit.
    let items: String = (0..Limits::DEFAULT.max_bytes / 12).map(|i| format!("k{i}: x, ")).collect();
    let yaml = format!("{HEADER}workflows: {}[{{{items}}}]{}\n", "[".repeat(28), "]".repeat(28));
    assert!(yaml.len() <= Limits::DEFAULT.max_bytes);
    // About 0.15 s in a release build (R4 measures it); it is refused for its content, not a
    // limit.
    let problems = import_with(&yaml, &limits()).unwrap_err();
    assert_eq!(problems[0].path, "workflows[0]");
}
