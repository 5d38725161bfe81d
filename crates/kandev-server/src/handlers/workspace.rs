//! `workspace.*` actions.

use kandev_api_types::WorkspaceDto;
use kandev_api_types::requests::{ById, Page, WorkspaceCreate, WorkspaceUpdate};
use kandev_api_types::responses::{Deleted, WorkspaceOne, Workspaces};
use kandev_domain::{WorkspaceId, validate};

use kandev_domain::account::Actor;

use super::paginate;
use crate::accounts::Identity;
use crate::{ApiError, AppState};

/// `workspace.list`: the workspaces the caller belongs to (all of them for the owner).
pub async fn list(s: &AppState, who: &Identity, p: Page) -> Result<Workspaces, ApiError> {
    let grants = crate::roles::grants(s, who).await?;
    let mut all = s.store().list_workspaces().await?;
    all.retain(|w| grants.sees(w.id.as_str()));
    let (page, next_cursor) = paginate(all, &p)?;
    Ok(Workspaces { workspaces: page.iter().map(WorkspaceDto::from).collect(), next_cursor })
}

/// `workspace.create`: a user who creates a workspace becomes its admin.
pub async fn create(
    s: &AppState,
    who: &Identity,
    p: WorkspaceCreate,
) -> Result<WorkspaceOne, ApiError> {
    let name = validate::name("name", &p.name)?;
    let workspace = s.engine().create_workspace(&name).await?;
    if let Actor::User { id, .. } = &who.actor {
        s.engine().add_creator(workspace.id.as_str(), id).await?;
        s.live().roles_changed(id);
    }
    Ok(WorkspaceOne { workspace: WorkspaceDto::from(&workspace) })
}

pub async fn get(s: &AppState, p: ById) -> Result<WorkspaceOne, ApiError> {
    let workspace = s.store().get_workspace(&WorkspaceId::new(p.id)).await?;
    Ok(WorkspaceOne { workspace: WorkspaceDto::from(&workspace) })
}

pub async fn update(s: &AppState, p: WorkspaceUpdate) -> Result<WorkspaceOne, ApiError> {
    let name = validate::name("name", &p.name)?;
    let workspace = s.engine().rename_workspace(&WorkspaceId::new(p.id), &name).await?;
    Ok(WorkspaceOne { workspace: WorkspaceDto::from(&workspace) })
}

pub async fn delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_workspace(&WorkspaceId::new(&p.id)).await?;
    Ok(Deleted { deleted: true, id: p.id })
}
