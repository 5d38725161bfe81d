//! `executor.*` and `repository.executor.set` (issue 20): named executors (`local`, or `ssh`
//! with how to reach the host) and the one each repository chose. Settings are checked here
//! (`SshSettings::validated`); whether the host answers is learnt when connecting.

use kandev_api_types::requests::{
    ById, Empty, ExecutorCreate, ExecutorUpdate, RepositoryExecutorSet,
};
use kandev_api_types::responses::{
    Deleted, ExecutorChecked, ExecutorOne, Executors, RepositoryExecutor,
};
use kandev_api_types::{ExecutorDto, ExecutorKindDto, SshSettingsDto};
use kandev_domain::executor::{ExecutorKind, SshSettings};
use kandev_domain::validate::{FieldError, name};

use crate::{ApiError, AppState};

/// The kind and settings a request describes; `ssh` belongs to kind `ssh` only.
fn kind(kind: ExecutorKindDto, ssh: Option<SshSettingsDto>) -> Result<ExecutorKind, ApiError> {
    match (kind, ssh) {
        (ExecutorKindDto::Local, None) => Ok(ExecutorKind::Local),
        (ExecutorKindDto::Local, Some(_)) => {
            Err(ApiError::validation("ssh must be left out for a local executor"))
        }
        (ExecutorKindDto::Ssh, None) => Err(ApiError::validation(
            "ssh is required for an ssh executor: host, port, user, identity_file, known_hosts, remote_home",
        )),
        (ExecutorKindDto::Ssh, Some(settings)) => SshSettings::from(settings)
            .validated()
            .map(ExecutorKind::Ssh)
            .map_err(|e| FieldError::new(format!("ssh.{}", e.field), e.problem).into()),
    }
}

pub async fn list(s: &AppState, _: Empty) -> Result<Executors, ApiError> {
    let executors = s.store().list_executors().await?;
    Ok(Executors { executors: executors.iter().map(ExecutorDto::from).collect() })
}

pub async fn create(s: &AppState, p: ExecutorCreate) -> Result<ExecutorOne, ApiError> {
    let (name, kind) = (name("name", &p.name)?, kind(p.kind, p.ssh)?);
    let executor = s.engine().create_executor(&name, &kind).await?;
    Ok(ExecutorOne { executor: ExecutorDto::from(&executor) })
}

pub async fn update(s: &AppState, p: ExecutorUpdate) -> Result<ExecutorOne, ApiError> {
    let name = p.name.as_deref().map(|n| name("name", n)).transpose()?;
    let changed = match (p.kind, p.ssh) {
        (None, None) => None,
        (Some(k), ssh) => Some(kind(k, ssh)?),
        // Settings alone: the executor stays of kind ssh (checked below).
        (None, Some(ssh)) => Some(kind(ExecutorKindDto::Ssh, Some(ssh))?),
    };
    let kind_given = p.kind.is_some();
    let executor =
        s.engine().update_executor(&p.id, name.as_deref(), changed.as_ref(), kind_given).await?;
    Ok(ExecutorOne { executor: ExecutorDto::from(&executor) })
}

pub async fn delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_executor(&p.id).await?;
    Ok(Deleted { deleted: true, id: p.id })
}

/// Connects to the executor (installing this server's kandev there when needed) and says
/// how it went; a failure is an answer with `ok: false`, not an error.
pub async fn check(s: &AppState, p: ById) -> Result<ExecutorChecked, ApiError> {
    let executor = s.store().get_executor(&p.id).await?;
    let ExecutorKind::Ssh(settings) = executor.kind else {
        return Ok(ExecutorChecked {
            ok: true,
            message: Some("a local executor runs agents on the server's own host".into()),
            copied: false,
            previous_version: None,
            remote_version: None,
        });
    };
    Ok(match s.engine().check_ssh_executor(settings).await {
        Ok(found) => ExecutorChecked {
            ok: true,
            message: None,
            copied: found.copied,
            previous_version: found.previous,
            remote_version: Some(found.remote_version),
        },
        Err(message) => ExecutorChecked {
            ok: false,
            message: Some(message),
            copied: false,
            previous_version: None,
            remote_version: None,
        },
    })
}

pub async fn set_for_repository(
    s: &AppState,
    p: RepositoryExecutorSet,
) -> Result<RepositoryExecutor, ApiError> {
    let executor =
        s.engine().set_repository_executor(&p.repository_id, p.executor_id.as_deref()).await?;
    Ok(RepositoryExecutor {
        repository_id: p.repository_id,
        executor: executor.as_ref().map(ExecutorDto::from),
    })
}
