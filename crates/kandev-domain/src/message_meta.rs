//! What each kind of transcript message carries besides its text, typed (issue 40).
//!
//! A message's metadata is stored as the JSON object its value serializes to, in the
//! `metadata` column, and travels on the wire in the same shape (`kandev-api-types`'s
//! `MessageMeta*` mirror these field by field, so renaming a field breaks the conversion at
//! compile time). The store queries two fields in SQL (`request_id` and `status` of a
//! permission request), so those keep their names and place.
//!
//! Reading is tolerant of every row written before these types existed: every field has a
//! default, unknown fields are ignored, `null` reads as a field's default, and a status note
//! whose `reason` is unknown (or missing, as in the pull-request and authentication notes of
//! older rows) is kept as it was ([`StatusMeta::Other`]). Metadata that still does not read
//! as its kind's value (a damaged or hand-edited row) is kept as it was stored
//! ([`MessageMeta::Unreadable`]): the message shows by its text and is never rewritten.
//! Agents' open sets (tool kinds and statuses, plan priorities) stay strings.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::attachment::AttachmentRef;
use crate::transcript::MessageKind;

/// A message's metadata, one variant per [`MessageKind`] (its variant *is* the kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageMeta {
    User(UserMeta),
    Agent,
    Thought,
    ToolCall(ToolCallMeta),
    Plan(PlanMeta),
    Usage(UsageMeta),
    Status(StatusMeta),
    Error(ErrorMeta),
    PermissionRequest(PermissionMeta),
    /// Stored metadata that does not read as `kind`'s value, kept as it was (`raw`).
    Unreadable {
        kind: MessageKind,
        raw: String,
    },
}

/// Stored metadata that does not parse as its kind's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} message metadata is not readable: {reason}")]
pub struct MetaError {
    pub kind: &'static str,
    pub reason: String,
}

impl MessageMeta {
    pub fn kind(&self) -> MessageKind {
        match self {
            MessageMeta::User(_) => MessageKind::User,
            MessageMeta::Agent => MessageKind::Agent,
            MessageMeta::Thought => MessageKind::Thought,
            MessageMeta::ToolCall(_) => MessageKind::ToolCall,
            MessageMeta::Plan(_) => MessageKind::Plan,
            MessageMeta::Usage(_) => MessageKind::Usage,
            MessageMeta::Status(_) => MessageKind::Status,
            MessageMeta::Error(_) => MessageKind::Error,
            MessageMeta::PermissionRequest(_) => MessageKind::PermissionRequest,
            MessageMeta::Unreadable { kind, .. } => *kind,
        }
    }

    /// Reads a stored `metadata` text as `kind`'s value, or keeps it as it is when it does
    /// not read ([`MessageMeta::Unreadable`], with why in the error).
    pub fn from_stored(kind: MessageKind, text: &str) -> (MessageMeta, Option<MetaError>) {
        match MessageMeta::from_json(kind, text) {
            Ok(meta) => (meta, None),
            Err(err) => (MessageMeta::Unreadable { kind, raw: text.to_owned() }, Some(err)),
        }
    }

    /// The JSON object text stored in the `metadata` column.
    pub fn to_json(&self) -> String {
        let text = match self {
            MessageMeta::Agent | MessageMeta::Thought => return "{}".to_owned(),
            MessageMeta::Unreadable { raw, .. } => return raw.clone(),
            MessageMeta::User(m) => serde_json::to_string(m),
            MessageMeta::ToolCall(m) => serde_json::to_string(m),
            MessageMeta::Plan(m) => serde_json::to_string(m),
            MessageMeta::Usage(m) => serde_json::to_string(m),
            MessageMeta::Status(m) => serde_json::to_string(m),
            MessageMeta::Error(m) => serde_json::to_string(m),
            MessageMeta::PermissionRequest(m) => serde_json::to_string(m),
        };
        // These values hold strings, numbers and JSON values with string keys only: serde_json
        // cannot fail on them.
        text.unwrap_or_else(|_| "{}".to_owned())
    }

    /// Reads a stored `metadata` text as `kind`'s value. A `null` anywhere reads as the
    /// field's default (older rows wrote `null` for values they did not have).
    pub fn from_json(kind: MessageKind, text: &str) -> Result<MessageMeta, MetaError> {
        fn parse<T: for<'de> Deserialize<'de>>(
            kind: MessageKind,
            text: &str,
        ) -> Result<T, MetaError> {
            let error =
                |e: serde_json::Error| MetaError { kind: kind.as_str(), reason: e.to_string() };
            match serde_json::from_str(text) {
                Ok(value) => Ok(value),
                Err(first) => {
                    let mut value: Value = serde_json::from_str(text).map_err(error)?;
                    drop_nulls(&mut value);
                    serde_json::from_value(value).map_err(|_| error(first))
                }
            }
        }
        Ok(match kind {
            MessageKind::User => MessageMeta::User(parse(kind, text)?),
            MessageKind::Agent => MessageMeta::Agent,
            MessageKind::Thought => MessageMeta::Thought,
            MessageKind::ToolCall => MessageMeta::ToolCall(parse(kind, text)?),
            MessageKind::Plan => MessageMeta::Plan(parse(kind, text)?),
            MessageKind::Usage => MessageMeta::Usage(parse(kind, text)?),
            MessageKind::Status => MessageMeta::Status(parse(kind, text)?),
            MessageKind::Error => MessageMeta::Error(parse(kind, text)?),
            MessageKind::PermissionRequest => MessageMeta::PermissionRequest(parse(kind, text)?),
        })
    }

    /// The files a user message has attached (none for other kinds).
    pub fn attachments(&self) -> &[AttachmentRef] {
        match self {
            MessageMeta::User(user) => &user.attachments,
            _ => &[],
        }
    }

    /// The metadata of a message of `kind` that carries nothing but its text (streamed
    /// text, and tests).
    pub fn empty(kind: MessageKind) -> MessageMeta {
        match kind {
            MessageKind::User => MessageMeta::User(UserMeta::default()),
            MessageKind::Agent => MessageMeta::Agent,
            MessageKind::Thought => MessageMeta::Thought,
            MessageKind::ToolCall => MessageMeta::ToolCall(ToolCallMeta::default()),
            MessageKind::Plan => MessageMeta::Plan(PlanMeta::default()),
            MessageKind::Usage => MessageMeta::Usage(UsageMeta::default()),
            MessageKind::Status => MessageMeta::Status(StatusMeta::Other(Map::new())),
            MessageKind::Error => MessageMeta::Error(ErrorMeta::default()),
            MessageKind::PermissionRequest => {
                MessageMeta::PermissionRequest(PermissionMeta::default())
            }
        }
    }
}

/// Removes every object entry whose value is `null`, at any depth.
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            fields.retain(|_, v| !v.is_null());
            fields.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

impl From<StatusNote> for MessageMeta {
    fn from(note: StatusNote) -> MessageMeta {
        MessageMeta::Status(StatusMeta::Known(note))
    }
}

impl From<ErrorMeta> for MessageMeta {
    fn from(error: ErrorMeta) -> MessageMeta {
        MessageMeta::Error(error)
    }
}

/// A user message: the files attached to it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UserMeta {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<AttachmentRef>,
}

/// A tool call as the agent last described it (`tool_call`, then `tool_call_update`s).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCallMeta {
    pub tool_call_id: String,
    pub title: String,
    /// The agent's tool kind (`read`, `edit`, `execute`, …; an open set).
    pub kind: String,
    /// `pending`, `in_progress`, `completed` or `failed` (as the agent sent it).
    pub status: String,
    pub content: Vec<ToolContent>,
    pub locations: Vec<ToolLocation>,
    /// The tool's input, as the agent sent it.
    pub raw_input: Option<Value>,
    /// The tool's output, as the agent sent it, once it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Value>,
    /// The agent terminals the call shows, by terminal id (kept as their output arrives).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub terminals: std::collections::BTreeMap<String, TerminalMeta>,
}

/// One piece of a tool call's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolContent {
    Known(KnownToolContent),
    /// A kind of content this version does not know, kept as the agent sent it.
    Other(Value),
}

/// The kinds of tool call content Kandev shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum KnownToolContent {
    Content { text: String },
    Diff { path: String, old_text: Option<String>, new_text: String },
    Terminal { terminal_id: String },
}

/// A file (and line) a tool call touches.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolLocation {
    pub path: String,
    pub line: Option<u64>,
}

/// An agent terminal's output as kept in its tool call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TerminalMeta {
    pub output: String,
    pub truncated: bool,
    pub exit_code: Option<i64>,
    pub signal: Option<String>,
    pub exited: bool,
}

/// The agent's plan.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanMeta {
    pub entries: Vec<PlanEntryMeta>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanEntryMeta {
    pub content: String,
    /// `high`, `medium` or `low` (as the agent sent it).
    pub priority: String,
    /// `pending`, `in_progress` or `completed` (as the agent sent it).
    pub status: String,
}

/// The agent's context window (`usage_update`): tokens used of its size, and the cost as
/// sent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageMeta {
    pub used: Option<u64>,
    pub size: Option<u64>,
    pub cost: Option<Value>,
}

/// An error shown in the transcript: its code (an open set, as `last_error.code`) and the
/// facts some carry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ErrorMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The ship action that failed (`ship_failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The end of the agent's stderr (a start that failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
}

impl ErrorMeta {
    pub fn code(code: impl Into<String>) -> ErrorMeta {
        ErrorMeta { code: Some(code.into()), ..ErrorMeta::default() }
    }
}

/// A permission request: the options offered and, once answered, the answer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PermissionMeta {
    /// Kandev's id of the request (`permission.respond` names it). Queried in SQL.
    pub request_id: String,
    pub options: Vec<PermissionOptionMeta>,
    /// `pending`, then how it was answered (`approved`, `rejected`, `cancelled`, `expired`).
    /// Queried in SQL.
    pub status: String,
    /// The tool call the agent asks about, as it sent it.
    pub tool_call: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selected_option_id: Option<String>,
    /// Who answered: `user`, a user name, `auto_approve`, … .
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PermissionOptionMeta {
    pub option_id: String,
    pub name: String,
    /// `allow_once`, `allow_always`, `reject_once` or `reject_always`.
    pub kind: String,
}

/// A status note: why it was written (`reason`), with the facts of that reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum StatusMeta {
    Known(StatusNote),
    /// A note this version does not know (a newer server's, or an older row's without a
    /// `reason`), kept as it was stored.
    Other(Map<String, Value>),
}

/// A known note only when it reads as one *and* has no field its reason lacks (serde's
/// `deny_unknown_fields` does not reach the unit variants of a tagged enum): otherwise the
/// stored fields are kept whole.
impl<'de> Deserialize<'de> for StatusMeta {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = Map::<String, Value>::deserialize(deserializer)?;
        let known = serde_json::from_value::<StatusNote>(Value::Object(fields.clone())).ok();
        let whole = known.as_ref().and_then(|note| match serde_json::to_value(note) {
            Ok(Value::Object(written)) => Some(written.len() == fields.len()),
            _ => None,
        });
        Ok(match (known, whole) {
            (Some(note), Some(true)) => StatusMeta::Known(note),
            _ => StatusMeta::Other(fields),
        })
    }
}

impl From<StatusNote> for StatusMeta {
    fn from(note: StatusNote) -> StatusMeta {
        StatusMeta::Known(note)
    }
}

/// The status notes Kandev writes, by `reason`. A note with fields its reason does not have
/// reads as [`StatusMeta::Other`], so no field is lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum StatusNote {
    /// The agent wrote something that is not its answer (a warning).
    AgentWarning,
    /// A turn was cancelled.
    Cancelled,
    /// The session was stopped.
    Stopped,
    /// The agent was stopped for being idle.
    Idle,
    /// A turn stalled.
    Stall,
    /// A turn was interrupted by the server stopping.
    Interrupted,
    /// The conversation was reset (a workflow step's fresh context).
    ContextReset,
    /// A resume loaded the previous conversation.
    Resumed,
    /// A resume could not load it: the agent starts afresh.
    Fresh,
    /// MCP servers left out because the agent cannot reach them.
    McpTransport { servers: Vec<String> },
    /// A step prompt named saved prompts that do not exist.
    UnknownSavedPrompt { names: Vec<String> },
    /// A step prompt's saved prompts were too large.
    SavedPromptsTooLarge,
    /// Someone moved the task.
    TaskMoved { by: String },
    /// A workflow step ran a ship action.
    ShipAction { action: String },
    /// Someone shipped the task.
    ShipBy { action: String, by: String },
    /// The session works in the task's existing worktree.
    WorktreeReused { repository_id: String, path: String, branch: String },
    /// A worktree was created for the task.
    WorktreeCreated { repository_id: String, path: String, branch: String, base_commit: String },
    /// A repository's setup script: `running`, then how it ended.
    SetupScript { repository_id: String, status: String, exit_code: Option<i32> },
    /// A repository's cleanup script's outcome.
    CleanupScript { repository_id: String, status: String },
    /// A pull request of the task changed state.
    PullRequest { repository_id: String, number: u64, url: String, state: String, was: String },
    /// The agent was authenticated with one of its methods.
    Authenticated { auth_method: String },
    /// The agent's note (MCP `add_note`).
    McpNote,
    /// The agent completed its workflow step (MCP `complete_step`).
    CompleteStep { step: String },
    /// A question the agent asked (MCP `ask_user`; the message's text) was resolved:
    /// `answered` (with the answer and who gave it), `cancelled`, `timed_out` or `expired`.
    QuestionResolved {
        question_id: String,
        status: String,
        answer: Option<String>,
        by: Option<String>,
    },
    /// What a pull request's checks or reviews led to (issue 46): `event` is `checks_failed`,
    /// `checks_passed` or `review`; `outcome` as `PrEvent::outcome` (`sent`, `inherited`,
    /// `capped`, `merged`, `merge_refused`, `ignored`, `none`).
    PrFeedback { repository_id: String, event: String, outcome: String },
    /// A workflow wrote back to the issue the task was made from (issue 47): `action` is
    /// `comment_issue` or `close_issue`; `outcome` `done` or `failed` (the text says why).
    IssueUpdate { action: String, outcome: String },
    /// The user reverted the worktree to before a turn (issue 48): `turn_id` is that turn,
    /// `undone` every turn the revert undid (it and the later ones), `files` the paths it
    /// changed back.
    Reverted { turn_id: String, undone: Vec<String>, files: Vec<String> },
    /// A step's `start_attempts` (issue 48): `outcome` is `started` (with the sessions'
    /// ids) or `failed` (the text says why).
    Attempts { outcome: String, sessions: Vec<String> },
    /// The session was moved to another agent profile (issue 52, `session.rebind`): `from`
    /// names the profile it ran (or the deleted one), `to` the one it runs now.
    Rebound { from: String, to: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(kind: MessageKind, text: &str) -> MessageMeta {
        MessageMeta::from_json(kind, text).unwrap()
    }

    /// Issue 40: rows written before the metadata was typed stay readable, and read as the
    /// typed values their fields say.
    #[test]
    fn i40_rows_written_before_the_types_read_as_typed_values() {
        let call = r#"{"tool_call_id":"t1","title":"Edit a.rs","kind":"edit","status":"completed",
            "content":[{"type":"diff","path":"a.rs","old_text":null,"new_text":"x"},
                       {"type":"content","text":"done"},{"type":"image","data":"…"}],
            "locations":[{"path":"a.rs","line":3}],"raw_input":{"p":1},
            "terminals":{"term-1":{"output":"ok\n","truncated":false,"exit_code":0,"signal":null,"exited":true}}}"#;
        let MessageMeta::ToolCall(call) = read(MessageKind::ToolCall, call) else { panic!() };
        assert_eq!(call.kind, "edit");
        assert_eq!(
            call.content[0],
            ToolContent::Known(KnownToolContent::Diff {
                path: "a.rs".into(),
                old_text: None,
                new_text: "x".into()
            })
        );
        assert!(matches!(&call.content[2], ToolContent::Other(v) if v["type"] == "image"));
        assert_eq!(call.locations[0].line, Some(3));
        assert_eq!(call.terminals["term-1"].exit_code, Some(0));

        let perm = r#"{"request_id":"r1","options":[{"option_id":"a","name":"Allow","kind":"allow_once"}],
            "status":"approved","tool_call":{"x":1},"selected_option_id":"a","answered_by":"user"}"#;
        let MessageMeta::PermissionRequest(p) = read(MessageKind::PermissionRequest, perm) else {
            panic!()
        };
        assert_eq!((p.status.as_str(), p.selected_option_id.as_deref()), ("approved", Some("a")));

        let moved = read(MessageKind::Status, r#"{"reason":"task_moved","by":"ana"}"#);
        assert_eq!(moved, MessageMeta::Status(StatusNote::TaskMoved { by: "ana".into() }.into()));
        // Older pull-request and authentication notes had no `reason`: kept as they were.
        let old_pr = r#"{"repository_id":"r","number":3,"url":"u","state":"merged","was":"open"}"#;
        let MessageMeta::Status(StatusMeta::Other(fields)) = read(MessageKind::Status, old_pr)
        else {
            panic!()
        };
        assert_eq!(fields["number"], 3);
        assert_eq!(read(MessageKind::Agent, "{}"), MessageMeta::Agent);
        assert_eq!(read(MessageKind::User, "{}"), MessageMeta::User(UserMeta::default()));
        let error = read(MessageKind::Error, r#"{"code":"ship_failed","action":"merge"}"#);
        assert_eq!(error.to_json(), r#"{"code":"ship_failed","action":"merge"}"#);
    }

    /// What is written reads back as the same value, and keeps the fields the store queries
    /// in SQL where they were.
    #[test]
    fn i40_written_metadata_reads_back_and_keeps_the_queried_fields() {
        let perm = MessageMeta::PermissionRequest(PermissionMeta {
            request_id: "r1".into(),
            status: "pending".into(),
            ..PermissionMeta::default()
        });
        let text = perm.to_json();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (value["request_id"].as_str(), value["status"].as_str()),
            (Some("r1"), Some("pending"))
        );
        assert_eq!(MessageMeta::from_json(MessageKind::PermissionRequest, &text).unwrap(), perm);
        let note = MessageMeta::Status(
            StatusNote::SetupScript {
                repository_id: "r".into(),
                status: "running".into(),
                exit_code: None,
            }
            .into(),
        );
        assert_eq!(MessageMeta::from_json(MessageKind::Status, &note.to_json()).unwrap(), note);
        for kind in MessageKind::ALL {
            let empty = MessageMeta::empty(kind);
            assert_eq!(empty.kind(), kind);
            assert_eq!(MessageMeta::from_json(kind, &empty.to_json()).unwrap(), empty);
        }
    }

    #[test]
    fn i40_metadata_that_is_not_an_object_is_an_error_naming_the_kind() {
        let err = MessageMeta::from_json(MessageKind::ToolCall, "[1]").unwrap_err();
        assert_eq!(err.kind, "tool_call");
    }

    /// `null` reads as a field's default; what still does not read is kept as it was stored,
    /// and written back unchanged.
    #[test]
    fn i40_nulls_read_as_defaults_and_unreadable_metadata_is_kept_as_stored() {
        let nulls = r#"{"tool_call_id":"t","title":null,"kind":null,"status":"completed","content":null,"locations":[{"path":"a","line":null}]}"#;
        let MessageMeta::ToolCall(call) = read(MessageKind::ToolCall, nulls) else { panic!() };
        assert_eq!((call.title.as_str(), call.status.as_str()), ("", "completed"));
        assert!(call.content.is_empty());

        let damaged = r#"{"request_id":7,"options":"allow","status":"pending"}"#;
        let (meta, err) = MessageMeta::from_stored(MessageKind::PermissionRequest, damaged);
        assert!(err.is_some(), "a wrong-typed field is reported");
        assert_eq!(meta.kind(), MessageKind::PermissionRequest);
        assert_eq!(meta.to_json(), damaged, "kept as it was stored");
        assert!(!matches!(meta, MessageMeta::PermissionRequest(_)));
    }

    /// A note with fields its reason does not have is kept whole, not read as the bare reason.
    #[test]
    fn i40_a_known_reason_with_extra_fields_keeps_them() {
        let text = r#"{"reason":"cancelled","stop_reason":"end_turn"}"#;
        let MessageMeta::Status(StatusMeta::Other(fields)) = read(MessageKind::Status, text) else {
            panic!("read as a bare known note")
        };
        assert_eq!(fields["stop_reason"], "end_turn");
        assert_eq!(read(MessageKind::Status, text).to_json(), text);
    }
}
