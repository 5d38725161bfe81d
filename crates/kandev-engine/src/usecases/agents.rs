//! Installing agents (issue 51): `agent.versions`, `agent.install`, `agent.uninstall`.

use std::path::PathBuf;

use kandev_domain::agent::AgentKind;
use kandev_runtime::agent_install::{self, Available};

use crate::engine::Engine;
use crate::error::{EngineError, Result};
use crate::installs::package_of;

/// One installed version and the names of the profiles that run it.
#[derive(Debug, Clone)]
pub struct InstalledVersion {
    pub version: String,
    pub program: PathBuf,
    pub profiles: Vec<String>,
}

/// The versions of a kind's agent: installed (newest first) and offered by the registry,
/// or why the registry could not be asked.
#[derive(Debug, Clone)]
pub struct AgentVersions {
    pub package: &'static str,
    pub installed: Vec<InstalledVersion>,
    pub available: std::result::Result<Available, String>,
}

impl Engine {
    /// The versions of `kind`'s agent Kandev installed.
    pub fn installed_agent_versions(&self, kind: AgentKind) -> Vec<String> {
        match package_of(kind) {
            Ok(agent) => self.inner.agents.installed(agent),
            Err(_) => vec![],
        }
    }

    /// `agent.versions`.
    pub async fn agent_versions(&self, kind: AgentKind) -> Result<AgentVersions> {
        let agent = package_of(kind)?;
        let profiles = self.inner.store.list_profiles().await?;
        let installed = self
            .inner
            .agents
            .installed(agent)
            .into_iter()
            .map(|version| {
                let users = profiles.iter().filter(|p| {
                    p.kind == kind && p.agent_version.as_deref() == Some(version.as_str())
                });
                InstalledVersion {
                    program: self.inner.agents.program(agent, &version),
                    profiles: users.map(|p| p.name.clone()).collect(),
                    version,
                }
            })
            .collect();
        let available = agent_install::available(agent.package).await.map_err(|e| e.to_string());
        Ok(AgentVersions { package: agent.package, installed, available })
    }

    /// `agent.install`: one exact version (nothing to do when it is there).
    pub async fn install_agent(
        &self,
        kind: AgentKind,
        version: &str,
    ) -> Result<agent_install::Installed> {
        let agent = package_of(kind)?;
        Ok(self.inner.agents.install(agent, version).await?)
    }

    /// `agent.uninstall`: refused while a profile runs the version.
    pub async fn uninstall_agent(&self, kind: AgentKind, version: &str) -> Result<()> {
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
        Ok(self.inner.agents.uninstall(agent, version).await?)
    }
}
