//! Saved prompts (issue 18): the row, reads and writes. A name is unique in its workspace.

use kandev_domain::saved_prompt::SavedPrompt;
use kandev_domain::{Timestamp, WorkspaceId};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct SavedPromptRow {
    id: String,
    workspace_id: String,
    name: String,
    body: String,
    created_at: i64,
    updated_at: i64,
}

impl From<SavedPromptRow> for SavedPrompt {
    fn from(r: SavedPromptRow) -> Self {
        SavedPrompt {
            id: r.id,
            workspace_id: WorkspaceId::new(r.workspace_id),
            name: r.name,
            body: r.body,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
    }
}

async fn get(mut db: Db<'_>, id: &str) -> Result<SavedPrompt> {
    crate::sql::query_as::<SavedPromptRow>("SELECT * FROM saved_prompts WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .map(SavedPrompt::from)
        .ok_or_else(|| StoreError::not_found("saved prompt", id))
}

async fn by_name(mut db: Db<'_>, workspace: &str, name: &str) -> Result<Option<SavedPrompt>> {
    Ok(crate::sql::query_as::<SavedPromptRow>(
        "SELECT * FROM saved_prompts WHERE workspace_id = ? AND name = ?",
    )
    .bind(workspace)
    .bind(name)
    .fetch_optional(&mut db)
    .await?
    .map(SavedPrompt::from))
}

fn taken(name: &str) -> StoreError {
    StoreError::Conflict(format!(
        "a saved prompt named {name} already exists in this workspace; choose another name or update that one"
    ))
}

impl Store {
    /// The workspace's saved prompts by name.
    pub async fn list_saved_prompts(&self, workspace: &WorkspaceId) -> Result<Vec<SavedPrompt>> {
        let rows = crate::sql::query_as::<SavedPromptRow>(
            "SELECT * FROM saved_prompts WHERE workspace_id = ? ORDER BY name",
        )
        .bind(workspace.as_str())
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(SavedPrompt::from).collect())
    }

    pub async fn get_saved_prompt(&self, id: &str) -> Result<SavedPrompt> {
        get(self.db(), id).await
    }

    /// The workspace's saved prompt `name`, if it has one.
    pub async fn saved_prompt_named(
        &self,
        workspace: &WorkspaceId,
        name: &str,
    ) -> Result<Option<SavedPrompt>> {
        by_name(self.db(), workspace.as_str(), name).await
    }
}

impl WriteTx {
    /// Adds a saved prompt; `Conflict` when the workspace has one of that name.
    pub async fn insert_saved_prompt(
        &mut self,
        workspace: &WorkspaceId,
        name: &str,
        body: &str,
    ) -> Result<SavedPrompt> {
        if by_name(self.db(), workspace.as_str(), name).await?.is_some() {
            return Err(taken(name));
        }
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO saved_prompts (id, workspace_id, name, body, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(workspace.as_str())
        .bind(name)
        .bind(body)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        get(self.db(), &id).await
    }

    /// Changes a saved prompt's name and/or body (`None` keeps it).
    pub async fn update_saved_prompt(
        &mut self,
        id: &str,
        name: Option<&str>,
        body: Option<&str>,
    ) -> Result<SavedPrompt> {
        let current = get(self.db(), id).await?;
        let name = name.unwrap_or(&current.name);
        if name != current.name
            && by_name(self.db(), current.workspace_id.as_str(), name).await?.is_some()
        {
            return Err(taken(name));
        }
        crate::sql::query(
            "UPDATE saved_prompts SET name = ?, body = ?, updated_at = ? WHERE id = ?",
        )
        .bind(name)
        .bind(body.unwrap_or(&current.body))
        .bind(self.now().millis())
        .bind(id)
        .execute(self.conn())
        .await?;
        get(self.db(), id).await
    }

    /// Removes a saved prompt; returns it (`NotFound` when there is none).
    pub async fn delete_saved_prompt(&mut self, id: &str) -> Result<SavedPrompt> {
        let current = get(self.db(), id).await?;
        crate::sql::query("DELETE FROM saved_prompts WHERE id = ?")
            .bind(id)
            .execute(self.conn())
            .await?;
        Ok(current)
    }
}
