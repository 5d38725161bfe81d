//! A transcript message's metadata on the wire, typed per kind (issue 40): `MessageDto`'s
//! `kind` and `metadata` are one tagged value ([`MessageBodyDto`]), so TypeScript narrows the
//! metadata by the kind. The JSON is the stored shape (`kandev_domain::message_meta`), field
//! for field; the conversions are written out so that a renamed field fails to compile here.
//!
//! A tool call's metadata built with a field of another name does not compile, in the domain
//! or on the wire (the web's side is `web/src/api/transcript.typetest.ts`):
//!
//! ```compile_fail
//! let meta = kandev_domain::message_meta::ToolCallMeta {
//!     toolCallId: "t1".into(),
//!     ..Default::default()
//! };
//! ```
//!
//! ```compile_fail
//! # use std::collections::BTreeMap;
//! let wire = kandev_api_types::ToolCallMetaDto {
//!     toolCallId: "t1".into(),
//!     title: String::new(),
//!     kind: String::new(),
//!     status: String::new(),
//!     content: vec![],
//!     locations: vec![],
//!     raw_input: None,
//!     raw_output: None,
//!     terminals: None::<BTreeMap<_, _>>,
//! };
//! ```
//!
//! With its field's right name, the same value compiles:
//!
//! ```
//! # use std::collections::BTreeMap;
//! let wire = kandev_api_types::ToolCallMetaDto {
//!     tool_call_id: "t1".into(),
//!     title: String::new(),
//!     kind: String::new(),
//!     status: String::new(),
//!     content: vec![],
//!     locations: vec![],
//!     raw_input: None,
//!     raw_output: None,
//!     terminals: None::<BTreeMap<_, _>>,
//! };
//! # let _ = wire;
//! ```

use std::collections::BTreeMap;

use kandev_domain::message_meta::{
    ErrorMeta, KnownToolContent, MessageMeta, PermissionMeta, PermissionOptionMeta, PlanEntryMeta,
    PlanMeta, StatusMeta, StatusNote, TerminalMeta, ToolCallMeta, ToolContent, ToolLocation,
    UsageMeta, UserMeta,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use ts_rs::TS;

use crate::session::AttachmentDto;

/// A message's kind and what it carries besides its text: `{kind, metadata}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", content = "metadata", rename_all = "snake_case")]
pub enum MessageBodyDto {
    User(UserMetaDto),
    Agent(EmptyMetaDto),
    Thought(EmptyMetaDto),
    ToolCall(ToolCallMetaDto),
    Plan(PlanMetaDto),
    Usage(UsageMetaDto),
    Status(StatusMetaDto),
    Error(ErrorMetaDto),
    PermissionRequest(PermissionMetaDto),
}

/// The metadata of streamed text: `{}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, TS)]
pub struct EmptyMetaDto {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct UserMetaDto {
    /// Absent when nothing is attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub attachments: Option<Vec<AttachmentDto>>,
}

/// A tool call as the agent last described it. `kind` (`read`, `edit`, `execute`, …) and
/// `status` (`pending`, `in_progress`, `completed`, `failed`) are as the agent sent them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct ToolCallMetaDto {
    pub tool_call_id: String,
    pub title: String,
    pub kind: String,
    pub status: String,
    pub content: Vec<ToolContentDto>,
    pub locations: Vec<ToolLocationDto>,
    pub raw_input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub raw_output: Option<Value>,
    /// The agent terminals the call shows, by terminal id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub terminals: Option<BTreeMap<String, TerminalMetaDto>>,
}

/// One piece of a tool call's content; `other` is a kind Kandev does not know, as the agent
/// sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolContentDto {
    Content { text: String },
    Diff { path: String, old_text: Option<String>, new_text: String },
    Terminal { terminal_id: String },
    Other { raw: Value },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct ToolLocationDto {
    pub path: String,
    pub line: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct TerminalMetaDto {
    pub output: String,
    pub truncated: bool,
    pub exit_code: Option<i64>,
    pub signal: Option<String>,
    pub exited: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct PlanMetaDto {
    pub entries: Vec<PlanEntryDto>,
}

/// `priority` (`high`, `medium`, `low`) and `status` (`pending`, `in_progress`, `completed`)
/// as the agent sent them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct PlanEntryDto {
    pub content: String,
    pub priority: String,
    pub status: String,
}

/// The agent's context window: tokens used of its size, and the cost as the agent sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct UsageMetaDto {
    pub used: Option<u64>,
    pub size: Option<u64>,
    pub cost: Option<Value>,
}

/// An error's code (an open set, as `last_error.code`) and the facts some carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct ErrorMetaDto {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub stderr: Option<String>,
}

/// A permission request: `status` is `pending`, then how it was answered (`approved`,
/// `rejected`, `cancelled`, `expired`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct PermissionMetaDto {
    pub request_id: String,
    pub options: Vec<PermissionOptionDto>,
    pub status: String,
    /// The tool call the agent asks about, as it sent it.
    pub tool_call: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub selected_option_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub answered_by: Option<String>,
}

/// `kind`: `allow_once`, `allow_always`, `reject_once` or `reject_always`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct PermissionOptionDto {
    pub option_id: String,
    pub name: String,
    pub kind: String,
}

/// A status note by its `reason`, or one this version does not know, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(untagged)]
pub enum StatusMetaDto {
    Known(StatusNoteDto),
    Other(Map<String, Value>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StatusNoteDto {
    AgentWarning,
    Cancelled,
    Stopped,
    Idle,
    Stall,
    Interrupted,
    ContextReset,
    Resumed,
    Fresh,
    McpTransport {
        servers: Vec<String>,
    },
    UnknownSavedPrompt {
        names: Vec<String>,
    },
    SavedPromptsTooLarge,
    TaskMoved {
        by: String,
    },
    ShipAction {
        action: String,
    },
    ShipBy {
        action: String,
        by: String,
    },
    WorktreeReused {
        repository_id: String,
        path: String,
        branch: String,
    },
    WorktreeCreated {
        repository_id: String,
        path: String,
        branch: String,
        base_commit: String,
    },
    SetupScript {
        repository_id: String,
        status: String,
        exit_code: Option<i32>,
    },
    CleanupScript {
        repository_id: String,
        status: String,
    },
    PullRequest {
        repository_id: String,
        number: u64,
        url: String,
        state: String,
        was: String,
    },
    Authenticated {
        auth_method: String,
    },
    McpNote,
    CompleteStep {
        step: String,
    },
    QuestionResolved {
        question_id: String,
        status: String,
        answer: Option<String>,
        by: Option<String>,
    },
    PrFeedback {
        repository_id: String,
        event: String,
        outcome: String,
    },
    IssueUpdate {
        action: String,
        outcome: String,
    },
    Reverted {
        turn_id: String,
        undone: Vec<String>,
        files: Vec<String>,
    },
    Attempts {
        outcome: String,
        sessions: Vec<String>,
    },
    Rebound {
        from: String,
        to: String,
    },
}

impl From<&MessageMeta> for MessageBodyDto {
    fn from(meta: &MessageMeta) -> Self {
        match meta {
            MessageMeta::User(m) => MessageBodyDto::User(m.into()),
            MessageMeta::Agent => MessageBodyDto::Agent(EmptyMetaDto {}),
            MessageMeta::Thought => MessageBodyDto::Thought(EmptyMetaDto {}),
            MessageMeta::ToolCall(m) => MessageBodyDto::ToolCall(m.into()),
            MessageMeta::Plan(m) => MessageBodyDto::Plan(m.into()),
            MessageMeta::Usage(m) => MessageBodyDto::Usage(m.into()),
            MessageMeta::Status(m) => MessageBodyDto::Status(m.into()),
            MessageMeta::Error(m) => MessageBodyDto::Error(m.into()),
            MessageMeta::PermissionRequest(m) => MessageBodyDto::PermissionRequest(m.into()),
            // Stored metadata this version cannot read: the message goes out by its text,
            // with its kind's empty metadata.
            MessageMeta::Unreadable { kind, .. } => (&MessageMeta::empty(*kind)).into(),
        }
    }
}

impl From<&UserMeta> for UserMetaDto {
    fn from(m: &UserMeta) -> Self {
        let attachments = m.attachments.iter().map(AttachmentDto::from).collect::<Vec<_>>();
        UserMetaDto { attachments: (!attachments.is_empty()).then_some(attachments) }
    }
}

impl From<&ToolCallMeta> for ToolCallMetaDto {
    fn from(m: &ToolCallMeta) -> Self {
        ToolCallMetaDto {
            tool_call_id: m.tool_call_id.clone(),
            title: m.title.clone(),
            kind: m.kind.clone(),
            status: m.status.clone(),
            content: m.content.iter().map(ToolContentDto::from).collect(),
            locations: m.locations.iter().map(ToolLocationDto::from).collect(),
            raw_input: m.raw_input.clone(),
            raw_output: m.raw_output.clone(),
            terminals: (!m.terminals.is_empty())
                .then(|| m.terminals.iter().map(|(id, t)| (id.clone(), t.into())).collect()),
        }
    }
}

impl From<&ToolContent> for ToolContentDto {
    fn from(c: &ToolContent) -> Self {
        match c {
            ToolContent::Known(KnownToolContent::Content { text }) => {
                ToolContentDto::Content { text: text.clone() }
            }
            ToolContent::Known(KnownToolContent::Diff { path, old_text, new_text }) => {
                ToolContentDto::Diff {
                    path: path.clone(),
                    old_text: old_text.clone(),
                    new_text: new_text.clone(),
                }
            }
            ToolContent::Known(KnownToolContent::Terminal { terminal_id }) => {
                ToolContentDto::Terminal { terminal_id: terminal_id.clone() }
            }
            ToolContent::Other(raw) => ToolContentDto::Other { raw: raw.clone() },
        }
    }
}

impl From<&ToolLocation> for ToolLocationDto {
    fn from(l: &ToolLocation) -> Self {
        ToolLocationDto { path: l.path.clone(), line: l.line }
    }
}

impl From<&TerminalMeta> for TerminalMetaDto {
    fn from(t: &TerminalMeta) -> Self {
        TerminalMetaDto {
            output: t.output.clone(),
            truncated: t.truncated,
            exit_code: t.exit_code,
            signal: t.signal.clone(),
            exited: t.exited,
        }
    }
}

impl From<&PlanMeta> for PlanMetaDto {
    fn from(m: &PlanMeta) -> Self {
        PlanMetaDto { entries: m.entries.iter().map(PlanEntryDto::from).collect() }
    }
}

impl From<&PlanEntryMeta> for PlanEntryDto {
    fn from(e: &PlanEntryMeta) -> Self {
        PlanEntryDto {
            content: e.content.clone(),
            priority: e.priority.clone(),
            status: e.status.clone(),
        }
    }
}

impl From<&UsageMeta> for UsageMetaDto {
    fn from(m: &UsageMeta) -> Self {
        UsageMetaDto { used: m.used, size: m.size, cost: m.cost.clone() }
    }
}

impl From<&ErrorMeta> for ErrorMetaDto {
    fn from(m: &ErrorMeta) -> Self {
        ErrorMetaDto { code: m.code.clone(), action: m.action.clone(), stderr: m.stderr.clone() }
    }
}

impl From<&PermissionMeta> for PermissionMetaDto {
    fn from(m: &PermissionMeta) -> Self {
        PermissionMetaDto {
            request_id: m.request_id.clone(),
            options: m.options.iter().map(PermissionOptionDto::from).collect(),
            status: m.status.clone(),
            tool_call: m.tool_call.clone(),
            selected_option_id: m.selected_option_id.clone(),
            answered_by: m.answered_by.clone(),
        }
    }
}

impl From<&PermissionOptionMeta> for PermissionOptionDto {
    fn from(o: &PermissionOptionMeta) -> Self {
        PermissionOptionDto {
            option_id: o.option_id.clone(),
            name: o.name.clone(),
            kind: o.kind.clone(),
        }
    }
}

impl From<&StatusMeta> for StatusMetaDto {
    fn from(m: &StatusMeta) -> Self {
        match m {
            StatusMeta::Known(note) => StatusMetaDto::Known(note.into()),
            StatusMeta::Other(fields) => StatusMetaDto::Other(fields.clone()),
        }
    }
}

impl From<&StatusNote> for StatusNoteDto {
    fn from(n: &StatusNote) -> Self {
        use StatusNote as N;
        use StatusNoteDto as D;
        match n.clone() {
            N::AgentWarning => D::AgentWarning,
            N::Cancelled => D::Cancelled,
            N::Stopped => D::Stopped,
            N::Idle => D::Idle,
            N::Stall => D::Stall,
            N::Interrupted => D::Interrupted,
            N::ContextReset => D::ContextReset,
            N::Resumed => D::Resumed,
            N::Fresh => D::Fresh,
            N::McpTransport { servers } => D::McpTransport { servers },
            N::UnknownSavedPrompt { names } => D::UnknownSavedPrompt { names },
            N::SavedPromptsTooLarge => D::SavedPromptsTooLarge,
            N::TaskMoved { by } => D::TaskMoved { by },
            N::ShipAction { action } => D::ShipAction { action },
            N::ShipBy { action, by } => D::ShipBy { action, by },
            N::WorktreeReused { repository_id, path, branch } => {
                D::WorktreeReused { repository_id, path, branch }
            }
            N::WorktreeCreated { repository_id, path, branch, base_commit } => {
                D::WorktreeCreated { repository_id, path, branch, base_commit }
            }
            N::SetupScript { repository_id, status, exit_code } => {
                D::SetupScript { repository_id, status, exit_code }
            }
            N::CleanupScript { repository_id, status } => {
                D::CleanupScript { repository_id, status }
            }
            N::PullRequest { repository_id, number, url, state, was } => {
                D::PullRequest { repository_id, number, url, state, was }
            }
            N::Authenticated { auth_method } => D::Authenticated { auth_method },
            N::McpNote => D::McpNote,
            N::CompleteStep { step } => D::CompleteStep { step },
            N::QuestionResolved { question_id, status, answer, by } => {
                D::QuestionResolved { question_id, status, answer, by }
            }
            N::PrFeedback { repository_id, event, outcome } => {
                D::PrFeedback { repository_id, event, outcome }
            }
            N::IssueUpdate { action, outcome } => D::IssueUpdate { action, outcome },
            N::Reverted { turn_id, undone, files } => D::Reverted { turn_id, undone, files },
            N::Attempts { outcome, sessions } => D::Attempts { outcome, sessions },
            N::Rebound { from, to } => D::Rebound { from, to },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kandev_domain::transcript::MessageKind;

    /// The wire shape is the stored shape: a message's metadata as stored, read by the domain
    /// and sent, is the same JSON (unknown tool content aside, which the wire tags `other`).
    #[test]
    fn i40_the_wire_metadata_is_the_stored_metadata() {
        let stored = [
            (
                MessageKind::ToolCall,
                r#"{"tool_call_id":"t","title":"Run","kind":"execute","status":"completed","content":[{"type":"content","text":"ok"},{"type":"terminal","terminal_id":"x"}],"locations":[{"path":"a","line":null}],"raw_input":null,"terminals":{"x":{"output":"o","truncated":false,"exit_code":0,"signal":null,"exited":true}}}"#,
            ),
            (
                MessageKind::PermissionRequest,
                r#"{"request_id":"r","options":[{"option_id":"a","name":"Allow","kind":"allow_once"}],"status":"expired","tool_call":{"t":1}}"#,
            ),
            (MessageKind::Status, r#"{"reason":"ship_by","action":"merge","by":"ana"}"#),
            (MessageKind::Status, r#"{"number":3,"was":"open"}"#),
            (MessageKind::Usage, r#"{"used":5,"size":10,"cost":null}"#),
            (
                MessageKind::User,
                r#"{"attachments":[{"id":"h","name":"a.png","mime":"image/png","size":3}]}"#,
            ),
            (MessageKind::Agent, "{}"),
        ];
        for (kind, text) in stored {
            let meta = MessageMeta::from_json(kind, text).unwrap();
            let wire = serde_json::to_value(MessageBodyDto::from(&meta)).unwrap();
            let expected: Value = serde_json::from_str(text).unwrap();
            assert_eq!(wire["kind"], kind.as_str());
            assert_eq!(wire["metadata"], expected, "{text}");
        }
    }
}
