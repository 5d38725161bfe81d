//! Saved prompt use cases (issue 18): a workspace's library; names and bodies arrive checked.

use kandev_domain::WorkspaceId;
use kandev_domain::saved_prompt::SavedPrompt;

use crate::engine::Engine;
use crate::error::Result;

impl Engine {
    /// `prompt.create` in an existing workspace.
    pub async fn create_saved_prompt(
        &self,
        workspace: &WorkspaceId,
        name: &str,
        body: &str,
    ) -> Result<SavedPrompt> {
        self.inner.store.get_workspace(workspace).await?;
        let mut tx = self.inner.store.begin_write().await?;
        let prompt = tx.insert_saved_prompt(workspace, name, body).await?;
        tx.commit().await?;
        Ok(prompt)
    }

    /// `prompt.update`.
    pub async fn update_saved_prompt(
        &self,
        id: &str,
        name: Option<&str>,
        body: Option<&str>,
    ) -> Result<SavedPrompt> {
        let mut tx = self.inner.store.begin_write().await?;
        let prompt = tx.update_saved_prompt(id, name, body).await?;
        tx.commit().await?;
        Ok(prompt)
    }

    /// `prompt.delete`.
    pub async fn delete_saved_prompt(&self, id: &str) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.delete_saved_prompt(id).await?;
        tx.commit().await?;
        Ok(())
    }
}
