//! Secrets (issue 50): API keys and tokens kept encrypted in the database, referenced by name
//! from profiles' environment, repositories' scripts and dev servers, and forge settings, and
//! put into a process's environment only when it starts. The rules here are pure: what a
//! secret's name and value may be, and which scope a reference finds first.

use crate::Timestamp;
use crate::validate::FieldError;

/// Longest secret name, in bytes.
pub const MAX_SECRET_NAME_BYTES: usize = 128;
/// Largest secret value, in bytes (a PEM key fits many times over).
pub const MAX_SECRET_VALUE_BYTES: usize = 64 * 1024;

/// Where a secret applies. A reference from a repository's task finds the repository's
/// secret of that name first, then its workspace's, then the server's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SecretScope {
    /// Every workspace (managed by the server's owner).
    Server,
    /// One workspace (managed by its admins).
    Workspace { workspace_id: String },
    /// One repository of a workspace (managed by the workspace's admins).
    Repository { workspace_id: String, repository_id: String },
}

impl SecretScope {
    /// The scope's name in storage and on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            SecretScope::Server => "server",
            SecretScope::Workspace { .. } => "workspace",
            SecretScope::Repository { .. } => "repository",
        }
    }

    pub fn workspace_id(&self) -> Option<&str> {
        match self {
            SecretScope::Server => None,
            SecretScope::Workspace { workspace_id }
            | SecretScope::Repository { workspace_id, .. } => Some(workspace_id),
        }
    }

    pub fn repository_id(&self) -> Option<&str> {
        match self {
            SecretScope::Repository { repository_id, .. } => Some(repository_id),
            _ => None,
        }
    }

    /// How specific the scope is: a reference takes the most specific secret of its name.
    pub fn rank(&self) -> u8 {
        match self {
            SecretScope::Repository { .. } => 2,
            SecretScope::Workspace { .. } => 1,
            SecretScope::Server => 0,
        }
    }
}

/// What is known of a stored secret without its key: never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    pub id: String,
    pub scope: SecretScope,
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A secret's value, sealed: the id of the key it was sealed with and the sealed bytes
/// (nonce and ciphertext, base64).
#[derive(Clone, PartialEq, Eq)]
pub struct Sealed {
    pub key_id: String,
    pub sealed: String,
}

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealed").field("key_id", &self.key_id).finish_non_exhaustive()
    }
}

/// Checks a secret's name: an environment variable's (letters, digits and `_`, not starting
/// with a digit), since that is how processes see it; at most [`MAX_SECRET_NAME_BYTES`].
pub fn secret_name(name: &str) -> Result<String, FieldError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(FieldError::new("name", "is required, e.g. OPENAI_API_KEY"));
    }
    if name.len() > MAX_SECRET_NAME_BYTES {
        return Err(FieldError::new(
            "name",
            format!("must be at most {MAX_SECRET_NAME_BYTES} bytes"),
        ));
    }
    let valid = !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(FieldError::new(
            "name",
            "may hold only letters, digits and _, not starting with a digit (an environment \
             variable's name), e.g. OPENAI_API_KEY",
        ));
    }
    Ok(name.to_owned())
}

/// Checks a list of secret names (an executor's allowed secrets, a repository's script
/// secrets): each as [`secret_name`]; answered sorted, each once. `Err` is the first bad
/// name's problem.
pub fn secret_names(names: &[String]) -> Result<Vec<String>, FieldError> {
    let mut checked = names.iter().map(|n| secret_name(n)).collect::<Result<Vec<_>, _>>()?;
    checked.sort();
    checked.dedup();
    Ok(checked)
}

/// Checks a secret's value: not empty, at most [`MAX_SECRET_VALUE_BYTES`], no NUL (an
/// environment variable cannot hold one). It is kept exactly as given.
pub fn secret_value(value: &str) -> Result<(), FieldError> {
    if value.is_empty() {
        return Err(FieldError::new("value", "is required"));
    }
    if value.len() > MAX_SECRET_VALUE_BYTES {
        return Err(FieldError::new(
            "value",
            format!("must be at most {} KiB", MAX_SECRET_VALUE_BYTES / 1024),
        ));
    }
    if value.contains('\0') {
        return Err(FieldError::new("value", "must not contain a NUL character"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_environment_variable_names() {
        assert_eq!(secret_name(" OPENAI_API_KEY ").unwrap(), "OPENAI_API_KEY");
        assert_eq!(secret_name("_x1").unwrap(), "_x1");
        for bad in ["", "1KEY", "MY-KEY", "A B", "KÉY", &"K".repeat(129)] {
            assert!(secret_name(bad).is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn name_lists_are_checked_sorted_and_each_once() {
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(secret_names(&names(&["B", " A", "B"])).unwrap(), names(&["A", "B"]));
        assert!(secret_names(&names(&["A", "no-dash"])).is_err());
    }

    #[test]
    fn values_are_kept_but_bounded() {
        assert!(secret_value(" sk-1 \n").is_ok());
        assert!(secret_value("").is_err());
        assert!(secret_value("a\0b").is_err());
        assert!(secret_value(&"x".repeat(MAX_SECRET_VALUE_BYTES + 1)).is_err());
    }

    #[test]
    fn a_repository_secret_is_more_specific_than_its_workspaces() {
        let repo = SecretScope::Repository { workspace_id: "w".into(), repository_id: "r".into() };
        let workspace = SecretScope::Workspace { workspace_id: "w".into() };
        assert!(repo.rank() > workspace.rank() && workspace.rank() > SecretScope::Server.rank());
    }
}
