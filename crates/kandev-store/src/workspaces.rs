//! Workspaces: the row, reads and writes. Deleting one removes everything in it by cascade.

use kandev_domain::Timestamp;
use kandev_domain::WorkspaceId;
use kandev_domain::workspace::Workspace;
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

#[derive(FromRow)]
struct WorkspaceRow {
    id: String,
    name: String,
    created_at: i64,
    updated_at: i64,
}

impl From<WorkspaceRow> for Workspace {
    fn from(r: WorkspaceRow) -> Self {
        Workspace {
            id: WorkspaceId::new(r.id),
            name: r.name,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        }
    }
}

/// The workspace `id`, or `NotFound`.
pub(crate) async fn get(mut db: Db<'_>, id: &str) -> Result<Workspace> {
    crate::sql::query_as::<WorkspaceRow>("SELECT * FROM workspaces WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .map(Workspace::from)
        .ok_or_else(|| StoreError::not_found("workspace", id))
}

impl Store {
    pub async fn list_workspaces(&self) -> Result<Vec<Workspace>> {
        let rows = crate::sql::query_as::<WorkspaceRow>(
            "SELECT * FROM workspaces ORDER BY created_at, id",
        )
        .fetch_all(&self.read)
        .await?;
        Ok(rows.into_iter().map(Workspace::from).collect())
    }

    pub async fn get_workspace(&self, id: &WorkspaceId) -> Result<Workspace> {
        get(self.db(), id.as_str()).await
    }
}

impl WriteTx {
    pub async fn insert_workspace(&mut self, name: &str) -> Result<Workspace> {
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO workspaces (id, name, created_at, updated_at) VALUES (?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(name)
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        get(self.db(), &id).await
    }

    pub async fn update_workspace(&mut self, id: &WorkspaceId, name: &str) -> Result<Workspace> {
        let now = self.now().millis();
        let done = crate::sql::query("UPDATE workspaces SET name = ?, updated_at = ? WHERE id = ?")
            .bind(name)
            .bind(now)
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("workspace", id.as_str()));
        }
        get(self.db(), id.as_str()).await
    }

    /// Deletes a workspace and, by cascade, everything in it.
    pub async fn delete_workspace(&mut self, id: &WorkspaceId) -> Result<()> {
        let done = crate::sql::query("DELETE FROM workspaces WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("workspace", id.as_str()));
        }
        Ok(())
    }

    /// Whether any workspace exists yet (first-run seeding).
    pub async fn has_workspaces(&mut self) -> Result<bool> {
        let count: i64 = crate::sql::query_scalar("SELECT COUNT(*) FROM workspaces")
            .fetch_one(self.conn())
            .await?;
        Ok(count > 0)
    }
}
