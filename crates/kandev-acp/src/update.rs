//! `session/update` notifications: what the agent reports while it works.

use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

use crate::lenient::{null_as_default, open_enum};
use crate::schema::{ConfigOption, ContentBlock};

/// One `session/update` from the agent, by its `sessionUpdate` kind.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionUpdate {
    /// A piece of the agent's answer.
    AgentMessageChunk {
        /// The content.
        content: ContentBlock,
    },
    /// A piece of the agent's reasoning.
    AgentThoughtChunk {
        /// The content.
        content: ContentBlock,
    },
    /// A piece of a user message (sent while `session/load` replays history).
    UserMessageChunk {
        /// The content.
        content: ContentBlock,
    },
    /// A new tool call.
    ToolCall(ToolCall),
    /// A change to an existing tool call.
    ToolCallUpdate(ToolCallUpdate),
    /// The agent's current plan (always the full list).
    Plan {
        /// The entries.
        entries: Vec<PlanEntry>,
    },
    /// The slash commands the agent offers.
    AvailableCommandsUpdate {
        /// The commands.
        commands: Vec<AvailableCommand>,
    },
    /// The agent switched mode.
    CurrentModeUpdate {
        /// The new mode.
        current_mode_id: String,
    },
    /// The config options changed (always the full list).
    ConfigOptionUpdate {
        /// The options.
        config_options: Vec<ConfigOption>,
    },
    /// Session metadata (title, ...) changed.
    SessionInfoUpdate {
        /// The new title, if sent.
        title: Option<String>,
        /// The update time, if sent.
        updated_at: Option<String>,
        /// The whole update, as sent.
        raw: Value,
    },
    /// Context window usage.
    UsageUpdate {
        /// Tokens in use.
        used: Option<u64>,
        /// Context window size.
        size: Option<u64>,
        /// Cost, as sent.
        cost: Option<Value>,
        /// The whole update, as sent.
        raw: Value,
    },
    /// A kind this crate does not know (newer protocol); never an error.
    Unknown {
        /// The `sessionUpdate` value.
        kind: String,
        /// The whole update, as sent.
        raw: Value,
    },
}

impl SessionUpdate {
    /// Parses the `update` object of a `session/update`. Fails only for a known kind with
    /// malformed required fields, or without a `sessionUpdate` tag.
    pub fn from_json(raw: Value) -> Result<Self, String> {
        let Some(kind) = raw.get("sessionUpdate").and_then(Value::as_str) else {
            return Err("session update without a sessionUpdate kind".to_owned());
        };
        let kind = kind.to_owned();
        let update = match kind.as_str() {
            "agent_message_chunk" => {
                SessionUpdate::AgentMessageChunk { content: parse::<Chunk>(&kind, &raw)?.content }
            }
            "agent_thought_chunk" => {
                SessionUpdate::AgentThoughtChunk { content: parse::<Chunk>(&kind, &raw)?.content }
            }
            "user_message_chunk" => {
                SessionUpdate::UserMessageChunk { content: parse::<Chunk>(&kind, &raw)?.content }
            }
            "tool_call" => SessionUpdate::ToolCall(parse(&kind, &raw)?),
            "tool_call_update" => SessionUpdate::ToolCallUpdate(parse(&kind, &raw)?),
            "plan" => SessionUpdate::Plan { entries: parse::<PlanWire>(&kind, &raw)?.entries },
            "available_commands_update" => SessionUpdate::AvailableCommandsUpdate {
                commands: parse::<CommandsWire>(&kind, &raw)?.available_commands,
            },
            "current_mode_update" => SessionUpdate::CurrentModeUpdate {
                current_mode_id: parse::<ModeWire>(&kind, &raw)?.current_mode_id,
            },
            "config_option_update" => SessionUpdate::ConfigOptionUpdate {
                config_options: parse::<ConfigOptionsWire>(&kind, &raw)?.config_options,
            },
            "session_info_update" => session_info(&kind, raw)?,
            "usage_update" => usage(raw),
            _ => SessionUpdate::Unknown { kind, raw },
        };
        Ok(update)
    }
}

fn parse<T: DeserializeOwned>(kind: &str, raw: &Value) -> Result<T, String> {
    T::deserialize(raw).map_err(|err| format!("malformed {kind} update: {err}"))
}

fn session_info(kind: &str, raw: Value) -> Result<SessionUpdate, String> {
    let info = parse::<SessionInfoWire>(kind, &raw)?;
    Ok(SessionUpdate::SessionInfoUpdate { title: info.title, updated_at: info.updated_at, raw })
}

fn usage(raw: Value) -> SessionUpdate {
    let number = |key: &str| raw.get(key).and_then(Value::as_u64);
    SessionUpdate::UsageUpdate {
        used: number("used"),
        size: number("size"),
        cost: raw.get("cost").filter(|cost| !cost.is_null()).cloned(),
        raw,
    }
}

#[derive(Deserialize)]
struct Chunk {
    content: ContentBlock,
}

#[derive(Deserialize)]
struct PlanWire {
    #[serde(default, deserialize_with = "null_as_default")]
    entries: Vec<PlanEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommandsWire {
    #[serde(default, deserialize_with = "null_as_default")]
    available_commands: Vec<AvailableCommand>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModeWire {
    #[serde(alias = "modeId")]
    current_mode_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigOptionsWire {
    #[serde(default, deserialize_with = "null_as_default")]
    config_options: Vec<ConfigOption>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionInfoWire {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
}

open_enum! {
    /// What a tool call does (for icons and grouping).
    pub enum ToolKind {
        /// Reading files or data.
        Read = "read",
        /// Modifying files or content.
        Edit = "edit",
        /// Removing files or data.
        Delete = "delete",
        /// Moving or renaming files.
        Move = "move",
        /// Searching.
        Search = "search",
        /// Running a command or code.
        Execute = "execute",
        /// Internal reasoning.
        Think = "think",
        /// Fetching external data.
        Fetch = "fetch",
        /// Switching the session mode.
        SwitchMode = "switch_mode",
    }
}

open_enum! {
    /// Where a tool call is in its life.
    pub enum ToolCallStatus {
        /// Not started (or waiting for permission).
        Pending = "pending",
        /// Running.
        InProgress = "in_progress",
        /// Finished successfully.
        Completed = "completed",
        /// Finished with an error.
        Failed = "failed",
    }
}

open_enum! {
    /// How important a plan entry is.
    pub enum PlanEntryPriority {
        /// High.
        High = "high",
        /// Medium.
        Medium = "medium",
        /// Low.
        Low = "low",
    }
}

open_enum! {
    /// Where a plan entry is.
    pub enum PlanEntryStatus {
        /// Not started.
        Pending = "pending",
        /// Being worked on.
        InProgress = "in_progress",
        /// Done.
        Completed = "completed",
    }
}

/// A new tool call (`tool_call`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "Value")]
pub struct ToolCall {
    /// The id later updates refer to.
    pub tool_call_id: String,
    /// What the tool is doing, for people.
    pub title: String,
    /// The kind; `other` when not sent.
    pub kind: ToolKind,
    /// The status; `pending` when not sent.
    pub status: ToolCallStatus,
    /// What the tool produced.
    pub content: Vec<ToolCallContent>,
    /// Files the tool touches.
    pub locations: Vec<ToolCallLocation>,
    /// The tool's input, as sent.
    pub raw_input: Option<Value>,
    /// The tool's output, as sent.
    pub raw_output: Option<Value>,
    /// The whole update, as sent.
    pub raw: Value,
}

/// A change to a tool call (`tool_call_update`): `None` means "not sent (or null)".
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "Value")]
pub struct ToolCallUpdate {
    /// The tool call this updates.
    pub tool_call_id: String,
    /// A new title.
    pub title: Option<String>,
    /// A new kind.
    pub kind: Option<ToolKind>,
    /// A new status.
    pub status: Option<ToolCallStatus>,
    /// New content (replaces the old).
    pub content: Option<Vec<ToolCallContent>>,
    /// New locations (replace the old).
    pub locations: Option<Vec<ToolCallLocation>>,
    /// The tool's input, as sent.
    pub raw_input: Option<Value>,
    /// The tool's output, as sent.
    pub raw_output: Option<Value>,
    /// The whole update, as sent.
    pub raw: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolCallWire {
    tool_call_id: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    kind: Option<ToolKind>,
    #[serde(default)]
    status: Option<ToolCallStatus>,
    #[serde(default)]
    content: Option<Vec<ToolCallContent>>,
    #[serde(default)]
    locations: Option<Vec<ToolCallLocation>>,
    #[serde(default)]
    raw_input: Option<Value>,
    #[serde(default)]
    raw_output: Option<Value>,
}

impl TryFrom<Value> for ToolCallUpdate {
    type Error = serde_json::Error;

    fn try_from(raw: Value) -> Result<Self, Self::Error> {
        let wire = ToolCallWire::deserialize(&raw)?;
        Ok(ToolCallUpdate {
            tool_call_id: wire.tool_call_id,
            title: wire.title,
            kind: wire.kind,
            status: wire.status,
            content: wire.content,
            locations: wire.locations,
            raw_input: wire.raw_input,
            raw_output: wire.raw_output,
            raw,
        })
    }
}

impl TryFrom<Value> for ToolCall {
    type Error = serde_json::Error;

    fn try_from(raw: Value) -> Result<Self, Self::Error> {
        let update = ToolCallUpdate::try_from(raw)?;
        Ok(ToolCall {
            tool_call_id: update.tool_call_id,
            title: update.title.unwrap_or_default(),
            kind: update.kind.unwrap_or(ToolKind::Other("other".to_owned())),
            status: update.status.unwrap_or(ToolCallStatus::Pending),
            content: update.content.unwrap_or_default(),
            locations: update.locations.unwrap_or_default(),
            raw_input: update.raw_input,
            raw_output: update.raw_output,
            raw: update.raw,
        })
    }
}

/// Something a tool call produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCallContent {
    /// `{"type": "content", "content": ContentBlock}`.
    Content(ContentBlock),
    /// `{"type": "diff", "path", "oldText", "newText"}`: a file modification.
    Diff {
        /// The file (absolute).
        path: String,
        /// The old text; `None` for a new file.
        old_text: Option<String>,
        /// The new text.
        new_text: String,
    },
    /// `{"type": "terminal", "terminalId"}`.
    Terminal {
        /// The terminal id.
        terminal_id: String,
    },
    /// Any other (or malformed) content, kept as sent.
    Other {
        /// The `type` field (empty if absent).
        kind: String,
        /// The whole item.
        raw: Value,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DiffWire {
    path: String,
    #[serde(default)]
    old_text: Option<String>,
    new_text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TerminalWire {
    terminal_id: String,
}

impl ToolCallContent {
    /// Parses one content item; anything malformed is kept as `Other`.
    pub fn from_json(raw: Value) -> Self {
        let kind = raw.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        let typed = match kind.as_str() {
            "content" => raw
                .get("content")
                .cloned()
                .map(|block| ToolCallContent::Content(ContentBlock::from_json(block))),
            "diff" => DiffWire::deserialize(&raw).ok().map(|diff| ToolCallContent::Diff {
                path: diff.path,
                old_text: diff.old_text,
                new_text: diff.new_text,
            }),
            "terminal" => TerminalWire::deserialize(&raw)
                .ok()
                .map(|terminal| ToolCallContent::Terminal { terminal_id: terminal.terminal_id }),
            _ => None,
        };
        typed.unwrap_or(ToolCallContent::Other { kind, raw })
    }
}

impl<'de> Deserialize<'de> for ToolCallContent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(ToolCallContent::from_json(Value::deserialize(deserializer)?))
    }
}

/// A file a tool call touches.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ToolCallLocation {
    /// The file (absolute).
    pub path: String,
    /// A line in it, if known.
    #[serde(default)]
    pub line: Option<u64>,
}

/// One entry of the agent's plan.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PlanEntry {
    /// What the step does.
    #[serde(default, deserialize_with = "null_as_default")]
    pub content: String,
    /// How important it is.
    pub priority: PlanEntryPriority,
    /// Where it is.
    pub status: PlanEntryStatus,
}

/// A slash command the agent offers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AvailableCommand {
    /// The command name (without `/`).
    pub name: String,
    /// What it does.
    #[serde(default, deserialize_with = "null_as_default")]
    pub description: String,
    /// Input specification (e.g. `{"hint": ...}`), as sent.
    #[serde(default)]
    pub input: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_without_new_text_is_kept_raw() {
        let raw = json!({"type": "diff", "path": "/a"});
        assert_eq!(
            ToolCallContent::from_json(raw.clone()),
            ToolCallContent::Other { kind: "diff".into(), raw }
        );
    }

    #[test]
    fn tool_call_defaults_kind_and_status() {
        let update = SessionUpdate::from_json(
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Think"}),
        )
        .unwrap();
        let SessionUpdate::ToolCall(call) = update else {
            panic!("expected a tool call, got {update:?}");
        };
        assert_eq!(call.kind, ToolKind::Other("other".into()));
        assert_eq!(call.status, ToolCallStatus::Pending);
        assert!(call.content.is_empty());
    }

    #[test]
    fn missing_kind_is_an_error_and_malformed_known_kind_too() {
        assert!(SessionUpdate::from_json(json!({"content": {}})).is_err());
        let err = SessionUpdate::from_json(json!({"sessionUpdate": "tool_call"})).unwrap_err();
        assert!(err.starts_with("malformed tool_call update"), "{err}");
    }
}
