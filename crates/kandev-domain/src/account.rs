//! Accounts (issue 21): a user, a personal API token, and who did something (`by`).

use crate::Timestamp;
use crate::validate::FieldError;

/// Longest accepted user name, in characters.
pub const MAX_USER_NAME_CHARS: usize = 64;
/// Shortest accepted password, in characters.
pub const MIN_PASSWORD_CHARS: usize = 8;
/// Longest accepted password, in bytes (argon2 hashes any length; this bounds the work a
/// login costs).
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// Names that already mean someone else in a `by` field and so cannot be a user's.
pub const RESERVED_NAMES: &[&str] =
    &["user", "token", "workflow", "engine", "auto_approve", "agent", "system"];

/// A person who can log in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: String,
    pub name: String,
    pub created_at: Timestamp,
}

/// A personal API token, without its secret (which is shown once and stored hashed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    pub id: String,
    pub user_id: String,
    pub name: String,
    pub created_at: Timestamp,
}

/// Who asked for an action, as recorded in `by` fields (permission answers, moves, shipping).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// No accounts and no server token: the one local person (`"user"`, as before accounts).
    Local,
    /// The server's `--token` (automation).
    ServerToken,
    /// An agent, through Kandev's MCP server.
    Agent,
    /// A logged-in user or one of their personal tokens.
    User { id: String, name: String },
}

impl Actor {
    /// The value of a `by` field: the user's name, `"token"` or `"user"`.
    pub fn by(&self) -> &str {
        match self {
            Actor::Local => "user",
            Actor::ServerToken => "token",
            Actor::Agent => "agent",
            Actor::User { name, .. } => name,
        }
    }
}

/// Whether a `by` value names someone a team tells apart (a user or the server token), as
/// opposed to the one local person, an agent or Kandev itself: those moves and shipping
/// actions are also written into the transcript.
pub fn names_someone(by: &str) -> bool {
    !matches!(by, "user" | "agent" | "workflow" | "engine" | "auto_approve")
}

/// A user name: 1 to 64 of ASCII letters, digits, `.`, `_` and `-`, starting with a letter
/// or digit, not one of [`RESERVED_NAMES`]. Names are compared as given (case-sensitive).
pub fn user_name(value: &str) -> Result<String, FieldError> {
    let value = value.trim();
    let fail = |problem: &str| Err(FieldError::new("name", problem));
    if value.is_empty() {
        return fail("is required");
    }
    if value.chars().count() > MAX_USER_NAME_CHARS {
        return fail("is longer than 64 characters");
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !value.chars().all(allowed) || !value.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return fail(
            "may hold only letters, digits, '.', '_' and '-', starting with a letter or digit",
        );
    }
    if RESERVED_NAMES.contains(&value) {
        return fail("is reserved (it already means something in `by` fields); choose another");
    }
    Ok(value.to_owned())
}

/// A new password: at least 8 characters, at most 1024 bytes.
pub fn password(value: &str) -> Result<(), FieldError> {
    if value.chars().count() < MIN_PASSWORD_CHARS {
        return Err(FieldError::new("password", "must be at least 8 characters long"));
    }
    if value.len() > MAX_PASSWORD_BYTES {
        return Err(FieldError::new("password", "is longer than 1024 bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_are_checked() {
        assert_eq!(user_name(" alice ").unwrap(), "alice");
        assert_eq!(user_name("a.b_c-1").unwrap(), "a.b_c-1");
        assert!(user_name("").is_err());
        assert!(user_name("-x").is_err());
        assert!(user_name("a b").is_err());
        assert!(user_name("token").unwrap_err().problem.contains("reserved"));
        assert!(user_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn passwords_are_checked() {
        assert!(password("short").is_err());
        assert!(password("long enough").is_ok());
        assert!(password(&"x".repeat(1025)).is_err());
    }

    #[test]
    fn by_names_the_actor() {
        assert_eq!(Actor::Local.by(), "user");
        assert_eq!(Actor::ServerToken.by(), "token");
        assert_eq!(Actor::User { id: "1".into(), name: "alice".into() }.by(), "alice");
        assert!(names_someone("alice") && names_someone("token"));
        assert!(!names_someone("user") && !names_someone("agent"));
    }
}
