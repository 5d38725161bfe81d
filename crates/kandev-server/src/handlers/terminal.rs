//! User terminals (`terminal.open`, `close`, `list`; their streams are `crate::ws`) and dev
//! servers (`devserver.start`, `stop`, `list`), docs/terminals.md. The engine runs them;
//! this converts its values into the API types.

use kandev_api_types::requests::{ByTask, ByTerminal, DevServerTarget, TerminalOpen};
use kandev_api_types::responses::{DevServerOne, DevServers, TerminalOne, Terminals};
use kandev_api_types::{DevServerDto, TerminalDto};
use kandev_domain::{RepositoryId, TaskId};
use kandev_engine::{DevServerInfo, TerminalInfo};

use crate::{ApiError, AppState};

fn dto(info: DevServerInfo) -> DevServerDto {
    DevServerDto {
        task_id: info.task_id.to_string(),
        repository_id: info.repository_id.to_string(),
        port: info.port,
        url: info.url,
        terminal_id: info.terminal_id,
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

pub(crate) fn terminal_dto(info: TerminalInfo) -> TerminalDto {
    TerminalDto {
        id: info.id,
        task_id: info.task_id.to_string(),
        repository_id: info.repository_id.to_string(),
        state: info.state.to_owned(),
        exit_code: info.exit_code,
        signal: info.signal,
    }
}

pub async fn open(s: &AppState, p: TerminalOpen) -> Result<TerminalOne, ApiError> {
    let repository = p.repository_id.map(RepositoryId::new);
    let task = TaskId::new(p.task_id);
    let info = s.engine().open_terminal(&task, repository.as_ref(), p.cols, p.rows).await?;
    Ok(TerminalOne { terminal: terminal_dto(info) })
}

pub async fn close(s: &AppState, p: ByTerminal) -> Result<TerminalOne, ApiError> {
    let info = s.engine().close_terminal(&p.terminal_id).await?;
    Ok(TerminalOne { terminal: terminal_dto(info) })
}

pub async fn list(s: &AppState, p: ByTask) -> Result<Terminals, ApiError> {
    let list = s.engine().list_terminals(&TaskId::new(p.task_id));
    Ok(Terminals { terminals: list.into_iter().map(terminal_dto).collect() })
}
