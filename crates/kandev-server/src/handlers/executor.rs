//! `executor.*` and `repository.executor.set` (issue 20): named executors (`local`, `ssh`
//! with how to reach the host, or `container` with how to run each task's container, issue
//! 42) and the one each repository chose. Settings are checked here
//! (`SshSettings::validated`, `ContainerSettings::validated`); whether the host answers or
//! the engine runs is learnt when connecting, or asked with `executor.check`.

use kandev_api_types::requests::{
    ById, Empty, ExecutorCreate, ExecutorUpdate, RepositoryExecutorSet,
};
use kandev_api_types::responses::{
    Deleted, ExecutorChecked, ExecutorOne, Executors, RepositoryExecutor,
};
use kandev_api_types::{
    CheckStepDto, ContainerSettingsDto, ExecutorDto, ExecutorKindDto, SshSettingsDto,
};
use kandev_domain::executor::{ExecutorKind, SshSettings};
use kandev_domain::validate::{FieldError, name};

use crate::{ApiError, AppState};

/// The kind and settings a request describes; `ssh` belongs to kind `ssh` only, `container`
/// to kind `container` only.
fn kind(
    kind: ExecutorKindDto,
    ssh: Option<SshSettingsDto>,
    container: Option<ContainerSettingsDto>,
) -> Result<ExecutorKind, ApiError> {
    match (kind, ssh, container) {
        (ExecutorKindDto::Local, None, None) => Ok(ExecutorKind::Local),
        (ExecutorKindDto::Local, _, _) => {
            Err(ApiError::validation("ssh and container must be left out for a local executor"))
        }
        (ExecutorKindDto::Ssh, None, _) => Err(ApiError::validation(
            "ssh is required for an ssh executor: host, port, user, identity_file, known_hosts, remote_home",
        )),
        (ExecutorKindDto::Ssh, Some(settings), None) => SshSettings::from(settings)
            .validated()
            .map(ExecutorKind::Ssh)
            .map_err(|e| FieldError::new(format!("ssh.{}", e.field), e.problem).into()),
        (ExecutorKindDto::Container, _, None) => Err(ApiError::validation(
            "container is required for a container executor: at least image (e.g. {\"image\": \"debian:12\"})",
        )),
        (ExecutorKindDto::Container, None, Some(settings)) => settings
            .into_settings()
            .map(ExecutorKind::Container)
            .map_err(|e| FieldError::new(format!("container.{}", e.field), e.problem).into()),
        (_, Some(_), Some(_)) => {
            Err(ApiError::validation("give ssh or container, the one of the executor's kind"))
        }
    }
}

/// Refuses an SSH executor whose identity file is not a file on this machine (issue 45, item
/// 3): a typo would otherwise be learnt only when a session fails to connect. Checked when
/// the settings are saved; a key removed later is still found out when connecting.
async fn identity_file_present(kind: &ExecutorKind) -> Result<(), ApiError> {
    let ExecutorKind::Ssh(settings) = kind else { return Ok(()) };
    let path = &settings.identity_file;
    let problem = match tokio::fs::metadata(path).await {
        Ok(found) if found.is_file() => return Ok(()),
        Ok(_) => "is not a file",
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => "does not exist",
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
            "cannot be read by the server"
        }
        Err(_) => "cannot be read",
    };
    Err(ApiError::validation(format!(
        "identity file {} {problem}; give the path of a private key on this machine",
        path.display()
    )))
}

pub async fn list(s: &AppState, _: Empty) -> Result<Executors, ApiError> {
    let executors = s.store().list_executors().await?;
    Ok(Executors { executors: executors.iter().map(ExecutorDto::from).collect() })
}

pub async fn create(s: &AppState, p: ExecutorCreate) -> Result<ExecutorOne, ApiError> {
    let (name, kind) = (name("name", &p.name)?, kind(p.kind, p.ssh, p.container)?);
    identity_file_present(&kind).await?;
    let executor = s.engine().create_executor(&name, &kind, p.allowed_secrets.as_deref()).await?;
    Ok(ExecutorOne { executor: ExecutorDto::from(&executor) })
}

pub async fn update(s: &AppState, p: ExecutorUpdate) -> Result<ExecutorOne, ApiError> {
    let name = p.name.as_deref().map(|n| name("name", n)).transpose()?;
    let changed = match (p.kind, p.ssh, p.container) {
        (None, None, None) => None,
        (Some(k), ssh, container) => Some(kind(k, ssh, container)?),
        // Settings alone: the executor stays of that kind (checked below).
        (None, Some(ssh), None) => Some(kind(ExecutorKindDto::Ssh, Some(ssh), None)?),
        (None, None, Some(c)) => Some(kind(ExecutorKindDto::Container, None, Some(c))?),
        (None, Some(_), Some(_)) => {
            return Err(ApiError::validation(
                "give ssh or container, the one of the executor's kind",
            ));
        }
    };
    if let Some(kind) = &changed {
        identity_file_present(kind).await?;
    }
    let kind_given = p.kind.is_some();
    let executor = s
        .engine()
        .update_executor(
            &p.id,
            name.as_deref(),
            changed.as_ref(),
            kind_given,
            p.allowed_secrets.as_deref(),
        )
        .await?;
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
    let settings = match executor.kind {
        ExecutorKind::Ssh(settings) => settings,
        ExecutorKind::Local => {
            return Ok(ExecutorChecked {
                ok: true,
                message: Some("a local executor runs agents on the server's own host".into()),
                copied: false,
                previous_version: None,
                remote_version: None,
                steps: vec![],
            });
        }
        ExecutorKind::Container(settings) => {
            let steps = s.engine().check_container_executor(&settings).await;
            let failed = steps.iter().find(|step| !step.ok);
            return Ok(ExecutorChecked {
                ok: failed.is_none(),
                message: failed.map(|step| format!("{}: {}", step.what, step.detail)),
                copied: false,
                previous_version: None,
                remote_version: None,
                steps: steps
                    .into_iter()
                    .map(|step| CheckStepDto { what: step.what, ok: step.ok, detail: step.detail })
                    .collect(),
            });
        }
    };
    Ok(match s.engine().check_ssh_executor(settings).await {
        Ok(found) => ExecutorChecked {
            ok: true,
            message: None,
            copied: found.copied,
            previous_version: found.previous,
            remote_version: Some(found.remote_version),
            steps: vec![],
        },
        Err(message) => ExecutorChecked {
            ok: false,
            message: Some(message),
            copied: false,
            previous_version: None,
            remote_version: None,
            steps: vec![],
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
