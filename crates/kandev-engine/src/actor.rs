//! The session actor: the one owner of a session. Every mutation arrives here as a
//! [`Command`]; slow work runs as child futures that report back to the inbox, tagged with
//! the epoch they belong to, so stale results are ignored.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use kandev_acp::{
    AcpClient, AcpError, AgentEvent, ConfigOption, ContentBlock, PermissionOption,
    PermissionResponder, PromptResponse,
};
use kandev_domain::agent::{AgentKind, AgentProfile};
use kandev_domain::session::SessionState;
use kandev_domain::task::Task;
use kandev_domain::transcript::{LastError, Message, MessageKind, QueuedPrompt, Session};
use kandev_domain::{AgentProfileId, MessageId, QueuedPromptId, TaskId, TurnId};
use kandev_runtime::ExitInfo;
use kandev_store::{NewMessage, RuntimeRecord, SessionUpdate, StoreError, WriteTx};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::boot::{self, BootFailure, BootPlan, Booted};
use crate::launcher::{ExecutionControl, LaunchSpec};
use crate::publish;
use crate::{
    EngineError, Inner, PermissionAnswer, PromptOutcome, PromptRequest, QueueChange, Result,
};

type Reply<T> = oneshot::Sender<Result<T>>;

/// Everything a session actor can be asked or told.
pub(crate) enum Command {
    Start {
        reply: Reply<()>,
    },
    /// Restart on the saved conversation (`fresh: false`) or a new one (`fresh: true`).
    Resume {
        fresh: bool,
        reply: Reply<()>,
    },
    StallCheck {
        epoch: i64,
        turn_id: TurnId,
    },
    /// Stops the execution of `epoch` if it has been idle for the idle timeout.
    IdleCheck {
        epoch: i64,
    },
    /// The task entered a step: run `on_exit` of `from` and `on_enter` of `to`.
    StepEntered {
        from: Option<kandev_domain::StepId>,
        to: kandev_domain::StepId,
        cause: crate::workflow_exec::EntryCause,
        start_agent: bool,
        reply: Reply<()>,
    },
    /// The user's reset button (`session.reset_context`).
    Reset {
        reply: Reply<()>,
    },
    ResetDone {
        exec_epoch: i64,
        result: std::result::Result<String, (Option<String>, String)>,
    },
    Prompt {
        request: PromptRequest,
        queued_by: &'static str,
        reply: Reply<PromptOutcome>,
    },
    Cancel {
        reply: Reply<()>,
    },
    Stop {
        reply: Reply<()>,
    },
    Delete {
        reply: Reply<()>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    Permission {
        request_id: String,
        answer: PermissionAnswer,
        reply: Reply<Message>,
    },
    SetMode {
        mode_id: String,
        reply: Reply<Session>,
    },
    SetConfig {
        config_id: String,
        value: serde_json::Value,
        reply: Reply<Session>,
    },
    Queue {
        change: QueueChange,
        reply: Reply<Vec<QueuedPrompt>>,
    },
    // Reports from child futures, tagged with their epoch.
    Booted {
        epoch: i64,
        result: std::result::Result<Box<Booted>, BootFailure>,
    },
    Agent {
        epoch: i64,
        event: AgentEvent,
    },
    TurnDone {
        epoch: i64,
        turn_id: TurnId,
        result: std::result::Result<PromptResponse, AcpError>,
    },
    Exited {
        epoch: i64,
        exit: ExitInfo,
        stderr: String,
    },
    EscalateCancel {
        epoch: i64,
        turn_id: TurnId,
    },
    Applied {
        epoch: i64,
        change: Applied,
        result: std::result::Result<Option<Vec<ConfigOption>>, AcpError>,
        reply: Reply<Session>,
    },
}

/// A mode or config change the agent was asked to make.
pub(crate) enum Applied {
    Mode(String),
    Config { id: String, value: serde_json::Value },
}

/// The session's execution. A prompt that waits for the agent to be ready belongs to the
/// start it waits for: cancelling the start drops it, restarting the start keeps it.
enum Exec {
    Idle,
    Booting {
        epoch: i64,
        cancel: CancellationToken,
        /// The recorded prompt that started this boot (a lazy start or resume, rule 28).
        prompt: Option<Message>,
    },
    Live(Live),
}

/// Why a turn may not start now (rule 44): the prompt waits in the queue (or is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closed {
    /// `FAILED` or `CANCELLED`: only an explicit resume reopens the session (rule 2).
    Ended(SessionState),
    /// A context reset is in progress (rule 24).
    Resetting,
    /// A turn is open, possibly being cancelled.
    Turn,
    /// The agent is being started or resumed.
    Starting,
}

struct Live {
    epoch: i64,
    client: AcpClient,
    control: Arc<dyn ExecutionControl>,
    acp_session_id: String,
    /// Stops the event pump and the exit watcher of this execution.
    cancel: CancellationToken,
    /// Results of calls whose events must be handled first (turn ends): they go through the
    /// event pump, which forwards every event the agent sent before them first.
    ordered: mpsc::UnboundedSender<Command>,
}

pub(crate) struct OpenTurn {
    pub id: TurnId,
    pub epoch: i64,
    /// The message streamed chunks are appended to, while the agent keeps to one kind.
    pub streaming: Option<(MessageKind, MessageId)>,
    pub tool_calls: HashMap<String, MessageId>,
    pub cancelling: bool,
    /// Cancelled by the engine (to quiesce for a reset), not by the user (rule 23).
    pub internal: bool,
    /// When the prompt was sent, and when the agent last sent anything for this turn.
    pub sent_at: tokio::time::Instant,
    pub last_output: Option<tokio::time::Instant>,
    pub stall_noticed: bool,
}

/// A start bound to the session (epoch, `STARTING`) whose boot is not spawned yet.
struct NewBoot {
    epoch: i64,
    /// The session's first start: a reused worktree is announced.
    first: bool,
    spec: LaunchSpec,
}

pub(crate) struct PendingPermission {
    pub responder: PermissionResponder,
    pub options: Vec<PermissionOption>,
    pub message_id: MessageId,
}

pub(crate) struct SessionActor {
    pub inner: Arc<Inner>,
    pub session: Session,
    pub task: Task,
    me: mpsc::Sender<Command>,
    exec: Exec,
    pub turn: Option<OpenTurn>,
    pub permissions: HashMap<String, PendingPermission>,
    /// Cancelled when the actor ends, so its timers end with it.
    ended: CancellationToken,
    /// When the session last did anything (any command but a timer's): idle agents are
    /// stopped after `EngineConfig::idle_timeout`.
    last_active: tokio::time::Instant,
    /// A context reset in progress (rules 18-27).
    pub(crate) resetting: Option<crate::workflow_exec::ResetInProgress>,
}

/// Creates a session row for a task (in `CREATED`), working in the directory planned for it:
/// the task's worktrees (made when it starts, [`crate::workdir::prepare_for_start`]) or its
/// plain folder.
pub(crate) async fn create_session(
    inner: &Inner,
    task_id: &TaskId,
    profile_id: Option<AgentProfileId>,
) -> Result<Session> {
    let task = inner.store.get_task(task_id).await.map_err(|e| match e {
        StoreError::NotFound { .. } => EngineError::NotFound(e.to_string()),
        other => other.into(),
    })?;
    let profile_id = profile_id.or(task.agent_profile_id.clone());
    let profile = match &profile_id {
        Some(id) => Some(
            inner
                .store
                .get_profile(id)
                .await
                .map_err(|e| EngineError::Validation(e.to_string()))?,
        ),
        None => inner.store.list_profiles().await?.into_iter().find(|p| p.kind == AgentKind::Mock),
    };
    // Held while the directory is planned, so launches of one task agree on it.
    let _worktrees = crate::workdir::lock_task(&inner.config.home, &task.id).await;
    let plan = crate::workdir::plan(inner, &task).await?;
    let cwd = plan.cwd().display().to_string();
    let mut tx = inner.store.begin_write().await?;
    let session = tx
        .insert_session(
            &task.id,
            profile.as_ref().map(|p| &p.id),
            &cwd,
            profile.as_ref().and_then(|p| p.mode.as_deref()),
            profile.as_ref().and_then(|p| p.model.as_deref()),
        )
        .await?;
    publish::session_event(&mut tx, &session, "session.created").await?;
    let summary = json!({ "session": kandev_api_types::SessionDto::from(&session) });
    tx.emit(publish::workspace_topic(&task), "session.created", summary).await?;
    publish::sync_task(&mut tx, &session).await?;
    tx.commit().await?;
    Ok(session)
}

/// Startup reconciliation (rule 42).
pub(crate) async fn reconcile(inner: &Inner) -> Result<usize> {
    let mut fixed = 0;
    for session in inner.store.all_sessions().await? {
        if let Some(runtime) = inner.store.get_runtime(&session.id).await?
            && let Some(pgid) = runtime.pgid
            && kandev_runtime::group_alive(pgid)
            && let Err(err) = kandev_runtime::kill_group(pgid)
        {
            tracing::warn!(session = %session.id, pgid, error = %err, "cannot kill a leftover agent");
        }
        let mut tx = inner.store.begin_write().await?;
        tx.end_runtime(&session.id, session.epoch, "ended").await?;
        let closed = tx.close_open_turns(&session.id, "interrupted").await?;
        // Rule 41: requests nobody can answer any more (the agent that asked is gone).
        for message in tx.pending_permission_messages(&session.id).await? {
            let mut metadata: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&message.metadata).unwrap_or_default();
            metadata.insert("status".into(), json!("expired"));
            let message = tx
                .set_message(&message.id, None, &serde_json::Value::Object(metadata).to_string())
                .await?;
            publish::message_changed(&mut tx, &session, &message).await?;
        }
        let busy = matches!(session.state, SessionState::Starting | SessionState::Running);
        if busy || closed > 0 {
            let note = "interrupted: the server stopped while the agent was working; send a message to continue";
            let update = SessionUpdate {
                state: busy.then_some(SessionState::WaitingForInput),
                acp_session_id: Some(None),
                ..SessionUpdate::default()
            };
            let updated = tx.update_session(&session.id, session.epoch, &update).await?;
            add_message(
                &mut tx,
                &updated,
                None,
                MessageKind::Status,
                note,
                json!({ "reason": "interrupted" }),
            )
            .await?;
            publish::session_event(&mut tx, &updated, "session.state_changed").await?;
            publish::sync_task(&mut tx, &updated).await?;
            fixed += 1;
        }
        tx.commit().await?;
    }
    // Rule 45: resets the last run accepted and never settled are finished now.
    for intent in inner.store.reset_intents().await? {
        match crate::workflow_exec::settle_after_restart(inner, &intent).await {
            Ok(()) => fixed += 1,
            // Kept for the next startup: never forgotten.
            Err(err) => {
                tracing::error!(session = %intent.session_id, error = %err, "cannot finish an interrupted context reset")
            }
        }
    }
    Ok(fixed)
}

/// Inserts a transcript message and announces it.
pub(crate) async fn add_message(
    tx: &mut WriteTx,
    session: &Session,
    turn_id: Option<&TurnId>,
    kind: MessageKind,
    content: &str,
    metadata: serde_json::Value,
) -> Result<Message> {
    let new = NewMessage {
        session_id: session.id.clone(),
        turn_id: turn_id.cloned(),
        kind,
        content: content.to_owned(),
        metadata: metadata.to_string(),
        client_message_id: None,
    };
    let message = tx.insert_message(&new).await?;
    publish::message_added(tx, session, &message).await?;
    Ok(message)
}

impl SessionActor {
    pub fn new(inner: Arc<Inner>, session: Session, task: Task, me: mpsc::Sender<Command>) -> Self {
        SessionActor {
            inner,
            session,
            task,
            me,
            exec: Exec::Idle,
            turn: None,
            permissions: HashMap::new(),
            ended: CancellationToken::new(),
            last_active: tokio::time::Instant::now(),
            resetting: None,
        }
    }

    pub async fn run(self, inbox: mpsc::Receiver<Command>) {
        let ended = self.ended.clone();
        self.serve(inbox).await;
        ended.cancel();
    }

    async fn serve(mut self, mut inbox: mpsc::Receiver<Command>) {
        while let Some(command) = inbox.recv().await {
            match command {
                Command::Delete { reply } => {
                    let result = self.delete().await;
                    let done = result.is_ok();
                    let _ = reply.send(result);
                    if done {
                        return;
                    }
                }
                Command::Shutdown { reply } => {
                    self.stop_execution(true).await;
                    let _ = reply.send(());
                    return;
                }
                other => self.handle(other).await,
            }
        }
        self.stop_execution(true).await;
    }

    async fn handle(&mut self, command: Command) {
        let timer = matches!(
            command,
            Command::StallCheck { .. } | Command::IdleCheck { .. } | Command::EscalateCancel { .. }
        );
        if !timer {
            self.last_active = tokio::time::Instant::now();
        }
        match command {
            Command::Start { reply } => {
                let result = self.start().await;
                let _ = reply.send(result);
            }
            Command::Resume { fresh, reply } => {
                let result = self.resume(fresh).await;
                let _ = reply.send(result);
            }
            Command::StallCheck { epoch, turn_id } => self.on_stall_check(epoch, turn_id).await,
            Command::IdleCheck { epoch } => self.on_idle_check(epoch).await,
            Command::StepEntered { from, to, cause, start_agent, reply } => {
                let result = self.enter_step(from, to, cause, start_agent).await;
                let _ = reply.send(result);
            }
            Command::Reset { reply } => {
                let result = self.user_reset().await;
                let _ = reply.send(result);
            }
            Command::ResetDone { exec_epoch, result } => {
                self.on_reset_done(exec_epoch, result).await
            }
            Command::Prompt { request, queued_by, reply } => {
                let result = self.admit(request, queued_by).await;
                let _ = reply.send(result);
            }
            Command::Cancel { reply } => {
                let result = self.cancel().await;
                let _ = reply.send(result);
            }
            Command::Stop { reply } => self.stop(reply).await,
            Command::Permission { request_id, answer, reply } => {
                let result = self.answer_permission(&request_id, answer, "user").await;
                let _ = reply.send(result);
            }
            Command::SetMode { mode_id, reply } => self.apply(Applied::Mode(mode_id), reply),
            Command::SetConfig { config_id, value, reply } => {
                self.apply(Applied::Config { id: config_id, value }, reply)
            }
            Command::Queue { change, reply } => {
                let result = self.change_queue(change).await;
                let _ = reply.send(result);
            }
            Command::Booted { epoch, result } => self.on_booted(epoch, result).await,
            Command::Agent { epoch, event } => {
                if self.live_epoch() == Some(epoch) && self.is_current_conversation(&event) {
                    self.on_agent_event(event).await;
                } else {
                    tracing::debug!(session = %self.session.id, epoch, "ignored an event of an old execution");
                }
            }
            Command::TurnDone { epoch, turn_id, result } => {
                self.on_turn_done(epoch, turn_id, result).await
            }
            Command::Exited { epoch, exit, stderr } => self.on_exited(epoch, exit, stderr).await,
            Command::EscalateCancel { epoch, turn_id } => self.on_escalate(epoch, turn_id).await,
            Command::Applied { epoch, change, result, reply } => {
                let outcome = self.on_applied(epoch, change, result).await;
                let _ = reply.send(outcome);
            }
            Command::Delete { .. } | Command::Shutdown { .. } => {}
        }
    }

    /// Rule 22: events of a conversation the session has left (after a context reset on the
    /// same process) are dropped.
    fn is_current_conversation(&self, event: &AgentEvent) -> bool {
        let Exec::Live(live) = &self.exec else { return false };
        // While a live reset waits for `session/new`, the conversation being replaced has no
        // turn any more: whatever it still says is stale, before or after the new id lands.
        let replacing = self.resetting.as_ref().is_some_and(|r| !r.waiting_for_turn);
        match event {
            AgentEvent::SessionUpdate { session_id, .. }
            | AgentEvent::PermissionRequest { session_id, .. } => {
                session_id == &live.acp_session_id && !replacing
            }
            _ => true,
        }
    }

    /// `session.reset_context`: the same path as a step's `reset_agent_context`.
    async fn user_reset(&mut self) -> Result<()> {
        if self.session.state == SessionState::Created {
            return Ok(()); // nothing to forget yet
        }
        let reset = crate::workflow_exec::ResetInProgress {
            step: None,
            then: Default::default(),
            cause: crate::workflow_exec::EntryCause::Manual,
            waiting_for_turn: false,
        };
        self.begin_reset(reset).await
    }

    pub(crate) fn is_booting(&self) -> bool {
        matches!(self.exec, Exec::Booting { .. })
    }

    fn live_epoch(&self) -> Option<i64> {
        match &self.exec {
            Exec::Live(live) => Some(live.epoch),
            _ => None,
        }
    }

    /// Spawns a child future owned by the engine's tracker (for the other actor modules).
    pub fn inner_tracker_spawn(
        &self,
        future: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        self.spawn(future);
    }

    /// Spawns a child future owned by the engine's tracker.
    fn spawn(&self, future: impl std::future::Future<Output = ()> + Send + 'static) {
        self.inner.tracker.spawn(future);
    }

    fn sender(&self) -> mpsc::Sender<Command> {
        self.me.clone()
    }

    // ------------------------------------------------------------ state writes

    /// Writes `update` (compare-and-set on the epoch), announces the session and keeps the
    /// task card in step. A state change is checked against the transition table (rule 1).
    pub async fn write(&mut self, tx: &mut WriteTx, update: SessionUpdate) -> Result<()> {
        if let Some(to) = update.state
            && to != self.session.state
        {
            self.session.state.transition(to).map_err(|e| EngineError::Conflict(e.to_string()))?;
        }
        let changed_state = update.state.is_some_and(|s| s != self.session.state);
        self.session = tx.update_session(&self.session.id, self.session.epoch, &update).await?;
        let action = if changed_state { "session.state_changed" } else { "session.updated" };
        publish::session_event(tx, &self.session, action).await?;
        if update.last_error.is_some() {
            let error = self.session.last_error.as_ref().map(kandev_api_types::LastErrorDto::from);
            tx.emit(
                publish::session_topic(&self.session),
                "session.error",
                json!({ "session_id": self.session.id.to_string(), "last_error": error }),
            )
            .await?;
        }
        if changed_state {
            publish::sync_task(tx, &self.session).await?;
        }
        Ok(())
    }

    /// Runs one small write transaction: `update`, plus an optional message.
    pub async fn commit(
        &mut self,
        update: SessionUpdate,
        note: Option<(MessageKind, String, serde_json::Value)>,
    ) -> Result<()> {
        let tx = self.inner.store.begin_write().await?;
        self.commit_tx(tx, update, note).await
    }

    /// [`Self::commit`] in a transaction the caller already wrote to.
    pub async fn commit_tx(
        &mut self,
        mut tx: WriteTx,
        update: SessionUpdate,
        note: Option<(MessageKind, String, serde_json::Value)>,
    ) -> Result<()> {
        self.write(&mut tx, update).await?;
        if let Some((kind, text, metadata)) = note {
            let turn = self.turn.as_ref().map(|t| t.id.clone());
            add_message(&mut tx, &self.session, turn.as_ref(), kind, &text, metadata).await?;
            if let Some(turn) = self.turn.as_mut() {
                turn.streaming = None; // later chunks start a new message, after this one
            }
        }
        tx.commit().await?;
        Ok(())
    }

    pub fn error(
        &self,
        code: &str,
        message: impl Into<String>,
        details: serde_json::Value,
    ) -> LastError {
        LastError {
            code: code.to_owned(),
            message: message.into(),
            details: Some(details.to_string()),
            at: self.inner.store.now(),
        }
    }

    /// Logs a failed write; the actor keeps going (the next write re-reads the row).
    fn log(&self, what: &str, result: Result<()>) {
        if let Err(err) = result {
            tracing::error!(session = %self.session.id, error = %err, "{what} failed");
        }
    }

    // ------------------------------------------------------------ booting

    async fn start(&mut self) -> Result<()> {
        match (&self.exec, self.session.state) {
            (
                Exec::Idle,
                SessionState::Created | SessionState::WaitingForInput | SessionState::Completed,
            ) => self.begin_boot(None, false).await,
            (Exec::Idle, state) => Err(EngineError::Conflict(format!(
                "the session is {}; resume it instead",
                state.as_str()
            ))),
            _ => Ok(()),
        }
    }

    async fn profile(&self) -> Result<Option<AgentProfile>> {
        match &self.session.agent_profile_id {
            Some(id) => match self.inner.store.get_profile(id).await {
                Ok(profile) => Ok(Some(profile)),
                Err(StoreError::NotFound { .. }) => Ok(None),
                Err(err) => Err(err.into()),
            },
            None => Ok(None),
        }
    }

    fn launch_spec(&self, profile: Option<&AgentProfile>) -> LaunchSpec {
        let cwd = PathBuf::from(&self.session.cwd);
        let mock = &self.inner.config.mock_agent;
        let Some(profile) = profile else {
            return LaunchSpec {
                program: mock.program.clone(),
                args: mock.args.clone(),
                env: vec![],
                cwd,
            };
        };
        let env = profile.env.iter().map(|e| (e.name.clone(), e.value.clone())).collect();
        let (program, mut args) = match (profile.kind, profile.command.is_empty()) {
            (AgentKind::Mock, true) => (mock.program.clone(), mock.args.clone()),
            (_, false) => (profile.command.clone(), vec![]),
            (AgentKind::Claude, true) => ("claude-agent-acp".to_owned(), vec![]),
            (AgentKind::Codex, true) => ("codex-acp".to_owned(), vec![]),
            (AgentKind::Gemini, true) => ("gemini".to_owned(), vec!["--acp".to_owned()]),
            (AgentKind::OpenCode, true) => ("opencode".to_owned(), vec!["acp".to_owned()]),
            (AgentKind::Custom, true) => (String::new(), vec![]),
        };
        args.extend(profile.args.iter().cloned());
        LaunchSpec { program, args, env, cwd }
    }

    /// Binds the session to a new execution: new epoch, `STARTING`, boot as a child future.
    /// `prompt` is sent once the agent is ready; `fresh` opens a new conversation even
    /// though a resume token exists.
    pub(crate) async fn begin_boot(&mut self, prompt: Option<Message>, fresh: bool) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        let boot = self.bind_boot(&mut tx).await?;
        tx.commit().await?;
        self.spawn_boot(boot, prompt, fresh);
        Ok(())
    }

    /// The writes of a start in the caller's transaction: a new epoch and `STARTING`.
    async fn bind_boot(&mut self, tx: &mut WriteTx) -> Result<NewBoot> {
        let first = self.session.state == SessionState::Created;
        let profile = self.profile().await?;
        let spec = self.launch_spec(profile.as_ref());
        let epoch = tx.bump_epoch(&self.session.id, self.session.epoch).await?;
        self.session.epoch = epoch;
        self.write(
            tx,
            SessionUpdate { state: Some(SessionState::Starting), ..SessionUpdate::default() },
        )
        .await?;
        Ok(NewBoot { epoch, first, spec })
    }

    /// Once [`Self::bind_boot`] is committed: prepares the working directory and boots the
    /// agent as a child future.
    fn spawn_boot(&mut self, boot: NewBoot, prompt: Option<Message>, fresh: bool) {
        let NewBoot { epoch, first, spec } = boot;
        let cancel = CancellationToken::new();
        self.exec = Exec::Booting { epoch, cancel: cancel.clone(), prompt };
        let plan = BootPlan {
            spec,
            resume_token: if fresh { None } else { self.session.resume_token.clone() },
            mode: self.session.session_mode.clone(),
            model: self.session.model.clone(),
            call_timeout: self.inner.config.call_timeout,
            stop_grace: self.inner.config.stop_grace,
            authenticate: self.inner.take_auth_wish(&self.session.id),
        };
        let launcher = self.inner.launcher.clone();
        let inbox = self.sender();
        let (inner, session) = (self.inner.clone(), self.session.clone());
        self.spawn(async move {
            let prepared = crate::workdir::prepare_for_start(&inner, &session, first, &cancel);
            let result = match prepared.await {
                Ok(()) => boot::boot(launcher, plan, cancel).await.map(Box::new),
                Err(failure) => Err(failure),
            };
            let _ = inbox.send(Command::Booted { epoch, result }).await;
        });
    }

    async fn on_booted(
        &mut self,
        epoch: i64,
        result: std::result::Result<Box<Booted>, BootFailure>,
    ) {
        // The prompt waiting for this boot; `None` when the boot is no longer the current one.
        let waiting = match &mut self.exec {
            Exec::Booting { epoch: e, prompt, .. } if *e == epoch => Some(prompt.take()),
            _ => None,
        };
        let current = waiting.is_some();
        let prompt = waiting.flatten();
        match result {
            Ok(booted) if !current => {
                booted.client.close();
                let control = booted.control.clone();
                let grace = self.inner.config.stop_grace;
                self.spawn(async move {
                    control.stop(grace).await;
                });
            }
            Err(_) if !current => {}
            Ok(booted) => {
                let result = self.go_live(epoch, *booted, prompt.is_some()).await;
                self.log("recording the started agent", result);
                if let Some(message) = prompt {
                    if let Err(err) = self.send_turn(message).await {
                        let text = format!("the message could not be sent to the agent: {err}");
                        let error =
                            self.error("prompt_failed", text.clone(), json!({ "epoch": epoch }));
                        let update = SessionUpdate {
                            state: Some(SessionState::WaitingForInput),
                            last_error: Some(Some(error)),
                            ..SessionUpdate::default()
                        };
                        let result =
                            self.commit(update, Some((MessageKind::Error, text, json!({})))).await;
                        self.log("recording a failed send", result);
                    }
                } else {
                    self.drain_queue().await;
                }
            }
            Err(failure) => {
                self.exec = Exec::Idle;
                let result = self.boot_failed(failure, prompt.is_some()).await;
                self.log("recording the failed start", result);
            }
        }
    }

    /// Records the ready agent; with `prompt_waiting` the session stays `STARTING` until the
    /// waiting prompt opens its turn (`RUNNING`, rule 46).
    async fn go_live(&mut self, epoch: i64, booted: Booted, prompt_waiting: bool) -> Result<()> {
        let Booted { client, events, control, conversation } = booted;
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
        };
        self.exec = Exec::Live(live);
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
        let mut tx = self.inner.store.begin_write().await?;
        tx.set_runtime(&record).await?;
        self.write(&mut tx, update).await?;
        // Never start a blank conversation silently: say which one the agent is in.
        let note = match (conversation.loaded, previous_token.is_some()) {
            (true, _) => Some(("resumed the previous conversation", "resumed")),
            (false, true) => Some((
                "started a new conversation: the agent does not remember the messages above",
                "fresh",
            )),
            (false, false) => None,
        };
        if let Some((text, reason)) = note {
            add_message(
                &mut tx,
                &self.session,
                None,
                MessageKind::Status,
                text,
                json!({ "reason": reason }),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Forwards the agent's events to the inbox, and call results after every event the
    /// agent sent before them (the ACP client queues those before the call returns).
    fn spawn_pump(
        &self,
        epoch: i64,
        mut events: mpsc::UnboundedReceiver<AgentEvent>,
        mut results: mpsc::UnboundedReceiver<Command>,
        cancel: CancellationToken,
    ) {
        let inbox = self.sender();
        self.spawn(async move {
            let mut events_open = true;
            loop {
                let command = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return,
                    event = events.recv(), if events_open => match event {
                        Some(event) => Command::Agent { epoch, event },
                        None => {
                            events_open = false;
                            continue;
                        }
                    },
                    result = results.recv() => match result {
                        Some(result) => result,
                        None => return,
                    },
                };
                if inbox.send(command).await.is_err() {
                    return;
                }
            }
        });
    }

    fn spawn_exit_watch(
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

    async fn boot_failed(&mut self, failure: BootFailure, prompt_waiting: bool) -> Result<()> {
        let was_running_before = self.session.resume_token.is_some();
        let state =
            if was_running_before { SessionState::WaitingForInput } else { SessionState::Failed };
        let details = failure.details_with(
            json!({ "epoch": self.session.epoch, "stderr": tail_lines(&failure.stderr, 20) }),
        );
        let error = self.error(failure.code, failure.message.clone(), details);
        let update = SessionUpdate {
            state: Some(state),
            last_error: Some(Some(error)),
            ..SessionUpdate::default()
        };
        let note = (
            MessageKind::Error,
            failure.message,
            json!({ "code": failure.code, "stderr": tail_lines(&failure.stderr, 20) }),
        );
        self.commit(update, Some(note)).await?;
        if prompt_waiting {
            tracing::info!(session = %self.session.id, "a prompt was waiting for a start that failed; it stays in the transcript");
        }
        Ok(())
    }

    /// Cancels a start in progress; returns whether there was one, with the prompt that was
    /// waiting for it.
    pub(crate) fn cancel_boot(&mut self) -> Option<Option<Message>> {
        match std::mem::replace(&mut self.exec, Exec::Idle) {
            Exec::Booting { cancel, prompt, .. } => {
                cancel.cancel();
                Some(prompt)
            }
            other => {
                self.exec = other;
                None
            }
        }
    }

    /// Ends the live execution (if any). With `wait`, returns after the process is gone.
    pub async fn stop_execution(&mut self, wait: bool) {
        match std::mem::replace(&mut self.exec, Exec::Idle) {
            Exec::Idle => {}
            Exec::Booting { cancel, .. } => cancel.cancel(),
            Exec::Live(live) => {
                live.cancel.cancel();
                live.client.close();
                let control = live.control.clone();
                let grace = self.inner.config.stop_grace;
                if wait {
                    control.stop(grace).await;
                } else {
                    self.spawn(async move {
                        control.stop(grace).await;
                    });
                }
                let mut tx = match self.inner.store.begin_write().await {
                    Ok(tx) => tx,
                    Err(err) => {
                        return tracing::error!(error = %err, "cannot record the stopped agent");
                    }
                };
                let result = tx.end_runtime(&self.session.id, live.epoch, "stopped").await;
                if result.is_ok()
                    && let Err(err) = tx.commit().await
                {
                    tracing::error!(error = %err, "cannot record the stopped agent");
                }
                // A live reset in flight is not settled here: on shutdown its stored intent
                // is finished at the next startup (rule 45), like after `kill -9`.
            }
        }
    }

    /// A live reset waits for an answer that can no longer come once its execution is gone
    /// (its result would travel through the stopped pump): settle it as failed (rule 25)
    /// instead of leaving the session waiting for it forever.
    pub(crate) async fn abandon_live_reset(&mut self, why: &str) {
        if self.resetting.as_ref().is_some_and(|r| !r.waiting_for_turn) {
            let result = self.reset_failed(why.to_owned()).await;
            self.log("settling an abandoned context reset", result);
        }
    }

    async fn on_exited(&mut self, epoch: i64, exit: ExitInfo, stderr: String) {
        if self.live_epoch() != Some(epoch) {
            return;
        }
        self.exec = Exec::Idle;
        self.abandon_live_reset("the agent exited during the context reset").await;
        let message = format!("the agent {exit}; send a message to start it again");
        let details =
            json!({ "epoch": epoch, "exit": exit.to_string(), "stderr": tail_lines(&stderr, 20) });
        let mut tx = match self.inner.store.begin_write().await {
            Ok(tx) => tx,
            Err(err) => return tracing::error!(error = %err, "cannot record the agent's exit"),
        };
        let _ = tx.end_runtime(&self.session.id, epoch, "exited").await;
        let _ = tx.commit().await;
        if let Some(internal) = self.turn.as_ref().map(|t| t.internal) {
            let error = self.error("agent_exited", message.clone(), details.clone());
            let result = self.finish_turn("agent_exited", Some((error, message)), None).await;
            self.log("closing the turn of an exited agent", result);
            self.after_lost_turn(internal).await;
        } else if !exit.success() {
            let error = self.error("agent_exited", message.clone(), details);
            let result = self
                .commit(
                    SessionUpdate { last_error: Some(Some(error)), ..SessionUpdate::default() },
                    None,
                )
                .await;
            self.log("recording the agent's exit", result);
        }
    }

    // ------------------------------------------------------------ prompts and turns

    pub(crate) async fn admit(
        &mut self,
        request: PromptRequest,
        queued_by: &'static str,
    ) -> Result<PromptOutcome> {
        if request.content.trim().is_empty() {
            return Err(EngineError::Validation("content is required".into()));
        }
        if let Some(client_id) = &request.client_message_id {
            let mut tx = self.inner.store.begin_write().await?;
            if let Some(existing) = tx.message_by_client_id(&self.session.id, client_id).await? {
                return Ok(PromptOutcome::Duplicate(existing));
            }
            if let Some(queued) = tx
                .list_queue(&self.session.id)
                .await?
                .into_iter()
                .find(|q| q.client_message_id.as_ref() == Some(client_id))
            {
                return Ok(PromptOutcome::Queued(queued));
            }
        }
        if self.may_start_turn().is_ok() && queued_by == "user" {
            // on_turn_start may move the task first (and reset the context on the way).
            Box::pin(self.on_user_turn_start()).await?;
        }
        match self.may_start_turn() {
            Ok(()) => self
                .record_and_send(request.content, request.client_message_id, None)
                .await
                .map(PromptOutcome::Sent),
            Err(Closed::Ended(state)) => Err(EngineError::Conflict(format!(
                "the session is {}; resume it (load or fresh) before sending messages",
                state.as_str()
            ))),
            Err(Closed::Resetting) if !request.queue => Err(EngineError::ResetInProgress(
                "the agent's context is being reset; try again in a moment or queue the message"
                    .into(),
            )),
            Err(Closed::Turn) if !request.queue => Err(EngineError::Busy(
                "the agent is busy with a turn; wait, cancel it, or queue the message".into(),
            )),
            Err(Closed::Starting) if !request.queue => Err(EngineError::Busy(
                "the agent is starting; wait until it is ready, or queue the message".into(),
            )),
            Err(_) => self.enqueue(&request, queued_by).await.map(PromptOutcome::Queued),
        }
    }

    /// Rule 44, the one answer to "may a turn start now" for every admission path (a new
    /// message, the queue's add, drain and auto-run, the queue at a turn's end, a workflow's
    /// auto-start): not while a reset, a start or resume, or a turn (or its cancel) is in
    /// progress, and not in `FAILED` or `CANCELLED`.
    pub(crate) fn may_start_turn(&self) -> std::result::Result<(), Closed> {
        if matches!(self.session.state, SessionState::Failed | SessionState::Cancelled) {
            return Err(Closed::Ended(self.session.state));
        }
        if self.resetting.is_some() {
            return Err(Closed::Resetting);
        }
        if self.turn.is_some() {
            return Err(Closed::Turn);
        }
        if matches!(self.exec, Exec::Booting { .. }) {
            return Err(Closed::Starting);
        }
        Ok(())
    }

    /// Records the user's message, then sends it, starting (or resuming) the agent first
    /// when no execution is live (rules 2, 28).
    /// With `from_queue`, the queue entry is removed in the same transaction that records the
    /// message, so an entry is never in both places or in neither (rule 7).
    async fn record_and_send(
        &mut self,
        content: String,
        client_message_id: Option<String>,
        from_queue: Option<&QueuedPromptId>,
    ) -> Result<Message> {
        if let Err(closed) = self.may_start_turn() {
            // Callers check the gate first; this keeps a slip from recording a stray message.
            return Err(EngineError::Conflict(format!("no turn can start now ({closed:?})")));
        }
        let mut tx = self.inner.store.begin_write().await?;
        if let Some(id) = from_queue {
            tx.dequeue(&self.session.id, id).await?;
            let queue = tx.list_queue(&self.session.id).await?;
            publish::queue_changed(&mut tx, &self.session, &queue).await?;
        }
        let new = NewMessage {
            session_id: self.session.id.clone(),
            turn_id: None,
            kind: MessageKind::User,
            content,
            metadata: "{}".into(),
            client_message_id,
        };
        let message = tx.insert_message(&new).await?;
        publish::message_added(&mut tx, &self.session, &message).await?;
        // The message, and the turn it opens or the start it waits for, in one transaction:
        // nobody ever sees it recorded while the session still says WAITING_FOR_INPUT.
        if matches!(self.exec, Exec::Live(_)) {
            let turn = self.open_turn(&mut tx, &message).await?;
            tx.commit().await?;
            self.dispatch_turn(turn, message.clone());
        } else {
            let boot = self.bind_boot(&mut tx).await?;
            tx.commit().await?;
            self.spawn_boot(boot, Some(message.clone()), false);
        }
        Ok(message)
    }

    /// Opens the turn (`RUNNING`, rule 3) and sends the prompt as a child future.
    async fn send_turn(&mut self, message: Message) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        let turn = self.open_turn(&mut tx, &message).await?;
        tx.commit().await?;
        self.dispatch_turn(turn, message);
        Ok(())
    }

    /// The writes of a new turn in the caller's transaction: the turn row (in the session's
    /// current epoch: a context reset moves it on without a new execution) and `RUNNING`.
    async fn open_turn(&mut self, tx: &mut WriteTx, message: &Message) -> Result<TurnId> {
        if !matches!(self.exec, Exec::Live(_)) {
            return Err(EngineError::Unavailable("the agent is not running".into()));
        }
        let turn_id = tx.open_turn(&self.session.id, self.session.epoch).await?;
        self.write(
            tx,
            SessionUpdate { state: Some(SessionState::Running), ..SessionUpdate::default() },
        )
        .await?;
        let started = json!({ "session_id": self.session.id.to_string(), "turn_id": turn_id.to_string(), "message_id": message.id.to_string() });
        tx.emit(publish::session_topic(&self.session), "session.turn.started", started).await?;
        Ok(turn_id)
    }

    /// Once [`Self::open_turn`] is committed: sends the prompt as a child future.
    fn dispatch_turn(&mut self, turn_id: TurnId, message: Message) {
        let Exec::Live(live) = &self.exec else { return };
        let (epoch, client, acp_session_id) =
            (self.session.epoch, live.client.clone(), live.acp_session_id.clone());
        let ordered = live.ordered.clone();
        self.turn = Some(OpenTurn {
            id: turn_id.clone(),
            epoch,
            streaming: None,
            tool_calls: HashMap::new(),
            cancelling: false,
            internal: false,
            sent_at: tokio::time::Instant::now(),
            last_output: None,
            stall_noticed: false,
        });
        self.schedule_stall_check(epoch, turn_id.clone(), self.inner.config.stall_after);
        let text = if self.session.plan_mode {
            format!("{}\n\n{}", kandev_domain::workflow::PLAN_MODE_INSTRUCTION, message.content)
        } else {
            message.content
        };
        self.spawn(async move {
            let result = client.prompt(&acp_session_id, &[ContentBlock::text(text)]).await;
            let _ = ordered.send(Command::TurnDone { epoch, turn_id, result });
        });
    }

    /// Cancels the running turn for the engine's own purposes (rule 23): no status message,
    /// no `on_turn_complete`. Returns whether a turn was running.
    pub(crate) fn cancel_internally(&mut self) -> bool {
        let Some(turn) = self.turn.as_mut() else { return false };
        turn.internal = true;
        if !turn.cancelling {
            turn.cancelling = true;
            let (turn_id, epoch) = (turn.id.clone(), turn.epoch);
            self.send_acp_cancel();
            self.after(
                self.inner.config.cancel_timeout,
                Command::EscalateCancel { epoch, turn_id },
            );
        }
        true
    }

    fn send_acp_cancel(&self) {
        if let Exec::Live(live) = &self.exec {
            let (client, acp_session_id) = (live.client.clone(), live.acp_session_id.clone());
            self.spawn(async move {
                if let Err(err) = client.cancel(&acp_session_id).await {
                    tracing::debug!(error = %err, "session/cancel could not be sent");
                }
            });
        }
    }

    /// Starts a live context reset (rule 20) as a child future; false when no agent runs.
    pub(crate) fn start_live_reset(&mut self) -> bool {
        let Exec::Live(live) = &self.exec else { return false };
        let (exec_epoch, client) = (live.epoch, live.client.clone());
        let cwd = PathBuf::from(&self.session.cwd);
        let (model, mode) = (self.session.model.clone(), self.session.session_mode.clone());
        let mut options: Vec<(String, serde_json::Value)> = serde_json::from_str::<
            serde_json::Map<String, serde_json::Value>,
        >(&self.session.config_options)
        .unwrap_or_default()
        .into_iter()
        .filter(|(id, _)| id != "model" && id != "mode")
        .collect();
        options.sort_by(|a, b| a.0.cmp(&b.0));
        let timeout = self.inner.config.reset_timeout;
        let ordered = live.ordered.clone();
        self.spawn(async move {
            let work = async {
                let fresh = client
                    .new_session(&cwd)
                    .await
                    .map_err(|e| (None, format!("session/new failed: {e}")))?;
                let id = fresh.session_id;
                // Rule 27: model, then mode, then options sorted by id.
                let step = |what: &str, e: kandev_acp::AcpError| {
                    (Some(id.clone()), format!("the agent refused {what}: {e}"))
                };
                if let Some(model) = &model {
                    client
                        .set_config_option(&id, "model", model.clone())
                        .await
                        .map_err(|e| step("the model", e))?;
                }
                if let Some(mode) = &mode {
                    client.set_mode(&id, mode).await.map_err(|e| step("the mode", e))?;
                }
                for (option, value) in &options {
                    client
                        .set_config_option(&id, option, value.clone())
                        .await
                        .map_err(|e| step("a config option", e))?;
                }
                Ok(id.clone())
            };
            let result = match tokio::time::timeout(timeout, work).await {
                Ok(result) => result,
                Err(_) => {
                    Err((None, format!("the agent did not answer within {} s", timeout.as_secs())))
                }
            };
            let _ = ordered.send(Command::ResetDone { exec_epoch, result });
        });
        true
    }

    async fn on_reset_done(
        &mut self,
        exec_epoch: i64,
        result: std::result::Result<String, (Option<String>, String)>,
    ) {
        if self.live_epoch() != Some(exec_epoch) || self.resetting.is_none() {
            return;
        }
        let outcome = match result {
            Ok(new_id) => match self.adopt_conversation(new_id).await {
                Ok(()) => self.reset_succeeded(None).await,
                Err(err) => self.reset_failed(err.to_string()).await,
            },
            Err((new_id, cause)) => {
                // The live conversation changed even though the reset failed: keep it.
                let adopted = match new_id {
                    Some(id) => self.adopt_conversation(id).await,
                    None => Ok(()),
                };
                self.log("recording the new conversation", adopted);
                self.reset_failed(cause).await
            }
        };
        self.log("finishing the context reset", outcome);
    }

    /// The live execution now talks in conversation `id`: a new epoch fences the old one
    /// (rule 22) and the token is replaced only now (rule 31).
    async fn adopt_conversation(&mut self, id: String) -> Result<()> {
        let mut tx = self.inner.store.begin_write().await?;
        let epoch = tx.bump_epoch(&self.session.id, self.session.epoch).await?;
        self.session.epoch = epoch;
        let update = SessionUpdate {
            acp_session_id: Some(Some(id.clone())),
            resume_token: Some(Some(id.clone())),
            context_window: Some(None),
            ..SessionUpdate::default()
        };
        self.write(&mut tx, update).await?;
        tx.commit().await?;
        if let Exec::Live(live) = &mut self.exec {
            live.acp_session_id = id;
        }
        Ok(())
    }

    /// Asks a running agent to switch mode now (a workflow's `set_session_mode`).
    pub(crate) fn switch_mode_now(&mut self, mode_id: String) {
        if let Exec::Live(live) = &self.exec {
            let (client, acp) = (live.client.clone(), live.acp_session_id.clone());
            self.spawn(async move {
                if let Err(err) = client.set_mode(&acp, &mode_id).await {
                    tracing::warn!(error = %err, mode_id, "the agent refused a workflow mode");
                }
            });
        }
    }

    fn schedule_stall_check(&self, epoch: i64, turn_id: TurnId, after: std::time::Duration) {
        self.after(after, Command::StallCheck { epoch, turn_id });
    }

    /// Sends `command` to this actor after `delay`, unless the actor has ended by then.
    fn after(&self, delay: std::time::Duration, command: Command) {
        let inbox = self.sender();
        let ended = self.ended.clone();
        self.spawn(async move {
            tokio::select! {
                _ = ended.cancelled() => {}
                _ = tokio::time::sleep(delay) => {
                    let _ = inbox.send(command).await;
                }
            }
        });
    }

    /// Issue 12 finding 9: an agent that has done nothing for the idle timeout (no turn, no
    /// reset, no permission request waiting, no command) is stopped, as `session.stop` would;
    /// the session keeps waiting for input with its token, and the next message resumes the
    /// conversation with `session/load` (rule 28). Re-armed until then.
    async fn on_idle_check(&mut self, epoch: i64) {
        if self.live_epoch() != Some(epoch) {
            return; // that execution is gone: its checks end with it
        }
        let timeout = self.inner.config.idle_timeout;
        let idle_for = self.last_active.elapsed();
        let busy = self.turn.is_some() || self.resetting.is_some() || !self.permissions.is_empty();
        if busy || idle_for < timeout {
            let wait = if busy { timeout } else { timeout - idle_for };
            return self.after(wait, Command::IdleCheck { epoch });
        }
        self.stop_execution(false).await;
        let minutes = timeout.as_secs_f64() / 60.0;
        let note = format!(
            "the agent was stopped after {minutes:.1} minutes without activity; the next message resumes the conversation"
        );
        let result = self
            .commit(
                SessionUpdate::default(),
                Some((MessageKind::Status, note, json!({ "reason": "idle" }))),
            )
            .await;
        self.log("noting an idle stop", result);
    }

    /// Rule 40: one notice after a quiet stretch; a turn with no output at all fails.
    async fn on_stall_check(&mut self, epoch: i64, turn_id: TurnId) {
        let stall = self.inner.config.stall_after;
        let Some(turn) = self.turn.as_ref().filter(|t| t.id == turn_id && t.epoch == epoch) else {
            return; // an older turn's timer creates nothing
        };
        let (sent_at, last_output, noticed) = (turn.sent_at, turn.last_output, turn.stall_noticed);
        let now = tokio::time::Instant::now();
        let Some(last) = last_output else {
            if now.duration_since(sent_at) < stall {
                return self.schedule_stall_check(
                    epoch,
                    turn_id,
                    stall - now.duration_since(sent_at),
                );
            }
            let minutes = stall.as_secs_f64() / 60.0;
            let message = format!(
                "the agent produced no output for {minutes:.1} minutes, so the turn was ended; send the message again or restart the agent"
            );
            let error = self.error("turn_stalled", message.clone(), json!({ "epoch": epoch }));
            let internal = self.turn.as_ref().is_some_and(|t| t.internal);
            self.stop_execution(false).await;
            let result = self.finish_turn("stalled", Some((error, message)), None).await;
            self.log("failing a silent turn", result);
            return self.after_lost_turn(internal).await;
        };
        let quiet = now.duration_since(last);
        if quiet < stall {
            return self.schedule_stall_check(epoch, turn_id, stall - quiet);
        }
        if !noticed {
            if let Some(turn) = self.turn.as_mut() {
                turn.stall_noticed = true;
            }
            let note = format!(
                "no output from the agent for {:.1} minutes; it may be stuck (you can cancel the turn)",
                stall.as_secs_f64() / 60.0
            );
            let result = self
                .commit(
                    SessionUpdate::default(),
                    Some((MessageKind::Status, note, json!({ "reason": "stall" }))),
                )
                .await;
            self.log("noting a stall", result);
        }
    }

    /// `session.resume`: replace the execution, reloading the saved conversation or starting
    /// a fresh one (rules 17, 28-32).
    async fn resume(&mut self, fresh: bool) -> Result<()> {
        if self.turn.is_some() {
            return Err(EngineError::Busy("a turn is running; cancel it before resuming".into()));
        }
        if self.resetting.is_some() {
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

    async fn on_turn_done(
        &mut self,
        epoch: i64,
        turn_id: TurnId,
        result: std::result::Result<PromptResponse, AcpError>,
    ) {
        let current = self.turn.as_ref().is_some_and(|t| t.id == turn_id && t.epoch == epoch);
        if !current {
            tracing::debug!(session = %self.session.id, epoch, "ignored the end of a turn that is no longer open");
            return;
        }
        let (cancelling, internal) =
            self.turn.as_ref().map(|t| (t.cancelling, t.internal)).unwrap_or_default();
        let (outcome, completed) = match result {
            Ok(response) => {
                let reason = response.stop_reason.as_str().to_owned();
                let note = (cancelling && !internal).then(|| "turn cancelled".to_owned());
                (self.finish_turn(&reason, None, note).await, Some(cancelling))
            }
            Err(err) if err.is_closed() => return, // the exit watcher reports the crash
            Err(err) => {
                let info = self.session.agent_info.as_deref();
                let (code, message, details) = boot::turn_failure(&err, info, epoch);
                let error = self.error(code, message.clone(), details);
                (self.finish_turn("error", Some((error, message)), None).await, None)
            }
        };
        self.log("closing the turn", outcome);
        self.after_turn(internal, completed).await;
    }

    /// What follows the end of a turn: a reset waiting for it (rule 23), else the step's
    /// `on_turn_complete` (a cancel counts only with `cancel_triggers_turn_complete`), then
    /// the queue (rule 5).
    async fn after_turn(&mut self, internal: bool, completed: Option<bool>) {
        if internal && self.resetting.is_some() {
            let result = self.continue_reset().await;
            return self.log("continuing the context reset", result);
        }
        if let Some(cancelled) = completed {
            let counts = !cancelled || self.step_counts_cancel().await;
            if counts {
                let result = Box::pin(self.on_turn_complete()).await;
                self.log("running on_turn_complete", result);
            }
        }
        self.drain_queue().await;
    }

    /// A turn that ended with its agent (a crash, a stall): a reset waiting for it goes on
    /// without the agent (rule 21). The queue is not drained, which would restart an agent
    /// that just failed; the next message does.
    async fn after_lost_turn(&mut self, internal: bool) {
        if internal && self.resetting.is_some() {
            let result = self.continue_reset().await;
            self.log("continuing the context reset", result);
        }
    }

    async fn step_counts_cancel(&self) -> bool {
        let Ok(task) = self.inner.store.get_task(&self.task.id).await else { return false };
        let Ok(workflow) = self.inner.store.get_workflow(&task.workflow_id).await else {
            return false;
        };
        workflow.step(&task.step_id).is_some_and(|s| s.cancel_triggers_turn_complete)
    }

    /// Closes the open turn: expires pending permissions (rule 38), notes why, returns to
    /// `WAITING_FOR_INPUT` (rule 5).
    pub async fn finish_turn(
        &mut self,
        stop_reason: &str,
        error: Option<(LastError, String)>,
        note: Option<String>,
    ) -> Result<()> {
        let Some(turn) = self.turn.take() else { return Ok(()) };
        let mut tx = self.inner.store.begin_write().await?;
        tx.close_turn(&turn.id, stop_reason).await?;
        self.expire_permissions(&mut tx, "expired").await?;
        if let Some(text) = note {
            add_message(
                &mut tx,
                &self.session,
                Some(&turn.id),
                MessageKind::Status,
                &text,
                json!({ "reason": stop_reason }),
            )
            .await?;
        }
        let mut update = SessionUpdate {
            state: Some(SessionState::WaitingForInput),
            ..SessionUpdate::default()
        };
        if let Some((last_error, text)) = error {
            add_message(
                &mut tx,
                &self.session,
                Some(&turn.id),
                MessageKind::Error,
                &text,
                json!({ "code": last_error.code }),
            )
            .await?;
            update.last_error = Some(Some(last_error));
        }
        self.write(&mut tx, update).await?;
        let completed = json!({ "session_id": self.session.id.to_string(), "turn_id": turn.id.to_string(), "stop_reason": stop_reason });
        tx.emit(publish::session_topic(&self.session), "session.turn.completed", completed).await?;
        tx.commit().await?;
        Ok(())
    }

    // ------------------------------------------------------------ queue

    async fn enqueue(&mut self, request: &PromptRequest, queued_by: &str) -> Result<QueuedPrompt> {
        let mut tx = self.inner.store.begin_write().await?;
        let queue = tx.list_queue(&self.session.id).await?;
        let cap = self.inner.config.queue_cap;
        if cap > 0 && queue.len() >= cap {
            return Err(EngineError::QueueFull(format!(
                "the queue already holds {cap} messages; wait or remove one"
            )));
        }
        let entry = tx
            .enqueue(
                &self.session.id,
                &request.content,
                request.client_message_id.as_deref(),
                queued_by,
            )
            .await?;
        let queue = tx.list_queue(&self.session.id).await?;
        publish::queue_changed(&mut tx, &self.session, &queue).await?;
        tx.commit().await?;
        Ok(entry)
    }

    async fn change_queue(&mut self, change: QueueChange) -> Result<Vec<QueuedPrompt>> {
        let mut tx = self.inner.store.begin_write().await?;
        let missing = || {
            EngineError::NotFound(
                "that queued message does not exist (it may have run already)".into(),
            )
        };
        match &change {
            QueueChange::Add { content, client_message_id } => {
                drop(tx);
                let request = PromptRequest {
                    content: content.clone(),
                    client_message_id: client_message_id.clone(),
                    queue: true,
                };
                if request.content.trim().is_empty() {
                    return Err(EngineError::Validation("content is required".into()));
                }
                self.enqueue(&request, "user").await?;
                self.drain_queue().await;
                return Ok(self.inner.store.list_queue(&self.session.id).await?);
            }
            QueueChange::Update { id, content } => {
                if !tx.update_queued(&self.session.id, id, content).await? {
                    return Err(missing());
                }
            }
            QueueChange::Remove { id } => {
                if !tx.dequeue(&self.session.id, id).await? {
                    return Err(missing());
                }
            }
            QueueChange::Reorder { ids } => tx
                .reorder_queue(&self.session.id, ids)
                .await
                .map_err(|e| EngineError::Validation(e.to_string()))?,
            QueueChange::Drain => {}
            QueueChange::SetAutoRun(enabled) => {
                self.write(
                    &mut tx,
                    SessionUpdate { auto_run: Some(*enabled), ..SessionUpdate::default() },
                )
                .await?
            }
        }
        let queue = tx.list_queue(&self.session.id).await?;
        publish::queue_changed(&mut tx, &self.session, &queue).await?;
        tx.commit().await?;
        match change {
            QueueChange::Drain => self.take_next_queued().await,
            QueueChange::SetAutoRun(true) => self.drain_queue().await,
            _ => {}
        }
        Ok(self.inner.store.list_queue(&self.session.id).await?)
    }

    /// Starts the next queued prompt if `auto_run` is on and the agent is idle (rule 9).
    pub async fn drain_queue(&mut self) {
        if self.session.auto_run {
            self.take_next_queued().await;
        }
    }

    async fn take_next_queued(&mut self) {
        if self.may_start_turn().is_err() {
            return; // it runs when the operation in progress settles (rule 44)
        }
        let result: Result<()> = async {
            let Some(next) =
                self.inner.store.list_queue(&self.session.id).await?.into_iter().next()
            else {
                return Ok(());
            };
            self.record_and_send(next.content, next.client_message_id, Some(&next.id))
                .await
                .map(|_| ())
        }
        .await;
        self.log("running the next queued message", result);
    }

    // ------------------------------------------------------------ cancel, stop, delete

    async fn cancel(&mut self) -> Result<()> {
        if self.turn.is_none() && matches!(self.exec, Exec::Booting { .. }) {
            // Rule 32: cancel stops exactly this start attempt and sends no prompt; rule 10:
            // what was queued behind it does not start behind the user's back either.
            self.stop_execution(false).await;
            self.turn_auto_run_off_if_queued().await?;
            let note = ("start cancelled".to_owned(), json!({ "reason": "cancelled" }));
            let update = SessionUpdate {
                state: Some(SessionState::WaitingForInput),
                ..SessionUpdate::default()
            };
            return self.commit(update, Some((MessageKind::Status, note.0, note.1))).await;
        }
        let Some(turn) = self.turn.as_mut() else {
            // Nothing runs: reconcile a stale RUNNING (rule 14).
            if self.session.state == SessionState::Running {
                self.commit(
                    SessionUpdate {
                        state: Some(SessionState::WaitingForInput),
                        ..SessionUpdate::default()
                    },
                    None,
                )
                .await?;
            }
            return Ok(());
        };
        let joining = turn.cancelling;
        turn.cancelling = true;
        let (turn_id, epoch) = (turn.id.clone(), turn.epoch);
        // Rule 10, also when the user's cancel joins one in flight (the engine's own, for a
        // context reset: what is queued must not start behind the user's back after it).
        self.turn_auto_run_off_if_queued().await?;
        if joining {
            return Ok(()); // joins the cancel in flight (rule 15)
        }
        let mut tx = self.inner.store.begin_write().await?;
        self.expire_permissions(&mut tx, "cancelled").await?;
        tx.commit().await?;
        if let Exec::Live(live) = &self.exec {
            let (client, acp_session_id) = (live.client.clone(), live.acp_session_id.clone());
            self.spawn(async move {
                if let Err(err) = client.cancel(&acp_session_id).await {
                    tracing::debug!(error = %err, "session/cancel could not be sent");
                }
            });
        }
        self.after(self.inner.config.cancel_timeout, Command::EscalateCancel { epoch, turn_id });
        Ok(())
    }

    /// Rule 10: after a user's cancel, the next queued entry must not start behind the
    /// user's back.
    async fn turn_auto_run_off_if_queued(&mut self) -> Result<()> {
        let queue_waiting = !self.inner.store.list_queue(&self.session.id).await?.is_empty();
        if queue_waiting && self.session.auto_run {
            self.commit(SessionUpdate { auto_run: Some(false), ..SessionUpdate::default() }, None)
                .await?;
        }
        Ok(())
    }

    /// The agent ignored the cancel (rule 13): end the turn here, fence and replace the
    /// execution; the next prompt starts it again.
    async fn on_escalate(&mut self, epoch: i64, turn_id: TurnId) {
        let hung =
            self.turn.as_ref().is_some_and(|t| t.id == turn_id && t.epoch == epoch && t.cancelling);
        if !hung {
            return;
        }
        let internal = self.turn.as_ref().is_some_and(|t| t.internal);
        self.stop_execution(false).await;
        let note = if internal {
            "the agent did not stop in time, so it was restarted"
        } else {
            "turn cancelled (the agent did not stop in time, so it was restarted)"
        };
        let result = self.finish_turn("cancelled", None, Some(note.to_owned())).await;
        self.log("ending a hung turn", result);
        self.after_turn(internal, Some(true)).await;
    }

    async fn stop(&mut self, reply: Reply<()>) {
        let note = self.turn.is_some().then(|| "agent stopped".to_owned());
        let control = match std::mem::replace(&mut self.exec, Exec::Idle) {
            Exec::Live(live) => {
                live.cancel.cancel();
                live.client.close();
                let mut tx = self.inner.store.begin_write().await.ok();
                if let Some(tx) = tx.as_mut() {
                    let _ = tx.end_runtime(&self.session.id, live.epoch, "stopped").await;
                }
                if let Some(tx) = tx {
                    let _ = tx.commit().await;
                }
                Some(live.control)
            }
            Exec::Booting { cancel, .. } => {
                cancel.cancel();
                None
            }
            Exec::Idle => None,
        };
        let result = if self.turn.is_some() {
            self.finish_turn("cancelled", None, note).await
        } else if matches!(self.session.state, SessionState::Starting | SessionState::Running) {
            self.commit(
                SessionUpdate {
                    state: Some(SessionState::WaitingForInput),
                    ..SessionUpdate::default()
                },
                None,
            )
            .await
        } else {
            Ok(())
        };
        // A reset waiting for this execution: without an agent it finishes lazily (rule 21);
        // one already talking to the stopped agent cannot finish and is settled as failed.
        match self.resetting.as_ref().map(|r| r.waiting_for_turn) {
            Some(true) => {
                let settled = self.continue_reset().await;
                self.log("finishing a context reset without the agent", settled);
            }
            Some(false) => {
                self.abandon_live_reset("the agent was stopped during the context reset").await
            }
            None => {}
        }
        match (result, control) {
            (Err(err), _) => {
                let _ = reply.send(Err(err));
            }
            (Ok(()), None) => {
                let _ = reply.send(Ok(()));
            }
            (Ok(()), Some(control)) => {
                let grace = self.inner.config.stop_grace;
                self.spawn(async move {
                    control.stop(grace).await;
                    let _ = reply.send(Ok(()));
                });
            }
        }
    }

    async fn delete(&mut self) -> Result<()> {
        self.stop_execution(true).await;
        self.turn = None;
        for (_, pending) in self.permissions.drain() {
            pending.responder.respond(kandev_acp::Outcome::Cancelled);
        }
        let mut tx = self.inner.store.begin_write().await?;
        let session = tx.delete_session(&self.session.id).await?;
        let payload =
            json!({ "id": session.id.to_string(), "task_id": session.task_id.to_string() });
        tx.emit(publish::session_topic(&session), "session.deleted", payload.clone()).await?;
        tx.emit(publish::workspace_topic(&self.task), "session.deleted", payload).await?;
        if let Ok(task) = tx.get_task(&self.task.id).await {
            tx.emit(
                publish::workspace_topic(&task),
                "task.updated",
                json!({ "task": kandev_api_types::TaskDto::from(&task) }),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    // ------------------------------------------------------------ modes and options

    fn apply(&mut self, change: Applied, reply: Reply<Session>) {
        let Exec::Live(live) = &self.exec else {
            let _ = reply.send(Err(EngineError::Conflict(
                "the agent is not running; send a message to start it first".into(),
            )));
            return;
        };
        let (epoch, client, acp) = (live.epoch, live.client.clone(), live.acp_session_id.clone());
        let inbox = self.sender();
        self.spawn(async move {
            let result = match &change {
                Applied::Mode(mode) => client.set_mode(&acp, mode).await.map(|_| None),
                Applied::Config { id, value } if id == "model" => {
                    match client.set_config_option(&acp, id, value.clone()).await {
                        Err(err) if err.is_method_not_found() => client
                            .set_model(&acp, value.as_str().unwrap_or_default())
                            .await
                            .map(|_| None),
                        other => other,
                    }
                }
                Applied::Config { id, value } => {
                    client.set_config_option(&acp, id, value.clone()).await
                }
            };
            let _ = inbox.send(Command::Applied { epoch, change, result, reply }).await;
        });
    }

    async fn on_applied(
        &mut self,
        epoch: i64,
        change: Applied,
        result: std::result::Result<Option<Vec<ConfigOption>>, AcpError>,
    ) -> Result<Session> {
        if self.live_epoch() != Some(epoch) {
            return Err(EngineError::Conflict(
                "the agent was restarted meanwhile; try again".into(),
            ));
        }
        let options =
            result.map_err(|e| EngineError::Conflict(format!("the agent refused: {e}")))?;
        let mut update = SessionUpdate::default();
        let action = match &change {
            Applied::Mode(mode) => {
                update.session_mode = Some(Some(mode.clone()));
                "session.mode_changed"
            }
            Applied::Config { id, value } => {
                let mut current: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(&self.session.config_options).unwrap_or_default();
                match options {
                    Some(list) => current.extend(list.into_iter().map(|o| (o.id, o.current_value))),
                    None => {
                        current.insert(id.clone(), value.clone());
                    }
                }
                update.config_options = Some(serde_json::Value::Object(current).to_string());
                if id == "model" {
                    update.model = Some(value.as_str().map(str::to_owned));
                }
                "session.config_changed"
            }
        };
        let mut tx = self.inner.store.begin_write().await?;
        self.write(&mut tx, update).await?;
        tx.emit(
            publish::session_topic(&self.session),
            action,
            json!({ "session": kandev_api_types::SessionDto::from(&self.session) }),
        )
        .await?;
        tx.commit().await?;
        Ok(self.session.clone())
    }
}

/// The last `n` lines of a text.
pub(crate) fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
