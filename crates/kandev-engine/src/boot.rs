//! Booting an execution: start the agent, `initialize`, then `session/load` the resume token
//! (falling back to `session/new` only where rule 30 allows) or `session/new`, then reapply
//! mode and model. Runs as a child future of the session actor; its result goes back to the
//! actor's inbox.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kandev_acp::{AcpClient, AcpConfig, AcpError, AgentEvent, ConfigOption, InitializeResponse};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use crate::launcher::{ExecutionControl, LaunchSpec, Launcher};

/// Everything a boot needs, copied out of the actor.
pub struct BootPlan {
    pub spec: LaunchSpec,
    pub resume_token: Option<String>,
    pub mode: Option<String>,
    pub model: Option<String>,
    pub call_timeout: Duration,
    pub stop_grace: Duration,
}

/// A live, initialized conversation.
pub struct Booted {
    pub client: AcpClient,
    pub events: UnboundedReceiver<AgentEvent>,
    pub control: Arc<dyn ExecutionControl>,
    pub conversation: Conversation,
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
}

/// Why a boot failed, for `last_error`.
#[derive(Debug, Clone)]
pub struct BootFailure {
    pub code: &'static str,
    pub message: String,
    pub stderr: String,
}

impl BootFailure {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        BootFailure { code, message: message.into(), stderr: String::new() }
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
    let config = AcpConfig { request_timeout: plan.call_timeout, ..AcpConfig::default() };
    let (client, mut events) = AcpClient::connect(launched.reader, launched.writer, config);
    let outcome = tokio::select! {
        _ = cancel.cancelled() => Err(BootFailure::new("cancelled", "the start was cancelled")),
        outcome = handshake(&client, &mut events, &plan, &program) => outcome,
    };
    match outcome {
        Ok(conversation) => Ok(Booted { client, events, control, conversation }),
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
    events: &mut UnboundedReceiver<AgentEvent>,
    plan: &BootPlan,
    program: &str,
) -> Result<Conversation, BootFailure> {
    let init = client.initialize().await.map_err(|e| call_failure("initialize", program, &e))?;
    let cwd = PathBuf::from(&plan.spec.cwd);
    let can_load = init.agent_capabilities.load_session;
    let (acp_session_id, loaded, modes, options, models) = match (&plan.resume_token, can_load) {
        (Some(token), true) => match client.load_session(token, &cwd).await {
            Ok(r) => (token.clone(), true, r.modes, r.config_options, r.models),
            // Rule 30: only a confirmed incompatibility falls back to a new conversation.
            Err(e) if e.is_method_not_found() || e.is_resource_not_found() => {
                new_session(client, &cwd, program).await?
            }
            Err(e) => return Err(call_failure("session/load", program, &e)),
        },
        _ => new_session(client, &cwd, program).await?,
    };
    // History replayed by session/load is already in the transcript: drop it (the client
    // queues every event read before the response, so all of it is here now).
    if loaded {
        while events.try_recv().is_ok() {}
    }
    let config_options = options.unwrap_or_default();
    let uses_legacy_models =
        models.is_some() && !config_options.iter().any(|o| o.category.as_deref() == Some("model"));
    let mut mode = modes.map(|m| m.current_mode_id);
    apply_preferences(
        client,
        plan,
        &acp_session_id,
        &config_options,
        uses_legacy_models,
        &mut mode,
        program,
    )
    .await?;
    Ok(Conversation {
        acp_session_id,
        loaded,
        agent_name: agent_name(&init),
        agent_version: init.agent_info.as_ref().and_then(|i| i.version.clone()),
        mode,
        config_options,
    })
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
    program: &str,
) -> Result<NewSession, BootFailure> {
    let r = client.new_session(cwd).await.map_err(|e| call_failure("session/new", program, &e))?;
    Ok((r.session_id, false, r.modes, r.config_options, r.models))
}

/// Reapplies the session's model, then mode (rule 27 order).
async fn apply_preferences(
    client: &AcpClient,
    plan: &BootPlan,
    acp_session_id: &str,
    options: &[ConfigOption],
    legacy_models: bool,
    mode: &mut Option<String>,
    program: &str,
) -> Result<(), BootFailure> {
    if let Some(model) = &plan.model {
        let result = match options
            .iter()
            .find(|o| o.category.as_deref() == Some("model") || o.id == "model")
        {
            Some(option) => client
                .set_config_option(acp_session_id, &option.id, model.clone())
                .await
                .map(|_| ()),
            None if legacy_models => client.set_model(acp_session_id, model).await,
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
