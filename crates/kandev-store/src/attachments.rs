//! Which stored attachments rows name (issue 38, item 5): a user message's
//! `metadata.attachments` and a queued prompt's `attachments`. The engine's sweep removes old
//! uploads named by neither.

use std::collections::HashSet;

use serde_json::Value;

use crate::{Result, Store, StoreError};

/// Adds the ids of a JSON list of `{id, ...}` (under `key` of an object, when given). Text
/// that is not JSON is an error: a row the sweep cannot read must not let it remove what the
/// row may name.
fn ids_of(text: &str, key: Option<&str>, into: &mut HashSet<String>) -> Result<()> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("attachments of a stored row: {e}")))?;
    let list = match key {
        Some(key) => value.get(key),
        None => Some(&value),
    };
    let Some(list) = list.and_then(Value::as_array) else { return Ok(()) };
    into.extend(list.iter().filter_map(|a| a.get("id")?.as_str().map(str::to_owned)));
    Ok(())
}

impl Store {
    /// The ids of the attachments some stored user message or queued prompt names. Reads
    /// every user message whose metadata mentions attachments (a scan: the sweep runs it
    /// rarely, and only when old uploads exist).
    pub async fn attachments_in_use(&self) -> Result<HashSet<String>> {
        let mut ids = HashSet::new();
        let metadata: Vec<String> = crate::sql::query_scalar(
            "SELECT metadata FROM messages WHERE kind = 'user' AND metadata LIKE '%\"attachments\"%'",
        )
        .fetch_all(&self.read)
        .await?;
        for text in metadata {
            ids_of(&text, Some("attachments"), &mut ids)?;
        }
        let queued: Vec<String> = crate::sql::query_scalar(
            "SELECT attachments FROM queued_prompts WHERE attachments <> '[]'",
        )
        .fetch_all(&self.read)
        .await?;
        for text in queued {
            ids_of(&text, None, &mut ids)?;
        }
        Ok(ids)
    }
}
