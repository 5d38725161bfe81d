//! Per-agent quirks, each checked against a message recorded from a real agent (the literal
//! JSON it sent; the agent and version are named on each).

use kandev_acp::quirks::{
    AuthMethodView, ModelSwitch, auth_method_view, is_noise_chunk, mcp_launch, model_list,
    prompt_usage,
};
use kandev_acp::{InitializeResponse, NewSessionResponse, PromptResponse, SessionUpdate};
use serde_json::{Value, json};

/// `initialize` of claude-agent-acp 0.101.0 (client advertising `auth.terminal`), private HOME.
const CLAUDE_INITIALIZE: &str = r#"{"protocolVersion":1,"agentCapabilities":{"_meta":{"claudeCode":{"promptQueueing":true},"authStatus":{}},"promptCapabilities":{"image":true,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":true},"auth":{"logout":{}},"providers":{},"loadSession":true,"sessionCapabilities":{"additionalDirectories":{},"close":{},"delete":{},"fork":{},"list":{},"resume":{},"systemPrompt":{"mode":{"override":{}}}}},"agentInfo":{"name":"@agentclientprotocol/claude-agent-acp","title":"Claude Agent","version":"0.101.0"},"authMethods":[{"description":"Use Claude subscription ","name":"Claude Subscription","id":"claude-ai-login","type":"terminal","args":["--cli","auth","login","--claudeai"]},{"description":"Use Anthropic Console (API usage billing)","name":"Anthropic Console","id":"console-login","type":"terminal","args":["--cli","auth","login","--console"]}],"_meta":{"steering":{"supported":true}}}"#;

/// `initialize` of codex-acp 0.16.0: `env_var` methods with `vars`, one untyped method.
const CODEX_INITIALIZE: &str = r#"{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true,"audio":false,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":false,"acp":false},"sessionCapabilities":{"list":{},"resume":{},"close":{}},"auth":{"logout":{}}},"authMethods":[{"id":"chatgpt","name":"Login with ChatGPT","description":"Use your ChatGPT login with Codex CLI (requires a paid ChatGPT subscription)"},{"type":"env_var","id":"codex-api-key","name":"Use CODEX_API_KEY","description":"Requires setting the `CODEX_API_KEY` environment variable.","vars":[{"name":"CODEX_API_KEY"}]},{"type":"env_var","id":"openai-api-key","name":"Use OPENAI_API_KEY","description":"Requires setting the `OPENAI_API_KEY` environment variable.","vars":[{"name":"OPENAI_API_KEY"}]}],"agentInfo":{"name":"codex-acp","title":"Codex","version":"0.16.0"}}"#;

/// `initialize` of Gemini CLI 0.61.0 (`gemini --acp`, no key, no network): untyped methods,
/// the API key one marked only by `_meta`.
const GEMINI_INITIALIZE: &str = r#"{"protocolVersion":1,"authMethods":[{"id":"oauth-personal","name":"Log in with Google","description":"Log in with your Google account"},{"id":"gemini-api-key","name":"Gemini API key","description":"Use an API key with Gemini Developer API","_meta":{"api-key":{"provider":"google"}}},{"id":"vertex-ai","name":"Vertex AI","description":"Use an API key with Vertex AI GenAI API"},{"id":"gateway","name":"AI API Gateway","description":"Use a custom AI API Gateway","_meta":{"gateway":{"protocol":"google","restartRequired":"false"}}}],"agentInfo":{"name":"gemini-cli","title":"Gemini CLI","version":"0.61.0"},"agentCapabilities":{"loadSession":true,"promptCapabilities":{"image":true,"audio":true,"embeddedContext":true},"mcpCapabilities":{"http":true,"sse":true}}}"#;

/// `initialize` of OpenCode 1.18.33: the login command only in the description.
const OPENCODE_INITIALIZE: &str = r#"{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"http":true,"sse":true},"promptCapabilities":{"embeddedContext":true,"image":true},"sessionCapabilities":{"close":{},"fork":{},"list":{},"resume":{}}},"authMethods":[{"description":"Run `opencode auth login` in the terminal","name":"Login with opencode","id":"opencode-login"}],"agentInfo":{"name":"OpenCode","version":"1.18.33"}}"#;

fn init(text: &str) -> InitializeResponse {
    serde_json::from_str(text).expect("a recorded initialize parses")
}

fn views(text: &str, command: &[&str]) -> Vec<AuthMethodView> {
    let command: Vec<String> = command.iter().map(|w| (*w).to_owned()).collect();
    init(text).auth_methods.iter().map(|m| auth_method_view(m, &command)).collect()
}

#[test]
fn claude_terminal_methods_show_the_exact_command_to_run() {
    let methods = views(CLAUDE_INITIALIZE, &["claude-agent-acp"]);
    assert_eq!(methods.len(), 2);
    assert_eq!(methods[0].kind, "terminal");
    assert_eq!(
        methods[0].command.as_deref(),
        Some("claude-agent-acp --cli auth login --claudeai"),
        "the agent's command with the method's args"
    );
    assert_eq!(methods[1].command.as_deref(), Some("claude-agent-acp --cli auth login --console"));
    let shown = methods[0].to_json();
    assert_eq!(shown["id"], "claude-ai-login");
    assert_eq!(shown["name"], "Claude Subscription");
    assert_eq!(shown["type"], "terminal");
}

#[test]
fn claude_meta_terminal_auth_command_wins_over_the_agent_command() {
    // The `_meta["terminal-auth"]` shape claude-agent-acp sends to clients advertising it.
    let method = json!({"description": "Use Claude subscription ", "name": "Claude Subscription",
        "id": "claude-ai-login", "type": "terminal", "args": ["--cli", "auth", "login", "--claudeai"],
        "_meta": {"terminal-auth": {"command": "/usr/bin/node",
            "args": ["/opt/claude agent/dist/index.js", "--cli", "auth", "login", "--claudeai"],
            "label": "Claude Login"}}});
    let method = serde_json::from_value(method).unwrap();
    let view = auth_method_view(&method, &["claude-agent-acp".to_owned()]);
    assert_eq!(
        view.command.as_deref(),
        Some("/usr/bin/node '/opt/claude agent/dist/index.js' --cli auth login --claudeai"),
        "words with spaces are quoted"
    );
}

#[test]
fn codex_env_var_methods_are_kept_with_their_type_and_variables() {
    let methods = views(CODEX_INITIALIZE, &["codex-acp"]);
    let kinds: Vec<&str> = methods.iter().map(|m| m.kind.as_str()).collect();
    assert_eq!(kinds, ["agent", "env_var", "env_var"], "non-standard types are kept as sent");
    assert_eq!(methods[1].env_vars, ["CODEX_API_KEY"]);
    assert_eq!(methods[2].env_vars, ["OPENAI_API_KEY"]);
    assert_eq!(methods[0].command, None, "an agent-handled method has no command");
    assert_eq!(methods[1].to_json()["env_vars"], json!(["CODEX_API_KEY"]));
    assert_eq!(methods[1].to_json()["type"], "env_var");
}

#[test]
fn gemini_untyped_methods_default_to_agent_and_its_api_key_method_names_the_variable() {
    let methods = views(GEMINI_INITIALIZE, &["gemini", "--acp"]);
    let ids: Vec<&str> = methods.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["oauth-personal", "gemini-api-key", "vertex-ai", "gateway"]);
    assert!(methods.iter().all(|m| m.kind == "agent"), "missing type means agent-handled");
    assert_eq!(methods[1].env_vars, ["GEMINI_API_KEY"]);
    assert!(methods[0].env_vars.is_empty());
    assert_eq!(init(GEMINI_INITIALIZE).agent_info.unwrap().version.as_deref(), Some("0.61.0"));
}

#[test]
fn a_method_without_type_or_name_is_kept_not_refused() {
    let methods = views(OPENCODE_INITIALIZE, &["opencode", "acp"]);
    assert_eq!(methods[0].kind, "agent");
    assert_eq!(
        methods[0].description.as_deref(),
        Some("Run `opencode auth login` in the terminal")
    );
    let bare = serde_json::from_value(json!({"id": "x-login", "type": null})).unwrap();
    let view = auth_method_view(&bare, &[]);
    assert_eq!((view.name.as_str(), view.kind.as_str()), ("x-login", "agent"));
}

/// `session/new` models in the legacy shape Gemini CLI 0.61.0 builds (`buildAvailableModels`:
/// `{modelId, name, description}`, description dropped when undefined).
const GEMINI_NEW_SESSION: &str = r#"{"sessionId":"5b8f3c1e-2d4a-4e1b-9c7f-0a6d2e8b1f34","modes":{"availableModes":[{"id":"default","name":"Default","description":"Prompts for approval"},{"id":"autoEdit","name":"Auto Edit","description":"Auto-approves edit tools"},{"id":"yolo","name":"YOLO","description":"Auto-approves all tools"}],"currentModeId":"default"},"models":{"availableModels":[{"modelId":"auto-gemini-2.5","name":"Auto (Gemini 2.5)","description":"Let Gemini CLI decide the best model for the task: gemini-2.5-pro, gemini-2.5-flash"},{"modelId":"gemini-2.5-pro","name":"gemini-2.5-pro"},{"modelId":"gemini-2.5-flash","name":"gemini-2.5-flash"},{"modelId":"gemini-2.5-flash-lite","name":"gemini-2.5-flash-lite"}],"currentModelId":"auto-gemini-2.5"}}"#;

/// `session/new` with a `model` config option (current ACP), as the mock agent and
/// claude-agent-acp send it; the legacy `models` is present too and must not win.
const CONFIG_NEW_SESSION: &str = r#"{"sessionId":"s1","configOptions":[{"id":"mode","name":"Mode","category":"mode","type":"select","currentValue":"default","options":[{"value":"default","name":"Default"},{"value":"plan","name":"Plan"}]},{"id":"model","name":"Model","category":"model","type":"select","currentValue":"sonnet","options":[{"group":"Claude","name":"Claude","options":[{"value":"sonnet","name":"Sonnet","description":"Fast"},{"value":"opus","name":"Opus"}]}]}],"models":{"availableModels":[{"modelId":"legacy","name":"Legacy"}],"currentModelId":"legacy"}}"#;

#[test]
fn legacy_models_become_the_model_list() {
    let new: NewSessionResponse = serde_json::from_str(GEMINI_NEW_SESSION).unwrap();
    let list = model_list(&new.config_options.unwrap_or_default(), new.models.as_ref()).unwrap();
    assert_eq!(list.switch, ModelSwitch::SetModel);
    assert_eq!(list.current.as_deref(), Some("auto-gemini-2.5"));
    let ids: Vec<&str> = list.available.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        ["auto-gemini-2.5", "gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"]
    );
    assert_eq!(list.available[0].name, "Auto (Gemini 2.5)");
}

#[test]
fn a_model_config_option_wins_over_legacy_models_and_groups_are_flattened() {
    let new: NewSessionResponse = serde_json::from_str(CONFIG_NEW_SESSION).unwrap();
    let options = new.config_options.unwrap();
    let list = model_list(&options, new.models.as_ref()).unwrap();
    assert_eq!(list.switch, ModelSwitch::ConfigOption("model".into()));
    assert_eq!(list.current.as_deref(), Some("sonnet"));
    let ids: Vec<&str> = list.available.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["sonnet", "opus"]);
    assert_eq!(list.available[0].description.as_deref(), Some("Fast"));
    assert!(model_list(&[], None).is_none(), "no models at all");
}

#[test]
fn claude_usage_in_the_prompt_answer_becomes_a_turn_usage() {
    // claude-agent-acp 0.101.0 `turnOutcome`: usage from its session accumulators.
    let answer = r#"{"stopReason":"end_turn","usage":{"inputTokens":1843,"outputTokens":97,"cachedReadTokens":12288,"cachedWriteTokens":0,"totalTokens":14228},"_meta":{}}"#;
    let response: PromptResponse = serde_json::from_str(answer).unwrap();
    let usage = prompt_usage(&response).unwrap();
    assert_eq!(usage.input_tokens, Some(1843));
    assert_eq!(usage.output_tokens, Some(97));
    assert_eq!(usage.cached_read_tokens, Some(12288));
    assert_eq!(usage.total_tokens, Some(14228), "the agent's own total is kept");
    assert_eq!(usage.to_json()["total_tokens"], 14228);
}

#[test]
fn gemini_usage_in_meta_quota_becomes_a_turn_usage() {
    // Gemini CLI 0.61.0: token counts under `_meta.quota`, no `usage`.
    let answer = r#"{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":5120,"output_tokens":211},"model_usage":[{"model":"gemini-2.5-flash","token_count":{"input_tokens":5120,"output_tokens":211}}]}}}"#;
    let response: PromptResponse = serde_json::from_str(answer).unwrap();
    let usage = prompt_usage(&response).unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (Some(5120), Some(211)));
    assert_eq!(usage.total_tokens, Some(5331), "input + output when no total is sent");
}

#[test]
fn a_prompt_answer_without_token_counts_has_no_usage() {
    let plain: PromptResponse = serde_json::from_str(r#"{"stopReason":"end_turn"}"#).unwrap();
    assert!(prompt_usage(&plain).is_none());
    let empty: PromptResponse =
        serde_json::from_str(r#"{"stopReason":"cancelled","usage":{},"_meta":null}"#).unwrap();
    assert!(prompt_usage(&empty).is_none());
}

fn update(raw: Value) -> SessionUpdate {
    SessionUpdate::from_json(raw).unwrap()
}

#[test]
fn codex_model_metadata_warning_is_noise_not_the_answer() {
    // codex-acp 0.16.0 with a custom provider's model it has no metadata for.
    let warning = update(
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text",
        "text": "Model metadata for `kandev-fake-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}),
    );
    assert!(is_noise_chunk(&warning));
    let answer = update(json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "Model metadata for this repo is in models.json; it was not found before."}}));
    assert!(!is_noise_chunk(&answer), "only the warning's exact shape is noise");
    let thought = update(json!({"sessionUpdate": "agent_thought_chunk",
        "content": {"type": "text", "text": "Model metadata for `x` not found."}}));
    assert!(!is_noise_chunk(&thought));
}

#[test]
fn legacy_models_are_shown_as_a_model_config_option() {
    let new: NewSessionResponse = serde_json::from_str(GEMINI_NEW_SESSION).unwrap();
    let list = model_list(&[], new.models.as_ref()).unwrap();
    let option = list.as_config_option(None);
    assert_eq!((option.id.as_str(), option.category.as_deref()), ("model", Some("model")));
    assert_eq!(option.current_value, "auto-gemini-2.5");
    assert_eq!(option.options[1]["value"], "gemini-2.5-pro");
    assert_eq!(list.as_config_option(Some("gemini-2.5-flash")).current_value, "gemini-2.5-flash");
    let reparsed = model_list(std::slice::from_ref(&option), None).unwrap();
    assert_eq!(reparsed.available, list.available, "the option lists the same models");
}

/// Qwen Code 0.24.4 (`qwen --acp`), handed Kandev's http MCP server in `session/new`, called
/// its `tools/list` but offered the model only `tool_search` and `tool_call` of it (the fake
/// model's record of the first request's tools: `agent, ask_user_question, edit, ..., skill,
/// tool_call, tool_search, update_goal, write_file`); started with [`mcp_launch`]'s arguments
/// and environment, the first request declares `mcp__kandev__create_task` among its tools
/// (`crates/kandev/tests/interop.rs`, `i51_1_qwen_creates_a_task_through_kandevs_mcp`).
#[test]
fn i51_qwen_is_started_so_that_kandevs_mcp_tools_are_declared_to_its_model() {
    let qwen = mcp_launch("qwen");
    assert_eq!(qwen.args, ["--exclude-tools", "tool_search", "tool_call"]);
    assert_eq!(qwen.env, [("QWEN_CODE_LEGACY_MCP_BLOCKING", "1")]);
    for other in ["claude", "codex", "gemini", "opencode", "kilo", "custom", "mock"] {
        assert_eq!(mcp_launch(other), Default::default(), "{other}");
    }
}
