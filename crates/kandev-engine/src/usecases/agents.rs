//! Installing agents (issue 51): `agent.versions`, `agent.install`, `agent.uninstall`, on
//! this machine (where local and container executors run agents: a task's container mounts
//! this machine's installs read-only) or on an SSH executor's build host.

use std::path::PathBuf;

use kandev_domain::agent::AgentKind;
use kandev_domain::executor::ExecutorKind;
use kandev_runtime::agent_install::{self, AgentPackage, Available, Installed};
use kandev_runtime::site::{RemoteSite, Site};

use crate::engine::Engine;
use crate::error::{EngineError, Result, not_found};
use crate::installs::package_of;
use crate::sites::{Placement, site};
use crate::workdir::shared::git_error;

/// One installed version and the names of the profiles that run it.
#[derive(Debug, Clone)]
pub struct InstalledVersion {
    pub version: String,
    pub program: PathBuf,
    pub profiles: Vec<String>,
}

/// The versions of a kind's agent: installed where asked (newest first) and offered by the
/// registry, or why the registry could not be asked.
#[derive(Debug, Clone)]
pub struct AgentVersions {
    pub package: &'static str,
    pub installed: Vec<InstalledVersion>,
    pub available: std::result::Result<Available, String>,
}

/// Where the installs asked about are.
enum Host {
    /// This machine, `$KANDEV_HOME/agents`.
    Here,
    /// An SSH executor's build host, `<remote home>/agents`.
    Build(RemoteSite),
}

impl Engine {
    /// The versions of `kind`'s agent Kandev installed on this machine.
    pub fn installed_agent_versions(&self, kind: AgentKind) -> Vec<String> {
        match package_of(kind) {
            Ok(agent) => self.inner.agents.installed(&agent),
            Err(_) => vec![],
        }
    }

    /// The host of `executor_id` (none: this machine).
    async fn install_host(&self, executor_id: Option<&str>) -> Result<Host> {
        let Some(id) = executor_id else { return Ok(Host::Here) };
        let executor = self.inner.store.get_executor(id).await.map_err(not_found)?;
        let ExecutorKind::Ssh(settings) = executor.kind.clone() else { return Ok(Host::Here) };
        let placement =
            Placement::Ssh { executor: Box::new(executor), settings: Box::new(settings) };
        match site(&self.inner, &placement).await? {
            Site::Remote(remote) => Ok(Host::Build(remote)),
            Site::Local => Ok(Host::Here),
        }
    }

    /// `agent.versions`.
    pub async fn agent_versions(
        &self,
        kind: AgentKind,
        executor_id: Option<&str>,
    ) -> Result<AgentVersions> {
        let agent = package_of(kind)?;
        let host = self.install_host(executor_id).await?;
        let versions = match &host {
            Host::Here => self.inner.agents.installed(&agent),
            Host::Build(remote) => remote.installed_agents(&agent).await.map_err(git_error)?,
        };
        let profiles = self.inner.store.list_profiles().await?;
        let installed = versions
            .into_iter()
            .map(|version| {
                let users = profiles.iter().filter(|p| {
                    p.kind == kind && p.agent_version.as_deref() == Some(version.as_str())
                });
                InstalledVersion {
                    program: program_on(&self.inner.agents, &host, &agent, &version),
                    profiles: users.map(|p| p.name.clone()).collect(),
                    version,
                }
            })
            .collect();
        let package = kind.default_command().package.unwrap_or_default();
        let available = agent_install::available(package).await.map_err(|e| e.to_string());
        Ok(AgentVersions { package, installed, available })
    }

    /// `agent.install`: one exact version (nothing to do when it is there).
    pub async fn install_agent(
        &self,
        kind: AgentKind,
        version: &str,
        executor_id: Option<&str>,
    ) -> Result<Installed> {
        let agent = package_of(kind)?;
        match self.install_host(executor_id).await? {
            Host::Here => Ok(self.inner.agents.install(&agent, version, &[]).await?),
            Host::Build(remote) => remote.install_agent(&agent, version).await.map_err(git_error),
        }
    }

    /// `agent.uninstall`: refused while a profile runs the version (on any host: profiles
    /// name versions, not hosts).
    pub async fn uninstall_agent(
        &self,
        kind: AgentKind,
        version: &str,
        executor_id: Option<&str>,
    ) -> Result<()> {
        let agent = package_of(kind)?;
        let profiles = self.inner.store.list_profiles().await?;
        let users: Vec<&str> = profiles
            .iter()
            .filter(|p| p.kind == kind && p.agent_version.as_deref() == Some(version.trim()))
            .map(|p| p.name.as_str())
            .collect();
        if !users.is_empty() {
            return Err(EngineError::Conflict(format!(
                "{} {version} is run by the profile(s) {}: give them another version first",
                kind.default_command().title,
                users.join(", ")
            )));
        }
        match self.install_host(executor_id).await? {
            Host::Here => Ok(self.inner.agents.uninstall(&agent, version).await?),
            Host::Build(remote) => remote.uninstall_agent(&agent, version).await.map_err(git_error),
        }
    }
}

/// Where `version`'s command is on `host`.
fn program_on(
    here: &agent_install::AgentPrefix,
    host: &Host,
    agent: &AgentPackage,
    version: &str,
) -> PathBuf {
    match host {
        Host::Here => here.program(agent, version),
        Host::Build(remote) => {
            agent_install::AgentPrefix::new(remote.agents_root()).program(agent, version)
        }
    }
}
