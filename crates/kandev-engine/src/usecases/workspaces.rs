//! Workspace use cases: create, rename, delete, each announced on the `workspaces` topic.

use kandev_api_types::{Notification, WorkspaceDto, WorkspacesEvent};
use kandev_domain::WorkspaceId;
use kandev_domain::workspace::Workspace;

use crate::engine::Engine;
use crate::error::Result;
use crate::publish::notify;

impl Engine {
    /// `workspace.create` with a checked `name`.
    pub async fn create_workspace(&self, name: &str) -> Result<Workspace> {
        let mut tx = self.inner.store.begin_write().await?;
        let workspace = tx.insert_workspace(name).await?;
        let event = WorkspacesEvent::Created { workspace: WorkspaceDto::from(&workspace) };
        notify(&mut tx, Notification::Workspaces(event)).await?;
        tx.commit().await?;
        Ok(workspace)
    }

    /// `workspace.update`: renames it.
    pub async fn rename_workspace(&self, id: &WorkspaceId, name: &str) -> Result<Workspace> {
        let mut tx = self.inner.store.begin_write().await?;
        let workspace = tx.update_workspace(id, name).await?;
        let event = WorkspacesEvent::Updated { workspace: WorkspaceDto::from(&workspace) };
        notify(&mut tx, Notification::Workspaces(event)).await?;
        tx.commit().await?;
        Ok(workspace)
    }

    /// `workspace.delete`.
    pub async fn delete_workspace(&self, id: &WorkspaceId) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.delete_workspace(id).await?;
        let event = WorkspacesEvent::Deleted { id: id.to_string() };
        notify(&mut tx, Notification::Workspaces(event)).await?;
        tx.commit().await?;
        Ok(())
    }
}
