//! Validation of user-supplied names and texts, shared by every entity.

use thiserror::Error;

/// Longest accepted name (workspace, workflow, step, repository, profile), in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest accepted task title, in characters.
pub const MAX_TITLE_CHARS: usize = 500;
/// Longest accepted free text (descriptions, prompts), in bytes.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;

/// A field that did not pass validation; `field` names it for the user.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field} {problem}")]
pub struct FieldError {
    pub field: String,
    pub problem: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self { field: field.into(), problem: problem.into() }
    }
}

/// Trims a required name and checks it is non-empty and not too long.
pub fn name(field: &str, value: &str) -> Result<String, FieldError> {
    bounded_line(field, value, MAX_NAME_CHARS)
}

/// Trims a required task title and checks it is non-empty and not too long.
pub fn title(field: &str, value: &str) -> Result<String, FieldError> {
    bounded_line(field, value, MAX_TITLE_CHARS)
}

/// Checks an optional free text is not too large. Whitespace is kept as written.
pub fn text(field: &str, value: &str) -> Result<String, FieldError> {
    if value.len() > MAX_TEXT_BYTES {
        return Err(FieldError::new(field, "is longer than 1 MiB"));
    }
    Ok(value.to_owned())
}

fn bounded_line(field: &str, value: &str, max_chars: usize) -> Result<String, FieldError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(FieldError::new(field, "is required"));
    }
    if trimmed.chars().count() > max_chars {
        return Err(FieldError::new(field, format!("is longer than {max_chars} characters")));
    }
    if trimmed.chars().any(|c| c.is_control()) {
        return Err(FieldError::new(field, "must be a single line without control characters"));
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_trimmed_and_required() {
        assert_eq!(name("name", "  Board ").unwrap(), "Board");
        assert_eq!(name("name", "   ").unwrap_err().to_string(), "name is required");
        assert!(name("name", "a\nb").is_err());
        assert!(name("name", &"x".repeat(MAX_NAME_CHARS + 1)).is_err());
        assert!(name("name", &"x".repeat(MAX_NAME_CHARS)).is_ok());
    }

    #[test]
    fn text_keeps_whitespace_and_limits_size() {
        assert_eq!(text("description", " a\n b ").unwrap(), " a\n b ");
        assert!(text("description", &"x".repeat(MAX_TEXT_BYTES + 1)).is_err());
    }
}
