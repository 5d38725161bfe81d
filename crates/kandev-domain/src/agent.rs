//! Agent profiles: which agent command runs a task, with which model, mode and approvals.

use crate::{AgentProfileId, Timestamp};

/// The kinds of agent Kandev knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentKind {
    /// The built-in deterministic mock agent (`kandev mock-agent`).
    Mock,
    Claude,
    Codex,
    Gemini,
    OpenCode,
    /// Qwen Code (`qwen --acp`).
    Qwen,
    /// Kilo Code's CLI (`kilo acp`).
    Kilo,
    /// GitHub Copilot CLI (`copilot --acp`).
    Copilot,
    /// Augment's Auggie (`auggie --acp`).
    Auggie,
    /// Any command that speaks ACP over stdio.
    Custom,
}

impl AgentKind {
    pub const ALL: [AgentKind; 10] = [
        AgentKind::Mock,
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::OpenCode,
        AgentKind::Qwen,
        AgentKind::Kilo,
        AgentKind::Copilot,
        AgentKind::Auggie,
        AgentKind::Custom,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Mock => "mock",
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Gemini => "gemini",
            AgentKind::OpenCode => "opencode",
            AgentKind::Qwen => "qwen",
            AgentKind::Kilo => "kilo",
            AgentKind::Copilot => "copilot",
            AgentKind::Auggie => "auggie",
            AgentKind::Custom => "custom",
        }
    }

    pub fn parse(value: &str) -> Option<AgentKind> {
        AgentKind::ALL.into_iter().find(|k| k.as_str() == value)
    }

    /// The command a profile of this kind runs when it names none, the npm package it comes
    /// from and how to log in: the one table the engine starts agents from, `agent.install`
    /// installs from and `agent.kinds` shows. `Mock` is this very binary (`kandev
    /// mock-agent`; the engine runs the path it was configured with), `Custom` has no default
    /// (its profile must name a command).
    pub fn default_command(self) -> DefaultCommand {
        use AgentKind as K;
        let (title, program, args, package, login): (_, _, &[&str], _, _) = match self {
            K::Mock => ("Mock agent", "kandev", &["mock-agent"], None, "no login needed"),
            K::Claude => (
                "Claude Code",
                "claude-agent-acp",
                &[],
                Some("@agentclientprotocol/claude-agent-acp"),
                "run `claude-agent-acp --cli auth login`, or set ANTHROPIC_API_KEY in the profile's env",
            ),
            K::Codex => (
                "Codex",
                "codex-acp",
                &[],
                Some("@zed-industries/codex-acp"),
                "set OPENAI_API_KEY in the profile's env, or log in with `codex login`",
            ),
            K::Gemini => (
                "Gemini CLI",
                "gemini",
                &["--acp"],
                Some("@google/gemini-cli"),
                "run `gemini` and log in with Google, or set GEMINI_API_KEY in the profile's env",
            ),
            K::OpenCode => {
                ("OpenCode", "opencode", &["acp"], Some("opencode-ai"), "run `opencode auth login`")
            }
            K::Qwen => (
                "Qwen Code",
                "qwen",
                &["--acp"],
                Some("@qwen-code/qwen-code"),
                "run `qwen` and log in with /auth, or set OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL in the profile's env",
            ),
            K::Kilo => {
                ("Kilo Code", "kilo", &["acp"], Some("@kilocode/cli"), "run `kilo auth login`")
            }
            K::Copilot => (
                "GitHub Copilot CLI",
                "copilot",
                &["--acp"],
                Some("@github/copilot"),
                "run `copilot login`, or set COPILOT_GITHUB_TOKEN in the profile's env",
            ),
            K::Auggie => (
                "Auggie",
                "auggie",
                &["--acp"],
                Some("@augmentcode/auggie"),
                "run `auggie login`, or set AUGMENT_SESSION_AUTH (what `auggie token print` prints) in the profile's env",
            ),
            K::Custom => ("Custom ACP agent", "", &[], None, "see the agent's documentation"),
        };
        DefaultCommand { title, program, args, package, login }
    }
}

impl AgentKind {
    /// The agent's own terminal UI (issue 52): the program a terminal-UI session runs in a
    /// PTY, its arguments, and the npm package it comes from (not always the ACP agent's:
    /// Claude Code's ACP adapter is another package than `claude`). `Mock` is `kandev
    /// fake-tui` (the engine runs its configured binary); `Custom` has none Kandev knows.
    pub fn terminal_ui(self) -> Option<TerminalUi> {
        let (program, args, package): (_, &'static [&'static str], _) = match self {
            AgentKind::Mock => ("kandev", &["fake-tui"], None),
            AgentKind::Claude => ("claude", &[], Some("@anthropic-ai/claude-code")),
            AgentKind::Codex => ("codex", &[], Some("@openai/codex")),
            AgentKind::Gemini => ("gemini", &[], Some("@google/gemini-cli")),
            AgentKind::OpenCode => ("opencode", &[], Some("opencode-ai")),
            AgentKind::Qwen => ("qwen", &[], Some("@qwen-code/qwen-code")),
            AgentKind::Kilo => ("kilo", &[], Some("@kilocode/cli")),
            AgentKind::Copilot => ("copilot", &[], Some("@github/copilot")),
            AgentKind::Auggie => ("auggie", &[], Some("@augmentcode/auggie")),
            AgentKind::Custom => return None,
        };
        Some(TerminalUi { program, args, package })
    }
}

/// A kind's own terminal UI ([`AgentKind::terminal_ui`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalUi {
    pub program: &'static str,
    pub args: &'static [&'static str],
    /// The npm package that installs it; `None` for the built-in fake.
    pub package: Option<&'static str>,
}

/// A kind's default command ([`AgentKind::default_command`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultCommand {
    /// The agent's name for people ("Qwen Code").
    pub title: &'static str,
    /// Empty for `Custom`.
    pub program: &'static str,
    pub args: &'static [&'static str],
    /// The npm package the agent installs from (`agent.install`); `None` for `Mock` (built
    /// in) and `Custom`.
    pub package: Option<&'static str>,
    /// How to log in, for people.
    pub login: &'static str,
}

impl DefaultCommand {
    /// The command line as people type it (`gemini --acp`).
    pub fn display(&self) -> String {
        std::iter::once(self.program).chain(self.args.iter().copied()).collect::<Vec<_>>().join(" ")
    }

    /// How to install it, for people.
    pub fn install(&self) -> String {
        match (self.package, self.program) {
            (Some(package), _) => {
                format!(
                    "install it in Settings → Agent profiles, or run `npm install -g {package}`"
                )
            }
            (None, "kandev") => "built in".to_owned(),
            (None, _) => "any command that speaks ACP over stdio".to_owned(),
        }
    }
}

/// One environment variable of a profile: a value, or a reference to a stored secret
/// (issue 50; `secret` names it, `value` is empty), whose value is put in when the process
/// starts. Values may be secrets too: the API never shows them, and `Debug` does not either.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
    pub secret: Option<String>,
}

impl EnvVar {
    /// A variable with its value.
    pub fn plain(name: impl Into<String>, value: impl Into<String>) -> EnvVar {
        EnvVar { name: name.into(), value: value.into(), secret: None }
    }

    /// A variable given the value of the secret `secret` when the process starts.
    pub fn secret(name: impl Into<String>, secret: impl Into<String>) -> EnvVar {
        EnvVar { name: name.into(), value: String::new(), secret: Some(secret.into()) }
    }
}

impl std::fmt::Debug for EnvVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvVar")
            .field("name", &self.name)
            .field("value", &"<hidden>")
            .field("secret", &self.secret)
            .finish()
    }
}

/// How a remote MCP server is reached (ACP `McpServer` `type`): an agent is handed one only
/// when it advertises the transport (`mcpCapabilities.http` / `.sse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpTransport {
    /// Streamable HTTP.
    Http,
    /// The older HTTP+SSE transport.
    Sse,
}

impl McpTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            McpTransport::Http => "http",
            McpTransport::Sse => "sse",
        }
    }

    pub fn parse(s: &str) -> Option<McpTransport> {
        match s {
            "http" => Some(McpTransport::Http),
            "sse" => Some(McpTransport::Sse),
            _ => None,
        }
    }
}

/// An MCP server of a profile, handed to its agent next to Kandev's own. Env and header
/// values may be secrets, like profile env: the API never shows them, `Debug` neither.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServerConfig {
    /// A process the agent starts and talks to over stdio.
    Stdio { name: String, command: String, args: Vec<String>, env: Vec<EnvVar> },
    /// A server the agent reaches at `url`, sending `headers` (names and secret values).
    Remote { name: String, transport: McpTransport, url: String, headers: Vec<EnvVar> },
}

impl McpServerConfig {
    pub fn name(&self) -> &str {
        match self {
            McpServerConfig::Stdio { name, .. } | McpServerConfig::Remote { name, .. } => name,
        }
    }
}

/// How to run an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProfile {
    pub id: AgentProfileId,
    pub name: String,
    pub kind: AgentKind,
    /// Program to run; empty means the kind's default command.
    pub command: String,
    /// The version of the kind's agent that Kandev installed (`agent.install`) this profile
    /// runs; `None` runs the command found on `PATH`. Only with an empty `command`.
    pub agent_version: Option<String>,
    pub args: Vec<String>,
    pub env: Vec<EnvVar>,
    pub model: Option<String>,
    pub mode: Option<String>,
    pub auto_approve: bool,
    /// Extra MCP servers for the agent, besides Kandev's own.
    pub mcp_servers: Vec<McpServerConfig>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_never_show_in_debug_output() {
        let var = EnvVar::plain("API_KEY", "sk-0123456789xy");
        let shown = format!("{var:?}");
        assert!(shown.contains("API_KEY") && !shown.contains("0123"), "{shown}");
    }

    #[test]
    fn mcp_server_secrets_never_show_in_debug_output() {
        let secret = |value: &str| vec![EnvVar::plain("TOKEN", value)];
        let servers = [
            McpServerConfig::Stdio {
                name: "fs".into(),
                command: "mcp-fs".into(),
                args: vec![],
                env: secret("env-secret-1234"),
            },
            McpServerConfig::Remote {
                name: "docs".into(),
                transport: McpTransport::Http,
                url: "http://127.0.0.1:9/mcp".into(),
                headers: secret("header-secret-5678"),
            },
        ];
        let shown = format!("{servers:?}");
        assert!(shown.contains("TOKEN") && !shown.contains("secret-"), "{shown}");
    }

    #[test]
    fn default_commands_are_the_ones_agents_speak_acp_with() {
        let gemini = AgentKind::Gemini.default_command();
        assert_eq!((gemini.program, gemini.args), ("gemini", &["--acp"][..]));
        assert_eq!(gemini.display(), "gemini --acp");
        assert_eq!(AgentKind::OpenCode.default_command().display(), "opencode acp");
        assert_eq!(AgentKind::Mock.default_command().display(), "kandev mock-agent");
        assert_eq!(AgentKind::Custom.default_command().program, "");
    }

    #[test]
    fn kinds_round_trip() {
        for k in AgentKind::ALL {
            assert_eq!(AgentKind::parse(k.as_str()), Some(k));
        }
    }
}
