//! Dev servers: `devserver.start`, `devserver.stop`, `devserver.list` (docs/terminals.md).
//! The engine runs them; this converts its values into the API types.

use kandev_api_types::DevServerDto;
use kandev_api_types::requests::{ByTask, DevServerTarget};
use kandev_api_types::responses::{DevServerOne, DevServers};
use kandev_domain::{RepositoryId, TaskId};
use kandev_engine::DevServerInfo;

use crate::{ApiError, AppState};

fn dto(info: DevServerInfo) -> DevServerDto {
    DevServerDto {
        task_id: info.task_id.to_string(),
        repository_id: info.repository_id.to_string(),
        port: info.port,
        url: info.url,
        state: info.state.to_owned(),
        exit_code: info.exit_code,
        log: info.log,
        truncated: info.truncated,
    }
}

pub async fn dev_server_start(s: &AppState, p: DevServerTarget) -> Result<DevServerOne, ApiError> {
    let repository = p.repository_id.map(RepositoryId::new);
    let info = s.engine().start_dev_server(&TaskId::new(p.task_id), repository.as_ref()).await?;
    Ok(DevServerOne { dev_server: dto(info) })
}

pub async fn dev_server_stop(s: &AppState, p: DevServerTarget) -> Result<DevServerOne, ApiError> {
    let repository = p.repository_id.map(RepositoryId::new);
    let info = s.engine().stop_dev_server(&TaskId::new(p.task_id), repository.as_ref()).await?;
    Ok(DevServerOne { dev_server: dto(info) })
}

pub async fn dev_server_list(s: &AppState, p: ByTask) -> Result<DevServers, ApiError> {
    let list = s.engine().list_dev_servers(&TaskId::new(p.task_id));
    Ok(DevServers { dev_servers: list.into_iter().map(dto).collect() })
}
