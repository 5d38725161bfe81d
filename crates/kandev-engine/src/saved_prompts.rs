//! Saved prompts in step prompts (issue 18): `{{prompt:name}}` is filled in with the task's
//! workspace's saved prompt `name` each time a step starts the agent (the actor's step entry
//! and the startup settling of a reset). An unknown name is sent as written; the live path
//! leaves a status note naming it.

use kandev_domain::saved_prompt::{self, TooLarge};
use kandev_domain::task::Task;
use kandev_domain::validate::{self, MAX_TEXT_BYTES};
use kandev_store::Store;

use crate::error::Result;

/// A step prompt with its saved prompts filled in.
pub(crate) struct Expanded {
    /// The text to send.
    pub text: String,
    /// The names the workspace has no saved prompt for (left as written).
    pub missing: Vec<String>,
    /// The expansion was longer than a message may be: `text` is the prompt as written.
    pub too_large: Option<TooLarge>,
}

/// `text` with each `{{prompt:name}}` replaced by the task's workspace's saved prompt of that
/// name, and the names that workspace has no saved prompt for (left as written). An
/// expansion longer than a message may be ([`MAX_TEXT_BYTES`]) is not built: the prompt is
/// sent as written (one query per distinct name either way).
pub(crate) async fn expand_saved_prompts(
    store: &Store,
    task: &Task,
    text: String,
) -> Result<Expanded> {
    let names = saved_prompt::references(&text);
    if names.is_empty() {
        return Ok(Expanded { text, missing: vec![], too_large: None });
    }
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        if let Some(prompt) = store.saved_prompt_named(&task.workspace_id, &name).await? {
            found.push((name, prompt.body));
        }
    }
    let lookup = |name: &str| found.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone());
    Ok(match saved_prompt::expand(&text, MAX_TEXT_BYTES, lookup) {
        Ok((expanded, missing)) => Expanded { text: expanded, missing, too_large: None },
        Err(too_large) => Expanded { text, missing: vec![], too_large: Some(too_large) },
    })
}

/// The status note a step start leaves when its prompt with the saved prompts filled in would
/// be longer than a message may be.
pub(crate) fn too_large_note(too_large: TooLarge) -> String {
    format!(
        "the step prompt with its saved prompts filled in is longer than {}: sent as written; \
         reference fewer or shorter saved prompts",
        validate::size(too_large.limit)
    )
}

/// The status note a step start leaves when its prompt names saved prompts that do not exist.
pub(crate) fn missing_prompts_note(missing: &[String]) -> String {
    let list: Vec<String> = missing.iter().map(|n| format!("{{{{prompt:{n}}}}}")).collect();
    format!(
        "the step prompt names no saved prompt for {}: sent as written; create it in Settings > Prompts",
        list.join(", ")
    )
}
