//! Repository use cases, each announced on its workspace's topic. Settings arrive checked.

use kandev_api_types::{Notification, RepositoryDto, WorkspaceEvent};
use kandev_domain::RepositoryId;
use kandev_domain::workspace::Repository;
use kandev_store::{NewRepository, RepositoryPatch};

use crate::engine::Engine;
use crate::error::Result;
use crate::publish::notify;

impl Engine {
    /// `repository.create`.
    pub async fn create_repository(&self, new: &NewRepository) -> Result<Repository> {
        let mut tx = self.inner.store.begin_write().await?;
        let repository = tx.insert_repository(new).await?;
        let event =
            WorkspaceEvent::RepositoryCreated { repository: RepositoryDto::from(&repository) };
        notify(&mut tx, Notification::workspace(&repository.workspace_id, event)).await?;
        tx.commit().await?;
        Ok(repository)
    }

    /// `repository.update`.
    pub async fn update_repository(
        &self,
        id: &RepositoryId,
        patch: &RepositoryPatch,
    ) -> Result<Repository> {
        let mut tx = self.inner.store.begin_write().await?;
        let repository = tx.update_repository(id, patch).await?;
        let event =
            WorkspaceEvent::RepositoryUpdated { repository: RepositoryDto::from(&repository) };
        notify(&mut tx, Notification::workspace(&repository.workspace_id, event)).await?;
        tx.commit().await?;
        Ok(repository)
    }

    /// `repository.delete`.
    pub async fn delete_repository(&self, id: &RepositoryId) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        let removed = tx.delete_repository(id).await?;
        let event = WorkspaceEvent::RepositoryDeleted { id: id.to_string() };
        notify(&mut tx, Notification::workspace(&removed.workspace_id, event)).await?;
        tx.commit().await?;
        Ok(())
    }
}
