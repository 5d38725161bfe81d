//! Executors on the wire (issue 20): where a repository's agents run. `ssh` carries how to
//! reach the host; `local` carries nothing.

use kandev_domain::executor::{Executor, ExecutorKind, SshSettings};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::rfc3339;

/// The kind of an executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKindDto {
    Local,
    Ssh,
}

/// How to reach an SSH build machine. Paths are on the server's host, except `remote_home`
/// (an absolute directory on the remote host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields)]
pub struct SshSettingsDto {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub identity_file: String,
    pub known_hosts: String,
    pub remote_home: String,
}

impl From<&SshSettings> for SshSettingsDto {
    fn from(s: &SshSettings) -> Self {
        SshSettingsDto {
            host: s.host.clone(),
            port: s.port,
            user: s.user.clone(),
            identity_file: s.identity_file.display().to_string(),
            known_hosts: s.known_hosts.display().to_string(),
            remote_home: s.remote_home.clone(),
        }
    }
}

impl From<SshSettingsDto> for SshSettings {
    fn from(s: SshSettingsDto) -> Self {
        SshSettings {
            host: s.host,
            port: s.port,
            user: s.user,
            identity_file: s.identity_file.into(),
            known_hosts: s.known_hosts.into(),
            remote_home: s.remote_home,
        }
    }
}

/// A named executor; `ssh` is set exactly when `kind` is `ssh`. `repository_ids` are the
/// repositories that chose it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct ExecutorDto {
    pub id: String,
    pub name: String,
    pub kind: ExecutorKindDto,
    pub ssh: Option<SshSettingsDto>,
    pub repository_ids: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Executor> for ExecutorDto {
    fn from(e: &Executor) -> Self {
        let (kind, ssh) = match &e.kind {
            ExecutorKind::Local => (ExecutorKindDto::Local, None),
            ExecutorKind::Ssh(s) => (ExecutorKindDto::Ssh, Some(SshSettingsDto::from(s))),
        };
        ExecutorDto {
            id: e.id.clone(),
            name: e.name.clone(),
            kind,
            ssh,
            repository_ids: e.repository_ids.clone(),
            created_at: rfc3339(e.created_at),
            updated_at: rfc3339(e.updated_at),
        }
    }
}
