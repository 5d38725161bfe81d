//! `workspace.*` actions.

use kandev_api_types::requests::{ById, Page, WorkspaceCreate, WorkspaceUpdate};
use kandev_api_types::responses::{Deleted, WorkspaceOne, Workspaces};
use kandev_api_types::{Notification, WorkspaceDto, WorkspacesEvent};
use kandev_domain::{WorkspaceId, validate};

use super::{notify, paginate};
use crate::{ApiError, AppState};

pub async fn list(s: &AppState, p: Page) -> Result<Workspaces, ApiError> {
    let all = s.store().list_workspaces().await?;
    let (page, next_cursor) = paginate(all, &p)?;
    Ok(Workspaces { workspaces: page.iter().map(WorkspaceDto::from).collect(), next_cursor })
}

pub async fn create(s: &AppState, p: WorkspaceCreate) -> Result<WorkspaceOne, ApiError> {
    let name = validate::name("name", &p.name)?;
    let mut tx = s.store().begin_write().await?;
    let workspace = WorkspaceDto::from(&tx.insert_workspace(&name).await?);
    let event = WorkspacesEvent::Created { workspace: workspace.clone() };
    notify(&mut tx, Notification::Workspaces(event)).await?;
    tx.commit().await?;
    Ok(WorkspaceOne { workspace })
}

pub async fn get(s: &AppState, p: ById) -> Result<WorkspaceOne, ApiError> {
    let workspace = s.store().get_workspace(&WorkspaceId::new(p.id)).await?;
    Ok(WorkspaceOne { workspace: WorkspaceDto::from(&workspace) })
}

pub async fn update(s: &AppState, p: WorkspaceUpdate) -> Result<WorkspaceOne, ApiError> {
    let name = validate::name("name", &p.name)?;
    let mut tx = s.store().begin_write().await?;
    let workspace = WorkspaceDto::from(&tx.update_workspace(&WorkspaceId::new(p.id), &name).await?);
    let event = WorkspacesEvent::Updated { workspace: workspace.clone() };
    notify(&mut tx, Notification::Workspaces(event)).await?;
    tx.commit().await?;
    Ok(WorkspaceOne { workspace })
}

pub async fn delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    let mut tx = s.store().begin_write().await?;
    tx.delete_workspace(&WorkspaceId::new(&p.id)).await?;
    notify(&mut tx, Notification::Workspaces(WorkspacesEvent::Deleted { id: p.id.clone() }))
        .await?;
    tx.commit().await?;
    Ok(Deleted { deleted: true, id: p.id })
}
