//! Per-agent quirks: one normalized view of things real agents send in different shapes.
//!
//! Each function takes the lenient typed message (or the raw JSON) and returns a view the
//! engine can use without knowing which agent sent it:
//! - [`auth_method_view`]: standard, `terminal`, `env_var` and untyped auth methods, with the
//!   exact command or variables to set when the agent says them;
//! - [`model_list`]: `configOptions` with a `model` category or the legacy `models`;
//! - [`prompt_usage`]: token usage some agents put in the `session/prompt` answer;
//! - [`is_noise_chunk`]: agent chatter that is not part of the answer (Codex's model metadata
//!   warning);
//! - [`mcp_launch`]: what an agent needs at launch so that the MCP servers handed to it in
//!   `session/new` reach its model's tool list (Qwen Code's deferred tools).

use serde_json::{Value, json};

use crate::schema::{AuthMethod, ConfigOption, PromptResponse, SessionModelState};
use crate::update::SessionUpdate;

/// An auth method as the engine shows it to a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthMethodView {
    /// The id to pass to `authenticate`.
    pub id: String,
    /// A human-readable name (the id when the agent sent none).
    pub name: String,
    /// A longer explanation, if any.
    pub description: Option<String>,
    /// The `type` as sent (`terminal`, `env_var`, ...); `agent` when absent (ACP's default).
    pub kind: String,
    /// The exact command to run in a terminal, when the agent tells it.
    pub command: Option<String>,
    /// Environment variables that provide the credential, when the agent tells them.
    pub env_vars: Vec<String>,
}

impl AuthMethodView {
    /// `{id, name, description, type, command?, env_vars?}` for `last_error.details`.
    pub fn to_json(&self) -> Value {
        let mut value = json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "type": self.kind,
        });
        if let Some(object) = value.as_object_mut() {
            if let Some(command) = &self.command {
                object.insert("command".to_owned(), json!(command));
            }
            if !self.env_vars.is_empty() {
                object.insert("env_vars".to_owned(), json!(self.env_vars));
            }
        }
        value
    }
}

/// Normalizes one auth method. `agent_command` is how the agent was started (program and
/// arguments): a `terminal` method without its own command runs the agent's command with the
/// method's `args` appended (ACP terminal auth).
pub fn auth_method_view(method: &AuthMethod, agent_command: &[String]) -> AuthMethodView {
    let raw = &method.raw;
    let kind = method.kind.clone().filter(|k| !k.is_empty()).unwrap_or_else(|| "agent".into());
    let command = meta_terminal_command(raw).or_else(|| {
        (kind == "terminal").then(|| {
            let args = string_list(raw.get("args"));
            join_command(agent_command.iter().cloned().chain(args))
        })
    });
    let mut env_vars: Vec<String> = Vec::new();
    if let Some(name) = raw.get("varName").and_then(Value::as_str) {
        env_vars.push(name.to_owned());
    }
    if let Some(vars) = raw.get("vars").and_then(Value::as_array) {
        env_vars.extend(
            vars.iter()
                .filter_map(|v| v.as_str().or_else(|| v.get("name").and_then(Value::as_str)))
                .map(str::to_owned),
        );
    }
    if env_vars.is_empty() {
        env_vars.extend(method.description.as_deref().and_then(described_env_var));
    }
    // Gemini: `_meta: {"api-key": {"provider": "google"}}` on its API key method.
    if env_vars.is_empty() && raw.pointer("/_meta/api-key/provider") == Some(&json!("google")) {
        env_vars.push("GEMINI_API_KEY".to_owned());
    }
    AuthMethodView {
        id: method.id.clone(),
        name: if method.name.is_empty() { method.id.clone() } else { method.name.clone() },
        description: method.description.clone(),
        kind,
        command,
        env_vars,
    }
}

/// `_meta["terminal-auth"] {command, args}` (Claude's extension for terminal logins).
fn meta_terminal_command(raw: &Value) -> Option<String> {
    let terminal = raw.get("_meta")?.get("terminal-auth")?;
    let command = terminal.get("command")?.as_str()?.to_owned();
    let args = string_list(terminal.get("args"));
    Some(join_command(std::iter::once(command).chain(args)))
}

/// "Requires setting the `GEMINI_API_KEY` environment variable" (Gemini, Codex).
fn described_env_var(description: &str) -> Option<String> {
    if !description.contains("environment variable") {
        return None;
    }
    let start = description.find('`')? + 1;
    let len = description[start..].find('`')?;
    let name = &description[start..start + len];
    let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then(|| name.to_owned())
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Joins a command line, quoting words a shell would split.
fn join_command(words: impl Iterator<Item = String>) -> String {
    words
        .filter(|w| !w.is_empty())
        .map(|w| {
            let plain = w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@+,".contains(c));
            if plain { w } else { format!("'{}'", w.replace('\'', r"'\''")) }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One selectable model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    /// The value to select it.
    pub id: String,
    /// A human-readable name.
    pub name: String,
    /// A longer explanation, if any.
    pub description: Option<String>,
}

/// How the agent lets the client switch models.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSwitch {
    /// `session/set_config_option` with this config id.
    ConfigOption(String),
    /// Legacy `session/set_model`.
    SetModel,
}

/// The models of a session, whichever API the agent uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelList {
    /// The current model, if known.
    pub current: Option<String>,
    /// The models offered.
    pub available: Vec<ModelChoice>,
    /// How to switch.
    pub switch: ModelSwitch,
}

impl ModelList {
    /// The list as a `model` config option (`select`, category `model`), so that an agent on
    /// the legacy API shows its models like one on `configOptions`. `current` overrides the
    /// current value (a model the client has just set).
    pub fn as_config_option(&self, current: Option<&str>) -> ConfigOption {
        let id = match &self.switch {
            ModelSwitch::ConfigOption(id) => id.clone(),
            ModelSwitch::SetModel => "model".to_owned(),
        };
        let options: Vec<Value> = self
            .available
            .iter()
            .map(|m| json!({"value": m.id, "name": m.name, "description": m.description}))
            .collect();
        let raw = json!({
            "id": id,
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": current.or(self.current.as_deref()),
            "options": options,
        });
        ConfigOption {
            id,
            name: "Model".to_owned(),
            description: None,
            category: Some("model".to_owned()),
            kind: "select".to_owned(),
            current_value: raw["currentValue"].clone(),
            options: raw["options"].clone(),
            raw,
        }
    }
}

/// One model list from `configOptions` (an option of category `model`, or id `model`) or, if
/// there is none, the legacy `models {availableModels, currentModelId}`.
pub fn model_list(
    config_options: &[ConfigOption],
    legacy: Option<&SessionModelState>,
) -> Option<ModelList> {
    let option = config_options
        .iter()
        .find(|o| o.category.as_deref() == Some("model"))
        .or_else(|| config_options.iter().find(|o| o.id == "model"));
    if let Some(option) = option {
        return Some(ModelList {
            current: option.current_value.as_str().map(str::to_owned),
            available: select_values(&option.options),
            switch: ModelSwitch::ConfigOption(option.id.clone()),
        });
    }
    let legacy = legacy?;
    Some(ModelList {
        current: Some(legacy.current_model_id.clone()).filter(|id| !id.is_empty()),
        available: legacy
            .available_models
            .iter()
            .map(|m| ModelChoice {
                id: m.model_id.clone(),
                name: if m.name.is_empty() { m.model_id.clone() } else { m.name.clone() },
                description: m.description.clone(),
            })
            .collect(),
        switch: ModelSwitch::SetModel,
    })
}

/// The values of a `select` option: flat `[{value, name}]` or grouped `[{group, options}]`.
fn select_values(options: &Value) -> Vec<ModelChoice> {
    let Some(items) = options.as_array() else { return vec![] };
    let mut out = vec![];
    for item in items {
        if let Some(nested) = item.get("options").filter(|o| o.is_array()) {
            out.extend(select_values(nested));
            continue;
        }
        let Some(id) = item.get("value").or_else(|| item.get("id")).and_then(Value::as_str) else {
            continue;
        };
        out.push(ModelChoice {
            id: id.to_owned(),
            name: item.get("name").and_then(Value::as_str).unwrap_or(id).to_owned(),
            description: item.get("description").and_then(Value::as_str).map(str::to_owned),
        });
    }
    out
}

/// Token usage of one turn, from whichever keys the agent used.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnUsage {
    /// Input (prompt) tokens.
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens.
    pub output_tokens: Option<u64>,
    /// Tokens read from the prompt cache.
    pub cached_read_tokens: Option<u64>,
    /// Tokens written to the prompt cache.
    pub cached_write_tokens: Option<u64>,
    /// Reasoning tokens.
    pub thought_tokens: Option<u64>,
    /// Total tokens (sent, or input + output).
    pub total_tokens: Option<u64>,
    /// The usage as sent.
    pub raw: Value,
}

impl TurnUsage {
    /// `{input_tokens, output_tokens, cached_read_tokens, cached_write_tokens, thought_tokens,
    /// total_tokens}` for a
    /// `usage` message's metadata.
    pub fn to_json(&self) -> Value {
        json!({
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_read_tokens": self.cached_read_tokens,
            "cached_write_tokens": self.cached_write_tokens,
            "thought_tokens": self.thought_tokens,
            "total_tokens": self.total_tokens,
        })
    }
}

/// The usage in a `session/prompt` answer: `usage` (Claude, Codex), `_meta.quota.token_count`
/// (Gemini) or `_meta.usage`, camelCase or snake_case keys; `None` when absent or without
/// any token count.
pub fn prompt_usage(response: &PromptResponse) -> Option<TurnUsage> {
    let meta = response.meta.as_ref();
    [
        response.usage.as_ref(),
        meta.and_then(|m| m.pointer("/quota/token_count")),
        meta.and_then(|m| m.get("usage")),
    ]
    .into_iter()
    .flatten()
    .find_map(usage_from)
}

/// The usage in any JSON object (see [`prompt_usage`]).
pub fn usage_from(raw: &Value) -> Option<TurnUsage> {
    let number = |keys: &[&str]| keys.iter().find_map(|k| raw.get(*k).and_then(Value::as_u64));
    let input = number(&["inputTokens", "input_tokens", "promptTokens", "prompt_tokens"]);
    let output =
        number(&["outputTokens", "output_tokens", "completionTokens", "completion_tokens"]);
    let cached = number(&["cachedReadTokens", "cached_read_tokens", "cacheReadInputTokens"]);
    let cached_write =
        number(&["cachedWriteTokens", "cached_write_tokens", "cacheCreationInputTokens"]);
    let thought = number(&["thoughtTokens", "thought_tokens", "reasoningTokens"]);
    let total = number(&["totalTokens", "total_tokens"]).or(match (input, output) {
        (Some(i), Some(o)) => Some(i + o),
        _ => None,
    });
    if [input, output, cached, cached_write, thought, total].iter().all(Option::is_none) {
        return None;
    }
    Some(TurnUsage {
        input_tokens: input,
        output_tokens: output,
        cached_read_tokens: cached,
        cached_write_tokens: cached_write,
        thought_tokens: thought,
        total_tokens: total,
        raw: raw.clone(),
    })
}

/// A session update that is agent chatter, not part of the answer: Codex streams a warning
/// "Model metadata for `<model>` not found" as a message chunk when it does not know the
/// model (a custom provider). The engine may log it instead of showing it as the reply.
pub fn is_noise_chunk(update: &SessionUpdate) -> bool {
    let SessionUpdate::AgentMessageChunk { content } = update else { return false };
    let Some(text) = content.as_text() else { return false };
    let text = text.trim_start();
    let text = text.strip_prefix("⚠").unwrap_or(text).trim_start();
    let text = text.strip_prefix("Warning:").unwrap_or(text).trim_start();
    text.strip_prefix("Model metadata for `")
        .and_then(|rest| rest.split_once('`'))
        .is_some_and(|(model, rest)| !model.is_empty() && rest.starts_with(" not found"))
}

/// Arguments and environment an agent is started with, besides its command, so that the MCP
/// servers handed to it in `session/new` reach its model's tool list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct McpLaunch {
    /// Appended to the agent's arguments.
    pub args: &'static [&'static str],
    /// Set unless the profile sets the variable itself.
    pub env: &'static [(&'static str, &'static str)],
}

/// [`McpLaunch`] by agent kind (`AgentKind::as_str`); nothing for most agents.
///
/// Qwen Code 0.24.4 takes the http MCP server, lists its tools (`tools/list`) and registers
/// them as deferred: the model is offered only `tool_search` and `tool_call` and, since
/// discovery runs in the background after `session/new` answers, no reminder names Kandev's
/// tools either. `QWEN_CODE_LEGACY_MCP_BLOCKING=1` makes `session/new` discover the servers
/// before it answers (the first prompt has them); `--exclude-tools tool_search tool_call`
/// (the same as its `tools.toolSearch.enabled: false` setting) turns deferred loading off,
/// so they are declared to the model directly as `mcp__<server>__<tool>`.
pub fn mcp_launch(kind: &str) -> McpLaunch {
    match kind {
        "qwen" => McpLaunch {
            args: &["--exclude-tools", "tool_search", "tool_call"],
            env: &[("QWEN_CODE_LEGACY_MCP_BLOCKING", "1")],
        },
        _ => McpLaunch::default(),
    }
}
