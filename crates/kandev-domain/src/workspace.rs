//! Workspaces and the local git repositories registered in them.

use crate::{RepositoryId, Timestamp, WorkspaceId};

/// A workspace groups repositories, workflows and agent profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub id: WorkspaceId,
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Default branch template: `{task-slug}` and `{short-id}` are filled in per task.
pub const DEFAULT_BRANCH_TEMPLATE: &str = "kandev/{task-slug}-{short-id}";

/// A local git repository that tasks can work in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    pub id: RepositoryId,
    pub workspace_id: WorkspaceId,
    pub name: String,
    /// Absolute path of the repository's main checkout.
    pub local_path: String,
    pub default_branch: String,
    pub branch_template: String,
    /// Shell script run in a new worktree before the agent starts; empty for none.
    pub setup_script: String,
    /// Globs of git-ignored files (`.env`, `config/local.*`) copied from the main checkout
    /// into each new worktree; a tracked file is never overwritten.
    pub copy_files: Vec<String>,
    /// Shell script run in a worktree before it is removed (archive, delete); empty for none.
    pub cleanup_script: String,
    /// The forge's REST API root (GitHub Enterprise, self-hosted GitLab); empty: derived
    /// from the `origin` remote's URL.
    pub forge_api_base_url: String,
    /// The environment variable holding the forge token; empty: `GITHUB_TOKEN` or
    /// `GITLAB_TOKEN` by forge.
    pub forge_token_env: String,
    /// The dev server command (`npm run dev`), run with `PORT` set; empty for none.
    pub dev_script: String,
    /// The time limit of its setup and cleanup scripts, in seconds; 0: the server's.
    pub script_timeout_s: u32,
    /// The secrets (issue 50) its setup, cleanup and dev scripts get as environment
    /// variables of the same names.
    pub script_secrets: Vec<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
