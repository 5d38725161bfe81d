//! `prompt.*`: a workspace's library of saved prompts (issue 18). Names are one word
//! (`kandev_domain::saved_prompt::name`) and unique in the workspace.

use kandev_api_types::SavedPromptDto;
use kandev_api_types::requests::{ById, ByWorkspace, PromptCreate, PromptUpdate};
use kandev_api_types::responses::{Deleted, SavedPromptOne, SavedPrompts};
use kandev_domain::WorkspaceId;
use kandev_domain::saved_prompt::{body, name};

use crate::{ApiError, AppState};

pub async fn list(s: &AppState, p: ByWorkspace) -> Result<SavedPrompts, ApiError> {
    let workspace = WorkspaceId::new(p.workspace_id);
    s.store().get_workspace(&workspace).await?;
    let prompts = s.store().list_saved_prompts(&workspace).await?;
    Ok(SavedPrompts { prompts: prompts.iter().map(SavedPromptDto::from).collect() })
}

pub async fn create(s: &AppState, p: PromptCreate) -> Result<SavedPromptOne, ApiError> {
    let (name, body) = (name("name", &p.name)?, body("body", &p.body)?);
    let workspace = WorkspaceId::new(p.workspace_id);
    let prompt = s.engine().create_saved_prompt(&workspace, &name, &body).await?;
    Ok(SavedPromptOne { prompt: SavedPromptDto::from(&prompt) })
}

pub async fn update(s: &AppState, p: PromptUpdate) -> Result<SavedPromptOne, ApiError> {
    let name = p.name.as_deref().map(|n| name("name", n)).transpose()?;
    let body = p.body.as_deref().map(|b| body("body", b)).transpose()?;
    let prompt = s.engine().update_saved_prompt(&p.id, name.as_deref(), body.as_deref()).await?;
    Ok(SavedPromptOne { prompt: SavedPromptDto::from(&prompt) })
}

pub async fn delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_saved_prompt(&p.id).await?;
    Ok(Deleted { deleted: true, id: p.id })
}
