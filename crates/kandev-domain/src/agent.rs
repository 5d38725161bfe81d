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

/// One environment variable of a profile. Values may be secrets and are masked on output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
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

/// Masks a secret for display: never more than its last 2 characters, and only when long.
pub fn mask_secret(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    if chars.len() < 12 {
        return "****".to_owned();
    }
    let tail: String = chars[chars.len() - 2..].iter().collect();
    format!("****{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked() {
        assert_eq!(mask_secret("abc"), "****");
        assert_eq!(mask_secret("sk-0123456789xy"), "****xy");
        assert!(!mask_secret("sk-0123456789xy").contains("0123"));
    }

    #[test]
    fn kinds_round_trip() {
        for k in AgentKind::ALL {
            assert_eq!(AgentKind::parse(k.as_str()), Some(k));
        }
    }
}
