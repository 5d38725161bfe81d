//! Typed ACP messages exchanged by client calls: initialize, sessions, prompts, config options.
//!
//! Parsing is lenient: unknown fields are ignored, `null` counts as absent, unknown enum values
//! are kept as `Other(..)`, and where the engine may need more than the typed fields the JSON
//! is kept as `raw` or `extra`.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use crate::lenient::{null_as_default, open_enum};

open_enum! {
    /// Why the agent ended a prompt turn.
    pub enum StopReason {
        /// The model finished its answer.
        EndTurn = "end_turn",
        /// The model hit its token limit.
        MaxTokens = "max_tokens",
        /// The agent hit its limit of model requests for one turn.
        MaxTurnRequests = "max_turn_requests",
        /// The model refused.
        Refusal = "refusal",
        /// The client cancelled the turn (`session/cancel`).
        Cancelled = "cancelled",
    }
}

/// A content block in a prompt or in a message chunk.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `{"type": "text", "text": ...}`.
    Text(String),
    /// Any other kind (image, audio, resource, resource_link, ...), kept as sent.
    Other {
        /// The `type` field (empty if absent).
        kind: String,
        /// The whole block.
        raw: Value,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text(text.into())
    }

    /// The text, if this is a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(text) => Some(text),
            ContentBlock::Other { .. } => None,
        }
    }

    /// The block as ACP JSON.
    pub fn to_json(&self) -> Value {
        match self {
            ContentBlock::Text(text) => json!({ "type": "text", "text": text }),
            ContentBlock::Other { raw, .. } => raw.clone(),
        }
    }

    /// Parses a block; anything that is not a well-formed text block is kept as `Other`.
    pub fn from_json(raw: Value) -> Self {
        let kind = raw.get("type").and_then(Value::as_str).unwrap_or_default();
        match (kind, raw.get("text").and_then(Value::as_str)) {
            ("text", Some(text)) => ContentBlock::Text(text.to_owned()),
            _ => ContentBlock::Other { kind: kind.to_owned(), raw },
        }
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(ContentBlock::from_json(Value::deserialize(deserializer)?))
    }
}

/// The answer to `initialize`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The protocol version the agent chose (1 for this crate).
    #[serde(default, deserialize_with = "null_as_default")]
    pub protocol_version: u64,
    /// What the agent supports.
    #[serde(default, deserialize_with = "null_as_default")]
    pub agent_capabilities: AgentCapabilities,
    /// How a user can log in to the agent, standard or not.
    #[serde(default, deserialize_with = "null_as_default")]
    pub auth_methods: Vec<AuthMethod>,
    /// The agent's name and version, if it sent them.
    #[serde(default)]
    pub agent_info: Option<AgentInfo>,
}

/// Capabilities the agent advertised in `initialize`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// The agent supports `session/load`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub load_session: bool,
    /// Content kinds the agent accepts in prompts besides text.
    #[serde(default, deserialize_with = "null_as_default")]
    pub prompt_capabilities: PromptCapabilities,
    /// MCP transports the agent can connect to.
    #[serde(default, deserialize_with = "null_as_default")]
    pub mcp_capabilities: McpCapabilities,
    /// Session methods beyond the basics (`list`, `resume`, `close`, ...), as sent.
    #[serde(default, deserialize_with = "null_as_default")]
    pub session_capabilities: Map<String, Value>,
    /// Capability keys this crate does not know, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl AgentCapabilities {
    /// The agent advertised the session capability `name` (e.g. `"resume"`).
    pub fn has_session_capability(&self, name: &str) -> bool {
        self.session_capabilities
            .get(name)
            .is_some_and(|value| !value.is_null() && value != &Value::Bool(false))
    }
}

/// Prompt content kinds the agent accepts.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    /// Image blocks.
    #[serde(default, deserialize_with = "null_as_default")]
    pub image: bool,
    /// Audio blocks.
    #[serde(default, deserialize_with = "null_as_default")]
    pub audio: bool,
    /// Embedded resource blocks.
    #[serde(default, deserialize_with = "null_as_default")]
    pub embedded_context: bool,
    /// Unknown keys, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// MCP transports the agent supports (stdio is always supported).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpCapabilities {
    /// Streamable HTTP.
    #[serde(default, deserialize_with = "null_as_default")]
    pub http: bool,
    /// Server-sent events.
    #[serde(default, deserialize_with = "null_as_default")]
    pub sse: bool,
    /// Unknown keys, as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One way to authenticate with the agent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "Value")]
pub struct AuthMethod {
    /// The id to pass to `authenticate`.
    pub id: String,
    /// A human-readable name.
    pub name: String,
    /// A longer explanation, if any.
    pub description: Option<String>,
    /// The `type` field: `None` means agent-handled; `terminal`, `env_var` and other
    /// non-standard types are kept as sent.
    pub kind: Option<String>,
    /// The whole method, as sent (for fields like `args` or `vars`).
    pub raw: Value,
}

#[derive(Deserialize)]
struct AuthMethodWire {
    id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

impl TryFrom<Value> for AuthMethod {
    type Error = serde_json::Error;

    fn try_from(raw: Value) -> Result<Self, Self::Error> {
        let wire = AuthMethodWire::deserialize(&raw)?;
        Ok(AuthMethod {
            id: wire.id,
            name: wire.name,
            description: wire.description,
            kind: wire.kind,
            raw,
        })
    }
}

/// The agent's name and version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AgentInfo {
    /// The agent's programmatic name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// The agent's version, if sent.
    #[serde(default)]
    pub version: Option<String>,
    /// A display title, if sent.
    #[serde(default)]
    pub title: Option<String>,
}

/// The answer to `session/new`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResponse {
    /// The ACP session id (the resume token).
    pub session_id: String,
    /// Session modes, if the agent has them.
    #[serde(default)]
    pub modes: Option<SessionModeState>,
    /// Config options, if the agent uses them (current ACP).
    #[serde(default)]
    pub config_options: Option<Vec<ConfigOption>>,
    /// Models, if the agent uses the legacy model API (`session/set_model`).
    #[serde(default)]
    pub models: Option<SessionModelState>,
}

/// The answer to `session/load` (sent after the agent replayed the history).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionResponse {
    /// Session modes, if the agent has them.
    #[serde(default)]
    pub modes: Option<SessionModeState>,
    /// Config options, if the agent uses them.
    #[serde(default)]
    pub config_options: Option<Vec<ConfigOption>>,
    /// Models, if the agent uses the legacy model API.
    #[serde(default)]
    pub models: Option<SessionModelState>,
}

/// The modes a session can be in and the current one.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModeState {
    /// The current mode.
    pub current_mode_id: String,
    /// The modes the agent offers.
    #[serde(default, deserialize_with = "null_as_default")]
    pub available_modes: Vec<SessionMode>,
}

/// One session mode (e.g. `default`, `plan`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SessionMode {
    /// The id to pass to `session/set_mode`.
    pub id: String,
    /// A human-readable name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// A longer explanation, if any.
    #[serde(default)]
    pub description: Option<String>,
}

/// The legacy model state returned by agents that use `session/set_model`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModelState {
    /// The current model.
    pub current_model_id: String,
    /// The models the agent offers.
    #[serde(default, deserialize_with = "null_as_default")]
    pub available_models: Vec<ModelInfo>,
}

/// One model in the legacy model list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// The id to pass to `session/set_model`.
    pub model_id: String,
    /// A human-readable name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// A longer explanation, if any.
    #[serde(default)]
    pub description: Option<String>,
}

/// One session config option (mode, model, thought level, ...).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "Value")]
pub struct ConfigOption {
    /// The id to pass to `session/set_config_option`.
    pub id: String,
    /// A human-readable name.
    pub name: String,
    /// A longer explanation, if any.
    pub description: Option<String>,
    /// The category (`mode`, `model`, `thought_level`, ...), if any.
    pub category: Option<String>,
    /// The `type` field (e.g. `select`).
    pub kind: String,
    /// The current value, as sent.
    pub current_value: Value,
    /// The possible values (flat or grouped), as sent.
    pub options: Value,
    /// The whole option, as sent.
    pub raw: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigOptionWire {
    id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default, rename = "type", deserialize_with = "null_as_default")]
    kind: String,
    #[serde(default)]
    current_value: Value,
    #[serde(default)]
    options: Value,
}

impl TryFrom<Value> for ConfigOption {
    type Error = serde_json::Error;

    fn try_from(raw: Value) -> Result<Self, Self::Error> {
        let wire = ConfigOptionWire::deserialize(&raw)?;
        Ok(ConfigOption {
            id: wire.id,
            name: wire.name,
            description: wire.description,
            category: wire.category,
            kind: wire.kind,
            current_value: wire.current_value,
            options: wire.options,
            raw,
        })
    }
}

/// The answer to `session/prompt`: the turn is over.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    /// Why the turn ended.
    pub stop_reason: StopReason,
    /// Token usage, if the agent sent it (shape varies by agent), as sent.
    #[serde(default)]
    pub usage: Option<Value>,
    /// The `_meta` of the answer, as sent (Gemini puts its token counts here).
    #[serde(default, rename = "_meta")]
    pub meta: Option<Value>,
}

/// The answer to `session/set_config_option`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SetConfigOptionResponse {
    #[serde(default)]
    pub(crate) config_options: Option<Vec<ConfigOption>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_block_keeps_non_text_blocks_raw() {
        let image = json!({"type": "image", "data": "AAAA", "mimeType": "image/png"});
        let block = ContentBlock::from_json(image.clone());
        assert_eq!(block, ContentBlock::Other { kind: "image".into(), raw: image });
        assert_eq!(ContentBlock::text("hi").to_json(), json!({"type": "text", "text": "hi"}));
    }

    #[test]
    fn stop_reason_keeps_unknown_values() {
        let known: PromptResponse =
            serde_json::from_value(json!({"stopReason": "refusal"})).unwrap();
        let unknown: PromptResponse =
            serde_json::from_value(json!({"stopReason": "paused", "usage": {"inputTokens": 3}}))
                .unwrap();
        assert_eq!(known.stop_reason, StopReason::Refusal);
        assert_eq!(unknown.stop_reason, StopReason::Other("paused".into()));
        assert_eq!(unknown.usage, Some(json!({"inputTokens": 3})));
    }

    #[test]
    fn session_capabilities_are_presence_based() {
        let caps: AgentCapabilities = serde_json::from_value(json!({
            "sessionCapabilities": {"resume": {}, "list": null}
        }))
        .unwrap();
        assert!(caps.has_session_capability("resume"));
        assert!(!caps.has_session_capability("list"));
        assert!(!caps.has_session_capability("close"));
    }
}
