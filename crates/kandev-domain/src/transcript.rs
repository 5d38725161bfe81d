//! Sessions as stored, and their transcript: typed messages, turns, queued prompts.
//!
//! A message's metadata is typed per kind (`message_meta.rs`); the session's other JSON-shaped
//! fields (config options, agent info) are kept as JSON text, parsed by the store and API
//! layers at their boundaries.

use crate::message_meta::MessageMeta;
use crate::session::SessionState;
use crate::{AgentProfileId, MessageId, QueuedPromptId, SessionId, TaskId, Timestamp, TurnId};

/// The kinds of transcript message (api.md "message").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    User,
    Agent,
    Thought,
    ToolCall,
    Plan,
    Usage,
    Status,
    Error,
    PermissionRequest,
}

impl MessageKind {
    pub const ALL: [MessageKind; 9] = [
        MessageKind::User,
        MessageKind::Agent,
        MessageKind::Thought,
        MessageKind::ToolCall,
        MessageKind::Plan,
        MessageKind::Usage,
        MessageKind::Status,
        MessageKind::Error,
        MessageKind::PermissionRequest,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::User => "user",
            MessageKind::Agent => "agent",
            MessageKind::Thought => "thought",
            MessageKind::ToolCall => "tool_call",
            MessageKind::Plan => "plan",
            MessageKind::Usage => "usage",
            MessageKind::Status => "status",
            MessageKind::Error => "error",
            MessageKind::PermissionRequest => "permission_request",
        }
    }

    pub fn parse(value: &str) -> Option<MessageKind> {
        MessageKind::ALL.into_iter().find(|k| k.as_str() == value)
    }
}

/// One transcript entry. `seq` increases strictly within a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: MessageId,
    pub session_id: SessionId,
    pub turn_id: Option<TurnId>,
    pub seq: i64,
    pub content: String,
    /// What it carries besides its text; its variant is the message's kind.
    pub meta: MessageMeta,
    pub client_message_id: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Message {
    pub fn kind(&self) -> MessageKind {
        self.meta.kind()
    }
}

/// The error shown on a session until it is cleared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastError {
    /// Machine-readable, e.g. `agent_exited` or `workflow_context_reset_failed`.
    pub code: String,
    /// Short, human, says what to do.
    pub message: String,
    /// JSON text with extra facts (epoch, execution, exit status, stderr tail).
    pub details: Option<String>,
    pub at: Timestamp,
}

/// What a terminal-UI session's screen shows (issue 52).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TuiScreen {
    /// The agent works on a prompt.
    Working,
    /// Its input box waits for a prompt.
    Waiting,
    /// It asks whether it may do something.
    Permission,
    /// None of its agent's rules matched (a login screen, a dialog, an agent without rules).
    Unknown,
}

impl TuiScreen {
    pub const ALL: [TuiScreen; 4] =
        [TuiScreen::Working, TuiScreen::Waiting, TuiScreen::Permission, TuiScreen::Unknown];

    pub fn as_str(self) -> &'static str {
        match self {
            TuiScreen::Working => "working",
            TuiScreen::Waiting => "waiting",
            TuiScreen::Permission => "permission",
            TuiScreen::Unknown => "unknown",
        }
    }

    pub fn parse(value: &str) -> Option<TuiScreen> {
        TuiScreen::ALL.into_iter().find(|s| s.as_str() == value)
    }
}

/// An agent session of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: SessionId,
    pub task_id: TaskId,
    pub agent_profile_id: Option<AgentProfileId>,
    /// The name of its agent profile once that profile was deleted (issue 52): it cannot
    /// start again until it is moved to another agent (`session.rebind`).
    pub deleted_profile: Option<String>,
    /// The name a person gave it (`session.rename`), if any.
    pub name: Option<String>,
    /// Set for a session that runs its agent's own terminal UI in a PTY instead of speaking
    /// ACP (issue 52): the agent kind whose terminal UI it runs (`Mock` runs `kandev
    /// fake-tui`).
    pub terminal_ui: Option<crate::agent::AgentKind>,
    /// What a terminal-UI session's screen shows, read by its agent's rules; `None` while no
    /// program runs (or before it first drew).
    pub tui_screen: Option<TuiScreen>,
    pub state: SessionState,
    /// Persisted fencing counter (architecture.md "Epochs").
    pub epoch: i64,
    /// The ACP session id of the live conversation, if any.
    pub acp_session_id: Option<String>,
    /// The ACP session id a later execution can `session/load`.
    pub resume_token: Option<String>,
    pub session_mode: Option<String>,
    pub model: Option<String>,
    /// JSON object text: config option id -> value.
    pub config_options: String,
    pub plan_mode: bool,
    /// The latest usage the agent reported, if any.
    pub context_window: Option<crate::message_meta::UsageMeta>,
    pub last_error: Option<LastError>,
    pub auto_run: bool,
    /// JSON text `{name, version}` from the agent's `initialize`.
    pub agent_info: Option<String>,
    /// The working directory the agent runs in.
    pub cwd: String,
    /// Its number among the task's attempts (issue 48), each working in worktrees of its
    /// own; `None` for a session in the task's worktrees.
    pub attempt: Option<u32>,
    /// JSON array text: the agent's slash commands from its latest
    /// `available_commands_update`, `[{name, description, input_hint}]` (issue 18).
    pub available_commands: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A turn as stored: when it ran, how it ended, and the token usage the agent reported in it
/// (issue 18).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnRecord {
    pub id: TurnId,
    pub session_id: SessionId,
    pub epoch: i64,
    pub started_at: Timestamp,
    pub completed_at: Option<Timestamp>,
    pub stop_reason: Option<String>,
    /// JSON object text: `context` (`{used, size, cost}`, the latest `usage_update` of the
    /// turn) and `tokens` (`{input_tokens, output_tokens, ..., total_tokens}`, from the
    /// prompt's answer), each present when the agent reported it.
    pub usage: Option<String>,
}

/// A prompt waiting for the current turn to end (lifecycle section B).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedPrompt {
    pub id: QueuedPromptId,
    pub session_id: SessionId,
    pub position: i64,
    pub content: String,
    pub client_message_id: Option<String>,
    /// `user` or `workflow`.
    pub queued_by: String,
    pub created_at: Timestamp,
    /// Files sent with it (issue 18).
    pub attachments: Vec<crate::attachment::AttachmentRef>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_kinds_round_trip() {
        for k in MessageKind::ALL {
            assert_eq!(MessageKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(MessageKind::parse("chunk"), None);
    }
}
