//! Session, message and queue objects as the API returns them.

use kandev_domain::attachment::AttachmentRef;
use kandev_domain::saved_prompt::SavedPrompt;
use kandev_domain::session::SessionState;
use kandev_domain::transcript::{
    LastError, Message, MessageKind, QueuedPrompt, Session, TuiScreen, TurnRecord,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use ts_rs::TS;

use crate::rfc3339;
use crate::transcript::MessageBodyDto;

fn json_or_null(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok()).unwrap_or(Value::Null)
}

/// A session's state (docs/lifecycle.md); `COMPLETED`, `FAILED` and `CANCELLED` end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SessionStateDto {
    Created,
    Starting,
    Running,
    WaitingForInput,
    Completed,
    Failed,
    Cancelled,
}

impl From<SessionState> for SessionStateDto {
    fn from(state: SessionState) -> Self {
        match state {
            SessionState::Created => SessionStateDto::Created,
            SessionState::Starting => SessionStateDto::Starting,
            SessionState::Running => SessionStateDto::Running,
            SessionState::WaitingForInput => SessionStateDto::WaitingForInput,
            SessionState::Completed => SessionStateDto::Completed,
            SessionState::Failed => SessionStateDto::Failed,
            SessionState::Cancelled => SessionStateDto::Cancelled,
        }
    }
}

/// The kind of a transcript message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum MessageKindDto {
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

impl From<MessageKind> for MessageKindDto {
    fn from(kind: MessageKind) -> Self {
        match kind {
            MessageKind::User => MessageKindDto::User,
            MessageKind::Agent => MessageKindDto::Agent,
            MessageKind::Thought => MessageKindDto::Thought,
            MessageKind::ToolCall => MessageKindDto::ToolCall,
            MessageKind::Plan => MessageKindDto::Plan,
            MessageKind::Usage => MessageKindDto::Usage,
            MessageKind::Status => MessageKindDto::Status,
            MessageKind::Error => MessageKindDto::Error,
            MessageKind::PermissionRequest => MessageKindDto::PermissionRequest,
        }
    }
}

/// Why a session is not running; `code` is an open set the engine names (`worktree_failed`,
/// `setup_script_failed`, `agent_auth_required`, `agent_start_failed`, `prompt_failed`, ...),
/// so it stays a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct LastErrorDto {
    pub code: String,
    pub message: String,
    pub details: Value,
    pub at: String,
}

impl From<&LastError> for LastErrorDto {
    fn from(e: &LastError) -> Self {
        LastErrorDto {
            code: e.code.clone(),
            message: e.message.clone(),
            details: json_or_null(e.details.as_deref()),
            at: rfc3339(e.at),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct SessionDto {
    pub id: String,
    pub task_id: String,
    pub agent_profile_id: Option<String>,
    /// The name of its agent profile once that profile was deleted: it starts again only
    /// after `session.rebind` moves it to another agent.
    pub deleted_profile: Option<String>,
    /// The name a person gave it (`session.rename`), if any.
    pub name: Option<String>,
    /// Set when the session runs its agent's own terminal UI in a terminal (its id is the
    /// session's: `terminal.attach`) instead of speaking ACP: the agent kind it runs.
    pub terminal_ui: Option<crate::objects::AgentKindDto>,
    /// What a terminal-UI session's screen shows; `null` while no program runs.
    pub tui_screen: Option<TuiScreenDto>,
    pub state: SessionStateDto,
    pub epoch: i64,
    /// The live agent's ACP session; `None` while no agent process runs (never started,
    /// stopped, exited).
    pub acp_session_id: Option<String>,
    /// The conversation the agent's next start loads (`session/load`): kept when the agent
    /// stops or exits, replaced only by a new conversation (rules 22, 31).
    pub resume_token: Option<String>,
    pub session_mode: Option<String>,
    pub model: Option<String>,
    pub config_options: Value,
    pub plan_mode: bool,
    pub auto_run: bool,
    pub last_error: Option<LastErrorDto>,
    /// The agent's latest usage report, if any.
    pub context_window: Option<crate::transcript::UsageMetaDto>,
    pub agent_info: Value,
    pub cwd: String,
    /// Its number among the task's attempts, each in worktrees of its own; `null` for a
    /// session in the task's worktrees.
    pub attempt: Option<u32>,
    /// The agent's slash commands (its latest `available_commands_update`).
    pub available_commands: Vec<AvailableCommandDto>,
    pub created_at: String,
    pub updated_at: String,
}

/// What a terminal-UI session's screen shows, read by its agent's rules: `working`,
/// `waiting` (for a prompt), `permission` (a question waits for an answer in the terminal),
/// or `unknown` (none of its rules matched: a login screen, a dialog, an agent without rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "lowercase")]
pub enum TuiScreenDto {
    Working,
    Waiting,
    Permission,
    Unknown,
}

impl From<TuiScreen> for TuiScreenDto {
    fn from(screen: TuiScreen) -> Self {
        match screen {
            TuiScreen::Working => TuiScreenDto::Working,
            TuiScreen::Waiting => TuiScreenDto::Waiting,
            TuiScreen::Permission => TuiScreenDto::Permission,
            TuiScreen::Unknown => TuiScreenDto::Unknown,
        }
    }
}

/// A slash command the agent offers: sent as `/name args` in a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct AvailableCommandDto {
    pub name: String,
    pub description: String,
    /// What to type after the name, when the agent says.
    pub input_hint: Option<String>,
}

fn commands_of(text: &str) -> Vec<AvailableCommandDto> {
    let list: Vec<Value> = serde_json::from_str(text).unwrap_or_default();
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    list.iter()
        .filter_map(|v| {
            Some(AvailableCommandDto {
                name: text(v, "name")?,
                description: text(v, "description").unwrap_or_default(),
                input_hint: text(v, "input_hint"),
            })
        })
        .collect()
}

impl From<&Session> for SessionDto {
    fn from(s: &Session) -> Self {
        SessionDto {
            id: s.id.to_string(),
            task_id: s.task_id.to_string(),
            agent_profile_id: s.agent_profile_id.as_ref().map(|p| p.to_string()),
            deleted_profile: s.deleted_profile.clone(),
            name: s.name.clone(),
            terminal_ui: s.terminal_ui.map(Into::into),
            tui_screen: s.tui_screen.map(Into::into),
            state: s.state.into(),
            epoch: s.epoch,
            acp_session_id: s.acp_session_id.clone(),
            resume_token: s.resume_token.clone(),
            session_mode: s.session_mode.clone(),
            model: s.model.clone(),
            config_options: json_or_null(Some(&s.config_options)),
            plan_mode: s.plan_mode,
            auto_run: s.auto_run,
            last_error: s.last_error.as_ref().map(LastErrorDto::from),
            context_window: s.context_window.as_ref().map(Into::into),
            agent_info: json_or_null(s.agent_info.as_deref()),
            cwd: s.cwd.clone(),
            attempt: s.attempt,
            available_commands: commands_of(&s.available_commands),
            created_at: rfc3339(s.created_at),
            updated_at: rfc3339(s.updated_at),
        }
    }
}

/// A saved prompt of a workspace's library (issue 18): `@name` in the composer inserts
/// `body`; `{{prompt:name}}` in a step prompt stands for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct SavedPromptDto {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub body: String,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&SavedPrompt> for SavedPromptDto {
    fn from(p: &SavedPrompt) -> Self {
        SavedPromptDto {
            id: p.id.clone(),
            workspace_id: p.workspace_id.to_string(),
            name: p.name.clone(),
            body: p.body.clone(),
            created_at: rfc3339(p.created_at),
            updated_at: rfc3339(p.updated_at),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct MessageDto {
    pub id: String,
    pub session_id: String,
    pub turn_id: Option<String>,
    pub seq: i64,
    /// `kind` and `metadata`, typed together.
    #[serde(flatten)]
    #[ts(flatten)]
    pub body: MessageBodyDto,
    pub content: String,
    pub client_message_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<&Message> for MessageDto {
    fn from(m: &Message) -> Self {
        MessageDto {
            id: m.id.to_string(),
            session_id: m.session_id.to_string(),
            turn_id: m.turn_id.as_ref().map(|t| t.to_string()),
            seq: m.seq,
            body: (&m.meta).into(),
            content: m.content.clone(),
            client_message_id: m.client_message_id.clone(),
            created_at: rfc3339(m.created_at),
            updated_at: rfc3339(m.updated_at),
        }
    }
}

/// An attempt of a task (issue 48): its session, its worktree and branch once its first
/// start made them, and what it changed against the base (files, lines added and removed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct TaskAttemptDto {
    pub session: SessionDto,
    pub branch: Option<String>,
    pub worktree: Option<String>,
    pub files: u32,
    pub additions: u32,
    pub deletions: u32,
}

/// A turn with a checkpoint (issue 48): `number` counts the session's turns from 1,
/// `message_id` is the prompt it carried, `undone` says a revert undid it, `diff` that its
/// changes can be shown (it ended with a checkpoint after it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct TurnCheckpointDto {
    pub turn_id: String,
    pub number: u32,
    pub message_id: Option<String>,
    pub undone: bool,
    pub diff: bool,
}

/// A turn a revert undoes: its number in the session and its prompt's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct UndoneTurnDto {
    pub turn_id: String,
    pub number: u32,
    pub prompt: String,
}

/// A file a revert changes back (or one changed outside the agent's turns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct RevertFileDto {
    pub repository_id: Option<String>,
    pub path: String,
}

/// A turn: when it ran, how it ended, and its token usage (`usage.context`: `{used, size,
/// cost}` from the agent's latest `usage_update` in it; `usage.tokens`: the counts of its
/// answer), `null` when the agent reported none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct TurnDto {
    pub id: String,
    pub session_id: String,
    pub epoch: i64,
    pub started_at: String,
    pub completed_at: Option<String>,
    pub stop_reason: Option<String>,
    pub usage: Value,
}

impl From<&TurnRecord> for TurnDto {
    fn from(t: &TurnRecord) -> Self {
        TurnDto {
            id: t.id.to_string(),
            session_id: t.session_id.to_string(),
            epoch: t.epoch,
            started_at: rfc3339(t.started_at),
            completed_at: t.completed_at.map(rfc3339),
            stop_reason: t.stop_reason.clone(),
            usage: json_or_null(t.usage.as_deref()),
        }
    }
}

/// A stored file attached to a message (issue 18): `id` is the SHA-256 of its content, as
/// `attachment.upload` answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(deny_unknown_fields)]
pub struct AttachmentDto {
    pub id: String,
    pub name: String,
    pub mime: String,
    pub size: u64,
}

impl From<&AttachmentRef> for AttachmentDto {
    fn from(a: &AttachmentRef) -> Self {
        AttachmentDto { id: a.id.clone(), name: a.name.clone(), mime: a.mime.clone(), size: a.size }
    }
}

impl From<AttachmentDto> for AttachmentRef {
    fn from(a: AttachmentDto) -> Self {
        AttachmentRef { id: a.id, name: a.name, mime: a.mime, size: a.size }
    }
}

/// `attachment.upload`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct AttachmentUploaded {
    pub attachment: AttachmentDto,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct QueuedPromptDto {
    pub id: String,
    pub session_id: String,
    pub position: i64,
    pub content: String,
    pub client_message_id: Option<String>,
    pub queued_by: String,
    pub created_at: String,
    pub attachments: Vec<AttachmentDto>,
}

impl From<&QueuedPrompt> for QueuedPromptDto {
    fn from(q: &QueuedPrompt) -> Self {
        QueuedPromptDto {
            id: q.id.to_string(),
            session_id: q.session_id.to_string(),
            position: q.position,
            content: q.content.clone(),
            client_message_id: q.client_message_id.clone(),
            queued_by: q.queued_by.clone(),
            created_at: rfc3339(q.created_at),
            attachments: q.attachments.iter().map(AttachmentDto::from).collect(),
        }
    }
}
