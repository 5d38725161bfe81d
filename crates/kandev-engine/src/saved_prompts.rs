//! Saved prompts in step prompts (issue 18): `{{prompt:name}}` is filled in with the task's
//! workspace's saved prompt `name` each time a step starts the agent (the actor's step entry
//! and the startup settling of a reset). An unknown name is sent as written; the live path
//! leaves a status note naming it.

use kandev_domain::saved_prompt;
use kandev_domain::task::Task;
use kandev_store::Store;

use crate::error::Result;

/// `text` with each `{{prompt:name}}` replaced by the task's workspace's saved prompt of that
/// name, and the names that workspace has no saved prompt for (left as written).
pub(crate) async fn expand_saved_prompts(
    store: &Store,
    task: &Task,
    text: String,
) -> Result<(String, Vec<String>)> {
    let names = saved_prompt::references(&text);
    if names.is_empty() {
        return Ok((text, vec![]));
    }
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        if let Some(prompt) = store.saved_prompt_named(&task.workspace_id, &name).await? {
            found.push((name, prompt.body));
        }
    }
    let lookup = |name: &str| found.iter().find(|(n, _)| n == name).map(|(_, b)| b.clone());
    Ok(saved_prompt::expand(&text, lookup))
}

/// The status note a step start leaves when its prompt names saved prompts that do not exist.
pub(crate) fn missing_prompts_note(missing: &[String]) -> String {
    let list: Vec<String> = missing.iter().map(|n| format!("{{{{prompt:{n}}}}}")).collect();
    format!(
        "the step prompt names no saved prompt for {}: sent as written; create it in Settings > Prompts",
        list.join(", ")
    )
}
