//! `workspace.*` actions.

use kandev_api_types::WorkspaceDto;
use kandev_api_types::requests::{ById, WorkspaceCreate, WorkspaceUpdate};
use kandev_domain::{WorkspaceId, validate};
use serde_json::{Value, json};

use super::{ListAll, WORKSPACES_TOPIC, paginate};
use crate::{ApiError, AppState};

pub async fn list(s: &AppState, p: ListAll) -> Result<Value, ApiError> {
    let all = s.store().list_workspaces().await?;
    let (page, next) = paginate(all, &p.page)?;
    let list: Vec<WorkspaceDto> = page.iter().map(WorkspaceDto::from).collect();
    Ok(json!({ "workspaces": list, "next_cursor": next }))
}

pub async fn create(s: &AppState, p: WorkspaceCreate) -> Result<Value, ApiError> {
    let name = validate::name("name", &p.name)?;
    let mut tx = s.store().begin_write().await?;
    let dto = WorkspaceDto::from(&tx.insert_workspace(&name).await?);
    tx.emit(WORKSPACES_TOPIC, "workspace.created", json!({ "workspace": dto })).await?;
    tx.commit().await?;
    Ok(json!({ "workspace": dto }))
}

pub async fn get(s: &AppState, p: ById) -> Result<Value, ApiError> {
    let workspace = s.store().get_workspace(&WorkspaceId::new(p.id)).await?;
    Ok(json!({ "workspace": WorkspaceDto::from(&workspace) }))
}

pub async fn update(s: &AppState, p: WorkspaceUpdate) -> Result<Value, ApiError> {
    let name = validate::name("name", &p.name)?;
    let mut tx = s.store().begin_write().await?;
    let dto = WorkspaceDto::from(&tx.update_workspace(&WorkspaceId::new(p.id), &name).await?);
    tx.emit(WORKSPACES_TOPIC, "workspace.updated", json!({ "workspace": dto })).await?;
    tx.commit().await?;
    Ok(json!({ "workspace": dto }))
}

pub async fn delete(s: &AppState, p: ById) -> Result<Value, ApiError> {
    let mut tx = s.store().begin_write().await?;
    tx.delete_workspace(&WorkspaceId::new(&p.id)).await?;
    tx.emit(WORKSPACES_TOPIC, "workspace.deleted", json!({ "id": p.id })).await?;
    tx.commit().await?;
    Ok(json!({ "deleted": true, "id": p.id }))
}
