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
    /// Any command that speaks ACP over stdio.
    Custom,
}

impl AgentKind {
    pub const ALL: [AgentKind; 6] = [
        AgentKind::Mock,
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::OpenCode,
        AgentKind::Custom,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Mock => "mock",
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Gemini => "gemini",
            AgentKind::OpenCode => "opencode",
            AgentKind::Custom => "custom",
        }
    }

    pub fn parse(value: &str) -> Option<AgentKind> {
        AgentKind::ALL.into_iter().find(|k| k.as_str() == value)
    }
}

/// One environment variable of a profile. Values may be secrets: the API never shows them,
/// and `Debug` does not either.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

impl std::fmt::Debug for EnvVar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvVar").field("name", &self.name).field("value", &"<hidden>").finish()
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
    pub args: Vec<String>,
    pub env: Vec<EnvVar>,
    pub model: Option<String>,
    pub mode: Option<String>,
    pub auto_approve: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_never_show_in_debug_output() {
        let var = EnvVar { name: "API_KEY".into(), value: "sk-0123456789xy".into() };
        let shown = format!("{var:?}");
        assert!(shown.contains("API_KEY") && !shown.contains("0123"), "{shown}");
    }

    #[test]
    fn kinds_round_trip() {
        for k in AgentKind::ALL {
            assert_eq!(AgentKind::parse(k.as_str()), Some(k));
        }
    }
}
