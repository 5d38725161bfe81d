//! `secret.*` (issue 50): names and scopes of the secrets, values write-only. A workspace's
//! and its repositories' secrets are its admins'; the server's (no workspace named) are the
//! owner's to change, and every admin sees their names (to reference them).

use kandev_api_types::SecretDto;
use kandev_api_types::requests::{Empty, SecretList, SecretRemove, SecretSet};
use kandev_api_types::responses::{Deleted, SecretKeyRotated, SecretOne, Secrets};
use kandev_domain::secret::SecretScope;
use kandev_domain::{RepositoryId, WorkspaceId};

use crate::accounts::Identity;
use crate::roles::{self, Grants};
use crate::{ApiError, AppState};

/// The scope a request names, checked: the repository must be one of the workspace's, and
/// the server's scope needs the owner.
async fn scope(
    s: &AppState,
    who: &Identity,
    workspace_id: Option<&str>,
    repository_id: Option<&str>,
) -> Result<SecretScope, ApiError> {
    match (workspace_id, repository_id) {
        (None, None) => {
            if roles::grants(s, who).await? != Grants::All {
                return Err(ApiError::forbidden(
                    "only the server's owner can change the server's secrets: ask them, or set \
                     the secret for your workspace",
                ));
            }
            Ok(SecretScope::Server)
        }
        (None, Some(_)) => Err(ApiError::validation(
            "a repository's secret needs its workspace too: give the workspace",
        )),
        (Some(workspace), None) => {
            s.store().get_workspace(&WorkspaceId::new(workspace)).await?;
            Ok(SecretScope::Workspace { workspace_id: workspace.to_owned() })
        }
        (Some(workspace), Some(repository)) => {
            let found = s.store().get_repository(&RepositoryId::new(repository)).await?;
            if found.workspace_id.as_str() != workspace {
                return Err(kandev_store::StoreError::not_found("repository", repository).into());
            }
            Ok(SecretScope::Repository {
                workspace_id: workspace.to_owned(),
                repository_id: repository.to_owned(),
            })
        }
    }
}

/// `secret.list`.
pub async fn list(s: &AppState, p: SecretList) -> Result<Secrets, ApiError> {
    if let Some(workspace) = &p.workspace_id {
        s.store().get_workspace(&WorkspaceId::new(workspace)).await?;
    }
    let secrets = s.store().list_secrets(p.workspace_id.as_deref()).await?;
    Ok(Secrets {
        secrets: secrets.iter().map(SecretDto::from).collect(),
        key_id: s.engine().secret_key_id()?,
    })
}

/// `secret.set`.
pub async fn set(s: &AppState, who: &Identity, p: SecretSet) -> Result<SecretOne, ApiError> {
    let scope = scope(s, who, p.workspace_id.as_deref(), p.repository_id.as_deref()).await?;
    let secret = s.engine().set_secret(&scope, &p.name, &p.value).await?;
    Ok(SecretOne { secret: SecretDto::from(&secret) })
}

/// `secret.remove`.
pub async fn remove(s: &AppState, who: &Identity, p: SecretRemove) -> Result<Deleted, ApiError> {
    let scope = scope(s, who, p.workspace_id.as_deref(), p.repository_id.as_deref()).await?;
    let removed = s.engine().remove_secret(&scope, p.name.trim()).await?;
    Ok(Deleted { deleted: true, id: removed.id })
}

/// `secret.key.rotate` (the owner's).
pub async fn rotate(s: &AppState, _: Empty) -> Result<SecretKeyRotated, ApiError> {
    let (key_id, resealed) = s.engine().rotate_secret_key().await?;
    Ok(SecretKeyRotated { key_id, resealed: u32::try_from(resealed).unwrap_or(u32::MAX) })
}
