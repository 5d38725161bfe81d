//! Booting an execution: start the agent, `initialize`, `authenticate` when the user chose a
//! method (`session.authenticate`), then `session/load` the resume token (falling back to
//! `session/new` only where rule 30 allows) or `session/new`, then reapply mode and model.
//! An agent that needs credentials ends the boot with `agent_auth_required`: "log in to
//! <agent>" and its auth methods (with the command to run, when the agent says it). A plain
//! async function: the session actor runs it as a child future and gets its result back in
//! its inbox; it touches no actor state.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kandev_acp::quirks::{AuthMethodView, ModelList, ModelSwitch, auth_method_view, model_list};
use kandev_acp::{AcpClient, AcpConfig, AcpError, AgentEvent, ConfigOption, InitializeResponse};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::launcher::{ExecutionControl, LaunchSpec, Launcher};
use crate::mcp::{McpCaps, McpOffer, profile_servers};
use kandev_domain::agent::McpServerConfig;

/// Everything a boot needs, copied out of the actor.
pub struct BootPlan {
    pub spec: LaunchSpec,
    pub resume_token: Option<String>,
    pub mode: Option<String>,
    pub model: Option<String>,
    pub call_timeout: Duration,
    pub stop_grace: Duration,
    /// An auth method to call `authenticate` with before opening the conversation.
    pub authenticate: Option<String>,
    /// Kandev's MCP server for this execution (its token is of this epoch), if served.
    pub mcp: Option<McpOffer>,
    /// The profile's extra MCP servers, handed after Kandev's own.
    pub mcp_servers: Vec<McpServerConfig>,
    /// The agent runs on an SSH executor's host: it is offered no file system or terminal of
    /// this host ([`kandev_acp::AcpConfig::host_tools`]).
    pub remote: bool,
}

/// A live, initialized conversation.
pub struct Booted {
    pub client: AcpClient,
    /// The agent's events, each with the offset in its output where its line ends.
    pub events: UnboundedReceiver<(u64, AgentEvent)>,
    pub control: Arc<dyn ExecutionControl>,
    pub conversation: Conversation,
    /// Set when a runner runs the agent.
    pub runner: Option<crate::launcher::RunnerExec>,
    /// The offset through which the handshake handled the agent's output (the history a
    /// `session/load` replayed and that was dropped).
    pub handled: u64,
}

/// What the handshake established.
pub struct Conversation {
    pub acp_session_id: String,
    /// Whether the previous conversation was reloaded (`session/load`).
    pub loaded: bool,
    pub agent_name: Option<String>,
    pub agent_version: Option<String>,
    pub mode: Option<String>,
    pub config_options: Vec<ConfigOption>,
    /// The name people see ("log in to <it>"): the agent's title, else its name or program.
    pub agent_title: String,
    /// The agent's auth methods as shown in `last_error.details.auth_methods`.
    pub auth_methods: Vec<Value>,
    /// The MCP transports the agent takes besides stdio (`mcpCapabilities`): Kandev's server
    /// goes over http when it may, else through the stdio bridge.
    pub mcp_caps: McpCaps,
    /// The profile's extra MCP servers (as handed, a live reset hands them again) and the
    /// names of the remote ones left out: the agent does not take their transport.
    pub mcp_servers: Vec<McpServerConfig>,
    pub mcp_left_out: Vec<String>,
    pub accepts: kandev_domain::attachment::PromptAccepts,
    /// The modes the agent offers, `[{id, name}]` (the UI's mode picker).
    pub available_modes: Vec<Value>,
}

impl Conversation {
    /// The session's stored `agent_info`: `{name, version, title, auth_methods, modes,
    /// config_options}` (`modes: [{id, name}]`, `config_options: [{id, name, category,
    /// options}]` with `options` as the agent sent them: what the UI's pickers offer).
    pub fn agent_info(&self) -> Value {
        let options: Vec<Value> = self
            .config_options
            .iter()
            .map(|o| json!({ "id": o.id, "name": o.name, "category": o.category, "options": o.options }))
            .collect();
        json!({
            "name": self.agent_name,
            "version": self.agent_version,
            "title": self.agent_title,
            "auth_methods": self.auth_methods,
            "modes": self.available_modes,
            "config_options": options,
        })
    }
}

/// Why a boot failed, for `last_error`.
#[derive(Debug, Clone)]
pub struct BootFailure {
    pub code: &'static str,
    pub message: String,
    pub stderr: String,
    /// Fields for `last_error.details` besides epoch and stderr (e.g. `auth_methods`).
    pub details: Map<String, Value>,
}

impl BootFailure {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        BootFailure { code, message: message.into(), stderr: String::new(), details: Map::new() }
    }

    /// `base` (an object) with this failure's own details added.
    pub fn details_with(&self, mut base: Value) -> Value {
        if let Some(object) = base.as_object_mut() {
            object.extend(self.details.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        base
    }
}

/// Who the agent is, for readable failures.
struct AgentIdentity {
    /// "log in to <name>": the agent's title or name, else the program.
    name: String,
    auth_methods: Vec<AuthMethodView>,
}

impl AgentIdentity {
    fn new(init: &InitializeResponse, spec: &LaunchSpec) -> Self {
        let info = init.agent_info.as_ref();
        let name = info
            .and_then(|i| i.title.clone())
            .filter(|t| !t.trim().is_empty())
            .or_else(|| info.map(|i| i.name.clone()).filter(|n| !n.trim().is_empty()))
            .unwrap_or_else(|| spec.program.clone());
        let command: Vec<String> =
            std::iter::once(spec.program.clone()).chain(spec.args.iter().cloned()).collect();
        let auth_methods =
            init.auth_methods.iter().map(|m| auth_method_view(m, &command)).collect();
        AgentIdentity { name, auth_methods }
    }

    /// `agent_auth_required`: "log in to <agent>: <how>" with the methods in the details.
    fn auth_failure(&self, cause: &str) -> BootFailure {
        let how = match self.auth_methods.iter().find(|m| m.command.is_some()) {
            Some(AuthMethodView { command: Some(command), .. }) => {
                format!("run `{command}` in a terminal, then authenticate again")
            }
            _ => match self.auth_methods.iter().find(|m| !m.env_vars.is_empty()) {
                Some(m) => format!(
                    "log in with one of its methods below, or set {} in the profile's env",
                    m.env_vars.join(" or ")
                ),
                None if self.auth_methods.is_empty() => {
                    "it needs credentials; log in with the agent's own command".to_owned()
                }
                None => "log in with one of its methods below, then authenticate".to_owned(),
            },
        };
        let mut failure = BootFailure::new(
            "agent_auth_required",
            format!("log in to {}: {how} ({cause})", self.name),
        );
        let methods: Vec<Value> = self.auth_methods.iter().map(AuthMethodView::to_json).collect();
        failure.details.insert("agent".to_owned(), json!(self.name));
        failure.details.insert("auth_methods".to_owned(), Value::Array(methods));
        failure
    }
}

/// Boots, unless `cancel` fires first; a cancelled or failed boot leaves no process behind.
pub async fn boot(
    launcher: Arc<dyn Launcher>,
    plan: BootPlan,
    cancel: CancellationToken,
) -> Result<Booted, BootFailure> {
    let program = plan.spec.program.clone();
    let launched = tokio::select! {
        _ = cancel.cancelled() => return Err(BootFailure::new("cancelled", "the start was cancelled")),
        launched = launcher.launch(plan.spec.clone()) => launched,
    }
    .map_err(|message| BootFailure::new("agent_start_failed", message))?;
    let control = launched.control.clone();
    let config = AcpConfig {
        request_timeout: plan.call_timeout,
        host_tools: !plan.remote,
        ..AcpConfig::default()
    };
    let runner = launched.runner;
    let keys = runner.as_ref().map(|r| r.keys.clone());
    let (client, mut events) =
        AcpClient::connect_tagged(launched.reader, launched.writer, config, keys);
    let outcome = tokio::select! {
        _ = cancel.cancelled() => Err(BootFailure::new("cancelled", "the start was cancelled")),
        outcome = handshake(&client, &mut events, &plan, &program) => outcome,
    };
    match outcome {
        Ok((conversation, handled)) => {
            Ok(Booted { client, events, control, conversation, runner, handled })
        }
        Err(mut failure) => {
            client.close();
            control.stop(plan.stop_grace).await;
            failure.stderr = control.stderr_tail();
            Err(failure)
        }
    }
}

async fn handshake(
    client: &AcpClient,
    events: &mut UnboundedReceiver<(u64, AgentEvent)>,
    plan: &BootPlan,
    program: &str,
) -> Result<(Conversation, u64), BootFailure> {
    let init = client.initialize().await.map_err(|e| call_failure("initialize", program, &e))?;
    let agent = AgentIdentity::new(&init, &plan.spec);
    authenticate(client, plan, &agent).await?;
    let cwd = PathBuf::from(&plan.spec.cwd);
    let can_load = init.agent_capabilities.load_session;
    let advertised = &init.agent_capabilities.mcp_capabilities;
    let mcp_caps = McpCaps { http: advertised.http, sse: advertised.sse };
    let mut servers = plan.mcp.as_ref().map(|m| m.servers(mcp_caps.http)).unwrap_or_default();
    let (extra, mcp_left_out) = profile_servers(&plan.mcp_servers, mcp_caps);
    servers.extend(extra);
    let (acp_session_id, loaded, modes, options, models) = match (&plan.resume_token, can_load) {
        (Some(token), true) => match client.load_session(token, &cwd, &servers).await {
            Ok(r) => (token.clone(), true, r.modes, r.config_options, r.models),
            // Rule 30: only a confirmed incompatibility falls back to a new conversation.
            Err(e) if e.is_method_not_found() || e.is_resource_not_found() => {
                new_session(client, &cwd, &servers, &agent).await?
            }
            Err(e) if needs_auth(&e, &agent) => {
                return Err(agent.auth_failure(&said("session/load", &e)));
            }
            Err(e) => return Err(call_failure("session/load", program, &e)),
        },
        _ => new_session(client, &cwd, &servers, &agent).await?,
    };
    // History replayed by session/load is already in the transcript: drop it (the client
    // queues every event read before the response, so all of it is here now).
    let mut handled = 0;
    if loaded {
        while let Ok((at, _)) = events.try_recv() {
            handled = at;
        }
    }
    let mut config_options = options.unwrap_or_default();
    // One model list whichever API the agent uses (quirk: legacy `models`).
    let models = model_list(&config_options, models.as_ref());
    let available_modes: Vec<Value> = modes
        .as_ref()
        .map(|m| m.available_modes.iter().map(|x| json!({ "id": x.id, "name": x.name })).collect())
        .unwrap_or_default();
    let mut mode = modes.map(|m| m.current_mode_id);
    let wanted =
        Preferences { models: models.as_ref(), mode: &mut mode, options: &mut config_options };
    apply_preferences(client, plan, &acp_session_id, wanted, program).await?;
    if let Some(list) = models.filter(|m| m.switch == ModelSwitch::SetModel) {
        config_options.push(list.as_config_option(plan.model.as_deref()));
    }
    let conversation = Conversation {
        acp_session_id,
        loaded,
        agent_name: agent_name(&init),
        agent_version: init.agent_info.as_ref().and_then(|i| i.version.clone()),
        mode,
        config_options,
        agent_title: agent.name.clone(),
        auth_methods: agent.auth_methods.iter().map(AuthMethodView::to_json).collect(),
        mcp_caps,
        mcp_servers: plan.mcp_servers.clone(),
        mcp_left_out,
        available_modes,
        accepts: kandev_domain::attachment::PromptAccepts {
            image: init.agent_capabilities.prompt_capabilities.image,
            embedded_context: init.agent_capabilities.prompt_capabilities.embedded_context,
        },
    };
    Ok((conversation, handled))
}

type NewSession = (
    String,
    bool,
    Option<kandev_acp::SessionModeState>,
    Option<Vec<ConfigOption>>,
    Option<kandev_acp::SessionModelState>,
);

async fn new_session(
    client: &AcpClient,
    cwd: &std::path::Path,
    servers: &[Value],
    agent: &AgentIdentity,
) -> Result<NewSession, BootFailure> {
    let r = client.new_session(cwd, servers).await.map_err(|e| {
        if needs_auth(&e, agent) {
            agent.auth_failure(&said("session/new", &e))
        } else {
            call_failure("session/new", &agent.name, &e)
        }
    })?;
    Ok((r.session_id, false, r.modes, r.config_options, r.models))
}

/// `authenticate` with the method the user chose, if any; an unknown method or a refusal is
/// an `agent_auth_required` failure that lists the methods again.
async fn authenticate(
    client: &AcpClient,
    plan: &BootPlan,
    agent: &AgentIdentity,
) -> Result<(), BootFailure> {
    let Some(method) = &plan.authenticate else { return Ok(()) };
    if !agent.auth_methods.is_empty() && !agent.auth_methods.iter().any(|m| &m.id == method) {
        return Err(agent.auth_failure(&format!("it does not offer the auth method {method:?}")));
    }
    client.authenticate(method).await.map_err(|e| {
        if e.is_timeout() || e.is_closed() {
            call_failure("authenticate", &agent.name, &e)
        } else {
            agent.auth_failure(&said("authenticate", &e))
        }
    })
}

/// The agent needs credentials: -32000, or (a quirk of some agents) another error that says
/// so while the agent offers auth methods.
fn needs_auth(err: &AcpError, agent: &AgentIdentity) -> bool {
    if err.is_auth_required() {
        return true;
    }
    let AcpError::Rpc { message, .. } = err else { return false };
    let message = message.to_ascii_lowercase();
    !agent.auth_methods.is_empty()
        && ["authenticat", "unauthorized", "not logged in", "api key"]
            .iter()
            .any(|hint| message.contains(hint))
}

/// "session/new said: <the agent's message>".
fn said(what: &str, err: &AcpError) -> String {
    match err {
        AcpError::Rpc { message, code, .. } => format!("{what} said: {message} ({code})"),
        other => format!("{what}: {other}"),
    }
}

/// What `apply_preferences` reads and keeps up to date.
struct Preferences<'a> {
    models: Option<&'a ModelList>,
    mode: &'a mut Option<String>,
    /// The agent's config options: replaced by the ones it answers a change with.
    options: &'a mut Vec<ConfigOption>,
}

/// Reapplies the session's model, then mode (rule 27 order).
async fn apply_preferences(
    client: &AcpClient,
    plan: &BootPlan,
    acp_session_id: &str,
    wanted: Preferences<'_>,
    program: &str,
) -> Result<(), BootFailure> {
    let Preferences { models, mode, options } = wanted;
    if let Some(model) = &plan.model {
        let result = match models.map(|m| &m.switch) {
            // Issue 14 defect 14: the options as the agent answers them, so the session shows
            // the model it now uses (not the one `session/new` reported before the change).
            Some(ModelSwitch::ConfigOption(id)) => {
                client.set_config_option(acp_session_id, id, model.clone()).await.map(|answered| {
                    if let Some(answered) = answered {
                        *options = answered;
                    }
                })
            }
            Some(ModelSwitch::SetModel) => client.set_model(acp_session_id, model).await,
            None => Ok(()),
        };
        result.map_err(|e| call_failure("setting the model", program, &e))?;
    }
    // Always reapplied (rule 17): an agent that reports the mode may still have lost it.
    if let Some(wanted) = &plan.mode {
        client
            .set_mode(acp_session_id, wanted)
            .await
            .map_err(|e| call_failure("setting the mode", program, &e))?;
        *mode = Some(wanted.clone());
    }
    Ok(())
}

fn agent_name(init: &InitializeResponse) -> Option<String> {
    init.agent_info.as_ref().map(|i| i.name.clone()).filter(|n| !n.is_empty())
}

/// A readable failure of one protocol call.
fn call_failure(what: &str, program: &str, err: &AcpError) -> BootFailure {
    if err.is_auth_required() {
        return BootFailure::new(
            "agent_auth_required",
            format!("log in to {program}: it needs credentials ({what} said: {err})"),
        );
    }
    if err.is_timeout() {
        return BootFailure::new(
            "agent_timeout",
            format!("{program} did not answer {what} in time; check the agent or try again"),
        );
    }
    if err.is_closed() {
        return BootFailure::new(
            "agent_exited",
            format!("{program} exited during {what}; see its output below"),
        );
    }
    BootFailure::new("agent_start_failed", format!("{program} failed at {what}: {err}"))
}

/// Why a turn failed, for `last_error` (code, message, details): `agent_auth_required` with
/// "log in to <agent>" and the agent's auth methods when it asked for credentials at
/// `session/prompt` (-32000), else `prompt_failed`. `agent_info` is the session's stored
/// [`Conversation::agent_info`].
pub fn turn_failure(
    err: &AcpError,
    agent_info: Option<&str>,
    epoch: i64,
) -> (&'static str, String, Value) {
    if err.is_auth_required() {
        // What the agent said of itself only names it in the message: unreadable, it is left out.
        let info: Value = match agent_info.map(serde_json::from_str::<Value>) {
            Some(Ok(info)) => info,
            Some(Err(err)) => {
                tracing::warn!(error = %err, "the stored agent_info is not JSON");
                Value::Null
            }
            None => Value::Null,
        };
        let name = ["title", "name"]
            .iter()
            .find_map(|key| info.get(*key).and_then(Value::as_str).filter(|n| !n.is_empty()))
            .unwrap_or("the agent")
            .to_owned();
        let message = format!(
            "log in to {name}: it asked for credentials during the turn ({}); log in with one \
             of its methods on the session's page, or resume the session",
            said("session/prompt", err)
        );
        let methods = info.get("auth_methods").cloned().unwrap_or_else(|| json!([]));
        let details = json!({ "epoch": epoch, "agent": name, "auth_methods": methods });
        return ("agent_auth_required", message, details);
    }
    let message = format!("the agent could not complete the turn: {err}");
    ("prompt_failed", message, json!({ "epoch": epoch }))
}
