//! Executors on the wire (issue 20): where a repository's agents run. `ssh` carries how to
//! reach the host, `container` how to run each task's container (issue 42); `local` carries
//! nothing.

use kandev_domain::container::{ContainerEngine, ContainerNetwork};
use kandev_domain::executor::{ContainerSettings, Executor, ExecutorKind, SshSettings};
use kandev_domain::validate::FieldError;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::rfc3339;

/// The kind of an executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKindDto {
    Local,
    Ssh,
    Container,
}

/// The program that runs a container executor's containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ContainerEngineDto {
    Podman,
    Docker,
}

/// What a task's container may reach: `none` (the default) nothing but itself,
/// `host_ports` the listed ports of the host's 127.0.0.1 (`host_ports`, relayed to the same
/// port of the container's 127.0.0.1), `full` the engine's default network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum ContainerNetworkDto {
    #[default]
    None,
    HostPorts,
    Full,
}

/// How a container executor runs each task's container. `engine` `null`: Podman when it
/// runs, else Docker. `image` must already be present (nothing is pulled) and provide a glibc
/// this server's `kandev` runs on. `cpus` (e.g. 1.5) and `memory_mib` are limits (`null`:
/// none); `mounts` are host paths mounted read-only at the same path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields)]
pub struct ContainerSettingsDto {
    #[serde(default)]
    #[ts(optional = nullable)]
    pub engine: Option<ContainerEngineDto>,
    pub image: String,
    #[serde(default)]
    pub network: ContainerNetworkDto,
    /// With network `host_ports`: the ports (1 to 32); empty otherwise.
    #[serde(default)]
    pub host_ports: Vec<u16>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub cpus: Option<f64>,
    #[serde(default)]
    #[ts(optional = nullable)]
    pub memory_mib: Option<u64>,
    #[serde(default)]
    pub mounts: Vec<String>,
}

impl From<&ContainerSettings> for ContainerSettingsDto {
    fn from(s: &ContainerSettings) -> Self {
        ContainerSettingsDto {
            engine: s.engine.map(|e| match e {
                ContainerEngine::Podman => ContainerEngineDto::Podman,
                ContainerEngine::Docker => ContainerEngineDto::Docker,
            }),
            image: s.image.clone(),
            network: match s.network {
                ContainerNetwork::None => ContainerNetworkDto::None,
                ContainerNetwork::HostPorts(_) => ContainerNetworkDto::HostPorts,
                ContainerNetwork::Full => ContainerNetworkDto::Full,
            },
            host_ports: s.network.host_ports().to_vec(),
            cpus: s.cpu_millis.map(|m| f64::from(m) / 1000.0),
            memory_mib: s.memory_mib,
            mounts: s.mounts.iter().map(|p| p.display().to_string()).collect(),
        }
    }
}

impl ContainerSettingsDto {
    /// The settings, checked ([`ContainerSettings::validated`]); `cpus` must be a number
    /// between 0.1 and 256.
    pub fn into_settings(self) -> Result<ContainerSettings, FieldError> {
        let cpu_millis = match self.cpus {
            None => None,
            Some(cpus) if cpus.is_finite() && (0.1..=256.0).contains(&cpus) => {
                // In range, so the rounded thousandths fit.
                Some((cpus * 1000.0).round() as u32)
            }
            Some(_) => return Err(FieldError::new("cpus", "must be between 0.1 and 256")),
        };
        ContainerSettings {
            engine: self.engine.map(|e| match e {
                ContainerEngineDto::Podman => ContainerEngine::Podman,
                ContainerEngineDto::Docker => ContainerEngine::Docker,
            }),
            image: self.image,
            network: match (self.network, self.host_ports.is_empty()) {
                (ContainerNetworkDto::HostPorts, _) => ContainerNetwork::HostPorts(self.host_ports),
                (_, false) => {
                    return Err(FieldError::new(
                        "host_ports",
                        "belongs to network host_ports; leave it out or set that network",
                    ));
                }
                (ContainerNetworkDto::None, true) => ContainerNetwork::None,
                (ContainerNetworkDto::Full, true) => ContainerNetwork::Full,
            },
            cpu_millis,
            memory_mib: self.memory_mib,
            mounts: self.mounts.into_iter().map(Into::into).collect(),
        }
        .validated()
    }
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

/// A named executor; `ssh` is set exactly when `kind` is `ssh`, `container` when it is
/// `container`. `repository_ids` are the repositories that chose it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct ExecutorDto {
    pub id: String,
    pub name: String,
    pub kind: ExecutorKindDto,
    pub ssh: Option<SshSettingsDto>,
    pub container: Option<ContainerSettingsDto>,
    pub repository_ids: Vec<String>,
    /// The secrets its host may receive (issue 50), by name.
    pub allowed_secrets: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Executor> for ExecutorDto {
    fn from(e: &Executor) -> Self {
        let (kind, ssh, container) = match &e.kind {
            ExecutorKind::Local => (ExecutorKindDto::Local, None, None),
            ExecutorKind::Ssh(s) => (ExecutorKindDto::Ssh, Some(SshSettingsDto::from(s)), None),
            ExecutorKind::Container(c) => {
                (ExecutorKindDto::Container, None, Some(ContainerSettingsDto::from(c)))
            }
        };
        ExecutorDto {
            id: e.id.clone(),
            name: e.name.clone(),
            kind,
            ssh,
            container,
            repository_ids: e.repository_ids.clone(),
            allowed_secrets: e.allowed_secrets.clone(),
            created_at: rfc3339(e.created_at),
            updated_at: rfc3339(e.updated_at),
        }
    }
}

/// One check of `executor.check`: what was checked, whether it held, and what was found or
/// the line that fixes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct CheckStepDto {
    pub what: String,
    pub ok: bool,
    pub detail: String,
}
