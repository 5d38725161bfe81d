//! MCP credentials of agent sessions: one token per session *and epoch*, minted when an
//! execution starts (or a live context reset opens a new conversation in the same process),
//! handed to the agent in ACP `mcpServers`, and checked on every `/mcp` request against the
//! session's persisted epoch, so a stale agent process (after a reset, a resume or a restart)
//! cannot act on the board.
//!
//! Tokens are kept only as SHA-256 hashes: in memory, and in the store (`mcp_tokens`, written
//! in the transaction that starts the execution, or before a live reset hands the next
//! epoch's token over), so the agent of a session re-adopted after a restart (issue 20) keeps
//! working; startup reconciliation deletes the tokens of every session it does not re-adopt
//! (their agents are gone). A token is never logged, never stored in plain text and never
//! shown; `Debug` of anything holding one masks it.

use std::collections::HashMap;
use std::sync::Mutex;

use kandev_domain::agent::{AgentKind, EnvVar, McpServerConfig, McpTransport};
use kandev_domain::{SessionId, TaskId};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::config::AgentCommand;
use crate::launcher::LaunchSpec;

/// What every session token starts with (`Authorization: Bearer kst_…`).
pub const SESSION_TOKEN_PREFIX: &str = "kst_";

/// The name of Kandev's own server in the agent's `mcpServers`.
pub const SERVER_NAME: &str = "kandev";

/// The env variable the stdio bridge reads its token from (never an argument: arguments are
/// visible to every user of the machine).
pub const BRIDGE_TOKEN_ENV: &str = "KANDEV_MCP_TOKEN";

/// How many agents in a row may start agents (issue 38 item 8). A task's depth is how many
/// agents led to it: 0 for a task a person created, and a task an agent creates is its own
/// task's depth + 1. An agent may make an agent run on a task (create it with `start_agent`
/// or in a step that starts its agent, or move it into such a step) only while the task's
/// depth is at most this; deeper tasks are created without an agent and a person starts them.
pub const MAX_AGENT_DEPTH: u32 = 3;

/// Refuses an agent making an agent run on a task `depth` agents deep, past
/// [`MAX_AGENT_DEPTH`].
pub fn check_agent_depth(depth: u32) -> Result<(), crate::EngineError> {
    if depth <= MAX_AGENT_DEPTH {
        return Ok(());
    }
    Err(crate::EngineError::Forbidden(format!(
        "agents started by agents nest at most {MAX_AGENT_DEPTH} levels and this task is at \
         level {depth}: an agent may create it only without starting its agent, in a step that does \
         not start an agent; a person can start its agent"
    )))
}

/// The session a valid session token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSession {
    pub session_id: SessionId,
    pub task_id: TaskId,
    pub epoch: i64,
}

/// Why a session token was refused (`401` on `/mcp`). The messages never contain the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpRefusal {
    #[error(
        "unknown session token: it was never issued, or its agent did not survive a server \
         restart; the agent gets a new one when its session is resumed"
    )]
    Unknown,
    #[error(
        "stale session token: session {session_id} moved on to a newer execution (token epoch \
         {token_epoch}, current epoch {current_epoch}) after a reset, resume or restart"
    )]
    StaleEpoch { session_id: SessionId, token_epoch: i64, current_epoch: i64 },
    #[error("session token of a deleted session ({session_id})")]
    SessionGone { session_id: SessionId },
}

impl McpRefusal {
    /// The session the refused token was issued for, when known (for the log line).
    pub fn session_id(&self) -> Option<&SessionId> {
        match self {
            McpRefusal::Unknown => None,
            McpRefusal::StaleEpoch { session_id, .. } | McpRefusal::SessionGone { session_id } => {
                Some(session_id)
            }
        }
    }
}

/// What an agent is handed to reach Kandev's MCP server: the endpoint, its token, and the
/// stdio bridge for agents without `mcpCapabilities.http`.
#[derive(Clone)]
pub struct McpOffer {
    pub url: String,
    token: String,
    pub bridge: Option<AgentCommand>,
}

impl std::fmt::Debug for McpOffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpOffer")
            .field("url", &self.url)
            .field("token", &"********")
            .field("bridge", &self.bridge)
            .finish()
    }
}

impl McpOffer {
    /// The token's hash as stored (`mcp_tokens.token_hash`).
    pub(crate) fn stored_hash(&self) -> String {
        stored_hash(&self.token)
    }

    /// The token (for scrubbing it from the agent's stderr; never log it).
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// The ACP `McpServer` entries for an agent: the http form when it advertises
    /// `mcpCapabilities.http`, else the stdio bridge (token in its env), else nothing.
    pub fn servers(&self, agent_takes_http: bool) -> Vec<Value> {
        if agent_takes_http {
            return vec![json!({
                "type": "http",
                "name": SERVER_NAME,
                "url": self.url,
                "headers": [{ "name": "Authorization", "value": format!("Bearer {}", self.token) }],
            })];
        }
        let Some(bridge) = &self.bridge else { return vec![] };
        let mut args = bridge.args.clone();
        args.extend(["mcp-bridge".to_owned(), "--url".to_owned(), self.url.clone()]);
        vec![json!({
            "name": SERVER_NAME,
            "command": bridge.program,
            "args": args,
            "env": [{ "name": BRIDGE_TOKEN_ENV, "value": self.token }],
        })]
    }
}

/// Which MCP transports an agent takes besides stdio (its `mcpCapabilities`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct McpCaps {
    pub http: bool,
    pub sse: bool,
}

impl McpCaps {
    fn takes(self, transport: McpTransport) -> bool {
        match transport {
            McpTransport::Http => self.http,
            McpTransport::Sse => self.sse,
        }
    }
}

/// A profile's extra MCP servers as ACP `McpServer` entries (handed after Kandev's own), and
/// the names of the remote ones left out because the agent does not advertise their
/// transport. The entries hold secrets (env and header values): never log them.
pub fn profile_servers(servers: &[McpServerConfig], caps: McpCaps) -> (Vec<Value>, Vec<String>) {
    let pairs = |vars: &[EnvVar]| -> Vec<Value> {
        vars.iter().map(|v| json!({ "name": v.name, "value": v.value })).collect()
    };
    let mut entries = vec![];
    let mut left_out = vec![];
    for server in servers {
        match server {
            McpServerConfig::Stdio { name, command, args, env } => entries.push(json!({
                "name": name,
                "command": command,
                "args": args,
                "env": pairs(env),
            })),
            McpServerConfig::Remote { name, transport, url, headers } if caps.takes(*transport) => {
                entries.push(json!({
                    "type": transport.as_str(),
                    "name": name,
                    "url": url,
                    "headers": pairs(headers),
                }));
            }
            McpServerConfig::Remote { name, .. } => left_out.push(name.clone()),
        }
    }
    (entries, left_out)
}

/// Adds what an agent of `kind` needs at launch for the MCP servers handed to it to reach its
/// model (`kandev_acp::quirks::mcp_launch`; Qwen Code's deferred tools, issue 51): arguments
/// after the command's, and variables the profile does not set itself.
pub(crate) fn with_launch_quirk(kind: AgentKind, spec: &mut LaunchSpec) {
    let quirk = kandev_acp::quirks::mcp_launch(kind.as_str());
    spec.args.extend(quirk.args.iter().map(|a| (*a).to_owned()));
    for (name, value) in quirk.env {
        if !spec.env.iter().any(|(set, _)| set == name) {
            spec.env.push(((*name).to_owned(), (*value).to_owned()));
        }
    }
}

/// The env and header values of a profile's MCP servers: secrets the agent's stderr is
/// scrubbed of.
pub(crate) fn server_secrets(servers: &[McpServerConfig]) -> Vec<String> {
    servers
        .iter()
        .flat_map(|s| match s {
            McpServerConfig::Stdio { env, .. } => env.iter(),
            McpServerConfig::Remote { headers, .. } => headers.iter(),
        })
        .map(|v| v.value.clone())
        .collect()
}

/// A minted token's session and epoch, found by the token's hash.
struct Grant {
    session_id: SessionId,
    epoch: i64,
}

/// The engine's MCP endpoint and the hashes of the tokens it minted.
#[derive(Default)]
pub(crate) struct McpTokens {
    grants: Mutex<HashMap<[u8; 32], Grant>>,
    /// Where agents reach `/mcp` (set by the server once it listens); `None`: no MCP.
    url: Mutex<Option<String>>,
    /// A listener of the server's that serves `/mcp` and nothing else: where a task
    /// container's MCP relay leads (never the whole API).
    relay_target: Mutex<Option<std::net::SocketAddr>>,
}

/// A `std` lock that survives a panic elsewhere (the maps stay usable).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A token's SHA-256 in hex, as the store keeps it.
pub(crate) fn stored_hash(token: &str) -> String {
    hash(token).iter().map(|b| format!("{b:02x}")).collect()
}

impl McpTokens {
    pub fn set_url(&self, url: Option<String>) {
        *lock(&self.url) = url;
    }

    pub fn set_relay_target(&self, target: Option<std::net::SocketAddr>) {
        *lock(&self.relay_target) = target;
    }

    /// Where a task container's MCP relay leads (`None`: no MCP for containers).
    pub(crate) fn relay_target(&self) -> Option<std::net::SocketAddr> {
        *lock(&self.relay_target)
    }

    /// The port of this server's MCP endpoint on 127.0.0.1 (`None` while it serves none): a
    /// task container's relay listens on the same port there.
    pub(crate) fn port(&self) -> Option<u16> {
        let url = lock(&self.url).clone()?;
        let authority = url.strip_prefix("http://")?.split('/').next()?;
        authority.rsplit_once(':')?.1.parse().ok()
    }

    /// Mints the token of `session_id` at `epoch`, or `None` while the server serves no MCP.
    /// Tokens of older epochs of the session are forgotten, except the one just before (a
    /// live reset mints the next epoch's token while the current one is still in use).
    pub fn offer(
        &self,
        session_id: &SessionId,
        epoch: i64,
        bridge: Option<AgentCommand>,
    ) -> Option<McpOffer> {
        let url = lock(&self.url).clone()?;
        let token = format!(
            "{SESSION_TOKEN_PREFIX}{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let mut grants = lock(&self.grants);
        grants.retain(|_, g| g.session_id != *session_id || g.epoch >= epoch - 1);
        grants.insert(hash(&token), Grant { session_id: session_id.clone(), epoch });
        Some(McpOffer { url, token, bridge })
    }

    /// The session and epoch a token was minted for by this server (the store knows those
    /// of earlier ones: `Store::mcp_grant`).
    pub fn grant(&self, token: &str) -> Option<(SessionId, i64)> {
        lock(&self.grants).get(&hash(token)).map(|g| (g.session_id.clone(), g.epoch))
    }

    /// Remembers a grant found in the store.
    pub fn remember(&self, token: &str, session_id: &SessionId, epoch: i64) {
        lock(&self.grants).insert(hash(token), Grant { session_id: session_id.clone(), epoch });
    }

    /// Forgets every token of a session (it was deleted).
    pub fn forget(&self, session_id: &SessionId) {
        lock(&self.grants).retain(|_, g| g.session_id != *session_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(args: &[&str], env: &[(&str, &str)]) -> LaunchSpec {
        LaunchSpec {
            program: "agent".to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: env.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect(),
            cwd: std::path::PathBuf::from("/work"),
            builtin_mock: None,
            secrets: vec![],
            secret_names: vec![],
        }
    }

    #[test]
    fn i51_qwen_gets_its_mcp_tools_declared_and_a_profiles_own_value_wins() {
        let mut qwen = spec(&["--acp"], &[("OPENAI_MODEL", "m")]);
        with_launch_quirk(AgentKind::Qwen, &mut qwen);
        assert_eq!(qwen.args, ["--acp", "--exclude-tools", "tool_search", "tool_call"]);
        let blocking = ("QWEN_CODE_LEGACY_MCP_BLOCKING".to_owned(), "1".to_owned());
        assert_eq!(qwen.env, [("OPENAI_MODEL".to_owned(), "m".to_owned()), blocking]);

        let mut own = spec(&["--acp"], &[("QWEN_CODE_LEGACY_MCP_BLOCKING", "0")]);
        with_launch_quirk(AgentKind::Qwen, &mut own);
        assert_eq!(own.env, [("QWEN_CODE_LEGACY_MCP_BLOCKING".to_owned(), "0".to_owned())]);

        for kind in [AgentKind::Kilo, AgentKind::OpenCode, AgentKind::Custom] {
            let mut other = spec(&["acp"], &[]);
            with_launch_quirk(kind, &mut other);
            assert_eq!(other, spec(&["acp"], &[]), "{kind:?}");
        }
    }

    #[test]
    fn i38_8_agents_start_agents_down_to_the_depth_limit() {
        for depth in 0..=MAX_AGENT_DEPTH {
            assert!(check_agent_depth(depth).is_ok(), "{depth}");
        }
        let refused = check_agent_depth(MAX_AGENT_DEPTH + 1).unwrap_err().to_string();
        assert!(refused.contains("at most 3 levels") && refused.contains("level 4"), "{refused}");
    }

    #[test]
    fn a_token_is_found_by_its_hash_and_older_epochs_are_dropped() {
        let tokens = McpTokens::default();
        let session = SessionId::new("s1");
        assert!(tokens.offer(&session, 1, None).is_none(), "no url: no MCP");
        tokens.set_url(Some("http://127.0.0.1:1/mcp".into()));
        let first = tokens.offer(&session, 1, None).unwrap();
        assert_eq!(tokens.grant(&first.token), Some((session.clone(), 1)));
        let second = tokens.offer(&session, 2, None).unwrap();
        let third = tokens.offer(&session, 3, None).unwrap();
        assert_eq!(tokens.grant(&first.token), None, "two epochs back is forgotten");
        assert_eq!(tokens.grant(&second.token), Some((session.clone(), 2)));
        assert_eq!(tokens.grant(&third.token), Some((session.clone(), 3)));
        assert!(!format!("{third:?}").contains(&third.token), "Debug masks the token");
        tokens.forget(&session);
        assert_eq!(tokens.grant(&third.token), None);
    }

    #[test]
    fn profile_servers_keep_their_form_and_remote_ones_need_the_agents_transport() {
        let secret = vec![EnvVar::plain("TOKEN", "s3cret")];
        let servers = [
            McpServerConfig::Stdio {
                name: "fs".into(),
                command: "mcp-fs".into(),
                args: vec!["--root".into(), "/w".into()],
                env: secret.clone(),
            },
            McpServerConfig::Remote {
                name: "docs".into(),
                transport: McpTransport::Http,
                url: "http://127.0.0.1:9/mcp".into(),
                headers: secret.clone(),
            },
            McpServerConfig::Remote {
                name: "old".into(),
                transport: McpTransport::Sse,
                url: "http://127.0.0.1:9/sse".into(),
                headers: vec![],
            },
        ];
        let stdio = json!({"name": "fs", "command": "mcp-fs", "args": ["--root", "/w"],
                           "env": [{"name": "TOKEN", "value": "s3cret"}]});
        let http = json!({"type": "http", "name": "docs", "url": "http://127.0.0.1:9/mcp",
                          "headers": [{"name": "TOKEN", "value": "s3cret"}]});
        let sse = json!({"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse",
                         "headers": []});
        let all = profile_servers(&servers, McpCaps { http: true, sse: true });
        assert_eq!(all, (vec![stdio.clone(), http.clone(), sse], vec![]));
        let http_only = profile_servers(&servers, McpCaps { http: true, sse: false });
        assert_eq!(http_only, (vec![stdio.clone(), http], vec!["old".to_owned()]));
        let stdio_only = profile_servers(&servers, McpCaps::default());
        assert_eq!(stdio_only, (vec![stdio], vec!["docs".to_owned(), "old".to_owned()]));
    }

    #[test]
    fn agents_without_http_get_the_bridge_with_the_token_in_its_env() {
        let tokens = McpTokens::default();
        tokens.set_url(Some("http://127.0.0.1:1/mcp".into()));
        let bridge = AgentCommand { program: "/bin/kandev".into(), args: vec![], flags: vec![] };
        let offer = tokens.offer(&SessionId::new("s"), 1, Some(bridge)).unwrap();
        let http = &offer.servers(true)[0];
        assert_eq!(http["type"], "http");
        assert_eq!(http["headers"][0]["value"], format!("Bearer {}", offer.token));
        let stdio = &offer.servers(false)[0];
        assert_eq!(stdio["command"], "/bin/kandev");
        assert_eq!(stdio["args"], json!(["mcp-bridge", "--url", "http://127.0.0.1:1/mcp"]));
        assert_eq!(stdio["env"][0]["value"], offer.token.as_str());
        assert!(!stdio["args"].to_string().contains(&offer.token));
    }
}
