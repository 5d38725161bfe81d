//! Starting the session's agent: binding the session to a new execution (epoch,
//! `STARTING`), preparing its working directory and booting the agent as one child future
//! ([`crate::handshake`]), then going live, or recording why it failed. Resuming is a
//! restart on the saved conversation or a new one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kandev_acp::AgentEvent;
use kandev_domain::agent::{AgentKind, AgentProfile, McpServerConfig};
use kandev_domain::message_meta::{ErrorMeta, StatusNote};
use kandev_domain::session::SessionState;
use kandev_domain::transcript::Message;
use kandev_runtime::site::{RemoteSite, Site};
use kandev_store::{RuntimeRecord, SessionUpdate, StoreError, WriteTx};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::command::Command;
use crate::error::{EngineError, Result};
use crate::handshake::{self, BootFailure, BootPlan, Booted};
use crate::launcher::{ExecutionControl, LaunchSpec, Launcher};
use crate::session::state::{Boot, Live, Phase, SessionActor, Taken};
use crate::sites::{self, Placement, RunnerLauncher};
use crate::workdir::prepare::prepare_for_start;
use crate::write::add_message;

/// A start bound to the session (epoch, `STARTING`) whose boot is not spawned yet.
pub(crate) struct NewBoot {
    epoch: i64,
    /// The session's first start: a reused worktree is announced.
    first: bool,
    spec: LaunchSpec,
    mcp_servers: Vec<McpServerConfig>,
    /// The execution's MCP token, stored (as its hash) with the new epoch.
    mcp: Option<crate::mcp::McpOffer>,
}

impl SessionActor {
    /// `session.launch` without a prompt: starts the agent unless one runs or starts.
    pub(super) async fn start(&mut self) -> Result<()> {
        match (&self.phase, self.session.state) {
            (Phase::Idle, SessionState::Created | SessionState::WaitingForInput) => {
                self.begin_boot(None, false).await
            }
            (Phase::Idle, state) => Err(EngineError::Conflict(format!(
                "the session is {}; resume it instead",
                state.as_str()
            ))),
            _ => Ok(()),
        }
    }

    /// `session.resume`: replace the execution, reloading the saved conversation or starting
    /// a fresh one (rules 17, 28-32).
    pub(super) async fn resume(&mut self, fresh: bool) -> Result<()> {
        if self.phase.turn().is_some() {
            return Err(EngineError::Busy("a turn is running; cancel it before resuming".into()));
        }
        if self.phase.is_resetting() {
            return Err(EngineError::ResetInProgress(
                "the agent's context is being reset; resume when it has finished".into(),
            ));
        }
        self.stop_execution(true).await;
        if matches!(self.session.state, SessionState::Starting) {
            self.commit(
                SessionUpdate {
                    state: Some(SessionState::WaitingForInput),
                    ..SessionUpdate::default()
                },
                None,
            )
            .await?;
        }
        // Rule 31: the saved token stays until a new conversation has replaced it.
        self.begin_boot(None, fresh).await
    }

    pub(super) async fn profile(&self) -> Result<Option<AgentProfile>> {
        match &self.session.agent_profile_id {
            Some(id) => match self.inner.store.get_profile(id).await {
                Ok(profile) => Ok(Some(profile)),
                Err(StoreError::NotFound { .. }) => Ok(None),
                Err(err) => Err(err.into()),
            },
            None => Ok(None),
        }
    }

    /// What runs for the session's profile: its own command, else its kind's default
    /// ([`AgentKind::default_command`]); the built-in mock (no profile, or the Mock kind
    /// without a command) runs as configured, marked so a launcher may run it in-process.
    fn launch_spec(&self, profile: Option<&AgentProfile>) -> LaunchSpec {
        let cwd = PathBuf::from(&self.session.cwd);
        let mock = &self.inner.config.mock_agent;
        let builtin_mock = |extra: &[String]| {
            let flags: Vec<String> = mock.flags.iter().chain(extra).cloned().collect();
            let args = mock.args.iter().chain(&flags).cloned().collect();
            (mock.program.clone(), args, Some(flags))
        };
        let Some(profile) = profile else {
            let (program, args, builtin_mock) = builtin_mock(&[]);
            return LaunchSpec {
                program,
                args,
                env: vec![],
                cwd,
                builtin_mock,
                secrets: vec![],
                secret_names: vec![],
            };
        };
        let env = profile.env.iter().map(|e| (e.name.clone(), e.value.clone())).collect();
        let (program, args, builtin_mock) = match (profile.kind, profile.command.is_empty()) {
            (AgentKind::Mock, true) => builtin_mock(&profile.args),
            (_, false) => (profile.command.clone(), profile.args.clone(), None),
            (kind, true) => {
                let default = kind.default_command();
                let args = default.args.iter().map(|a| (*a).to_owned());
                // A version Kandev installed (issue 51), checked by `bind_boot`.
                let program = match crate::installs::pinned_program(&self.inner, profile) {
                    Some(path) => path.display().to_string(),
                    None => default.program.to_owned(),
                };
                (program, args.chain(profile.args.iter().cloned()).collect(), None)
            }
        };
        let secrets = crate::mcp::server_secrets(&profile.mcp_servers);
        LaunchSpec { program, args, env, cwd, builtin_mock, secrets, secret_names: vec![] }
    }

    /// The session's profile with the secrets it references put in (issue 50): of each
    /// name, the task's repository's secret, else its workspace's, else the server's. A
    /// missing one refuses the start, saying where to add it. Answers the values too, which
    /// the runtime scrubs from what the agent writes to stderr.
    async fn with_secrets(
        &self,
        profile: Option<AgentProfile>,
    ) -> Result<(Option<AgentProfile>, Vec<String>, Vec<String>)> {
        let Some(profile) = profile else { return Ok((None, vec![], vec![])) };
        let names = crate::secrets::profile_references(&profile);
        if names.is_empty() {
            return Ok((Some(profile), vec![], vec![]));
        }
        let task = self.inner.store.get_task(&self.session.task_id).await?;
        let repository = task.repository_ids.first().map(|r| r.as_str());
        let values =
            crate::secrets::resolve(&self.inner, &names, task.workspace_id.as_str(), repository)
                .await?;
        let scrub = values.values().cloned().collect();
        Ok((Some(crate::secrets::fill_profile(profile, &values)), names, scrub))
    }

    /// Binds the session to a new execution: new epoch, `STARTING`, boot as a child future.
    /// `prompt` is sent once the agent is ready; `fresh` opens a new conversation even
    /// though a resume token exists.
    pub(super) async fn begin_boot(&mut self, prompt: Option<Message>, fresh: bool) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let boot = self.bind_boot(&mut tx).await?;
        self.finish(tx).await?;
        self.spawn_boot(boot, prompt, fresh);
        Ok(())
    }

    /// The writes of a start in the caller's transaction: a new epoch and `STARTING`.
    pub(super) async fn bind_boot(&mut self, tx: &mut WriteTx) -> Result<NewBoot> {
        let first = self.session.state == SessionState::Created;
        self.refuse_without_profile().await?;
        let (profile, secret_names, scrub) = self.with_secrets(self.profile().await?).await?;
        if let Some(profile) = profile.as_ref().filter(|p| p.agent_version.is_some()) {
            // Before the epoch moves: a missing version is the caller's error, not a start.
            let task = self.inner.store.get_task(&self.session.task_id).await?;
            crate::installs::check_pinned_for(&self.inner, profile, &task.repository_ids).await?;
        }
        let mut spec = self.launch_spec(profile.as_ref());
        spec.secret_names = secret_names;
        spec.secrets.extend(scrub);
        let kind = profile.as_ref().map(|p| p.kind);
        let mcp_servers = profile.map(|p| p.mcp_servers).unwrap_or_default();
        let epoch = tx.bump_epoch(&self.session.id, self.session.epoch).await?;
        self.session.epoch = epoch;
        let mcp =
            self.inner.mcp.offer(&self.session.id, epoch, self.inner.config.mcp_bridge.clone());
        if let Some(kind) = kind.filter(|_| mcp.is_some() || !mcp_servers.is_empty()) {
            crate::mcp::with_launch_quirk(kind, &mut spec);
        }
        if let Some(offer) = &mcp {
            tx.add_mcp_grant(&offer.stored_hash(), &self.session.id, epoch).await?;
        }
        self.write(
            tx,
            SessionUpdate { state: Some(SessionState::Starting), ..SessionUpdate::default() },
        )
        .await?;
        Ok(NewBoot { epoch, first, spec, mcp_servers, mcp })
    }

    /// Once [`Self::bind_boot`] is committed: prepares the working directory and boots the
    /// agent as a child future.
    pub(super) fn spawn_boot(&mut self, boot: NewBoot, prompt: Option<Message>, fresh: bool) {
        let NewBoot { epoch, first, mut spec, mcp_servers, mcp } = boot;
        let cancel = CancellationToken::new();
        self.phase = Phase::Booting(Boot { epoch, cancel: cancel.clone(), prompt });
        spec.secrets.extend(mcp.as_ref().map(|offer| offer.token().to_owned()));
        let plan = BootPlan {
            spec,
            resume_token: if fresh { None } else { self.session.resume_token.clone() },
            mode: self.session.session_mode.clone(),
            model: self.session.model.clone(),
            call_timeout: self.inner.config.call_timeout,
            stop_grace: self.inner.config.stop_grace,
            authenticate: self.inner.take_auth_wish(&self.session.id),
            mcp,
            mcp_servers,
            remote: false,
        };
        let launcher = self.inner.launcher.clone();
        let inbox = self.sender();
        let (inner, session) = (self.inner.clone(), self.session.clone());
        self.spawn(async move {
            let prepared = prepare_for_start(&inner, &session, first, &cancel);
            let result = match prepared.await {
                Ok(placement) => match on_host(&inner, &session, placement, launcher, plan).await {
                    Ok((launcher, plan)) => {
                        handshake::boot(launcher, plan, cancel).await.map(Box::new)
                    }
                    Err(failure) => Err(failure),
                },
                Err(failure) => Err(failure),
            };
            let _ = inbox.send(Command::Booted { epoch, result }).await;
        });
    }
}

/// The launcher and plan for where the task's repositories are: an SSH executor's agents
/// start through its link, without Kandev's MCP server (its loopback address does not reach
/// the build host); a container executor's in the task's container (made or started first),
/// where Kandev's MCP server is relayed to the same address (the stdio bridge being the
/// container's own `kandev`). Neither gets this host's files and terminals through ACP. A
/// failure fails the start: never this host instead.
async fn on_host(
    inner: &crate::inner::Inner,
    session: &kandev_domain::transcript::Session,
    placement: Placement,
    launcher: Arc<dyn Launcher>,
    mut plan: BootPlan,
) -> std::result::Result<(Arc<dyn Launcher>, BootPlan), BootFailure> {
    let failed = |message| BootFailure::new("agent_start_failed", message);
    if let Placement::Ssh { executor, .. } | Placement::Container { executor, .. } = &placement {
        allowed_there(executor, &plan.spec.secret_names).map_err(failed)?;
    }
    let launcher: Arc<dyn Launcher> = match placement {
        Placement::Local => return Ok((launcher, plan)),
        Placement::Ssh { executor, settings } => {
            let link = sites::link(inner, &executor, &settings).await.map_err(failed)?;
            let home = settings.remote_home.clone();
            plan.mcp = None;
            // A version Kandev installed (issue 51) runs from the build host's own prefix
            // (`agent.install` with the executor); a task's container mounts this machine's.
            if let Ok(rest) = Path::new(&plan.spec.program).strip_prefix(inner.agents.root()) {
                let there = Path::new(&home).join("agents").join(rest);
                let site = Site::Remote(RemoteSite::new(link.clone(), &home, &executor.name));
                if !site.exists(&there).await.map_err(|e| failed(e.to_string()))? {
                    return Err(failed(format!(
                        "the profile's version of its agent is not installed on the executor \
                         {}: install it there in Settings → Agent profiles (Versions…, with \
                         the executor), or clear the profile's version",
                        executor.name
                    )));
                }
                plan.spec.program = there.display().to_string();
            }
            Arc::new(RunnerLauncher { link, kandev: format!("{home}/bin/kandev"), home })
        }
        Placement::Container { executor, settings } => {
            let mut mounts = vec![std::path::PathBuf::from(&session.cwd)];
            for record in inner
                .store
                .live_worktrees(&session.task_id)
                .await
                .map_err(|e| failed(format!("cannot read the task's worktrees: {e}")))?
            {
                mounts.push(record.path.into());
            }
            let made =
                crate::containers::launcher(inner, &executor, &settings, &session.task_id, mounts);
            let launcher = made.await.map_err(failed)?;
            if let Some(offer) = &mut plan.mcp {
                offer.bridge = Some(crate::config::AgentCommand {
                    program: launcher.kandev.clone(),
                    args: vec![],
                    flags: vec![],
                });
            }
            Arc::new(launcher)
        }
    };
    plan.remote = true;
    Ok((launcher, plan))
}

/// Refuses a start on `executor` that would hand its host a secret it is not allowed: the
/// secret never leaves this server, and the session says what to change.
fn allowed_there(
    executor: &kandev_domain::executor::Executor,
    names: &[String],
) -> std::result::Result<(), String> {
    match names.iter().find(|n| !executor.allowed_secrets.contains(n)) {
        Some(name) => Err(format!(
            "the executor {} is not allowed the secret {name} the agent profile uses, so the \
             agent was not started there: allow it in Settings → Executors, or remove it from \
             the profile",
            executor.name
        )),
        None => Ok(()),
    }
}

impl SessionActor {
    /// Cancels a start in progress; returns whether there was one, with the prompt that was
    /// waiting for it.
    pub(super) fn cancel_boot(&mut self) -> Option<Option<Message>> {
        if !self.phase.is_booting() {
            return None;
        }
        match self.phase.take() {
            Taken::Boot(boot) => {
                boot.cancel.cancel();
                Some(boot.prompt)
            }
            _ => None, // unreachable: the phase was Booting
        }
    }

    pub(super) async fn on_booted(
        &mut self,
        epoch: i64,
        result: std::result::Result<Box<Booted>, BootFailure>,
    ) {
        let current = matches!(&self.phase, Phase::Booting(boot) if boot.epoch == epoch);
        if !current {
            if let Ok(booted) = result {
                // A start that was cancelled or replaced: its agent goes away.
                booted.client.close();
                let control = booted.control.clone();
                let grace = self.inner.config.stop_grace;
                self.spawn(async move {
                    control.stop(grace).await;
                });
            }
            return;
        }
        // The prompt waiting for this boot.
        let prompt = match self.phase.take() {
            Taken::Boot(boot) => boot.prompt,
            _ => None,
        };
        match result {
            Ok(booted) => {
                let result = self.go_live(epoch, *booted, prompt.is_some()).await;
                self.log("recording the started agent", result);
                match prompt {
                    Some(message) => {
                        if let Err(err) = self.send_turn(message).await {
                            let text = format!("the message could not be sent to the agent: {err}");
                            let error = self.error(
                                "prompt_failed",
                                text.clone(),
                                json!({ "epoch": epoch }),
                            );
                            let update = SessionUpdate {
                                state: Some(SessionState::WaitingForInput),
                                last_error: Some(Some(error)),
                                ..SessionUpdate::default()
                            };
                            let note = (text, ErrorMeta::default().into());
                            let result = self.commit(update, Some(note)).await;
                            self.log("recording a failed send", result);
                        }
                    }
                    None => self.drain_queue().await,
                }
            }
            Err(failure) => {
                let result = self.boot_failed(failure, prompt.is_some()).await;
                self.log("recording the failed start", result);
            }
        }
    }

    /// Records the ready agent; with `prompt_waiting` the session stays `STARTING` until the
    /// waiting prompt opens its turn (`RUNNING`, rule 46).
    async fn go_live(&mut self, epoch: i64, booted: Booted, prompt_waiting: bool) -> Result<()> {
        let Booted { client, events, control, conversation, runner, handled } = booted;
        let previous_token = self.session.resume_token.clone();
        let cancel = CancellationToken::new();
        let record = RuntimeRecord {
            session_id: self.session.id.clone(),
            execution_id: format!("{}-{epoch}", self.session.id),
            epoch,
            pid: control.pid(),
            pgid: control.pgid(),
            status: "running".into(),
            cwd: self.session.cwd.clone(),
        };
        let (ordered, results) = mpsc::unbounded_channel();
        self.spawn_pump(epoch, events, results, cancel.clone());
        self.spawn_exit_watch(epoch, control.clone(), cancel.clone());
        let acp_session_id = conversation.acp_session_id.clone();
        let live = Live {
            epoch,
            client,
            control,
            acp_session_id: acp_session_id.clone(),
            cancel,
            ordered,
            mcp_caps: conversation.mcp_caps,
            mcp_servers: conversation.mcp_servers.clone(),
            accepts: conversation.accepts,
            track: runner.as_ref().map(|r| crate::position::Track {
                acks: r.acks.clone(),
                skipped: 0,
                handled,
                replayed: 0,
            }),
        };
        self.phase = Phase::Ready(live);
        let idle_timeout = self.inner.config.idle_timeout;
        if !idle_timeout.is_zero() {
            self.after(idle_timeout, Command::IdleCheck { epoch });
        }
        let agent_info = conversation.agent_info();
        let options: serde_json::Map<String, serde_json::Value> = conversation
            .config_options
            .iter()
            .map(|o| (o.id.clone(), o.current_value.clone()))
            .collect();
        let update = SessionUpdate {
            // With a prompt waiting, go straight on to RUNNING (no WAITING flash).
            state: (!prompt_waiting).then_some(SessionState::WaitingForInput),
            acp_session_id: Some(Some(acp_session_id.clone())),
            resume_token: Some(Some(acp_session_id)),
            session_mode: conversation.mode.clone().map(Some),
            config_options: Some(serde_json::Value::Object(options).to_string()),
            agent_info: Some(Some(agent_info.to_string())),
            last_error: self.session.last_error.is_some().then_some(None),
            ..SessionUpdate::default()
        };
        let mut tx = self.begin_write().await?;
        tx.set_runtime(&record).await?;
        if let Some(runner) = &runner {
            // Issue 20: the runner's name of the execution, and what the handshake handled.
            tx.set_runner_exec(&self.session.id, epoch, &runner.exec).await?;
            if let Some(mark) = &self.last_mark {
                mark.record(&mut tx).await?;
            }
        }
        self.write(&mut tx, update).await?;
        // Never start a blank conversation silently: say which one the agent is in.
        let note = match (conversation.loaded, previous_token.is_some()) {
            (true, _) => Some(("resumed the previous conversation", StatusNote::Resumed)),
            (false, true) => Some((
                "started a new conversation: the agent does not remember the messages above",
                StatusNote::Fresh,
            )),
            (false, false) => None,
        };
        if let Some((text, note)) = note {
            add_message(&mut tx, &self.session, None, text, note).await?;
        }
        if !conversation.mcp_left_out.is_empty() {
            let names = conversation.mcp_left_out.join(", ");
            let text = format!(
                "MCP servers of the profile not handed to the agent, which does not take their \
                 transport (mcpCapabilities): {names}"
            );
            let note = StatusNote::McpTransport { servers: conversation.mcp_left_out.clone() };
            add_message(&mut tx, &self.session, None, &text, note).await?;
        }
        self.finish(tx).await?;
        Ok(())
    }

    /// Forwards the agent's events to the inbox, and call results after every event the
    /// agent sent before them (the ACP client queues those before the call returns).
    pub(super) fn spawn_pump(
        &self,
        epoch: i64,
        events: mpsc::UnboundedReceiver<(u64, AgentEvent)>,
        results: mpsc::UnboundedReceiver<Command>,
        cancel: CancellationToken,
    ) {
        self.spawn(super::pump::run(epoch, events, results, cancel, self.sender()));
    }

    pub(super) fn spawn_exit_watch(
        &self,
        epoch: i64,
        control: Arc<dyn ExecutionControl>,
        cancel: CancellationToken,
    ) {
        let inbox = self.sender();
        self.spawn(async move {
            let exit = tokio::select! {
                _ = cancel.cancelled() => return,
                exit = control.wait() => exit,
            };
            let stderr = control.stderr_tail();
            let _ = inbox.send(Command::Exited { epoch, exit, stderr }).await;
        });
    }

    /// A failed first start leaves the session `FAILED`; a failed restart of a conversation
    /// that exists leaves it waiting, with `last_error` and the token kept (rule 30).
    async fn boot_failed(&mut self, failure: BootFailure, prompt_waiting: bool) -> Result<()> {
        let was_running_before = self.session.resume_token.is_some();
        let state =
            if was_running_before { SessionState::WaitingForInput } else { SessionState::Failed };
        let stderr = tail_lines(&failure.stderr, 20);
        let details =
            failure.details_with(json!({ "epoch": self.session.epoch, "stderr": stderr }));
        let error = self.error(failure.code, failure.message.clone(), details);
        let update = SessionUpdate {
            state: Some(state),
            last_error: Some(Some(error)),
            ..SessionUpdate::default()
        };
        let meta = ErrorMeta {
            code: Some(failure.code.to_owned()),
            stderr: Some(tail_lines(&failure.stderr, 20)),
            ..ErrorMeta::default()
        };
        let note = (failure.message, meta.into());
        self.commit(update, Some(note)).await?;
        if prompt_waiting {
            tracing::info!(session = %self.session.id, "a prompt was waiting for a start that failed; it stays in the transcript");
        }
        Ok(())
    }
}

/// The last `n` lines of a text.
pub(crate) fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
