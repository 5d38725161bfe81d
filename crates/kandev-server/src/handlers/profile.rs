//! `agent.profile.*` and `agent.kinds`: how agents are run. Env values (and the env and
//! header values of the profile's MCP servers) are never shown: the API shows
//! [`SECRET_MASK`] instead, and an update that sends the mask back keeps the value.

use kandev_api_types::requests::{
    AgentInstall, AgentVersionsQuery, ById, Empty, Page, ProfileCreate, ProfileUpdate,
};
use kandev_api_types::responses::{
    AgentInstalled, AgentKindInfo, AgentKinds, AgentUninstalled, AgentVersions, Deleted,
    InstalledAgentVersion, ProfileSaved, Profiles,
};
use kandev_api_types::{AgentProfileDto, EnvVarDto, SECRET_MASK};
use kandev_domain::agent::{AgentKind, AgentProfile, EnvVar};
use kandev_domain::{AgentProfileId, validate};
use kandev_engine::program::{command_found, on_path};
use kandev_store::{NewProfile, ProfilePatch, TaskFilter};
use serde_json::Value;
use std::collections::HashMap;

use super::paginate;
use super::profile_mcp::checked_mcp_servers;
use crate::{ApiError, AppState};

pub async fn list(s: &AppState, p: Page) -> Result<Profiles, ApiError> {
    let (page, next_cursor) = paginate(s.store().list_profiles().await?, &p)?;
    Ok(Profiles { profiles: page.iter().map(AgentProfileDto::from).collect(), next_cursor })
}

pub async fn create(s: &AppState, p: ProfileCreate) -> Result<ProfileSaved, ApiError> {
    let kind = AgentKind::from(p.kind);
    if kind == AgentKind::Custom && p.command.trim().is_empty() {
        return Err(ApiError::validation("command is required for a custom agent"));
    }
    let new = NewProfile {
        name: validate::name("name", &p.name)?,
        kind,
        command: p.command.trim().to_owned(),
        agent_version: p.agent_version.map(|v| v.trim().to_owned()),
        args: p.args,
        env: checked_env(p.env, &[])?,
        model: p.model,
        mode: p.mode,
        auto_approve: p.auto_approve,
        mcp_servers: checked_mcp_servers(p.mcp_servers, &[])?,
    };
    let profile = s.engine().create_profile(&new).await?;
    Ok(with_install_status(s, &profile))
}

/// The profile with `installed` (its command is found; for a version, installed on this
/// machine) and, when it is not, `install` (how to install it): a profile for a missing
/// agent is allowed, but marked.
fn with_install_status(s: &AppState, profile: &AgentProfile) -> ProfileSaved {
    let (kind, command) = (profile.kind, profile.command.as_str());
    let version = profile.agent_version.as_deref();
    let installed = match (kind, command.split_whitespace().next(), version) {
        (AgentKind::Mock, None, _) => true,
        (_, Some(program), _) => command_found(program),
        (_, None, Some(version)) => {
            s.engine().installed_agent_versions(kind).iter().any(|v| v == version)
        }
        (_, None, None) => on_path(kind.default_command().program),
    };
    let install = (!installed).then(|| match version {
        Some(version) => format!(
            "install {} {version} in Settings → Agent profiles",
            kind.default_command().title
        ),
        None => kind.default_command().install(),
    });
    ProfileSaved { profile: AgentProfileDto::from(profile), installed, install }
}

pub async fn update(s: &AppState, p: ProfileUpdate) -> Result<ProfileSaved, ApiError> {
    let name = p.name.as_deref().map(|n| validate::name("name", n)).transpose()?;
    let id = AgentProfileId::new(p.id);
    // Made from the profile as the engine's transaction reads it, so a masked value keeps
    // exactly the value it stands for.
    let patch = |current: &AgentProfile| -> Result<ProfilePatch, ApiError> {
        Ok(ProfilePatch {
            name,
            command: p.command.map(|c| c.trim().to_owned()),
            agent_version: p.agent_version.map(|v| v.map(|v| v.trim().to_owned())),
            args: p.args,
            env: p.env.map(|env| checked_env(env, &current.env)).transpose()?,
            model: p.model,
            mode: p.mode,
            auto_approve: p.auto_approve,
            mcp_servers: p
                .mcp_servers
                .map(|servers| checked_mcp_servers(servers, &current.mcp_servers))
                .transpose()?,
        })
    };
    let profile = s.engine().update_profile(&id, patch).await?;
    Ok(with_install_status(s, &profile))
}

pub async fn delete(s: &AppState, p: ById) -> Result<Deleted, ApiError> {
    s.engine().delete_profile(&AgentProfileId::new(&p.id)).await?;
    Ok(Deleted { deleted: true, id: p.id })
}

/// The built-in agent kinds, their default command, whether it is on `PATH`, and the version
/// the agent last reported in `initialize` (`agent_info` of the newest session that ran a
/// profile of that kind), or `null`.
pub async fn kinds(s: &AppState, _: Empty) -> Result<AgentKinds, ApiError> {
    let versions = reported_versions(s).await?;
    let kinds = AgentKind::ALL
        .into_iter()
        .map(|kind| {
            // The one table of default commands (kandev_domain), which the engine runs.
            let command = kind.default_command();
            let installed = match kind {
                AgentKind::Mock => true,
                AgentKind::Custom => false,
                _ => on_path(command.program),
            };
            let version = versions.get(&kind).map(|(_, version)| version.clone());
            AgentKindInfo {
                kind: kind.into(),
                title: command.title.to_owned(),
                command: command.display(),
                installed,
                install: command.install(),
                login: command.login.to_owned(),
                package: command.package.map(str::to_owned),
                installed_versions: s.engine().installed_agent_versions(kind),
                version,
            }
        })
        .collect();
    Ok(AgentKinds { kinds })
}

/// `agent.versions`: what Kandev installed and what the registry offers. A registry that
/// cannot be asked is not an error: the installed versions are still listed.
pub async fn versions(s: &AppState, p: AgentVersionsQuery) -> Result<AgentVersions, ApiError> {
    let found =
        s.engine().agent_versions(AgentKind::from(p.kind), p.executor_id.as_deref()).await?;
    let installed = found
        .installed
        .into_iter()
        .map(|v| InstalledAgentVersion {
            version: v.version,
            path: v.program.display().to_string(),
            profiles: v.profiles,
        })
        .collect();
    let (available, latest, registry_error) = match found.available {
        Ok(offered) => (offered.versions, offered.latest, None),
        Err(error) => (vec![], None, Some(error)),
    };
    Ok(AgentVersions {
        kind: p.kind,
        package: found.package.to_owned(),
        installed,
        available,
        latest,
        registry_error,
    })
}

/// `agent.install`: one exact version, into `$KANDEV_HOME/agents`; answers once npm is done.
pub async fn install(s: &AppState, p: AgentInstall) -> Result<AgentInstalled, ApiError> {
    let version = p.version.trim().to_owned();
    let installed = s
        .engine()
        .install_agent(AgentKind::from(p.kind), &version, p.executor_id.as_deref())
        .await?;
    Ok(AgentInstalled {
        kind: p.kind,
        version,
        path: installed.program.display().to_string(),
        already: installed.already,
    })
}

/// `agent.uninstall`: refused while a profile runs the version.
pub async fn uninstall(s: &AppState, p: AgentInstall) -> Result<AgentUninstalled, ApiError> {
    let version = p.version.trim().to_owned();
    s.engine().uninstall_agent(AgentKind::from(p.kind), &version, p.executor_id.as_deref()).await?;
    Ok(AgentUninstalled { kind: p.kind, version })
}

/// Most tasks looked at for agent versions.
const VERSION_SCAN_TASKS: i64 = 5000;

/// Per kind, the newest version an agent of that kind reported (custom commands excluded:
/// they are not one agent).
async fn reported_versions(
    s: &AppState,
) -> Result<HashMap<AgentKind, (kandev_domain::Timestamp, String)>, ApiError> {
    let profiles: HashMap<AgentProfileId, AgentKind> =
        s.store().list_profiles().await?.into_iter().map(|p| (p.id, p.kind)).collect();
    let filter =
        TaskFilter { include_archived: true, limit: VERSION_SCAN_TASKS, ..TaskFilter::default() };
    let mut versions: HashMap<AgentKind, (kandev_domain::Timestamp, String)> = HashMap::new();
    for task in s.store().list_tasks(&filter).await? {
        for session in s.store().list_sessions(&task.id).await? {
            let kind = match &session.agent_profile_id {
                Some(id) => match profiles.get(id) {
                    Some(kind) => *kind,
                    None => continue,
                },
                None => AgentKind::Mock,
            };
            let Some(version) = session.agent_info.as_deref().and_then(info_version) else {
                continue;
            };
            if kind == AgentKind::Custom {
                continue;
            }
            let newer = versions.get(&kind).is_none_or(|(at, _)| *at < session.updated_at);
            if newer {
                versions.insert(kind, (session.updated_at, version));
            }
        }
    }
    Ok(versions)
}

/// `version` of a stored `agent_info` (`{"name", "version"}`).
fn info_version(agent_info: &str) -> Option<String> {
    let info: Value = serde_json::from_str(agent_info).ok()?;
    info.get("version")?.as_str().filter(|v| !v.trim().is_empty()).map(str::to_owned)
}

/// A variable given the value of the stored secret `secret` (issue 50); `value` must be
/// empty. The secret need not exist yet: a start that cannot find it says so.
pub(crate) fn secret_reference(
    what: &str,
    i: usize,
    name: &str,
    value: &str,
    secret: &str,
) -> Result<EnvVar, ApiError> {
    if !value.is_empty() {
        return Err(ApiError::validation(format!(
            "{what} {} {name:?} has both a value and a secret; give one of them",
            i + 1
        )));
    }
    let secret = kandev_domain::secret::secret_name(secret).map_err(|e| {
        ApiError::validation(format!("{what} {} {name:?}: the secret {}", i + 1, e.problem))
    })?;
    Ok(EnvVar::secret(name, secret))
}

/// Validates the names of a profile's new env list. A value equal to [`SECRET_MASK`] keeps
/// the current value of the variable of that name (`current`: the profile's env before the
/// change; empty for a new profile, where the mask is refused).
fn checked_env(env: Vec<EnvVarDto>, current: &[EnvVar]) -> Result<Vec<EnvVar>, ApiError> {
    env.into_iter()
        .enumerate()
        .map(|(i, e)| {
            let valid = !e.name.is_empty()
                && !e.name.starts_with(|c: char| c.is_ascii_digit())
                && e.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(ApiError::validation(format!(
                    "environment variable {} {:?} is not a valid name: letters, digits and _, \
                     not starting with a digit",
                    i + 1,
                    e.name
                )));
            }
            if let Some(secret) = &e.secret {
                return secret_reference("environment variable", i, &e.name, &e.value, secret);
            }
            if e.value != SECRET_MASK {
                return Ok(EnvVar::plain(e.name, e.value));
            }
            match current.iter().find(|c| c.name == e.name) {
                Some(kept) => Ok(kept.clone()),
                None => Err(ApiError::validation(format!(
                    "environment variable {} is the mask {SECRET_MASK:?}, which keeps a current \
                     value, but the profile has no variable {}; give its value",
                    i + 1,
                    e.name
                ))),
            }
        })
        .collect()
}
