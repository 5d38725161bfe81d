//! Agent profiles: the row (args, env and MCP servers stored as JSON), reads and writes.

use kandev_domain::agent::{AgentKind, AgentProfile, EnvVar, McpServerConfig, McpTransport};
use kandev_domain::{AgentProfileId, Timestamp};
use serde::{Deserialize, Serialize};
use sqlx::FromRow;

use crate::db::Db;
use crate::{Result, Store, StoreError, WriteTx};

/// A profile to create.
#[derive(Debug, Clone)]
pub struct NewProfile {
    pub name: String,
    pub kind: AgentKind,
    pub command: String,
    pub agent_version: Option<String>,
    pub args: Vec<String>,
    pub env: Vec<EnvVar>,
    pub model: Option<String>,
    pub mode: Option<String>,
    pub auto_approve: bool,
    pub mcp_servers: Vec<McpServerConfig>,
}

/// Fields of a profile to change; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct ProfilePatch {
    pub name: Option<String>,
    pub command: Option<String>,
    pub agent_version: Option<Option<String>>,
    pub args: Option<Vec<String>>,
    pub env: Option<Vec<EnvVar>>,
    pub model: Option<Option<String>>,
    pub mode: Option<Option<String>>,
    pub auto_approve: Option<bool>,
    pub mcp_servers: Option<Vec<McpServerConfig>>,
}

#[derive(FromRow)]
struct ProfileRow {
    id: String,
    name: String,
    kind: String,
    command: String,
    agent_version: Option<String>,
    args: String,
    env: String,
    model: Option<String>,
    mode: Option<String>,
    /// 0 or 1.
    auto_approve: i64,
    mcp_servers: String,
    created_at: i64,
    updated_at: i64,
}

/// The stored JSON form of one environment variable: a value, or a secret's name.
#[derive(Serialize, Deserialize)]
struct EnvJson {
    name: String,
    #[serde(default)]
    value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

/// The stored JSON form of one MCP server: `command` for stdio, `url` for a remote one.
#[derive(Serialize, Deserialize)]
struct McpServerJson {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    env: Vec<EnvJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transport: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    headers: Vec<EnvJson>,
}

fn vars(list: Vec<EnvJson>) -> Vec<EnvVar> {
    list.into_iter().map(|e| EnvVar { name: e.name, value: e.value, secret: e.secret }).collect()
}

fn vars_json(list: &[EnvVar]) -> Vec<EnvJson> {
    list.iter()
        .map(|e| EnvJson { name: e.name.clone(), value: e.value.clone(), secret: e.secret.clone() })
        .collect()
}

impl McpServerJson {
    fn into_config(self) -> Option<McpServerConfig> {
        match (self.command, self.url) {
            (Some(command), None) => Some(McpServerConfig::Stdio {
                name: self.name,
                command,
                args: self.args,
                env: vars(self.env),
            }),
            (None, Some(url)) => Some(McpServerConfig::Remote {
                name: self.name,
                transport: McpTransport::parse(self.transport.as_deref().unwrap_or("http"))?,
                url,
                headers: vars(self.headers),
            }),
            _ => None,
        }
    }

    fn from_config(server: &McpServerConfig) -> McpServerJson {
        let mut json = McpServerJson {
            name: server.name().to_owned(),
            command: None,
            args: vec![],
            env: vec![],
            transport: None,
            url: None,
            headers: vec![],
        };
        match server {
            McpServerConfig::Stdio { command, args, env, .. } => {
                json.command = Some(command.clone());
                json.args = args.clone();
                json.env = vars_json(env);
            }
            McpServerConfig::Remote { transport, url, headers, .. } => {
                json.transport = Some(transport.as_str().to_owned());
                json.url = Some(url.clone());
                json.headers = vars_json(headers);
            }
        }
        json
    }
}

fn mcp_servers_json(servers: &[McpServerConfig]) -> String {
    let list: Vec<McpServerJson> = servers.iter().map(McpServerJson::from_config).collect();
    serde_json::to_string(&list).unwrap_or_else(|_| "[]".into())
}

impl TryFrom<ProfileRow> for AgentProfile {
    type Error = StoreError;

    fn try_from(r: ProfileRow) -> Result<AgentProfile> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("agent profile {} {what}", r.id));
        let kind = AgentKind::parse(&r.kind).ok_or_else(|| corrupt("kind"))?;
        let args: Vec<String> = serde_json::from_str(&r.args).map_err(|_| corrupt("args"))?;
        let env: Vec<EnvJson> = serde_json::from_str(&r.env).map_err(|_| corrupt("env"))?;
        let mcp: Vec<McpServerJson> =
            serde_json::from_str(&r.mcp_servers).map_err(|_| corrupt("mcp_servers"))?;
        let mcp_servers = mcp
            .into_iter()
            .map(McpServerJson::into_config)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| corrupt("mcp_servers"))?;
        Ok(AgentProfile {
            id: AgentProfileId::new(r.id),
            name: r.name,
            kind,
            command: r.command,
            agent_version: r.agent_version,
            args,
            env: vars(env),
            model: r.model,
            mode: r.mode,
            auto_approve: r.auto_approve != 0,
            mcp_servers,
            created_at: Timestamp(r.created_at),
            updated_at: Timestamp(r.updated_at),
        })
    }
}

/// The profile `id`, or `NotFound`.
async fn get(mut db: Db<'_>, id: &str) -> Result<AgentProfile> {
    crate::sql::query_as::<ProfileRow>("SELECT * FROM agent_profiles WHERE id = ?")
        .bind(id)
        .fetch_optional(&mut db)
        .await?
        .ok_or_else(|| StoreError::not_found("agent profile", id))
        .and_then(AgentProfile::try_from)
}

fn args_json(args: &[String]) -> String {
    serde_json::Value::from(args.to_vec()).to_string()
}

fn env_json(env: &[EnvVar]) -> String {
    serde_json::to_string(&vars_json(env)).unwrap_or_else(|_| "[]".into())
}

async fn list(mut db: Db<'_>) -> Result<Vec<AgentProfile>> {
    crate::sql::query_as::<ProfileRow>("SELECT * FROM agent_profiles ORDER BY created_at, id")
        .fetch_all(&mut db)
        .await?
        .into_iter()
        .map(AgentProfile::try_from)
        .collect()
}

impl Store {
    pub async fn list_profiles(&self) -> Result<Vec<AgentProfile>> {
        list(self.db()).await
    }

    pub async fn get_profile(&self, id: &AgentProfileId) -> Result<AgentProfile> {
        get(self.db(), id.as_str()).await
    }
}

impl WriteTx {
    /// Every profile, as this transaction sees them.
    pub async fn list_profiles(&mut self) -> Result<Vec<AgentProfile>> {
        list(self.db()).await
    }

    /// A profile as this transaction sees it (to change it based on its current values).
    pub async fn profile(&mut self, id: &AgentProfileId) -> Result<AgentProfile> {
        get(self.db(), id.as_str()).await
    }

    pub async fn insert_profile(&mut self, new: &NewProfile) -> Result<AgentProfile> {
        let (id, now) = (self.new_id(), self.now().millis());
        crate::sql::query(
            "INSERT INTO agent_profiles (id, name, kind, command, agent_version, args, env, model, mode, \
             auto_approve, mcp_servers, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&id)
        .bind(&new.name)
        .bind(new.kind.as_str())
        .bind(&new.command)
        .bind(&new.agent_version)
        .bind(args_json(&new.args))
        .bind(env_json(&new.env))
        .bind(&new.model)
        .bind(&new.mode)
        .bind(new.auto_approve)
        .bind(mcp_servers_json(&new.mcp_servers))
        .bind(now)
        .bind(now)
        .execute(self.conn())
        .await?;
        get(self.db(), &id).await
    }

    pub async fn update_profile(
        &mut self,
        id: &AgentProfileId,
        patch: &ProfilePatch,
    ) -> Result<AgentProfile> {
        let current = get(self.db(), id.as_str()).await?;
        let now = self.now().millis();
        crate::sql::query(
            "UPDATE agent_profiles SET name = ?, command = ?, agent_version = ?, args = ?, env = ?, \
             model = ?, mode = ?, auto_approve = ?, mcp_servers = ?, updated_at = ? WHERE id = ?",
        )
        .bind(patch.name.as_ref().unwrap_or(&current.name))
        .bind(patch.command.as_ref().unwrap_or(&current.command))
        .bind(patch.agent_version.clone().unwrap_or(current.agent_version))
        .bind(args_json(patch.args.as_ref().unwrap_or(&current.args)))
        .bind(env_json(patch.env.as_ref().unwrap_or(&current.env)))
        .bind(patch.model.clone().unwrap_or(current.model))
        .bind(patch.mode.clone().unwrap_or(current.mode))
        .bind(patch.auto_approve.unwrap_or(current.auto_approve))
        .bind(mcp_servers_json(patch.mcp_servers.as_ref().unwrap_or(&current.mcp_servers)))
        .bind(now)
        .bind(id.as_str())
        .execute(self.conn())
        .await?;
        get(self.db(), id.as_str()).await
    }

    pub async fn delete_profile(&mut self, id: &AgentProfileId) -> Result<()> {
        // Its sessions keep its name (issue 52): they are refused a start until moved to
        // another agent, rather than running whatever a missing profile would mean.
        let name = get(self.db(), id.as_str()).await?.name;
        self.mark_profile_deleted(id, &name).await?;
        let done = crate::sql::query("DELETE FROM agent_profiles WHERE id = ?")
            .bind(id.as_str())
            .execute(self.conn())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::not_found("agent profile", id.as_str()));
        }
        Ok(())
    }

    /// Whether any profile exists yet (first-run seeding).
    pub async fn has_profiles(&mut self) -> Result<bool> {
        let count: i64 = crate::sql::query_scalar("SELECT COUNT(*) FROM agent_profiles")
            .fetch_one(self.conn())
            .await?;
        Ok(count > 0)
    }
}
