//! Repositories registered in a workspace: the row, reads and writes.

use kandev_domain::workspace::Repository;
use kandev_domain::{RepositoryId, Timestamp, WorkspaceId};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx, workspaces};

/// A repository to register.
#[derive(Debug, Clone)]
pub struct NewRepository {
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub local_path: String,
    pub default_branch: String,
    pub branch_template: String,
    pub setup_script: String,
    pub copy_files: Vec<String>,
    pub cleanup_script: String,
    pub forge_api_base_url: String,
    pub forge_token_env: String,
    pub dev_script: String,
    pub script_timeout_s: u32,
    pub script_secrets: Vec<String>,
}

/// Fields of a repository to change; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct RepositoryPatch {
    pub name: Option<String>,
    pub default_branch: Option<String>,
    pub branch_template: Option<String>,
    pub setup_script: Option<String>,
    pub copy_files: Option<Vec<String>>,
    pub cleanup_script: Option<String>,
    pub forge_api_base_url: Option<String>,
    pub forge_token_env: Option<String>,
    pub dev_script: Option<String>,
    pub script_timeout_s: Option<u32>,
    pub script_secrets: Option<Vec<String>>,
}

#[derive(FromRow)]
struct RepositoryRow {
    id: String,
    workspace_id: String,
    name: String,
    local_path: String,
    default_branch: String,
    branch_template: String,
    setup_script: String,
    /// A JSON array of globs.
    copy_files: String,
    cleanup_script: String,
    forge_api_base_url: String,
    forge_token_env: String,
    dev_script: String,
    script_timeout_s: i64,
    /// A JSON array of secret names.
    script_secrets: String,
    created_at: i64,
    updated_at: i64,
}

impl TryFrom<RepositoryRow> for Repository {
    type Error = StoreError;

    fn try_from(r: RepositoryRow) -> Result<Self> {
        let copy_files = crate::error::read_json("repository", &r.id, &r.copy_files)?;
        let script_secrets = crate::error::read_json("repository", &r.id, &r.script_secrets)?;
        Ok(Repository {
            id: RepositoryId::new(r.id),
            workspace_id: WorkspaceId::new(r.workspace_id),
            name: r.name,
            local_path: r.local_path,
            default_branch: r.default_branch,
            branch_template: r.branch_template,
            setup_script: r.setup_script,
            copy_files,
            cleanup_script: r.cleanup_script,
            forge_api_base_url: r.forge_api_base_url,
            forge_token_env: r.forge_token_env,
            dev_script: r.dev_script,
            // Written from a `u32`; anything else reads as the server's limit.
            script_timeout_s: u32::try_from(r.script_timeout_s).unwrap_or(0),
            script_secrets,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        })
    }
}

fn globs_json(globs: &[String]) -> String {
    serde_json::Value::from(globs.to_vec()).to_string()
}

/// The repository `id`, or `NotFound`.
async fn get(mut db: Db<'_>, id: &str) -> Result<Repository> {
    crate::sql::query_as::<RepositoryRow>("SELECT * FROM repositories WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("repository", id))
        .and_then(Repository::try_from)
}

impl Store {
    pub async fn list_repositories(&self, workspace_id: &WorkspaceId) -> Result<Vec<Repository>> {
        let rows = crate::sql::query_as::<RepositoryRow>(
            "SELECT * FROM repositories WHERE workspace_id = ? ORDER BY name, id",
        )
        .bind(workspace_id.as_str())
        .fetch_all(&self.read)
        .await?;
        rows.into_iter().map(Repository::try_from).collect()
    }

    pub async fn get_repository(&self, id: &RepositoryId) -> Result<Repository> {
        get(self.db(), id.as_str()).await
    }
}

impl WriteTx {
    pub async fn insert_repository(&mut self, new: &NewRepository) -> Result<Repository> {
        workspaces::get(self.db(), new.workspace_id.as_str()).await?;
        let taken: Option<String> = crate::sql::query_scalar(
            "SELECT id FROM repositories WHERE workspace_id = ? AND local_path = ?",
        )
        .bind(new.workspace_id.as_str())
        .bind(&new.local_path)
        .fetch_optional(self.conn())
        .await?;
        if taken.is_some() {
            return Err(StoreError::Conflict(format!(
                "{} is already registered in this workspace",
                new.local_path
            )));
        }
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO repositories (id, workspace_id, name, local_path, default_branch, \
             branch_template, setup_script, copy_files, cleanup_script, forge_api_base_url, \
             forge_token_env, dev_script, script_timeout_s, script_secrets, created_at, \
             updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(new.workspace_id.as_str())
        .bind(&new.name)
        .bind(&new.local_path)
        .bind(&new.default_branch)
        .bind(&new.branch_template)
        .bind(&new.setup_script)
        .bind(globs_json(&new.copy_files))
        .bind(&new.cleanup_script)
        .bind(&new.forge_api_base_url)
        .bind(&new.forge_token_env)
        .bind(&new.dev_script)
        .bind(i64::from(new.script_timeout_s))
        .bind(globs_json(&new.script_secrets))
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        get(self.db(), &id).await
    }

    pub async fn update_repository(
        &mut self,
        id: &RepositoryId,
        patch: &RepositoryPatch,
    ) -> Result<Repository> {
        let current = get(self.db(), id.as_str()).await?;
        let now = self.now().millis();
        crate::sql::query(
            "UPDATE repositories SET name = ?, default_branch = ?, branch_template = ?, \
             setup_script = ?, copy_files = ?, cleanup_script = ?, forge_api_base_url = ?, \
             forge_token_env = ?, dev_script = ?, script_timeout_s = ?, script_secrets = ?, \
             updated_at = ? \
             WHERE id = ?",
        )
        .bind(patch.name.as_ref().unwrap_or(&current.name))
        .bind(patch.default_branch.as_ref().unwrap_or(&current.default_branch))
        .bind(patch.branch_template.as_ref().unwrap_or(&current.branch_template))
        .bind(patch.setup_script.as_ref().unwrap_or(&current.setup_script))
        .bind(globs_json(patch.copy_files.as_ref().unwrap_or(&current.copy_files)))
        .bind(patch.cleanup_script.as_ref().unwrap_or(&current.cleanup_script))
        .bind(patch.forge_api_base_url.as_ref().unwrap_or(&current.forge_api_base_url))
        .bind(patch.forge_token_env.as_ref().unwrap_or(&current.forge_token_env))
        .bind(patch.dev_script.as_ref().unwrap_or(&current.dev_script))
        .bind(i64::from(patch.script_timeout_s.unwrap_or(current.script_timeout_s)))
        .bind(globs_json(patch.script_secrets.as_ref().unwrap_or(&current.script_secrets)))
        .bind(now)
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        get(self.db(), id.as_str()).await
    }

    /// Deletes a repository; returns it so the caller can publish which workspace changed.
    pub async fn delete_repository(&mut self, id: &RepositoryId) -> Result<Repository> {
        let current = get(self.db(), id.as_str()).await?;
        crate::sql::query("DELETE FROM repositories WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        Ok(current)
    }
}
