//! The real agents of the interoperability tests (interop.rs): each one's command in the
//! interop prefix, and how its configuration in the test's private HOME points it at the
//! fake model.

use serde_json::json;

use super::World;
use kandev_testkit::fake_model::{API_KEY, MODEL};

/// A real agent: its command in the interop prefix and how to point it at the fake model.
pub struct Agent {
    pub name: &'static str,
    pub kind: &'static str,
    pub bin: &'static str,
    pub args: &'static [&'static str],
    /// Writes the agent's configuration into the private HOME; returns the profile's env.
    pub configure: fn(&World) -> Vec<(String, String)>,
}

/// OpenCode reads `$XDG_CONFIG_HOME/opencode/opencode.json`; a custom provider using the
/// bundled `@ai-sdk/openai-compatible` SDK talks Chat Completions to the fake. The
/// variables keep it from fetching the models.dev catalogue or checking for updates.
fn configure_opencode(world: &World) -> Vec<(String, String)> {
    let mut config = opencode_style_config(world);
    config["$schema"] = json!("https://opencode.ai/config.json");
    write_opencode_style(world, "opencode", &config);
    [
        ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
        ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The configuration OpenCode and its fork Kilo Code read: the fake as a provider through
/// the bundled `@ai-sdk/openai-compatible` SDK, its model for everything, no autoupdate, no
/// sharing.
fn opencode_style_config(world: &World) -> serde_json::Value {
    json!({
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Kandev fake model",
                "options": {"baseURL": format!("{}/v1", world.fake.url()), "apiKey": API_KEY},
                "models": {MODEL: {"name": "Fake model"}},
            }
        },
        "model": format!("fake/{MODEL}"),
        "small_model": format!("fake/{MODEL}"),
        "autoupdate": false,
        "share": "disabled",
    })
}

/// Writes `config` as `$XDG_CONFIG_HOME/<name>/<name>.json`.
fn write_opencode_style(world: &World, name: &str, config: &serde_json::Value) {
    let dir = world.config_home().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.json")), config.to_string()).unwrap();
}

pub const OPENCODE: Agent = Agent {
    name: "OpenCode",
    kind: "opencode",
    bin: "opencode",
    args: &["acp"],
    configure: configure_opencode,
};

/// Codex reads `$CODEX_HOME/config.toml`; a custom provider speaks the Responses API (the
/// only wire API Codex still supports) to the fake, with the key from `env_key`.
fn configure_codex(world: &World) -> Vec<(String, String)> {
    let codex_home = world.home().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        r#"model = "{MODEL}"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.fake]
name = "Kandev fake model"
base_url = "{}/v1"
env_key = "KANDEV_FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false
"#,
        world.fake.url()
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    vec![
        ("CODEX_HOME".to_owned(), codex_home.display().to_string()),
        ("KANDEV_FAKE_API_KEY".to_owned(), API_KEY.to_owned()),
    ]
}

pub const CODEX: Agent =
    Agent { name: "Codex", kind: "codex", bin: "codex-acp", args: &[], configure: configure_codex };

/// Claude Code (under the ACP adapter) talks the Anthropic Messages API to
/// `ANTHROPIC_BASE_URL`; the other variables turn off its telemetry, error reports and update
/// checks. As root it refuses to skip permissions unless `IS_SANDBOX=1`.
fn configure_claude(world: &World) -> Vec<(String, String)> {
    [
        ("ANTHROPIC_BASE_URL", world.fake.url()),
        ("ANTHROPIC_API_KEY", API_KEY.to_owned()),
        ("ANTHROPIC_MODEL", MODEL.to_owned()),
        ("ANTHROPIC_DEFAULT_HAIKU_MODEL", MODEL.to_owned()),
        ("ANTHROPIC_DEFAULT_SONNET_MODEL", MODEL.to_owned()),
        ("ANTHROPIC_DEFAULT_OPUS_MODEL", MODEL.to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_TELEMETRY", "1".to_owned()),
        ("DISABLE_ERROR_REPORTING", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
        ("IS_SANDBOX", "1".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

pub const CLAUDE: Agent = Agent {
    name: "Claude",
    kind: "claude",
    bin: "claude-agent-acp",
    args: &[],
    configure: configure_claude,
};

/// Gemini CLI without a key: nothing to configure but a private settings file (no usage
/// statistics, no update check); every proxy points at the fake model, so a start that
/// tried to reach Google would show in the fake's log instead of leaving the machine.
fn configure_gemini(world: &World) -> Vec<(String, String)> {
    let dir = world.home().join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = json!({
        "privacy": {"usageStatisticsEnabled": false},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
        "telemetry": {"enabled": false},
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
    // No base URL: with `GOOGLE_GEMINI_BASE_URL` set, Gemini CLI 0.61 counts as configured
    // (a gateway) and opens the session; without it, it answers -32000 at session/new
    // without contacting anything (the proxies point at the fake, which would log it).
    [
        ("GEMINI_CLI_NO_RELAUNCH", "true".to_owned()),
        ("GEMINI_TELEMETRY_ENABLED", "false".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

pub const GEMINI: Agent = Agent {
    name: "Gemini",
    kind: "gemini",
    bin: "gemini",
    args: &["--acp"],
    configure: configure_gemini,
};

/// Qwen Code reads `~/.qwen/settings.json` (auth type `openai`: an OpenAI-compatible
/// endpoint) and the `OPENAI_*` variables, and talks Chat Completions to the fake; the
/// settings turn off its usage statistics, telemetry and update checks.
fn configure_qwen(world: &World) -> Vec<(String, String)> {
    let dir = world.home().join(".qwen");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = json!({
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": MODEL},
        "privacy": {"usageStatisticsEnabled": false},
        "general": {"enableAutoUpdate": false},
        "telemetry": {"enabled": false},
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
    [
        ("OPENAI_BASE_URL", format!("{}/v1", world.fake.url())),
        ("OPENAI_API_KEY", API_KEY.to_owned()),
        ("OPENAI_MODEL", MODEL.to_owned()),
        ("QWEN_CODE_NO_RELAUNCH", "true".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

pub const QWEN: Agent =
    Agent { name: "Qwen", kind: "qwen", bin: "qwen", args: &["--acp"], configure: configure_qwen };

/// Kilo Code's CLI is an OpenCode fork: the same provider configuration, in
/// `$XDG_CONFIG_HOME/kilo/kilo.json`, and `KILO_` variables in place of `OPENCODE_` ones.
/// Without its own gateway (`kilo` provider: it fetches models and notifications from
/// api.kilo.ai) and with telemetry off (PostHog unless `KILO_TELEMETRY_LEVEL=all`).
fn configure_kilo(world: &World) -> Vec<(String, String)> {
    let mut config = opencode_style_config(world);
    config["disabled_providers"] = json!(["kilo"]);
    write_opencode_style(world, "kilo", &config);
    [
        ("KILO_DISABLE_MODELS_FETCH", "1"),
        ("KILO_DISABLE_AUTOUPDATE", "1"),
        ("KILO_DISABLE_LSP_DOWNLOAD", "1"),
        ("KILO_TELEMETRY_LEVEL", "off"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

pub const KILO: Agent =
    Agent { name: "Kilo", kind: "kilo", bin: "kilo", args: &["acp"], configure: configure_kilo };

/// Claude without a key or a base URL: it opens the session and answers -32000 at the first
/// `session/prompt`.
fn configure_claude_without_key(_: &World) -> Vec<(String, String)> {
    [
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("IS_SANDBOX", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

pub const CLAUDE_WITHOUT_KEY: Agent = Agent {
    name: "Claude without a key",
    kind: "claude",
    bin: "claude-agent-acp",
    args: &[],
    configure: configure_claude_without_key,
};

/// What an agent without credentials answers when a session starts (`needs_login` in
/// interop.rs), as recorded from the pinned version.
pub struct Login {
    /// The start of `last_error.message`: "log in to <the agent's title>: ".
    pub prefix: &'static str,
    /// What the message must also say: the command or variable that logs in.
    pub says: &'static str,
    /// The ids of the auth methods in `last_error.details`, in the agent's order.
    pub methods: &'static [&'static str],
    /// A method `session.authenticate` then tries, still without credentials.
    pub authenticate: Option<&'static str>,
}

/// Gemini CLI 0.61 answers -32000 at `session/new`; its API key method names the variable.
pub const GEMINI_LOGIN: Login = Login {
    prefix: "log in to Gemini CLI: ",
    says: "set GEMINI_API_KEY in the profile's env",
    methods: &["oauth-personal", "gemini-api-key", "vertex-ai", "gateway"],
    authenticate: Some("gemini-api-key"),
};

/// GitHub Copilot CLI without a login: nothing to configure; the variable keeps it from
/// downloading a newer version of itself. It reads a token from `COPILOT_GITHUB_TOKEN`,
/// `GH_TOKEN` or `GITHUB_TOKEN`, none of which the test's environment has.
fn configure_copilot(_: &World) -> Vec<(String, String)> {
    vec![("COPILOT_AUTO_UPDATE".to_owned(), "false".to_owned())]
}

pub const COPILOT: Agent = Agent {
    name: "Copilot",
    kind: "copilot",
    bin: "copilot",
    args: &["--acp"],
    configure: configure_copilot,
};

/// Copilot CLI 1.0.102 offers one method, `copilot-login`, whose `_meta["terminal-auth"]`
/// names its platform binary with `login`; `session/new` and `authenticate` answer -32000
/// "Authentication required" without a login.
pub const COPILOT_LOGIN: Login = Login {
    prefix: "log in to Copilot: ",
    says: "/copilot login` in a terminal",
    methods: &["copilot-login"],
    authenticate: Some("copilot-login"),
};

/// Auggie without a login: nothing to configure (it reads a session from
/// `~/.augment/session.json` or `AUGMENT_SESSION_AUTH`, neither of which the test has).
fn configure_auggie(_: &World) -> Vec<(String, String)> {
    vec![]
}

pub const AUGGIE: Agent = Agent {
    name: "Auggie",
    kind: "auggie",
    bin: "auggie",
    args: &["--acp"],
    configure: configure_auggie,
};

/// Auggie 0.36 offers no auth methods and answers `session/new` with -32000 "Authentication
/// required: Auggie does not currently support authenticating over ACP. Please run `auggie
/// login` from your terminal then try again."
pub const AUGGIE_LOGIN: Login = Login {
    prefix: "log in to Auggie Agent: ",
    says: "run `auggie login`",
    methods: &[],
    authenticate: None,
};
