//! `workspace.*` actions.

use kandev_api_types::WorkspaceDto;
use kandev_api_types::requests::{ById, Page, WorkspaceCreate, WorkspaceUpdate};
use kandev_api_types::responses::{Deleted, WorkspaceOne, Workspaces};
use kandev_domain::{WorkspaceId, validate};

use super::paginate;
use crate::{ApiError, AppState};

pub async fn list(s: &AppState, p: Page) -> Result<Workspaces, ApiError> {
    let all = s.store().list_workspaces().await?;
    let (page, next_cursor) = paginate(all, &p)?;
    Ok(Workspaces { workspaces: page.iter().map(WorkspaceDto::from).collect(), next_cursor })
}

pub async fn create(s: &AppState, p: WorkspaceCreate) -> Result<WorkspaceOne, ApiError> {
    let name = validate::name("name", &p.name)?;
    let workspace = s.engine().create_workspace(&name).await?;
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
