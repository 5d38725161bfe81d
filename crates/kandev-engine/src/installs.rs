//! Agents installed by Kandev (issue 51): which npm package and command each kind installs
//! (the kinds' table, `AgentKind::default_command`), and the command a profile that names a
//! version runs. The installs themselves are `kandev_runtime::agent_install`'s, under
//! `$KANDEV_HOME/agents`.

use std::path::PathBuf;

use kandev_domain::agent::{AgentKind, AgentProfile};
use kandev_runtime::agent_install::{AgentPackage, InstallError, exact_version};

use crate::error::{EngineError, Result};
use crate::inner::Inner;
use crate::sites::Placement;

/// The kind's npm package and command, or a validation error for a kind Kandev does not
/// install (the mock agent, a custom command).
pub(crate) fn package_of(kind: AgentKind) -> Result<AgentPackage> {
    let default = kind.default_command();
    match default.package {
        Some(package) => Ok(AgentPackage {
            kind: kind.as_str().to_owned(),
            package: package.to_owned(),
            program: default.program.to_owned(),
        }),
        None => Err(EngineError::Validation(format!(
            "Kandev does not install the {} kind: {}",
            kind.as_str(),
            default.install()
        ))),
    }
}

/// Where the command of the version `profile` names is, when it names one (installed or
/// not: a start of a missing one fails on it rather than running another version).
pub(crate) fn pinned_program(inner: &Inner, profile: &AgentProfile) -> Option<PathBuf> {
    let version = profile.agent_version.as_deref()?;
    let agent = package_of(profile.kind).ok()?;
    Some(inner.agents.program(&agent, version))
}

/// Refuses a profile whose version is not installed, saying what to do.
pub(crate) fn check_pinned(inner: &Inner, profile: &AgentProfile) -> Result<()> {
    let Some(version) = &profile.agent_version else { return Ok(()) };
    let agent = package_of(profile.kind)?;
    if inner.agents.program(&agent, version).is_file() {
        return Ok(());
    }
    Err(EngineError::Validation(format!(
        "{} {version}, which the profile {} runs, is not installed: install it in Settings → \
         Agent profiles, or clear the profile's version",
        profile.kind.default_command().title,
        profile.name
    )))
}

/// [`check_pinned`] where the task's agent runs on this machine (local and container
/// executors); on an SSH executor's build host the version is that host's (`agent.install`
/// with the executor), and a start without it there fails saying so.
pub(crate) async fn check_pinned_for(
    inner: &Inner,
    profile: &AgentProfile,
    repository_ids: &[kandev_domain::RepositoryId],
) -> Result<()> {
    if profile.agent_version.is_none() {
        return Ok(());
    }
    if let Some(id) = repository_ids.first() {
        let repository = inner.store.get_repository(id).await?;
        if matches!(crate::sites::placement(inner, &repository).await?, Placement::Ssh { .. }) {
            return Ok(());
        }
    }
    check_pinned(inner, profile)
}

/// A profile as saved: a version only without a command of its own, exact, of a kind Kandev
/// installs. Not necessarily installed yet, nor here (an SSH executor's host may have it):
/// `agent.profile.*` says `installed: false`, and a launch where it is missing is refused.
pub(crate) fn check_profile(profile: &AgentProfile) -> Result<()> {
    let Some(version) = &profile.agent_version else { return Ok(()) };
    if !profile.command.is_empty() {
        return Err(EngineError::Validation(
            "a profile with a command of its own cannot name a version of its agent: clear one \
             of them"
                .into(),
        ));
    }
    exact_version(version)?;
    package_of(profile.kind).map(|_| ())
}

impl From<InstallError> for EngineError {
    fn from(err: InstallError) -> Self {
        match err {
            InstallError::BadVersion(_) => EngineError::Validation(err.to_string()),
            InstallError::NotInstalled { .. } | InstallError::NoSuchVersion { .. } => {
                EngineError::NotFound(err.to_string())
            }
            InstallError::NpmMissing
            | InstallError::Npm { .. }
            | InstallError::TimedOut { .. }
            | InstallError::Io { .. } => EngineError::Unavailable(err.to_string()),
        }
    }
}
