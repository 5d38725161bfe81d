//! Agent profile use cases, each announced on the `profiles` topic.

use kandev_api_types::{AgentProfileDto, Notification, ProfilesEvent};
use kandev_domain::AgentProfileId;
use kandev_domain::agent::AgentProfile;
use kandev_store::{NewProfile, ProfilePatch};

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::publish::notify;

impl Engine {
    /// `agent.profile.create`.
    pub async fn create_profile(&self, new: &NewProfile) -> Result<AgentProfile> {
        let mut tx = self.inner.store.begin_write().await?;
        let profile = tx.insert_profile(new).await?;
        crate::installs::check_profile(&profile)?;
        let event = ProfilesEvent::Created { profile: AgentProfileDto::from(&profile) };
        notify(&mut tx, Notification::Profiles(event)).await?;
        tx.commit().await?;
        Ok(profile)
    }

    /// `agent.profile.update`: `patch` is made from the profile as the transaction reads
    /// it, so a masked value keeps exactly the value it stands for. Its error (a refused
    /// field) is the caller's own.
    pub async fn update_profile<E: From<EngineError>>(
        &self,
        id: &AgentProfileId,
        patch: impl FnOnce(&AgentProfile) -> std::result::Result<ProfilePatch, E>,
    ) -> std::result::Result<AgentProfile, E> {
        let mut tx = self.inner.store.begin_write().await.map_err(EngineError::from)?;
        let current = tx.profile(id).await.map_err(EngineError::from)?;
        let patch = patch(&current)?;
        let profile = tx.update_profile(id, &patch).await.map_err(EngineError::from)?;
        crate::installs::check_profile(&profile)?;
        let event = ProfilesEvent::Updated { profile: AgentProfileDto::from(&profile) };
        notify(&mut tx, Notification::Profiles(event)).await?;
        tx.commit().await.map_err(EngineError::from)?;
        Ok(profile)
    }

    /// `agent.profile.delete`.
    pub async fn delete_profile(&self, id: &AgentProfileId) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        tx.delete_profile(id).await?;
        let event = ProfilesEvent::Deleted { id: id.to_string() };
        notify(&mut tx, Notification::Profiles(event)).await?;
        tx.commit().await?;
        Ok(())
    }
}
