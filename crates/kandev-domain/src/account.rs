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
    /// The server's owner (issue 49): passes every role check and manages users. The first
    /// user added becomes it; `kandev user owner NAME` hands it on.
    pub owner: bool,
}

/// What a member of a workspace may do there (issue 49), in increasing order: each role can
/// do everything the ones before it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads the workspace: board, tasks, transcripts, diffs.
    Viewer,
    /// Works on tasks: chats with agents, answers permissions, moves, reviews and ships.
    Member,
    /// Everything that runs commands on the server or changes the workspace's setup:
    /// agent profiles, repository scripts, executors, terminals, channels, intake, members.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Member, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Member => "member",
            Role::Admin => "admin",
        }
    }

    /// A role from its name (`viewer`, `member` or `admin`).
    pub fn parse(value: &str) -> Result<Role, FieldError> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == value)
            .ok_or_else(|| FieldError::new("role", "must be one of viewer, member or admin"))
    }
}

/// A user in a workspace, with their role there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub user_id: String,
    pub name: String,
    pub role: Role,
    pub added_at: Timestamp,
}

/// One write action someone did (issue 49): who, what, where, when. Read in Settings →
/// Activity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: String,
    pub at: Timestamp,
    /// As a `by` field: a user's name, `token`, `user` (no accounts) or `agent`.
    pub by: String,
    pub action: String,
    /// The workspace it acted in; `None` for server-wide objects (profiles, executors,
    /// channels, users).
    pub workspace_id: Option<String>,
    /// The id of the object it named, if any.
    pub target: Option<String>,
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

/// A user name: 1 to 64 of ASCII letters, digits, `.`, `_`, `-`, `@` and `+` (an e-mail
/// address, as identity providers name people), starting with a letter or digit, not one of
/// [`RESERVED_NAMES`]. Names are compared as given (case-sensitive).
pub fn user_name(value: &str) -> Result<String, FieldError> {
    let value = value.trim();
    let fail = |problem: &str| Err(FieldError::new("name", problem));
    if value.is_empty() {
        return fail("is required");
    }
    if value.chars().count() > MAX_USER_NAME_CHARS {
        return fail("is longer than 64 characters");
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+');
    if !value.chars().all(allowed) || !value.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return fail(
            "may hold only letters, digits, '.', '_', '-', '@' and '+', starting with a letter or digit",
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
        assert_eq!(user_name("pat+ci@example.com").unwrap(), "pat+ci@example.com");
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
    fn roles_are_ordered_and_parsed() {
        assert!(Role::Viewer < Role::Member && Role::Member < Role::Admin);
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()).unwrap(), role);
        }
        assert!(Role::parse("owner").is_err());
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
