//! The portable workflow YAML format: parse, validate, export, and the built-in templates.
//!
//! A document looks like this (docs/workflows.md, "The portable format"):
//!
//! ```yaml
//! version: 1
//! kind: kandev-workflow
//! workflows:
//!   - name: Plan & Build
//!     steps:
//!       - name: Plan
//!         prompt: "Make a plan for: {{task_prompt}}"
//!         is_start_step: true
//!         events:
//!           on_enter: [{type: enable_plan_mode}, {type: auto_start_agent}]
//!       - name: Build
//! ```
//!
//! Invariants:
//! - [`import`] is all or nothing: it validates the whole document and returns either every
//!   workflow or every problem, each with the path of the offending value.
//! - [`export`] and [`export_specs`] write one canonical form: a fixed field order, fields
//!   equal to their defaults left out, `move_to_step` targets written as step names. For any
//!   valid spec `s`, `import(&export_specs(&s)) == Ok(s)`, so export → import → export is
//!   byte-identical.
//! - Nothing here knows about ids or the database: a `move_to_step` target is a step name (or
//!   position) in the document and an index into [`WorkflowSpec::steps`] once imported.
//! - The built-in templates are YAML files in `templates/`, embedded in the binary and read
//!   with [`import`] like any other document.
//! - A hostile document costs bounded memory and time: [`Limits`] (size, expanded size,
//!   aliases, depth, time) are checked while the text is read, before any value that would
//!   exceed them is built, and every field is checked by `kandev_domain::validate` (names,
//!   prompts, descriptions, colors; at most `MAX_STEPS` steps per workflow). A limit that is
//!   hit is one problem at [`DOCUMENT_PATH`] whose message names the limit.

mod export;
mod import;
mod load;
mod scalar;
mod templates;

pub use export::{export, export_specs};
pub use import::{MAX_PROBLEMS, import, import_with};
pub use kandev_domain::workflow::{StepSpec, WorkflowSpec};
pub use load::Limits;
pub use templates::{Template, template, templates};

/// The `version` this crate reads and writes.
pub const FORMAT_VERSION: u64 = 1;
/// The `kind` of a workflow document.
pub const FORMAT_KIND: &str = "kandev-workflow";
/// The path of problems about the document as a whole (YAML syntax, not a mapping).
pub const DOCUMENT_PATH: &str = "document";

/// One thing wrong with an imported document.
///
/// `path` names the offending value like `workflows[0].steps[2].events.on_enter[1]`, or is
/// [`DOCUMENT_PATH`] for problems with the document as a whole. `message` is lowercase, short,
/// and says what to do where it can.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl Problem {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self { path: path.into(), message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_displays_path_then_message() {
        let problem = Problem::new("workflows[0].name", "is required");
        assert_eq!(problem.to_string(), "workflows[0].name: is required");
    }
}
