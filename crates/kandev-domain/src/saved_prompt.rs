//! Saved prompts (issue 18): a workspace's library of reusable prompt texts, inserted with
//! `@name` in the composer and referenced as `{{prompt:name}}` in step prompts.

use crate::validate::{self, FieldError};
use crate::{Timestamp, WorkspaceId};

/// Longest accepted saved prompt name, in characters.
pub const MAX_PROMPT_NAME_CHARS: usize = 64;

/// A saved prompt of a workspace; its name is unique in the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedPrompt {
    pub id: String,
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub body: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A saved prompt's name: 1 to [`MAX_PROMPT_NAME_CHARS`] ASCII letters, digits, `-` and `_`,
/// starting with a letter or a digit, so `@name` and `{{prompt:name}}` read unambiguously.
pub fn name(field: &str, value: &str) -> Result<String, FieldError> {
    let value = value.trim();
    let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if value.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if value.chars().count() > MAX_PROMPT_NAME_CHARS {
        return Err(FieldError::new(
            field,
            format!("is longer than {MAX_PROMPT_NAME_CHARS} characters"),
        ));
    }
    if !value.chars().all(ok_char) || !value.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(FieldError::new(
            field,
            "may hold only letters, digits, - and _, starting with a letter or digit (such as review-checklist)",
        ));
    }
    Ok(value.to_owned())
}

/// A saved prompt's body: a non-empty step-prompt-sized text (white space kept).
pub fn body(field: &str, value: &str) -> Result<String, FieldError> {
    let body = validate::prompt(field, value)?;
    if body.trim().is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    Ok(body)
}

const OPEN: &str = "{{prompt:";
const CLOSE: &str = "}}";

/// The names `text` references as `{{prompt:name}}`, in order, each once.
pub fn references(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find(CLOSE) else { break };
        let name = after[..end].trim();
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
        rest = &after[end + CLOSE.len()..];
    }
    names
}

/// The expansion of a text would be longer than the limit of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// The limit, in bytes.
    pub limit: usize,
}

/// `text` with each `{{prompt:name}}` replaced by `lookup(name)`; a name `lookup` does not
/// know is left as written and returned in the second value (in order, each once). Bodies
/// are inserted as they are: a `{{prompt:...}}` inside a body is not expanded again. An
/// expansion longer than `limit` bytes stops there (no more is built) and is an error.
pub fn expand(
    text: &str,
    limit: usize,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<(String, Vec<String>), TooLarge> {
    let mut out = String::with_capacity(text.len().min(limit));
    let mut missing: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find(CLOSE) else { break };
        out.push_str(&rest[..start]);
        let name = after[..end].trim();
        match lookup(name) {
            Some(body) => out.push_str(&body),
            None => {
                out.push_str(&rest[start..start + OPEN.len() + end + CLOSE.len()]);
                if !missing.iter().any(|m| m == name) {
                    missing.push(name.to_owned());
                }
            }
        }
        rest = &after[end + CLOSE.len()..];
        if out.len() > limit {
            return Err(TooLarge { limit });
        }
    }
    out.push_str(rest);
    if out.len() > limit {
        return Err(TooLarge { limit });
    }
    Ok((out, missing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_word_of_letters_digits_dash_and_underscore() {
        assert_eq!(name("name", " review-1_x ").unwrap(), "review-1_x");
        assert!(name("name", "").is_err());
        assert!(name("name", "two words").is_err());
        assert!(name("name", "-dash-first").is_err());
        assert!(name("name", "é").is_err());
        assert!(name("name", &"a".repeat(65)).is_err());
        assert!(body("body", "  ").is_err());
    }

    #[test]
    fn references_are_found_once_each() {
        assert_eq!(
            references("a {{prompt:x}} b {{prompt: y }} {{prompt:x}} {{task_prompt}} {{prompt:z"),
            vec!["x".to_owned(), "y".to_owned()]
        );
    }

    #[test]
    fn expand_fills_known_names_and_reports_unknown_ones() {
        let lookup = |n: &str| (n == "x").then(|| "BODY {{prompt:y}}".to_owned());
        let (text, missing) =
            expand("1 {{prompt:x}} 2 {{prompt:y}} 3 {{prompt:y}}", 1000, lookup).unwrap();
        assert_eq!(text, "1 BODY {{prompt:y}} 2 {{prompt:y}} 3 {{prompt:y}}");
        assert_eq!(missing, vec!["y".to_owned()]);
        assert_eq!(expand("no refs", 1000, lookup), Ok(("no refs".to_owned(), vec![])));
    }

    #[test]
    fn i18_d1_an_expansion_past_the_message_limit_is_refused() {
        let body = "b".repeat(validate::MAX_PROMPT_BYTES);
        let text = "{{prompt:x}}".repeat(5000);
        let limit = validate::MAX_TEXT_BYTES;
        let lookup = |n: &str| (n == "x").then(|| body.clone());
        assert_eq!(expand(&text, limit, lookup), Err(TooLarge { limit }));
        // Exactly at the limit is fine.
        let text = "{{prompt:x}}".repeat(limit / body.len());
        let (out, _) = expand(&text, limit, lookup).unwrap();
        assert_eq!(out.len(), limit);
    }
}
