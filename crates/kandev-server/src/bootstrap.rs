//! First run: a default workspace with a Kanban board and the Mock agent profile, so a new
//! user can create a task and watch an agent work without any setup.

use kandev_domain::agent::AgentKind;
use kandev_store::{NewProfile, Store, StoreError};

/// Seeds what a fresh database needs; does nothing on later runs.
pub async fn first_run(store: &Store) -> Result<(), StoreError> {
    let mut tx = store.begin_write().await?;
    if !tx.has_profiles().await? {
        let mock = NewProfile {
            name: "Mock".into(),
            kind: AgentKind::Mock,
            command: String::new(),
            agent_version: None,
            args: vec![],
            env: vec![],
            model: None,
            mode: None,
            auto_approve: false,
            mcp_servers: vec![],
        };
        tx.insert_profile(&mock).await?;
    }
    if !tx.has_workspaces().await? {
        let workspace = tx.insert_workspace("Default").await?;
        if let Some(template) = kandev_workflow_yaml::template("kanban") {
            tx.insert_workflow(&workspace.id, &template.spec, Some(template.id)).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
